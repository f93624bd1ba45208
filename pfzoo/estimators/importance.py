"""Per-example importance sampling of a latent-variable model's unnormalised marginal ``f(v)``."""

from __future__ import annotations

from typing import NamedTuple

import torch

from pfzoo.estimators.batching import example_batches
from pfzoo.logmath import summarize_log_weights
from pfzoo.models.base import EnergyModel
from pfzoo.validation import allocating, check_sample_count

_ROWS_PER_CHUNK = 1 << 14  # examples × samples per batched proposal


class MarginalEstimate(NamedTuple):
    """log_marginal: float64 ``[B]`` estimates of ``log f(v)``; stderr: their delta-method standard errors ``[B]``."""

    log_marginal: torch.Tensor
    stderr: torch.Tensor


@torch.no_grad()
def importance_log_marginal(
    model: EnergyModel, data: torch.Tensor, num_samples: int, *, generator: torch.Generator | None = None
) -> MarginalEstimate:
    """``log f̂(v) = log (1/S) Σ_s exp(log f(v, z_s) - log q(z_s | v))``, ``z_s ~ q(z | v)``, per example.

    ``q`` is the model's own proposal (:meth:`~pfzoo.models.EnergyModel.propose_path_state`: the
    mean-field posterior for a DBM, RAISE §5.2 and footnote 5; the recognition model for a DBN).
    ``f̂`` is unbiased for ``f(v)``, so ``log f̂`` is a stochastic lower bound on ``log f(v)``.
    Examples × samples run as one batch (in chunks of about 16k rows). ``data [B, V]``.
    """
    check_sample_count(num_samples, "num_samples")
    estimates, stderrs = [], []
    for chunk in example_batches(data, num_samples, max_rows=_ROWS_PER_CHUNK):
        with allocating("num_samples", num_samples):
            log_weight = model.propose_path_state(chunk, num_samples=num_samples, generator=generator).log_weight
        summary = summarize_log_weights(log_weight.view(chunk.shape[0], num_samples), dim=1)
        estimates.append(summary.log_mean)
        stderrs.append(summary.stderr)
    return MarginalEstimate(torch.cat(estimates), torch.cat(stderrs))
