"""How well a learner recovered a known Ising model: the coupling error ε_J and the correlation error ε_corr.

The errors of Sohl-Dickstein's thesis, Table 3.1 (and Sohl-Dickstein, Battaglino & DeWeese 2011, Fig. 2),
for a fully visible binary model ``E(x) = -½ xᵀJx - b·x`` fitted to samples of a true one:

    ε_J    = mean over pairs i < j of (J_ij − J*_ij)²
    ε_corr = mean over pairs i < j of (⟨x_i x_j⟩_model − ⟨x_i x_j⟩_data)²

Both average over *all* D(D−1)/2 pairs, so a lattice's non-neighbours (true coupling 0) count too. The true
model of a spin-glass data set is :func:`pfzoo.data.spin_glass_model` with the data set's arguments.
:class:`CorrelationTrace` follows ε_corr along training (Sohl-Dickstein et al. 2011, Fig. 2; thesis Fig. 3.2).

:func:`recover_spin_glass` runs thesis Table 3.1 (or Figure 3.2) as ``scripts/reproduce_ising.py`` does: it samples a
spin glass, fits every learner of :data:`LEARNERS` (recipes run by the Trainer) and :data:`CLOSED_FORM` to the sample and
returns the errors and their traces as results.json stores them (rendered by :mod:`pfzoo.studies.ising_report`).
"""

from __future__ import annotations

import json
import math
import time
from functools import partial
from pathlib import Path
from typing import Callable, Mapping, Sequence

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import Tensor

from pfzoo.data import DataSplits, sample_spin_glass, spin_glass_model
from pfzoo.kernels import SwendsenWang
from pfzoo.models.capabilities import Capability, require
from pfzoo.training import EarlyStopping, fit_mean_field, objective_score
from pfzoo.validation import check_matrix


def upper_pairs(matrix: Tensor) -> Tensor:
    """The entries ``i < j`` of a square ``matrix [D, D]``, row by row: ``[D(D−1)/2]``."""
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"matrix must be square [D, D], got shape {tuple(matrix.shape)}")
    rows, cols = torch.triu_indices(matrix.shape[0], matrix.shape[1], 1, device=matrix.device)
    return matrix[rows, cols]


def _couplings(model, name: str) -> Tensor:
    require(model, Capability.PAIRWISE_COUPLINGS, by=f"coupling_error's {name}")
    return model.symmetric_coupling.detach()


def coupling_error(model, truth, *, excluding: Sequence[int] = ()) -> float:
    """ε_J: the mean square error of ``model``'s couplings against ``truth``'s over all pairs ``i < j``, or over the pairs
    that touch no unit of ``excluding`` (e.g. :func:`nearly_constant_units` of the data, whose couplings a finite sample
    hardly determines).

    Both are Ising-family models of the same D (:attr:`Capability.PAIRWISE_COUPLINGS`); the difference
    is taken in the wider of their dtypes, on ``model``'s device.
    """
    learned, true = _couplings(model, "model"), _couplings(truth, "truth")
    if learned.shape != true.shape:
        raise ValueError(f"model and truth must have the same number of units, got {learned.shape[0]} and {true.shape[0]}")
    keep = torch.ones(learned.shape[0], dtype=torch.bool)
    for unit in excluding:
        if not 0 <= unit < learned.shape[0]:
            raise ValueError(f"excluding must hold unit indices in [0, {learned.shape[0]}), got {unit!r}")
        keep[unit] = False
    if int(keep.sum()) < 2:
        raise ValueError(f"excluding leaves fewer than two units of {learned.shape[0]}: no pair is left to compare")
    difference = (learned - true.to(learned.device))[keep][:, keep.to(learned.device)]
    return upper_pairs(difference).pow(2).mean().item()


def nearly_constant_units(samples: Tensor, *, fraction: float = 1e-3) -> list[int]:
    """The units of binary ``samples [N, D]`` whose rarer value takes at most ``fraction`` of the rows: the data say
    little about their couplings, which an unregularised fit may move far along a direction the loss hardly sees."""
    check_matrix(samples, "samples")
    ones = samples.sum(0)
    rarer = torch.minimum(ones, samples.shape[0] - ones)
    return torch.nonzero(rarer <= fraction * samples.shape[0]).flatten().tolist()


