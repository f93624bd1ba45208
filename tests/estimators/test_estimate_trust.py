"""No silent wrong estimate: every estimate far from the exact answer carries a warning (pfzoo.estimators.trust).

The cases the fuzz on main found (each silent before): RAISE and CSL hundreds of nats off on an RBM with weights ×1000,
HAIS NaN on an energy that is NaN in part of the space, HAIS finite on an improper energy, HAIS 45 nats off from a base
fitted to one row. Then the contract itself, over small models with exact answers × estimators × hard settings.
"""

import math

import pytest
import torch
from factories import biased_binary_data, enumerated_samples, random_ising, random_poe, random_rbm
from torch import nn

from pfzoo.estimators import AIS, CSL, HAIS, RAISE, BridgeSampling, Exact, ImportanceSampling, LinkedImportanceSampling
from pfzoo.estimators import trust
from pfzoo.estimators.base import reliability_warnings
from pfzoo.models import EnergyFunction


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _coupled_rbm(factor: float = 1000.0):
    rbm = random_rbm(10, 6, seed=0)
    with torch.no_grad():
        rbm.weight.mul_(factor)
    return rbm


def _exact_mean_log_likelihood(model, data) -> float:
    with torch.no_grad():
        return (model.unnormalized_log_prob(data).double() - model.log_partition().double()).mean().item()


# ---- the fuzz's cases ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("estimator", [RAISE(num_chains=2, num_steps=10), RAISE(num_chains=5, num_steps=100),
                                       CSL(num_chains=5, samples_per_chain=50, burn_in=10)], ids=["raise-2", "raise-5", "csl"])
def test_likelihood_bounds_on_a_strongly_coupled_rbm_warn(estimator):
    """Before: RAISE +409 nats (stderr 0.06), CSL +689 nats (stderr 0.56), no warning; both now flagged."""
    rbm = _coupled_rbm()
    data = (torch.rand(20, 10, generator=_generator(5)) < 0.5).double()
    estimate = estimator.log_likelihood(rbm, data, generator=_generator(1))
    assert abs(estimate.mean - _exact_mean_log_likelihood(rbm, data)) > 100  # the failure is still there: it is flagged
    assert estimate.warnings
    expected = "schedule's first step" if isinstance(estimator, RAISE) else "changed state at fewer than"
    assert any(expected in line for line in estimate.warnings), estimate.warnings


def test_zero_stderr_from_frozen_chains_is_flagged():
    rbm = random_rbm(6, 10, seed=0)
    with torch.no_grad():
        rbm.weight.mul_(1000)
    data = (torch.rand(20, 6, generator=_generator(5)) < 0.5).double()
    estimate = RAISE(num_chains=2, num_steps=10).log_likelihood(rbm, data, generator=_generator(1))
    assert estimate.stderr == 0.0
    assert any("standard error 0" in line for line in estimate.warnings), estimate.warnings


def test_a_positive_log_likelihood_for_binary_data_is_flagged():
    """log Ẑ from one importance sample per chain on a coupled RBM is far too low, so log f(v) − log Ẑ exceeds 0."""
    rbm = _coupled_rbm(30.0)
    _, states, log_p = enumerated_samples(rbm, 1)
    modes = states[log_p.argsort(descending=True)[:3]]
    estimate = ImportanceSampling(num_samples=2, base="uniform").log_likelihood(rbm, modes, generator=_generator(0))
    assert estimate.mean > 0
    assert any("log p ≤ 0" in line for line in estimate.warnings), estimate.warnings
    exact = Exact().log_likelihood(rbm, modes)
    assert exact.mean <= 0 and not exact.warnings


def test_the_ess_threshold_flags_few_effective_chains_of_many():
    """Before: ESS 7.5 of 50 passed (the bar was 5 % = 2.5) while AIS was 4 nats low."""
    assert reliability_warnings(7.5, 50)
    assert not reliability_warnings(30.0, 50)
    assert not reliability_warnings(9.9, 100)  # 10 % of 100: a measured healthy run (test_strong_coupling)
    assert reliability_warnings(2.8, 10) and not reliability_warnings(6.0, 10)  # a handful: half of them


class _NaNBeyond(nn.Module):
    """``½|x|²``, NaN where ``x_0 > 1.5``."""

    def forward(self, x):
        energy = 0.5 * x.square().sum(-1)
        return torch.where(x[:, 0] > 1.5, torch.full_like(energy, math.nan), energy)


class _Linear(nn.Module):
    """``E(x) = Σ x``: no normaliser."""

    def forward(self, x):
        return x.sum(-1)


class _Quartic(nn.Module):
    def forward(self, x):
        return x.pow(4).sum(-1)


def test_hais_on_an_energy_that_is_nan_somewhere_says_so():
    """Before: log Ẑ = NaN and no warning."""
    estimate = HAIS(num_chains=32, num_steps=100)(EnergyFunction(_NaNBeyond(), num_visible=2).double(), generator=_generator(0))
    assert math.isnan(estimate.log_z)
    lines = " ".join(estimate.warnings)
    assert "NaN or +inf" in lines and "of 32" in lines and "make the energy finite" in lines


@pytest.mark.parametrize("num_steps", [10, 100])
def test_hais_on_an_improper_energy_warns(num_steps):
    """Before: at 32 chains a finite log Ẑ (4.1 at K = 10, 17.0 at K = 100, growing with K) and no warning."""
    estimate = HAIS(num_chains=32, num_steps=num_steps)(EnergyFunction(_Linear(), num_visible=2).double(), generator=_generator(0))
    assert any("∫exp(−E) is infinite" in line for line in estimate.warnings), estimate.warnings


