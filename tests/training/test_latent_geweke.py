"""Geweke's joint-distribution test (Geweke 2004) of two latent-variable kernels over the latents of a linear generative
model with a Laplace prior (issue 49, item 6): EM-HMC's E-step sampler and HAIS's transition (one leapfrog step,
partial momentum refresh, momentum flips on rejection) at an intermediate β.

Marginal-conditional simulator: ``z ~ p(z)``, ``x ~ p(x | z)``, independent draws of the joint ``p(z, x)``.
Successive-conditional simulator: from a marginal-conditional draw, repeat {``z ← T_x(z)``, ``x ~ p(x | z)``}. ``T_x``
leaves ``p(z | x)`` invariant iff every iterate is again a draw of ``p(z, x)``; a kernel that does not drifts the joint
away, so the two simulators' moments differ. The successive chains run as a batch of independent chains started at
exact draws, so their final states are independent draws and the comparison is a two-sample z-test per statistic with
no autocorrelation correction (Geweke's spectral variance is for one long chain). Statistics: the first two moments of
the joint, ``z_l``, ``x_m``, ``z_l²``, ``x_m²``, ``z_l x_m``, ``z_1 z_2`` (and for HAIS's kernel, whose momenta persist,
``p_l``, ``p_l²``, ``z_l p_l`` of the joint with ``p ~ N(0, I)``). The false-failure rate is stated, ``ALPHA`` for each
test (Bonferroni over its k statistics: each |z| must stay below Φ⁻¹(1 − ALPHA / 2k)); the sample sizes are where both
broken kernels below exceed twice that threshold.

EM-HMC (``T_x`` = one E-step, exactly as :meth:`EMHMC.prepare` runs it): 50 000 chains × 20 iterations (at 20 000 × 10
neither broken kernel reached twice the threshold). Measured at seed 0: the correct sampler's largest |z| 2.4 (1.3-2.1
at seeds 1-5) against a threshold of 4.0 for 17 statistics; a wrong-sign momentum kick 11.0, no Metropolis correction
21.4.

HAIS's transition at β = ½ (``T_x`` = :class:`HMCKernel` with HAIS's settings on ``E_β(z) = −log p(z) − β log p(x | z)``,
momenta carried between iterations): with a Gaussian likelihood ``p(x | z)^β ∝ N(x; Φz, σ²/β I)``, so the joint at β is
``p(z) N(x; Φz, σ²/β I)`` and x is redrawn from that. 20 000 chains × 20 iterations at ε = 0.6 (acceptance 0.72).
Measured at seed 0: largest |z| 2.3 (2.6-2.7 at seeds 1-3) against a threshold of 4.1 for 23 statistics; a
wrong-sign momentum kick 31.3, no Metropolis correction 33.9 (at ε = 0.3, acceptance 0.95, 50 000 chains, the unadjusted
chain reached only 8.7).
"""

import pytest
import torch
from scipy import stats

import pfzoo.kernels.hmc as hmc
from pfzoo.hamiltonian import leapfrog
from pfzoo.kernels import HMCKernel
from pfzoo.models import LinearGenerative
from pfzoo.paths.posterior import PosteriorEnergyTarget
from pfzoo.sampling import normal
from pfzoo.training import EMHMC

ALPHA = 1e-3  # the probability that a correct sampler fails this test (fixed seeds make it pass or fail for good)
CHAINS, ITERATIONS = 50_000, 20


def model():
    basis = torch.tensor([[1.0, 0.5], [-0.3, 1.2], [0.8, -0.6]], dtype=torch.float64)
    return LinearGenerative.from_tensors(basis, prior="laplace", noise_std=0.5)


def moments(z, x):
    """The test statistics per draw ``[N, S]``: first and second moments of the joint ``(z [N, L], x [N, M])``."""
    cross = (z[:, :, None] * x[:, None, :]).flatten(1)
    return torch.cat([z, x, z**2, x**2, cross, z[:, :1] * z[:, 1:2]], dim=1)


