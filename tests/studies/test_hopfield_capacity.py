"""Capacity, recall, storage-from-corrupted-samples and convergence measurements of Hopfield storage rules (thesis §3.3)."""

import pytest
import torch

from pfzoo.data import corrupt, noisy_copies, random_patterns
from pfzoo.models import Hopfield
from pfzoo.studies.hopfield_capacity import (
    half_capacity,
    measure_capacity,
    measure_convergence,
    measure_noisy_storage,
    measure_recall,
    recalled_fraction,
    stored_fraction,
)
from pfzoo.training import BitFlipMPF, mpf_online_rule, outer_product_rule, perceptron_rule


def test_stored_fraction_counts_fixed_points():
    patterns = random_patterns(6, 32, generator=torch.Generator().manual_seed(0)).double()
    network = perceptron_rule(patterns)  # stores few patterns of many units exactly
    assert stored_fraction(network, patterns) == 1.0
    flipped = patterns.clone()
    flipped[:3, 0] = 1 - flipped[:3, 0]  # one bit off a stored pattern: its field disagrees, not a fixed point
    assert stored_fraction(network, flipped) == 0.5


def test_recalled_fraction_is_one_for_the_patterns_themselves_and_counts_exact_matches():
    patterns = random_patterns(4, 40, generator=torch.Generator().manual_seed(1)).double()
    network = perceptron_rule(patterns)
    assert recalled_fraction(network, patterns, patterns) == 1.0
    assert recalled_fraction(network, patterns, patterns.flip(0)) == 0.0  # each cue lands on another stored pattern
    with pytest.raises(ValueError, match="cues"):
        recalled_fraction(network, patterns, patterns[:2])


def test_capacity_gives_every_rule_the_same_patterns_drawn_in_order_from_the_generator():
    seen = {"a": [], "b": []}

    def recorder(name):
        def rule(patterns):
            seen[name].append(patterns.clone())
            return outer_product_rule(patterns)
        return rule

    measured = measure_capacity({"a": recorder("a"), "b": recorder("b")}, 16, [2, 5], 2, generator=torch.Generator().manual_seed(7))
    g = torch.Generator().manual_seed(7)
    expected = [random_patterns(m, 16, generator=g).double() for _ in range(2) for m in (2, 5)]
    for name in "ab":
        assert all(torch.equal(got, want) for got, want in zip(seen[name], expected)) and len(seen[name]) == 4
    assert measured.fractions["a"] == measured.fractions["b"]
    assert set(measured.seconds) == {"a", "b"} and all(s >= 0 for s in measured.seconds.values())
    assert all(len(measured.fit_seconds[name][m]) == 2 for name in "ab" for m in (2, 5))
    assert sum(sum(by_m) for by_m in measured.fit_seconds["a"].values()) == pytest.approx(measured.seconds["a"])


def test_capacity_separates_the_outer_product_rule_from_the_perceptron():
    """Hebb's rule stores one pattern always and almost none of n patterns; the perceptron stores n/4 of them."""
    rules = {"outer product": outer_product_rule, "perceptron": perceptron_rule}
    measured = measure_capacity(rules, 32, [1, 8, 32], 3, generator=torch.Generator().manual_seed(0))
    means, every = measured.mean(), measured.stored_in_every_trial()
    assert means["outer product"][0] == 1.0 and every["outer product"][0]
    assert means["outer product"][2] < 0.2
    assert means["perceptron"][1] == 1.0 and every["perceptron"][1]


def test_recall_with_no_flips_equals_storage_and_falls_as_the_cue_is_corrupted():
    rules = {"outer product": outer_product_rule}
    recall = measure_recall(rules, 64, 12, [0, 24], 1, generator=torch.Generator().manual_seed(0))
    stored = measure_capacity(rules, 64, [12], 1, generator=torch.Generator().manual_seed(0)).mean()
    assert recall["outer product"][0] == stored["outer product"][0]  # k = 0 draws nothing: the same patterns
    assert 0 < stored["outer product"][0] < 1  # 12 patterns of 64 units: Hebb's rule keeps some, not all
    corrupted = measure_recall(rules, 64, 6, [0, 24], 4, generator=torch.Generator().manual_seed(0))["outer product"]
    assert corrupted[1] < corrupted[0]


