"""Geweke's joint-distribution test (Geweke 2004) of EM-HMC's E-step sampler over the latents of a linear generative
model with a Laplace prior (issue 49, item 6).

Marginal-conditional simulator: ``z ~ p(z)``, ``x ~ p(x | z)``, independent draws of the joint ``p(z, x)``.
Successive-conditional simulator: from a marginal-conditional draw, repeat {``z ← T_x(z)`` (one E-step, exactly as
:meth:`EMHMC.prepare` runs it), ``x ~ p(x | z)``}. ``T_x`` leaves ``p(z | x)`` invariant iff every iterate is again a draw
of ``p(z, x)``; a kernel that does not drifts the joint away, so the two simulators' moments differ. The successive
chains run as a batch of independent chains started at exact draws, so their final states are independent draws and
the comparison is a two-sample z-test per statistic with no autocorrelation correction (Geweke's spectral variance is
for one long chain). Statistics: the first two moments of the joint, ``z_l``, ``x_m``, ``z_l²``, ``x_m²``, ``z_l x_m``,
``z_1 z_2``. The false-failure rate is stated, ``ALPHA`` for the whole test (Bonferroni over the statistics: each
|z| must stay below Φ⁻¹(1 − ALPHA / 2k)); the sample size, 50 000 chains × 20 iterations, is where both broken
kernels below exceed twice that threshold (at 20 000 × 10 neither did). Measured at seed 0: the correct sampler's
largest |z| 2.4 (1.3-2.1 at seeds 1-5) against a threshold of 4.0 for 17 statistics; a wrong-sign momentum kick 11.0,
no Metropolis correction 21.4.
"""

import pytest
import torch
from scipy import stats

import pfzoo.kernels.hmc as hmc
from pfzoo.hamiltonian import leapfrog
from pfzoo.models import LinearGenerative
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


def threshold(num_statistics):
    return stats.norm.isf(ALPHA / (2 * num_statistics))


def test_the_e_step_sampler_passes_gewekes_test():
    scores, adaptation = geweke_z_scores(0)
    assert scores.abs().max() < threshold(scores.numel()), scores
    assert all(0.5 < acceptance < 1.0 for acceptance, _ in adaptation)  # the test exercises rejections


def wrong_sign_leapfrog(position, momentum, current, evaluate, *, step_size, num_steps=1, lower=None):
    """The leapfrog with its last half kick of the wrong sign (no longer reversible: the Metropolis test cannot fix it)."""
    x, p, evaluation = leapfrog(position, momentum, current, evaluate, step_size=step_size, num_steps=num_steps, lower=lower)
    return x, p + step_size * evaluation.grad, evaluation


def always_accept(start, end):
    """No Metropolis correction: unadjusted Hamiltonian dynamics, biased by the leapfrog's energy error."""
    return torch.ones_like(start)


@pytest.mark.parametrize("broken", [("leapfrog", wrong_sign_leapfrog), ("acceptance", always_accept)], ids=["sign", "unadjusted"])
def test_gewekes_test_catches_a_broken_e_step(broken, monkeypatch):
    monkeypatch.setattr(hmc, *broken)
    scores, _ = geweke_z_scores(0)
    assert scores.abs().max() > 2 * threshold(scores.numel()), scores
