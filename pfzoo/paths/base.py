"""The interface every annealing path implements; the annealing engine only talks to this."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch


class AnnealingPath(ABC):
    """A family of unnormalised densities ``f_β``, β ∈ [0, 1], from a tractable base (β = 0) to the target (β = 1).

    Paths are built by :func:`pfzoo.paths.registry.build` from a model and a base; they depend on
    models, never the reverse.

    Paths work on *statistics* of a state: whatever per-state quantities let ``log f_β`` be
    evaluated at any β cheaply (for an RBM, ``vW + c`` and ``b·v``). The engine computes them
    once per state, uses them for the weight increment, and hands them to :meth:`transition`,
    which returns the statistics of the new state along with it.
    """

    @abstractmethod
    def sample_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> Any:
        """``num_chains`` exact samples from the base distribution ``f_0 / Z_0``."""

    @abstractmethod
    def base_log_partition(self) -> torch.Tensor:
        """Exact ``log Z_0`` (float64 scalar)."""

    @abstractmethod
    def statistics(self, state: Any) -> Any:
        """Per-state statistics from which ``log f_β(state)`` follows for any β."""

    @abstractmethod
    def log_weight_increment(self, stats: Any, beta_from: float, beta_to: float) -> torch.Tensor:
        """``log f_{beta_to}(x) - log f_{beta_from}(x)`` per chain, float64 ``[N]``."""

    @abstractmethod
    def transition(self, state: Any, stats: Any, beta: float, *, generator: torch.Generator | None = None) -> tuple[Any, Any, Any]:
        """One step of a Markov kernel leaving ``f_β`` invariant → ``(new_state, new_stats, info)``.

        ``info`` is the kernel's (:mod:`pfzoo.kernels`): ``None`` for exact Gibbs and perfect transitions
        (always accepted), else a NamedTuple with ``accept_prob [N]`` that the engine averages per β segment.
        """


class KernelPath(AnnealingPath):
    """A path whose transitions are steps of a kernel (:mod:`pfzoo.kernels`) on ``self.density``, the path's
    distribution at any β as a :class:`~pfzoo.kernels.PositionTarget`, and whose kernel state carries the
    statistics of its positions (so the statistics are the state's, and a step returns the new ones with it)."""

    kernel: Any
    density: Any

    def statistics(self, state: Any) -> Any:
        return state.stats

    def transition(self, state: Any, stats: Any, beta: float, *, generator: torch.Generator | None = None) -> tuple[Any, Any, Any]:
        state, info = self.kernel.step(state, self.density, beta=beta, generator=generator)
        return state, state.stats, info
