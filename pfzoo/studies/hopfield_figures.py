"""Thesis Figs. 3.7–3.10 at their stated settings, with each rule's bare optimisation loop (no Trainer around it).

- :func:`measure_training_time` (Figs. 3.7–3.8): n = 64, m from 1 to 120, t = 20 trials: per rule and m, the fraction
  stored and the seconds of the fit, split into what dominates it (MPF: L-BFGS iterations, evaluations of K and its
  gradient and their seconds; PER: full-batch epochs; OPR: one matrix product).
- :func:`measure_recall_by_load` (Fig. 3.9): n = 128, "perfectly trained" networks for four values of m (the thesis's
  text does not give them), the fraction of cues recovered exactly against the bits flipped (0 to 64).
- :func:`measure_corrupted_training` (Fig. 3.10): n = 64, the rules see only copies with exactly 20 of 64 bits flipped
  (31 %), t = 13 trials; the fraction of patterns and of bits recalled against m.

The rules: :func:`bare_mpf` (full-batch L-BFGS on :class:`~pfzoo.training.BitFlipMPF`'s K, the settings of the recipe
conf/experiment/hopfield_mpf.yaml: from J = 0, b = 0, strong-Wolfe line search, history 20, at most 2000 iterations,
torch's default tolerances), :func:`~pfzoo.training.perceptron_rule` (PER, symmetrised, full batch) and
:func:`~pfzoo.training.outer_product_rule` (OPR). Patterns are float64; draws come from one generator in a fixed order
(rules draw nothing), so a seed fixes every pattern, copy and cue.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import torch
from torch import Tensor

from pfzoo.data.hopfield_patterns import corrupt, noisy_copies, random_patterns
from pfzoo.models.hopfield import Hopfield
from pfzoo.studies.hopfield_capacity import measure_recall, stored_fraction
from pfzoo.studies.hopfield_images import run_image_experiment
from pfzoo.training import outer_product_rule, perceptron_fit
from pfzoo.training.bit_flip_mpf import BitFlipMPF
from pfzoo.validation import check_binary, check_positive_int

logger = logging.getLogger(__name__)

MPF, PER, OPR = "MPF", "PER", "OPR"
"""The thesis's names of the rules (Figs. 3.7–3.10)."""


@dataclass
class FitCost:
    """What one fit spent: wall ``seconds``; ``steps`` (L-BFGS iterations, PER epochs, 1 for OPR); ``evaluations`` of
    the objective and its gradient (MPF; PER and OPR: one field computation per step) and the ``evaluation_seconds``
    inside them (MPF only; ``None`` otherwise)."""

    seconds: float = 0.0
    steps: int = 0
    evaluations: int = 0
    evaluation_seconds: float | None = None


def bare_mpf(patterns: Tensor, *, max_iter: int = 2000, history_size: int = 20, cost: FitCost | None = None) -> Hopfield:
    """Store ``patterns [m, n]`` (0/1, float64) by minimising K (thesis eq. 3.10, :class:`~pfzoo.training.BitFlipMPF`,
    single-bit flips) with one ``torch.optim.LBFGS`` step of at most ``max_iter`` iterations from J = 0, b = 0.

    The loop the recipe's Trainer runs, without its run folder, metrics and checkpoint. ``cost`` (if given) receives
    the iterations, the closure calls and the seconds spent inside them.
    """
    check_binary(patterns, "patterns")
    n = patterns.shape[1]
    zeros = torch.zeros(n, n, dtype=patterns.dtype)
    model = Hopfield.from_tensors(zeros, zeros[0])
    objective = BitFlipMPF()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=max_iter, history_size=history_size, line_search_fn="strong_wolfe")
    spent = [0, 0.0]

    def closure() -> Tensor:
        began = time.perf_counter()
        optimizer.zero_grad()
        loss = objective.loss(model, patterns)
        loss.backward()
        spent[0] += 1
        spent[1] += time.perf_counter() - began
        return loss

    optimizer.step(closure)
    if cost is not None:
        cost.steps, cost.evaluations, cost.evaluation_seconds = optimizer.state_dict()["state"][0]["n_iter"], spent[0], spent[1]
    return model