def pair_moments(samples: Tensor) -> Tensor:
    """``⟨x_i x_j⟩`` over the rows of ``samples [N, D]`` for the pairs ``i < j``: ``[D(D−1)/2]``."""
    check_matrix(samples, "samples")
    if samples.shape[0] == 0:
        raise ValueError("samples must hold at least one row")
    return upper_pairs(samples.T @ samples / samples.shape[0])


def correlation_error(samples: Tensor, reference: Tensor) -> float:
    """ε_corr: the mean square error of the pairwise moments of ``samples [N, D]`` against ``reference [M, D]``."""
    model_moments, data_moments = pair_moments(samples), pair_moments(reference)
    if model_moments.shape != data_moments.shape:
        raise ValueError(f"samples and reference must have the same width, got {samples.shape[1]} and {reference.shape[1]}")
    return (model_moments - data_moments.to(model_moments)).pow(2).mean().item()


class CorrelationTrace:
    """ε_corr of a model in training against ``reference [M, D]``, an epoch metric for :class:`~pfzoo.training.Trainer`.

    Each measurement draws a fresh sample of the model (:func:`~pfzoo.data.sample_spin_glass` with ``num_samples``,
    ``num_chains``, ``burn_in`` and ``thin``, from uniformly random starts), which costs far more than an L-BFGS step of a
    small model; so it measures at log-spaced epochs (1, 2, 3, 4, 5, 7, 8, 10, 13, 16, 20, ... for ``growth`` 1.25, each at least that times
    the last) and returns NaN at the epochs between. Every measurement draws from a generator seeded with ``seed``
    (common random numbers: the curve's steps are the model's, not the sampler's). The trainer calls it once per
    epoch, in order, so it counts epochs itself: use one instance per run, from epoch 1.
    """

    def __init__(self, reference: Tensor, *, num_samples: int, num_chains: int, burn_in: int, thin: int, seed: int,
                 growth: float = 1.25):
        check_matrix(reference, "reference")
        if not growth > 1:
            raise ValueError(f"growth must be above 1 (the ratio between measured epochs), got {growth!r}")
        self.reference = reference
        self.sampling = dict(num_chains=num_chains, burn_in=burn_in, thin=thin)
        self.num_samples, self.seed, self.growth = num_samples, seed, growth
        self._epoch, self._next = 0, 1.0

    def __call__(self, model) -> float:
        self._epoch += 1
        if self._epoch < self._next:
            return math.nan
        self._next = max(self._next * self.growth, self._epoch + 1)
        samples = sample_spin_glass(model, self.num_samples, **self.sampling, generator=torch.Generator(model.device).manual_seed(self.seed))
        return correlation_error(samples, self.reference)


# -- the learners of thesis Table 3.1 and Figure 3.2 on one spin glass (scripts/reproduce_ising.py) ----------------------

LEARNERS = {
    "MPF": ("ising_mpf", torch.float64, 0),
    "pseudo-likelihood": ("ising_pseudolikelihood", torch.float64, 0),
    "CD-1": ("ising_cd1", torch.float32, 2),
    "CD-10": ("ising_cd10", torch.float32, 3),
    "ratio matching": ("ising_ratio_matching", torch.float64, 0),
    "GSM": ("ising_generalized_score_matching", torch.float64, 0),
    "NCE": ("ising_nce", torch.float32, 4),
    "PT-SML": ("ising_pt", torch.float32, 5),
}
"""Learner → (recipe in conf/experiment, dtype, offset of its trainer seed); CD's data order and Gibbs draws come from
seed + offset."""
L_BFGS_LEARNERS = ("MPF", "pseudo-likelihood", "ratio matching", "GSM")  # run until converged, at most max_lbfgs_steps epochs
CLOSED_FORM = {"MFT+TAP": "tap", "nMF": "naive"}
"""Learner → :func:`~pfzoo.training.fit_mean_field`'s correction (float64, no trainer)."""
SAMPLER_NAMES = {"gibbs": "block-Gibbs", "swendsen_wang": "Swendsen–Wang"}

