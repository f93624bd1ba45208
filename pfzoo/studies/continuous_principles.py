"""The continuous inductive-principles table: the continuous models of the zoo on whitened natural-image patches,
trained by every principle that applies to them, with the natural gradient off and on (Sohl-Dickstein's thesis,
chapters 2–4; HAIS §4; the binary study is :mod:`pfzoo.studies.principles`).

Rows are (model, principle, natural gradient) *cells*. A cell whose trainer refuses the model (a
:class:`~pfzoo.models.MissingCapability`: exact ML without a closed-form ``log Z``, CD without a Gibbs chain, ...) is
recorded as ``n/a`` with the refusal's one line, never a crash; a cell whose loss turned non-finite at every setting
searched is ``failed``. Each trained cell is measured by

* **test log-likelihood** — ``mean log p(x)`` over ``N`` test patches: exact where the model has a closed-form
  ``log Z`` (complete products of experts, ICA), else ``log Z`` by HAIS with the stated chains, steps and leapfrog ε
  (its ``log Ẑ`` is a stochastic lower bound, so the log-likelihood leans high), bracketed from below by RAISE where
  RAISE applies (:class:`~pfzoo.estimators.Bracket`);
* **−log Z** — the estimator's, beside NCE's learned normaliser ``c`` (NCE models ``log p = −F + c``, so a consistent
  fit has ``c ≈ −log Z``; issue 29 item 3);
* **wall time** — the Trainer's seconds (evaluation excluded) and the evaluation's seconds;
* **filters** — the first layer's filters of every cell, one panel each (:func:`filters_figure`).

The natural gradient is the Trainer's ``natural_gradient`` setting (:mod:`pfzoo.training.natural_gradient`): metric
``relative`` (Amari's ``ΔW WᵀW``) for the filter matrices of products of experts and ICA, the ``energy`` metric with a
diagonal structure for the RBMs (their parameter count makes a full or per-tensor solve too slow at every step).

A cell's learning rate is the best of a small recorded grid by validation log-likelihood (same estimator as the test,
on a split carved from the training set); a grid of one rate is the affordable default.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from pfzoo.data import DataSplits
from pfzoo.estimators import AIS, HAIS, RAISE, Bracket, Exact, LikelihoodEstimate
from pfzoo.models import MissingCapability
from pfzoo.models.base import EnergyModel
from pfzoo.pictures import save_labelled_grids


@dataclass(frozen=True)
class ModelSpec:
    """One model of the table: a ``conf/model`` option with overrides, and the natural-gradient settings it takes."""

    name: str
    config: str
    overrides: tuple[str, ...] = ()
    natural_gradient: tuple[tuple[str, Any], ...] = (("metric", "relative"),)


ENERGY_METRIC = (("metric", "energy"), ("structure", "diagonal"), ("damping", 1e-3))
MODELS = (
    ModelSpec("POE Laplace, complete", "poe_laplace", ("model.num_experts=36",)),
    ModelSpec("POE Laplace, 2× overcomplete", "poe_laplace", ("model.num_experts=72",)),
    ModelSpec("POE Student-t, complete", "poe_student", ("model.num_experts=36",)),
    ModelSpec("POE Student-t, 2× overcomplete", "poe_student", ("model.num_experts=72",)),
    ModelSpec("ICA", "ica"),
    ModelSpec("GB-RBM", "gaussian_rbm", natural_gradient=ENERGY_METRIC),
    ModelSpec("mcRBM", "mcrbm", ("trainer.epochs=5",), natural_gradient=ENERGY_METRIC),
)
"""Every model of the table, in the report's order (the overcomplete POEs have 72 experts on 36 dimensions). The
mcRBM trains for 5 epochs instead of the recipe's 20: its natural-gradient step (per-example gradients of ~7,000
parameters) costs about 27 s an epoch on one CPU thread, and its HAIS about a minute."""


@dataclass(frozen=True)
class Principle:
    """One principle: a ``conf/trainer`` option with its objective's overrides, and the Adam learning rates searched
    (the same optimiser, minibatch size and epochs for every principle, so only the objective differs)."""

    name: str
    trainer: str
    overrides: tuple[str, ...] = ()
    learning_rates: tuple[float, ...] = (0.003,)


PRINCIPLES = (
    Principle("exact ML", "ml"),
    Principle("score matching", "score_matching"),
    Principle("DSM", "denoising_score_matching"),
    Principle("SSM", "sliced_score_matching"),
    Principle("NCE", "nce", ("trainer.objective.noise_ratio=10",)),
    Principle("MPF", "mpf_adam"),
    Principle("CD-1", "cd", ("trainer.objective.k=1",)),
)
"""Every principle of the table, in the report's order."""


