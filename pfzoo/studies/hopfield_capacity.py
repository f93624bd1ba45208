"""Measuring a storage rule's memory: capacity (stored fraction) and recall from corrupted cues (thesis Figs. 3.7, 3.9).

A *storage rule* maps binary patterns ``[m, n]`` to a :class:`~pfzoo.models.Hopfield` network meant to hold
them (:func:`~pfzoo.training.outer_product_rule`, :func:`~pfzoo.training.perceptron_rule`, or MPF through the
:class:`~pfzoo.training.Trainer`). A pattern is *stored* when it is a fixed point of the asynchronous
dynamics (thesis eq. 3.7); it is *recalled* from a cue when the dynamics run from the cue end exactly on it.

:func:`measure_capacity` draws fresh random fair-bit patterns per trial and count m and asks every rule to
store the same ones; :func:`measure_recall` stores a fixed number of patterns and corrupts each by k random
bit flips. Patterns are float64. The draws come from one ``generator`` in a fixed order (per trial: per m,
the patterns; per rule, nothing — rules must not draw from it; then, for recall, per k the cues), so a seed
fixes every pattern and cue whatever the rules do.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch
from torch import Tensor

from pfzoo.data.hopfield_patterns import corrupt, random_patterns
from pfzoo.validation import check_positive_int

logger = logging.getLogger(__name__)

StorageRule = Callable[[Tensor], "torch.nn.Module"]  # patterns [m, n] (0/1, float64) -> a Hopfield network


def stored_fraction(model, patterns: Tensor) -> float:
    """The fraction of the rows of ``patterns [m, n]`` that are fixed points of ``model``'s dynamics."""
    return model.is_fixed_point(patterns.to(model.dtype)).double().mean().item()


def recalled_fraction(model, patterns: Tensor, cues: Tensor) -> float:
    """The fraction of ``cues [m, n]`` from which ``model``'s dynamics reach exactly the matching row of ``patterns [m, n]``."""
    if cues.shape != patterns.shape:
        raise ValueError(f"cues must have the shape of patterns {tuple(patterns.shape)}, got {tuple(cues.shape)}")
    recalled = model.recall(cues.to(model.dtype))
    return (recalled == patterns.to(model.dtype)).all(-1).double().mean().item()


@dataclass
class CapacityMeasurement:
    """Per rule and pattern count m, the stored fraction of every trial; per rule, the seconds spent fitting.

    ``fractions[rule][m]`` is a list ``[trials]``; ``seconds[rule]`` sums the rule's calls (everything the rule does).
    """

    pattern_counts: list[int]
    fractions: dict[str, dict[int, list[float]]]
    seconds: dict[str, float]

    def mean(self) -> dict[str, list[float]]:
        """Per rule, the mean stored fraction at each m (in ``pattern_counts`` order)."""
        return {rule: [sum(by_m[m]) / len(by_m[m]) for m in self.pattern_counts] for rule, by_m in self.fractions.items()}

    def stored_in_every_trial(self) -> dict[str, list[bool]]:
        """Per rule, whether all m patterns were stored in every trial, at each m."""
        return {rule: [min(by_m[m]) == 1.0 for m in self.pattern_counts] for rule, by_m in self.fractions.items()}


def _check_rules(rules: Mapping[str, StorageRule]) -> None:
    if not rules or not all(isinstance(name, str) and callable(rule) for name, rule in rules.items()):
        raise ValueError("rules must be a non-empty mapping of names to callables patterns [m, n] -> Hopfield network")


def measure_capacity(
    rules: Mapping[str, StorageRule],
    num_units: int,
    pattern_counts: Sequence[int],
    trials: int,
    *,
    generator: torch.Generator | None = None,
    progress: Callable[[int, CapacityMeasurement], None] | None = None,
) -> CapacityMeasurement:
    """Stored fractions of m random patterns of ``num_units`` fair bits, for every m of ``pattern_counts`` (Fig. 3.7).

    For each of ``trials`` trials and each m, draws patterns ``[m, num_units]`` from ``generator`` and hands the same
    patterns to every rule. ``progress(trial, measurement_so_far)`` is called after each trial (1-based).
    """
    _check_rules(rules)
    check_positive_int(num_units, "num_units")
    check_positive_int(trials, "trials")
    counts = [check_positive_int(m, "pattern_counts") for m in pattern_counts]
    result = CapacityMeasurement(counts, {name: {m: [] for m in counts} for name in rules}, {name: 0.0 for name in rules})
    for trial in range(1, trials + 1):
        for m in counts:
            patterns = random_patterns(m, num_units, generator=generator).double()
            for name, rule in rules.items():
                began = time.perf_counter()
                model = rule(patterns)
                result.seconds[name] += time.perf_counter() - began
                result.fractions[name][m].append(stored_fraction(model, patterns))
        logger.info("capacity trial %d/%d done", trial, trials)
        if progress is not None:
            progress(trial, result)
    return result


def measure_recall(
    rules: Mapping[str, StorageRule],
    num_units: int,
    num_patterns: int,
    flips: Sequence[int],
    trials: int,
    *,
    generator: torch.Generator | None = None,
) -> dict[str, list[float]]:
    """Per rule, the fraction of cues recalled exactly with k bits flipped, for every k of ``flips`` (Fig. 3.9).

    Each trial draws ``num_patterns`` patterns, stores them with every rule, and for each k corrupts every
    pattern by k distinct random flips (k = 0: the patterns themselves, no draw); the fraction is over
    ``trials × num_patterns`` cues. Returns ``{rule: [fraction per k]}``.
    """
    _check_rules(rules)
    check_positive_int(num_patterns, "num_patterns")
    check_positive_int(trials, "trials")
    recalled = {name: {k: [] for k in flips} for name in rules}
    for _ in range(trials):
        patterns = random_patterns(num_patterns, num_units, generator=generator).double()
        for name, rule in rules.items():
            model = rule(patterns)
            for k in flips:
                cues = corrupt(patterns, k, generator=generator) if k else patterns
                recalled[name][k].append(recalled_fraction(model, patterns, cues))
    return {name: [sum(by_k[k]) / len(by_k[k]) for k in flips] for name, by_k in recalled.items()}
