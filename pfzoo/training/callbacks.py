"""What the Trainer runs beside the training itself: callbacks that watch every parameter update and add numbers to each
epoch's record, without changing the model or the objective's random streams.

The :class:`~pfzoo.training.Trainer` calls, for each of its ``callbacks``:

1. :meth:`TrainingCallback.check` before anything runs (a callback that cannot follow the model refuses it in one line);
2. :meth:`TrainingCallback.start` once the run's starting point is known (fresh, or the checkpoint it resumes from, whose
   saved :meth:`TrainingCallback.state_dict` it receives);
3. :meth:`TrainingCallback.start_epoch` before every epoch's first update, and :meth:`TrainingCallback.on_step`
   after every parameter update (the optimiser's step and the model's projection);
4. :meth:`TrainingCallback.on_epoch_end` after every epoch, merging the floats it returns into the epoch's record;
5. :meth:`TrainingCallback.stop_reason` before every epoch, ending the run early when one gives a reason;
6. :meth:`TrainingCallback.state_dict` at every checkpoint (``trainer_state["callbacks"]``, one entry per callback).

A callback draws from its own generator (seeded from the run's seed), so a run with callbacks trains bit for bit as the
same run without them, and a resumed run continues bit for bit when :meth:`state_dict` holds the callback's state.
Under a process group every rank runs every callback alike on the same model; the leader's state is checkpointed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Mapping

import torch


class TrainingCallback(ABC):
    """Something that follows a training run update by update (e.g. :class:`~pfzoo.training.PartitionTracker`).

    Subclasses implement :meth:`on_step` and whichever of the other hooks they need; every hook runs under
    ``torch.no_grad`` and outside the Trainer's training seconds (the time spent in callbacks is logged apart as
    ``callback_seconds``)."""

    def check(self, model) -> None:
        """Raise :class:`~pfzoo.models.MissingCapability` (one line) unless the callback can follow ``model``. By default
        every model is followed."""

    def start(self, model, train: torch.Tensor, *, seed: int, state: dict[str, Any] | None = None) -> None:
        """The run begins (or resumes) with ``model`` as it now is, on the training set ``train [N, V]`` (on the model's
        device and dtype). ``seed`` roots the callback's own random stream; ``state`` is what :meth:`state_dict` returned
        when the checkpoint the run resumes from was written, or ``None`` for a fresh run (or a checkpoint without it).
        By default nothing happens."""

    def start_epoch(self, epoch: int) -> None:
        """Epoch ``epoch`` (from 1) begins: its first update comes next. By default nothing happens."""

    @abstractmethod
    def on_step(self, model) -> None:
        """``model``'s parameters have just been updated (one optimiser step, then the projection onto its constraints)."""

    def on_epoch_end(self, model, epoch: int, splits: Mapping[str, torch.Tensor]) -> dict[str, float]:
        """Numbers ``{name: float}`` for epoch ``epoch``'s record, given the rows the Trainer's per-epoch diagnostics read
        (its ``metrics_rows``): ``splits = {"train": [N', V], <held>: [M', V]}`` with ``<held>`` the name of its held-out
        split (``"valid"`` or ``"test"``), to name the numbers after. By default none."""
        return {}

    def stop_reason(self) -> str | None:
        """Why the run should end before its next epoch (e.g. a validation score that stopped improving), or None to go
        on. By default None."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """What :meth:`start` needs to continue bit for bit after a resume (tensors on the CPU, numbers, strings). By default
        nothing."""
        return {}