Compose = Callable[[Sequence[str]], DictConfig]  # Hydra overrides -> the composed ``train`` config (pfzoo.cli.compose)
Trace = list[tuple[float, float]]  # [(training seconds, error), ...]


def describe_glass(kind: str, side: int, num_units: int) -> str:
    """``"a 10×10 spin glass"`` or ``"a 40-unit fully connected spin glass"``."""
    return f"a {side}×{side} spin glass" if kind == "lattice" else f"a {num_units}-unit fully connected spin glass"


def recipe_overrides(settings: Mapping) -> list[str]:
    """The Hydra overrides every learner's recipe takes from a run's ``settings`` (scripts/reproduce_ising.py's
    arguments): the data set's spin glass and sampler settings, the seed, the weight decay, the trainer's clock (wall or
    CPU seconds, :data:`pfzoo.training.trainer_settings.CLOCKS`)."""
    num_units = "null" if settings["num_units"] is None else settings["num_units"]
    data = dict(kind=settings["kind"], side=settings["side"], num_units=num_units, coupling_std=settings["coupling_std"],
                bias_std=settings["bias_std"], zero_field=settings["zero_field_biases"], burn_in=settings["burn_in"],
                thin=settings["thin"], num_train=settings["num_samples"], seed=settings["seed"])
    overrides = [f"dataset.{key}={value}" for key, value in data.items()] + [f"seed={settings['seed']}"]
    overrides += [f"trainer.weight_decay={settings['weight_decay']}"] if settings["weight_decay"] else []
    return overrides + ([f"++trainer.clock={settings['clock']}"] if settings.get("clock", "wall") != "wall" else [])


def learner_overrides(name: str, settings: Mapping) -> list[str]:
    """Learner ``name``'s own overrides: an epoch cap for the L-BFGS learners, a time budget and step for the SGD ones."""
    if name in L_BFGS_LEARNERS:
        return [f"trainer.epochs={settings['max_lbfgs_steps']}"]
    return [f"trainer.max_seconds={settings['cd_seconds']}", f"trainer.optimizer.lr={settings['cd_learning_rate']}"]


def fit_learner(cfg: DictConfig, dtype: torch.dtype, train: Tensor, truth, run_dir: Path,
                correlation_trace: CorrelationTrace | None = None, *, coupling_mask: Tensor | None = None,
                base_rate_start: bool = True, held_out: Tensor | None = None,
                patience: int | None = None) -> tuple[torch.nn.Module, Trace, Trace, int]:
    """Train the learner of the composed recipe ``cfg`` in ``dtype`` on ``train [N, D]``; returns the model (float32), its
    traces of ε_J from the start and of ε_corr at ``correlation_trace``'s epochs (empty without one), and its number of
    epochs (L-BFGS steps or CD epochs).

    ``coupling_mask [D, D]`` (bool, symmetric) fits only the couplings it marks, e.g. a lattice's edges: the others start
    at 0 and their gradient is zeroed, so no step of L-BFGS or SGD (whose directions are sums of gradients) moves them.
    ``base_rate_start=False`` starts the biases at 0 instead of the independent-units fit.

    ``held_out [M, D]`` (rows not in ``train``) stops the fit early on the recipe's own objective: after every update its
    loss on ``held_out`` is measured (:func:`~pfzoo.training.objective_score`, outside the timed region), the run stops
    once ``patience`` updates in a row were no better (``None``: at the recipe's own stopping rule) and the model
    returned holds the parameters of the lowest held-out loss (:class:`~pfzoo.training.EarlyStopping`); the traces
    still run to the last update, whose records carry ``early_stopping_score`` (minus the held-out loss)."""
    model = instantiate(cfg.model, num_visible=train.shape[1]).to(dtype)
    if base_rate_start:
        model.init_from_data(train.to(dtype))  # J = 0 and the independent-units biases: every learner's start
    if coupling_mask is not None:
        if coupling_mask.shape != model.coupling.shape or coupling_mask.dtype != torch.bool:
            raise ValueError(f"coupling_mask must be a bool [{train.shape[1]}, {train.shape[1]}] tensor, got "
                             f"{coupling_mask.dtype} {tuple(coupling_mask.shape)}")
        keep = coupling_mask.to(device=model.coupling.device, dtype=dtype)
        with torch.no_grad():
            model.coupling.mul_(keep)
        model.coupling.register_hook(lambda grad: grad * keep)
    trace = [(0.0, coupling_error(model, truth))]
    metrics = {"coupling_error": partial(coupling_error, truth=truth)}
    if correlation_trace is not None:
        metrics["correlation_error"] = correlation_trace
    objective = instantiate(cfg.trainer.objective)
    stopping = None if held_out is None else EarlyStopping(objective_score(objective, held_out), every=1, patience=patience)
    trainer = instantiate(cfg.trainer, objective=objective, run_dir=run_dir, estimator=None, epoch_metrics=metrics,
                          callbacks=[] if stopping is None else [stopping])
    trainer.fit(model, DataSplits("spin_glass", train=train, test=train[:1] if held_out is None else held_out))
    if stopping is not None:
        stopping.restore_best(model)
    records = [json.loads(line) for line in trainer.metrics_path.read_text().splitlines()]
    correlations = []
    for record in records:
        trace.append((trace[-1][0] + record["seconds"], record["coupling_error"]))
        if not math.isnan(record.get("correlation_error", math.nan)):
            correlations.append((trace[-1][0], record["correlation_error"]))
    return model.float(), trace, correlations, len(records)


