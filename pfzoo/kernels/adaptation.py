"""Step-size adaptation outside the kernels: one loop for every chain whose HMC step adapts as it runs."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from pfzoo.kernels.base import Kernel


class AdaptedChain(NamedTuple):
    """state: the chains after the run; step_size: the adapted ε (0-dim tensor); acceptance: the mean acceptance
    probability over the run's transitions (0-dim float64 tensor)."""

    state: Any
    step_size: torch.Tensor
    acceptance: torch.Tensor


@torch.no_grad()
def adaptive_chain(
    kernel: Kernel,
    target: Any,
    state: Any,
    num_steps: int,
    *,
    step_size: torch.Tensor,
    target_acceptance: float | None,
    beta: float = 1.0,
    generator: torch.Generator | None = None,
) -> AdaptedChain:
    """``num_steps`` transitions of ``kernel`` from ``state``, the step ε passed per call and adapted after each.

    ``ε ← ε · exp(ā − target_acceptance)`` with ā the transition's mean acceptance probability (a multiplicative
    Robbins–Monro step towards the target rate); ``target_acceptance=None`` keeps ε fixed. ε is a 0-dim tensor on the
    chains' device and stays there: no value is read back to the host, so a GPU never waits inside the loop. The
    adapted chain is not exactly invariant while ε moves; callers use it where the samples only need to be good
    (EM-HMC's E-step, persistent MPF's particles), not for estimates.
    """
    step_size = step_size.clone()
    acceptance_sum = torch.zeros((), dtype=torch.float64, device=step_size.device)
    for _ in range(num_steps):
        state, info = kernel.step(state, target, beta=beta, generator=generator, step_size=step_size)
        mean_acceptance = info.accept_prob.mean(dtype=torch.float64)
        acceptance_sum += mean_acceptance
        if target_acceptance is not None:
            step_size = step_size * torch.exp(mean_acceptance - target_acceptance).to(step_size.dtype)
    return AdaptedChain(state, step_size, acceptance_sum / max(1, num_steps))
