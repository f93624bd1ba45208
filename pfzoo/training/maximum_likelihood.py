"""Exact maximum likelihood for models with a differentiable closed-form ``log Z`` (the HAIS paper's "oracle")."""

from __future__ import annotations

import torch
from torch import nn


class ExactMaximumLikelihood(nn.Module):
    """Loss ``−mean_n log p(x_n) = mean_n E(x_n) + log Z`` (float64 ``log Z``), for complete POE / ICA / Gaussian models.

    Only for models whose :meth:`~pfzoo.models.EnergyModel.log_partition` is a closed form that
    autograd can differentiate; it raises for the rest. Deterministic, so it works with
    ``torch.optim.LBFGS`` on the full data set.
    """

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        if model.log_partition_cost != 0:
            raise ValueError(
                f"ExactMaximumLikelihood needs a closed-form log Z; {type(model).__name__} "
                f"(log_partition_cost={model.log_partition_cost}) has none: use an MPF or contrastive objective"
            )
        return model.energy(batch).mean() + model.log_partition().to(batch.dtype)