@torch.no_grad()
def geweke_z_scores(seed):
    """``[S]`` z-scores of successive-conditional minus marginal-conditional means."""
    g = torch.Generator().manual_seed(seed)
    truth = model()
    x_marginal, z_marginal = truth.sample_joint(CHAINS, generator=g)
    x, z = truth.sample_joint(CHAINS, generator=g)
    sampler = EMHMC(num_hmc_steps=1, step_size=0.4, num_leapfrog=4, target_acceptance=None, batch_hmc_steps=0)
    sampler.latents, sampler.batch_advanced = z, torch.zeros(CHAINS, dtype=torch.bool)
    for _ in range(ITERATIONS):
        sampler.prepare(truth, x, generator=g)
        x = truth.sample_visible(sampler.latents, generator=g)
    successive, marginal = moments(sampler.latents, x), moments(z_marginal, x_marginal)
    stderr = (successive.var(0) / CHAINS + marginal.var(0) / CHAINS).sqrt()
    return (successive.mean(0) - marginal.mean(0)) / stderr, sampler.adaptation


@torch.no_grad()
def hais_kernel_z_scores(seed, chains=20_000, iterations=20, beta=0.5):
    """``[S]`` z-scores for HAIS's transition at ``beta`` (module docstring) and its mean acceptance probability."""
    g = torch.Generator().manual_seed(seed)
    truth = model()
    basis, scale = truth.basis.detach(), truth.noise_std / beta**0.5

    def draw_visible(z):  # x ~ N(Φz, σ²/β I), the tempered likelihood normalised
        return z @ basis.T + scale * normal((z.shape[0], basis.shape[0]), generator=g, dtype=z.dtype)

    def statistics(z, x, momentum):
        return torch.cat([moments(z, x), momentum, momentum**2, z * momentum], dim=1)

    z_marginal = truth.sample_prior(chains, generator=g)
    marginal = statistics(z_marginal, draw_visible(z_marginal), normal(z_marginal.shape, generator=g, dtype=z_marginal.dtype))
    z = truth.sample_prior(chains, generator=g)
    x, momentum = draw_visible(z), normal(z.shape, generator=g, dtype=z.dtype)
    kernel, acceptance = HMCKernel(0.6), 0.0  # HAIS's: one leapfrog step, γ = 1 − 0.5^ε, standard flips
    for _ in range(iterations):
        target = PosteriorEnergyTarget(truth, x)
        state, info = kernel.step(kernel.init(z, target, momentum=momentum), target, beta=beta, generator=g)
        z, momentum, acceptance = state.position, state.momentum, acceptance + info.accept_prob.mean().item() / iterations
        x = draw_visible(z)
    successive = statistics(z, x, momentum)
    stderr = (successive.var(0) / chains + marginal.var(0) / chains).sqrt()
    return (successive.mean(0) - marginal.mean(0)) / stderr, acceptance


def threshold(num_statistics):
    return stats.norm.isf(ALPHA / (2 * num_statistics))


def test_the_e_step_sampler_passes_gewekes_test():
    scores, adaptation = geweke_z_scores(0)
    assert scores.abs().max() < threshold(scores.numel()), scores
    assert all(0.5 < acceptance < 1.0 for acceptance, _ in adaptation)  # the test exercises rejections


def test_hais_transition_passes_gewekes_test():
    scores, acceptance = hais_kernel_z_scores(0)
    assert scores.abs().max() < threshold(scores.numel()), scores
    assert 0.5 < acceptance < 0.9


def wrong_sign_leapfrog(position, momentum, current, evaluate, *, step_size, num_steps=1, lower=None):
    """The leapfrog with its last half kick of the wrong sign (no longer reversible: the Metropolis test cannot fix it)."""
    x, p, evaluation = leapfrog(position, momentum, current, evaluate, step_size=step_size, num_steps=num_steps, lower=lower)
    return x, p + step_size * evaluation.grad, evaluation


def always_accept(start, end):
    """No Metropolis correction: unadjusted Hamiltonian dynamics, biased by the leapfrog's energy error."""
    return torch.ones_like(start)


@pytest.mark.parametrize("sampler", [geweke_z_scores, hais_kernel_z_scores], ids=["em_hmc", "hais"])
@pytest.mark.parametrize("broken", [("leapfrog", wrong_sign_leapfrog), ("acceptance", always_accept)], ids=["sign", "unadjusted"])
def test_gewekes_test_catches_a_broken_kernel(broken, sampler, monkeypatch):
    monkeypatch.setattr(hmc, *broken)
    scores, _ = sampler(0)
    assert scores.abs().max() > 2 * threshold(scores.numel()), scores
