"""Score matching (Hyvärinen 2005; Deep Learning eqs. 18.22–18.25): fit ``log p̃ = −F`` over ``x ∈ ℝ^M`` by matching its
score ``s(x) = ∇_x log p̃(x)`` to the data's, which integration by parts turns into

    J(θ) = E_data[ Σ_i ( ½ (∂ log p̃(x)/∂x_i)² + ∂² log p̃(x)/∂x_i² ) ]

(plus a constant), free of ``Z`` since ``∇_x log Z = 0``. For a Gaussian, ``J`` is minimised exactly at the
maximum-likelihood precision (the inverse sample covariance); like maximum likelihood it is consistent for every
family whose log density is twice differentiable.

The score and Laplacian come from the model where it offers them (:attr:`~pfzoo.models.Capability.ANALYTIC_SCORE`,
``score_and_laplacian``: Gaussian, products of experts, ICA, Gaussian–Bernoulli RBM, mcRBM) and by autograd otherwise:
the exact Laplacian (M backward passes) up to ``exact_hessian_max_dim`` dimensions, Hutchinson's Rademacher estimate (``num_probes`` Hessian-vector
products) beyond. Laplace experts (ICA) have a kink whose delta the model's analytic Laplacian smooths by blurring x
with ``N(0, kink_bandwidth² I)`` (see :meth:`~pfzoo.models.ProductOfExperts.score_and_laplacian`); by autograd their Laplacian is zero
and ``J`` falls without bound as the filters shrink, so with ``analytic=False`` they are refused.
"""

from __future__ import annotations

import torch

from pfzoo.models.capabilities import Capability
from pfzoo.training.objective import Objective
from pfzoo.training.score_functions import autograd_score, exact_laplacian, hutchinson_laplacian, missing_real_free_energy, missing_smooth_free_energy
from pfzoo.validation import check_bool, check_positive_int, checking_values


class ScoreMatching(Objective):
    """Minimise ``(1/B) Σ_n [½ |s(x_n)|² + Σ_i ∂s_i(x_n)/∂x_i]`` (Hyvärinen 2005, eq. 18.25), ``s = −∇_x F``.

    Args:
        exact_hessian_max_dim: by autograd, the Laplacian is exact (M backward passes of the score) for ``M`` up to
            this, and Hutchinson's estimate above it.
        num_probes: Rademacher probes per example of Hutchinson's estimate (unbiased, so the loss is too).
        analytic: use the model's ``score_and_laplacian`` when it offers one (``False``: always autograd).
        kink_bandwidth: the blur of x (std, in its units) whose kernel stands for the delta of Laplace experts' kinks
            (analytic path only; see :meth:`~pfzoo.models.ProductOfExperts.score_and_laplacian`).
    """

    config_name = "score_matching"

    def __init__(self, exact_hessian_max_dim: int = 64, num_probes: int = 1, analytic: bool = True,
                 kink_bandwidth: float = 0.01) -> None:
        super().__init__()
        self.exact_hessian_max_dim = check_positive_int(exact_hessian_max_dim, "exact_hessian_max_dim")
        self.num_probes = check_positive_int(num_probes, "num_probes")
        self.analytic = check_bool(analytic, "analytic")
        if not kink_bandwidth > 0:
            raise ValueError(f"kink_bandwidth must be positive, got {kink_bandwidth}")
        self.kink_bandwidth = float(kink_bandwidth)

    def missing(self, model) -> str | None:
        """Real visible units with an exact free energy, twice differentiable unless the model's analytic
        ``score_and_laplacian`` is used (it smooths Laplace experts' kinks)."""
        if self._analytic_for(model):
            return missing_real_free_energy(model)
        return missing_smooth_free_energy(model)

    def caveats(self, model) -> tuple[str, ...]:
        """A model whose log density is not twice differentiable (Laplace experts' kinks) is fitted through the smoothed
        Laplacian: the objective then misses the delta at each kink up to the blur and is inconsistent."""
        if model.twice_differentiable:
            return ()
        return (f"score matching needs a twice-differentiable log density and {type(model).__name__}'s has kinks (Laplace "
                f"experts' |u| at 0); their curvature is smoothed with kink_bandwidth={self.kink_bandwidth:g}, so the fit is "
                f"biased and more data does not remove it: prefer trainer=ml, nce or mpf",)

    def _analytic_for(self, model) -> bool:
        return self.analytic and Capability.ANALYTIC_SCORE in model.capabilities

    def score_and_laplacian(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None
                            ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(s(x) [B, M], Σ_i ∂s_i/∂x_i [B])`` for ``batch [B, M]``: the model's analytic ones, or by autograd (exact up to
        ``exact_hessian_max_dim`` dimensions, Hutchinson's estimate with ``generator``'s probes beyond)."""
        if self._analytic_for(model):
            return model.score_and_laplacian(batch, kink_bandwidth=self.kink_bandwidth)
        with torch.enable_grad():
            x = batch.detach().requires_grad_(True)
            score = autograd_score(model, x)
            if x.shape[1] <= self.exact_hessian_max_dim:
                return score, exact_laplacian(score, x)
            return score, hutchinson_laplacian(score, x, self.num_probes, generator=generator)

    def example_losses(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Each row's ``½ |s(x_n)|² + Σ_i ∂s_i(x_n)/∂x_i`` for ``batch [B, M]`` → ``[B]``."""
        if checking_values():  # inside the Trainer's steps the model was checked by fit
            self.check(model)
            model.check_visible(batch, "batch")
        score, laplacian = self.score_and_laplacian(model, batch, generator=generator)
        return 0.5 * score.square().sum(1) + laplacian

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """The score matching loss ``J`` of ``batch [B, M]`` (scalar): the mean of :meth:`example_losses`."""
        return self.example_losses(model, batch, generator=generator).mean()
