"""Gibbs kernels for binary-unit models: block Gibbs between two layers, and sweeps over a fully visible model's blocks.

Both follow ``step(state, target, *, beta, generator) -> (state, info)``. Gibbs moves always accept,
so their info is empty.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class GibbsState(NamedTuple):
    """visible ``[N, V]`` and hidden ``[N, H]`` states of N chains (``hidden`` is empty for fully visible models)."""

    visible: torch.Tensor
    hidden: torch.Tensor


class GibbsInfo(NamedTuple):
    """Gibbs moves are exact draws from conditionals and always accepted: nothing to report."""


class BlockGibbs:
    """One sweep ``h ~ p_β(h | v)``, then ``v ~ p_β(v | h)``; leaves ``p_β(v, h) ∝ exp(-β E(v, h))`` invariant.

    ``target`` offers exact conditional draws ``draw_hidden(v, *, beta, generator)`` and
    ``draw_visible(h, *, beta, generator)`` (RBM, Gaussian–Bernoulli RBM). Inputs are not validated:
    this is the inner loop.
    """

    def step(self, state: GibbsState, target, *, beta: float = 1.0, generator: torch.Generator | None = None) -> tuple[GibbsState, GibbsInfo]:
        hidden = target.draw_hidden(state.visible, beta=beta, generator=generator)
        visible = target.draw_visible(hidden, beta=beta, generator=generator)
        return GibbsState(visible, hidden), GibbsInfo()


class SweepGibbs:
    """One block Gibbs sweep over a fully visible model's units: ``target.gibbs_sweep(x, *, beta, generator, blocks)``
    draws each block of mutually independent units given the rest (an Ising model's independent sets)."""

    def __init__(self, blocks: list[torch.Tensor]) -> None:
        self.blocks = blocks

    def step(self, state: GibbsState, target, *, beta: float = 1.0, generator: torch.Generator | None = None) -> tuple[GibbsState, GibbsInfo]:
        visible = target.gibbs_sweep(state.visible, beta=beta, generator=generator, blocks=self.blocks)
        return GibbsState(visible, state.hidden), GibbsInfo()


def gibbs_kernel(target) -> BlockGibbs | SweepGibbs:
    """The Gibbs kernel of a model with a visible Gibbs chain: sweeps for fully visible models (those with
    ``gibbs_sweep``), block Gibbs through the hidden layer otherwise."""
    if callable(getattr(target, "gibbs_sweep", None)):
        return SweepGibbs(target.gibbs_blocks())
    return BlockGibbs()


def run_gibbs(
    visible: torch.Tensor, target, num_steps: int, *, beta: float = 1.0, generator: torch.Generator | None = None
) -> tuple[GibbsState, GibbsInfo]:
    """``num_steps`` ≥ 1 steps of :func:`gibbs_kernel`'s kernel starting from ``visible [N, V]``."""
    if num_steps < 1:
        raise ValueError(f"num_steps must be at least 1, got {num_steps}")
    kernel = gibbs_kernel(target)
    state, info = GibbsState(visible, visible.new_empty(0)), GibbsInfo()
    for _ in range(num_steps):
        state, info = kernel.step(state, target, beta=beta, generator=generator)
    return state, info
