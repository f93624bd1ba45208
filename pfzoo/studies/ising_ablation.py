"""Why MPF trails pseudo-likelihood on our 10×10 spin glass while it leads in thesis Table 3.1: an ablation that changes
one setting difference at a time, the thesis's ε_corr beside ours, and why PT-SML's ε_corr is far worse than MPF's at a
similar ε_J (``scripts/ising_ablation.py`` runs it; ``reports/ising/ablation/``).

The thesis (§3.1.1, Table 3.1) fits ``p(x) ∝ exp(-xᵀJ'x)`` over ``x ∈ {0,1}^100`` whose ``J'`` "only had non-zero
elements corresponding to nearest-neighbor units in a two-dimensional square lattice, and bias terms along the diagonal",
from 20,000 Swendsen–Wang samples, with nearest-neighbour couplings of variance σ² = 10 and columns summing to 0, and
reports the *mean square* error of the recovered couplings (ε_J) and of the pairwise correlations (ε_corr). Our
:class:`~pfzoo.models.Ising` has ``E(x) = -½ xᵀJx - b·x``, so ``J'_ij = -J_ij / 2`` (i ≠ j) and ``J'_ii = -b_i``.
:func:`coupling_errors` measures one fit in each reading of "error in recovered coupling strengths":

    pairs          mean over i < j of (J_ij − J*_ij)²             (ours, scripts/reproduce_ising.py)
    edges          the same over the lattice's 2·side² edges only
    thesis_pairs   mean over i < j of (J'_ij − J'*_ij)² = pairs / 4
    thesis_matrix  mean over all D² entries of J' − J'*, biases on the diagonal

:func:`correlation_errors` does the same for ε_corr: the pair moments ⟨x_i x_j⟩ (ours), the spin moments ⟨s_i s_j⟩ with
``s = 2x − 1``, and the covariances ⟨x_i x_j⟩ − ⟨x_i⟩⟨x_j⟩, each over i < j against the training sample.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import torch
from hydra.utils import instantiate
from torch import Tensor

from pfzoo.data import sample_spin_glass, spin_glass_model
from pfzoo.kernels import SwendsenWang
from pfzoo.models import Ising
from pfzoo.studies.ising_recovery import (LEARNERS, Compose, correlation_error, fit_learner, learner_overrides, recipe_overrides,
                                          upper_pairs)
from pfzoo.training import CD
from pfzoo.validation import check_matrix

THESIS_TABLE = {  # thesis Table 3.1: ε_J, ε_corr, learning time (s) as printed
    "MPF": (0.0172, 0.0025, "~60"),
    "MFT+TAP": (7.7704, 0.0983, "0.1"),
    "CD-1": (0.3196, 0.0127, "~20000"),
    "CD-10": (0.3341, 0.0123, "~20000"),
    "pseudo-likelihood": (0.0582, 0.0036, "~800"),
}
COUPLING_CONVENTIONS = ("pairs", "edges", "thesis_pairs", "thesis_matrix")
CORRELATION_CONVENTIONS = ("moments", "spin_moments", "covariances")


def lattice_mask(truth: Ising) -> Tensor:
    """The pairs a lattice glass couples: ``[D, D]`` bool, true where ``truth``'s coupling is nonzero (a draw of exactly 0
    has probability 0)."""
    return truth.symmetric_coupling.detach() != 0


def thesis_matrix(model: Ising) -> Tensor:
    """The thesis's ``J' [D, D]`` of ``model`` (energy ``xᵀJ'x``): ``-J/2`` off the diagonal and ``-b`` on it (``x_i² = x_i``)."""
    coupling = model.symmetric_coupling.detach()
    return -coupling / 2 - torch.diag_embed(model.bias.detach())


def coupling_errors(model: Ising, truth: Ising) -> dict[str, float]:
    """ε_J of ``model`` against ``truth`` in each of :data:`COUPLING_CONVENTIONS` (module docstring), in float64."""
    difference = upper_pairs(model.symmetric_coupling.detach().double() - truth.symmetric_coupling.detach().double())
    matrix = thesis_matrix(model).double() - thesis_matrix(truth).double()
    pairs = difference.pow(2).mean().item()
    return {"pairs": pairs, "edges": difference[upper_pairs(lattice_mask(truth))].pow(2).mean().item(), "thesis_pairs": pairs / 4,
            "thesis_matrix": matrix.pow(2).mean().item()}


def correlation_errors(samples: Tensor, reference: Tensor) -> dict[str, float]:
    """ε_corr of ``samples [N, D]`` against ``reference [M, D]`` (0/1 states) in each of :data:`CORRELATION_CONVENTIONS`."""
    check_matrix(samples, "samples")
    check_matrix(reference, "reference")

    def covariances(x: Tensor) -> Tensor:
        mean = x.double().mean(0)
        return upper_pairs(x.double().T @ x.double() / x.shape[0] - torch.outer(mean, mean))

    return {"moments": correlation_error(samples.double(), reference.double()),
            "spin_moments": correlation_error(2 * samples.double() - 1, 2 * reference.double() - 1),
            "covariances": (covariances(samples) - covariances(reference)).pow(2).mean().item()}


def stopping_epoch(losses: Sequence[float], tolerance: float) -> int:
    """The epoch (1-based) after which the Trainer's rule ``|loss_e − loss_(e−1)| ≤ tolerance · max(1, |loss_e|)`` first
    holds on the losses ``[E]`` of a run, or ``E`` when it never does: where the run would have stopped at ``tolerance``."""
    if not tolerance > 0:
        raise ValueError(f"tolerance must be positive, got {tolerance!r}")
    for epoch in range(2, len(losses) + 1):
        if abs(losses[epoch - 1] - losses[epoch - 2]) <= tolerance * max(1.0, abs(losses[epoch - 1])):
            return epoch
    return len(losses)


def with_zero_field(model: Ising) -> Ising:
    """``model``'s couplings with the biases ``-½ J𝟙`` (zero field on the ±1 spins, as the true glass): separates what its
    couplings do to its samples from what its biases do."""
    coupling = model.symmetric_coupling.detach()
    return Ising.from_tensors(coupling, -0.5 * coupling.sum(1))


def field_error(model: Ising, truth: Ising) -> float:
    """Mean square error of the spin fields ``h = J𝟙/4 + b/2`` (:meth:`Ising.spin_parameters`) over the units; ε_J never
    sees the biases, the fields do."""
    return (model.spin_parameters()[1].double() - truth.spin_parameters()[1].double()).pow(2).mean().item()


def train_cd_linear(model: Ising, train: Tensor, *, k: int, lr_start: float, lr_end: float, epochs: int, batch_size: int,
                    generator: torch.Generator, on_epoch: Callable[[Ising], float]) -> list[tuple[float, float]]:
    """CD-k by plain SGD on minibatches of ``train [N, D]`` with the learning rate annealed linearly from ``lr_start`` to
    ``lr_end`` over ``epochs`` (thesis §3.1.1: "minibatches of size 100 ... annealed in a linear fashion from 3.0 to
    0.1"), data reshuffled each epoch from ``generator``, which also drives CD's Gibbs sweeps.

    Returns ``[(training seconds, on_epoch(model)), ...]`` after every epoch (``on_epoch`` outside the timed region)."""
    objective, trace, seconds = CD(k=k), [], 0.0
    updates = epochs * math.ceil(train.shape[0] / batch_size)
    parameters, step = [model.coupling, model.bias], 0
    for _ in range(epochs):
        began = time.perf_counter()
        for rows in torch.randperm(train.shape[0], generator=generator).split(batch_size):
            learning_rate = lr_start + (lr_end - lr_start) * step / max(1, updates - 1)
            grads = torch.autograd.grad(objective.loss(model, train[rows], generator=generator), parameters)
            with torch.no_grad():
                for parameter, grad in zip(parameters, grads):
                    parameter.sub_(learning_rate * grad)
            step += 1
        seconds += time.perf_counter() - began
        trace.append((seconds, on_epoch(model)))
    return trace


# -- the ablation ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fit:
    """One refit of a row: the learners, and the one setting it changes from the baseline (scripts/reproduce_ising.py's
    σ² = 10 run: fully connected fit from J = 0 and base-rate biases, float64, single flips, L-BFGS to 1e-10)."""

    learners: tuple[str, ...] = ("MPF", "pseudo-likelihood")
    coupling_std: float = math.sqrt(10)
    lattice_fit: bool = False
    base_rate_start: bool = True
    float32: bool = False
    overrides: tuple[str, ...] = ()
    linear_learning_rate: tuple[float, float] | None = None  # CD-1 by train_cd_linear, batch 100, from the first to the second
    sgd_epochs: tuple[tuple[str, int], ...] = ()  # SGD learners run these epochs, not a time budget (machine load varies)


@dataclass(frozen=True)
class Row:
    """A row of the ablation: ``key``, what it changes (``change``), and either a refit or a reading of another row's fit
    (``derived_from``: another convention of the errors or another stopping point, no training)."""

    key: str
    change: str
    fit: Fit | None = None
    derived_from: str | None = None
    reading: Mapping = field(default_factory=dict)


ROWS = (
    Row("baseline", "ours (reports/ising/sigma10): fully connected fit, ε_J over all pairs i < j of our J", Fit()),
    Row("thesis_pairs", "ε_J in the thesis's units J' = −J/2 (÷ 4)", derived_from="baseline", reading={"convention": "thesis_pairs"}),
    Row("thesis_matrix", "ε_J over all D² entries of the thesis's J' (biases on the diagonal)", derived_from="baseline",
        reading={"convention": "thesis_matrix"}),
    Row("edges", "ε_J over the lattice's 200 edges only", derived_from="baseline", reading={"convention": "edges"}),
    Row("stop_1e-6", "L-BFGS stopped at a relative loss change of 1e-6 per epoch", derived_from="baseline", reading={"tolerance": 1e-6}),
    Row("stop_1e-4", "L-BFGS stopped at a relative loss change of 1e-4 per epoch", derived_from="baseline", reading={"tolerance": 1e-4}),
    Row("best_on_path", "early stopping at the epoch of least ε_J (an oracle: it reads the truth)", derived_from="baseline",
        reading={"best": True}),
    Row("lattice_fit", "lattice-only fit: the 200 edges' couplings and the biases, all other couplings held at 0", Fit(lattice_fit=True)),
    Row("lattice_fit_seed1", "`lattice_fit` on another glass and sample (run with --seed 1)", Fit(lattice_fit=True)),
    Row("sgd_learners", "PT-SML as in reports/ising/sigma10 (SGD with momentum, 0.02/(1 + epoch/10)) for its 39 epochs",
        Fit(learners=("PT-SML",), sgd_epochs=(("PT-SML", 39),))),
    Row("thesis_protocol", "the thesis as stated, read with J' of variance 10: lattice-only fit of the σ = 2√10 glass",
        Fit(coupling_std=2 * math.sqrt(10), lattice_fit=True)),
    Row("thesis_protocol_stop_1e-4", "`thesis_protocol` stopped at a relative loss change of 1e-4 per epoch", derived_from="thesis_protocol",
        reading={"tolerance": 1e-4}),
    Row("thesis_protocol_best", "`thesis_protocol` at its epoch of least ε_J (an oracle)", derived_from="thesis_protocol",
        reading={"best": True}),
    Row("cd_thesis_schedule", "CD-1 as the thesis states it: plain SGD, batch 100, learning rate linear from 3.0 to 0.1",
        Fit(learners=("CD-1",), linear_learning_rate=(3.0, 0.1))),
    Row("strong_cd_thesis_schedule", "`cd_thesis_schedule` on the σ = 2√10 glass (σ² = 10 read as J''s variance; "
        "reports/ising/sigma20_trace's sample)", Fit(coupling_std=2 * math.sqrt(10), learners=("CD-1",), linear_learning_rate=(3.0, 0.1))),
    Row("zero_start", "initialisation: J = 0 and b = 0 (not the base-rate biases)", Fit(base_rate_start=False)),
    Row("float32", "float32 instead of float64", Fit(float32=True)),
    Row("all_bits_flipped", "MPF's connectivity: single flips plus the all-bits-flipped state (App. E.2)",
        Fit(learners=("MPF",), overrides=("trainer.objective.binary.all_bits_flipped=true",))),
    Row("strong_glass", "σ² = 10 read as the variance of J' (our σ = 2√10): a fresh sample of that glass",
        Fit(coupling_std=2 * math.sqrt(10))),
)


class Ablation:
    """Runs :data:`ROWS` on spin-glass samples drawn as scripts/reproduce_ising.py draws them (``settings``: its arguments),
    one sample per σ, reused by every row at that σ. ``compose`` composes a recipe from overrides; runs go to ``runs_dir``."""

    def __init__(self, settings: Mapping, compose: Compose, runs_dir: Path):
        self.settings, self.compose, self.runs_dir = dict(settings), compose, runs_dir
        self._data: dict[float, tuple[Ising, Tensor, float]] = {}

    def data(self, coupling_std: float) -> tuple[Ising, Tensor, float]:
        """The true glass of σ = ``coupling_std``, its training sample ``[N, D]`` (seed + 1, Swendsen–Wang) and the
        sampling seconds."""
        if coupling_std not in self._data:
            truth = spin_glass_model(side=self.settings["side"], coupling_std=coupling_std, seed=self.settings["seed"], zero_field=True)
            began = time.perf_counter()
            train = sample_spin_glass(truth, self.settings["num_samples"], **self.sampling, kernel=SwendsenWang(),
                                      generator=torch.Generator().manual_seed(self.settings["seed"] + 1))
            self._data[coupling_std] = (truth, train, time.perf_counter() - began)
        return self._data[coupling_std]

    @property
    def sampling(self) -> dict:
        return dict(num_chains=1000, burn_in=self.settings["burn_in"], thin=self.settings["thin"])

    def measure(self, model: Ising, truth: Ising, train: Tensor, offset: int) -> dict:
        """ε_J in every convention, the spin-field error, ε_corr in every convention of block-Gibbs samples of ``model`` (as
        scripts/reproduce_ising.py draws them, seed + ``offset``) and of its couplings with zero field
        (:func:`with_zero_field`), and the samples' mean |⟨s_i⟩| (the true glass's is 0 in expectation)."""
        generator = lambda: torch.Generator().manual_seed(self.settings["seed"] + offset)  # noqa: E731 (same draws for both)
        samples = sample_spin_glass(model, self.settings["model_samples"], **self.sampling, generator=generator())
        zero_field = sample_spin_glass(with_zero_field(model), self.settings["model_samples"], **self.sampling, generator=generator())
        return {"coupling_errors": coupling_errors(model, truth), "field_error": field_error(model, truth),
                "correlation_errors": correlation_errors(samples, train),
                "zero_field_correlation_errors": correlation_errors(zero_field, train),
                "mean_abs_magnetisation": (2 * samples.double() - 1).mean(0).abs().mean().item()}

    def fit(self, key: str, fit: Fit, name: str) -> dict:
        """Fit learner ``name`` as ``fit`` says (its recipe, run as scripts/reproduce_ising.py runs it, with ``fit``'s one
        change) and :meth:`measure` it, with its seconds, epochs, ε_J trace and per-epoch losses."""
        truth, train, _ = self.data(fit.coupling_std)
        settings = {**self.settings, "kind": "lattice", "num_units": None, "coupling_std": fit.coupling_std, "bias_std": 0.0,
                    "zero_field_biases": True, "weight_decay": 0.0}
        recipe, dtype, offset = LEARNERS[name]
        if fit.linear_learning_rate is not None:
            return self.fit_linear(fit, name, truth, train)
        fixed_epochs = dict(fit.sgd_epochs).get(name)
        budget = learner_overrides(name, settings) if fixed_epochs is None else [
            "trainer.max_seconds=null", f"trainer.epochs={fixed_epochs}", f"trainer.optimizer.lr={settings['cd_learning_rate']}"]
        cfg = self.compose([f"+experiment={recipe}", *recipe_overrides(settings), *budget,
                            f"trainer.seed={self.settings['seed'] + offset}", "++trainer.metrics_rows=500", *fit.overrides])
        run_dir = self.runs_dir / key / recipe
        model, trace, _, epochs = fit_learner(cfg, torch.float32 if fit.float32 else dtype, train, truth, run_dir,
                                              coupling_mask=lattice_mask(truth) if fit.lattice_fit else None,
                                              base_rate_start=fit.base_rate_start)
        losses = [json.loads(line)["loss"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        return {**self.measure(model, truth, train, 10 + list(LEARNERS).index(name)), "seconds": trace[-1][0], "epochs": epochs,
                "trace": trace, "losses": losses}

    def fit_linear(self, fit: Fit, name: str, truth: Ising, train: Tensor) -> dict:
        """CD-1 by :func:`train_cd_linear` over ``settings["linear_epochs"]`` epochs of minibatches of 100, then :meth:`measure`."""
        if name != "CD-1":
            raise ValueError(f"a linear learning-rate schedule is for CD-1, got learner {name!r}")
        model = Ising(train.shape[1], init_std=0.0)
        model.init_from_data(train)  # J = 0 and the independent-units biases, as every learner
        generator = torch.Generator().manual_seed(self.settings["seed"] + LEARNERS[name][2])
        start, end = fit.linear_learning_rate
        trace = [(0.0, coupling_errors(model, truth)["pairs"])] + train_cd_linear(
            model, train, k=1, lr_start=start, lr_end=end, epochs=self.settings["linear_epochs"], batch_size=100, generator=generator,
            on_epoch=lambda current: coupling_errors(current, truth)["pairs"])
        return {**self.measure(model, truth, train, 10 + list(LEARNERS).index(name)), "seconds": trace[-1][0],
                "epochs": self.settings["linear_epochs"], "trace": trace, "losses": []}

    def refit(self, row: Row) -> dict:
        """Fit every learner of ``row.fit``: the row's record."""
        return {"coupling_std": row.fit.coupling_std, "sampling_seconds": self.data(row.fit.coupling_std)[2],
                "learners": {name: self.fit(row.key, row.fit, name) for name in row.fit.learners}}

    def truth_record(self, coupling_std: float) -> dict:
        """:meth:`measure` of the true glass itself: the floors set by sampling noise."""
        truth, train, _ = self.data(coupling_std)
        return self.measure(truth, truth, train, 9)


def derived(row: Row, source: dict) -> dict:
    """``row``'s record read off the record ``source`` of the row it derives from: another error convention, or the ε_J
    (all pairs) and seconds at another stopping point of the same L-BFGS path."""
    learners = {}
    for name, result in source["learners"].items():
        if "convention" in row.reading:
            learners[name] = {"coupling_errors": {"pairs": result["coupling_errors"][row.reading["convention"]]},
                              "seconds": result["seconds"], "epochs": result["epochs"]}
            continue
        trace = result["trace"]  # [(seconds, ε_J)] with the start at index 0, epoch e at index e
        epoch = (min(range(1, len(trace)), key=lambda index: trace[index][1]) if row.reading.get("best")
                 else stopping_epoch(result["losses"], row.reading["tolerance"]))
        learners[name] = {"coupling_errors": {"pairs": trace[epoch][1]}, "seconds": trace[epoch][0], "epochs": epoch}
    return {"coupling_std": source["coupling_std"], "learners": learners}


def run_rows(ablation: Ablation, rows: Sequence[Row], done: dict, *, on_row: Callable[[str, dict], None] = lambda key, record: None) -> dict:
    """Records of ``rows`` by key, starting from the records already ``done`` (a resumed run refits nothing it has);
    ``on_row(key, record)`` after each new one (e.g. to write results.json)."""
    records = dict(done)
    for row in rows:
        if row.key in records:
            continue
        if row.derived_from is not None:
            records[row.key] = {"change": row.change, **derived(row, records[row.derived_from])}
        else:
            records[row.key] = {"change": row.change, **ablation.refit(row)}
        on_row(row.key, records[row.key])
    return records


# -- cost, independent of the machine's load ------------------------------------------------------------------------------

def lbfgs_evaluations(checkpoint: Path) -> int:
    """How many times L-BFGS evaluated the loss and its gradient over a run, from the optimiser state its last checkpoint
    holds (torch's ``func_evals``, carried across epochs as the history is)."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)["trainer_state"]["optimizer"]["state"]
    return int(state[0]["func_evals"])


def evaluation_cpu_seconds(objective: torch.nn.Module, model: Ising, train: Tensor, *, repeats: int = 5) -> float:
    """CPU seconds of this process (``time.process_time``, blind to other processes' load) for one evaluation of
    ``objective``'s loss on all of ``train [N, D]`` and its gradient: the median of ``repeats``."""
    times = []
    for _ in range(repeats):
        began = time.process_time()
        objective.loss(model, train).backward()
        times.append(time.process_time() - began)
    model.zero_grad()
    return sorted(times)[len(times) // 2]


def costs(ablation: Ablation, records: Mapping[str, dict], runs_dirs: Sequence[Path]) -> dict:
    """Per L-BFGS learner the CPU seconds of one full-data evaluation (J = 0 and base-rate biases, float64, fully connected,
    on ``num_samples`` uniform states) and,
    per refit row and learner, the evaluations its run made (from the checkpoint under any of ``runs_dirs``):
    their product is the run's CPU time on an idle core, which the wall-clock seconds under load are not."""
    # the dense objectives cost the same on any 0/1 states of this shape, so uniform ones stand in for the sample
    train = torch.randint(0, 2, (ablation.settings["num_samples"], ablation.settings["side"] ** 2),
                          generator=torch.Generator().manual_seed(ablation.settings["seed"])).double()
    per_evaluation = {}
    for name in ("MPF", "pseudo-likelihood"):
        cfg = ablation.compose([f"+experiment={LEARNERS[name][0]}"])
        model = Ising(train.shape[1], init_std=0.0).double()
        model.init_from_data(train.double())
        objective = instantiate(cfg.trainer.objective)
        per_evaluation[name] = evaluation_cpu_seconds(objective, model, train.double())
    evaluations, largest = {}, {}
    for key, record in records.items():
        for name in record.get("learners", {}):
            found = [path for path in (Path(d) / key / LEARNERS[name][0] / "checkpoint.pt" for d in runs_dirs) if path.exists()]
            if not found or "trace" not in record["learners"][name]:
                continue
            if name in per_evaluation:
                evaluations.setdefault(key, {})[name] = lbfgs_evaluations(found[0])
            truth = spin_glass_model(side=ablation.settings["side"], coupling_std=record["coupling_std"], seed=ablation.settings["seed"],
                                     zero_field=True)
            largest.setdefault(key, {})[name] = [largest_coupling(found[0]), truth.symmetric_coupling.abs().max().item()]
    return {"evaluation_cpu_seconds": per_evaluation, "function_evaluations": evaluations, "largest_coupling": largest}


def largest_coupling(checkpoint: Path) -> float:
    """max |J_ij| of the Ising model a checkpoint holds (its last epoch's): a coupling the sample cannot bound (a pair that
    never disagrees) keeps growing under an unregularised fit."""
    coupling = torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"]["coupling"]
    return ((coupling + coupling.T) / 2).fill_diagonal_(0).abs().max().item()
