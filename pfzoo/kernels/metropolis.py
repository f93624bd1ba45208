"""Random-walk Metropolis with an isotropic Gaussian proposal: the baseline kernel for continuous models."""

from __future__ import annotations

from typing import NamedTuple

import torch

from pfzoo.kernels.hmc import Evaluate, Evaluation, select


class MetropolisInfo(NamedTuple):
    """accept_prob ``[N]`` and accepted ``[N]`` booleans."""

    accept_prob: torch.Tensor
    accepted: torch.Tensor


class RandomWalkMetropolis:
    """Propose ``x' = x + σ n``, ``n ~ N(0, I)``; accept with probability ``min(1, exp(E(x) − E(x')))``.

    Uses the same ``evaluate`` / cached :class:`~pfzoo.kernels.hmc.Evaluation` interface as
    :class:`~pfzoo.kernels.hmc.HMCKernel`, without gradients. The state is the positions ``[N, D]``.

    Args:
        scale: proposal standard deviation σ (the HAIS paper's baseline uses 0.1).
    """

    def __init__(self, scale: float = 0.1) -> None:
        if not scale > 0:
            raise ValueError(f"scale must be positive, got {scale}")
        self.scale = float(scale)

    def at(self, beta: float) -> RandomWalkMetropolis:
        """The kernel for inverse temperature ``beta``: this one (the proposal does not depend on β)."""
        return self

    def init_state(self, position: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        return position

    @staticmethod
    def position(state: torch.Tensor) -> torch.Tensor:
        return state

    def step(
        self, state: torch.Tensor, current: Evaluation, evaluate: Evaluate, *, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, Evaluation, MetropolisInfo]:
        noise = torch.randn(state.shape, generator=generator, device=state.device, dtype=state.dtype)
        proposal = state + self.scale * noise
        proposal_eval = evaluate(proposal)
        log_ratio = current.energy.double() - proposal_eval.energy.double()
        accept_prob = torch.exp(torch.clamp(log_ratio, max=0.0))
        uniform = torch.rand(accept_prob.shape, generator=generator, device=state.device, dtype=torch.float64)
        accepted = uniform < accept_prob
        return select(accepted, proposal, state), select(accepted, proposal_eval, current), MetropolisInfo(accept_prob, accepted)
