"""Exact partition functions by enumeration or closed form."""

from __future__ import annotations

import torch

from pfzoo.estimators.base import BoundKind, PartitionEstimate, PartitionEstimator, ProgressCallback
from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability


class Exact(PartitionEstimator):
    """``log Z`` from the model's own exact :meth:`~pfzoo.models.EnergyModel.log_partition`.

    Applies to models with :attr:`~pfzoo.models.Capability.EXACT_LOG_Z` at their size (closed forms,
    and binary models within their ``max_enumeration_units``); log-likelihoods also need an exact free energy.
    """

    config_name = "exact"

    def missing_for_partition(self, model: EnergyModel) -> str | None:
        return None if Capability.EXACT_LOG_Z in model.capabilities else Capability.EXACT_LOG_Z.value

    def forward(
        self,
        model: EnergyModel,
        *,
        data: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> PartitionEstimate:
        self.check_partition(model)
        with torch.no_grad():
            log_z = model.log_partition().item()
        return PartitionEstimate(log_z=log_z, stderr=0.0, log_weights=None, ess=None, kind=BoundKind.EXACT, info={"estimator": "exact"})
