"""The Trainer's divergence guard: notice a run that blows up, stop it, and put back the last good parameters.

A learning rate far too large does not always produce a NaN: CD, NCE, ratio matching or PT with SGD at ``lr = 1e8`` on a
6×4 RBM keep finite losses and parameters while the exact test log-likelihood falls from −4.8 to −10⁸ nats. The guard
watches signals that cost no partition function:

* every few updates (:func:`check_schedule`: updates 1, 2, 4, 8, then every :data:`CHECK_EVERY`; one read back to the
  host per check, none per step): whether the epoch's running sum of losses (non-finite once any loss was), the last
  loss, the parameters and the last gradient are finite, and whether the parameter norm ``‖θ‖``, the gradient norm
  ``‖g‖`` or the last ``|loss|`` grew by orders of magnitude over the largest seen at a good check (:data:`PARAMETER_GROWTH`, :data:`GRADIENT_GROWTH`,
  :data:`LOSS_GROWTH`; floors ``√P`` — root-mean-square 1 over the P parameters — and the number of visible units keep
  a start near zero from counting as growth);
* after every epoch a held-out score (:func:`held_out_score`, on at most :data:`SCORE_ROWS` held-out rows): the exact
  mean log-likelihood where log Z is a closed
  form or at most ``2^``:data:`EXACT_SCORE_UNITS` terms, else the pseudo-log-likelihood (binary models with a cheap free
  energy), else minus the reconstruction error. It collapses when it falls below the best seen by more than
  :data:`SCORE_COLLAPSE` times ``max(|best|, |start|, floor)`` (floor ``V log 2`` nats for likelihoods, 0 for
  reconstruction errors), or is not finite.

At every good check the parameters are copied (on the model's device, no host transfer); after every epoch whose
score is the best so far they are copied again. On divergence :meth:`DivergenceGuard.restore` puts back whichever copy
has the better held-out score (the more recent one without a score): the last good parameters, never those of the
blow-up. The Trainer then writes them as the run's checkpoint and raises :class:`TrainingDiverged` (``divergence="stop"``,
the default) or only warns (``"warn"``: the run goes on; a non-finite loss still stops it, as nothing can go on from
it); ``"off"`` watches nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch.nn.utils import get_total_norm

from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability
from pfzoo.training.metrics import has_reconstruction, pseudo_likelihood_is_affordable, pseudo_log_likelihood, random_rows, reconstruction_error

DIVERGENCE_MODES = ("stop", "warn", "off")
CHECK_EVERY = 16
"""Updates between checks once past the first few (updates 1, 2, 4 and 8 are checked: a rate 10⁸ too large ruins a
model at its first update)."""
PARAMETER_GROWTH = 1e3
GRADIENT_GROWTH = 1e4
LOSS_GROWTH = 1e4
SCORE_COLLAPSE = 5.0
SCORE_ROWS = 1000
EXACT_SCORE_UNITS = 12
"""The held-out score is the exact log-likelihood when log Z and the free energy sum at most ``2^12`` terms each (a 6×4
RBM's log Z sums 2^4), so it costs about what the pseudo-likelihood does."""


class TrainingDiverged(FloatingPointError):
    """Training blew up and was stopped; the model holds the last good parameters (also written as the run's checkpoint).

    ``str(error)`` is the one line for the user; :attr:`record` the details (``epoch``, ``update``, ``signal``,
    ``restored_update``, ``restored_score``); :attr:`result` is filled in by the app with what it measured on the
    restored model. A ``FloatingPointError``, so code that caught the old non-finite-loss error still catches it."""

    def __init__(self, message: str, record: dict[str, Any]) -> None:
        super().__init__(message)
        self.record = record
        self.result: dict[str, Any] | None = None


def check_schedule(update: int) -> bool:
    """Whether the guard checks after update ``update`` (counted from 1 over the whole fit)."""
    return update in (1, 2, 4, 8) or update % CHECK_EVERY == 0


@dataclass(frozen=True)
class Alarm:
    """Why the guard thinks a run diverged; ``fatal`` when nothing can go on from the state (a non-finite loss,
    parameter or gradient), so even ``divergence="warn"`` stops."""

    reason: str
    fatal: bool = False


@dataclass
class Score:
    """A held-out score, higher is better: its ``name`` (as in messages), ``value`` and the ``floor`` of its scale."""

    name: str
    value: float
    floor: float


def score_kind(model: EnergyModel) -> str | None:
    """Which held-out score watches ``model`` (module docstring), chosen once, as training starts: ``"exact
    log-likelihood"``, ``"pseudo-log-likelihood"``, ``"reconstruction error"``, or ``None`` (only the per-update signals)."""
    offered = model.capabilities
    if (Capability.EXACT_LOG_Z in offered and Capability.EXACT_FREE_ENERGY in offered
            and (model.log_partition_cost or 0) <= EXACT_SCORE_UNITS and (model.free_energy_cost or 0) <= EXACT_SCORE_UNITS):
        return "exact log-likelihood"
    if pseudo_likelihood_is_affordable(model):
        return "pseudo-log-likelihood"
    return "reconstruction error" if has_reconstruction(model) else None


def score_rows(held_out: torch.Tensor, seed: int) -> torch.Tensor:
    """The rows of ``held_out [M, V]`` the guard scores: all of them up to :data:`SCORE_ROWS`, else that many drawn at
    random (seeded ``seed``, ascending; test files may be sorted by class, so a prefix would not do). The guard's score
    is a reference for collapses by orders of magnitude, not a measurement: a subset keeps it cheap on large data."""
    return random_rows(held_out, SCORE_ROWS, seed)


@torch.no_grad()
def held_out_score(model: EnergyModel, held_out: torch.Tensor, kind: str, *, seed: int) -> Score:
    """The score ``kind`` (:func:`score_kind`) of ``model`` on ``held_out [M, V]`` (the pseudo-likelihood's bit flips
    drawn from a generator seeded ``seed`` every time, so scores are compared with common random numbers). A model whose
    score cannot be computed any more (an exact log Z lost to an improper product of experts, an error, a non-finite
    value) scores ``-inf``: it has collapsed."""
    value = -math.inf
    try:
        if kind == "exact log-likelihood":
            if Capability.EXACT_LOG_Z in model.capabilities:
                value = model.log_prob(held_out).mean().item()
        elif kind == "pseudo-log-likelihood":
            value = pseudo_log_likelihood(model, held_out, generator=torch.Generator(model.device).manual_seed(seed))
        else:
            value = -reconstruction_error(model, held_out)
    except (ValueError, RuntimeError, NotImplementedError):  # e.g. a log Z the blow-up made infinite
        value = -math.inf
    floor = 0.0 if kind == "reconstruction error" else held_out.shape[1] * math.log(2)
    return Score(kind, value if math.isfinite(value) else -math.inf, floor)


def non_finite(loss: float, parameter: float, gradient: float) -> str:
    """Which of the watched numbers is not finite, in words."""
    if not math.isfinite(loss):
        return f"the loss became {loss}"
    return "a parameter became non-finite" if not math.isfinite(parameter) else "a gradient became non-finite"


def describe_score(score: Score | None) -> str:
    if score is None:
        return ""
    if score.name == "reconstruction error":
        return f"held-out reconstruction error {-score.value:.4g}"
    return f"held-out {score.name} {score.value:.4g}"


class DivergenceGuard:
    """Watches one :meth:`~pfzoo.training.Trainer.fit` (module docstring).

    Args:
        parameters: what the optimiser updates, ``P`` numbers in all: the model's parameters and the objective's own
            (e.g. NCE's c). Their norm and gradient norm are watched, and a good state is a copy of them.
        score: ``() -> Score | None``, the held-out score of the model as it now is (:func:`held_out_score`).
        num_visible: the floor of the loss's scale.
    """

    def __init__(self, parameters: list[torch.nn.Parameter], score: Callable[[], Score | None], num_visible: int) -> None:
        self.parameters, self.score = parameters, score
        self.norm_floor = math.sqrt(max(sum(parameter.numel() for parameter in parameters), 1))
        self.loss_floor = float(num_visible)
        self.updates = 0
        self.largest = {"parameter": 0.0, "gradient": 0.0, "loss": 0.0}  # over the good checks
        self.last_good, self.last_good_update = self._copy(), 0
        self.start_score = score()
        self.best, self.best_score, self.best_update = self._copy(), self.start_score, 0
        self.largest["parameter"] = self._read()[0]

    def _copy(self) -> list[torch.Tensor]:
        return [parameter.detach().clone() for parameter in self.parameters]

    @torch.no_grad()
    def _read(self, *losses: torch.Tensor) -> list[float]:
        """``[‖θ‖, ‖g‖, |loss| for each of losses]`` in one read back (``‖g‖`` 0 before any gradient). The norms are
        taken in the parameters' dtype by torch's fused per-tensor norms (no float64 copy of every parameter: a check
        costs about one pass over the parameters); a float32 norm overflows only past 10³⁸, a blow-up anyway."""
        gradients = [parameter.grad for parameter in self.parameters if parameter.grad is not None]
        norms = [get_total_norm(self.parameters).double(),
                 get_total_norm(gradients).double() if gradients else torch.zeros((), dtype=torch.float64, device=self.parameters[0].device)]
        return torch.stack([*norms, *(loss.detach().double().abs() for loss in losses)]).tolist()

    def after_step(self, loss: torch.Tensor, total: torch.Tensor) -> Alarm | None:
        """Count an update; at the updates of :func:`check_schedule`, :meth:`check`. Nothing is read back otherwise."""
        self.updates += 1
        return self.check(loss, total) if check_schedule(self.updates) else None

    def check(self, loss: torch.Tensor, total: torch.Tensor) -> Alarm | None:
        """Check now, in one read back, given the last minibatch ``loss`` and ``total``, the epoch's running sum of losses
        (non-finite once any loss since the epoch began was: so a NaN between two checks is seen at the next one):
        why the run diverged, or ``None`` after copying the parameters as the last good."""
        parameter, gradient, last, running = self._read(loss, total)
        if not all(map(math.isfinite, (last, running, parameter, gradient))):
            return Alarm(non_finite(last + running, parameter, gradient), fatal=True)
        reason = None
        if parameter > PARAMETER_GROWTH * max(self.largest["parameter"], self.norm_floor):
            reason = f"the parameter norm grew to {parameter:.3g} from at most {self.largest['parameter']:.3g}"
        elif gradient > GRADIENT_GROWTH * max(self.largest["gradient"], self.norm_floor):
            reason = f"the gradient norm grew to {gradient:.3g} from at most {self.largest['gradient']:.3g}"
        elif last > LOSS_GROWTH * max(self.largest["loss"], self.loss_floor):
            reason = f"|loss| grew to {last:.3g} from at most {self.largest['loss']:.3g}"
        if reason is not None:
            return Alarm(reason)
        for name, value in (("parameter", parameter), ("gradient", gradient), ("loss", last)):
            self.largest[name] = max(self.largest[name], value)
        for kept, now in zip(self.last_good, self.parameters):
            kept.copy_(now.detach())
        self.last_good_update = self.updates
        return None

    @torch.no_grad()
    def after_prepare(self) -> bool:
        """After the objective's epoch start: when it rewrote the parameters (a DBM's greedy pretraining), the kept states
        describe a model training no longer starts from, so the parameters as they now are become the start, the last
        good and the best state, with their score. Returns whether it rebased (one comparison per parameter tensor)."""
        if all(torch.equal(kept, now) for kept, now in zip(self.last_good, self.parameters)):
            return False
        self.last_good, self.last_good_update = self._copy(), self.updates
        self.start_score = self.score()
        self.best, self.best_score, self.best_update = self._copy(), self.start_score, self.updates
        self.largest["parameter"] = max(self.largest["parameter"], self._read()[0])
        return True

    def failed_step(self) -> Alarm | None:
        """After an update raised (e.g. a Bernoulli draw refusing NaN probabilities): the divergence behind it
        (non-finite parameters or gradients) or ``None`` when they are finite (the error has another cause)."""
        parameter, gradient = self._read()
        if math.isfinite(parameter) and math.isfinite(gradient):
            return None
        return Alarm(non_finite(0.0, parameter, gradient), fatal=True)

    def end_epoch(self) -> Alarm | None:
        """After an epoch (whose last updates :meth:`check` saw): why the run diverged when the held-out score
        collapsed, else ``None`` (a new best score's parameters are kept)."""
        score = self.score()
        if score is None:
            return None
        best = self.best_score.value if self.best_score is not None else score.value
        start = self.start_score.value if self.start_score is not None else score.value
        if score.value == -math.inf or best - score.value > SCORE_COLLAPSE * max(abs(best), abs(start), score.floor):
            return Alarm(f"the {describe_score(score)} collapsed from a best of {best:.4g}")
        if self.best_score is None or score.value > self.best_score.value:
            self.best = self._copy()
            self.best_score, self.best_update = score, self.updates
        return None

    def restore(self) -> tuple[int, Score | None]:
        """Write the better kept state back into the parameters (module docstring); returns its update count and score."""
        scored = []
        for update, kept in ((self.last_good_update, self.last_good), (self.best_update, self.best)):
            self._load(kept)
            scored.append((update, kept, self.score()))
        if all(score is not None for _, _, score in scored):
            update, kept, score = max(scored, key=lambda item: (item[2].value, item[0]))
        else:
            update, kept, score = scored[0]
        self._load(kept)
        return update, score

    @torch.no_grad()
    def _load(self, kept: list[torch.Tensor]) -> None:
        for parameter, value in zip(self.parameters, kept):
            parameter.copy_(value)
