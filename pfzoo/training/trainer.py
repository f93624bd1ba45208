"""The training loop: minibatch epochs over an objective, JSON-lines metrics, atomic checkpoints, exact resume."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import torch
from torch import nn
from tqdm.auto import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from pfzoo import distributed
from pfzoo.estimators.base import Estimator
from pfzoo.models.base import EnergyModel
from pfzoo.training.metrics import has_reconstruction, pseudo_likelihood_is_affordable, pseudo_log_likelihood, reconstruction_error
from pfzoo.training.objective import Objective
from pfzoo.validation import check_binary, check_bool, check_finite_number, check_matrix, check_positive_int, values_checked
from pfzoo.zoo import load_checkpoint, save

logger = logging.getLogger(__name__)

OptimizerFactory = Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]
EpochMetric = Callable[[EnergyModel], float]
DEFAULT_OPTIMIZER: OptimizerFactory = partial(torch.optim.SGD, lr=0.05, momentum=0.5)
CHECKPOINT_FILE = "checkpoint.pt"
METRICS_FILE = "metrics.jsonl"
LOGGED_EPOCHS = 20
"""By default about this many epochs get a log line (the first and last always), so a run's report fits on a screen;
metrics.jsonl keeps every epoch."""
_SAMPLING_SEED_OFFSET = 1
_EVALUATION_SEED_OFFSET = 2


class Trainer:
    """Fits any :class:`~pfzoo.models.EnergyModel` by minibatch descent on an objective's loss.

    Each epoch reshuffles the training set, takes one optimiser step per minibatch on
    ``objective.loss(model, batch, generator=...)`` plus the L2 penalty
    ``weight_decay / 2 · Σ ||W||²`` over the parameters named ``weight`` (or ``*.weight``) only,
    biases excluded; appends one JSON line of metrics to ``<run_dir>/metrics.jsonl``; and every
    ``checkpoint_every`` epochs (and after the last) writes ``<run_dir>/checkpoint.pt`` atomically
    with :func:`pfzoo.zoo.save`. Its ``trainer_state`` is
    ``{"epoch": int, "optimizer": optimizer.state_dict(), "objective": objective.state_dict(),
    "generators": {"shuffle": ByteTensor, "sampling": ByteTensor}}``, enough to resume bit-for-bit.

    After every optimiser step, the model is projected back onto its constraint set with
    :meth:`~pfzoo.models.EnergyModel.project_parameters` (e.g. :class:`~pfzoo.models.LinearGenerative`'s bounded basis norms).

    Random streams: the data order comes from a CPU generator seeded with ``seed``, the objective's
    sampling from a generator on the model's device seeded with ``seed + 1``. Evaluation
    (pseudo-likelihood bit flips, the estimator) uses a generator re-seeded with ``seed + 2`` at
    every evaluation, so it never perturbs training and epochs are compared with common random numbers.

    Several processes: while a ``torch.distributed`` process group is initialised (``torchrun``, world size R ≥ 1;
    :func:`pfzoo.distributed.is_active`), every rank must call ``fit`` alike (same model, data and settings). All ranks
    draw the same shuffled order (the shuffle stream is seeded alike) and cut each minibatch of ``batch_size`` rows
    ``[B]`` into R contiguous shards ``[B_r]`` (sizes differ by at most one; :func:`pfzoo.distributed.owned_share`);
    rank r evaluates the objective on its shard alone (an epoch-stateful objective gets the shard's row numbers as
    ``indices``). Each rank's gradient and loss, weighted by its share ``B_r / B``, are summed over the ranks in one
    ``all_reduce`` of a flat buffer per loss evaluation (each closure call of an L-BFGS step included), and the L2
    penalty's gradient is added after it: this is equivalent to DistributedDataParallel's gradient averaging, written
    out because DDP prepares its reducer in ``forward`` while objectives call other model methods (``free_energy``,
    ``energy``, ...). Every rank then takes the same step, so the parameters (broadcast from rank 0 at the start) stay
    identical. What a 2-rank run equals: for deterministic objectives (pseudo-likelihood, bit-flip MPF, exact maximum
    likelihood) the updates of one process with the same ``batch_size``, up to the order of floating-point summation;
    for sampling objectives (CD, PCD, EM-HMC, persistent MPF) the same algorithm with the same total number of chains
    (PCD splits its ``num_chains`` across the ranks) on other random streams, so their numbers differ from one
    process's. Rank r > 0 samples from a generator seeded by (``seed + 1``, r) with
    :func:`pfzoo.distributed.block_generator`; rank 0 keeps the stream of a run without a process group, so a 1-rank
    ``torchrun`` run trains as a plain one, bit for bit. An epoch-stateful objective prepares the whole training set on
    every rank with that rank's stream (when any rank reports a change the optimiser's state is discarded and the model
    re-broadcast from rank 0, since a prepare that trains, a DBM's greedy pretraining, drew from each rank's stream). Evaluation
    runs on every rank alike: estimators shard their chains, pseudo-likelihood and reconstruction error are computed
    whole on each rank. Rank 0 alone writes ``metrics.jsonl``, checkpoints and log lines; an epoch's ``seconds`` is
    the slowest rank's (so the ``max_seconds`` rule stops every rank at the same epoch). The checkpoint's
    ``trainer_state`` then also holds ``"ranks": [{"objective": state_dict, "sampling": ByteTensor}, ...]``, every
    rank's objective state (e.g. its PCD chains) and sampling stream in rank order (``"objective"`` and
    ``generators["sampling"]`` are rank 0's), and resumes only with the same number of ranks; a checkpoint without
    ``"ranks"`` counts as one rank's.

    Metrics per epoch: ``epoch``, ``loss`` (mean minimised loss, penalty included), ``seconds``
    (training time), ``{train,test}_reconstruction_error`` (models with ``hidden_probs`` /
    ``visible_probs``, and DBMs, where it is the squared error of ``σ(μ¹ W_0ᵀ + b_0)`` with ``μ¹`` the
    first hidden layer's mean-field posterior means: a cheap diagnostic, not a likelihood; see
    :func:`~pfzoo.training.reconstruction_error`), ``{train,test}_pseudo_log_likelihood`` (binary
    models whose exact free energy is cheap: ``free_energy_cost`` not ``None`` and at most
    :data:`~pfzoo.training.metrics.PSEUDO_LIKELIHOOD_MAX_UNITS` and the model's
    ``max_enumeration_units``; so RBMs always, DBMs only with few even hidden units), and, at estimator
    epochs, ``test_log_likelihood``, ``test_log_likelihood_stderr`` and ``log_z``. A DBM's mean-field
    lower bound on ``log f(v)`` is deliberately not logged: without ``log Z`` it says nothing about the
    likelihood. For honest likelihoods of DBMs set ``evaluate_every`` with an estimator (exact for tiny
    models, AIS otherwise). Each name of ``epoch_metrics`` adds its value.

    Stopping early: a run ends before ``epochs`` when its recorded epochs meet a stopping rule, checked
    before every epoch (so a resumed run that had already stopped trains no further): ``stop_tolerance``
    (the last epoch changed the loss by at most that, relative) or ``max_seconds`` (the training seconds
    summed over the epochs reached that budget). The epoch that meets a rule is checkpointed. With
    full-batch L-BFGS an epoch's loss is the loss *before* its step (what ``LBFGS.step`` returns), so
    the tolerance rule stops one step after the step that changed the loss by less than the tolerance.

    Args:
        objective: an :class:`~pfzoo.training.Objective`, ``loss(model, batch, *, generator) -> scalar``; its state
            (e.g. PCD's chains) is checkpointed. An objective that overrides
            ``prepare(model, train, *, generator) -> bool`` (e.g. :class:`~pfzoo.training.PersistentMPF`)
            is epoch-stateful: it is called at the start of every epoch with the full training set
            ``[N, V]``, and then ``loss`` also receives ``indices=rows``, the batch's row numbers ``[B]``
            in that set. When ``prepare`` returns ``True`` the objective has changed (e.g. MPF's θ_old
            was refreshed), and the optimiser's state (L-BFGS history, momentum) is discarded.
        optimizer: ``params -> torch.optim.Optimizer``; default SGD(lr=0.05, momentum=0.5).
        run_dir: directory for ``checkpoint.pt`` and ``metrics.jsonl``.
        epochs: total number of epochs (a resumed run continues up to it).
        batch_size: examples per minibatch (the last one of an epoch may be smaller).
        weight_decay: L2 coefficient λ ≥ 0 (gradient ``λ W`` on weights).
        learning_rate_decay: τ ≥ 0; epoch e runs at ``lr_0 / (1 + τ (e − 1))`` with ``lr_0`` the optimiser's
            initial learning rate (kept as ``initial_lr`` in its state, so resumed runs continue the schedule);
            0 keeps the rate constant.
        checkpoint_every: epochs between checkpoints.
        evaluate_every: epochs between estimator evaluations (and after the last); 0 = never.
        estimator: log-likelihood estimator for those evaluations, fitted with ``base_data`` = train.
        progress: show tqdm bars over epochs and batches.
        seed: root of the random streams above.
        stop_tolerance: τ ≥ 0; stop when ``|loss_e − loss_(e−1)| ≤ τ · max(1, |loss_e|)`` (e.g. full-batch
            L-BFGS on a convex objective that has converged); 0 = never.
        max_seconds: stop once the epochs' training seconds sum to at least this (a wall-time budget, as in
            comparisons of learners at equal time; the epoch count then depends on the machine); None = never.
        epoch_metrics: ``{name: model -> float}`` evaluated after every epoch, outside the timed region, under
            ``torch.no_grad`` and logged under ``name`` (e.g. the error of the learned parameters against a
            known truth); None = none.
        log_every: log a line every this many epochs (and the first and last); ``None``: about
            :data:`LOGGED_EPOCHS` lines per run.
    """

    def __init__(
        self,
        objective: Objective,
        optimizer: OptimizerFactory = DEFAULT_OPTIMIZER,
        *,
        run_dir: str | os.PathLike,
        epochs: int = 10,
        batch_size: int = 100,
        weight_decay: float = 0.0,
        learning_rate_decay: float = 0.0,
        checkpoint_every: int = 1,
        evaluate_every: int = 0,
        estimator: Estimator | None = None,
        progress: bool = True,
        seed: int = 0,
        stop_tolerance: float = 0.0,
        max_seconds: float | None = None,
        epoch_metrics: Mapping[str, EpochMetric] | None = None,
        log_every: int | None = None,
    ) -> None:
        if not isinstance(objective, Objective):
            raise ValueError(f"objective must be a pfzoo.training.Objective (loss(model, batch, *, generator)), got {type(objective).__name__}")
        if not callable(optimizer):
            raise ValueError(f"optimizer must be a callable params -> torch.optim.Optimizer, got {type(optimizer).__name__}")
        if isinstance(optimizer, partial):  # a config's optimizer: torch accepts lr=nan and would train to NaN
            for key, value in optimizer.keywords.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    check_finite_number(value, f"optimizer.{key}", minimum=0.0)
        weight_decay = check_finite_number(weight_decay, "weight_decay", minimum=0.0)
        learning_rate_decay = check_finite_number(learning_rate_decay, "learning_rate_decay", minimum=0.0)
        check_bool(progress, "progress")
        if isinstance(evaluate_every, bool) or not isinstance(evaluate_every, int) or evaluate_every < 0:
            raise ValueError(f"evaluate_every must be a non-negative integer (0 = never), got {evaluate_every!r}")
        if estimator is not None and not isinstance(estimator, Estimator):
            raise ValueError(f"estimator must be a pfzoo.estimators.Estimator or None, got {type(estimator).__name__}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        self.objective = objective
        self.make_optimizer = optimizer
        self.run_dir = Path(run_dir)
        self.epochs = check_positive_int(epochs, "epochs")
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.weight_decay = float(weight_decay)
        if not learning_rate_decay >= 0:
            raise ValueError(f"learning_rate_decay must be non-negative, got {learning_rate_decay}")
        self.learning_rate_decay = float(learning_rate_decay)
        self.checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
        self.evaluate_every = evaluate_every
        self.estimator = estimator
        self.progress = bool(progress)
        self.seed = seed
        if isinstance(stop_tolerance, bool) or not isinstance(stop_tolerance, (int, float)) or not stop_tolerance >= 0 or stop_tolerance == float("inf"):
            raise ValueError(f"stop_tolerance must be a finite non-negative number (0 = never stop early), got {stop_tolerance}")
        self.stop_tolerance = float(stop_tolerance)
        if max_seconds is not None and not max_seconds > 0:
            raise ValueError(f"max_seconds must be positive or None (no time budget), got {max_seconds}")
        self.max_seconds = None if max_seconds is None else float(max_seconds)
        epoch_metrics = dict(epoch_metrics or {})
        for name, metric in epoch_metrics.items():
            if not isinstance(name, str) or not callable(metric):
                raise ValueError(f"epoch_metrics must map names to callables model -> float, got {name!r}: {type(metric).__name__}")
        self.epoch_metrics = epoch_metrics
        self.log_every = max(1, self.epochs // LOGGED_EPOCHS) if log_every is None else check_positive_int(log_every, "log_every")

    @property
    def checkpoint_path(self) -> Path:
        return self.run_dir / CHECKPOINT_FILE

    @property
    def metrics_path(self) -> Path:
        return self.run_dir / METRICS_FILE

    def fit(self, model: EnergyModel, data, *, resume: bool = False, config: dict | None = None) -> dict[str, Any]:
        """Train ``model`` on ``data.train [N, V]`` (evaluating on ``data.test``); returns the last epoch's metrics.

        ``data`` is a :class:`pfzoo.data.DataSplits`; its splits are moved to the model's device and
        dtype. ``resume=True`` continues from ``<run_dir>/checkpoint.pt`` when it exists (starting
        fresh, with a warning, when it does not); ``config`` (a plain dict, e.g. the resolved Hydra
        config) is stored in every checkpoint. Raises ``FloatingPointError`` when the loss becomes
        NaN or infinite, checked once per epoch (no host sync per step): the model then holds that epoch's parameters and
        the checkpoint on disk is the last good one. An objective or estimator that
        does not apply to ``model`` is refused (:class:`~pfzoo.models.MissingCapability`) before anything runs.
        """
        self.objective.check(model)
        if self.estimator is not None:
            self.estimator.check(model)
        train = self._prepare(model, data.train, "data.train")
        test = self._prepare(model, data.test, "data.test")
        self.objective.to(model.device)
        if self.estimator is not None:
            self.estimator.to(model.device)
        optimizer = self.make_optimizer(model.parameters())
        generators = {"shuffle": torch.Generator().manual_seed(self.seed), "sampling": self._sampling_generator(model.device)}
        leader = distributed.rank() == 0  # the one rank that writes files and logs (every rank without a group)
        if leader:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._remove_stale_temporaries()
        start = self._restore(model, optimizer, generators, config) if resume else 0
        if distributed.is_active():
            distributed.broadcast_module_state(model)  # as DDP does: ranks that were initialised apart still start from one model
        records = self._metrics_through(start)
        weights = [p for name, p in model.named_parameters() if name.rsplit(".", 1)[-1] == "weight"]
        # Bars only on a terminal (the per-epoch log line reports progress elsewhere); log lines go through tqdm.
        bars = self.progress and sys.stderr.isatty() and leader
        with logging_redirect_tqdm(), tqdm(total=self.epochs, initial=start, desc="epochs", unit="epoch", disable=not bars) as bar:
            for epoch in range(start + 1, self.epochs + 1):
                reason = self.stop_reason(records)
                if reason is not None:
                    if leader:
                        logger.info("stopping after epoch %d of %d: %s", epoch - 1, self.epochs, reason)
                    break
                self._set_learning_rate(optimizer, epoch)
                began = time.perf_counter()
                loss = self._train_epoch(model, train, optimizer, weights, generators, epoch)
                seconds = time.perf_counter() - began
                if distributed.is_active():  # one record for all ranks, or the max_seconds rule could stop some ranks only
                    seconds = distributed.max_over_ranks(seconds, model.device)
                record = {"epoch": epoch, "loss": loss, "seconds": seconds}
                record.update(self._evaluate(model, train, test, epoch))
                with torch.no_grad():
                    record.update({name: float(metric(model)) for name, metric in self.epoch_metrics.items()})
                if leader:
                    with self.metrics_path.open("a") as file:
                        file.write(json.dumps(record) + "\n")
                records.append(record)
                if leader and (epoch % self.log_every == 0 or epoch in (1, self.epochs)):
                    logger.info("epoch %d/%d  %s", epoch, self.epochs, format_record(record))
                if epoch % self.checkpoint_every == 0 or epoch == self.epochs or self.stop_reason(records) is not None:
                    self._save(model, optimizer, generators, epoch, config)
                bar.update()
                bar.set_postfix(loss=f"{loss:.4g}")
        return records[-1] if records else {"epoch": start, **self._evaluate(model, train, test, start)}

    def stop_reason(self, records: list[dict[str, Any]]) -> str | None:
        """Why training should stop after the epochs ``records`` (oldest first), or None to go on."""
        if self.stop_tolerance and len(records) >= 2:
            change, loss = abs(records[-1]["loss"] - records[-2]["loss"]), abs(records[-1]["loss"])
            if change <= self.stop_tolerance * max(1.0, loss):
                return f"epoch {records[-1]['epoch']} changed the loss by {change:.3g} ≤ {self.stop_tolerance:g} · max(1, |loss|)"
        if self.max_seconds is not None:
            seconds = sum(record["seconds"] for record in records)
            if seconds >= self.max_seconds:
                return f"{seconds:.1f} training seconds reached the budget max_seconds={self.max_seconds:g}"
        return None

    def _prepare(self, model: EnergyModel, split: torch.Tensor, name: str) -> torch.Tensor:
        """``split`` on the model's device and dtype, checked to be ``[N ≥ 1, V]`` (binary for binary models)."""
        split = split.to(device=model.device, dtype=model.dtype)
        check = check_binary if model.binary_visible else check_matrix
        check(split, name, width=model.num_visible, device=model.device)
        if split.shape[0] == 0:
            raise ValueError(f"{name} must hold at least one example, got shape {tuple(split.shape)}")
        return split

    def _set_learning_rate(self, optimizer: torch.optim.Optimizer, epoch: int) -> None:
        """``lr = initial_lr / (1 + learning_rate_decay · (epoch − 1))`` in every parameter group."""
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
            group["lr"] = group["initial_lr"] / (1 + self.learning_rate_decay * (epoch - 1))

    def _sampling_generator(self, device: torch.device) -> torch.Generator:
        """The objective's sampling stream on ``device``: seeded with ``seed + 1`` without a process group and on rank 0,
        by (``seed + 1``, rank) through :func:`pfzoo.distributed.block_generator` on the other ranks, so persistent
        chains differ between ranks while a 1-rank ``torchrun`` run keeps the stream of a plain run."""
        this = distributed.rank()
        if this == 0:
            return torch.Generator(device).manual_seed(self.seed + _SAMPLING_SEED_OFFSET)
        return distributed.block_generator(self.seed + _SAMPLING_SEED_OFFSET, this, device)

    def _train_epoch(
        self,
        model: EnergyModel,
        train: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        weights: list[nn.Parameter],
        generators: dict[str, torch.Generator],
        epoch: int,
    ) -> float:
        """One pass over ``train [N, V]`` in a fresh random order, after the objective's ``prepare`` if it has one;
        returns the example-weighted mean loss. Under a process group each rank computes the loss of its shard of every
        minibatch and the ranks' gradients are summed (class docstring)."""
        stateful = self.objective.epoch_stateful
        group = distributed.is_active()
        parameters = list(model.parameters())
        changed = self.objective.prepare(model, train, generator=generators["sampling"])
        if group:  # every rank must clear alike, or their L-BFGS steps would part
            changed = distributed.max_over_ranks(float(bool(changed)), model.device) > 0
            if changed:  # a prepare that trains (a DBM's greedy pretraining) drew from each rank's own stream
                distributed.broadcast_module_state(model)
        if changed:
            optimizer.state.clear()  # e.g. L-BFGS's curvature pairs describe the objective before the refresh
        order = torch.randperm(train.shape[0], generator=generators["shuffle"]).to(train.device)
        # The loss sum and the first non-finite loss stay on the device and are read once, after the epoch: a read per
        # batch would stall a GPU's queue at every step. L-BFGS reads every loss itself (its line search), so there the
        # closure checks at no cost and stops before a NaN reaches its curvature pairs.
        total = torch.zeros((), dtype=torch.float64, device=train.device)
        first_bad_batch = torch.full((), -1, dtype=torch.long, device=train.device)
        first_bad_loss = torch.zeros((), dtype=torch.float64, device=train.device)
        check_each_loss = isinstance(optimizer, torch.optim.LBFGS)
        batches = order.split(self.batch_size)
        batch_bars = self.progress and sys.stderr.isatty()  # redirected to a file, a bar writes a line per refresh
        for index, rows in enumerate(tqdm(batches, desc=f"epoch {epoch}", leave=False, disable=not batch_bars)):
            shard = rows
            if group:
                share = distributed.owned_share(rows.shape[0])
                shard = rows[share.start : share.stop]  # [B_r]: this rank's contiguous part of the minibatch
            batch = train[shard]
            row_indices = {"indices": shard} if stateful else {}

            def closure() -> torch.Tensor:
                """The minibatch's loss, its gradient in ``.grad``: under a process group this rank's shard's weighted by
                ``B_r / B`` and summed over the ranks (the minibatch mean is ``Σ_r B_r/B · mean_r``); then the L2
                penalty's, the same on every rank, added once."""
                optimizer.zero_grad(set_to_none=True)
                loss = torch.zeros((), dtype=model.dtype, device=model.device)
                if shard.numel():  # a minibatch smaller than the world size leaves some ranks without rows
                    with values_checked():  # rows of the split checked in fit, and row numbers from randperm
                        loss = self.objective.loss(model, batch, generator=generators["sampling"], **row_indices)
                    if group:
                        loss = loss * (shard.shape[0] / rows.shape[0])
                    loss.backward()
                loss = loss.detach()
                if group:
                    loss = distributed.all_reduce_gradients(parameters, loss, structure_may_differ=rows.shape[0] < distributed.world_size())
                if self.weight_decay:
                    penalty = self.weight_decay / 2 * sum(w.pow(2).sum() for w in weights)
                    penalty.backward()
                    loss = loss + penalty.detach()
                if check_each_loss and not torch.isfinite(loss):
                    raise self._non_finite(loss.item(), epoch, index)
                return loss

            loss = optimizer.step(closure)
            newly_bad = (first_bad_batch < 0) & ~torch.isfinite(loss)
            first_bad_batch = torch.where(newly_bad, index, first_bad_batch)
            first_bad_loss = torch.where(newly_bad, loss.double(), first_bad_loss)
            total += loss * rows.shape[0]
            model.project_parameters()  # the model's constraints, e.g. bounded basis norms
        if first_bad_batch.item() >= 0:
            raise self._non_finite(first_bad_loss.item(), epoch, first_bad_batch.item())
        return total.item() / train.shape[0]

    def _non_finite(self, loss: float, epoch: int, batch: int) -> FloatingPointError:
        return FloatingPointError(
            f"loss is {loss} at epoch {epoch}, batch {batch}; the epoch was abandoned and "
            f"{self.checkpoint_path} (if written yet) holds the last good checkpoint"
        )

    def _evaluate(self, model: EnergyModel, train: torch.Tensor, test: torch.Tensor, epoch: int) -> dict[str, float | None]:
        """Reconstruction error and (where cheap) pseudo-log-likelihood on both splits, plus the estimator at its epochs."""
        generator = torch.Generator(model.device).manual_seed(self.seed + _EVALUATION_SEED_OFFSET)
        record: dict[str, float | None] = {}
        for split, v in (("train", train), ("test", test)):
            if has_reconstruction(model):
                record[f"{split}_reconstruction_error"] = reconstruction_error(model, v)
            if pseudo_likelihood_is_affordable(model):
                record[f"{split}_pseudo_log_likelihood"] = pseudo_log_likelihood(model, v, generator=generator)
        if self.estimator is not None and self.evaluate_every and (epoch % self.evaluate_every == 0 or epoch == self.epochs):
            estimate = self.estimator.log_likelihood(model, test, base_data=train, generator=generator)
            record["test_log_likelihood"] = estimate.mean
            record["test_log_likelihood_stderr"] = estimate.stderr
            record["log_z"] = None if estimate.partition is None else estimate.partition.log_z
        return record

    def _save(self, model: EnergyModel, optimizer: torch.optim.Optimizer, generators: dict[str, torch.Generator], epoch: int, config: dict | None) -> None:
        """Write the checkpoint (class docstring); under a process group every rank sends its objective state and
        sampling stream to it and rank 0 alone writes."""
        trainer_state = {
            "epoch": epoch,
            "optimizer": optimizer.state_dict(),
            "objective": self.objective.state_dict(),
            "generators": {name: generator.get_state() for name, generator in generators.items()},
        }
        if distributed.is_active():
            own = {"objective": {key: value.detach().cpu() for key, value in self.objective.state_dict().items()},
                   "sampling": generators["sampling"].get_state()}
            trainer_state["ranks"] = distributed.all_gather(own)
        if distributed.rank() == 0:
            save(self.checkpoint_path, model, config=config, trainer_state=trainer_state)
            logger.debug("saved checkpoint after epoch %d to %s", epoch, self.checkpoint_path)

    def _restore(
        self, model: EnergyModel, optimizer: torch.optim.Optimizer, generators: dict[str, torch.Generator], config: dict | None = None
    ) -> int:
        """Load ``checkpoint.pt`` into the model, optimiser, objective and generators; returns its epoch (0 if none).

        A run resumes only under the config it started with: ``config`` may differ from the checkpoint's only in
        :data:`RESUMABLE_KEYS` (more epochs, where the run lives, whether bars show); any other difference (a
        learning rate, a seed, a chain count) is refused in one line that lists it, since resuming would silently
        continue the old settings' optimiser state and random streams under the new ones' name. A checkpoint written by
        a different number of ranks is refused too (its ranks' chains and streams have no counterpart here)."""
        checkpoint = self._read_checkpoint()
        if checkpoint is None:
            if distributed.rank() == 0:
                logger.warning("resume=True but there is no checkpoint at %s; starting fresh", self.checkpoint_path)
            return 0
        name = model.registry_name
        if checkpoint["trainer_state"] is None or checkpoint["model"] != name or checkpoint["model_config"] != model.config():
            raise ValueError(
                f"{self.checkpoint_path} cannot resume this run: it holds a {checkpoint['model']!r} model with config "
                f"{checkpoint['model_config']} (trainer state {'absent' if checkpoint['trainer_state'] is None else 'present'}), "
                f"expected a {name!r} model with config {model.config()}"
            )
        differences = config_differences(checkpoint["config"], config)
        if differences:
            raise ValueError(
                f"resume=true refused: the config differs from the one {self.checkpoint_path} was trained with in "
                f"{'; '.join(differences)} (only {', '.join(RESUMABLE_KEYS)} may change; start a new run_dir instead)"
            )
        state = checkpoint["trainer_state"]
        ranks = state.get("ranks")
        saved, world = (1 if ranks is None else len(ranks)), distributed.world_size()
        if saved != world:
            raise ValueError(
                f"resume=true refused: {self.checkpoint_path} was trained on {saved} rank(s) but this run has {world} "
                f"(resume with torchrun --nproc_per_node={saved}, or start a new run_dir)"
            )
        model.load_state_dict(checkpoint["state_dict"])
        optimizer.load_state_dict(state["optimizer"])
        own = {"objective": state["objective"], "sampling": state["generators"]["sampling"]} if ranks is None else ranks[distributed.rank()]
        self.objective.load_state_dict(own["objective"])
        generators["shuffle"].set_state(state["generators"]["shuffle"])
        generators["sampling"].set_state(own["sampling"])
        if distributed.rank() == 0:
            logger.info("resuming from %s after epoch %d", self.checkpoint_path, state["epoch"])
        return state["epoch"]

    def _read_checkpoint(self) -> dict[str, Any] | None:
        """The raw checkpoint at :attr:`checkpoint_path`, ``None`` when there is none. Under a process group rank 0
        reads it and sends it to the others, so every rank decides alike (and the run directory need not be shared)."""
        if not distributed.is_active():
            return load_checkpoint(self.checkpoint_path) if self.checkpoint_path.is_file() else None
        shared: list[Any] = [None, None]  # [checkpoint, rank 0's error message]
        if distributed.rank() == 0 and self.checkpoint_path.is_file():
            try:
                shared[0] = load_checkpoint(self.checkpoint_path)
            except ValueError as error:
                shared[1] = str(error)
        distributed.broadcast_from_first(shared)
        if shared[1] is not None:
            raise ValueError(shared[1])
        return shared[0]

    def _remove_stale_temporaries(self) -> None:
        """Delete ``.checkpoint.pt.*.tmp`` files: a save killed mid-write (SIGKILL skips its clean-up) leaves one, and
        only one run writes to a run directory, so any found before the first save belong to no live writer."""
        for stale in self.run_dir.glob(f".{self.checkpoint_path.name}.*.tmp"):
            logger.info("removing %s, left by a checkpoint write that was killed", stale)
            stale.unlink(missing_ok=True)

    def _metrics_through(self, epoch: int) -> list[dict[str, Any]]:
        """:meth:`_rewrite_metrics_through` on rank 0, whose records every rank then holds (the stopping rules read them)."""
        records = self._rewrite_metrics_through(epoch) if distributed.rank() == 0 else None
        if distributed.is_active():
            shared = [records]
            distributed.broadcast_from_first(shared)
            records = shared[0]
        return records

    def _rewrite_metrics_through(self, epoch: int) -> list[dict[str, Any]]:
        """Keep only the records of epochs ≤ ``epoch`` in ``metrics.jsonl`` (later ones postdate the checkpoint); return them.

        A line that is not a JSON record (the last line torn by a kill mid-write) is dropped with a warning."""
        records = []
        if self.metrics_path.is_file():
            with self.metrics_path.open() as file:
                for number, line in enumerate(file, 1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError:
                        record = None
                    if not isinstance(record, dict) or not isinstance(record.get("epoch"), int):
                        logger.warning("%s line %d is not a metrics record (torn by a kill?); dropped", self.metrics_path, number)
                    elif record["epoch"] <= epoch:
                        records.append(record)
        self.metrics_path.write_text("".join(json.dumps(record) + "\n" for record in records))
        return records


RESUMABLE_KEYS = ("trainer.epochs", "run_dir", "resume", "trainer.progress", "progress", "data.root", "dataset.root")
"""Config keys a resumed run may change: the number of epochs, where the run and its data live, progress bars."""


def config_differences(stored: Mapping | None, current: Mapping | None, prefix: str = "") -> list[str]:
    """``"key: old → new"`` for every leaf that differs between two plain config dicts, :data:`RESUMABLE_KEYS` aside.
    Nothing is compared when either is ``None`` (a run started from the library without a config)."""
    if stored is None or current is None:
        return []
    differences = []
    for key in sorted(set(stored) | set(current)):
        path = f"{prefix}{key}"
        if path in RESUMABLE_KEYS:
            continue
        old, new = stored.get(key, "<absent>"), current.get(key, "<absent>")
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            differences += config_differences(old, new, f"{path}.")
        elif old != new:
            differences.append(f"{path}: {old!r} → {new!r}")
    return differences


def format_record(record: Mapping[str, Any]) -> str:
    """One epoch's metrics on one line, about 4 significant figures (metrics.jsonl keeps full precision)."""
    parts = []
    for key, value in record.items():
        if key == "epoch":
            continue
        parts.append(f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}")
    return "  ".join(parts)
