"""Gaussian: energy, log Z, exact sampler and maximum-likelihood fit against closed forms."""

import math

import numpy as np
import pytest
import torch
from factories import random_gaussian_parameters
from scipy import stats

from pfzoo.models import Gaussian

NUM_SAMPLES = 20000
Z_TOLERANCE = 5.0  # standard errors; a correct sampler fails a single comparison with probability ~6e-7


def test_energy_formula_and_parameter_round_trip():
    precision, mean = random_gaussian_parameters(3)
    model = Gaussian.from_tensors(precision, mean)
    assert torch.allclose(model.precision, precision, rtol=1e-12, atol=1e-12)
    assert torch.allclose(model.covariance @ precision, torch.eye(3, dtype=torch.float64), atol=1e-10)
    x = torch.tensor([[0.3, -1.2, 2.0], [0.0, 0.5, -0.7]], dtype=torch.float64)
    for row, energy in zip(x, model.energy(x)):
        d = row - mean
        expected = 0.5 * sum(d[i] * precision[i, j] * d[j] for i in range(3) for j in range(3))
        assert energy.item() == pytest.approx(expected.item(), abs=1e-12)
    assert torch.allclose(model.energy_grad(x), (x - mean) @ precision, atol=1e-12)


def test_default_construction_is_standard_normal():
    model = Gaussian(3)
    assert torch.equal(model.mean, torch.zeros(3)) and torch.equal(model.precision, torch.eye(3))
    assert model.config() == {"num_visible": 3}


def test_log_partition_equals_integral_on_a_2d_grid():
    precision, mean = random_gaussian_parameters(2, seed=1)
    model = Gaussian.from_tensors(precision, mean)
    half_width = 12 * model.covariance.diagonal().sqrt().max().item()
    step = half_width / 300
    axis = torch.arange(-half_width, half_width + step / 2, step, dtype=torch.float64)
    grid = torch.cartesian_prod(axis, axis) + mean
    log_integral = torch.logsumexp(-model.energy(grid), 0) + 2 * math.log(step)
    expected = math.log(2 * math.pi) - 0.5 * math.log(torch.linalg.det(precision).item())
    assert model.log_partition().item() == pytest.approx(expected, abs=1e-12)
    assert model.log_partition().item() == pytest.approx(log_integral.item(), abs=1e-10)


def test_log_prob_equals_scipy_density():
    precision, mean = random_gaussian_parameters(4, seed=2)
    model = Gaussian.from_tensors(precision, mean)
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    expected = stats.multivariate_normal(mean.numpy(), torch.linalg.inv(precision).numpy()).logpdf(x.numpy())
    assert np.allclose(model.log_prob(x).detach().numpy(), expected, rtol=0, atol=1e-10)


def test_sample_moments_match_mean_and_covariance():
    precision, mean = random_gaussian_parameters(3, seed=4)
    model = Gaussian.from_tensors(precision, mean)
    samples = model.sample(NUM_SAMPLES, generator=torch.Generator().manual_seed(5))
    assert samples.shape == (NUM_SAMPLES, 3) and samples.dtype == torch.float64
    covariance = torch.linalg.inv(precision)
    variance = covariance.diagonal()
    assert ((samples.mean(0) - mean).abs() <= Z_TOLERANCE * (variance / NUM_SAMPLES).sqrt()).all()
    centered = samples - mean
    sample_covariance = centered.T @ centered / NUM_SAMPLES
    # Var(x_i x_j) = Σ_ii Σ_jj + Σ_ij² for a zero-mean Gaussian.
    stderr = ((variance[:, None] * variance[None, :] + covariance.square()) / NUM_SAMPLES).sqrt()
    assert ((sample_covariance - covariance).abs() <= Z_TOLERANCE * stderr).all()


def test_same_seed_same_samples():
    model = Gaussian.from_tensors(*random_gaussian_parameters(3))
    a = model.sample(5, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, model.sample(5, generator=torch.Generator().manual_seed(7)))


def test_fit_is_the_regularised_maximum_likelihood_estimate():
    g = torch.Generator().manual_seed(6)
    data = torch.randn(200, 3, generator=g, dtype=torch.float32) @ torch.randn(3, 3, generator=g) + 2.0
    model = Gaussian.fit(data, regularization=1e-3)
    assert model.dtype == torch.float32
    expected_covariance = np.cov(data.double().numpy(), rowvar=False, bias=True) + 1e-3 * np.eye(3)
    assert np.allclose(model.mean.detach().numpy(), data.double().mean(0).numpy(), atol=1e-6)
    assert np.allclose(model.covariance.detach().double().numpy(), expected_covariance, rtol=1e-4, atol=1e-6)


def test_log_partition_is_differentiable():
    model = Gaussian.from_tensors(*random_gaussian_parameters(3))
    model.log_partition().backward()
    # log Z = const − Σ_i raw_ii: the gradient is −I on the diagonal and 0 elsewhere.
    assert torch.equal(model.precision_log_cholesky.grad, -torch.eye(3, dtype=torch.float64))


@pytest.mark.parametrize(
    "precision, mean, message",
    [
        (torch.ones(2, 3), None, "square"),
        (torch.ones(4), None, "square"),
        (torch.tensor([[2.0, 1.0], [0.0, 2.0]]), None, "symmetric"),
        (torch.tensor([[1.0, 2.0], [2.0, 1.0]]), None, "positive definite"),
        (torch.zeros(2, 2), None, "positive definite"),
        (torch.tensor([[1.0, float("nan")], [float("nan"), 1.0]]), None, "precision contains NaN"),
        (torch.eye(2), torch.zeros(3), "mean must have shape"),
        (torch.eye(2), torch.tensor([0.0, float("inf")]), "mean contains"),
        (torch.eye(2, dtype=torch.long), None, "floating"),
    ],
)
def test_from_tensors_rejects_bad_parameters(precision, mean, message):
    with pytest.raises(ValueError, match=message):
        Gaussian.from_tensors(precision, mean)


def test_bad_arguments_raise_value_error():
    with pytest.raises(ValueError, match="num_visible"):
        Gaussian(0)
    with pytest.raises(ValueError, match="num_samples"):
        Gaussian(2).sample(0)
    with pytest.raises(ValueError, match="generator"):
        Gaussian(2).sample(3, generator=7)
    with pytest.raises(ValueError, match="at least one row"):
        Gaussian.fit(torch.zeros(0, 3))
    with pytest.raises(ValueError, match="regularization"):
        Gaussian.fit(torch.zeros(4, 3), regularization=-1.0)
    with pytest.raises(ValueError, match="singular"):
        Gaussian.fit(torch.ones(4, 3), regularization=0.0)
    with pytest.raises(ValueError, match="^data "):
        Gaussian.fit(torch.tensor([[0.0, float("nan")]]))
