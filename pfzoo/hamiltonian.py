"""Hamiltonian dynamics for ``H(x, p) = E(x) + ½|p|²`` (unit mass): the leapfrog integrator and the Metropolis test.

The building blocks shared by :class:`pfzoo.kernels.HMCKernel` (annealing, training) and the models'
own MCMC samplers (``ContinuousModel.sample``); a utility below both, so models need not import kernels.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch


class Evaluation(NamedTuple):
    """energy ``[N]``, grad ``[N, D]`` (``None`` when not needed) and extras (a tuple of ``[N, ...]`` tensors, or ``None``)."""

    energy: torch.Tensor
    grad: torch.Tensor | None
    extras: Any = None


Evaluate = Callable[[torch.Tensor], Evaluation]


def leapfrog(
    position: torch.Tensor,
    momentum: torch.Tensor,
    current: Evaluation,
    evaluate: Evaluate,
    *,
    step_size: float,
    num_steps: int = 1,
    lower: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, Evaluation]:
    """``num_steps`` leapfrog steps of size ε for ``H = E(x) + ½|p|²`` (HAIS eqs. 19–21) → ``(x, p, evaluation)``.

    Volume preserving and exactly reversible: flipping the momentum of the result and integrating
    again returns the start. With ``lower [D]``, a position step that crosses ``x_i = lower_i`` is
    reflected (``x_i ← 2 lower_i − x_i``, ``p_i ← −p_i``), which keeps both properties.
    """
    momentum = momentum - (0.5 * step_size) * current.grad
    evaluation = current
    for step in range(num_steps):
        position = position + step_size * momentum
        if lower is not None:
            crossed = position < lower
            position = torch.where(crossed, 2 * lower - position, position)
            momentum = torch.where(crossed, -momentum, momentum)
        evaluation = evaluate(position)
        momentum = momentum - (step_size if step < num_steps - 1 else 0.5 * step_size) * evaluation.grad
    return position, momentum, evaluation


def hamiltonian(evaluation: Evaluation, momentum: torch.Tensor) -> torch.Tensor:
    return evaluation.energy.double() + 0.5 * momentum.double().square().sum(-1)


def acceptance(start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
    """Metropolis acceptance ``min(1, exp(H_start − H_end))`` ``[N]``; 0 where the trajectory diverged (``H_end`` inf or NaN)."""
    return torch.nan_to_num(torch.exp(torch.clamp(start - end, max=0.0)), nan=0.0)