def counted_perceptron(patterns: Tensor, *, max_epochs: int = 2000, cost: FitCost | None = None) -> Hopfield:
    """:func:`~pfzoo.training.perceptron_fit` (full batch, symmetrised), with the epochs it ran put in ``cost.steps``
    (``max_epochs`` when some pattern stayed unstable)."""
    fit = perceptron_fit(patterns, max_epochs=max_epochs)
    if cost is not None:
        cost.steps = fit.epochs
        cost.evaluations = fit.epochs + fit.stable  # the last epoch finds no error and stops
    return fit.model


def online_perceptron(patterns: Tensor, *, max_epochs: int = 2000, cost: FitCost | None = None) -> Hopfield:
    """The perceptron rule applied one pattern at a time ("iterating over D a learning rule that updates a network's
    weights and thresholds given a training pattern", thesis §3.4.1), symmetrised as :func:`~pfzoo.training.perceptron_rule`.

    From J_s = 0, θ = 0 (spins ``s = 2x - 1``), each epoch visits the patterns in order; for pattern s the units with
    ``s_i h_i ≤ 0`` (``h = J_s s + θ``) are its errors e, and ``ΔJ_s = ½ (e⊙s sᵀ + s (e⊙s)ᵀ)`` (zero diagonal),
    ``Δθ = e⊙s`` are applied at once, before the next pattern. Stops after the first epoch with no error (its epochs in
    ``cost.steps``, the patterns visited in ``cost.evaluations``) or after ``max_epochs``. Returns the network in 0/1 units.
    """
    check_binary(patterns, "patterns")
    spins = 2 * patterns - 1
    n = patterns.shape[1]
    coupling, field_ = torch.zeros(n, n, dtype=patterns.dtype), torch.zeros(n, dtype=patterns.dtype)
    epochs, visits = 0, 0
    for epochs in range(1, max_epochs + 1):
        changed = False
        for s in spins:
            visits += 1
            signed_errors = s * (s * (coupling @ s + field_) <= 0)
            if signed_errors.any():
                changed = True
                delta = torch.outer(signed_errors, s)
                coupling += (delta + delta.T) / 2
                coupling.fill_diagonal_(0)
                field_ += signed_errors
        if not changed:
            break
    if cost is not None:
        cost.steps, cost.evaluations = epochs, visits
    return Hopfield.from_spins(coupling, field_)


def counted_outer_product(patterns: Tensor, *, cost: FitCost | None = None) -> Hopfield:
    """:func:`~pfzoo.training.outer_product_rule`; one step, one matrix product."""
    if cost is not None:
        cost.steps = cost.evaluations = 1
    return outer_product_rule(patterns)


CountedRule = Callable[..., Hopfield]  # rule(patterns [m, n], *, cost=FitCost) -> network


def thesis_rules(settings: Mapping) -> dict[str, CountedRule]:
    """MPF, PER and OPR as the thesis names them, with ``settings["mpf_iterations"]`` and ``settings["perceptron_epochs"]``;
    PER one pattern at a time (:func:`online_perceptron`) where ``settings.get("online_perceptron")``."""
    perceptron = online_perceptron if settings.get("online_perceptron") else counted_perceptron
    return {
        MPF: lambda patterns, cost=None: bare_mpf(patterns, max_iter=settings["mpf_iterations"], cost=cost),
        PER: lambda patterns, cost=None: perceptron(patterns, max_epochs=settings["perceptron_epochs"], cost=cost),
        OPR: counted_outer_product,
    }


@dataclass
class TimingMeasurement:
    """Per rule and m, one entry per trial: ``stored`` fraction, ``costs`` (:class:`FitCost`)."""

    pattern_counts: list[int]
    stored: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    costs: dict[str, dict[int, list[FitCost]]] = field(default_factory=dict)

    def summary(self) -> dict:
        """results.json's ``training_time`` numbers: per rule and m the means of the stored fraction, seconds, steps,
        evaluations and evaluation seconds, and whether all patterns were stored in every trial."""

        def mean(values):
            return sum(values) / len(values)

        out = {}
        for rule, by_m in self.costs.items():
            out[rule] = {str(m): {
                "stored": mean(self.stored[rule][m]), "stored_in_every_trial": min(self.stored[rule][m]) == 1.0,
                "seconds": mean([c.seconds for c in costs]), "steps": mean([c.steps for c in costs]),
                "evaluations": mean([c.evaluations for c in costs]),
                "evaluation_seconds": None if costs[0].evaluation_seconds is None else mean([c.evaluation_seconds for c in costs]),
            } for m, costs in by_m.items()}
        return out