@dataclass
class Cell:
    """One (model, principle, natural gradient) cell. ``status``: ``ok`` (measured), ``n/a`` (the trainer refused the
    model; ``reason`` is its one line) or ``failed`` (non-finite loss at every setting; ``reason`` says so).
    ``estimate``: ``exact``, ``HAIS`` or ``HAIS/RAISE bracket``; ``lower`` the bracket's RAISE side; ``log_z`` the
    estimator's ``log Ẑ`` (with ``log_z_stderr`` and ``ess`` of its ``chains`` weights); ``nce_c`` NCE's normaliser; ``epochs`` those trained."""

    model: str
    principle: str
    natural_gradient: bool
    status: str
    reason: str | None = None
    overrides: list[str] = field(default_factory=list)
    test_log_likelihood: float | None = None
    stderr: float | None = None
    lower: float | None = None
    estimate: str | None = None
    num_test: int | None = None
    chains: int | None = None
    steps: int | None = None
    log_z: float | None = None
    log_z_stderr: float | None = None
    ess: float | None = None
    nce_c: float | None = None
    epochs: int | None = None
    train_seconds: float | None = None
    evaluation_seconds: float | None = None
    search: list[dict[str, Any]] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Evaluation:
    """How a trained model is measured: ``num_test`` test patches; HAIS (or Gibbs AIS) with ``chains``, ``steps`` and
    leapfrog ``step_size`` where ``log Z`` has no closed form; a bracket (its RAISE side runs ``raise_chains`` chains of
    ``raise_steps`` per example, so it costs far more per example than AIS) on the first ``bracket_num_test`` only."""

    num_test: int = 1000
    chains: int = 100
    steps: int = 5000
    step_size: float = 0.1
    raise_chains: int = 5
    raise_steps: int = 1000
    bracket_num_test: int = 200


def estimator_for(model: EnergyModel, evaluation: Evaluation):
    """``(estimator, kind)``: :class:`Exact` where the model has its ``log Z`` in closed form, else HAIS where the
    model's energy is differentiable in all its variables, else (latent binary units: the GB-RBM) Gibbs AIS bracketed
    from below by RAISE where RAISE applies, else AIS alone."""
    if Exact().missing(model) is None:
        return Exact(), "exact"
    hais = HAIS(evaluation.chains, evaluation.steps, evaluation.step_size)
    if hais.missing(model) is None:
        return hais, "HAIS"
    ais = AIS(evaluation.chains, evaluation.steps)
    bracket = Bracket(upper=ais, lower=RAISE(evaluation.raise_chains, evaluation.raise_steps))
    if bracket.missing(model) is None:
        return bracket, "AIS/RAISE bracket"
    return ais, "AIS"


def evaluate(model: EnergyModel, test: torch.Tensor, train: torch.Tensor, evaluation: Evaluation, *, seed: int) -> dict[str, Any]:
    """The test log-likelihood of ``model`` on the first ``evaluation.num_test`` rows of ``test [N, D]`` (the first
    ``evaluation.bracket_num_test`` for a bracket; HAIS's base fitted to ``train [M, D]``), as :class:`Cell` fields."""
    estimator, kind = estimator_for(model, evaluation)
    rows = test[: evaluation.bracket_num_test if kind.endswith("bracket") else evaluation.num_test].to(model.dtype)
    began = time.perf_counter()
    result: LikelihoodEstimate = estimator.log_likelihood(model, rows, base_data=train.to(model.dtype),
                                                          generator=torch.Generator(model.device).manual_seed(seed))
    partition = result.partition
    fields = {"test_log_likelihood": result.mean, "stderr": result.stderr, "estimate": kind, "num_test": int(rows.shape[0]),
              "log_z": None if partition is None else partition.log_z,
              "log_z_stderr": None if partition is None else partition.stderr,
              "ess": None if partition is None else partition.ess,
              "chains": None if kind == "exact" else evaluation.chains, "steps": None if kind == "exact" else evaluation.steps,
              "evaluation_seconds": time.perf_counter() - began}
    if kind.endswith("bracket"):
        fields["test_log_likelihood"], fields["lower"] = result.upper.mean, result.lower.mean
    return fields


