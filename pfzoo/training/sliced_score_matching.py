"""Sliced score matching (Song, Garg, Shi & Ermon 2019): score matching with the Laplacian ``tr ∇_x s`` replaced by
its projections on random directions ``v`` with ``E[v vᵀ] = I``:

    J(θ) = E_data E_v[ vᵀ ∇_x s(x) v + ½ (vᵀ s(x))² ]                      (SSM)
    J(θ) = E_data E_v[ vᵀ ∇_x s(x) v + ½ ‖s(x)‖² ]                         (SSM-VR, ``variance_reduced``)

with ``s = ∇_x log p̃ = −∇_x F``. Both have score matching's expectation (``E[vvᵀ] = I``), at the cost of one
Hessian-vector product per projection (by autograd, so any twice-differentiable free energy) instead of M. Models
with kinks (Laplace experts, ICA) are refused: autograd sees their curvature as zero (use score matching's analytic,
smoothed path or denoising score matching).
"""

from __future__ import annotations

import torch

from pfzoo.training.objective import Objective
from pfzoo.training.score_functions import PROJECTIONS, autograd_score, missing_smooth_free_energy, projected_jacobian, random_projections
from pfzoo.validation import check_bool, check_choice, check_positive_int, checking_values


class SlicedScoreMatching(Objective):
    """Minimise ``(1/(BK)) Σ_n Σ_k [v_nkᵀ ∇_x s(x_n) v_nk + ½ (v_nkᵀ s(x_n))²]`` (Song et al. 2019), ``s = −∇_x F``.

    Args:
        num_projections: K directions per example.
        projection: ``"rademacher"`` or ``"gaussian"`` directions.
        variance_reduced: ``½ ‖s‖²`` (its expectation over v, exact) instead of ``½ (vᵀs)²`` (SSM-VR).
    """

    config_name = "sliced_score_matching"
    missing = staticmethod(missing_smooth_free_energy)

    def __init__(self, num_projections: int = 1, projection: str = "rademacher", variance_reduced: bool = False) -> None:
        super().__init__()
        self.num_projections = check_positive_int(num_projections, "num_projections")
        check_choice(projection, "projection", PROJECTIONS)
        self.projection = projection
        self.variance_reduced = check_bool(variance_reduced, "variance_reduced")

    def example_losses(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Each row's mean over its K projections for ``batch [B, M]`` → ``[B]``, directions from ``generator``."""
        if checking_values():  # inside the Trainer's steps the model was checked by fit
            self.check(model)
            model.check_visible(batch, "batch")
        rows, width = batch.shape
        # the K copies of each row, projection-major ([K·B, M]): one score and one Hessian-vector product for all
        repeated = batch.detach().repeat(self.num_projections, 1)
        directions = random_projections((rows * self.num_projections, width), self.projection, generator=generator,
                                        device=batch.device, dtype=batch.dtype)
        with torch.enable_grad():
            x = repeated.requires_grad_(True)
            score = autograd_score(model, x)
            curvature = projected_jacobian(score, x, directions)
        if self.variance_reduced:
            square = 0.5 * score.square().sum(1)
        else:
            square = 0.5 * (score * directions).sum(1).square()
        return (curvature + square).reshape(self.num_projections, rows).mean(0)

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """The sliced score matching loss of ``batch [B, M]`` (scalar): the mean of :meth:`example_losses`."""
        return self.example_losses(model, batch, generator=generator).mean()
