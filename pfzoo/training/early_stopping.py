"""Early stopping: keep the parameters at the update where a held-out score was best, and stop once it stops improving.

Some objectives have no minimum on a finite sample — generalized score matching for binary data falls without bound
wherever a unit's other value is never observed (:mod:`pfzoo.training.generalized_score_matching`) — so the model they
reach after a fixed number of epochs says nothing about the principle; the model at the best point of a held-out score
does. :class:`EarlyStopping` follows that score every ``every`` updates and keeps the best parameters;
:class:`UpdateLimit` then retrains for the chosen number of updates on data with no held-out part (the usual
"retrain for the early-stopped number of steps on the whole training set").

Both are :class:`~pfzoo.training.TrainingCallback`\\ s: they stop the run at the next epoch boundary (the Trainer asks
before every epoch), and their state — the update count and the parameters kept — is checkpointed, so a resumed run
continues and a finished run's kept parameters are restored without training again.

:func:`objective_score` makes the score of the principle being trained: minus its own loss on held-out rows, so an
unregularised fit (full-batch L-BFGS on MPF or pseudo-likelihood, which overfits a finite sample) stops where the
held-out objective is lowest, without reading anything the data cannot give (e.g. a known true model).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import torch

from pfzoo.training.callbacks import TrainingCallback
from pfzoo.training.objective import Objective
from pfzoo.validation import check_matrix, check_positive_int

Score = Callable[[Any], float]
"""``score(model) -> float``, higher is better (e.g. the exact log-likelihood of a validation split)."""


def objective_score(objective: Objective, rows: torch.Tensor, *, seed: int = 0) -> Score:
    """``model -> −objective.loss(model, rows)``: the held-out objective of ``objective``'s own principle as a
    :class:`EarlyStopping` score (higher is better), on held-out ``rows [M, D]`` moved to the model's device and dtype.

    A stochastic loss (sampled flips or units) draws from a generator re-seeded with ``seed`` at every call, so the scores
    along a run differ by the model alone (common random numbers). The loss gets no row numbers (``indices``), so only a
    loss that reads the rows alone applies (bit-flip MPF, pseudo-likelihood, ratio matching; not persistent MPF, whose
    particles belong to the training rows).
    """
    if not isinstance(objective, Objective):
        raise ValueError(f"objective must be a pfzoo.training.Objective, got {type(objective).__name__}")
    check_matrix(rows, "rows")

    @torch.no_grad()
    def score(model) -> float:
        generator = torch.Generator(model.device).manual_seed(seed)
        return -float(objective.loss(model, rows.to(device=model.device, dtype=model.dtype), generator=generator))

    return score


def _cpu_state(model) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().to("cpu", copy=True) for name, tensor in model.state_dict().items()}


class EarlyStopping(TrainingCallback):
    """Score the model every ``every`` updates (and before the first), keep the parameters of the best score, and ask
    the run to stop once ``patience`` scores in a row were not better than the best (or a score is not finite).

    After :meth:`~pfzoo.training.Trainer.fit` — also one that raised ``FloatingPointError`` — :meth:`restore_best` puts
    the kept parameters back. :attr:`best_update` is the update count of the best score (0: the starting model) and
    :attr:`scores` every ``(update, score)`` measured.

    Args:
        score: ``model -> float``, higher is better; called under ``torch.no_grad``.
        every: updates between scores (≥ 1).
        patience: scores in a row without improvement before stopping (≥ 1); ``None``: never stop for that.
    """

    def __init__(self, score: Score, *, every: int, patience: int | None = None) -> None:
        if not callable(score):
            raise ValueError(f"score must be a callable model -> float, got {type(score).__name__}")
        self.score = score
        self.every = check_positive_int(every, "every")
        self.patience = None if patience is None else check_positive_int(patience, "patience")
        self.updates = 0
        self.best_score = -math.inf
        self.best_update = 0
        self.best_state: dict[str, torch.Tensor] | None = None
        self.scores: list[tuple[int, float]] = []
        self._since_best = 0

    def start(self, model, train: torch.Tensor, *, seed: int, state: dict[str, Any] | None = None) -> None:
        if state:
            self.updates, self.best_score, self.best_update = state["updates"], state["best_score"], state["best_update"]
            self.best_state, self.scores, self._since_best = state["best_state"], [tuple(s) for s in state["scores"]], state["since_best"]
            return
        self._measure(model)

    def on_step(self, model) -> None:
        self.updates += 1
        if self.updates % self.every == 0:
            self._measure(model)

    @torch.no_grad()
    def _measure(self, model) -> None:
        value = float(self.score(model))
        self.scores.append((self.updates, value))
        if value > self.best_score:
            self.best_score, self.best_update, self.best_state, self._since_best = value, self.updates, _cpu_state(model), 0
        else:
            self._since_best += 1

    def on_epoch_end(self, model, epoch: int, splits: Mapping[str, torch.Tensor]) -> dict[str, float]:
        return {"early_stopping_score": self.scores[-1][1], "early_stopping_best": self.best_score}

    def stop_reason(self) -> str | None:
        last = self.scores[-1][1] if self.scores else 0.0
        if not math.isfinite(last):
            return f"the early-stopping score is {last} after update {self.scores[-1][0]}"
        if self.patience is not None and self._since_best >= self.patience:
            return (f"{self._since_best} early-stopping scores in a row were below the best, {self.best_score:.6g} "
                    f"at update {self.best_update}")
        return None

    def restore_best(self, model) -> None:
        """Load the parameters of the best score into ``model``."""
        if self.best_state is None and self.scores:  # every score was NaN (or -inf): none was ever better than -inf
            values = sorted({repr(value) for _, value in self.scores})
            raise ValueError(f"restore_best has no parameters to restore: all {len(self.scores)} early-stopping scores were "
                             f"{' or '.join(values)}, none finite; check the score function")
        if self.best_state is None:
            raise ValueError("restore_best needs a finished run: no score was measured yet")
        model.load_state_dict(self.best_state)

    def state_dict(self) -> dict[str, Any]:
        return {"updates": self.updates, "best_score": self.best_score, "best_update": self.best_update,
                "best_state": self.best_state, "scores": [list(s) for s in self.scores], "since_best": self._since_best}


class UpdateLimit(TrainingCallback):
    """Keep the parameters after exactly ``updates`` updates (the starting model for 0) and stop the run at the next
    epoch boundary; :meth:`restore` puts them back into the model after :meth:`~pfzoo.training.Trainer.fit`."""

    def __init__(self, updates: int) -> None:
        if isinstance(updates, bool) or not isinstance(updates, int) or updates < 0:
            raise ValueError(f"updates must be an int ≥ 0, got {updates!r}")
        self.limit = updates
        self.updates = 0
        self.kept: dict[str, torch.Tensor] | None = None

    def start(self, model, train: torch.Tensor, *, seed: int, state: dict[str, Any] | None = None) -> None:
        if state:
            self.updates, self.kept = state["updates"], state["kept"]
        elif self.limit == 0:
            self.kept = _cpu_state(model)

    def on_step(self, model) -> None:
        self.updates += 1
        if self.updates == self.limit:
            self.kept = _cpu_state(model)

    def stop_reason(self) -> str | None:
        return None if self.kept is None else f"{self.limit} updates reached (UpdateLimit)"

    def restore(self, model) -> None:
        """Load the parameters kept at update ``updates`` into ``model``."""
        if self.kept is None:
            raise ValueError(f"restore needs a run of at least {self.limit} updates; this one took {self.updates}")
        model.load_state_dict(self.kept)

    def state_dict(self) -> dict[str, Any]:
        return {"updates": self.updates, "kept": self.kept}