Train = Callable[[list[str], DataSplits], tuple[EnergyModel, float, dict[str, float]]]
"""``train(overrides, data) -> (model, training seconds, last epoch's metrics)``: one run of a cell's recipe."""
Score = Callable[[EnergyModel], float]


def search_setting(train: Train, grid: Sequence[list[str]], data: DataSplits, score: Score) -> tuple[list[str] | None, list[dict[str, Any]]]:
    """The grid point with the best ``score`` (validation log-likelihood) after training on ``data`` (a validation
    split), and every point's record; a point whose loss turns non-finite (``FloatingPointError``) or whose score is
    not finite scores −∞; ``None`` when every point does. A refusal (:class:`MissingCapability`) is not caught: it is
    the same at every point (:func:`run_cell`)."""
    records = []
    for overrides in grid:
        try:
            model, seconds, _ = train(list(overrides), data)
            value = score(model)
        except FloatingPointError:
            value, seconds = -math.inf, float("nan")
        value = value if math.isfinite(value) else -math.inf
        records.append({"overrides": list(overrides), "validation_log_likelihood": value, "train_seconds": seconds})
    best = max(records, key=lambda record: record["validation_log_likelihood"])
    return (None if best["validation_log_likelihood"] == -math.inf else best["overrides"]), records


def run_cell(model: str, principle: str, natural: bool, train: Train, grid: Sequence[list[str]], data: DataSplits,
             validation: DataSplits, score: Score, measure: Callable[[EnergyModel], dict[str, Any]]) -> tuple[Cell, EnergyModel | None]:
    """One cell: the search on ``validation`` (skipped for a grid of one point), the chosen setting's run on ``data``
    and its measurements (``measure(model)`` → :class:`Cell` fields); a refusal becomes an ``n/a`` cell with its reason
    and a loss that turns non-finite everywhere a ``failed`` one. Returns the cell and the trained model (or None)."""
    cell = Cell(model, principle, natural, "ok")
    try:
        best = list(grid[0])
        if len(grid) > 1:
            best, cell.search = search_setting(train, grid, validation, score)
            if best is None:
                tried = ", ".join(" ".join(point["overrides"]) for point in cell.search)
                cell.status, cell.reason = "failed", f"the loss turned non-finite at every setting tried ({tried})"
                return cell, None
        try:
            trained, cell.train_seconds, metrics = train(best, data)
        except FloatingPointError as error:
            cell.status, cell.reason = "failed", f"the loss turned non-finite ({error})"
            return cell, None
    except MissingCapability as refusal:
        cell.status, cell.reason = "n/a", str(refusal).splitlines()[0]
        return cell, None
    cell.overrides, cell.nce_c, cell.epochs = best, metrics.get("nce_c"), metrics.get("epoch")
    for key, value in measure(trained).items():
        setattr(cell, key, value)
    return cell, trained


def _number(value: float | None, digits: int = 2) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def table(cells: Sequence[Cell]) -> list[str]:
    """The report's markdown table, one row per cell."""
    lines = ["| model | principle | natural gradient | test log-likelihood (nats) | estimate | −log Ẑ | NCE c | epochs | training s | evaluation s |",
             "|---|---|---|---:|---|---:|---:|---:|---:|---:|"]
    for c in cells:
        head = f"| {c.model} | {c.principle} | {'on' if c.natural_gradient else 'off'} |"
        if c.status != "ok":
            lines.append(f"{head} {c.status} | {c.reason} | — | — | — | — | — |")
            continue
        value = f"{c.test_log_likelihood:.2f} ± {c.stderr:.2f}" if math.isfinite(c.test_log_likelihood) else "non-finite"
        if c.lower is not None:
            value += f" (RAISE {c.lower:.2f})"
        how = "exact" if c.estimate == "exact" else f"{c.estimate}, {c.chains} chains × {c.steps} steps, ESS {_number(c.ess, 1)}"
        minus_log_z = None if c.log_z is None else -c.log_z
        lines.append(f"{head} {value} | {how}, N = {c.num_test} | {_number(minus_log_z)} | {_number(c.nce_c)} | "
                     f"{c.epochs} | {c.train_seconds:.1f} | {c.evaluation_seconds:.1f} |")
    return lines


