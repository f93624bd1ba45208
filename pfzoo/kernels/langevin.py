"""Langevin kernels for energies over real vectors: the Metropolis-adjusted Langevin algorithm (MALA; Roberts &
Tweedie 1996) and its unadjusted form (ULA, for training's negative phases, where a small bias buys no rejections).

One step at β, with ``τ = ε² / 2`` (so that MALA is one-leapfrog HMC with fully refreshed momenta and ε is the step
HMC's step sizes are measured in):

    y = x − τ ∇E_β(x) + √(2τ) ξ,  ξ ~ N(0, I)                                                  (Roberts & Tweedie eq. 2.2)
    α = min(1, exp(E_β(x) − E_β(y) − |x − y + τ∇E_β(y)|² / 4τ + |y − x + τ∇E_β(x)|² / 4τ))     (the Metropolis–Hastings ratio)

MALA accepts y with probability α and so leaves ``p_β ∝ exp(−E_β)`` invariant and satisfies detailed balance; ULA
always moves to y and samples a distribution that differs from ``p_β`` by O(τ) (for ``E = x²/2σ²`` its stationary
variance is ``2τ / (1 − (1 − τ/σ²)²)``). Targets are :class:`~pfzoo.kernels.PositionTarget` s (every continuous path's,
``EnergyTarget`` of any continuous model); the state carries the target's statistics, so a step costs one
energy-and-gradient evaluation.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch

from pfzoo.kernels.base import ENERGY_AND_GRADIENT, select_chains
from pfzoo.kernels.hmc import PositionTarget
from pfzoo.sampling import normal, uniform
from pfzoo.validation import check_bool, check_step_size


class LangevinState(NamedTuple):
    """position ``[N, D]`` and the target's statistics of it."""

    position: torch.Tensor
    stats: Any


class LangevinInfo(NamedTuple):
    """accept_prob ``[N]`` of MALA's proposal (``None`` for ULA, which always moves); accepted ``[N]``; the step ε used."""

    accept_prob: torch.Tensor | None
    accepted: torch.Tensor
    step_size: float | torch.Tensor


class LangevinKernel:
    """MALA (``adjusted=True``) or ULA (``adjusted=False``) with step ε (module docstring).

    The kernel holds settings only; :meth:`step` takes ``step_size`` per call too (a number, or a 0-dim tensor adapted
    on the device between calls by :func:`~pfzoo.kernels.adaptive_chain`, for MALA towards an acceptance of about 0.57,
    Roberts & Rosenthal 1998).

    Args:
        step_size: ε > 0 (drift ``ε²/2 · ∇E``, noise ``ε ξ``).
        adjusted: Metropolis-adjust (MALA, exact) or not (ULA, biased by O(ε²)).
    """

    needs = ENERGY_AND_GRADIENT

    def __init__(self, step_size: float | torch.Tensor, *, adjusted: bool = True) -> None:
        step_size = check_step_size(step_size)
        self.step_size = step_size
        self.adjusted = check_bool(adjusted, "adjusted")

    def init(self, position: torch.Tensor, target: PositionTarget, *, generator: torch.Generator | None = None) -> LangevinState:
        """Chains at ``position [N, D]`` with the target's statistics (no draws)."""
        return LangevinState(position, target.statistics(position))

    def step(self, state: LangevinState, target: PositionTarget, *, beta: float = 1.0, generator: torch.Generator | None = None,
             step_size: float | torch.Tensor | None = None) -> tuple[LangevinState, LangevinInfo]:
        """One Langevin step at β → ``(state, info)``; ``step_size`` replaces the kernel's ε for this call."""
        step_size = self.step_size if step_size is None else step_size
        tau = 0.5 * step_size * step_size
        noise_scale = torch.sqrt(2 * tau) if torch.is_tensor(tau) else math.sqrt(2 * tau)
        current = target.evaluation(state.stats, beta)
        x = state.position
        noise = normal(x.shape, generator=generator, device=x.device, dtype=x.dtype)
        proposal = x - tau * current.grad + noise_scale * noise
        stats = target.statistics(proposal)
        if not self.adjusted:
            accepted = torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
            return LangevinState(proposal, stats), LangevinInfo(None, accepted, step_size)
        proposed = target.evaluation(stats, beta)
        forward = (proposal - x + tau * current.grad).double().square().sum(-1)  # = 2τ |ξ|²
        backward = (x - proposal + tau * proposed.grad).double().square().sum(-1)
        log_ratio = current.energy.double() - proposed.energy.double() - (backward - forward) / (4 * tau)
        # a proposal whose energy or gradient is not finite is rejected (acceptance 0, not NaN)
        accept_prob = torch.nan_to_num(torch.exp(torch.clamp(log_ratio, max=0.0)), nan=0.0)
        draw = uniform(accept_prob.shape, generator=generator, device=accept_prob.device, dtype=torch.float64)
        accepted = draw < accept_prob
        return (LangevinState(select_chains(accepted, proposal, x), select_chains(accepted, stats, state.stats)),
                LangevinInfo(accept_prob, accepted, step_size))

    def __repr__(self) -> str:
        return f"LangevinKernel(step_size={self.step_size}, adjusted={self.adjusted})"