def fit_closed_form(name: str, train: Tensor, truth, *, clock: str = "wall") -> tuple[torch.nn.Module, Trace, Trace, int]:
    """Mean-field inversion ``name`` of :data:`CLOSED_FORM` on ``train [N, D]``, as :func:`fit_learner` returns it (one
    step, no ε_corr trace), timed in wall or (``clock="cpu"``) process CPU seconds. Raises ``ValueError`` when the method
    has no fit for these moments."""
    now = time.process_time if clock == "cpu" else time.perf_counter
    began = now()
    model = fit_mean_field(train.double(), correction=CLOSED_FORM[name])
    seconds = now() - began
    start = upper_pairs(truth.symmetric_coupling.detach()).pow(2).mean().item()  # ε_J of J = 0, every learner's start
    return model.float(), [(0.0, start), (seconds, coupling_error(model, truth))], [], 1


def training_glass(settings: Mapping, compose: Compose) -> tuple[torch.nn.Module, Tensor, dict, float]:
    """The true model of a run's ``settings`` (scripts/reproduce_ising.py's arguments) and its training states ``[N, D]``
    (drawn with seed + 1 by the run's sampler), the block-Gibbs settings every model's samples are drawn with
    (``num_chains``, ``burn_in``, ``thin``) and the seconds the training states took."""
    dataset = compose(["+experiment=ising_mpf", *recipe_overrides(settings)]).dataset
    truth = spin_glass_model(kind=dataset.kind, side=dataset.side, num_units=dataset.num_units, coupling_std=dataset.coupling_std,
                             bias_std=dataset.bias_std, seed=dataset.seed, zero_field=dataset.zero_field)
    gibbs = dict(num_chains=dataset.num_chains, burn_in=dataset.burn_in, thin=dataset.thin)
    kernel = SwendsenWang() if settings["sampler"] == "swendsen_wang" else None  # None: block-Gibbs sweeps
    began = time.perf_counter()
    train = sample_spin_glass(truth, dataset.num_train, **gibbs, kernel=kernel, generator=torch.Generator().manual_seed(settings["seed"] + 1))
    return truth, train, gibbs, time.perf_counter() - began


