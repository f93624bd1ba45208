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

:func:`run_experiments` runs all four as ``scripts/reproduce_hopfield.py`` does, with the four rules of
:func:`storage_rules`, and hands back each experiment's section of results.json (rendered by
:mod:`pfzoo.studies.hopfield_report`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import partial
from typing import Callable, Mapping, Sequence

import torch
from omegaconf import DictConfig
from torch import Tensor

from pfzoo.data import DataSplits
from pfzoo.data.hopfield_patterns import corrupt, noisy_copies, random_patterns
from pfzoo.training import mpf_online_rule, outer_product_rule, perceptron_rule
from pfzoo.training.bit_flip_mpf import BitFlipMPF
from pfzoo.training.recipe import fit_recipe
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


# -- the experiments of scripts/reproduce_hopfield.py, as results.json stores them --------------------------------------

EXPERIMENTS = ("capacity", "recall", "noisy", "convergence")
PATTERN_COUNTS = [1, 2, 4, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64, 72, 80, 90, 100, 110, 120]
LBFGS_BUDGETS = [1, 2, 5, 10, 20, 50, 100, 200, 500]
"""The convergence experiment's L-BFGS iteration budgets of MPF."""
EPOCH_BUDGETS = [1, 2, 5, 10, 20, 50, 100, 200]
"""The convergence experiment's epoch budgets of the MPF local rule and the perceptron."""
MPF = "MPF (L-BFGS)"

MpfRecipe = Callable[[int], DictConfig]  # L-BFGS iterations at most -> the composed recipe conf/experiment/hopfield_mpf.yaml


def fit_mpf(cfg: DictConfig, patterns: Tensor) -> torch.nn.Module:
    """A Hopfield network fitted to ``patterns [m, n]`` by the composed MPF recipe ``cfg`` in the patterns' dtype (float64)."""
    return fit_recipe(cfg, DataSplits("hopfield_patterns", train=patterns, test=patterns), dtype=patterns.dtype).model


def _local_rule(settings: Mapping, patterns: Tensor, *, learning_rate: float, max_epochs: int, stop_when_stored: bool = True):
    # its own generator, seeded alike for every fit: rules must not draw from the study's generator
    return mpf_online_rule(patterns, learning_rate=learning_rate, max_epochs=max_epochs, batch_size=settings["local_batch_size"],
                           stop_when_stored=stop_when_stored, max_flip_rate=settings["local_max_flip_rate"],
                           generator=torch.Generator().manual_seed(settings["seed"] + 1))


def storage_rules(settings: Mapping, mpf_cfg: DictConfig, *, noisy: bool = False) -> dict[str, StorageRule]:
    """The four rules the experiments compare, from a run's ``settings`` (results.json's): MPF by the recipe ``mpf_cfg``,
    the MPF local rule, the outer product and the perceptron; ``noisy``: with the corrupted-sample experiment's epochs and
    step (noisy copies are never all stable, so the perceptron and the local rule run their epochs out)."""
    if noisy:
        local = partial(_local_rule, settings, learning_rate=settings["noisy_local_learning_rate"],
                        max_epochs=settings["noisy_local_epochs"], stop_when_stored=False)
        perceptron_epochs = settings["noisy_perceptron_epochs"]
    else:
        local = partial(_local_rule, settings, learning_rate=settings["local_learning_rate"], max_epochs=settings["local_epochs"])
        perceptron_epochs = settings["perceptron_epochs"]
    return {MPF: partial(fit_mpf, mpf_cfg), "MPF local rule": local, "outer product": outer_product_rule,
            "perceptron": partial(perceptron_rule, max_epochs=perceptron_epochs)}


