"""What every training objective shares: the loss, the epoch hook, a config name, what it needs of a model, and the
one-line refusal.

The :class:`~pfzoo.training.Trainer` calls :meth:`Objective.check` once per fit, before the first epoch; a
model that lacks what the objective needs is refused with a :class:`~pfzoo.models.MissingCapability`
naming the trainer configs that do apply ("CD needs a Gibbs chain over its visible units ...; ICA is an
energy over real vectors without latents — use trainer=ml, mpf or mpf_adam"), and :meth:`Objective.attach_data` with the
data set. It then calls :meth:`Objective.prepare` at the start of every epoch, :meth:`Objective.loss` on every minibatch
and :meth:`Objective.epoch_metrics` once after every epoch. A ``loss`` begins with :meth:`Objective.check_outside_fit`,
so a direct call is refused in one line while the Trainer's steps check nothing again.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from typing import ClassVar

import torch
from torch import nn

from pfzoo.models.capabilities import MissingCapability, describe, join_alternatives
from pfzoo.validation import checking_values

_OBJECTIVES: dict[str, type["Objective"]] = {}


class Objective(nn.Module, metaclass=ABCMeta):
    """A loss ``loss(model, batch, *, generator) -> scalar`` whose gradient is the training update.

    Subclasses implement :meth:`loss`, set :attr:`config_name` (and :attr:`trainer_configs`, the ``conf/trainer``
    files that select them) and implement :meth:`missing`. An objective that keeps state across the training set
    (e.g. persistent MPF's particles, EM-HMC's latents) overrides :meth:`prepare`, which makes it
    :attr:`epoch_stateful`; its state lives in buffers, so the Trainer checkpoints it with ``state_dict``. An
    objective may own parameters (e.g. NCE's normaliser c): the Trainer optimises them with the model's and checkpoints
    them with the objective's state. :meth:`epoch_metrics` adds the objective's own diagnostics to each epoch's record.
    """

    config_name: str | None = None
    trainer_configs: tuple[str, ...] = ()
    epoch_stateful: ClassVar[bool] = False
    """Whether the class overrides :meth:`prepare` (set when it is defined): the Trainer then also passes the batch's
    row numbers ``indices [B]`` in the prepared training set to :meth:`loss`."""

    lazy_buffers: ClassVar[tuple[str, ...]] = ()
    """Buffers created at their first use with a size known only then (e.g. PCD's ``chains``): loading a state dict
    resizes them to the saved tensors before copying into them (:func:`resize_to_saved`)."""
    preconditions: ClassVar[bool] = False
    """Whether the class overrides :meth:`precondition` (set when it is defined): its updates are then not the loss's
    gradient, and the Trainer refuses optimisers whose line search needs that gradient (L-BFGS)."""

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls.epoch_stateful = cls.prepare is not Objective.prepare
        cls.preconditions = cls.precondition is not Objective.precondition
        if cls.__dict__.get("config_name"):
            _OBJECTIVES[cls.config_name] = cls

    @abstractmethod
    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """The minibatch loss (scalar) of ``batch [B, V]`` under ``model``; :attr:`epoch_stateful` objectives also take
        ``indices [B]``, the batch's rows in the training set last given to :meth:`prepare`."""

    def prepare(self, model, train: torch.Tensor, *, generator: torch.Generator | None = None) -> bool:
        """The start of an epoch over the whole training set ``train [N, V]``; returns whether the objective changed
        (e.g. MPF's θ_old was refreshed), so the optimiser's state (L-BFGS history, momentum) no longer applies.
        By default the objective holds no such state: nothing to do, ``False``."""
        return False

    def start_epoch(self, epoch: int) -> None:
        """Epoch ``epoch`` (counted from 1) is about to run: objectives with a schedule over epochs (e.g. CD-k's growing
        k) set it here. A resumed run calls it with the epoch it resumes at, so a schedule must depend on the epoch
        alone. By default nothing changes."""

    def precondition(self, model) -> None:
        """Turn the minibatch's gradients in ``model``'s ``.grad`` (the ranks' sum, weight penalty included) into the
        update direction the optimiser follows, in place (e.g. centering). By default the gradient itself."""

    def epoch_metrics(self) -> dict[str, float]:
        """Diagnostics of the epoch just trained, ``{name: float}``, merged into the epoch's record of ``metrics.jsonl`` by
        the Trainer (outside the timed region, under ``torch.no_grad``; e.g. parallel tempering's swap acceptance, NCE's
        learned normaliser); called once on every rank after every epoch. By default there are none."""
        return {}

    def attach_data(self, data) -> None:
        """What the objective takes from the data set (a :class:`~pfzoo.training.fit_data.TrainingData`: its ``name`` and
        ``image_shape``) besides its rows, before the first epoch (the Trainer calls it after :meth:`check`): by default
        nothing; e.g. generalized pseudo-likelihood's image patches read ``data.image_shape``. Raises ``ValueError`` (one line) when the data set lacks what it needs."""

    def missing(self, model) -> str | None:
        """What the objective needs and ``model`` lacks, in words, or ``None`` when it applies."""
        return None

    def caveats(self, model) -> tuple[str, ...]:
        """What biases the objective's fit of ``model`` even with unlimited data (it applies, but is not consistent), one
        sentence each; the Trainer logs each once as a warning when ``fit`` starts and keeps them as ``trainer.warnings``
        (the app's result carries them). By default none."""
        return ()

    def configs_for(self, model) -> tuple[str, ...]:
        """The ``conf/trainer`` files of this objective that suit ``model`` (all of them unless a subclass narrows it)."""
        return self.trainer_configs or (self.config_name,)

    def check(self, model) -> None:
        """Raise :class:`~pfzoo.models.MissingCapability` (one line) unless the objective applies to ``model``."""
        need = self.missing(model)
        if need is None:
            return
        message = f"{type(self).__name__} needs {need}; {type(model).__name__} {describe(model)}"
        others = [f"trainer={name}" for name in applicable_trainers(model)]
        raise MissingCapability(message + (f" — use {join_alternatives(others)}" if others else ""))

    def check_outside_fit(self, model) -> None:
        """:meth:`check`, except inside the Trainer's steps (:func:`~pfzoo.validation.values_checked`), whose ``fit``
        checked ``model`` once before the first epoch: a check per minibatch would repeat it thousands of times, and
        some read parameters back to the host (a POE's filters). :meth:`loss` calls it first."""
        if checking_values():
            self.check(model)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        resize_to_saved(self, state_dict, prefix, self.lazy_buffers)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


def resize_to_saved(module: nn.Module, state_dict, prefix: str, names: tuple[str, ...]) -> None:
    """Replace each buffer of ``module`` named in ``names`` that ``state_dict`` holds (under ``prefix``) by an empty
    tensor of the saved one's shape and dtype on the buffer's device, so ``load_state_dict`` can copy into it."""
    for name in names:
        saved = state_dict.get(prefix + name)
        if saved is not None:
            setattr(module, name, torch.empty_like(saved, device=getattr(module, name).device))


def applicable_trainers(model) -> list[str]:
    """The ``conf/trainer`` names whose objective (in its default settings) applies to ``model``."""
    names = []
    for cls in _OBJECTIVES.values():
        objective = cls()
        if objective.missing(model) is None:
            names.extend(objective.configs_for(model))
    return sorted(set(names))
