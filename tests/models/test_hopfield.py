"""Hopfield dynamics against brute force: energy descent, fixed points by explicit single flips, recall."""

from functools import partial

import pytest
import torch
from factories import all_binary_states, random_hopfield

from pfzoo.models import Hopfield
from pfzoo.models.ising import independent_sets


def ring_mask(num_units):
    """Nearest neighbours on a ring: an even ring is two-colourable, so sweeps update blocks of several units."""
    mask = torch.zeros(num_units, num_units, dtype=torch.float64)
    for i in range(num_units):
        mask[i, (i + 1) % num_units] = mask[(i + 1) % num_units, i] = 1.0
    return mask


all_states = partial(all_binary_states, msb_first=True)  # first unit = top bit, as these tests were written


def random_states(num_states, num_units, seed):
    return (torch.rand(num_states, num_units, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) < 0.5).double()


MODELS = {
    "dense-12": lambda: random_hopfield(12, seed=1),
    "ring-12": lambda: random_hopfield(12, seed=2, coupling_mask=ring_mask(12)),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_update_sweep_never_increases_the_energy(name):
    model = MODELS[name]()
    x = random_states(500, 12, seed=3)
    changed = False
    for _ in range(10):
        updated = model.update_sweep(x)
        assert set(updated.unique().tolist()) <= {0.0, 1.0}
        assert (model.energy(updated) <= model.energy(x) + 1e-12).all()
        changed |= not torch.equal(updated, x)
        x = updated
    assert changed


@pytest.mark.parametrize("name", list(MODELS))
def test_update_sweep_equals_a_unit_by_unit_sweep_in_block_order(name):
    model = MODELS[name]()
    blocks = independent_sets(model.symmetric_coupling)
    if name.startswith("ring"):
        assert len(blocks) == 2
    x = random_states(200, 12, seed=4)
    expected = x.clone()
    with torch.no_grad():
        for unit in torch.cat(blocks).tolist():
            field = model.local_fields(expected)[:, unit]
            expected[:, unit] = torch.where(field > 0, 1.0, torch.where(field < 0, 0.0, expected[:, unit]))
    assert torch.equal(model.update_sweep(x), expected)
    assert torch.equal(model.update_sweep(x, blocks=blocks), expected)


@pytest.mark.parametrize("name", list(MODELS))
def test_recall_reaches_a_fixed_point_from_random_states(name):
    model = MODELS[name]()
    x = random_states(500, 12, seed=5)
    start = x.clone()
    recalled = model.recall(x)
    assert torch.equal(x, start)  # the input is not modified
    assert model.is_fixed_point(recalled).all()
    assert torch.equal(model.update_sweep(recalled), recalled)
    assert (model.energy(recalled) <= model.energy(x) + 1e-12).all()
    assert not model.is_fixed_point(x).all()  # the test starts away from the fixed points


def test_is_fixed_point_agrees_with_explicit_single_flips():
    """Fixed point ⇔ no single flip lowers the energy, checked on all 2^8 states by flipping each unit."""
    model = random_hopfield(8, seed=6)
    x = all_states(8)
    energies = model.energy(x)
    no_flip_lowers = torch.ones(x.shape[0], dtype=torch.bool)
    for i in range(8):
        flipped = x.clone()
        flipped[:, i] = 1 - flipped[:, i]
        no_flip_lowers &= model.energy(flipped) >= energies
    fixed = model.is_fixed_point(x)
    assert torch.equal(fixed, no_flip_lowers)
    assert 0 < fixed.sum() < x.shape[0]  # both kinds of states occur
    unchanged = (model.update_sweep(x) == x).all(-1)  # a non-fixed state's first disagreeing unit flips
    assert torch.equal(fixed, unchanged)


def test_zero_field_keeps_the_unit():
    model = Hopfield.from_tensors(torch.zeros(3, 3), torch.tensor([0.0, 1.0, -1.0]))
    x = torch.tensor([[0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    assert torch.equal(model.update_sweep(x), torch.tensor([[0.0, 1.0, 0.0], [1.0, 1.0, 0.0]]))
    assert model.is_fixed_point(x).tolist() == [False, True]


def hand_stored_hopfield():
    """Two orthogonal 16-unit patterns stored by the Hebb rule, written out in 0/1 units by hand.

    Spins ``s = 2x - 1``, ``J_s = Σ_p s_p s_pᵀ`` (zero diagonal); ``-½ sᵀJ_s s = -½ xᵀ(4J_s)x + (2 J_s 1)·x + const``.
    """
    patterns = torch.tensor([[1.0] * 8 + [0.0] * 8, [1.0, 0.0] * 8])
    spins = 2 * patterns - 1
    spin_coupling = spins.T @ spins
    spin_coupling.fill_diagonal_(0)
    return patterns, Hopfield.from_tensors(4 * spin_coupling, -2 * spin_coupling.sum(1))


def test_hand_stored_patterns_are_recalled_from_every_one_bit_corruption():
    patterns, model = hand_stored_hopfield()
    assert model.is_fixed_point(patterns).all()
    for pattern in patterns:
        corrupted = pattern.repeat(16, 1)
        corrupted[torch.arange(16), torch.arange(16)] = 1 - corrupted[torch.arange(16), torch.arange(16)]
        assert not model.is_fixed_point(corrupted).any()
        assert torch.equal(model.recall(corrupted), pattern.expand(16, -1))
        assert torch.equal(model.recall(corrupted, max_sweeps=1), pattern.expand(16, -1))  # one sweep suffices


def test_recall_stops_after_max_sweeps():
    model = random_hopfield(12, seed=7)
    x = random_states(200, 12, seed=8)
    assert torch.equal(model.recall(x, max_sweeps=1), model.update_sweep(x))


@pytest.mark.parametrize(
    "bad, message",
    [(torch.full((2, 4), 0.5), "binary"), (torch.ones(2, 5), "4 columns"), (torch.ones(4), "shape")],
)
def test_bad_states_raise_value_error_naming_argument(bad, message):
    model = Hopfield(4)
    for method in (model.recall, model.is_fixed_point):
        with pytest.raises(ValueError, match=f"^x .*{message}|^x must.*{message}"):
            method(bad)
    with pytest.raises(ValueError, match="max_sweeps"):
        model.recall(torch.ones(2, 4), max_sweeps=0)
