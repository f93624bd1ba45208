"""Per-example annealing over a generative model's latents (HAIS eqs. 27–29) against exact log-likelihoods."""

import pytest
import torch
from torch.distributions import Normal

import pfzoo.estimators.posterior_annealing as module
from pfzoo.estimators import AIS, HAIS, BoundKind
from pfzoo.estimators.posterior_annealing import posterior_annealing_log_likelihood
from pfzoo.kernels import HMCKernel
from pfzoo.models import LinearGenerative


def random_model(prior, seed=0, num_visible=6, num_latent=4):
    g = torch.Generator().manual_seed(seed)
    return LinearGenerative.from_tensors(0.5 * torch.randn(num_visible, num_latent, generator=g, dtype=torch.float64), prior=prior, noise_std=0.3)


def test_linear_gaussian_estimate_matches_the_exact_log_likelihood_within_its_stderr():
    model = random_model("gaussian")
    data = model.sample(30, generator=torch.Generator().manual_seed(1))
    estimate = HAIS(num_chains=100, num_steps=1000, step_size=0.1).log_likelihood(model, data, generator=torch.Generator().manual_seed(2))
    exact = model.log_prob(data)
    assert estimate.kind is BoundKind.LIKELIHOOD_LOWER_BOUND and estimate.log_z is None
    assert estimate.per_example.shape == (30,)
    assert abs(estimate.mean - exact.mean().item()) < 3 * estimate.stderr + 1e-3, (estimate.mean, estimate.stderr, exact.mean().item())
    assert estimate.mean <= exact.mean().item() + 3 * estimate.stderr  # never above the exact value beyond noise
    assert estimate.stderr < 0.05
    per_example_stderr = estimate.info["per_example_stderr"]
    assert ((estimate.per_example - exact).abs() < 4 * per_example_stderr + 1e-3).all()


def test_short_anneals_are_conservative_lower_bounds():
    """With few distributions the bias is downward (a stochastic lower bound), as the estimator's kind says."""
    model = random_model("gaussian", seed=3)
    data = model.sample(40, generator=torch.Generator().manual_seed(4))
    estimate = HAIS(num_chains=5, num_steps=10, step_size=0.1).log_likelihood(model, data, generator=torch.Generator().manual_seed(5))
    assert estimate.mean < model.log_prob(data).mean().item() - 0.1


@pytest.mark.parametrize("prior", ["gaussian", "laplace"])
def test_zero_basis_reduces_to_the_noise_model_exactly(prior):
    """With Φ = 0 (HAIS eq. 41), p(x) = N(0, σ² I) whatever the prior, and every particle's weight is exact."""
    model = LinearGenerative.from_tensors(torch.zeros(6, 4, dtype=torch.float64), prior=prior, noise_std=0.3)
    data = torch.randn(10, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    estimate = HAIS(num_chains=10, num_steps=50).log_likelihood(model, data, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(estimate.per_example, Normal(0.0, 0.3).log_prob(data).sum(-1))


def test_laplace_prior_estimate_converges_as_the_anneal_lengthens():
    model = random_model("laplace", seed=8)
    data = model.sample(20, generator=torch.Generator().manual_seed(9))
    short = HAIS(num_chains=50, num_steps=100, step_size=0.1).log_likelihood(model, data, generator=torch.Generator().manual_seed(10))
    long = HAIS(num_chains=50, num_steps=3000, step_size=0.1).log_likelihood(model, data, generator=torch.Generator().manual_seed(11))
    longer = HAIS(num_chains=50, num_steps=6000, step_size=0.1).log_likelihood(model, data, generator=torch.Generator().manual_seed(12))
    assert short.mean < long.mean  # lower bounds tighten
    assert abs(long.mean - longer.mean) < 3 * (long.stderr + longer.stderr) + 0.01


def test_chunks_and_seeds():
    model = random_model("laplace", seed=13)
    data = model.sample(12, generator=torch.Generator().manual_seed(14))
    estimator = HAIS(num_chains=8, num_steps=30, step_size=0.1)
    first = estimator.log_likelihood(model, data, generator=torch.Generator().manual_seed(15))
    again = estimator.log_likelihood(model, data, generator=torch.Generator().manual_seed(15))
    torch.testing.assert_close(first.per_example, again.per_example)
    original = module.ROWS_PER_CHUNK
    module.ROWS_PER_CHUNK = 8 * 5  # 5 examples per chunk: 3 chunks
    try:
        calls = []
        chunked = estimator.log_likelihood(model, data, generator=torch.Generator().manual_seed(15), progress=lambda d, t: calls.append((d, t)))
    finally:
        module.ROWS_PER_CHUNK = original
    assert chunked.per_example.shape == (12,) and calls[-1] == (3 * 30, 3 * 30)
    assert all(b >= a for (a, _), (b, _) in zip(calls, calls[1:]))


def test_plain_ais_uses_a_default_hmc_kernel_and_bounded_latents_need_a_reflecting_kernel():
    model = random_model("gaussian", seed=16)
    data = model.sample(5, generator=torch.Generator().manual_seed(17))
    estimate = AIS(num_chains=20, num_steps=200).log_likelihood(model, data, generator=torch.Generator().manual_seed(18))
    assert abs(estimate.mean - model.log_prob(data).mean().item()) < 3 * estimate.stderr + 0.05
    class PositiveLatents(LinearGenerative):
        @property
        def latent_lower(self):
            return 0.0

    bounded = PositiveLatents.from_tensors(torch.zeros(6, 4, dtype=torch.float64), prior="gaussian")
    with pytest.raises(ValueError, match="lower"):
        posterior_annealing_log_likelihood(bounded, data, num_particles=2, betas=torch.linspace(0, 1, 3, dtype=torch.float64), kernel=HMCKernel(0.1))
