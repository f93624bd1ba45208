"""Iterate averaging: the mean of the parameters over a run's later updates, a model that training alone does not reach.

A stochastic-approximation run (PCD, a DBM's joint training) at a learning rate that has not reached zero ends at
parameters that still jitter around the optimum by the noise of its last few hundred updates: the minibatch's and the
persistent chains'. The average of the iterates (Polyak & Juditsky 1992; Ruppert 1988) cancels most of that jitter
without shrinking the steps the run takes, so the run goes on learning at its own rate while the average settles;
Swersky, Chen, Marlin & de Freitas (2010) found it raises the test log-likelihood of PCD-trained RBMs and DBNs.

:class:`ParameterAveraging` is a :class:`~pfzoo.training.TrainingCallback`: it watches every update from the first
of epoch ``from_epoch`` on and never touches the parameters training uses, so a run with it trains bit for bit as
the same run without it (and a run may start averaging when it resumes, before that epoch). The average is part of
every checkpoint (the callback's state); with a ``path`` it is also written there after every epoch as an ordinary
zoo file (:func:`pfzoo.zoo.save`), the model the app's closing estimate measures and the zoo exports.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Mapping

import torch

from pfzoo import distributed, zoo
from pfzoo.training.callbacks import TrainingCallback
from pfzoo.training.metrics import has_reconstruction, reconstruction_error
from pfzoo.validation import check_finite_number, check_positive_int

AVERAGED_FILE = "averaged.pt"
"""Beside ``checkpoint.pt``: the averaged model a Trainer with ``average_parameters`` writes after every epoch."""


class ParameterAveraging(TrainingCallback):
    """The average ``θ̄`` of the model's parameters after each update from the first update of epoch ``from_epoch`` on.

    ``decay=None`` (default) takes the arithmetic mean of those iterates, ``θ̄_n = θ̄_(n−1) + (θ_n − θ̄_(n−1)) / n``
    (Polyak–Ruppert); ``decay = d ∈ (0, 1)`` an exponential moving average ``θ̄_n = d θ̄_(n−1) + (1 − d) θ_n`` begun
    at ``θ̄_1 = θ_1``, which forgets iterates older than about ``1 / (1 − d)`` updates (for a run that still improves
    as it averages). Every parameter of the model is averaged, accumulated in float64; buffers are the model's own.
    The parameters of an energy model enter its energy linearly or through its layers' weights alike, so ``θ̄`` is a
    model of the same family and size (for a DBM: weights and biases averaged, the plain parametrisation that
    centered training keeps).

    Args:
        from_epoch: the first epoch whose updates enter the average (≥ 1). A run resumed from a checkpoint without
            this callback's state must resume before or at it (the updates in between would be missing: refused).
        decay: ``None`` for the arithmetic mean, or the moving average's factor in (0, 1).
        path: where to write the averaged model after every epoch (on the leader rank; :data:`AVERAGED_FILE` beside
            the checkpoint when the Trainer builds it); ``None``: nowhere.
        config: the run's config, stored in that file as :func:`pfzoo.zoo.save` stores a checkpoint's.
    """

    def __init__(self, *, from_epoch: int = 1, decay: float | None = None, path: str | Path | None = None,
                 config: Mapping[str, Any] | None = None) -> None:
        self.from_epoch = check_positive_int(from_epoch, "from_epoch")
        if decay is not None:
            check_finite_number(decay, "decay")
            if not 0 < decay < 1:
                raise ValueError(f"decay must be in (0, 1) for a moving average, or None for the arithmetic mean; got {decay}")
        self.decay = decay
        self.path = None if path is None else Path(path)
        self.config = None if config is None else dict(config)
        self.updates = 0  # updates averaged so far
        self.average: dict[str, torch.Tensor] = {}  # parameter name -> float64 average, on the model's device
        self.averaging = False
        self._restored = False

    def settings(self) -> dict[str, Any]:
        return {"from_epoch": self.from_epoch, "decay": self.decay}

    def start(self, model, train: torch.Tensor, *, seed: int, state: dict[str, Any] | None = None) -> None:
        self._restored = bool(state)
        if not state:
            self.updates, self.average, self.averaging = 0, {}, False
            return
        if state["settings"] != self.settings():
            raise ValueError(f"average_parameters {self.settings()} differ from the checkpoint's average {state['settings']}: "
                             f"resume with those settings, or start a new run_dir")
        self.updates, self.averaging = state["updates"], state["averaging"]
        self.average = {name: tensor.to(model.device) for name, tensor in state["average"].items()}

    def start_epoch(self, epoch: int) -> None:
        if epoch < self.from_epoch or self.averaging:
            return
        if epoch > self.from_epoch and not self._restored:
            raise ValueError(f"average_parameters.from_epoch={self.from_epoch} but this run resumes at epoch {epoch} from a "
                             f"checkpoint without an average: epochs {self.from_epoch}…{epoch - 1} would be missing from it; "
                             f"set from_epoch ≥ {epoch}")
        self.averaging = True

    def on_step(self, model) -> None:
        if not self.averaging:
            return
        self.updates += 1
        weight = 1.0 / self.updates if self.decay is None else 1.0 - self.decay
        for name, parameter in model.named_parameters():
            value = parameter.detach().double()
            if self.updates == 1:
                self.average[name] = value.clone()
            else:
                self.average[name].add_(value - self.average[name], alpha=weight)

    def on_epoch_end(self, model, epoch: int, splits: Mapping[str, torch.Tensor]) -> dict[str, float]:
        """``averaged_updates`` and, once averaging has begun, the averaged model's cheap diagnostics on the Trainer's
        diagnostic rows (:func:`averaged_diagnostics`): the epoch's other diagnostics read the parameters training uses,
        while the closing estimate and the zoo read the average, so the record shows both."""
        if not self.updates:
            return {"averaged_updates": 0.0}
        averaged = self.averaged_model(model)
        if self.path is not None and distributed.rank() == 0:
            zoo.save(averaged, self.path, config=self.config)
        return {"averaged_updates": float(self.updates), **averaged_diagnostics(averaged, splits)}

    def averaged_model(self, model):
        """A copy of ``model`` holding the averaged parameters (its buffers as they are); refused before any update."""
        if not self.updates:
            raise ValueError(f"no update has been averaged yet (averaging starts with epoch {self.from_epoch})")
        averaged = copy.deepcopy(model)
        with torch.no_grad():
            for name, parameter in averaged.named_parameters():
                parameter.copy_(self.average[name].to(parameter.dtype))
        return averaged

    def state_dict(self) -> dict[str, Any]:
        return {"settings": self.settings(), "updates": self.updates, "averaging": self.averaging,
                "average": {name: tensor.cpu() for name, tensor in self.average.items()}}


def averaged_diagnostics(averaged, splits: Mapping[str, torch.Tensor]) -> dict[str, float]:
    """The averaged model's share of the Trainer's per-epoch diagnostics on ``splits`` (``{"train": [N, V], <held>: [M,
    V]}``, the diagnostic rows): ``averaged_<split>_reconstruction_error`` where the family reconstructs, and its
    :meth:`~pfzoo.models.EnergyModel.training_diagnostics` as ``averaged_<split>_<name>`` (a DBM's ``top_layer_share``:
    whether the average uses its top layer). The pseudo-log-likelihood is left out: it draws, and the average is read
    every epoch."""
    record: dict[str, float] = {}
    with torch.no_grad():
        for name, rows in splits.items():
            if has_reconstruction(averaged):
                record[f"averaged_{name}_reconstruction_error"] = reconstruction_error(averaged, rows)
            record.update({f"averaged_{name}_{key}": value for key, value in averaged.training_diagnostics(rows).items()})
    return record


def parameter_averaging(settings: bool | Mapping[str, Any] | None, run_dir: Path,
                        config: Mapping[str, Any] | None = None) -> ParameterAveraging | None:
    """The Trainer's ``average_parameters`` setting as a callback writing ``<run_dir>/averaged.pt``: ``None``/``False``
    none, ``True`` the arithmetic mean over every update, a mapping the keyword arguments ``from_epoch``, ``decay``."""
    if settings is None or settings is False:
        return None
    if settings is True:
        settings = {}
    if not isinstance(settings, Mapping):
        raise ValueError(f"average_parameters must be None, true or a mapping with from_epoch and decay, got {settings!r}")
    unknown = sorted(set(settings) - {"from_epoch", "decay"})
    if unknown:
        raise ValueError(f"average_parameters has unknown keys {unknown}; expected from_epoch and decay")
    return ParameterAveraging(**settings, path=Path(run_dir) / AVERAGED_FILE, config=config)
