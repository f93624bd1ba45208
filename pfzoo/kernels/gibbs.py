"""Gibbs kernels: block Gibbs between two layers, and systematic scans over a fully visible model's blocks.

Both follow the kernel contract (:mod:`pfzoo.kernels.base`). Their state carries the target's statistics of the
current position, computed once per step and shared by whoever reads the state: an annealing path's weight
increment reuses them (for an RBM path, ``vW + c`` and ``b·v`` from one product), so a block-Gibbs step of an RBM
path costs two matrix products and two Bernoulli draws in all. Gibbs moves are exact draws from conditionals
and always accept.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import torch

from pfzoo.kernels.base import BLOCK_CONDITIONALS, SCAN_CONDITIONALS


class GibbsState(NamedTuple):
    """position ``[N, V]``; hidden ``[N, H]``, the hidden layer drawn in the last step (empty before the first and for
    fully visible targets); stats, the target's statistics of ``position`` (``None`` when it keeps none)."""

    position: torch.Tensor
    hidden: torch.Tensor
    stats: Any = None

    @property
    def visible(self) -> torch.Tensor:
        """The visible units ``[N, V]`` (the position)."""
        return self.position


class GibbsInfo(NamedTuple):
    """Gibbs moves are exact draws from conditionals and always accepted."""

    accept_prob: None = None


class BlockConditionals(Protocol):
    """A two-layer distribution ``p_β(v, h)`` with exact, factorised conditionals: what :class:`BlockGibbs` acts on."""

    def statistics(self, visible: torch.Tensor, *, beta: float = 0.0) -> Any:
        """Per-state quantities of ``visible [N, V]`` that the hidden draw (and a path's increments) reuse; ``beta``
        is where the state was drawn (a piecewise path keeps them per segment)."""

    def draw_hidden(self, visible: torch.Tensor, stats: Any, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        """``h ~ p_β(h | v)`` ``[N, H]`` given ``visible`` and its ``stats``."""

    def draw_visible(self, hidden: torch.Tensor, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        """``v ~ p_β(v | h)`` ``[N, V]``."""


class ScanConditionals(Protocol):
    """A fully visible distribution ``p_β(x)`` whose units split into blocks of conditionally independent units."""

    scan: list[torch.Tensor]
    """The blocks in the order one step visits them (index tensors)."""

    def statistics(self, x: torch.Tensor, *, beta: float = 0.0) -> Any:
        """Per-state quantities of ``x [N, D]`` (for a path's increments); ``None`` when the target keeps none."""

    def draw_block(self, x: torch.Tensor, block: torch.Tensor, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        """``x_block ~ p_β(x_block | x_rest)`` ``[N, |block|]``."""


class BlockGibbs:
    """One sweep ``h ~ p_β(h | v)``, then ``v ~ p_β(v | h)``; leaves ``p_β(v, h)`` and its visible marginal invariant.

    ``target`` is a :class:`BlockConditionals` (a bipartite model's own conditionals, a DBM's even/odd split, an RBM
    path at β). Inputs are not validated: this is the inner loop.
    """

    needs = BLOCK_CONDITIONALS

    def init(self, position: torch.Tensor, target: BlockConditionals, *, generator: torch.Generator | None = None) -> GibbsState:
        return GibbsState(position, position.new_empty(0), target.statistics(position))

    def step(self, state: GibbsState, target: BlockConditionals, *, beta: float = 1.0,
             generator: torch.Generator | None = None) -> tuple[GibbsState, GibbsInfo]:
        hidden = target.draw_hidden(state.position, state.stats, beta=beta, generator=generator)
        visible = target.draw_visible(hidden, beta=beta, generator=generator)
        return GibbsState(visible, hidden, target.statistics(visible, beta=beta)), GibbsInfo()

    def __repr__(self) -> str:
        return "BlockGibbs()"


class ScanGibbs:
    """One systematic scan: each block of ``target.scan`` drawn from its conditional given the rest, in order.

    Every block update leaves ``p_β`` invariant, hence so does the scan; a scan that reads the same backwards
    (``B_1 … B_m … B_1``) is also reversible, as RAISE needs.
    """

    needs = SCAN_CONDITIONALS

    def init(self, position: torch.Tensor, target: ScanConditionals, *, generator: torch.Generator | None = None) -> GibbsState:
        return GibbsState(position, position.new_empty(0), target.statistics(position))

    def step(self, state: GibbsState, target: ScanConditionals, *, beta: float = 1.0,
             generator: torch.Generator | None = None) -> tuple[GibbsState, GibbsInfo]:
        x = state.position.clone()
        for block in target.scan:
            x[:, block] = target.draw_block(x, block, beta=beta, generator=generator)
        return GibbsState(x, state.hidden, target.statistics(x, beta=beta)), GibbsInfo()

    def __repr__(self) -> str:
        return "ScanGibbs()"