def measure_training_time(rules: Mapping[str, CountedRule], num_units: int, pattern_counts: Sequence[int], trials: int, *,
                          generator: torch.Generator | None = None, progress: Callable[[int], None] | None = None) -> TimingMeasurement:
    """Figs. 3.7–3.8: per trial and m, random patterns ``[m, num_units]`` stored by every rule, timed around the rule's
    call alone (the stored fraction is checked outside the timer). Each rule first stores two fixed patterns untimed
    (the first call of a process pays for lazy initialisation). ``progress(trial)`` after each trial."""
    check_positive_int(trials, "trials")
    counts = [check_positive_int(m, "pattern_counts") for m in pattern_counts]
    warm_up = torch.eye(num_units, dtype=torch.float64)[:2]
    for rule in rules.values():
        rule(warm_up, cost=FitCost())
    result = TimingMeasurement(counts, {r: {m: [] for m in counts} for r in rules}, {r: {m: [] for m in counts} for r in rules})
    for trial in range(1, trials + 1):
        for m in counts:
            patterns = random_patterns(m, num_units, generator=generator).double()
            for name, rule in rules.items():
                cost = FitCost()
                began = time.perf_counter()
                model = rule(patterns, cost=cost)
                cost.seconds = time.perf_counter() - began
                result.costs[name][m].append(cost)
                result.stored[name][m].append(stored_fraction(model, patterns))
        if progress is not None:
            progress(trial)
    return result


def measure_recall_by_load(rules: Mapping[str, CountedRule], num_units: int, loads: Sequence[int], flips: Sequence[int], trials: int, *,
                           generator: torch.Generator | None = None) -> dict[str, dict[str, list[float]]]:
    """Fig. 3.9: for each m of ``loads``, :func:`~pfzoo.studies.hopfield_capacity.measure_recall` (``trials`` trials of
    m fresh patterns, every pattern corrupted by k distinct flips for each k of ``flips``, run to a fixed point) →
    ``{rule: {str(m): [fraction recovered exactly per k]}}``. The fraction at k = 0 is the fraction stored."""
    plain = {name: (lambda patterns, rule=rule: rule(patterns)) for name, rule in rules.items()}
    out: dict[str, dict[str, list[float]]] = {name: {} for name in rules}
    for m in loads:
        for name, fractions in measure_recall(plain, num_units, m, flips, trials, generator=generator).items():
            out[name][str(m)] = fractions
    return out


@torch.no_grad()
def _recalled(model: Hopfield, patterns: Tensor, starts: Tensor) -> tuple[float, float]:
    """From ``starts [m, n]``: the fraction of rows whose dynamics end exactly on the matching pattern, and of bits that do."""
    final = model.recall(starts.to(model.dtype))
    equal = final == patterns
    return equal.all(1).double().mean().item(), equal.double().mean().item()


