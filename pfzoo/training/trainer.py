"""The training loop: minibatch epochs over an objective, evaluated and recorded after each, checkpointed as it goes."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
from torch import nn
from tqdm.auto import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from pfzoo.estimators.base import Estimator
from pfzoo.models.base import EnergyModel
from pfzoo.training.callbacks import TrainingCallback
from pfzoo.training.centering import Centered
from pfzoo.training.checkpoints import CheckpointStore, rank_state, restore_trainer_state, trainer_state
from pfzoo.training.distributed_strategy import DistributedStrategy
from pfzoo.training.divergence import Alarm, DivergenceGuard, Score, TrainingDiverged, describe_score, held_out_score, score_kind, score_rows
from pfzoo.training.fit_data import TrainingData, check_probabilities, fixed_draws, held_out_name, minibatch, training_data
from pfzoo.training.metrics import (estimate_record, has_reconstruction, pseudo_likelihood_is_affordable, pseudo_log_likelihood, random_rows,
                                    reconstruction_error)
from pfzoo.training.metrics_log import MetricsLog, format_record
from pfzoo.training.natural_gradient import natural_gradient_from_settings
from pfzoo.training.natural_space import check_space_settings, line_searches, natural_space_from_settings
from pfzoo.training.objective import Objective
from pfzoo.training.replica_tracking import partition_tracker
from pfzoo.training.parameter_averaging import ParameterAveraging, parameter_averaging
from pfzoo.training.trainer_settings import DEFAULT_OPTIMIZER, OptimizerFactory, TrainerSettings, check_optimizer_factory, decayed_weights
from pfzoo.validation import check_binary, check_bool, check_matrix, values_checked

logger = logging.getLogger(__name__)

EpochMetric = Callable[[EnergyModel], float]
_SAMPLING_SEED_OFFSET = 1
_EVALUATION_SEED_OFFSET = 2
_CALLBACK_SEED_OFFSET = 3  # callback i draws from seed + 3 + i


@dataclass
class _Run:
    """What one :meth:`Trainer.fit` works with, handed from phase to phase of its epochs."""

    model: EnergyModel
    ranks: DistributedStrategy
    splits: dict[str, torch.Tensor]  # {"train": [N, V], <held-out split's name>: [M, V] if any}, on the model's device and dtype
    probabilities: torch.Tensor | None  # binarize: the training rows [N, V] each minibatch is drawn from (splits hold one draw)
    weights: list[nn.Parameter]  # decayed_weights(model)
    optimizer: torch.optim.Optimizer
    generators: dict[str, torch.Generator]  # "shuffle" (CPU) and "sampling" (the model's device)
    config: dict | None
    bars: bool  # tqdm bars: asked for, on a terminal, on the leader
    callback_seconds: float = 0.0  # time in the callbacks during the current epoch
    guard: DivergenceGuard | None = None  # None with divergence="off"
    warned: bool = False  # divergence="warn" has logged its warning


class Trainer:
    """Fits any :class:`~pfzoo.models.EnergyModel` by minibatch descent on an :class:`~pfzoo.training.Objective`'s loss.

    Each epoch starts with ``objective.prepare`` on the whole training set, reshuffles it and takes one optimiser step
    per minibatch on ``objective.loss(model, batch, generator=...)`` plus the L2 penalty ``weight_decay / 2 · Σ ||W||²``
    over :func:`decayed_weights`: the weight matrices and pair couplings, never biases, filters or bases. It then projects
    the model back onto its constraint set (:meth:`EnergyModel.project_parameters
    <pfzoo.models.EnergyModel.project_parameters>`). After the epoch it appends one JSON line of metrics to
    ``<run_dir>/metrics.jsonl`` (:mod:`pfzoo.training.metrics_log`) and, every ``checkpoint_every`` epochs and after the
    last, writes ``<run_dir>/checkpoint.pt`` atomically, enough to resume bit for bit (:mod:`pfzoo.training.checkpoints`).
    Under a ``torch.distributed`` process group the ranks share every minibatch
    (:mod:`pfzoo.training.distributed_strategy`, called once per phase of an epoch: training, evaluation, recording).

    Random streams: the data order comes from a CPU generator seeded with ``seed``, the objective's sampling from a
    generator on the model's device seeded with ``seed + 1``. Evaluation (pseudo-likelihood bit flips, the estimator)
    uses a generator re-seeded with ``seed + 2`` at every evaluation, so it never perturbs training and epochs are
    compared with common random numbers.

    Args:
        objective: the loss; its state (e.g. PCD's chains) is checkpointed. Its own parameters, if it has any (e.g.
            NCE's normaliser c), are optimised with the model's (one optimiser, the model's parameters first) and
            checkpointed with its state. When its ``prepare`` reports a change (e.g.
            MPF's θ_old was refreshed) the optimiser's state (L-BFGS history, momentum) is discarded; an
            :attr:`~pfzoo.training.Objective.epoch_stateful` objective's ``loss`` also receives ``indices=rows``, the
            batch's row numbers ``[B]`` in the training set.
        optimizer: ``params -> torch.optim.Optimizer``; default SGD(lr=0.05, momentum=0.5).
        run_dir: directory for ``checkpoint.pt`` and ``metrics.jsonl``.
        settings: the run's :class:`~pfzoo.training.trainer_settings.TrainerSettings` (epochs, batch_size,
            weight_decay, seed, ...), kept as ``trainer.settings``; None: the defaults. Its fields may also be given as
            keyword arguments (``epochs=5``, as a ``conf/trainer`` config gives them), which replace those of
            ``settings``; the result is validated once, here.
        estimator: log-likelihood estimator run every ``evaluate_every`` epochs and after the last, fitted with
            ``base_data`` = train.
        epoch_metrics: ``{name: model -> float}`` evaluated after every epoch, outside the timed region, under
            ``torch.no_grad`` and logged under ``name`` (e.g. the error of the learned parameters against a known
            truth); None = none.
        callbacks: :class:`~pfzoo.training.TrainingCallback` objects run beside the training (:mod:`pfzoo.training.callbacks`):
            after every update, their numbers merged into every epoch's record, their state checkpointed.
        centered: take every update in the model's centered parametrisation (``trainer.objective`` becomes
            :class:`~pfzoo.training.Centered` around ``objective``; models with :attr:`~pfzoo.models.Capability.CENTERING`).
        natural_gradient: None (default: plain updates) or the settings of a
            :class:`~pfzoo.training.NaturalGradient` wrapped around the (possibly centered) objective, e.g.
            ``{"metric": "model_fisher", "damping": 1e-4, "structure": "block"}``; from the command line
            ``+trainer.natural_gradient.metric=relative`` (with an optimiser other than L-BFGS).
        natural_parameter_space: None (default) or the settings (``metric``, ``damping``, ``structure``,
            ``num_samples``, ``refresh_every``) of a :class:`~pfzoo.training.natural_space.NaturalParameterSpace`:
            the optimiser, L-BFGS included, runs in the natural parameters ``φ = G^½ θ`` (thesis §4.1.4, §4.2.7), ``G``
            measured over the training rows at the first step and every ``refresh_every`` steps; from the command line
            ``trainer=ml +trainer.natural_parameter_space.metric=data_fisher``. Not with ``natural_gradient``.
        track_partition: None/False, True or the settings of a :class:`~pfzoo.training.PartitionTracker` added to
            ``callbacks``: ``log Z`` followed update by update and the tracked train/held-out log-likelihoods logged every
            epoch (Desjardins, Courville & Bengio 2011); from the command line ``trainer.track_partition=true`` or
            ``+trainer.track_partition.num_chains=100``. Under :class:`~pfzoo.training.PT` training it is a
            :class:`~pfzoo.training.ReplicaPartitionTracker` on the objective's own replicas instead (its settings:
            ``observe_every``, ``burn_in``, ``anchor_steps``, ``anchor_chains``).
        average_parameters: None/False, True or the settings (``from_epoch``, ``decay``) of a
            :class:`~pfzoo.training.ParameterAveraging` added to ``callbacks`` (kept as ``trainer.averaging``): the
            average of the parameters over the later updates, written as ``<run_dir>/averaged.pt`` after every epoch;
            the per-epoch diagnostics read the parameters training uses, and the average's own reconstruction error
            and family diagnostics join them as ``averaged_<split>_<name>``. From the command line
            ``+trainer.average_parameters.from_epoch=76``; a run may start averaging when it resumes.
    """

    def __init__(
        self,
        objective: Objective,
        optimizer: OptimizerFactory = DEFAULT_OPTIMIZER,
        *,
        run_dir: str | os.PathLike,
        settings: TrainerSettings | None = None,
        estimator: Estimator | None = None,
        epoch_metrics: Mapping[str, EpochMetric] | None = None,
        callbacks: Sequence[TrainingCallback] = (),
        centered: bool = False,
        natural_gradient: Mapping[str, Any] | None = None,
        natural_parameter_space: Mapping[str, Any] | None = None,
        track_partition: bool | Mapping[str, Any] | None = None,
        average_parameters: bool | Mapping[str, Any] | None = None,
        **setting_values: Any,
    ) -> None:
        if not isinstance(objective, Objective):
            raise ValueError(f"objective must be a pfzoo.training.Objective (loss(model, batch, *, generator)), got {type(objective).__name__}")
        if check_bool(centered, "centered"):
            objective = Centered(objective)
        self.objective = natural_gradient_from_settings(objective, natural_gradient)
        self.natural_space = check_space_settings(natural_parameter_space)
        if self.natural_space is not None and natural_gradient is not None:
            raise ValueError("natural_gradient and natural_parameter_space both precondition the updates: set one of them")
        self.make_optimizer = check_optimizer_factory(optimizer)
        self.settings = TrainerSettings.build(settings, **setting_values)
        if estimator is not None and not isinstance(estimator, Estimator):
            raise ValueError(f"estimator must be a pfzoo.estimators.Estimator or None, got {type(estimator).__name__}")
        self.estimator = estimator
        self.epoch_metrics = dict(epoch_metrics or {})
        for name, metric in self.epoch_metrics.items():
            if not isinstance(name, str) or not callable(metric):
                raise ValueError(f"epoch_metrics must map names to callables model -> float, got {name!r}: {type(metric).__name__}")
        self.callbacks = list(callbacks)
        for callback in self.callbacks:
            if not isinstance(callback, TrainingCallback):
                raise ValueError(f"callbacks must hold pfzoo.training.TrainingCallback objects, got {type(callback).__name__}")
        tracker = partition_tracker(track_partition, self.objective)
        self.run_dir = Path(run_dir)
        self.averaging: ParameterAveraging | None = parameter_averaging(average_parameters, self.run_dir)
        self.callbacks += [callback for callback in (tracker, self.averaging) if callback is not None]
        self.warnings: list[str] = []  # the objective's caveats about the model of the last fit (Objective.caveats)
        self._checkpoints = CheckpointStore(self.run_dir)
        self._metrics = MetricsLog(self.run_dir, csv=self.settings.csv, tensorboard=self.settings.tensorboard)

    @property
    def checkpoint_path(self) -> Path:
        return self._checkpoints.path

    @property
    def metrics_path(self) -> Path:
        return self._metrics.path

    def fit(self, model: EnergyModel, data, *, valid=None, resume: bool = False, config: dict | None = None) -> dict[str, Any]:
        """Train ``model`` on ``data`` and judge it on held-out data; returns the last epoch's metrics.

        ``data`` is a :class:`pfzoo.data.DataSplits` (trained on ``data.train [N, V]``, judged on the ``held_out``
        split: ``data.valid`` where there is one by default, else ``data.test``), or the training rows alone: a tensor
        ``[N, V]``, a ``torch.utils.data.Dataset`` or a ``DataLoader`` (whose ``(x, y)`` batches give ``x``), read once
        into memory (:func:`~pfzoo.training.fit_data.training_data`: the Trainer draws its own minibatches, so a
        loader's batch size and shuffling do not matter). ``valid`` (a tensor, ``Dataset`` or ``DataLoader``; only
        with rows given alone) is the held-out data, its metrics named ``valid_...`` (``test_...`` with
        ``held_out="test"``); without it the diagnostics, the estimator and the divergence guard read the training
        rows (``train_...``). The rows are moved to the model's device and dtype. ``resume=True`` continues from ``<run_dir>/checkpoint.pt`` when it exists (starting
        fresh, with a warning, when it does not) and refuses a checkpoint of another config
        (:meth:`CheckpointStore.check_resumable <pfzoo.training.checkpoints.CheckpointStore.check_resumable>`);
        ``config`` (a plain dict, e.g. the resolved Hydra config) is stored in every checkpoint. With ``divergence="off"``
        a NaN or infinite loss raises ``FloatingPointError``, checked once per epoch (no host sync per step): the model
        then holds that epoch's parameters and the checkpoint on disk is the last good one. An objective or
        estimator that does not apply to ``model`` is refused (:class:`~pfzoo.models.MissingCapability`) before
        anything runs; what biases the objective's fit of ``model`` (:meth:`Objective.caveats
        <pfzoo.training.Objective.caveats>`: score matching through smoothed kinks, denoising score matching's noise) is
        logged once as a warning and kept as ``trainer.warnings``. A run ends early when :meth:`stop_reason` gives a
        reason, and the divergence guard (``divergence``, :mod:`pfzoo.training.divergence`) stops a run that blows up
        with :class:`~pfzoo.training.TrainingDiverged`, the model and the checkpoint holding the last good parameters.

        Metrics per epoch: ``epoch``, ``loss`` (mean minimised loss, penalty included), ``seconds`` (training time:
        the objective's ``prepare``, a DBM's greedy pretraining in the first epoch included, and the updates),
        ``evaluation_seconds`` (the time of the diagnostics below, the estimator and the epoch metrics: with
        ``seconds`` and ``callback_seconds`` the epoch's time up to the checkpoint write; all three on ``settings.clock``),
        ``{train,<held>}_reconstruction_error`` (``<held>``: ``valid`` or ``test``, the ``held_out`` split; models with ``hidden_probs`` / ``visible_probs``, and DBMs, where it is
        the squared error of ``σ(μ¹ W_0ᵀ + b_0)`` with ``μ¹`` the first hidden layer's mean-field posterior means: a
        cheap diagnostic, not a likelihood; see :func:`~pfzoo.training.reconstruction_error`),
        ``{train,<held>}_pseudo_log_likelihood`` (binary models whose exact free energy is cheap: ``free_energy_cost``
        not ``None`` and at most :data:`~pfzoo.training.metrics.PSEUDO_LIKELIHOOD_MAX_UNITS` and the model's
        ``max_enumeration_units``; so RBMs always, DBMs only with few even hidden units), the model's own
        ``{train,<held>}_<name>`` from :meth:`~pfzoo.models.EnergyModel.training_diagnostics` (a DBM's
        ``top_layer_share``), and, at estimator epochs,
        ``<held>_log_likelihood``, ``<held>_log_likelihood_stderr`` and ``log_z``. A DBM's mean-field lower bound on
        ``log f(v)`` is deliberately not logged: without ``log Z`` it says nothing about the likelihood. For honest
        likelihoods of DBMs set ``evaluate_every`` with an estimator (exact for tiny models, AIS otherwise). The
        objective's :meth:`~pfzoo.training.Objective.epoch_metrics` add theirs (e.g. parallel tempering's
        ``swap_acceptance``, NCE's ``nce_c``), and each name of ``epoch_metrics`` adds its value. With ``callbacks``,
        ``callback_seconds`` (their time, left out of ``seconds``) and whatever they report (e.g. the
        :class:`~pfzoo.training.PartitionTracker`'s ``log_z_tracked`` and ``{train,<held>}_tracked_log_likelihood``).
        """
        run = self._start(model, data, valid, config)
        if self.averaging is not None:
            self.averaging.config = run.config  # the averaged model's file records the run's config, as the checkpoint does
        if run.ranks.leader:
            for warning in self.warnings:
                logger.warning("%s", warning)
        start, callback_states = self._restore(run) if resume else (0, None)
        run.ranks.broadcast_model(model)
        self._start_callbacks(model, run.splits["train"], callback_states)
        run.guard = self._guard(run)
        records = run.ranks.from_leader(lambda: self._metrics.rewrite_through(start))
        reason = self.stop_reason(records)  # a resumed run that had already stopped trains no further
        epochs = self.settings.epochs
        # Bars only on a terminal (the per-epoch log line reports progress elsewhere); log lines go through tqdm.
        with contextlib.closing(self._metrics), logging_redirect_tqdm(), tqdm(total=epochs, initial=start, desc="epochs", unit="epoch", disable=not run.bars) as bar:
            for epoch in range(start + 1, epochs + 1):
                if reason is not None:
                    if run.ranks.leader:
                        logger.info("stopping after epoch %d of %d: %s", epoch - 1, epochs, reason)
                    break
                loss, seconds = self._train_epoch(run, epoch)
                records.append(self._evaluate_epoch(run, epoch, loss, seconds))
                if run.guard is not None:
                    alarm = run.guard.end_epoch()
                    if alarm is not None:
                        self._diverged(run, epoch, alarm, records[-1])
                reason = self.stop_reason(records)
                self._record(run, records[-1], stopping=reason is not None)
                bar.update()
                bar.set_postfix(loss=f"{loss:.4g}")
        return records[-1] if records else {"epoch": start, **self._evaluate(model, run.splits, start)}

    def record_result(self, values: Mapping[str, Any]) -> dict[str, Any] | None:
        """Merge a finished run's closing numbers ``values`` (e.g. the app's closing test log-likelihood, measured on the
        model the checkpoint holds) into the last record of every metrics file: ``metrics.jsonl``, ``metrics.csv`` and
        TensorBoard (:meth:`MetricsLog.amend_last <pfzoo.training.metrics_log.MetricsLog.amend_last>`); call it on one
        process (the leader). Returns the amended record."""
        with contextlib.closing(self._metrics):
            return self._metrics.amend_last(values)

    def stop_reason(self, records: list[dict[str, Any]]) -> str | None:
        """Why training should stop after the epochs ``records`` (oldest first), or None to go on: the settings' rules
        (:meth:`TrainerSettings.stop_reason <pfzoo.training.trainer_settings.TrainerSettings.stop_reason>`), then each
        callback's :meth:`~pfzoo.training.TrainingCallback.stop_reason`."""
        reasons = [self.settings.stop_reason(records), *(callback.stop_reason() for callback in self.callbacks)]
        return next((reason for reason in reasons if reason is not None), None)

    def _start(self, model: EnergyModel, data, valid, config: dict | None) -> _Run:
        """What ``fit`` checks and builds before its first epoch. The objective's, the callbacks' and the estimator's
        capabilities are checked here, once per fit (inside the steps, under :func:`~pfzoo.validation.values_checked`,
        the objectives skip their own checks), and the data splits once, before they are trained on."""
        self.objective.check(model)
        self.warnings = list(self.objective.caveats(model))
        for callback in self.callbacks:
            callback.check(model)
        data = training_data(data, valid, held_out=self.settings.held_out)
        self.objective.attach_data(data)
        weights = decayed_weights(model)
        if self.settings.weight_decay and not weights:
            raise ValueError(f"weight_decay must be 0 for {type(model).__name__}: it decays weight matrices (parameters named "
                             f"'*weight', 'weights.<i>' or 'coupling') and {type(model).__name__} has none "
                             f"({', '.join(name for name, _ in model.named_parameters())})")
        if self.estimator is not None:
            self.estimator.check(model)
        splits = self._splits(model, data)
        probabilities = splits["train"] if self.settings.binarize else None
        splits = fixed_draws(splits, self.settings.seed) if self.settings.binarize else splits
        self.objective.to(model.device)
        if self.estimator is not None:
            self.estimator.to(model.device)
        ranks = DistributedStrategy()
        generators = {
            "shuffle": torch.Generator().manual_seed(self.settings.seed),
            "sampling": ranks.sampling_generator(self.settings.seed + _SAMPLING_SEED_OFFSET, model.device),
        }
        if self.natural_space is None:
            optimizer = self.make_optimizer(self._parameters(model))
        elif ranks.world_size > 1:
            raise ValueError("natural_parameter_space runs in one process: each rank would measure its own G and whiten differently")
        else:
            optimizer = natural_space_from_settings(self.make_optimizer, self.natural_space, model, list(self.objective.parameters()),
                                                    splits["train"], generator=generators["sampling"])
        if self.settings.clip_grad_norm is not None and line_searches(optimizer):
            raise ValueError("clip_grad_norm needs an optimizer that takes plain steps (SGD, Adam, ...), not LBFGS, whose line "
                             "search needs the loss's own gradient")
        if self.objective.preconditions and line_searches(optimizer):
            raise ValueError(f"optimizer must take preconditioned steps (SGD, Adam, ...), not LBFGS, whose line search needs the "
                             f"loss's own gradient: {type(self.objective).__name__} changes its gradients")
        if ranks.leader:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._checkpoints.remove_stale_temporaries()
        bars = self.settings.progress and sys.stderr.isatty() and ranks.leader  # redirected to a file, a bar writes a line per refresh
        return _Run(model, ranks, splits, probabilities, weights, optimizer, generators, config, bars)

    def _splits(self, model: EnergyModel, data: TrainingData) -> dict[str, torch.Tensor]:
        """``{"train": [N, V], <held-out split's name>: [M, V] if there is one}``, each checked by :meth:`_prepare`."""
        splits = {"train": self._prepare(model, data.train, data.labels["train"])}
        if data.held_out is not None:
            splits[data.held_out_name] = self._prepare(model, data.held_out, data.labels[data.held_out_name])
        return splits

    def _prepare(self, model: EnergyModel, split: torch.Tensor, name: str) -> torch.Tensor:
        """``split`` on the model's device and dtype, checked to be ``[N ≥ 1, V]`` (binary for binary models; in [0, 1]
        with ``binarize``, which needs a binary model)."""
        split = split.to(device=model.device, dtype=model.dtype)
        if self.settings.binarize and not model.binary_visible:
            raise ValueError(f"trainer.binarize needs a model with binary visible units; {type(model).__name__}'s are real-valued")
        check = check_binary if model.binary_visible and not self.settings.binarize else check_matrix
        check(split, name, width=model.num_visible, device=model.device)
        if self.settings.binarize:
            check_probabilities(split, name)
        if split.shape[0] == 0:
            raise ValueError(f"{name} must hold at least one example, got shape {tuple(split.shape)}")
        return split

    def _parameters(self, model: EnergyModel) -> list[nn.Parameter]:
        """What the optimiser updates: the model's parameters, then the objective's own (e.g. NCE's normaliser c)."""
        return [*model.parameters(), *self.objective.parameters()]

    def _now(self) -> float:
        """The clock of every timing the Trainer records (``settings.clock``): wall time, or the process's CPU time."""
        return time.process_time() if self.settings.clock == "cpu" else time.perf_counter()

    def _train_epoch(self, run: _Run, epoch: int) -> tuple[float, float]:
        """Epoch ``epoch``'s training phase: the objective's ``prepare``, then one pass over ``train [N, V]`` in a fresh
        random order; returns the example-weighted mean loss and this rank's seconds (the callbacks' time left out).
        Each rank computes the loss of its shard of every minibatch and the ranks' gradients are summed
        (:meth:`DistributedStrategy.minibatch_loss <pfzoo.training.distributed_strategy.DistributedStrategy.minibatch_loss>`)."""
        model, ranks, optimizer, train = run.model, run.ranks, run.optimizer, run.splits["train"]
        sampling = run.generators["sampling"]
        self.settings.apply_schedule(optimizer, epoch)
        self.objective.start_epoch(epoch)
        for callback in self.callbacks:
            callback.start_epoch(epoch)
        began, run.callback_seconds = self._now(), 0.0
        parameters = self._parameters(model)
        if ranks.agree_on_change(self.objective.prepare(model, train, generator=sampling), model):
            optimizer.state.clear()  # e.g. L-BFGS's curvature pairs describe the objective before the refresh
        if run.guard is not None:
            run.guard.after_prepare()  # a pretraining prepare: restore to the pretrained model, never to the initialisation
        order = torch.randperm(train.shape[0], generator=run.generators["shuffle"]).to(train.device)
        # The loss sum and the first non-finite loss stay on the device and are read once, after the epoch: a read per
        # batch would stall a GPU's queue at every step. L-BFGS reads every loss itself (its line search), so there the
        # closure checks at no cost and stops before a NaN reaches its curvature pairs.
        total = torch.zeros((), dtype=torch.float64, device=train.device)
        first_bad_batch = torch.full((), -1, dtype=torch.long, device=train.device)
        first_bad_loss = torch.zeros((), dtype=torch.float64, device=train.device)
        check_each_loss = line_searches(optimizer)
        batches = order.split(self.settings.batch_size)
        for index, rows in enumerate(tqdm(batches, desc=f"epoch {epoch}", leave=False, disable=not run.bars)):
            shard = ranks.shard(rows)  # [B_r]: this rank's contiguous part of the minibatch
            batch = minibatch(train, shard, run.probabilities, generator=sampling)
            row_indices = {"indices": shard} if self.objective.epoch_stateful else {}

            def shard_loss() -> torch.Tensor:
                """This rank's shard's mean loss; the rows, the row numbers (from randperm) and the model's capabilities
                were checked in ``fit``, so the objective checks none of them again."""
                with values_checked():
                    return self.objective.loss(model, batch, generator=sampling, **row_indices)

            def closure() -> torch.Tensor:
                """The minibatch's loss, its gradient in ``.grad``: the ranks' sum, then the L2 penalty's, the same on every
                rank, added once; preconditioned as the objective asks, then clipped to ``clip_grad_norm``."""
                optimizer.zero_grad(set_to_none=True)
                loss = ranks.minibatch_loss(shard_loss, shard.shape[0], rows.shape[0], parameters)
                if self.settings.weight_decay:
                    penalty = self.settings.weight_decay / 2 * sum(w.pow(2).sum() for w in run.weights)
                    penalty.backward()
                    loss = loss + penalty.detach()
                self.objective.precondition(model)
                if self.settings.clip_grad_norm is not None:  # clip_grad_norm_ reads nothing back: its scale stays a tensor
                    torch.nn.utils.clip_grad_norm_(parameters, self.settings.clip_grad_norm)
                if check_each_loss and not torch.isfinite(loss):
                    raise self._non_finite(loss.item(), epoch, index)
                return loss

            try:
                loss = optimizer.step(closure)
            except (RuntimeError, ValueError, FloatingPointError) as error:
                # a blow-up often surfaces as an error of the step after it (NaN probabilities refused by a Bernoulli draw)
                alarm = self._failed_step_alarm(run, error)
                if alarm is None:
                    raise
                self._diverged(run, epoch, alarm)
            newly_bad = (first_bad_batch < 0) & ~torch.isfinite(loss)
            first_bad_batch = torch.where(newly_bad, index, first_bad_batch)
            first_bad_loss = torch.where(newly_bad, loss.double(), first_bad_loss)
            total += loss * rows.shape[0]
            model.project_parameters()
            self._step_callbacks(run)
            alarm = None if run.guard is None else run.guard.after_step(loss, total)
            if alarm is not None:
                self._diverged(run, epoch, alarm)
        alarm = None if run.guard is None else run.guard.check(loss, total)  # the updates since the last check
        if alarm is not None:
            self._diverged(run, epoch, alarm)
        if first_bad_batch.item() >= 0:
            raise self._non_finite(first_bad_loss.item(), epoch, first_bad_batch.item())
        return total.item() / train.shape[0], self._now() - began - run.callback_seconds

    def _evaluate_epoch(self, run: _Run, epoch: int, loss: float, train_seconds: float) -> dict[str, Any]:
        """Epoch ``epoch``'s record (``fit``'s docstring): its ``loss``, the diagnostics (:meth:`_evaluate`), the
        objective's epoch metrics and ``epoch_metrics`` (timed together as ``evaluation_seconds``, outside ``seconds``:
        a DBM's exact pseudo-likelihood can take 20 times its epoch), both times the slowest rank's, then the callbacks'."""
        model = run.model
        began = self._now()
        diagnostics = self._evaluate(model, run.splits, epoch)
        with torch.no_grad():
            diagnostics.update(self.objective.epoch_metrics())
            diagnostics.update({name: float(metric(model)) for name, metric in self.epoch_metrics.items()})
        seconds, evaluation_seconds = run.ranks.slowest((train_seconds, self._now() - began), model.device)
        record = {"epoch": epoch, "loss": loss, "seconds": seconds, "evaluation_seconds": evaluation_seconds, **diagnostics}
        with torch.no_grad():
            record.update(self._end_callbacks_epoch(run, epoch))
        return record

    def _record(self, run: _Run, record: dict[str, Any], *, stopping: bool) -> None:
        """An epoch's recording phase: the leader appends ``record`` to the metrics files and logs it (at its epochs);
        at checkpoint epochs, and after the epoch that ends a run early (``stopping``), the checkpoint is written."""
        epoch = record["epoch"]
        if run.ranks.leader:
            self._metrics.append(record)
            if self.settings.logs(epoch):
                logger.info("epoch %d/%d  %s", epoch, self.settings.epochs, format_record(record))
        if self.settings.checkpoints(epoch, stopping=stopping):
            self._save(run, epoch)

    def _start_callbacks(self, model: EnergyModel, train: torch.Tensor, states: list | None) -> None:
        """Start callback i with its own seed (``seed + 3 + i``) and its state from the checkpoint resumed (if any)."""
        for index, callback in enumerate(self.callbacks):
            state = states[index] if states is not None and index < len(states) else None
            callback.start(model, train, seed=self.settings.seed + _CALLBACK_SEED_OFFSET + index, state=state)

    def _step_callbacks(self, run: _Run) -> None:
        """Every callback's ``on_step`` after an update, timed into ``run.callback_seconds``."""
        if not self.callbacks:
            return
        began = self._now()
        with torch.no_grad():
            for callback in self.callbacks:
                callback.on_step(run.model)
        run.callback_seconds += self._now() - began

    def _end_callbacks_epoch(self, run: _Run, epoch: int) -> dict[str, float]:
        """The callbacks' numbers for ``epoch``'s record (on the diagnostic rows) and ``callback_seconds``, their time."""
        if not self.callbacks:
            return {}
        began = self._now()
        splits = {name: self._diagnostic_rows(split) for name, split in run.splits.items()}
        record: dict[str, float] = {}
        for callback in self.callbacks:
            record.update(callback.on_epoch_end(run.model, epoch, splits))
        record["callback_seconds"] = run.callback_seconds + self._now() - began
        return record

    def _guard(self, run: _Run) -> DivergenceGuard | None:
        """The run's divergence guard (``None`` with ``divergence="off"``), started from the model as training starts
        (fresh or resumed), judging it on the held-out split's diagnostic rows (the training rows' without one)."""
        if self.settings.divergence == "off":
            return None
        held_out = self._diagnostic_rows(run.splits[held_out_name(run.splits)])
        seed, kind = self.settings.seed + _EVALUATION_SEED_OFFSET, score_kind(run.model)
        rows = score_rows(held_out, seed)

        def score() -> Score | None:
            return None if kind is None else held_out_score(run.model, rows, kind, seed=seed)

        return DivergenceGuard(self._parameters(run.model), score, run.model.num_visible)

    def _failed_step_alarm(self, run: _Run, error: Exception) -> Alarm | None:
        """The divergence behind an update that raised ``error``, or ``None`` (no guard, or sound parameters: a bug or
        a user error, which goes on up as it is)."""
        if run.guard is None:
            return None
        if isinstance(error, FloatingPointError):  # L-BFGS's closure met a non-finite loss
            return Alarm(str(error).split(";")[0], fatal=True)
        return run.guard.failed_step()

    def _diverged(self, run: _Run, epoch: int, alarm: Alarm, record: dict[str, Any] | None = None) -> None:
        """Act on ``alarm``: with ``divergence="warn"`` (and a finite state) log it once and note it in ``record``;
        otherwise restore the last good parameters, record the event in ``metrics.jsonl`` (in epoch ``epoch``'s
        record, or a record of its own when the epoch was cut short), write them as the checkpoint (marked, so it
        is not resumed) and raise :class:`~pfzoo.training.TrainingDiverged` with one line saying what to do."""
        guard, lr = run.guard, run.optimizer.param_groups[0]["lr"]
        if self.settings.divergence == "warn" and not alarm.fatal:
            if record is not None:
                record["divergence_warning"] = alarm.reason
            if not run.warned and run.ranks.leader:
                logger.warning("training may have diverged at epoch %d (update %d): %s; trainer.divergence=warn trains on "
                               "(lower trainer.optimizer.lr, now %g, or set trainer.clip_grad_norm)", epoch, guard.updates, alarm.reason, lr)
            run.warned = True
            return
        update, score = guard.restore()
        scored = f" ({describe_score(score)})" if score is not None else ""
        message = (f"training diverged at epoch {epoch}, update {guard.updates}: {alarm.reason}; stopped and restored the "
                   f"parameters after update {update}{scored}, saved in {self.checkpoint_path}; lower the learning rate "
                   f"(trainer.optimizer.lr={lr:g} now) or clip the gradients (trainer.clip_grad_norm=1.0)")
        details = {"epoch": epoch, "update": guard.updates, "signal": alarm.reason, "restored_update": update,
                   "restored_score": None if score is None else score.value, "restored_score_name": None if score is None else score.name}
        if run.ranks.leader:
            self._metrics.append({**(record or {"epoch": epoch}), "diverged": message, **{f"divergence_{k}": v for k, v in details.items() if k != "epoch"}})
        self._save(run, epoch, diverged=message)
        raise TrainingDiverged(message, details)

    def _non_finite(self, loss: float, epoch: int, batch: int) -> FloatingPointError:
        return FloatingPointError(
            f"loss is {loss} at epoch {epoch}, batch {batch}; the epoch was abandoned and "
            f"{self.checkpoint_path} (if written yet) holds the last good checkpoint"
        )

    def _diagnostic_rows(self, split: torch.Tensor) -> torch.Tensor:
        """The rows of ``split [N, V]`` the per-epoch diagnostics, the callbacks and the guard read: ``metrics_rows`` of
        them drawn at random once for the run (the same every epoch), or all (:func:`~pfzoo.training.metrics.random_rows`)."""
        return random_rows(split, self.settings.metrics_rows, self.settings.seed + _EVALUATION_SEED_OFFSET)

    def _evaluate(self, model: EnergyModel, splits: dict[str, torch.Tensor], epoch: int) -> dict[str, float | None]:
        """Reconstruction error and (where cheap) pseudo-log-likelihood on ``splits`` (``{"train": [N, V], <held-out
        name>: [M, V]}``, or ``{"train"}`` alone), plus the estimator at its epochs on the held-out split (the training
        rows without one; its base fitted to train)."""
        generator = torch.Generator(model.device).manual_seed(self.settings.seed + _EVALUATION_SEED_OFFSET)
        record: dict[str, float | None] = {}
        for name, split in splits.items():
            rows = self._diagnostic_rows(split)
            if has_reconstruction(model):
                record[f"{name}_reconstruction_error"] = reconstruction_error(model, rows)
            if pseudo_likelihood_is_affordable(model):
                record[f"{name}_pseudo_log_likelihood"] = pseudo_log_likelihood(model, rows, generator=generator)
            record.update({f"{name}_{key}": value for key, value in model.training_diagnostics(rows).items()})
        if self.estimator is not None and self.settings.evaluates(epoch):
            held = held_out_name(splits)
            estimate = self.estimator.log_likelihood(model, splits[held], base_data=splits["train"], generator=generator)
            record.update(estimate_record(estimate, held))
        return record

    def _save(self, run: _Run, epoch: int, *, diverged: str | None = None) -> None:
        """Write the checkpoint after ``epoch``: every rank sends its objective state and sampling stream to it, and
        the leader alone writes; ``diverged`` (the guard's message) marks the last good parameters of a run that
        diverged, which a resume refuses."""
        gathered = run.ranks.gather(lambda: rank_state(self.objective, run.generators["sampling"]))
        if run.ranks.leader:
            callbacks = [callback.state_dict() for callback in self.callbacks]
            state = trainer_state(epoch, run.optimizer, self.objective, run.generators, gathered, callbacks)
            if diverged is not None:
                state["diverged"] = diverged
            self._checkpoints.write(run.model, state, run.config)

    def _restore(self, run: _Run) -> tuple[int, list | None]:
        """Load ``checkpoint.pt`` (read by the leader for every rank) into the model, optimiser, objective and
        generators once it passes the resume checks; returns its epoch (0 if there is none) and the callbacks' saved
        states (``None`` if it holds none)."""
        ranks, epochs = run.ranks, self.settings.epochs
        checkpoint = ranks.from_leader(self._checkpoints.read)
        if checkpoint is None:
            if ranks.leader:
                logger.warning("resume=True but there is no checkpoint at %s; starting fresh", self.checkpoint_path)
            return 0, None
        if checkpoint["trainer_state"] is not None and checkpoint["trainer_state"].get("diverged"):
            raise ValueError(f"resume=true refused: {self.checkpoint_path} holds the last good parameters of a run that diverged "
                             f"(metrics.jsonl says how); start a new run_dir with a lower learning rate or trainer.clip_grad_norm")
        self._checkpoints.check_resumable(checkpoint, run.model, run.config, ranks.world_size)
        saved = checkpoint["trainer_state"]["epoch"]
        if saved > epochs:  # the loop would run no epoch and the run end as if it had trained to epochs
            raise ValueError(f"resume=true refused: {self.checkpoint_path} is at epoch {saved}, past "
                             f"trainer.epochs={epochs}; ask for trainer.epochs > {saved} to train on, or start a new run_dir")
        if saved == epochs and ranks.leader:
            logger.warning("%s is already at epoch %d = trainer.epochs: no epoch to train (ask for trainer.epochs > %d to train on)",
                           self.checkpoint_path, saved, saved)
        epoch = restore_trainer_state(checkpoint, run.model, run.optimizer, self.objective, run.generators, ranks.rank)
        if ranks.leader:
            logger.info("resuming from %s after epoch %d", self.checkpoint_path, epoch)
        return epoch, checkpoint["trainer_state"].get("callbacks")
