import math
import pathlib

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from scipy import stats

from pfzoo.data import (
    DataSplits,
    fully_connected_couplings,
    lattice_couplings,
    sample_spin_glass,
    spin_glass,
    spin_glass_model,
)
from pfzoo.kernels import GibbsInfo, GibbsState
from pfzoo.models import Ising

CONF = pathlib.Path(__file__).resolve().parents[2] / "conf" / "dataset"
SMALL = dict(side=3, num_train=50, num_test=20, num_chains=10, burn_in=5, thin=2)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---- couplings ------------------------------------------------------------------------------


@pytest.mark.parametrize("side", [3, 4, 10])
def test_lattice_couplings_are_a_periodic_nearest_neighbour_lattice(side):
    coupling = lattice_couplings(side, generator=_gen(0))
    num_units = side * side
    assert coupling.shape == (num_units, num_units) and coupling.dtype == torch.float32
    assert torch.equal(coupling, coupling.T)
    assert torch.all(coupling.diagonal() == 0)
    expected = torch.zeros(num_units, num_units, dtype=torch.bool)
    for r in range(side):
        for c in range(side):
            for dr, dc in ((0, 1), (0, -1), (1, 0), (-1, 0)):
                expected[r * side + c, ((r + dr) % side) * side + (c + dc) % side] = True
    assert torch.equal(coupling != 0, expected)  # Gaussian weights are non-zero almost surely
    assert torch.all((coupling != 0).sum(1) == 4)
    # the wrap-around edges exist: (0, 0) is coupled to (0, side-1) and to (side-1, 0)
    assert coupling[0, side - 1] != 0 and coupling[0, (side - 1) * side] != 0


def test_lattice_coupling_weights_are_gaussian_with_the_given_std():
    coupling = lattice_couplings(30, coupling_std=2.5, generator=_gen(1))
    rows, cols = torch.nonzero(torch.triu(coupling != 0), as_tuple=True)
    weights = coupling[rows, cols].double()
    assert len(weights) == 2 * 30 * 30  # one independent weight per edge
    se = 2.5 * math.sqrt(2 / len(weights))
    assert abs(weights.std().item() - 2.5) < 5 * se
    assert abs(weights.mean().item()) < 5 * 2.5 / math.sqrt(len(weights))


def test_fully_connected_couplings_default_to_sk_scaling():
    coupling = fully_connected_couplings(200, generator=_gen(2))
    assert coupling.shape == (200, 200) and torch.equal(coupling, coupling.T)
    assert torch.all(coupling.diagonal() == 0)
    upper = coupling[torch.triu_indices(200, 200, 1).unbind()]
    assert torch.all(upper != 0)
    std = 1 / math.sqrt(200)
    assert abs(upper.std().item() - std) < 5 * std * math.sqrt(2 / len(upper))
    scaled = fully_connected_couplings(200, coupling_std=3.0, generator=_gen(2))
    assert torch.allclose(scaled, coupling * 3.0 / std)


def test_couplings_follow_the_generator():
    assert torch.equal(lattice_couplings(5, generator=_gen(7)), lattice_couplings(5, generator=_gen(7)))
    assert not torch.equal(lattice_couplings(5, generator=_gen(7)), lattice_couplings(5, generator=_gen(8)))
    assert torch.equal(fully_connected_couplings(6, generator=_gen(7)), fully_connected_couplings(6, generator=_gen(7)))


# ---- the generating model -------------------------------------------------------------------


def test_spin_glass_model_is_deterministic_in_seed():
    a, b, c = spin_glass_model(seed=4), spin_glass_model(seed=4), spin_glass_model(seed=5)
    assert isinstance(a, Ising) and a.num_units == 100
    assert torch.equal(a.coupling, b.coupling) and torch.equal(a.bias, b.bias)
    assert not torch.equal(a.coupling, c.coupling)
    assert torch.all(a.bias == 0)  # bias_std = 0 by default
    assert len(a.gibbs_blocks()) == 2  # the checkerboard of an even-sided lattice
    torch.manual_seed(123)  # global RNG state plays no part
    assert torch.equal(spin_glass_model(seed=4).coupling, a.coupling)


