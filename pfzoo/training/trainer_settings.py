"""The Trainer's settings: one validated, immutable record of the numbers that shape a run, and the rules they imply
(the learning-rate schedule, which epochs log, evaluate and checkpoint, when a run stops early)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from functools import partial
from typing import Any, Callable, Iterable, Sequence

import torch
from torch import nn

from pfzoo.data.splits import check_held_out
from pfzoo.training.divergence import DIVERGENCE_MODES
from pfzoo.validation import check_bool, check_choice, check_finite_number, check_positive_int

OptimizerFactory = Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]
DEFAULT_OPTIMIZER: OptimizerFactory = partial(torch.optim.SGD, lr=0.05, momentum=0.5)
CLOCKS = ("wall", "cpu")
"""What the Trainer's ``seconds`` measure: wall time (``time.perf_counter``) or the process's CPU time
(``time.process_time``, all its threads), which other processes sharing the cores do not stretch."""
LOGGED_EPOCHS = 20
"""By default about this many epochs get a log line (the first and last always), so a run's report fits on a screen;
metrics.jsonl keeps every epoch."""
DEFAULT_METRICS_ROWS = 2000
"""Rows of each split the per-epoch diagnostics read by default: on binarized MNIST a 784 × 500 RBM's reconstruction
error and pseudo-log-likelihood on 2,000 training and 2,000 validation digits cost a few percent of a PCD epoch
(benchmark case ``rbm_pcd_trainer``), on all 60,000 more than the epoch's training."""


def check_optimizer_factory(optimizer: Any) -> OptimizerFactory:
    """Require a callable ``params -> torch.optim.Optimizer``; a ``functools.partial`` (a config's optimizer) must hold
    finite non-negative numbers, since torch accepts ``lr=nan`` and would train to NaN."""
    if not callable(optimizer):
        raise ValueError(f"optimizer must be a callable params -> torch.optim.Optimizer, got {type(optimizer).__name__}")
    if isinstance(optimizer, partial):
        for key, value in optimizer.keywords.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                check_finite_number(value, f"optimizer.{key}", minimum=0.0)
    return optimizer


def decayed_weights(model: nn.Module) -> list[nn.Parameter]:
    """The parameters the L2 penalty ``weight_decay`` acts on: those whose name ends in ``weight`` (an RBM's ``weight``,
    a DBN's ``rbms.<i>.weight``, an mcRBM's ``mean_weight``), the members of a parameter list named ``weights`` (a
    DBM's ``weights.<i>``) and pair couplings named ``coupling`` (an Ising model's or a Hopfield network's ``J``: on a
    finite sample a unit that is nearly constant leaves its couplings nearly undetermined, and the penalty pins them)."""
    chosen = []
    for name, parameter in model.named_parameters():
        parent, _, leaf = name.rpartition(".")
        if leaf.endswith("weight") or leaf == "coupling" or (leaf.isdigit() and parent.rpartition(".")[2] == "weights"):
            chosen.append(parameter)
    return chosen