def test_recall_cues_are_drawn_after_the_patterns_of_their_trial():
    cues = []

    class Recorder(Hopfield):
        def recall(self, x, *, max_sweeps=100):
            cues.append(x.clone())
            return super().recall(x, max_sweeps=max_sweeps)

    def rule(patterns):
        network = outer_product_rule(patterns)
        recorder = Recorder(patterns.shape[1], init_std=0.0).double()
        recorder.load_state_dict(network.state_dict())
        return recorder

    measure_recall({"r": rule}, 12, 3, [0, 2], 1, generator=torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)
    patterns = random_patterns(3, 12, generator=g).double()
    assert torch.equal(cues[0], patterns) and torch.equal(cues[1], corrupt(patterns, 2, generator=g))


def test_bad_rules_raise_value_error():
    with pytest.raises(ValueError, match="rules"):
        measure_capacity({}, 8, [1], 1)
    with pytest.raises(ValueError, match="rules"):
        measure_recall({"x": 3}, 8, 2, [0], 1)
    with pytest.raises(ValueError, match="rules"):
        measure_noisy_storage({}, 8, [(1, 0.1)], 2, 1)
    with pytest.raises(ValueError, match="flip probability"):
        measure_noisy_storage({"r": outer_product_rule}, 8, [(1, 1.5)], 2, 1)


def test_noisy_storage_hands_the_rules_only_noisy_copies_drawn_after_their_patterns():
    seen = []

    def rule(samples):
        seen.append(samples.clone())
        return outer_product_rule(samples)

    calls = []
    measured = measure_noisy_storage({"r": rule}, 20, [(3, 0.2), (2, 0.0)], 4, 1, generator=torch.Generator().manual_seed(3),
                                     progress=lambda trial, so_far: calls.append((trial, len(so_far.stored["r"][0]))))
    assert calls == [(1, 1)]
    g = torch.Generator().manual_seed(3)
    first = random_patterns(3, 20, generator=g).double()
    assert torch.equal(seen[0], noisy_copies(first, 4, 0.2, generator=g))
    second = random_patterns(2, 20, generator=g).double()
    assert torch.equal(seen[1], noisy_copies(second, 4, 0.0, generator=g))
    assert measured.conditions == [(3, 0.2), (2, 0.0)] and measured.copies == 4
    # p = 0: four exact copies of two patterns, Hebb's rule holds both and every copy is already its pattern
    assert measured.stored["r"][1] == [1.0] and measured.cleaned["r"][1] == [1.0]


def test_the_outer_product_rule_averages_the_noise_of_many_copies_of_few_patterns_away():
    rules = {"outer product": outer_product_rule}
    measured = measure_noisy_storage(rules, 64, [(2, 0.1), (2, 0.45)], 30, 3, generator=torch.Generator().manual_seed(0))
    stored, cleaned = measured.mean("stored")["outer product"], measured.mean("cleaned")["outer product"]
    assert stored[0] == 1.0 and cleaned[0] > 0.95  # (1 - 2p)² of the signal survives at p = 0.1
    assert cleaned[1] < cleaned[0]


def test_convergence_traces_k_and_the_stored_fraction_per_budget():
    fits = {
        "local": lambda p, steps: mpf_online_rule(p, max_epochs=steps, stop_when_stored=False, generator=torch.Generator().manual_seed(0)),
        "perceptron": lambda p, steps: perceptron_rule(p, max_epochs=steps),
    }
    points = measure_convergence(fits, {"local": [1, 100], "perceptron": [200]}, 24, 12, 2, generator=torch.Generator().manual_seed(1))
    assert [p.steps for p in points["local"]] == [1, 100] and all(len(p.flow) == 2 for p in points["local"])
    assert all(late < early for early, late in zip(points["local"][0].flow, points["local"][1].flow))
    assert points["local"][1].stored == [1.0, 1.0] and points["perceptron"][0].stored == [1.0, 1.0]
    g = torch.Generator().manual_seed(1)
    patterns = random_patterns(12, 24, generator=g).double()  # the first trial's patterns: recompute K of its first fit
    flow = BitFlipMPF().loss(fits["local"](patterns, 1), patterns).item()
    assert points["local"][0].flow[0] == pytest.approx(flow, rel=1e-12)
    with pytest.raises(ValueError, match="budgets"):
        measure_convergence(fits, {"local": [1]}, 8, 2, 1)


def test_half_capacity_interpolates_the_first_fall_below_one_half():
    assert half_capacity([10, 20, 30], [1.0, 0.75, 0.25]) == 25.0
    assert half_capacity([10, 20], [1.0, 0.9]) is None and half_capacity([10, 20], [0.4, 0.1]) is None