def test_spin_glass_model_kinds_and_biases():
    lattice = spin_glass_model(side=4, bias_std=0.5, seed=1)
    assert lattice.num_units == 16 and torch.all((lattice.coupling != 0).sum(1) == 4)
    assert torch.all(lattice.bias != 0)
    full = spin_glass_model(kind="fully_connected", num_units=7, seed=1)
    assert full.num_units == 7 and torch.all((full.coupling != 0).sum(1) == 6)
    assert spin_glass_model(kind="fully_connected", side=4).num_units == 16  # num_units defaults to side²
    assert spin_glass_model(side=4, num_units=16).num_units == 16


# ---- sampling ------------------------------------------------------------------------------


def _state_index(x: torch.Tensor) -> np.ndarray:
    return (x.long() << torch.arange(x.shape[1])).sum(1).numpy()


def _exact_probs(model: Ising) -> np.ndarray:
    num_units = model.num_units
    states = ((torch.arange(2**num_units)[:, None] >> torch.arange(num_units)) & 1).float()
    with torch.no_grad():
        log_p = -model.energy(states).double() - model.log_partition()
    probs = log_p.exp().numpy()
    return probs / probs.sum()


def _chi_square_p(samples: torch.Tensor, probs: np.ndarray) -> float:
    """Goodness-of-fit p-value of the sampled states against ``probs``, pooling states expected fewer than 5 times."""
    counts = np.bincount(_state_index(samples), minlength=len(probs))
    expected = probs * len(samples)
    rare = expected < 5
    observed = np.append(counts[~rare], counts[rare].sum())
    expected = np.append(expected[~rare], expected[rare].sum())
    return stats.chisquare(observed, expected).pvalue


@pytest.mark.parametrize(
    "model_args",
    [dict(kind="lattice", side=3, bias_std=0.5, seed=3), dict(kind="fully_connected", num_units=8, coupling_std=1.0, bias_std=0.5, seed=3)],
    ids=["lattice3x3", "fully_connected8"],
)
def test_samples_match_the_enumerated_distribution(model_args):
    # Built through spin_glass, checked against spin_glass_model(same arguments): also tests that
    # the data set's truth is recoverable. 60,000 training rows from 2,500 chains (24 rounds, thin 5).
    data = spin_glass(**model_args, num_train=60_000, num_test=15_000, num_chains=2_500, burn_in=50, thin=5)
    truth = _exact_probs(spin_glass_model(**model_args))
    # a false failure needs p < 1e-4 under the null; the samples are exact up to burn-in bias
    assert _chi_square_p(data.train, truth) > 1e-4
    assert _chi_square_p(data.test, truth) > 1e-4
    # the test has power: a slightly cooler model (energies x 1.1) and another seed's glass are rejected
    cooler = Ising.from_tensors(1.1 * spin_glass_model(**model_args).coupling.detach(), 1.1 * spin_glass_model(**model_args).bias.detach())
    assert _chi_square_p(data.train, _exact_probs(cooler)) < 1e-4
    other = _exact_probs(spin_glass_model(**{**model_args, "seed": 4}))
    assert _chi_square_p(data.train, other) < 1e-4


class _CountingKernel:
    """Stands in for the model's Gibbs kernel: each step returns a state whose column 0 is the step count, column 1 the chain."""

    needs = "anything"

    def __init__(self):
        self.calls = 0

    def init(self, position, target, *, generator=None):
        return GibbsState(position, position.new_empty(0))

    def step(self, state, target, *, beta=1.0, generator=None):
        self.calls += 1
        out = torch.zeros_like(state.position)
        out[:, 0] = self.calls
        out[:, 1] = torch.arange(len(out), dtype=out.dtype)
        return GibbsState(out, state.hidden), GibbsInfo()


