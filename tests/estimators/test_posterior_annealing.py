"""Per-example annealing over a generative model's latents (HAIS eqs. 27–29) against exact log-likelihoods."""

import math
from functools import partial

import pytest
import torch
from factories import random_bilinear_parameters, random_linear_generative
from torch.distributions import Normal

import pfzoo.estimators.posterior_annealing as module
from pfzoo.estimators import AIS, HAIS, BoundKind
from pfzoo.estimators.posterior_annealing import posterior_annealing_log_likelihood
from pfzoo.kernels import HMCKernel
from pfzoo.models import BilinearGenerative, LinearGenerative


random_model = partial(random_linear_generative, 6, 4, scale=0.5)  # Φ [6, 4] ~ N(0, 0.5²), σ_n = 0.3; call with the prior


def test_linear_gaussian_estimate_matches_the_exact_log_likelihood_within_its_stderr():
    model = random_model("gaussian")
    data = model.sample(30, generator=torch.Generator().manual_seed(1))
    estimate = HAIS(num_chains=100, num_steps=1000, step_size=0.1).log_likelihood(model, data, generator=torch.Generator().manual_seed(2))
    exact = model.log_prob(data)
    assert estimate.kind is BoundKind.LIKELIHOOD_LOWER_BOUND and estimate.partition is None
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


# Φ [6, 3], Θ [3, 2], Ψ [3, 2], all N(0, 1)
_bilinear_weights = partial(random_bilinear_parameters, num_visible=6, num_components=3, num_content=2, num_style=2, style_scale=1.0)


def _zero_signal_bilinear(zero):
    weights = list(_bilinear_weights())
    weights[zero] = torch.zeros_like(weights[zero])
    return BilinearGenerative.from_tensors(*weights, noise_std=0.3)


ZERO_SIGNAL_MODELS = {  # p(x) = N(0, 0.3² I) exactly; rows of the table below
    "linear-gaussian-zero-basis": lambda: LinearGenerative.from_tensors(torch.zeros(6, 4, dtype=torch.float64), prior="gaussian", noise_std=0.3),
    "linear-laplace-zero-basis": lambda: LinearGenerative.from_tensors(torch.zeros(6, 4, dtype=torch.float64), prior="laplace", noise_std=0.3),
    "bilinear-zero-basis": lambda: _zero_signal_bilinear(0),  # Φ = 0
    "bilinear-zero-content-weight": lambda: _zero_signal_bilinear(1),  # Θ = 0, so a = (Θc) ⊙ (Ψd) = 0
}


