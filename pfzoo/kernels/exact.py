"""Perfect transitions: a fresh exact draw of ``p_β``, for paths whose intermediate distributions sample exactly."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import torch

from pfzoo.kernels.base import EXACT_DRAWS


class ExactState(NamedTuple):
    """position ``[N, D]`` and the target's statistics of it."""

    position: torch.Tensor
    stats: Any


class ExactInfo(NamedTuple):
    """An exact draw is always accepted."""

    accept_prob: None = None


class ExactDraws(Protocol):
    """A distribution at β that draws exact, independent samples."""

    def statistics(self, x: torch.Tensor, *, beta: float = 0.0) -> Any:
        """Per-state quantities of ``x [N, D]`` (for a path's increments)."""

    def draw(self, num_samples: int, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        """``num_samples`` exact samples ``[num_samples, D]`` of ``p_β``."""


class PerfectTransition:
    """``x' ~ p_β`` independently of ``x``: leaves ``p_β`` invariant and is reversible, the ideal kernel against which
    annealing schedules and paths are judged (Grosse, Maddison & Salakhutdinov 2013, §3)."""

    needs = EXACT_DRAWS

    def init(self, position: torch.Tensor, target: ExactDraws, *, generator: torch.Generator | None = None) -> ExactState:
        return ExactState(position, target.statistics(position))

    def step(self, state: ExactState, target: ExactDraws, *, beta: float = 1.0,
             generator: torch.Generator | None = None) -> tuple[ExactState, ExactInfo]:
        x = target.draw(state.position.shape[0], beta=beta, generator=generator)
        return ExactState(x, target.statistics(x, beta=beta)), ExactInfo()

    def __repr__(self) -> str:
        return "PerfectTransition()"