def measure_corrupted_training(rules: Mapping[str, CountedRule], num_units: int, pattern_counts: Sequence[int], *, flips: int, copies: int,
                               trials: int, independent: bool = False, generator: torch.Generator | None = None,
                               progress: Callable[[int], None] | None = None) -> dict:
    """Fig. 3.10: per trial and m, m random patterns; the rules get ``copies`` copies of each with exactly ``flips``
    distinct bits flipped (``[m · copies, n]``), never the patterns (``independent``: every bit flipped independently
    with probability ``flips / n`` instead, :func:`~pfzoo.data.hopfield_patterns.noisy_copies`; the cues too). Then,
    per rule: from each original, the fraction
    of patterns the dynamics keep exactly (= the fraction that are fixed points) and of bits they keep; from a fresh
    cue per pattern with ``flips`` bits flipped, the fraction of patterns and of bits recovered. Returns
    ``{rule: {quantity: {str(m): mean over trials}}}`` with quantities ``patterns``, ``bits``, ``patterns_from_cue``,
    ``bits_from_cue``, ``seconds``."""
    check_positive_int(copies, "copies")
    check_positive_int(trials, "trials")
    names = ("patterns", "bits", "patterns_from_cue", "bits_from_cue", "seconds")
    sums = {rule: {q: {m: 0.0 for m in pattern_counts} for q in names} for rule in rules}
    for trial in range(1, trials + 1):
        for m in pattern_counts:
            patterns = random_patterns(m, num_units, generator=generator).double()
            if independent:
                samples = noisy_copies(patterns, copies, flips / num_units, generator=generator)
                cues = noisy_copies(patterns, 1, flips / num_units, generator=generator)
            else:
                samples = corrupt(patterns.repeat_interleave(copies, dim=0), flips, generator=generator)
                cues = corrupt(patterns, flips, generator=generator)
            for name, rule in rules.items():
                began = time.perf_counter()
                model = rule(samples)
                seconds = time.perf_counter() - began
                values = (*_recalled(model, patterns, patterns), *_recalled(model, patterns, cues), seconds)
                for quantity, value in zip(names, values):
                    sums[name][quantity][m] += value / trials
        if progress is not None:
            progress(trial)
    return {rule: {q: {str(m): v for m, v in by_m.items()} for q, by_m in by_q.items()} for rule, by_q in sums.items()}


# -- the figures of scripts/hopfield_figures.py, as results.json stores them ------------------------------------------

FIGURES = {
    "fig36_images": {"count": 80, "side": 64, "train_flips": 1228, "cue_flips": 1638, "steps": 200, "copies_per_step": 2,
                     "learning_rate": 1e-3, "momentum": 0.5, "cues_per_image": 5, "trace_every": 10, "shown": [0, 1], "seed": 0},
    "fig38_training_time": {"num_units": 64, "pattern_counts": [1, 2, 4, 8, 16, 24, 32, 48, 64, 80, 96, 104, 112, 120], "trials": 20,
                            "mpf_iterations": 2000, "perceptron_epochs": 2000, "online_perceptron": False, "seed": 0},
    "fig39_recall_by_load": {"num_units": 128, "loads": [16, 32, 64, 128], "flips": list(range(0, 65, 4)), "trials": 10,
                             "mpf_iterations": 2000, "perceptron_epochs": 2000, "seed": 0},
    "fig310_corrupted": {"num_units": 64, "pattern_counts": [1, 2, 4, 8, 12, 16, 24, 32], "flips": 20, "copies": 200, "trials": 13,
                         "independent": False, "mpf_iterations": 2000, "perceptron_epochs": 200, "seed": 0},
}
"""Each figure's settings and their defaults (the thesis's where it states them: n, m range, trials, flips)."""


def run_figure(figure: str, settings: Mapping, *, load_image: Callable[[], object] | None = None,
               on_progress: Callable[[str], None] = lambda line: None) -> dict:
    """The results of one of :data:`FIGURES` under ``settings`` (that figure's keys), as results.json stores them beside
    the run's header; ``load_image()`` gives the grey image of Fig. 3.6."""
    generator = torch.Generator().manual_seed(settings["seed"])
    if figure == "fig36_images":
        return run_image_experiment(load_image(), settings, on_progress=on_progress)
    rules = thesis_rules(settings)
    if figure == "fig38_training_time":
        measured = measure_training_time(rules, settings["num_units"], settings["pattern_counts"], settings["trials"], generator=generator,
                                         progress=lambda trial: on_progress(f"trial {trial} done"))
        return {"rules": measured.summary()}
    rules = {MPF: rules[MPF], PER: rules[PER]}
    if figure == "fig39_recall_by_load":
        return {"recall": measure_recall_by_load(rules, settings["num_units"], settings["loads"], settings["flips"], settings["trials"],
                                                 generator=generator)}
    if figure == "fig310_corrupted":
        return {"rules": measure_corrupted_training(rules, settings["num_units"], settings["pattern_counts"], flips=settings["flips"],
                                                    copies=settings["copies"], trials=settings["trials"], independent=settings["independent"],
                                                    generator=generator, progress=lambda trial: on_progress(f"trial {trial} done"))}
    raise ValueError(f"figure must be one of {sorted(FIGURES)}, got {figure!r}")