def run_experiments(settings: Mapping, mpf_recipe: MpfRecipe, *, on_section: Callable[[str, dict], None],
                    on_progress: Callable[[str], None] = lambda line: None) -> None:
    """Run the experiments ``settings["experiments"]`` names, in :data:`EXPERIMENTS` order, from one generator seeded with
    ``settings["seed"]``; ``settings`` are a run's (results.json's; the arguments of scripts/reproduce_hopfield.py).

    ``on_section(name, section)`` receives each experiment's section of results.json when it is done, and the
    corrupted-sample section again after every trial (so a run stopped early still leaves its trials);
    ``on_progress(line)`` a line after every capacity trial. ``mpf_recipe(max_iter)`` composes the MPF recipe; the
    convergence experiment composes its budgets before timing, so a fit's seconds are the rule's, not Hydra's.
    """
    n, experiments = settings["num_units"], settings["experiments"]
    mpf_cfg = mpf_recipe(settings["mpf_iterations"])
    rules = storage_rules(settings, mpf_cfg)
    generator = torch.Generator().manual_seed(settings["seed"])
    if "capacity" in experiments:
        counts = settings["pattern_counts"]
        shown = (counts[len(counts) // 2], counts[-1])

        def progress(trial: int, measured: CapacityMeasurement) -> None:
            on_progress(f"trial {trial}/{settings['trials']}: " + ", ".join(
                f"{name} m={m}: {measured.fractions[name][m][-1]:.2f}" for name in rules for m in shown))

        capacity = measure_capacity(rules, n, counts, settings["trials"], generator=generator, progress=progress)
        on_section("capacity", {
            "fractions": {name: dict(zip(counts, fractions)) for name, fractions in capacity.mean().items()},
            "stored_in_every_trial": {name: dict(zip(counts, flags)) for name, flags in capacity.stored_in_every_trial().items()},
            "fit_seconds": {name: dict(zip(counts, seconds)) for name, seconds in capacity.mean_seconds().items()},
            "seconds_total": capacity.seconds,
        })
    if "recall" in experiments:
        flips = settings["recall_flips"]
        recall = measure_recall(rules, n, settings["recall_patterns"], flips, settings["recall_trials"], generator=generator)
        on_section("recall", {name: dict(zip(flips, fractions)) for name, fractions in recall.items()})
    if "noisy" in experiments:
        p_fixed = settings["noisy_flip_probability"]
        conditions = [(settings["noisy_patterns"], p) for p in settings["noisy_flip_probabilities"]]
        conditions += [(m, p_fixed) for m in settings["noisy_pattern_counts"] if (m, p_fixed) not in conditions]

        def save_noisy(trial: int, noisy: NoisyStorageMeasurement) -> None:
            on_section("noisy", {
                "conditions": [list(c) for c in conditions],
                "trials_done": trial,
                "stored": noisy.mean("stored"),
                "cleaned": noisy.mean("cleaned"),
                "stored_in_every_trial": {name: [min(trials) == 1.0 for trials in by_c] for name, by_c in noisy.stored.items()},
                "seconds_total": noisy.seconds,
            })

        measure_noisy_storage(storage_rules(settings, mpf_cfg, noisy=True), n, conditions, settings["noisy_copies"],
                              settings["noisy_trials"] or settings["trials"], generator=generator, progress=save_noisy)
    if "convergence" in experiments:
        budget_cfgs = {steps: mpf_recipe(steps) for steps in LBFGS_BUDGETS}
        fits = {
            MPF: lambda patterns, steps: fit_mpf(budget_cfgs[steps], patterns),
            "MPF local rule": lambda patterns, steps: _local_rule(settings, patterns, learning_rate=settings["local_learning_rate"],
                                                                  max_epochs=steps, stop_when_stored=False),
            "perceptron": lambda patterns, steps: perceptron_rule(patterns, max_epochs=steps),
        }
        budgets = {MPF: LBFGS_BUDGETS, "MPF local rule": EPOCH_BUDGETS, "perceptron": EPOCH_BUDGETS}
        m = settings["convergence_patterns"] or n
        points = measure_convergence(fits, budgets, n, m, settings["trials"], generator=generator)
        on_section("convergence", {"num_patterns": m, "rules": {name: [
            {"steps": p.steps, "seconds": _mean(p.seconds), "flow": _mean(p.flow), "stored": _mean(p.stored)} for p in by_budget]
            for name, by_budget in points.items()}})


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)