@pytest.mark.parametrize(
    "num_samples, num_chains, burn_in, thin",
    [(10, 5, 3, 2), (11, 4, 0, 1), (7, 3, 10, 5), (3, 8, 2, 4)],
)
def test_burn_in_and_thin_pick_the_right_sweeps(monkeypatch, num_samples, num_chains, burn_in, thin):
    model = spin_glass_model(side=3)
    counter = _CountingKernel()
    monkeypatch.setattr(model, "gibbs_chain", lambda **options: (counter, None))
    out = sample_spin_glass(model, num_samples, num_chains=num_chains, burn_in=burn_in, thin=thin, generator=_gen(0))
    chains = min(num_chains, num_samples)
    rounds = math.ceil(num_samples / chains)
    assert out.shape == (num_samples, 9)
    assert counter.calls == burn_in + rounds * thin  # no sweep wasted after the last kept round
    row = torch.arange(num_samples)
    assert torch.equal(out[:, 0], (burn_in + thin * (row // chains + 1)).float())  # round r kept after burn_in + (r+1) thin
    assert torch.equal(out[:, 1], (row % chains).float())  # chains in order; the last round keeps the first ones


def test_sampling_is_batched_and_follows_the_generator():
    model = spin_glass_model(side=4, seed=2)
    a = sample_spin_glass(model, 25, num_chains=10, burn_in=3, thin=2, generator=_gen(5))
    b = sample_spin_glass(model, 25, num_chains=10, burn_in=3, thin=2, generator=_gen(5))
    c = sample_spin_glass(model, 25, num_chains=10, burn_in=3, thin=2, generator=_gen(6))
    assert a.shape == (25, 16) and a.dtype == torch.float32 and ((a == 0) | (a == 1)).all()
    assert torch.equal(a, b) and not torch.equal(a, c)
    # the same thing by hand: uniform initial states, then batched block Gibbs sweeps
    generator = _gen(5)
    x = (torch.rand(10, 16, generator=generator) < 0.5).float()
    blocks = model.gibbs_blocks()
    kept = []
    for sweep in range(1, 3 + 3 * 2 + 1):
        x = model.gibbs_sweep(x, generator=generator, blocks=blocks)
        if sweep > 3 and (sweep - 3) % 2 == 0:
            kept.append(x)
    assert torch.equal(a, torch.cat(kept)[:25])


# ---- the data set ---------------------------------------------------------------------------


def test_dataset_shapes_names_and_determinism():
    data = spin_glass(**SMALL, seed=1)
    assert isinstance(data, DataSplits) and data.name == "spin_glass" and data.image_shape == (3, 3)
    assert data.train.shape == (50, 9) and data.test.shape == (20, 9) and data.valid is None
    for x in (data.train, data.test):
        assert x.dtype == torch.float32 and ((x == 0) | (x == 1)).all()
    torch.manual_seed(99)
    again = spin_glass(**SMALL, seed=1)
    assert torch.equal(data.train, again.train) and torch.equal(data.test, again.test)
    other = spin_glass(**SMALL, seed=2)
    assert not torch.equal(data.train, other.train)
    full = spin_glass(**{**SMALL, "side": 10}, kind="fully_connected", num_units=12)
    assert full.image_shape is None and full.train.shape == (50, 12)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(kind="square"), "kind"),
        (dict(side=2), "side"),
        (dict(side=0), "side"),
        (dict(side=4, num_units=15), "num_units"),
        (dict(kind="fully_connected", num_units=1), "num_units"),
        (dict(coupling_std=-1.0), "coupling_std"),
        (dict(coupling_std=float("nan")), "coupling_std"),
        (dict(bias_std=-0.1), "bias_std"),
        (dict(num_train=0), "num_train"),
        (dict(num_test=-1), "num_test"),
        (dict(num_chains=0), "num_chains"),
        (dict(burn_in=-1), "burn_in"),
        (dict(burn_in=1.5), "burn_in"),
        (dict(thin=0), "thin"),
        (dict(seed=1.0), "seed"),
    ],
)
def test_dataset_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        spin_glass(**{**SMALL, **kwargs})


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_samples=0), "num_samples"),
        (dict(num_chains=0), "num_chains"),
        (dict(num_chains=True), "num_chains"),
        (dict(burn_in=-1), "burn_in"),
        (dict(thin=0), "thin"),
        (dict(generator="seed"), "generator"),
    ],
)
def test_sampler_rejects_bad_arguments(kwargs, match):
    model = spin_glass_model(side=3)
    with pytest.raises(ValueError, match=match):
        sample_spin_glass(model, **{"num_samples": 5, **kwargs})


