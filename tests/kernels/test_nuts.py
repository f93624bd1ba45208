"""NUTS (issue 49, item 5): against exact draws (a Kolmogorov–Smirnov test on a skewed one-dimensional target from exact
and far starts, moments of a correlated Gaussian), detailed balance from exact draws, two deliberately broken versions
(a wrong sign in the leapfrog's last momentum kick, a biased choice of subtree) that the same tests catch, step sizes
adapted between calls, and NUTS inside AIS on a continuous path against the closed-form log Z and over each example's
latents (a per-chain target) against the closed-form log-likelihood."""

import pytest
import torch
from factories import random_gaussian
from scipy import stats
from test_hmc import COVARIANCE, FunctionTarget, assert_moments_match, exact_gaussian_samples, gaussian_evaluate
from test_langevin import SHAPE, log_gamma_draws, log_gamma_evaluate

import pfzoo.kernels.nuts as nuts
from pfzoo.estimators import AIS
from pfzoo.hamiltonian import leapfrog
from pfzoo.kernels import NUTSKernel, adaptive_chain, run_chain
from pfzoo.models import LinearGenerative

P_VALUE_FLOOR = 1e-4  # fixed seeds; a correct kernel fails with probability 1e-4 per check
CHAINS = 5000


def wrong_sign_leapfrog(position, momentum, current, evaluate, *, step_size, num_steps=1):
    """The leapfrog with its last half kick of the wrong sign, ``p + ½ε∇E`` (no longer volume preserving nor reversible)."""
    x, p, evaluation = leapfrog(position, momentum, current, evaluate, step_size=step_size, num_steps=num_steps)
    return x, p + step_size * evaluation.grad, evaluation


def always_move(log_subtree, log_trajectory):
    """A biased selection: always move to the new subtree's candidate (ignores the weights of the old trajectory)."""
    return torch.ones_like(log_subtree)


def skewed_ks_p_value(start, generator, steps=30, step_size=0.8):
    target = FunctionTarget(log_gamma_evaluate)
    begin = log_gamma_draws(CHAINS, generator) if start == "exact" else torch.full((CHAINS, 1), -2.0, dtype=torch.float64)
    reference = log_gamma_draws(4 * CHAINS, generator).flatten().numpy()
    state, info = run_chain(NUTSKernel(step_size, max_depth=5), target, begin, steps, generator=generator)
    return stats.ks_2samp(state.position.flatten().numpy(), reference).pvalue, info


@pytest.mark.parametrize("start", ["exact", "far"])
def test_nuts_samples_a_skewed_target_by_ks(start):
    """From exact draws (invariance) and from a start far in the tail (convergence)."""
    p_value, info = skewed_ks_p_value(start, torch.Generator().manual_seed(1))
    assert p_value > P_VALUE_FLOOR
    assert info.depth.double().mean() > 1.0 and not info.diverged.any()  # trees of more than one doubling are exercised


@pytest.mark.parametrize("broken", [("leapfrog", wrong_sign_leapfrog), ("merge_probability", always_move)], ids=["sign", "selection"])
def test_broken_nuts_fails_the_same_tests(broken, monkeypatch):
    """A wrong sign in the momentum update, or a subtree chosen regardless of its weight, is caught by the KS test."""
    monkeypatch.setattr(nuts, *broken)
    p_value, _ = skewed_ks_p_value("exact", torch.Generator().manual_seed(1))
    assert p_value < 1e-8


def test_nuts_leaves_a_correlated_gaussian_invariant():
    g = torch.Generator().manual_seed(0)
    state, info = run_chain(NUTSKernel(0.5, max_depth=6), FunctionTarget(gaussian_evaluate), exact_gaussian_samples(CHAINS, g), 6, generator=g)
    assert 0.6 < info.accept_prob.mean().item() < 1.0
    assert info.num_leapfrog.double().mean() > 3  # long trajectories along the correlated direction
    assert_moments_match(state.position, torch.zeros(2, dtype=torch.float64), COVARIANCE)


