"""The annealing loop shared by AIS, Hamiltonian AIS and RAISE."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from pfzoo.estimators.base import ProgressCallback
from pfzoo.paths.base import AnnealingPath

_PROGRESS_UPDATES = 100


class AnnealingResult(NamedTuple):
    """log_weights: float64 ``[N]``; state: the chains after the last transition."""

    log_weights: torch.Tensor
    state: Any


@torch.no_grad()
def anneal(
    path: AnnealingPath,
    betas: torch.Tensor,
    state: Any,
    *,
    generator: torch.Generator | None = None,
    progress: ProgressCallback | None = None,
) -> AnnealingResult:
    """Run annealed importance sampling along ``betas`` (Neal 2001, eqs. 3–4).

    Starting from ``state`` (exact samples of ``f_{β_0}``), for k = 1..K:

        log w += log f_{β_k}(x) - log f_{β_{k-1}}(x);   x ← T_{β_k}(x)

    The transition after the last increment would not change the weights and is skipped.
    ``betas`` (float64 ``[K + 1]``) may run in either direction: RAISE anneals from 1 down to 0.
    Log weights accumulate in float64.
    """
    betas_list = betas.tolist()
    num_steps = len(betas_list) - 1
    stats = path.statistics(state)
    log_weights = None
    report_every = max(1, num_steps // _PROGRESS_UPDATES)
    for k in range(1, num_steps + 1):
        increment = path.log_weight_increment(stats, betas_list[k - 1], betas_list[k])
        log_weights = increment if log_weights is None else log_weights + increment
        if k < num_steps:
            state, stats = path.transition(state, stats, betas_list[k], generator=generator)
        if progress is not None and (k % report_every == 0 or k == num_steps):
            progress(k, num_steps)
    return AnnealingResult(log_weights=log_weights, state=state)
