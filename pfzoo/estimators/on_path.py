"""What every estimator that runs on a model's annealing path shares: its settings (base, path kind, kernel), the
capability check, and building the path (:mod:`pfzoo.paths.registry`)."""

from __future__ import annotations

from typing import Any

import torch

from pfzoo.estimators.base import PartitionEstimator
from pfzoo.kernels import Kernel
from pfzoo.models.base import EnergyModel
from pfzoo.paths import registry
from pfzoo.validation import check_finite_number, check_generator, check_positive_int

ANNEALING_NEED = "an annealing path (block-Gibbs conditionals, a differentiable energy over real vectors, or a binary energy)"


class PathPartitionEstimator(PartitionEstimator):
    """A partition estimator on the model's path from its family's tractable base (AIS, bridge and linked importance
    sampling).

    Args:
        base: "auto" (the family's best tractable base: data base rates for binary families, a Gaussian fitted to the
            data for continuous ones; the data-free base without data) or one of the family's base names.
        base_smoothing: pseudo-count for data-fitted binary bases.
        kernel: the transition for families whose path takes one; ``None`` = the family's default.
        path: the kind of path: "geometric" (every family) or "moment_averaged" (Gaussians, RBMs).
        posterior_samples: proposals per example for ``log f(v)`` in :meth:`log_likelihood` when the model's free
            energy is intractable (DBM: mean-field proposal; DBN: recognition model).
    """

    def __init__(self, *, base: str, base_smoothing: float, kernel: Kernel | None, path: str, posterior_samples: int) -> None:
        super().__init__()
        if not isinstance(path, str):
            raise ValueError(f"path must be a path kind such as 'geometric' or 'moment_averaged', got {type(path).__name__}")
        if not isinstance(base, str):
            raise ValueError(f"base must be 'auto' or a base name such as 'base_rate' or 'fitted', got {type(base).__name__}")
        self.path = path
        self.base = base
        self.base_smoothing = check_finite_number(base_smoothing, "base_smoothing", minimum=0.0)
        self.kernel = kernel
        self.posterior_samples = check_positive_int(posterior_samples, "posterior_samples")

    def missing_for_partition(self, model: EnergyModel) -> str | None:
        if not registry.is_annealable(model):
            return ANNEALING_NEED
        reason = registry.improper_reason(model)
        return None if reason is None else f"a model with finite Z ({reason})"

    def build_path(self, model: EnergyModel, data: torch.Tensor | None, generator: torch.Generator | None, **options) -> tuple[Any, str]:
        """Check ``model`` and ``generator``, then build the path → ``(path, base label for the estimate's info)``;
        ``data [N, V]`` feeds data-fitted bases, ``options`` the path's builder (e.g. an RBM path's ``marginalize``)."""
        self.check_partition(model)
        check_generator(generator, model.device)
        path, base = registry.build(model, kind=self.path, base=self.base, data=data, smoothing=self.base_smoothing, kernel=self.kernel,
                                    by=type(self).__name__, **options)
        return path, base if self.base == base else f"{base} ({self.base})"
