"""The interface every annealing path implements; the annealing engine only talks to this."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Hashable

import torch

from pfzoo.kernels import Kernel, Target
from pfzoo.kernels.base import draws_noise_first
from pfzoo.sampling import Generator

TEMPERED_BLOCK_ELEMENTS = 1 << 22
"""The most float64 elements (32 MiB) of one block of a one-pass :meth:`AnnealingPath.tempered_log_density`'s
``[N, K, H]`` intermediates (a row's K levels times its H units): thousands of chains over a ladder would otherwise
hold gigabytes."""


def tempered_block_rows(num_columns: int, width: int) -> int:
    """Rows of ``beta [N, num_columns]`` per block of a one-pass tempered density whose intermediates are
    ``[rows, num_columns, width]``: at most :data:`TEMPERED_BLOCK_ELEMENTS` elements, and at least one row."""
    return max(1, TEMPERED_BLOCK_ELEMENTS // max(1, num_columns * width))


class AnnealingPath(ABC):
    """A family of unnormalised densities ``f_β``, β ∈ [0, 1], from a tractable base (β = 0) to the target (β = 1).

    Paths are built by :func:`pfzoo.paths.registry.build` from a model and a base; they depend on
    models, never the reverse.

    A path hands the engine two things: :attr:`target`, ``f_β`` at any β in the form its kernel acts on (block
    conditionals, energies and gradients, ...), and :attr:`kernel` (:mod:`pfzoo.kernels`), the transition that leaves
    ``f_β / Z_β`` invariant. The kernel's state carries the target's *statistics* of its positions: whatever
    per-state quantities let ``log f_β`` be evaluated at any β cheaply (for an RBM, ``vW + c`` and ``b·v``). They are
    computed once per state, by the kernel step that makes the state, and reused by the weight increment.
    """

    target: Target
    kernel: Kernel
    beta_free_statistics: bool = False
    """Whether a state's statistics are the same whatever β it was drawn at (an RBM path's ``vW + c − c_0`` and
    ``(b − b_0)·v``), so that replica exchange may read the statistics a state keeps at any level
    (:class:`~pfzoo.paths.tempered.TemperedPathTarget`); False where they belong to a β (a piecewise path's segment)."""
    linear_in_beta: bool = False
    """Whether ``log f_β(x) = log f_0(x) + β g(x)`` (a geometric path between energies kept as statistics): every weight
    increment is then ``(β' − β)`` times the one from 0 to 1, and :meth:`tempered_log_density` is that times β."""
    warnings: tuple[str, ...] = ()
    """One line per reason the path itself makes an estimate unreliable (e.g. a Gaussian base for a heavy-tailed
    target); estimators add them to the estimate's warnings."""
    batches_chain_streams: bool = True
    """Whether every draw of the path (base and kernel) goes through :mod:`pfzoo.sampling` with the chains as its first
    dimension and a shape that does not depend on the other chains: then one batch of blocks drawing from a
    :class:`~pfzoo.sampling.ChainStreams` draws for each block what the block draws alone (estimators run a rank's
    blocks as one batch)."""

    @abstractmethod
    def draw_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """``num_chains`` exact samples ``[num_chains, D]`` from the base distribution ``f_0 / Z_0`` (positions)."""

    @abstractmethod
    def base_log_partition(self) -> torch.Tensor:
        """Exact ``log Z_0`` (float64 scalar)."""

    @abstractmethod
    def log_weight_increment(self, stats: Any, beta_from: float, beta_to: float) -> torch.Tensor:
        """``log f_{beta_to}(x) - log f_{beta_from}(x)`` per chain, float64 ``[N]``, from a state's statistics."""

    def tempered_log_density(self, stats: Any, beta: torch.Tensor) -> torch.Tensor | None:
        """``log f_β(x) − log f_0(x)`` (the weight increment from 0) float64 ``[N, K]`` for the states of ``stats`` at a β
        per row and column ``beta [N, K]`` (float64), in one pass, where the path has such a form (:attr:`linear_in_beta`
        paths; the RBM, Gaussian–Bernoulli RBM, RBM-pair and RBM-spline paths; the Gaussian paths); ``None`` otherwise, and
        a caller evaluates level by level with :meth:`log_weight_increment`. Row by row it equals
        ``log_weight_increment(stats, 0, b)`` for each entry b of ``beta`` (to the increments' own rounding). What replica
        exchange over a path's levels compares (:class:`~pfzoo.paths.tempered.TemperedPathTarget`), and the
        stepping-stone ratios read."""
        if self.linear_in_beta:
            return beta * self.log_weight_increment(stats, 0.0, 1.0)[:, None]
        return None

    def kl_sum(self, betas: torch.Tensor) -> torch.Tensor | None:
        """``Σ_k KL(p_{β_{k−1}} ‖ p_{β_k})`` along ``betas [K+1]`` (float64 scalar), the bias of ``E[log Ẑ]`` under perfect
        transitions, where the path has it in closed form (Gaussian paths); ``None`` otherwise."""
        return None

    def symmetric_divergences(self, betas: torch.Tensor) -> torch.Tensor | None:
        """Exact ``J_j = KL(p_j‖p_{j+1}) + KL(p_{j+1}‖p_j)`` between neighbours of ``betas [J+1]`` → float64 ``[J]``, where
        the path has them in closed form (Gaussian paths); ``None`` otherwise."""
        return None

    def init(self, position: torch.Tensor, *, generator: torch.Generator | None = None) -> Any:
        """Chains at ``position [N, D]`` as kernel states (with their statistics)."""
        return self.kernel.init(position, self.target, generator=generator)

    def sample_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> Any:
        """Kernel states of ``num_chains`` exact base samples."""
        return self.init(self.draw_base(num_chains, generator=generator), generator=generator)

    def statistics(self, state: Any) -> Any:
        """The statistics a kernel state carries of its positions."""
        return state.stats

    def transition(self, state: Any, beta: float, *, generator: torch.Generator | None = None, noise: Any = None) -> tuple[Any, Any]:
        """One kernel step at β → ``(state, info)``; ``info.accept_prob`` is ``None`` for moves that always accept.
        ``noise``: the step's draws made beforehand by :meth:`draw_noise` (then nothing is drawn from ``generator``)."""
        if noise is None:
            return self.kernel.step(state, self.target, beta=beta, generator=generator)
        return self.kernel.step(state, self.target, beta=beta, noise=noise)

    def draw_noise(self, state: Any, *, generator: torch.Generator | None = None) -> Any:
        """The draws the next :meth:`transition` from ``state`` would make, made now (for a compiled transition that
        holds no draw), where the kernel can make them first (:class:`~pfzoo.kernels.base.NoiseFirstKernel`); else
        ``None``, and the transition draws them itself."""
        return self.kernel.draw_noise(state, generator=generator) if draws_noise_first(self.kernel) else None

    def device_step_form(self, beta_from: float, beta_to: float) -> Hashable | None:
        """Whether the step from β to β' can run with both β's as device tensors (:meth:`device_advance`), and how: ``None``
        where the step's arithmetic needs them on the host (the default); else a key, equal for steps that run the same
        device operations, so that a CUDA graph captured for one replays any (:mod:`pfzoo.estimators.cuda_graphs`)."""
        return None

    def device_advance(self, state: Any, beta_from: torch.Tensor, beta_to: torch.Tensor, *, form: Hashable,
                       generator: Generator = None) -> tuple[torch.Tensor, Any, Any]:
        """:meth:`advance` with β and β' float64 0-d tensors on the chains' device and the step's ``form`` of
        :meth:`device_step_form`: no value read back to the host and nothing allocated outside the device's allocator,
        so the step can be captured in a CUDA graph. Paths whose :meth:`device_step_form` is not ``None`` implement it."""
        raise NotImplementedError(f"{type(self).__name__} has no device-β step (device_step_form is None)")

    def device_increment(self, stats: Any, beta_from: torch.Tensor, beta_to: torch.Tensor, *, form: Hashable) -> torch.Tensor:
        """:meth:`log_weight_increment` with device β's, as in :meth:`device_advance` (the annealing loop's last step)."""
        raise NotImplementedError(f"{type(self).__name__} has no device-β step (device_step_form is None)")

    def advance(self, state: Any, beta_from: float, beta_to: float, *, generator: torch.Generator | None = None,
                workspace: dict | None = None) -> tuple[torch.Tensor, Any, Any]:
        """One annealing step: the increment ``log f_{β'}(x) − log f_β(x)`` (float64 ``[N]``) of ``state``'s chains, then
        the transition at β' → ``(increment, state, info)``. ``workspace`` is a dict the annealing loop keeps for one run:
        a path may hold buffers there that its steps reuse (its states then live until the step after next). Paths
        override this to share work between the increment and the transition; the numbers stay those of the two calls."""
        increment = self.log_weight_increment(self.statistics(state), beta_from, beta_to)
        return (increment, *self.transition(state, beta_to, generator=generator))
