"""Block Gibbs sampling for bipartite models (RBMs): all hidden units, then all visible units."""

from __future__ import annotations

from typing import NamedTuple

import torch


class GibbsState(NamedTuple):
    """visible ``[N, V]`` and hidden ``[N, H]`` states of N chains."""

    visible: torch.Tensor
    hidden: torch.Tensor


class GibbsInfo(NamedTuple):
    """Block Gibbs always moves (no accept/reject), so there is nothing to report; kept for the kernel contract."""


def block_gibbs_step(
    state: GibbsState, target, *, beta: float = 1.0, generator: torch.Generator | None = None
) -> tuple[GibbsState, GibbsInfo]:
    """One sweep ``h ~ p_β(h | v)``, then ``v ~ p_β(v | h)``; leaves ``p_β(v, h) ∝ exp(-β E(v, h))`` invariant.

    ``target`` is a bipartite model offering exact conditional draws ``draw_hidden(v, *, beta, generator)``
    and ``draw_visible(h, *, beta, generator)`` (e.g. :class:`~pfzoo.models.RBM`). Inputs are not
    validated: this is the inner loop.
    """
    hidden = target.draw_hidden(state.visible, beta=beta, generator=generator)
    visible = target.draw_visible(hidden, beta=beta, generator=generator)
    return GibbsState(visible, hidden), GibbsInfo()


def run_gibbs(
    visible: torch.Tensor, target, num_steps: int, *, beta: float = 1.0, generator: torch.Generator | None = None
) -> tuple[GibbsState, GibbsInfo]:
    """``num_steps`` ≥ 1 sweeps of :func:`block_gibbs_step` starting from ``visible [N, V]``.

    Fully visible models (those with ``gibbs_sweep``, e.g. :class:`~pfzoo.models.Ising`) take their own
    single-site block sweeps instead; ``hidden`` is then empty.
    """
    if num_steps < 1:
        raise ValueError(f"num_steps must be at least 1, got {num_steps}")
    state = GibbsState(visible, visible.new_empty(0))
    if callable(getattr(target, "gibbs_sweep", None)):
        blocks = target.gibbs_blocks()
        for _ in range(num_steps):
            state = GibbsState(target.gibbs_sweep(state.visible, beta=beta, generator=generator, blocks=blocks), state.hidden)
        return state, GibbsInfo()
    for _ in range(num_steps):
        state, info = block_gibbs_step(state, target, beta=beta, generator=generator)
    return state, info
