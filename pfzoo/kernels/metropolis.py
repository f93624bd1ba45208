"""Metropolis kernels: random walk over real vectors (the HAIS paper's baseline) and single-bit flips over binary states.

Both follow the kernel contract (:mod:`pfzoo.kernels.base`) with a
:class:`~pfzoo.kernels.hmc.PositionTarget` (gradients are not used) and a state that carries the
target's statistics of its positions, so a change of β costs no evaluation.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from pfzoo.kernels.base import BINARY_ENERGY_VALUES, REAL_ENERGY_VALUES, select_chains
from pfzoo.kernels.hmc import PositionTarget
from pfzoo.sampling import normal, randint, uniform
from pfzoo.validation import check_finite_number, check_positive_int


class MetropolisState(NamedTuple):
    """position ``[N, D]`` and the target's statistics of it."""

    position: torch.Tensor
    stats: Any


class MetropolisInfo(NamedTuple):
    """accept_prob ``[N]`` (for bit flips: the mean over the step's proposals) and accepted ``[N]`` booleans (any accepted)."""

    accept_prob: torch.Tensor
    accepted: torch.Tensor


def _metropolis_accept(current, proposal, *, generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Acceptance ``min(1, exp(E(x) − E(x')))`` and the draw against it, ``[N]`` each."""
    log_ratio = current.energy.double() - proposal.energy.double()
    accept_prob = torch.nan_to_num(torch.exp(torch.clamp(log_ratio, max=0.0)), nan=0.0)
    draw = uniform(accept_prob.shape, generator=generator, device=accept_prob.device, dtype=torch.float64)
    return accept_prob, draw < accept_prob


class RandomWalkMetropolis:
    """Propose ``x' = x + σ n``, ``n ~ N(0, I)``; accept with probability ``min(1, exp(E_β(x) − E_β(x')))``.

    Args:
        scale: proposal standard deviation σ (the HAIS paper's baseline uses 0.1).
    """

    needs = REAL_ENERGY_VALUES

    def __init__(self, scale: float = 0.1) -> None:
        check_finite_number(scale, "scale", minimum=0.0, exclusive=True)
        self.scale = float(scale)

    def init(self, position: torch.Tensor, target: PositionTarget, *, generator: torch.Generator | None = None) -> MetropolisState:
        return MetropolisState(position, target.statistics(position))

    def step(
        self, state: MetropolisState, target: PositionTarget, *, beta: float = 1.0, generator: torch.Generator | None = None
    ) -> tuple[MetropolisState, MetropolisInfo]:
        noise = normal(state.position.shape, generator=generator, device=state.position.device, dtype=state.position.dtype)
        proposal = state.position + self.scale * noise
        proposal_stats = target.statistics(proposal)
        accept_prob, accepted = _metropolis_accept(
            target.evaluation(state.stats, beta), target.evaluation(proposal_stats, beta), generator=generator
        )
        new_state = MetropolisState(select_chains(accepted, proposal, state.position), select_chains(accepted, proposal_stats, state.stats))
        return new_state, MetropolisInfo(accept_prob, accepted)


class BitFlipMetropolis:
    """``num_flips`` single-unit flip proposals per step on binary states, each at a uniformly random unit.

    Each proposal flips one unit of each chain and is accepted with probability
    ``min(1, exp(E_β(x) − E_β(x')))``; every proposal leaves ``p_β`` invariant (and is reversible), so their
    sequence does too. The kernel for binary energies that offer no conditionals (a user's own energy
    over ``{0, 1}^D``); each proposal costs one energy evaluation.

    Args:
        num_flips: proposals per step; ``None`` = one per unit (a random-site sweep).
    """

    needs = BINARY_ENERGY_VALUES

    def __init__(self, num_flips: int | None = None) -> None:
        self.num_flips = None if num_flips is None else check_positive_int(num_flips, "num_flips")

    def init(self, position: torch.Tensor, target: PositionTarget, *, generator: torch.Generator | None = None) -> MetropolisState:
        return MetropolisState(position, target.statistics(position))

    def step(
        self, state: MetropolisState, target: PositionTarget, *, beta: float = 1.0, generator: torch.Generator | None = None
    ) -> tuple[MetropolisState, MetropolisInfo]:
        position, stats = state
        num_chains, width = position.shape
        num_flips = width if self.num_flips is None else self.num_flips
        rows = torch.arange(num_chains, device=position.device)
        accept_sum = torch.zeros(num_chains, dtype=torch.float64, device=position.device)
        any_accepted = torch.zeros(num_chains, dtype=torch.bool, device=position.device)
        for _ in range(num_flips):
            units = randint(width, (num_chains,), generator=generator, device=position.device)
            proposal = position.clone()
            proposal[rows, units] = 1 - proposal[rows, units]
            proposal_stats = target.statistics(proposal)
            accept_prob, accepted = _metropolis_accept(
                target.evaluation(stats, beta), target.evaluation(proposal_stats, beta), generator=generator
            )
            position, stats = select_chains(accepted, proposal, position), select_chains(accepted, proposal_stats, stats)
            accept_sum += accept_prob
            any_accepted |= accepted
        return MetropolisState(position, stats), MetropolisInfo(accept_sum / num_flips, any_accepted)
