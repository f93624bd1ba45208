"""Log-domain arithmetic and the one reduction of log importance weights to an estimate.

Every estimator turns per-chain log weights into ``log Z``, its standard error and an
effective sample size here, so that the reduction can later gather chains across
``torch.distributed`` ranks in a single place.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch


def log_mean_exp(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``log(mean(exp(x)))`` along ``dim``, computed without overflow."""
    return torch.logsumexp(x, dim=dim) - math.log(x.shape[dim])


class WeightSummary(NamedTuple):
    """Reduction of log importance weights ``log w_i``, ``i = 1..N``.

    log_mean: ``log( (1/N) Σ w_i )``, the log of the unbiased estimate of the normaliser ratio.
    stderr: delta-method standard error of ``log_mean``: ``sd(w) / (sqrt(N) · mean(w))``.
    ess: effective sample size ``(Σ w)² / Σ w²`` in [1, N].
    """

    log_mean: torch.Tensor
    stderr: torch.Tensor
    ess: torch.Tensor


def summarize_log_weights(log_weights: torch.Tensor, dim: int = -1) -> WeightSummary:
    """Reduce log weights along ``dim`` (float64 recommended) to a :class:`WeightSummary`.

    The standard error uses the delta method on the ratio estimate: with
    ``w̃_i = exp(log w_i - max_j log w_j)``, ``Var(log Ẑ) ≈ Var(w̃) / (N · mean(w̃)²)``.
    It is only as good as the sample variance of the weights; when the weights are
    heavy-tailed (small ESS) it underestimates the true error, so report ESS beside it.
    """
    num = log_weights.shape[dim]
    if num < 2:
        raise ValueError(f"log_weights needs at least 2 entries along dim {dim} for a standard error, got {num}")
    shift = log_weights.amax(dim=dim, keepdim=True)
    scaled = torch.exp(log_weights - shift)
    mean = scaled.mean(dim=dim)
    log_mean = torch.log(mean) + shift.squeeze(dim)
    stderr = scaled.std(dim=dim, unbiased=True) / (math.sqrt(num) * mean)
    ess = scaled.sum(dim=dim) ** 2 / (scaled**2).sum(dim=dim)
    return WeightSummary(log_mean=log_mean, stderr=stderr, ess=ess)