def test_sampler_rejects_a_non_ising_model():
    with pytest.raises(ValueError, match="model"):
        sample_spin_glass(torch.nn.Linear(3, 3), 5)


def test_couplings_reject_bad_arguments():
    with pytest.raises(ValueError, match="side"):
        lattice_couplings(2)
    with pytest.raises(ValueError, match="coupling_std"):
        lattice_couplings(3, coupling_std=-1.0)
    with pytest.raises(ValueError, match="num_units"):
        fully_connected_couplings(0)
    with pytest.raises(ValueError, match="coupling_std"):
        fully_connected_couplings(4, coupling_std=float("inf"))


def test_config_composes_and_instantiates():
    cfg = OmegaConf.load(CONF / "spin_glass.yaml")
    assert cfg._target_ == "pfzoo.data.spin_glass"
    defaults = {k: v for k, v in cfg.items() if k != "_target_"}
    assert defaults == dict(
        kind="lattice", side=10, num_units=None, coupling_std=None, bias_std=0.0,
        num_train=20000, num_test=2000, num_chains=1000, burn_in=1000, thin=10, kernel=None, seed=0, zero_field=False,
    )
    data = instantiate(cfg, num_train=30, num_test=10, num_chains=10, burn_in=2, thin=1)
    assert data.name == "spin_glass" and data.train.shape == (30, 100) and data.image_shape == (10, 10)
    clusters = instantiate(cfg, num_train=30, num_test=10, num_chains=10, burn_in=2, thin=1, kernel={"_target_": "pfzoo.kernels.SwendsenWang"})
    assert clusters.train.shape == (30, 100) and not torch.equal(clusters.train, data.train)


def test_zero_field_biases_cancel_the_spin_field():
    """``zero_field``: b = −½ J𝟙, the same couplings as without, zero field on the ±1 spins (so p(x) = p(1 − x)), and the
    thesis's rule holds: its energy xᵀJ'x carries ``J' = −½J − diag(b)`` in these units, whose columns sum to 0."""
    plain, zero = spin_glass_model(side=4, coupling_std=3.0, seed=2), spin_glass_model(side=4, coupling_std=3.0, seed=2, zero_field=True)
    assert torch.equal(zero.symmetric_coupling, plain.symmetric_coupling)
    assert torch.allclose(zero.bias, -0.5 * zero.symmetric_coupling.sum(1))
    thesis = -0.5 * zero.symmetric_coupling - torch.diag(zero.bias)
    assert thesis.sum(0).abs().max() < 1e-5
    assert zero.spin_parameters()[1].abs().max() < 1e-6
    x = torch.bernoulli(torch.full((50, 16), 0.5), generator=_gen(0))
    assert torch.allclose(zero.energy(x), zero.energy(1 - x), atol=1e-4)
    assert not torch.allclose(plain.energy(x), plain.energy(1 - x), atol=1e-4)
    with pytest.raises(ValueError, match="bias_std=0"):
        spin_glass_model(side=4, bias_std=0.5, zero_field=True)
    with pytest.raises(ValueError, match="zero_field"):
        spin_glass_model(side=4, zero_field=1)
    assert instantiate(OmegaConf.load(CONF / "spin_glass.yaml"), **SMALL, zero_field=True).train.shape == (50, 9)