def slug(name: str) -> str:
    """A file-name form of a model's name: ``"POE Laplace, 2× overcomplete"`` → ``"poe_laplace_2_overcomplete"``."""
    return "_".join(re.findall(r"[a-z0-9]+", name.lower()))


def filter_panel(model: EnergyModel, transform, count: int = 36) -> torch.Tensor | None:
    """The model's first ``count`` filters as pixel filters ``[count, P]``, each rescaled to [0, 1] (their sign and
    scale vary); ``None`` for a model without filters. A filter ``φ [M]`` acts on whitened components
    ``x = s ⊙ (U (log p − μ))`` (``transform``: a :class:`~pfzoo.data.patches.PatchTransform` with ``components U
    [M, P]`` and ``scales s [M]``), so on the log pixels it is ``(φ ⊙ s) U``."""
    filters = model.visible_filters()
    if filters is None:
        return None
    filters = (filters[:count].detach().double().cpu() * transform.scales.double()) @ transform.components.double()
    low, high = filters.min(1, keepdim=True).values, filters.max(1, keepdim=True).values
    return (filters - low) / (high - low).clamp_min(1e-12)


def filters_figure(panels: dict[str, torch.Tensor], image_shape: tuple[int, ...], path) -> None:
    """One panel of filters per cell (:func:`~pfzoo.pictures.save_labelled_grids`)."""
    save_labelled_grids(panels, image_shape, path)


def readme(payload: dict[str, Any]) -> str:
    """The report: the setting, the table, the filters, the searches, the machine."""
    cells = [Cell(**row) for row in payload["cells"]]
    e = payload["evaluation"]
    lines = ["# Inductive principles for continuous models (natural-image patches)", "",
             "Every continuous model of the zoo trained by every principle that applies, with the natural gradient off and on "
             "(pfzoo issue 29, item 5). Regenerate with `python scripts/reproduce_continuous_principles.py` (recipe "
             "`conf/experiment/continuous_principles.yaml`; `pfzoo/studies/continuous_principles.py` says how each column "
             "is measured).", ""]
    if payload.get("quick"):
        lines += ["**Smoke run (`--quick`): tiny data, one epoch, short HAIS — the numbers mean nothing.**", ""]
    lines += [f"{payload['train'][0]} training and {payload['test'][0]} test patches ({payload['train'][1]} whitened PCA "
              f"components), {payload['epochs']} epochs (unless the table says otherwise) of Adam on minibatches of {payload['batch_size']} for every principle, "
              f"learning rate searched over {payload['learning_rates']} on a validation fifth of the training set when more "
              f"than one. Test log-likelihood on N = {e['num_test']} test patches: exact where log Z has a closed form, else "
              f"HAIS ({e['chains']} chains, {e['steps']} steps, ε = {e['step_size']}; it leans high), or for the GB-RBM (binary "
              f"hiddens) Gibbs AIS with the same chains and steps bracketed from below by RAISE ({e['raise_chains']} chains × "
              f"{e['raise_steps']} steps per example), both on the first {e['bracket_num_test']} test patches; ± is the "
              "estimator's standard error. −log Ẑ is the "
              "estimator's, NCE c the normaliser NCE learned (≈ −log Z when NCE is consistent). Filters: "
              "`filters_<model>.png`, one panel per principle and natural-gradient setting (pixel filters: the whitened filters "
              "mapped back through the PCA). Both natural-gradient settings use the same Adam optimiser, so a row pair "
              "differs only in the preconditioner; Adam's per-coordinate scaling partly undoes any preconditioner, so the "
              "'on' rows measure the natural gradient as a drop-in for this recipe, not natural-gradient SGD "
              "(`reports/natural_gradient` races that).", ""]
    lines += table(cells) + [""]
    searched = [c for c in cells if c.search]
    if searched:
        lines += ["<details><summary>The search (validation log-likelihood per setting)</summary>", ""]
        for c in searched:
            points = ", ".join(f"{' '.join(p['overrides'])}: {p['validation_log_likelihood']:.2f}" for p in c.search)
            lines.append(f"- {c.model}, {c.principle}, natural gradient {'on' if c.natural_gradient else 'off'}: {points}")
        lines += ["", "</details>", ""]
    lines += [f"Measured {payload['date']} on {payload['machine']}, {payload['threads']} thread(s) "
              f"(load average at the end {payload['load_average']}); {payload['seconds'] / 60:.1f} minutes in all.", ""]
    return "\n".join(lines)