def test_nuts_satisfies_detailed_balance():
    """From exact draws ``x ~ p`` one step gives exchangeable pairs ``(x, x')``: binned into 8 equiprobable cells,
    ``n(a→b)`` given ``n(a→b) + n(b→a)`` is Binomial(·, ½) for every pair of cells (χ²); the broken selection breaks it."""
    target = FunctionTarget(log_gamma_evaluate)
    edges = torch.tensor(stats.loggamma.ppf(torch.linspace(0, 1, 9)[1:-1].numpy(), SHAPE), dtype=torch.float64)

    def p_value(generator):
        kernel = NUTSKernel(1.2, max_depth=4)
        before = log_gamma_draws(40_000, generator)
        after = kernel.step(kernel.init(before, target), target, generator=generator)[0].position
        cells = torch.bucketize(before.flatten(), edges) * 8 + torch.bucketize(after.flatten(), edges)
        pairs = torch.bincount(cells, minlength=64).view(8, 8).double()
        forward, backward = pairs.triu(1), pairs.tril(-1).T
        moved = (forward + backward) > 0
        statistic = ((forward - backward)[moved] ** 2 / (forward + backward)[moved]).sum().item()
        return stats.chi2.sf(statistic, int(moved.sum())), int(moved.sum())

    p_nuts, joined = p_value(torch.Generator().manual_seed(2))
    assert joined >= 10 and p_nuts > P_VALUE_FLOOR
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nuts, "merge_probability", always_move)
        assert p_value(torch.Generator().manual_seed(2))[0] < 1e-8


def test_step_size_adapts_between_calls_and_bad_settings_are_refused():
    g = torch.Generator().manual_seed(4)
    target = FunctionTarget(gaussian_evaluate)
    kernel = NUTSKernel(3.0, max_depth=5)
    state = kernel.init(exact_gaussian_samples(500, g), target)
    adapted = adaptive_chain(kernel, target, state, 40, step_size=torch.tensor(3.0, dtype=torch.float64), target_acceptance=0.8, generator=g)
    assert adapted.step_size.item() < 1.5
    again = adaptive_chain(kernel, target, adapted.state, 10, step_size=adapted.step_size, target_acceptance=None, generator=g)
    assert 0.65 < again.acceptance.item() < 0.95
    with pytest.raises(ValueError, match="step_size must be"):
        NUTSKernel(0.0)
    with pytest.raises(ValueError, match="max_depth must be"):
        NUTSKernel(0.1, max_depth=0)


def test_nuts_anneals_a_gaussian_in_ais_to_its_closed_form_log_z():
    model = random_gaussian(5, seed=0)
    estimate = AIS(num_chains=200, num_steps=100, kernel=NUTSKernel(0.5, max_depth=4))(model, generator=torch.Generator().manual_seed(0))
    exact = model.log_partition().item()
    assert abs(estimate.log_z - exact) < max(3 * estimate.stderr, 0.02), (estimate.log_z, exact, estimate.stderr)
    assert 0.3 < min(estimate.info["acceptance"]) <= 1.0


def test_nuts_anneals_each_examples_latents_to_the_closed_form_log_likelihood():
    """Per-example annealing from the prior to the posterior of a Gaussian-prior linear generative model: every chain has
    its own data row, so chains that stop their trees early must not disturb the others' targets."""
    g = torch.Generator().manual_seed(0)
    model = LinearGenerative.from_tensors(torch.randn(4, 3, generator=g, dtype=torch.float64), prior="gaussian", noise_std=0.5)
    data = model.sample(4, generator=g)
    estimate = AIS(num_chains=50, num_steps=80, kernel=NUTSKernel(0.2, max_depth=4)).log_likelihood(model, data, generator=g)
    exact = model.log_prob(data).detach()
    assert ((estimate.per_example - exact).abs() < 4 * estimate.info["per_example_stderr"]).all(), (estimate.per_example, exact)
    assert abs(estimate.mean - exact.mean().item()) < max(3 * estimate.stderr, 0.02)
