"""Exact maximum likelihood for models with a differentiable closed-form ``log Z`` (the HAIS paper's "oracle")."""

from __future__ import annotations

import torch

from pfzoo.models.capabilities import Capability
from pfzoo.training.objective import Objective


class ExactMaximumLikelihood(Objective):
    """Loss ``−mean_n log p(x_n) = mean_n E(x_n) + log Z`` (float64 ``log Z``), for complete POE / ICA / Gaussian models.

    Only for models whose :meth:`~pfzoo.models.EnergyModel.log_partition` is a closed form that
    autograd can differentiate; it raises for the rest. Deterministic, so it works with
    ``torch.optim.LBFGS`` on the full data set.
    """

    config_name = "ml"

    def missing(self, model) -> str | None:
        return None if Capability.CLOSED_FORM_LOG_Z in model.capabilities else Capability.CLOSED_FORM_LOG_Z.value

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        self.check_outside_fit(model)
        return model.energy(batch).mean() + model.log_partition().to(batch.dtype)
