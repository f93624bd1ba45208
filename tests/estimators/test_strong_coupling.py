"""AIS on strongly coupled binary models against enumeration: RBMs at weight scales up to 5000, MPF- and Hebb-trained
Hopfield networks, spin glasses.

With weights of scale s the whole change from the base to the target happens at β ≈ 1/s, which the linear schedule
crosses in a step or two (12×8 RBM, s = 5000, K = 1000: 30 stderr below the exact log Z at ESS 1.9). The default
"energy" schedule (:class:`~pfzoo.paths.EnergyScaleSchedule`) log-spaces the steps from β ≈ 1/σ_0; every case here
is then within 3 of its own stderr of the exact value, and RAISE stays finite at every scale.
"""

import math

import pytest
import torch

from pfzoo.data.hopfield_patterns import random_patterns
from pfzoo.data.spin_glass import fully_connected_couplings, lattice_couplings
from pfzoo.estimators import AIS, HAIS, RAISE, Exact
from pfzoo.models import RBM, Gaussian, Hopfield, Ising
from pfzoo.training.bit_flip_mpf import BitFlipMPF
from pfzoo.training.hopfield_rules import outer_product_rule

K_SIGMA = 3.0
SCALES = [1.0, 20.0, 200.0, 5000.0]


def scaled_rbm(scale: float, dtype: torch.dtype = torch.float64) -> RBM:
    """12×8 RBM with W and visible bias ~ N(0, scale²): log Z up to ~1e5 nats, decided at β ≈ 1/scale."""
    g = torch.Generator().manual_seed(0)
    weight, visible_bias = torch.randn(12, 8, generator=g) * scale, torch.randn(12, generator=g) * scale
    return RBM.from_tensors(weight, visible_bias, torch.zeros(8)).to(dtype)


def mpf_hopfield(num_units: int, num_patterns: int) -> Hopfield:
    """A Hopfield network fitted to random patterns as conf/experiment/hopfield_mpf.yaml fits it: MPF (all single flips),
    full-batch L-BFGS from J = 0. At as many patterns as units the couplings grow into the thousands."""
    patterns = random_patterns(num_patterns, num_units, generator=torch.Generator().manual_seed(0)).double()
    model = Hopfield(num_units, init_std=0.0).double()
    optimizer = torch.optim.LBFGS(model.parameters(), max_iter=2000, line_search_fn="strong_wolfe", tolerance_grad=1e-12,
                                  tolerance_change=1e-14)
    objective = BitFlipMPF()

    def closure():
        optimizer.zero_grad()
        loss = objective.loss(model, patterns)
        loss.backward()
        return loss

    optimizer.step(closure)
    return model


def hebbian_hopfield(scale: float) -> Hopfield:
    """Three patterns of 20 units stored by the outer-product rule, couplings multiplied by ``scale``."""
    hebb = outer_product_rule(random_patterns(3, 20, generator=torch.Generator().manual_seed(0)).double())
    return Hopfield.from_tensors(hebb.symmetric_coupling.detach() * scale, hebb.bias.detach() * scale)


def spin_glass(coupling: torch.Tensor) -> Ising:
    return Ising.from_tensors(coupling.double(), torch.zeros(coupling.shape[0], dtype=torch.float64))


def check_within_stderr(model, estimate):
    exact = Exact()(model).log_z
    assert math.isfinite(estimate.log_z) and 0 < estimate.stderr < math.inf
    assert abs(estimate.log_z - exact) <= K_SIGMA * estimate.stderr, (
        f"AIS {estimate.log_z:.3f} ± {estimate.stderr:.3f} (ESS {estimate.ess:.1f}), exact {exact:.3f}")
    assert not estimate.warnings, estimate.warnings


@pytest.mark.parametrize("scale", SCALES)
def test_default_ais_matches_enumeration_on_rbms_of_any_weight_scale(scale):
    model = scaled_rbm(scale)
    estimate = AIS(num_chains=100, num_steps=1000)(model, generator=torch.Generator().manual_seed(1))
    check_within_stderr(model, estimate)
    assert estimate.info["energy_scale"] == pytest.approx(3.5 * scale, rel=0.5)  # sd of log f_1 − log f_0 under the base