@pytest.mark.parametrize("name", list(ZERO_SIGNAL_MODELS))
def test_zero_basis_reduces_to_the_noise_model_exactly(name):
    """With Φ = 0 (HAIS eq. 41; for the bilinear model also Θ = 0), p(x) = N(0, σ² I) whatever the prior, and every
    particle's weight is exact. The kernel reflects at the model's latent bounds (the bilinear style latents d ≥ 0)."""
    model = ZERO_SIGNAL_MODELS[name]()
    data = torch.randn(10, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    exact = Normal(0.0, 0.3).log_prob(data).sum(-1)
    estimate = HAIS(num_chains=10, num_steps=50, lower=model.latent_lower).log_likelihood(model, data, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(estimate.per_example, exact)
    # plain AIS builds its default HMC kernel with lower=model.latent_lower itself
    default_kernel = AIS(num_chains=10, num_steps=50).log_likelihood(model, data, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(default_kernel.per_example, exact)


def _importance_sampling_from_the_prior(weights, data, num_samples, *, noise_std, generator):
    """Brute-force ``log p(x_n) ≈ log mean_s N(x_n; Φa_s, σ²I)``, ``a_s = (Θc_s) ⊙ (Ψd_s)`` with ``c_s, d_s`` drawn
    from the prior by inverse CDFs, written independently of the model's code → (log p̂ [B], stderr [B], ESS [B])."""
    basis, content_weight, style_weight = weights
    uniform = torch.rand(num_samples, content_weight.shape[1], generator=generator, dtype=torch.float64) - 0.5
    content = -torch.sign(uniform) * torch.log1p(-2 * uniform.abs())  # Laplace(0, 1)
    style = -torch.log1p(-torch.rand(num_samples, style_weight.shape[1], generator=generator, dtype=torch.float64))  # Exp(1)
    means = ((content @ content_weight.T) * (style @ style_weight.T)) @ basis.T
    log_p, stderr, ess = [], [], []
    for row in data:
        log_w = -(means - row).square().sum(-1) / (2 * noise_std**2) - 0.5 * data.shape[1] * math.log(2 * math.pi * noise_std**2)
        shift = log_w.max()
        w = torch.exp(log_w - shift)
        log_p.append(shift + w.mean().log())
        stderr.append(w.std() / w.mean() / math.sqrt(num_samples))
        ess.append(w.sum().square() / w.square().sum())
    return torch.stack(log_p), torch.stack(stderr), torch.stack(ess)


@pytest.mark.slow
def test_bilinear_hais_agrees_with_brute_force_importance_sampling():
    """A small bilinear model (M=4, K=3, Lc=2, Ld=2, σ=0.3): HAIS with a reflecting kernel against importance sampling
    from the prior with 10⁶ samples (ESS ≥ 2000 per example), within their combined standard errors.

    Measured on this seed: per-example z-scores (HAIS − IS) / se in [−0.6, 1.2], the mean 0.75 se above IS (HAIS
    −3.557 ± 0.028, IS −3.578 ± 0.006); over 20 HAIS seeds at K = 2000 the
    100 per-example z-scores had mean −0.02, standard deviation 0.93 and max |z| 2.7 (the stderrs are honest).
    """
    weights = _bilinear_weights(seed=0, num_visible=4)
    weights = (0.5 * weights[0], weights[1], 0.5 * weights[2])
    model = BilinearGenerative.from_tensors(*weights, noise_std=0.3)
    data = model.sample(5, generator=torch.Generator().manual_seed(1))
    reference, reference_stderr, ess = _importance_sampling_from_the_prior(weights, data, 10**6, noise_std=0.3, generator=torch.Generator().manual_seed(2))
    assert (ess > 2000).all()
    estimate = HAIS(num_chains=200, num_steps=3000, step_size=0.1, lower=model.latent_lower).log_likelihood(
        model, data, generator=torch.Generator().manual_seed(3)
    )
    stderr = estimate.info["per_example_stderr"]
    combined = torch.sqrt(stderr.square() + reference_stderr.square())
    assert ((estimate.per_example - reference).abs() < 4 * combined).all(), (estimate.per_example - reference, combined)
    mean_combined = math.sqrt(estimate.stderr**2 + reference_stderr.square().sum().item() / data.shape[0] ** 2)
    assert abs(estimate.mean - reference.mean().item()) < 3 * mean_combined
    assert estimate.stderr < 0.05


def test_hais_reflects_at_the_models_bounds_and_refuses_other_bounds():
    model = BilinearGenerative.from_tensors(*_bilinear_weights(), noise_std=0.3)
    data = model.sample(3, generator=torch.Generator().manual_seed(4))
    automatic = HAIS(num_chains=4, num_steps=10).log_likelihood(model, data, generator=torch.Generator().manual_seed(5))
    explicit = HAIS(num_chains=4, num_steps=10, lower=model.latent_lower).log_likelihood(model, data, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(automatic.per_example, explicit.per_example)
    with pytest.raises(ValueError, match="lower"):  # a scalar bound would also reflect the unbounded content latents
        HAIS(num_chains=4, num_steps=10, lower=0.0).log_likelihood(model, data, generator=torch.Generator().manual_seed(5))


@pytest.mark.slow
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
    betas = torch.linspace(0, 1, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="lower"):
        posterior_annealing_log_likelihood(bounded, data, num_particles=2, betas=betas, kernel=HMCKernel(0.1))
    with pytest.raises(ValueError, match="lower"):  # reflecting latents whose prior is unbounded is refused too
        posterior_annealing_log_likelihood(model, data, num_particles=2, betas=betas, kernel=HMCKernel(0.1, lower=0.0))


def test_stiffness_keeps_hais_tight_when_the_posterior_is_much_narrower_than_the_prior():
    """σ_n = 0.2: the posterior is up to λ_max(ΦᵀΦ)/σ_n² ≈ 200 times stiffer than the prior. A leapfrog step sized for the
    prior (ε = 1) is rejected near β = 1 and the bound falls well short; scaled by the model's stiffness it is tight."""
    basis = torch.randn(6, 4, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    model = LinearGenerative.from_tensors(basis, prior="gaussian", noise_std=0.2)
    data = model.sample(20, generator=torch.Generator().manual_seed(9))
    exact = model.log_prob(data).mean().item()
    settings = dict(num_chains=20, num_steps=500, step_size=1.0, schedule="geometric")
    fixed = HAIS(**settings).log_likelihood(model, data, generator=torch.Generator().manual_seed(10))
    scaled = HAIS(**settings, stiffness=model.likelihood_stiffness()).log_likelihood(model, data, generator=torch.Generator().manual_seed(10))
    assert abs(scaled.mean - exact) < 3 * scaled.stderr + 0.05, (scaled.mean, scaled.stderr, exact)
    assert fixed.mean < exact - 1.0, (fixed.mean, exact)
