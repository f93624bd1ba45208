"""Measuring a storage rule's memory: capacity, recall from corrupted cues, storage from corrupted samples, and speed.

Thesis §3.3 (Hillar, Sohl-Dickstein & Koepsell 2012): capacity (Fig. 3.7), recall (Figs. 3.8–3.9), storage of patterns
the rule only sees through corrupted copies (Figs. 3.6/3.10), and how fast each rule gets there.

A *storage rule* maps binary patterns ``[m, n]`` to a :class:`~pfzoo.models.Hopfield` network meant to hold
them (:func:`~pfzoo.training.outer_product_rule`, :func:`~pfzoo.training.perceptron_rule`, or MPF through the
:class:`~pfzoo.training.Trainer`). A pattern is *stored* when it is a fixed point of the asynchronous
dynamics (thesis eq. 3.7); it is *recalled* from a cue when the dynamics run from the cue end exactly on it.

:func:`measure_capacity` draws fresh random fair-bit patterns per trial and count m and asks every rule to
store the same ones; :func:`measure_recall` stores a fixed number of patterns and corrupts each by k random
bit flips; :func:`measure_noisy_storage` hands the rules only noisy copies of the patterns and asks whether the clean
patterns became fixed points; :func:`measure_convergence` traces the flow K and the stored fraction against the
wall time a rule spends. Patterns are float64. The draws come from one ``generator`` in a fixed order (per trial: per m,
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

from pfzoo.data.hopfield_patterns import corrupt, noisy_copies, random_patterns
from pfzoo.training.bit_flip_mpf import BitFlipMPF
from pfzoo.validation import check_finite_number, check_positive_int

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
    """Per rule and pattern count m, the stored fraction and the fitting seconds of every trial; per rule, the seconds in all.

    ``fractions[rule][m]`` and ``fit_seconds[rule][m]`` are lists ``[trials]``; ``seconds[rule]`` sums the rule's calls
    (everything the rule does).
    """

    pattern_counts: list[int]
    fractions: dict[str, dict[int, list[float]]]
    seconds: dict[str, float]
    fit_seconds: dict[str, dict[int, list[float]]]

    def mean_seconds(self) -> dict[str, list[float]]:
        """Per rule, the mean seconds of one fit at each m (in ``pattern_counts`` order)."""
        return {rule: [sum(by_m[m]) / len(by_m[m]) for m in self.pattern_counts] for rule, by_m in self.fit_seconds.items()}

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
    result = CapacityMeasurement(
        counts, {name: {m: [] for m in counts} for name in rules}, {name: 0.0 for name in rules}, {name: {m: [] for m in counts} for name in rules}
    )
    for trial in range(1, trials + 1):
        for m in counts:
            patterns = random_patterns(m, num_units, generator=generator).double()
            for name, rule in rules.items():
                began = time.perf_counter()
                model = rule(patterns)
                elapsed = time.perf_counter() - began
                result.seconds[name] += elapsed
                result.fit_seconds[name][m].append(elapsed)
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


@dataclass
class NoisyStorageMeasurement:
    """Per rule and condition (m patterns, flip probability p), over trials: the clean patterns stored and cleaned up.

    ``stored[rule][i]`` is a list ``[trials]`` of the fractions of the m clean patterns that are fixed points of the
    network the rule built from the noisy copies alone, at ``conditions[i] = (m, p)``; ``cleaned[rule][i]`` the
    fractions of the noisy training copies from which the dynamics reach their clean pattern exactly.
    ``seconds[rule]`` sums the rule's calls.
    """

    conditions: list[tuple[int, float]]
    copies: int
    stored: dict[str, list[list[float]]]
    cleaned: dict[str, list[list[float]]]
    seconds: dict[str, float]

    def mean(self, which: str = "stored") -> dict[str, list[float]]:
        """Per rule, the mean of ``which`` ("stored" or "cleaned") at each condition (in ``conditions`` order)."""
        table = {"stored": self.stored, "cleaned": self.cleaned}[which]
        return {rule: [sum(trials) / len(trials) for trials in by_condition] for rule, by_condition in table.items()}


def measure_noisy_storage(
    rules: Mapping[str, StorageRule],
    num_units: int,
    conditions: Sequence[tuple[int, float]],
    copies: int,
    trials: int,
    *,
    generator: torch.Generator | None = None,
    progress: Callable[[int, NoisyStorageMeasurement], None] | None = None,
) -> NoisyStorageMeasurement:
    """Storage of patterns a rule sees only through corrupted copies (thesis Figs. 3.6/3.10; Hillar et al. 2012).

    For each trial and each condition ``(m, p)`` of ``conditions``: draw m clean patterns of ``num_units`` fair bits,
    then ``copies`` copies of each with every bit flipped independently with probability p
    (:func:`~pfzoo.data.hopfield_patterns.noisy_copies`, ``[m · copies, n]``); every rule gets the same noisy copies
    and never the clean patterns. Measured: the fraction of the clean patterns that are fixed points, and the fraction
    of the noisy copies the dynamics clean up to their own pattern. Rules must not draw from ``generator``.
    ``progress(trial, measurement_so_far)`` is called after each trial (1-based), e.g. to save partial results.
    """
    _check_rules(rules)
    check_positive_int(num_units, "num_units")
    check_positive_int(copies, "copies")
    check_positive_int(trials, "trials")
    conditions = [
        (check_positive_int(m, "conditions' pattern count"), check_finite_number(p, "conditions' flip probability", minimum=0.0, maximum=1.0))
        for m, p in conditions
    ]
    if not conditions:
        raise ValueError("conditions must hold at least one (pattern count, flip probability) pair")
    result = NoisyStorageMeasurement(
        conditions, copies, {name: [[] for _ in conditions] for name in rules}, {name: [[] for _ in conditions] for name in rules},
        {name: 0.0 for name in rules},
    )
    for trial in range(1, trials + 1):
        for i, (m, p) in enumerate(conditions):
            patterns = random_patterns(m, num_units, generator=generator).double()
            samples = noisy_copies(patterns, copies, p, generator=generator)
            targets = patterns.repeat_interleave(copies, dim=0)
            for name, rule in rules.items():
                began = time.perf_counter()
                model = rule(samples)
                result.seconds[name] += time.perf_counter() - began
                result.stored[name][i].append(stored_fraction(model, patterns))
                result.cleaned[name][i].append(recalled_fraction(model, targets, samples))
        logger.info("noisy storage trial %d/%d done", trial, trials)
        if progress is not None:
            progress(trial, result)
    return result


@dataclass
class ConvergencePoint:
    """One rule run for a budget of ``steps`` (L-BFGS iterations or epochs): its wall ``seconds``, the flow ``flow``
    (MPF's K on the patterns) and the ``stored`` fraction of the patterns, each a list ``[trials]``."""

    steps: int
    seconds: list[float]
    flow: list[float]
    stored: list[float]


def measure_convergence(
    fits: Mapping[str, Callable[[Tensor, int], "torch.nn.Module"]],
    budgets: Mapping[str, Sequence[int]],
    num_units: int,
    num_patterns: int,
    trials: int,
    *,
    generator: torch.Generator | None = None,
) -> dict[str, list[ConvergencePoint]]:
    """How fast each rule stores ``num_patterns`` random patterns: K and the stored fraction against wall time.

    ``fits[rule](patterns, steps)`` fits a network from scratch with a budget of ``steps`` (deterministic given the
    patterns, so a larger budget continues the same run: L-BFGS with ``max_iter = steps``, an online rule run for
    ``steps`` epochs with a fixed seed). Every rule is run at every budget of ``budgets[rule]`` on the same patterns,
    fresh each trial. K is :class:`~pfzoo.training.BitFlipMPF`'s flow ``(1/m) Σ_x Σ_i exp(½[E(x) - E(x⁽ⁱ⁾)])``.
    Returns ``{rule: [ConvergencePoint per budget]}``.
    """
    if not fits or set(fits) != set(budgets):
        raise ValueError(f"fits and budgets must name the same non-empty set of rules, got {sorted(fits)} and {sorted(budgets)}")
    check_positive_int(num_units, "num_units")
    check_positive_int(num_patterns, "num_patterns")
    check_positive_int(trials, "trials")
    flow = BitFlipMPF()
    points = {name: [ConvergencePoint(check_positive_int(steps, "budgets"), [], [], []) for steps in budgets[name]] for name in fits}
    for _ in range(trials):
        patterns = random_patterns(num_patterns, num_units, generator=generator).double()
        for name, fit in fits.items():
            for point in points[name]:
                began = time.perf_counter()
                model = fit(patterns, point.steps)
                point.seconds.append(time.perf_counter() - began)
                with torch.no_grad():
                    point.flow.append(flow.loss(model, patterns.to(model.dtype)).item())
                point.stored.append(stored_fraction(model, patterns))
    return points


def half_capacity(pattern_counts: Sequence[int], fractions: Sequence[float]) -> float | None:
    """The pattern count at which the stored fraction first falls below ½, interpolated linearly between measured counts.

    ``pattern_counts`` increasing, ``fractions`` the mean stored fraction at each; ``None`` when it never falls below ½
    (or already is at the first count: then nothing brackets the crossing).
    """
    for (m0, f0), (m1, f1) in zip(zip(pattern_counts, fractions), zip(pattern_counts[1:], fractions[1:])):
        if f0 >= 0.5 > f1:
            return m0 + (f0 - 0.5) / (f0 - f1) * (m1 - m0)
    return None