def test_the_linear_schedule_misses_at_weight_scale_5000():
    """Why the default changed: linear steps of 1/K cross the β ≈ 1/5000 where everything happens in one step."""
    model = scaled_rbm(5000.0)
    estimate = AIS(num_chains=100, num_steps=1000, schedule="linear")(model, generator=torch.Generator().manual_seed(1))
    assert estimate.log_z < Exact()(model).log_z - 10 * estimate.stderr
    assert any("Pareto k̂" in line for line in estimate.warnings)  # ... and the weights' tail says so


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", SCALES)
def test_ais_and_raise_stay_finite_at_few_steps(scale, dtype):
    model = scaled_rbm(scale, dtype)
    estimate = AIS(num_chains=20, num_steps=100)(model, generator=torch.Generator().manual_seed(1))
    assert math.isfinite(estimate.log_z) and math.isfinite(estimate.stderr)
    data = torch.tensor([[1.0, 0.0] * 6, [0.0, 1.0] * 6, [1.0] * 12], dtype=dtype)
    lower = RAISE(num_chains=5, num_steps=100).log_likelihood(model, data, generator=torch.Generator().manual_seed(2))
    # only finiteness: RAISE bounds the annealing model's log-likelihood, which at K = 100 can exceed the model's
    assert torch.isfinite(lower.per_example).all() and math.isfinite(lower.mean) and math.isfinite(lower.stderr)


def test_raise_with_the_energy_schedule_bounds_tightly_at_weight_scale_5000():
    """The linear schedule's reverse chains all take the same path at this scale: a bound 0.56 nats low with zero stderr."""
    model = scaled_rbm(5000.0)
    states = ((torch.arange(4096)[:, None] >> torch.arange(12)) & 1).double()  # all 2^12 visible states
    log_p = model.log_prob(states).detach()
    data = states[torch.multinomial(log_p.exp(), 20, replacement=True, generator=torch.Generator().manual_seed(0))]
    exact = model.log_prob(data).mean().item()
    estimate = RAISE(num_chains=10, num_steps=1000, schedule="energy").log_likelihood(model, data, generator=torch.Generator().manual_seed(1))
    assert abs(estimate.mean - exact) <= K_SIGMA * estimate.stderr, (estimate.mean, estimate.stderr, exact)
    assert estimate.info["betas"][1].item() < 1e-5  # the first steps are sized by σ_0 ≈ 2e4, not 1/K
    linear = RAISE(num_chains=10, num_steps=1000).log_likelihood(model, data, generator=torch.Generator().manual_seed(1))
    assert linear.mean < exact - 0.3


@pytest.mark.parametrize("scale", SCALES)
def test_hais_is_finite_and_never_silently_wrong_at_any_scale(scale):
    """A 4-d Gaussian whose precision is multiplied by scale², annealed from N(0, I) (no data to fit a base to)."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(4, 4, generator=g, dtype=torch.float64) / 2
    precision = (a @ a.T + 0.5 * torch.eye(4, dtype=torch.float64)) * scale**2
    model = Gaussian.from_tensors(precision, mean=torch.randn(4, generator=g, dtype=torch.float64) * scale)
    estimate = HAIS(num_chains=20, num_steps=100)(model, generator=torch.Generator().manual_seed(1))
    assert math.isfinite(estimate.log_z) and math.isfinite(estimate.stderr)
    if abs(estimate.log_z - Exact()(model).log_z) > K_SIGMA * estimate.stderr:
        assert estimate.warnings


@pytest.mark.parametrize("name, model", [
    ("MPF Hopfield, 20 patterns in 20 units", lambda: mpf_hopfield(20, 20)),
    ("Hebbian Hopfield ×20", lambda: hebbian_hopfield(20.0)),
    ("fully connected spin glass, coupling sd 50", lambda: spin_glass(fully_connected_couplings(
        20, coupling_std=50.0, generator=torch.Generator().manual_seed(0)))),
    ("4×4 lattice spin glass, coupling sd 5", lambda: spin_glass(lattice_couplings(4, coupling_std=5.0, generator=torch.Generator().manual_seed(0)))),
])
def test_default_ais_matches_enumeration_on_strongly_coupled_hopfield_and_ising_models(name, model):
    model = model()
    estimate = AIS(num_chains=100, num_steps=1000)(model, generator=torch.Generator().manual_seed(1))
    check_within_stderr(model, estimate)
