"""Exact partition functions by enumeration or closed form."""

from __future__ import annotations

import torch

from pfzoo.estimators.base import BoundKind, Estimator, PartitionEstimate, ProgressCallback
from pfzoo.models.base import EnergyModel


class Exact(Estimator):
    """``log Z`` from the model's own exact :meth:`~pfzoo.models.EnergyModel.log_partition`.

    Raises ``NotImplementedError`` for models without one, and ``ValueError`` when the model
    is too large to enumerate.
    """

    def forward(
        self,
        model: EnergyModel,
        *,
        data: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> PartitionEstimate:
        log_z = model.log_partition().item()
        return PartitionEstimate(log_z=log_z, stderr=0.0, log_weights=None, ess=None, kind=BoundKind.EXACT, info={"estimator": "exact"})
