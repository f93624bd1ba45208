"""Bridge sampling's ratio and error bars on draws with a known answer, importance sampling's warnings, and the Markov
bounds every estimate can state. (The estimators against exact answers on every family: test_oracle_table.py.)"""

import math

import pytest
import torch
from factories import biased_binary_data, random_dbm, random_ising, random_rbm

from pfzoo.estimators import (
    AIS, BoundKind, BridgeSampling, ImportanceSampling, LikelihoodEstimate, LinkedImportanceSampling, bridge_log_ratio, markov_slack,
)
from pfzoo.estimators.comparison import compare
from pfzoo.models import MissingCapability

# p_0 = N(0, 1) and p_1 = N(1, 1.5²) with f_i their Gaussian kernels, so log Z_1 − log Z_0 = log 1.5
TARGET_MEAN, TARGET_SD = 1.0, 1.5


def log_ratio_at(x: torch.Tensor) -> torch.Tensor:
    return -(x - TARGET_MEAN) ** 2 / (2 * TARGET_SD**2) + x**2 / 2


def autocorrelated_target_draws(num_chains: int, per_chain: int, rho: float, generator: torch.Generator) -> torch.Tensor:
    """Stationary AR(1) chains on p_1: ``x_{t+1} = μ + ρ(x_t − μ) + √(1 − ρ²) σ ε``; ``[C, T]``, τ = (1 + ρ)/(1 − ρ)."""
    x = TARGET_MEAN + TARGET_SD * torch.randn(num_chains, generator=generator, dtype=torch.float64)
    draws = []
    for _ in range(per_chain):
        draws.append(x)
        x = TARGET_MEAN + rho * (x - TARGET_MEAN) + math.sqrt(1 - rho**2) * TARGET_SD * torch.randn(num_chains, generator=generator, dtype=torch.float64)
    return torch.stack(draws, 1)


@pytest.mark.parametrize("bridge", ["optimal", "geometric"])
def test_bridge_ratio_is_calibrated_on_autocorrelated_draws(bridge):
    """Over 200 replications the estimates centre on log 1.5 and their spread matches the reported stderr, although the
    target side's draws are strongly autocorrelated (τ = 19): the stderr comes from per-chain means."""
    g = torch.Generator().manual_seed(0)
    estimates, stderrs, effective = [], [], []
    for _ in range(200):
        base = torch.randn(2000, generator=g, dtype=torch.float64)
        target = autocorrelated_target_draws(50, 40, 0.9, g)
        ratio = bridge_log_ratio(log_ratio_at(base), log_ratio_at(target), bridge=bridge)
        estimates.append(ratio.log_ratio)
        stderrs.append(ratio.stderr)
        effective.append(ratio.effective_target_draws)
    estimates = torch.tensor(estimates)
    spread, reported = estimates.std().item(), torch.tensor(stderrs).mean().item()
    assert abs(estimates.mean().item() - math.log(1.5)) < 3 * spread / math.sqrt(200) + 1e-3
    assert 0.8 < spread / reported < 1.25, f"spread {spread:.4f} against reported stderr {reported:.4f}"
    # 2000 draws with τ = 19 are about 105 independent ones (the batch-means estimate of τ is rough at T = 40)
    assert 60 < torch.tensor(effective).mean().item() < 180


def test_optimal_bridge_beats_the_geometric_one_where_the_ends_overlap_little():
    g = torch.Generator().manual_seed(1)
    base = 3 * torch.randn(20000, generator=g, dtype=torch.float64)  # p_0 = N(0, 3²) against p_1 = N(1, 1.5²)
    target = autocorrelated_target_draws(100, 20, 0.0, g)
    log_ratio = lambda x: -(x - TARGET_MEAN) ** 2 / (2 * TARGET_SD**2) + x**2 / 18  # noqa: E731
    optimal = bridge_log_ratio(log_ratio(base), log_ratio(target))
    geometric = bridge_log_ratio(log_ratio(base), log_ratio(target), bridge="geometric")
    exact = math.log(1.5 / 3)
    assert abs(optimal.log_ratio - exact) < 3 * optimal.stderr
    assert optimal.stderr < geometric.stderr and optimal.iterations > 1


def test_bridge_ratio_refuses_bad_input_in_one_line():
    with pytest.raises(ValueError, match="bridge must be one of optimal, geometric"):
        bridge_log_ratio(torch.zeros(10), torch.zeros(4, 3), bridge="harmonic")
    with pytest.raises(ValueError, match=r"log_ratio_target must be \[chains ≥ 2"):
        bridge_log_ratio(torch.zeros(10), torch.zeros(1, 3))
    with pytest.raises(ValueError, match="must be finite"):
        bridge_log_ratio(torch.tensor([0.0, float("inf")]), torch.zeros(4, 3))
    with pytest.raises(ValueError, match="burn_in must be a positive integer"):
        BridgeSampling(burn_in=0)


def test_bridge_sampling_flags_chains_that_never_reached_the_model():
    """A strongly coupled RBM with one annealing step and no thinning: the estimate says it may be wrong."""
    model = random_rbm(20, 10, 2.0, 0)
    data = biased_binary_data(20, 0, 100)
    estimate = BridgeSampling(num_chains=100, samples_per_chain=20, burn_in=1, thin=1)(model, data=data, generator=torch.Generator().manual_seed(0))
    assert estimate.kind is BoundKind.CONSISTENT and estimate.markov_bound() is None
    assert estimate.warnings, "a bridge between barely overlapping ends must warn"


