"""MALA and unadjusted Langevin (issue 49, item 5): MALA against exact draws (moments of a correlated Gaussian, a
Kolmogorov–Smirnov test on a skewed one-dimensional target), detailed balance from exact draws, ULA's known O(ε²) bias,
step sizes adapted between calls, and MALA inside AIS on a continuous path against the closed-form log Z."""

import math

import pytest
import torch
from factories import random_gaussian
from scipy import stats
from test_hmc import COVARIANCE, FunctionTarget, assert_moments_match, exact_gaussian_samples, gaussian_evaluate

from pfzoo.estimators import AIS
from pfzoo.kernels import Evaluation, LangevinKernel, adaptive_chain, run_chain

P_VALUE_FLOOR = 1e-4  # fixed seeds; a correct kernel fails with probability 1e-4 per check
SHAPE = 3.0  # log-Gamma target: x = log g with g ~ Gamma(3), E(x) = −3x + eˣ, skewed to the left


def log_gamma_evaluate(x):
    return Evaluation((-SHAPE * x + torch.exp(x)).sum(-1), -SHAPE + torch.exp(x), None)


def log_gamma_draws(n, generator):
    """``[n, 1]`` exact draws of the log-Gamma target (SciPy's, seeded from ``generator``)."""
    seed = int(torch.randint(0, 2**31, (1,), generator=generator))
    return torch.from_numpy(stats.loggamma.rvs(SHAPE, size=(n, 1), random_state=seed))


def test_mala_leaves_a_correlated_gaussian_invariant():
    g = torch.Generator().manual_seed(0)
    target = FunctionTarget(gaussian_evaluate)
    state, info = run_chain(LangevinKernel(0.5), target, exact_gaussian_samples(20000, g), 40, generator=g)
    assert 0.3 < info.accept_prob.mean().item() < 1.0
    assert_moments_match(state.position, torch.zeros(2, dtype=torch.float64), COVARIANCE)


@pytest.mark.parametrize("start", ["exact", "far"])
def test_mala_samples_a_skewed_target_by_ks(start):
    """From exact draws (invariance) and from a start far in the tail (convergence); an unadjusted chain at the same step
    fails the same test (it has power)."""
    g = torch.Generator().manual_seed(1)
    target = FunctionTarget(log_gamma_evaluate)
    begin = log_gamma_draws(20000, g) if start == "exact" else torch.full((20000, 1), -2.0, dtype=torch.float64)
    reference = log_gamma_draws(20000, g).flatten().numpy()
    mala = run_chain(LangevinKernel(0.8), target, begin, 200, generator=g)[0].position
    assert stats.ks_2samp(mala.flatten().numpy(), reference).pvalue > P_VALUE_FLOOR
    ula = run_chain(LangevinKernel(0.8, adjusted=False), target, begin, 200, generator=g)[0].position
    assert stats.ks_2samp(ula.flatten().numpy(), reference).pvalue < 1e-8


def test_mala_satisfies_detailed_balance():
    """From exact draws ``x ~ p`` one step gives pairs ``(x, x')`` that are exchangeable: binned into 8 equiprobable cells,
    ``n(a→b)`` given ``n(a→b) + n(b→a)`` is Binomial(·, ½) for every pair of cells (χ²); a ULA step breaks it."""
    g = torch.Generator().manual_seed(2)
    target = FunctionTarget(log_gamma_evaluate)
    edges = torch.tensor(stats.loggamma.ppf(torch.linspace(0, 1, 9)[1:-1].numpy(), SHAPE), dtype=torch.float64)

    def p_value(kernel):
        before = log_gamma_draws(200_000, g)
        after = kernel.step(kernel.init(before, target), target, generator=g)[0].position
        cells = torch.bucketize(before.flatten(), edges) * 8 + torch.bucketize(after.flatten(), edges)
        pairs = torch.bincount(cells, minlength=64).view(8, 8).double()
        forward, backward = pairs.triu(1), pairs.tril(-1).T
        moved = (forward + backward) > 0
        statistic = ((forward - backward)[moved] ** 2 / (forward + backward)[moved]).sum().item()
        return stats.chi2.sf(statistic, int(moved.sum())), int(moved.sum())

    p_mala, joined = p_value(LangevinKernel(1.2))
    assert joined >= 10 and p_mala > P_VALUE_FLOOR
    assert p_value(LangevinKernel(1.2, adjusted=False))[0] < 1e-8


def test_unadjusted_langevin_has_its_closed_form_stationary_variance():
    """ULA on ``E = x²/2σ²`` is an AR(1) chain ``x' = (1 − τ/σ²) x + √(2τ) ξ``: its variance ``2τ / (1 − (1 − τ/σ²)²)``."""
    sigma, step = 1.5, 0.9
    tau = step**2 / 2
    target = FunctionTarget(lambda x: Evaluation((x**2).sum(-1) / (2 * sigma**2), x / sigma**2, None))
    g = torch.Generator().manual_seed(3)
    state, info = run_chain(LangevinKernel(step, adjusted=False), target, torch.zeros(40000, 1, dtype=torch.float64), 100, generator=g)
    assert info.accept_prob is None
    expected = 2 * tau / (1 - (1 - tau / sigma**2) ** 2)
    # the sample variance of n normal draws has sd σ²√(2/n)
    assert abs(state.position.var().item() - expected) < 5 * expected * math.sqrt(2 / 40000)
    assert abs(expected - sigma**2) > 10 * expected * math.sqrt(2 / 40000)  # the bias is visible at this size


def test_step_size_adapts_between_calls_and_bad_settings_are_refused():
    g = torch.Generator().manual_seed(4)
    target = FunctionTarget(gaussian_evaluate)
    kernel = LangevinKernel(5.0)
    state = kernel.init(exact_gaussian_samples(2000, g), target)
    adapted = adaptive_chain(kernel, target, state, 300, step_size=torch.tensor(5.0, dtype=torch.float64), target_acceptance=0.57, generator=g)
    assert adapted.step_size.item() < 2.0
    again = adaptive_chain(kernel, target, adapted.state, 100, step_size=adapted.step_size, target_acceptance=None, generator=g)
    assert 0.45 < again.acceptance.item() < 0.7
    with pytest.raises(ValueError, match="step_size must be"):
        LangevinKernel(0.0)
    with pytest.raises(ValueError, match="adjusted must be"):
        LangevinKernel(0.1, adjusted="yes")


def test_mala_anneals_a_gaussian_in_ais_to_its_closed_form_log_z():
    model = random_gaussian(5, seed=0)
    estimate = AIS(num_chains=200, num_steps=300, kernel=LangevinKernel(0.4))(model, generator=torch.Generator().manual_seed(0))
    exact = model.log_partition().item()
    assert abs(estimate.log_z - exact) < max(3 * estimate.stderr, 0.02), (estimate.log_z, exact, estimate.stderr)
    assert 0.3 < min(estimate.info["acceptance"]) <= 1.0
