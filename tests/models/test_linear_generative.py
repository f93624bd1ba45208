"""LinearGenerative: the joint energy, its gradient, priors, ancestral sampling and the closed-form marginal."""

import math

import pytest
import torch
from factories import random_linear_generative
from torch.distributions import Laplace, MultivariateNormal, Normal

from pfzoo import zoo
from pfzoo.models import LinearGenerative
from pfzoo.models.latent import ExponentialPrior, GaussianPrior, LaplacePrior, latent_prior


@pytest.mark.parametrize("prior", ["gaussian", "laplace"])
def test_joint_energy_is_minus_log_prior_times_likelihood(prior):
    model = random_linear_generative(prior=prior)
    g = torch.Generator().manual_seed(1)
    x, z = torch.randn(7, 5, generator=g, dtype=torch.float64), torch.randn(7, 3, generator=g, dtype=torch.float64)
    prior_log = Normal(0.0, 1.0).log_prob(z).sum(-1) if prior == "gaussian" else Laplace(0.0, 1.0).log_prob(z).sum(-1)
    likelihood_log = Normal(z @ model.basis.detach().T, 0.3).log_prob(x).sum(-1)
    torch.testing.assert_close(model.joint_energy(x, z), -(prior_log + likelihood_log))


@pytest.mark.parametrize("prior", [GaussianPrior(), LaplacePrior(), ExponentialPrior()], ids=lambda p: p.name)
def test_prior_gradients_and_samples(prior):
    z = torch.randn(50, 4, dtype=torch.float64).abs() + 0.1
    energy, grad = prior.energy_and_grad(z)
    z.requires_grad_(True)
    (auto,) = torch.autograd.grad(prior.energy_and_grad(z)[0].sum(), z)
    torch.testing.assert_close(grad, auto)
    samples = prior.sample(200000, 2, dtype=torch.float64, device=torch.device("cpu"), generator=torch.Generator().manual_seed(2))
    mean, variance = {"gaussian": (0.0, 1.0), "laplace": (0.0, 2.0), "exponential": (1.0, 1.0)}[prior.name]
    assert abs(samples.mean().item() - mean) < 5 * math.sqrt(variance / samples.numel())
    assert abs(samples.var().item() - variance) < 0.03 * variance
    # normalised: the mean of exp(-E) under a wide uniform proposal integrates to 1 in one dimension
    grid = torch.linspace(-30 if prior.lower is None else prior.lower, 30, 600001, dtype=torch.float64).unsqueeze(1)
    density = torch.exp(-prior.energy_and_grad(grid)[0])
    assert torch.trapezoid(density, grid[:, 0]).item() == pytest.approx(1.0, abs=1e-4)


def test_likelihood_gradient_matches_autograd():
    model = random_linear_generative(prior="laplace")
    g = torch.Generator().manual_seed(3)
    x, z = torch.randn(6, 5, generator=g, dtype=torch.float64), torch.randn(6, 3, generator=g, dtype=torch.float64).requires_grad_(True)
    energy, grad = model.likelihood_energy_and_grad(x, z)
    (auto,) = torch.autograd.grad(energy.sum(), z)
    torch.testing.assert_close(grad, auto)


def test_likelihood_stiffness_is_the_largest_curvature_of_the_likelihood_energy():
    model = random_linear_generative(prior="laplace")
    x = torch.randn(1, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    hessian = torch.autograd.functional.hessian(lambda z: model.likelihood_energy_and_grad(x, z.unsqueeze(0))[0].sum(), torch.zeros(3, dtype=torch.float64))
    assert model.likelihood_stiffness() == pytest.approx(torch.linalg.eigvalsh(hessian).max().item())


def test_gaussian_prior_marginal_is_the_closed_form_and_sampling_matches_it():
    model = random_linear_generative(prior="gaussian")
    covariance = model.basis.detach() @ model.basis.detach().T + 0.09 * torch.eye(5, dtype=torch.float64)
    x = torch.randn(9, 5, dtype=torch.float64)
    torch.testing.assert_close(model.log_prob(x), MultivariateNormal(torch.zeros(5, dtype=torch.float64), covariance).log_prob(x))
    torch.testing.assert_close(model.free_energy(x), -model.log_prob(x))
    samples = model.sample(200000, generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(samples.T @ samples / samples.shape[0], covariance, atol=0.05 * covariance.abs().max().item(), rtol=0)


def test_laplace_prior_has_no_closed_form_marginal_and_says_what_to_use():
    with pytest.raises(NotImplementedError, match="HAIS"):
        random_linear_generative(prior="laplace").log_prob(torch.zeros(1, 5, dtype=torch.float64))
    assert random_linear_generative(prior="laplace").free_energy_cost is None and random_linear_generative(prior="gaussian").free_energy_cost == 0


def test_checkpoint_round_trip(tmp_path):
    model = random_linear_generative(prior="laplace")
    zoo.save(model, tmp_path / "m.pt")
    loaded = zoo.load(tmp_path / "m.pt")
    assert isinstance(loaded, LinearGenerative) and loaded.config() == model.config()
    torch.testing.assert_close(loaded.basis, model.basis)


@pytest.mark.parametrize(
    "kwargs, name",
    [(dict(num_visible=0), "num_visible"), (dict(num_visible=3, num_latent=0), "num_latent"), (dict(num_visible=3, noise_std=0.0), "noise_std"),
     (dict(num_visible=3, prior="cauchy"), "prior"), (dict(num_visible=3, prior="exponential"), "prior")],
)
def test_bad_arguments_name_themselves(kwargs, name):
    with pytest.raises(ValueError, match=name):
        LinearGenerative(**kwargs)


def test_bad_inputs_name_themselves():
    model = random_linear_generative()
    with pytest.raises(ValueError, match="z must have shape"):
        model.joint_energy(torch.zeros(2, 5, dtype=torch.float64), torch.zeros(3, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="x"):
        model.joint_energy(torch.zeros(2, 4, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="basis"):
        LinearGenerative.from_tensors(torch.full((2, 2), float("nan")))
    assert latent_prior("laplace").name == "laplace"
