"""Mean-field inversion (nMF, TAP) against the exact moments of small, weakly coupled Ising models (enumeration)."""

import pytest
import torch
from factories import all_binary_states, random_ising

from pfzoo.models import Ising
from pfzoo.training.mean_field_inversion import fit_mean_field, mean_field_ising


def exact_moments(model: Ising) -> tuple[torch.Tensor, torch.Tensor]:
    """``⟨x⟩ [D]`` and ``cov(x) [D, D]`` of ``model`` by summing over all 2^D states."""
    x = all_binary_states(model.num_units)
    p = torch.softmax(-model.energy(x).detach(), 0)
    mean = p @ x
    return mean, (x * p[:, None]).T @ x - torch.outer(mean, mean)


def coupling_error(fitted: Ising, truth: Ising) -> float:
    """Mean square error of J over the pairs i < j (0/1 units)."""
    upper = torch.triu(torch.ones(truth.num_units, truth.num_units, dtype=torch.bool), 1)
    return float(((fitted.symmetric_coupling - truth.symmetric_coupling).detach()[upper] ** 2).mean())


def test_naive_and_tap_recover_weak_couplings_and_tap_is_closer():
    """On an 8-unit model with couplings N(0, σ²) (0/1 units; biases N(0, 0.5²), so m ≠ 0 and TAP's term matters), both
    recover J from exact moments with a mean square error relative to σ² that shrinks as σ shrinks (nMF's error is
    ``2 K² m_i m_j``, second order in K; TAP's third order), and TAP's is below nMF's. Measured (σ = 0.4, 0.1, 0.025):
    nMF 1.3e-3, 6.2e-5, 6.0e-6; TAP 1.1e-4, 2.4e-7, 6.5e-10."""
    relative = {"naive": [], "tap": []}
    for scale in (0.4, 0.1, 0.025):
        truth = random_ising(8, scale=scale, seed=3)
        mean, covariance = exact_moments(truth)
        for correction in relative:
            fitted = mean_field_ising(mean, covariance, correction=correction)
            relative[correction].append(coupling_error(fitted, truth) / scale**2)
        assert relative["tap"][-1] < 0.5 * relative["naive"][-1]
    for errors in relative.values():
        assert errors[0] > 8 * errors[1] and errors[1] > 8 * errors[2]
    assert relative["naive"][-1] < 2e-5 and relative["tap"][-1] < 1e-7
    # the biases too: the fitted model's means are the data's to second (TAP) order
    truth = random_ising(8, scale=0.1, seed=3)
    mean, covariance = exact_moments(truth)
    assert torch.allclose(exact_moments(mean_field_ising(mean, covariance))[0], mean, atol=1e-4)


def test_fit_mean_field_uses_the_sample_moments():
    """From samples: the same model as from the samples' own mean and (1/N) covariance, in the data's dtype."""
    data = (torch.rand(500, 5, generator=torch.Generator().manual_seed(0)) < 0.4).float()
    fitted = fit_mean_field(data, correction="naive")
    x = data.double()
    expected = mean_field_ising(x.mean(0), torch.cov(x.T, correction=0), correction="naive")
    assert fitted.coupling.dtype == torch.float32
    assert torch.allclose(fitted.symmetric_coupling.double(), expected.symmetric_coupling, atol=1e-5)
    assert torch.allclose(fitted.bias.double(), expected.bias, atol=1e-5)


def test_refusals_name_the_problem():
    constant = torch.zeros(10, 3)
    constant[::2, 1:] = 1
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        fit_mean_field(constant)
    duplicate = torch.tensor([[0.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match="invertible"):
        fit_mean_field(duplicate)
    # strong correlations with large magnetisations: 1 − 8 (C⁻¹)_ij m_i m_j < 0
    mean = torch.tensor([0.9, 0.9], dtype=torch.float64)
    covariance = torch.tensor([[0.09, -0.085], [-0.085, 0.09]], dtype=torch.float64)
    with pytest.raises(ValueError, match="no real root for 1 of 1 pairs"):
        mean_field_ising(mean, covariance, correction="tap")
    with pytest.raises(ValueError, match="correction"):
        mean_field_ising(mean, covariance, correction="bethe")