def test_importance_sampling_flags_a_poor_base():
    """The oracle Ising model's data are not its samples, so their base rates are a poor proposal: ESS and k̂ say so."""
    model = random_ising(8, 0.5, 4, draw_dtype=None)
    estimate = ImportanceSampling(num_samples=20_000)(model, data=biased_binary_data(8, 4, 100), generator=torch.Generator().manual_seed(0))
    assert any("ESS" in warning for warning in estimate.warnings)
    assert all("num_samples" in warning for warning in estimate.warnings)
    assert estimate.info["num_steps"] == 1 and estimate.kind is BoundKind.UNBIASED_Z


def test_markov_lower_bound_on_log_z_holds_at_its_confidence():
    """A poor AIS (10 chains × 10 steps) under-estimates log Z, and its Markov bound ``log Ẑ − log 20`` stays below the
    exact log Z in at least 95% of runs (it is conservative: in practice nearly always)."""
    model = random_rbm(10, 6, 1.5, 3)
    exact = model.log_partition().item()
    estimator = AIS(num_chains=10, num_steps=10, schedule="linear")
    held = 0
    for seed in range(100):
        estimate = estimator(model, generator=torch.Generator().manual_seed(seed))
        bound = estimate.markov_bound(0.95)
        assert bound.relation == "≥" and bound.value == pytest.approx(estimate.log_z - math.log(20))
        held += exact >= bound.value
    assert held >= 95


def likelihood(kind: BoundKind, per_example, independent: bool, **info) -> LikelihoodEstimate:
    per_example = torch.tensor(per_example, dtype=torch.float64)
    return LikelihoodEstimate(per_example.mean().item(), 0.1, per_example, None, 0.0, kind, info, (), independent)


def test_markov_bounds_of_likelihood_estimates():
    slack = markov_slack(0.99)
    assert slack == pytest.approx(math.log(100))
    lower = likelihood(BoundKind.LIKELIHOOD_LOWER_BOUND, [-80.0, -90.0], independent=True).markov_bound(0.99)
    assert (lower.relation, lower.value) == ("≥", pytest.approx(-85 - slack / 2))  # independent examples share the slack
    shared = likelihood(BoundKind.LIKELIHOOD_LOWER_BOUND, [-80.0, -90.0], independent=False).markov_bound(0.99)
    assert shared.value == pytest.approx(-85 - slack)
    upper = likelihood(BoundKind.UNBIASED_Z, [-80.0, -90.0], independent=False).markov_bound(0.99)
    assert (upper.relation, upper.value) == ("≤", pytest.approx(-85 + slack))
    assert likelihood(BoundKind.UNBIASED_Z, [-80.0], independent=False, posterior_samples=10).markov_bound() is None
    assert likelihood(BoundKind.EXACT, [-80.0], independent=False).markov_bound() is None
    assert "with probability ≥ 0.99" in str(lower)
    with pytest.raises(ValueError, match="confidence must be a probability strictly between 0 and 1"):
        markov_slack(1.0)


def test_linked_importance_sampling_chains_at_each_level_carry_a_strongly_coupled_model():
    """With one state per level no transition runs (importance sampling through the levels) and the weights collapse;
    five states per level put a short chain at each β and the estimate lands within its error of the exact log Z."""
    model = random_rbm(20, 10, 2.0, 0)
    data = biased_binary_data(20, 0, 100)
    exact = model.log_partition().item()
    alone = LinkedImportanceSampling(num_runs=200, num_levels=100, states_per_level=1)(model, data=data, generator=torch.Generator().manual_seed(0))
    linked = LinkedImportanceSampling(num_runs=200, num_levels=100, states_per_level=5)(model, data=data, generator=torch.Generator().manual_seed(0))
    assert alone.ess < 20 and alone.warnings
    assert linked.ess > 100 and not linked.warnings
    assert abs(linked.log_z - exact) < 3 * linked.stderr
    assert linked.markov_bound(0.95).value < exact


@pytest.mark.parametrize("scales", [(1.0, 1.0), (0.5, 1.5)])
def test_compare_two_rbms_against_the_enumerated_difference(scales):
    """log p_A − log p_B on a test set, through a bridge between the two models' own samples: within 3 of its stderr of
    the enumerated value, with different hidden layers."""
    a, b = random_rbm(10, 6, scales[0], 1), random_rbm(10, 4, scales[1], 2)
    test = biased_binary_data(10, 0, 300)
    comparison = compare(a, b, test, num_samples=4000, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        exact = (a.log_prob(test) - b.log_prob(test)).mean().item()
        exact_log_z = (a.log_partition() - b.log_partition()).item()
    assert abs(comparison.log_z_difference - exact_log_z) <= 3 * comparison.log_z_difference_stderr
    assert abs(comparison.difference - exact) <= 3 * comparison.stderr
    assert comparison.better == ("A" if exact > 0 else "B")


def test_compare_refuses_models_it_cannot_compare_in_one_line():
    a, b = random_rbm(10, 6, 1.0, 1), random_rbm(8, 4, 1.0, 2)
    with pytest.raises(ValueError, match="model_a and model_b must share a visible space, got 10 and 8 units"):
        compare(a, b, biased_binary_data(10, 0, 10))
    with pytest.raises(MissingCapability, match=r"comparing models needs an exact free energy.*model_b \(DBM\)"):
        compare(random_rbm(30, 4, 1.0, 1), random_dbm([30, 40, 40], 1.0, 2), biased_binary_data(30, 0, 10))  # 2^40 states to sum