@dataclass(frozen=True)
class TrainerSettings:
    """How long and how a :class:`~pfzoo.training.Trainer` trains and what it writes, validated on construction
    (``ValueError`` naming the field): ``Trainer(..., settings=TrainerSettings(...))``, or the same names as the
    Trainer's keyword arguments (a ``conf/trainer`` config's), which :meth:`build` turns into one of these. The Trainer
    keeps it as ``trainer.settings``. What the constructor turns into objects (the ``centered`` and
    ``natural_gradient`` wrappers of the objective, ``track_partition``'s callback) is not a setting: the objects are
    the Trainer's (``trainer.objective``, ``trainer.callbacks``).

    Attributes:
        epochs: total number of epochs (a resumed run continues up to it).
        batch_size: examples per minibatch (the last one of an epoch may be smaller).
        weight_decay: L2 coefficient λ ≥ 0 (gradient ``λ W`` on weights).
        learning_rate_decay: τ ≥ 0; epoch e runs at ``lr_0 / (1 + τ (e − 1))`` with ``lr_0`` the optimiser's
            initial learning rate (kept as ``initial_lr`` in its state, so resumed runs continue the schedule);
            0 keeps the rate constant.
        final_momentum: ``None`` keeps the optimiser's momentum; else epoch e runs at
            ``m_0 + (final_momentum − m_0) · min(1, (e − 1) / momentum_ramp_epochs)`` with ``m_0`` the optimiser's
            initial momentum (Hinton's practical guide: 0.5 at first, 0.9 once the large early changes settle).
            Needs an optimiser with a ``momentum`` setting (SGD, RMSprop).
        momentum_ramp_epochs: epochs over which the momentum moves to ``final_momentum`` (0: from the first epoch).
        checkpoint_every: epochs between checkpoints.
        evaluate_every: epochs between estimator evaluations (and after the last); 0 = never.
        progress: show tqdm bars over epochs and batches.
        seed: root of the run's random streams.
        stop_tolerance: τ ≥ 0; stop when ``|loss_e − loss_(e−1)| ≤ τ · max(1, |loss_e|)`` (e.g. full-batch
            L-BFGS on a convex objective that has converged); 0 = never.
        max_seconds: stop once the epochs' training seconds sum to at least this (a budget on ``clock``, as in
            comparisons of learners at equal time; the epoch count then depends on the machine); None = never.
        clock: what ``seconds``, ``evaluation_seconds``, ``callback_seconds`` and ``max_seconds`` count
            (:data:`CLOCKS`): ``"wall"`` (default) wall time; ``"cpu"`` the process's CPU time, for timings on a
            shared machine, where wall time grows with the other processes' load.
        metrics_rows: the per-epoch diagnostics (reconstruction error, pseudo-log-likelihood), the callbacks and the
            divergence guard read this many rows of each split, drawn at random once for the run (default
            :data:`DEFAULT_METRICS_ROWS`); ``None``: every row (on all 50,000 MNIST digits a 784 × 500 RBM's diagnostics
            cost more than its PCD epoch, a DBM's mean-field reconstruction about half of one).
        log_every: log a line every this many epochs (and the first and last); ``None``: about
            :data:`LOGGED_EPOCHS` lines per run, whatever ``epochs`` is.
        held_out: the split the per-epoch diagnostics, the estimator and the callbacks judge the model on
            (:meth:`DataSplits.held_out <pfzoo.data.DataSplits.held_out>`): ``"auto"`` (default) the validation split
            where the data set has one, else the test split; ``"valid"`` or ``"test"`` to name it. Its metrics carry
            its name (``valid_log_likelihood``, ``test_reconstruction_error``, ...).
        csv: also write every epoch's record to ``<run_dir>/metrics.csv`` (:class:`~pfzoo.training.metrics_log.MetricsLog`).
        tensorboard: also log every epoch's numbers as TensorBoard scalars in ``<run_dir>/tensorboard/``; needs the
            ``tensorboard`` package (the Trainer refuses it in one line without).
        divergence: what the divergence guard (:mod:`pfzoo.training.divergence`) does when a run blows up:
            ``"stop"`` (default) restores the last good parameters, writes them as the checkpoint and raises
            :class:`~pfzoo.training.TrainingDiverged`; ``"warn"`` logs it once and trains on; ``"off"`` watches nothing.
        binarize: read the training rows as probabilities in [0, 1] and train every minibatch on a fresh draw
            ``x ~ Bernoulli(rows)`` from the sampling stream (dynamic binarisation; a DBN's upper layers trained on fresh
            posterior samples of the layer below, :class:`~pfzoo.training.GreedyTrainer`), so that the model fits the
            rows' expected likelihood rather than one fixed sample of them. Everything else (the objective's
            ``prepare``, e.g. PCD's chains, the diagnostics, the callbacks, the guard, the estimator) reads one draw of
            every split fixed for the run (:func:`~pfzoo.training.fit_data.fixed_draws`). Models with binary visible
            units only.
        clip_grad_norm: ``c > 0`` rescales every update's gradient (the ranks' sum, weight penalty included, after the
            objective's preconditioning) to norm at most ``c`` (``torch.nn.utils.clip_grad_norm_`` over the model's and
            the objective's parameters); ``None`` (default): no clipping.

    Stopping early: a run ends before ``epochs`` when its recorded epochs meet a rule of :meth:`stop_reason`,
    checked before every epoch (so a resumed run that had already stopped trains no further): ``stop_tolerance``
    (the last epoch changed the loss by at most that, relative) or ``max_seconds`` (the training seconds summed over
    the epochs reached that budget). The epoch that meets a rule is checkpointed. With full-batch L-BFGS an epoch's
    loss is the loss *before* its step (what ``LBFGS.step`` returns), so the tolerance rule stops one step after the
    step that changed the loss by less than the tolerance.
    """

    epochs: int = 10
    batch_size: int = 100
    weight_decay: float = 0.0
    learning_rate_decay: float = 0.0
    final_momentum: float | None = None
    momentum_ramp_epochs: int = 0
    checkpoint_every: int = 1
    evaluate_every: int = 0
    progress: bool = True
    seed: int = 0
    stop_tolerance: float = 0.0
    max_seconds: float | None = None
    log_every: int | None = None
    metrics_rows: int | None = DEFAULT_METRICS_ROWS
    held_out: str = "auto"
    csv: bool = True
    tensorboard: bool = False
    divergence: str = "stop"
    clip_grad_norm: float | None = None
    clock: str = "wall"
    binarize: bool = False

    def __post_init__(self) -> None:
        normalised = {
            "weight_decay": check_finite_number(self.weight_decay, "weight_decay", minimum=0.0),
            "learning_rate_decay": check_finite_number(self.learning_rate_decay, "learning_rate_decay", minimum=0.0),
            "progress": check_bool(self.progress, "progress"),
            "csv": check_bool(self.csv, "csv"),
            "tensorboard": check_bool(self.tensorboard, "tensorboard"),
            "binarize": check_bool(self.binarize, "binarize"),
        }
        if self.final_momentum is not None:
            normalised["final_momentum"] = check_finite_number(self.final_momentum, "final_momentum", minimum=0.0)
            if not normalised["final_momentum"] < 1:
                raise ValueError(f"final_momentum must be in [0, 1) or None (keep the optimiser's), got {self.final_momentum}")
        if isinstance(self.momentum_ramp_epochs, bool) or not isinstance(self.momentum_ramp_epochs, int) or self.momentum_ramp_epochs < 0:
            raise ValueError(f"momentum_ramp_epochs must be a non-negative integer, got {self.momentum_ramp_epochs!r}")
        if isinstance(self.evaluate_every, bool) or not isinstance(self.evaluate_every, int) or self.evaluate_every < 0:
            raise ValueError(f"evaluate_every must be a non-negative integer (0 = never), got {self.evaluate_every!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        normalised["epochs"] = check_positive_int(self.epochs, "epochs")
        check_positive_int(self.batch_size, "batch_size")
        check_positive_int(self.checkpoint_every, "checkpoint_every")
        tolerance = self.stop_tolerance
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance >= 0 or tolerance == math.inf:
            raise ValueError(f"stop_tolerance must be a finite non-negative number (0 = never stop early), got {tolerance}")
        normalised["stop_tolerance"] = float(tolerance)
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise ValueError(f"max_seconds must be positive or None (no time budget), got {self.max_seconds}")
        normalised["max_seconds"] = None if self.max_seconds is None else float(self.max_seconds)
        if self.metrics_rows is not None:
            check_positive_int(self.metrics_rows, "metrics_rows")
        if self.log_every is not None:
            check_positive_int(self.log_every, "log_every")
        check_held_out(self.held_out)
        check_choice(self.divergence, "divergence", DIVERGENCE_MODES)
        check_choice(self.clock, "clock", CLOCKS)
        if self.clip_grad_norm is not None:
            normalised["clip_grad_norm"] = check_finite_number(self.clip_grad_norm, "clip_grad_norm", minimum=0.0, exclusive=True)
        for name, value in normalised.items():
            object.__setattr__(self, name, value)  # frozen: the validated values replace the given ones once

    @classmethod
    def build(cls, base: TrainerSettings | None = None, **values: Any) -> TrainerSettings:
        """``base`` (None: the defaults) with the fields named in ``values`` replaced, validated as a whole; a name that
        is no field is refused in one line (the Trainer's keyword arguments come here, a config's misspelt key too)."""
        if base is not None and not isinstance(base, cls):
            raise ValueError(f"settings must be a TrainerSettings or None, got {type(base).__name__}")
        names = [field.name for field in fields(cls)]
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ValueError(f"unknown trainer setting {', '.join(unknown)}: expected TrainerSettings fields ({', '.join(names)})")
        return cls(**values) if base is None else replace(base, **values)

    def learning_rate(self, initial_lr: float, epoch: int) -> float:
        """Epoch ``epoch``'s rate ``initial_lr / (1 + learning_rate_decay · (epoch − 1))``."""
        return initial_lr / (1 + self.learning_rate_decay * (epoch - 1))

    def momentum(self, initial_momentum: float, epoch: int) -> float:
        """Epoch ``epoch``'s momentum from the optimiser's ``initial_momentum`` (``final_momentum``'s ramp)."""
        if self.final_momentum is None:
            return initial_momentum
        progress = 1.0 if self.momentum_ramp_epochs == 0 else min(1.0, (epoch - 1) / self.momentum_ramp_epochs)
        return initial_momentum + (self.final_momentum - initial_momentum) * progress

    def apply_schedule(self, optimizer: torch.optim.Optimizer, epoch: int) -> None:
        """Set epoch ``epoch``'s rate (and momentum, with ``final_momentum``) in every parameter group of ``optimizer``,
        from its ``initial_lr`` (``initial_momentum``), kept in the optimiser's state so a resumed run continues the
        schedule."""
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
            group["lr"] = self.learning_rate(group["initial_lr"], epoch)
            if self.final_momentum is not None:
                if "momentum" not in group:
                    raise ValueError(f"final_momentum needs an optimizer with a momentum setting (SGD, RMSprop), got {type(optimizer).__name__}")
                group.setdefault("initial_momentum", group["momentum"])
                group["momentum"] = self.momentum(group["initial_momentum"], epoch)

    def logs(self, epoch: int) -> bool:
        """Whether ``epoch`` gets a log line: every ``log_every``-th (by default every ``epochs // LOGGED_EPOCHS``-th, at
        least every one), the first and the last."""
        every = self.log_every or max(1, self.epochs // LOGGED_EPOCHS)
        return epoch % every == 0 or epoch in (1, self.epochs)

    def evaluates(self, epoch: int) -> bool:
        """Whether the estimator runs after ``epoch``: every ``evaluate_every``-th and the last (never when 0)."""
        return bool(self.evaluate_every) and (epoch % self.evaluate_every == 0 or epoch == self.epochs)

    def checkpoints(self, epoch: int, stopping: bool) -> bool:
        """Whether ``epoch`` is checkpointed: every ``checkpoint_every``-th, the last, and one that meets a stopping rule."""
        return epoch % self.checkpoint_every == 0 or epoch == self.epochs or stopping

    def stop_reason(self, records: Sequence[dict[str, Any]]) -> str | None:
        """Why training should stop after the epochs ``records`` (oldest first; each with ``loss`` and ``seconds``),
        or None to go on (class docstring)."""
        if self.stop_tolerance and len(records) >= 2:
            change, loss = abs(records[-1]["loss"] - records[-2]["loss"]), abs(records[-1]["loss"])
            if change <= self.stop_tolerance * max(1.0, loss):
                return f"epoch {records[-1]['epoch']} changed the loss by {change:.3g} ≤ {self.stop_tolerance:g} · max(1, |loss|)"
        if self.max_seconds is not None:
            seconds = sum(record["seconds"] for record in records)
            if seconds >= self.max_seconds:
                return f"{seconds:.1f} training seconds reached the budget max_seconds={self.max_seconds:g}"
        return None
