"""A path's target with a tempered log density: replica exchange over the levels of any annealing path."""

import pytest
import torch
from factories import all_binary_states, random_rbm

from pfzoo.kernels import STATISTICS_LOG_DENSITY, TEMPERED_LOG_DENSITY, ParallelTempering
from pfzoo.models import Ising
from pfzoo.paths import build
from pfzoo.paths.tempered import TemperedPathTarget

LEVELS = (0.25, 0.5, 1.0)


def paths():
    rbm = random_rbm(5, 3, scale=1.5, seed=1)
    ising = Ising(4, generator=torch.Generator().manual_seed(2)).double()
    return {"rbm": build(rbm, kind="geometric", base="uniform")[0], "ising": build(ising, kind="geometric", base="uniform")[0]}


@pytest.mark.parametrize("name", ["rbm", "ising"])
def test_the_tempered_density_gives_the_paths_increments_at_every_level(name):
    path = paths()[name]
    target = TemperedPathTarget(path, LEVELS)
    assert TEMPERED_LOG_DENSITY in target.offers and path.target.offers <= target.offers
    x = path.draw_base(7, generator=torch.Generator().manual_seed(0))
    stats = path.target.statistics(x)
    for low, high in zip(LEVELS[:-1], LEVELS[1:]):  # what an exchange reads: differences across β at fixed positions
        difference = target.log_density(x, beta=high) - target.log_density(x, beta=low)
        torch.testing.assert_close(difference, path.log_weight_increment(stats, low, high))
    rows = torch.tensor([[0.25, 1.0], [0.5, 0.25], [1.0, 1.0], [0.25, 0.5], [0.5, 0.5], [1.0, 0.25], [0.25, 0.25]], dtype=torch.float64)
    columns = target.log_density(x, beta=rows)
    expected = torch.stack([torch.stack([target.log_density(x[i:i + 1], beta=b.item())[0] for b in row]) for i, row in enumerate(rows)])
    torch.testing.assert_close(columns, expected)


@pytest.mark.parametrize("batch_replicas", [True, False], ids=["one-batch", "replica-by-replica"])
def test_parallel_tempering_on_a_path_target_samples_each_level_exactly(batch_replicas):
    """By enumeration: the β = 1 replica's visible frequencies over 250 PT steps of 400 chains on the RBM path match p_1
    within 0.02 (the chains' own error is about 0.003), and the levels do exchange; whether the path's conditionals
    advance all levels as one batch (a β per chain) or level by level."""
    path = paths()["rbm"]
    target = TemperedPathTarget(path, LEVELS)
    tempering = ParallelTempering(path.kernel, LEVELS, batch_replicas=batch_replicas)
    generator = torch.Generator().manual_seed(3)
    state = tempering.init_replicas(torch.stack([path.draw_base(400, generator=generator) for _ in LEVELS]), target, generator=generator)
    counts = torch.zeros(32, dtype=torch.float64)
    powers = 2 ** torch.arange(4, -1, -1, dtype=torch.float64)
    for step in range(300):
        state, info = tempering.step(state, target, generator=generator)
        if step >= 50:
            counts += torch.bincount((state.position.double() @ powers).long(), minlength=32).double()
    states = all_binary_states(5, msb_first=True)
    frequencies = counts / counts.sum()
    reference = torch.softmax(-random_rbm(5, 3, scale=1.5, seed=1).free_energy(states).double(), 0)
    assert (frequencies - reference).abs().max() < 0.02
    assert info.swap_accept_prob.max() > 0


def test_exchanges_on_an_rbm_path_read_the_states_kept_statistics_and_change_nothing_else(monkeypatch):
    """An RBM path's statistics do not depend on β, so its tempered target lets the exchanges read what each sweep kept:
    the same replicas, bit for bit, as when every exchange recomputes them, with one statistics product per PT step
    (every level advanced as one batch) instead of two. The Ising path makes no such claim and keeps recomputing."""
    assert not paths()["ising"].beta_free_statistics
    path = paths()["rbm"]
    statistics = type(path.target).statistics
    calls = {"count": 0}

    def counted(self, v, **options):
        calls["count"] += 1
        return statistics(self, v, **options)

    monkeypatch.setattr(type(path.target), "statistics", counted)
    runs = []
    for keep in (True, False):
        target = TemperedPathTarget(path, LEVELS)
        if not keep:
            target.offers = target.offers - {STATISTICS_LOG_DENSITY}
        tempering = ParallelTempering(path.kernel, LEVELS)
        generator = torch.Generator().manual_seed(4)
        state = tempering.init_replicas(torch.stack([path.draw_base(50, generator=generator) for _ in LEVELS]), target, generator=generator)
        calls["count"] = 0
        for _ in range(30):
            state, _ = tempering.step(state, target, generator=generator)
        runs.append((state.replicas.position, calls["count"]))
    assert torch.equal(runs[0][0], runs[1][0])
    assert (runs[0][1], runs[1][1]) == (30, 60)


def one_pass_cases():
    from pfzoo.models import ICA

    ica = ICA(3, generator=torch.Generator().manual_seed(0))
    rbm = random_rbm(6, 4, scale=2.0, seed=5).float()
    return {
        "rbm-float32": build(rbm, kind="geometric", base="uniform")[0],
        "rbm-visible-summed-out": build(rbm, kind="geometric", base="uniform", marginalize="visible")[0],
        "ising": paths()["ising"],
        "ica": build(ica, kind="geometric", base="auto", data=ica.sample(50, generator=torch.Generator().manual_seed(1)))[0],
    }


@pytest.mark.parametrize("name", ["rbm-float32", "rbm-visible-summed-out", "ising", "ica"])
def test_the_one_pass_tempered_density_equals_the_increments_from_zero(name):
    """``tempered_log_density`` at a β per row and column (what an exchange and a stepping-stone ratio read in one pass)
    equals each row's weight increment from 0 to its β, level by level, to the rounding of the model's dtype."""
    path = one_pass_cases()[name]
    state = path.sample_base(5, generator=torch.Generator().manual_seed(6))
    for _ in range(3):  # states away from the base
        state, _ = path.transition(state, 0.7, generator=torch.Generator().manual_seed(7))
    stats = path.statistics(state)
    betas = torch.tensor([[0.0, 1.0], [0.3, 0.05], [1.0, 0.7], [0.5, 0.5], [0.9, 0.2]], dtype=torch.float64)
    expected = torch.stack([torch.stack([path.log_weight_increment(stats, 0.0, b.item())[i] for b in row]) for i, row in enumerate(betas)])
    tolerance = 1e-5 if name.startswith("rbm") else 1e-10  # the float32 RBM's own increments round in float32
    torch.testing.assert_close(path.tempered_log_density(stats, betas), expected, atol=tolerance, rtol=0)


def test_the_rbm_paths_one_pass_density_in_blocks_of_rows_gives_the_same_numbers(monkeypatch):
    """Blocks of a few rows (what thousands of chains over a ladder take) give what one block gives, to the last bit."""
    import pfzoo.paths.base as path_base

    path = one_pass_cases()["rbm-float32"]
    stats = path.statistics(path.sample_base(50, generator=torch.Generator().manual_seed(0)))
    beta = torch.rand(50, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    whole = path.tempered_log_density(stats, beta)
    monkeypatch.setattr(path_base, "TEMPERED_BLOCK_ELEMENTS", 17)  # two rows of 2 × 4 a block
    assert torch.equal(path.tempered_log_density(stats, beta), whole)