def recover_spin_glass(settings: Mapping, compose: Compose, runs_dir: Path, *,
                       on_progress: Callable[[str], None] = lambda line: None) -> dict:
    """Sample the spin glass of a run's ``settings`` (scripts/reproduce_ising.py's arguments), fit every learner of
    :data:`LEARNERS` and :data:`CLOSED_FORM` (or those of ``settings["learners"]``) to the sample and measure ε_J and
    ε_corr: results.json's record but for the run's head (:func:`pfzoo.studies.reporting.run_header`).

    ``compose`` composes a recipe from overrides; each learner's checkpoints and metrics go to ``runs_dir/<recipe>``.
    Training states are drawn with seed + 1, ε_corr's floor (the true model's own samples) with seed + 9, the ε_corr
    curves' samples with seed + 8 (the same draws at every point) and learner i's samples with seed + 10 + i.
    ``on_progress(line)`` gets a line when the sample is drawn and after each learner.
    """
    seed, overrides = settings["seed"], recipe_overrides(settings)
    truth, train, gibbs, sampling_seconds = training_glass(settings, compose)
    trainer = compose(["+experiment=ising_mpf", *overrides]).trainer
    lbfgs = {"lbfgs_iterations": trainer.optimizer.max_iter, "stop_tolerance": trainer.stop_tolerance}
    on_progress(f"sampled {settings['num_samples']} states of {describe_glass(settings['kind'], settings['side'], truth.num_units)} "
                f"by {settings['sampler']} in {sampling_seconds:.1f} s")
    # ε_corr's floor: block-Gibbs samples of the true model itself, drawn as each learned model's are
    floor = correlation_error(sample_spin_glass(truth, settings["model_samples"], **gibbs, generator=torch.Generator().manual_seed(seed + 9)), train)
    constant_units = nearly_constant_units(train)  # their couplings are hardly determined by the sample (README)
    traced = settings["correlation_trace"]
    trace_sampling = dict(num_samples=settings["trace_samples"], **gibbs, seed=seed + 8,  # every point of every curve: the same draws
                          growth=settings.get("trace_growth", 1.25))
    trace_floor = CorrelationTrace(train, **trace_sampling)(truth) if traced else None
    results, traces, correlation_traces = {}, {}, {}
    chosen = settings.get("learners") or [*LEARNERS, *CLOSED_FORM]
    for index, name in enumerate([*LEARNERS, *CLOSED_FORM]):
        if name not in chosen:
            continue  # index counts every learner, so each one's sampling seed is the same as in a run of them all
        try:
            if name in CLOSED_FORM:
                model, trace, correlations, epochs = fit_closed_form(name, train, truth, clock=settings.get("clock", "wall"))
            else:
                recipe, dtype, seed_offset = LEARNERS[name]
                cfg = compose([f"+experiment={recipe}", *overrides, *learner_overrides(name, settings), f"trainer.seed={seed + seed_offset}"])
                model, trace, correlations, epochs = fit_learner(cfg, dtype, train, truth, runs_dir / recipe,
                                                                 CorrelationTrace(train, **trace_sampling) if traced else None)
        except FloatingPointError as error:  # e.g. GSM, whose loss may have no minimum on a finite sample
            results[name] = {"diverged": str(error).split(";")[0]}
            on_progress(f"{name:18s} diverged: {error}")
            continue
        except ValueError as error:  # mean-field inversion: moments the method cannot invert (no real TAP root)
            if name not in CLOSED_FORM:
                raise
            results[name] = {"unusable": str(error)}
            on_progress(f"{name:18s} unusable: {error}")
            continue
        samples = sample_spin_glass(model, settings["model_samples"], **gibbs, generator=torch.Generator().manual_seed(seed + 10 + index))
        results[name] = {"coupling_error": coupling_error(model, truth), "correlation_error": correlation_error(samples, train),
                         "seconds": trace[-1][0], "iterations_or_epochs": epochs}
        if constant_units:
            results[name]["coupling_error_without_constant_units"] = coupling_error(model, truth, excluding=constant_units)
        traces[name] = trace
        if traced:
            correlation_traces[name] = correlations or [(trace[-1][0], correlation_error(samples, train))]
        on_progress(f"{name:18s} ε_J {results[name]['coupling_error']:.4f}  ε_corr {results[name]['correlation_error']:.2e}  "
                    f"{results[name]['seconds']:.1f} s")
    record = {"settings": dict(settings) | lbfgs, "sampling_seconds": sampling_seconds, "truth_correlation_error": floor,
              "nearly_constant_units": {unit: train[:, unit].mean().item() for unit in constant_units},
              "results": results, "traces": traces}
    if traced:
        record |= {"correlation_traces": correlation_traces, "trace_correlation_floor": trace_floor}
    return record