def test_a_fitted_base_needs_more_rows_than_dimensions():
    """Before: a Gaussian fitted to one row (covariance 1e-6 I) put HAIS 45–55 nats off."""
    model = EnergyFunction(_Quartic(), num_visible=10).double()
    with pytest.raises(ValueError, match=r"base_data .*at least 11 rows, got 1"):
        HAIS(num_chains=8, num_steps=10, base="fitted")(model, data=torch.randn(1, 10, dtype=torch.float64), generator=_generator(0))


def test_proper_energies_raise_no_probe_warning():
    estimate = HAIS(num_chains=100, num_steps=200, step_size=0.3)(EnergyFunction(_Quartic(), num_visible=3).double(),
                                                                 generator=_generator(0))
    assert not estimate.warnings, estimate.warnings
    data = torch.randn(50, 3, generator=_generator(1), dtype=torch.float64)
    fitted = HAIS(num_chains=100, num_steps=200, base="fitted")(random_poe(3), data=data, generator=_generator(2))
    assert not any("base scales out" in line for line in fitted.warnings), fitted.warnings


def test_trust_checks_in_isolation():
    assert trust.nonfinite_weight_warnings(torch.tensor([0.0, -math.inf]), 2, "x") == ()
    assert "1 of 3" in trust.nonfinite_weight_warnings(torch.tensor([0.0, math.nan, 1.0]), 3, "x")[0]
    assert trust.value_warnings(-3.0, 0.0, stochastic=False, frozen_chains=True) == ()  # exact answers have no error
    assert trust.value_warnings(-3.0, 0.0, stochastic=True) == ()  # identical weights from distinct base draws: exact
    assert trust.value_warnings(-3.0, 0.0, stochastic=True, frozen_chains=True)
    assert trust.value_warnings(math.nan, 0.1, stochastic=True)
    assert trust.log_likelihood_warnings(torch.tensor([-0.1, 0.05]), -0.02, 0.1, discrete=True) == ()  # within noise
    assert trust.log_likelihood_warnings(torch.tensor([1.0, 2.0]), 1.5, 0.0, discrete=False) == ()  # densities may exceed 1
    assert trust.log_likelihood_warnings(torch.tensor([1.0, -2.0]), -0.5, 0.0, discrete=True)


# ---- the contract: far from exact ⇒ warned ----------------------------------------------------------------------

MODELS = {
    "rbm": lambda: random_rbm(8, 5, seed=3),
    "rbm×10": lambda: random_rbm(8, 5, scale=10.0, seed=3),
    "rbm×1000": lambda: random_rbm(8, 5, scale=1000.0, seed=3),
    "rbm×100-wide": lambda: random_rbm(5, 9, scale=100.0, seed=4),
    "ising×5": lambda: random_ising(8, scale=5.0, seed=3),
    "ising×1000": lambda: random_ising(8, scale=1000.0, seed=3),
}

LIKELIHOOD_ESTIMATORS = {
    "ais-linear-few": lambda: AIS(num_chains=10, num_steps=10, schedule="linear"),
    "ais-energy-few": lambda: AIS(num_chains=10, num_steps=30),
    "importance-few": lambda: ImportanceSampling(num_samples=20),
    "linked-few": lambda: LinkedImportanceSampling(num_runs=10, num_levels=10, states_per_level=2),
    "bridge-few": lambda: BridgeSampling(num_chains=10, samples_per_chain=4, burn_in=10, thin=1),
    "raise-few": lambda: RAISE(num_chains=3, num_steps=20),
    "csl-few": lambda: CSL(num_chains=3, samples_per_chain=20, burn_in=5),
}


def _far(value: float, exact: float, stderr: float) -> bool:
    return not abs(value - exact) <= max(5 * stderr, 2.0)  # a NaN is far


@pytest.mark.parametrize("seed", [7, 8])
@pytest.mark.parametrize("estimator", LIKELIHOOD_ESTIMATORS)
@pytest.mark.parametrize("model", MODELS)
def test_an_estimate_far_from_the_exact_answer_carries_a_warning(model, estimator, seed):
    model = MODELS[model]()
    make = LIKELIHOOD_ESTIMATORS[estimator]
    if not make().applies_to(model):
        pytest.skip(f"{estimator} does not apply to {type(model).__name__}")
    data = biased_binary_data(model.num_visible, seed=4, num_examples=10, dtype=model.dtype)
    estimate = make().log_likelihood(model, data, generator=_generator(seed))
    exact = _exact_mean_log_likelihood(model, data)
    if _far(estimate.mean, exact, estimate.stderr):
        assert estimate.warnings, f"{estimate.mean:.3f} ± {estimate.stderr:.3g} against exact {exact:.3f}, no warning"


@pytest.mark.parametrize("num_chains, num_steps", [(8, 10), (32, 100)])
@pytest.mark.parametrize("scale", [1.0, 3.0, 1000.0])
def test_a_hais_estimate_far_from_a_products_of_experts_exact_log_z_carries_a_warning(scale, num_chains, num_steps):
    model = random_poe(3, seed=2)
    with torch.no_grad():
        model.filters.mul_(scale)
    estimate = HAIS(num_chains=num_chains, num_steps=num_steps)(model, generator=_generator(3))
    exact = Exact()(model).log_z
    if _far(estimate.log_z, exact, estimate.stderr):
        assert estimate.warnings, f"{estimate.log_z:.3f} ± {estimate.stderr:.3g} against exact {exact:.3f}, no warning"
