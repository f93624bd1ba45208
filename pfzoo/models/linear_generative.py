"""Linear generative model (sparse coding): ``x = Φz + σ_n ε`` with a Gaussian or Laplace prior on z (HAIS §3.1)."""

from __future__ import annotations

import math

import torch
from torch import nn

from pfzoo.models.latent import LatentGenerativeModel, latent_prior
from pfzoo.models.registry import register_model
from pfzoo.validation import all_finite, check_model_dtype, check_positive_int, check_tensors

_LOG_2PI = math.log(2 * math.pi)


@register_model("linear_generative")
class LinearGenerative(LatentGenerativeModel):
    """``p(x | z) = N(x; Φz, σ_n² I)`` (HAIS eq. 30) with ``p(z)`` Gaussian ``N(0, I)`` (eq. 31) or Laplace ``½e^{-|z_l|}`` (eq. 32).

    ``-log p(x | z) = |x - Φz|² / (2σ_n²) + (M/2) log(2π σ_n²)``. With the Gaussian prior the marginal is
    exact, ``x ~ N(0, ΦΦᵀ + σ_n² I)`` (:meth:`log_prob`, :meth:`free_energy`); with the Laplace prior it is
    intractable and estimated by annealing over z (HAIS eqs. 27–29). With Φ = 0 either prior gives
    ``p(x) = N(0, σ_n² I)`` exactly (HAIS eq. 41).

    Parameters: ``basis [M, L]`` (Φ). The noise σ_n is a fixed setting, not learned.

    Args:
        num_visible: M.
        num_latent: L (default M: a complete basis).
        prior: "gaussian" or "laplace".
        noise_std: σ_n > 0 (the paper's 0.1).
        init_std: standard deviation of the Gaussian initial basis entries.
        max_basis_norm: the usual sparse-coding constraint ``|φ_k| ≤ max_basis_norm`` on each basis column,
            enforced by :meth:`project_parameters` (the Trainer calls it after every step); ``None``: none.
        generator: random generator for the initial basis.
    """

    def __init__(
        self,
        num_visible: int,
        num_latent: int | None = None,
        *,
        prior: str = "laplace",
        noise_std: float = 0.1,
        init_std: float = 0.1,
        max_basis_norm: float | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.num_visible = check_positive_int(num_visible, "num_visible")
        self.num_latent = check_positive_int(num_visible if num_latent is None else num_latent, "num_latent")
        self.prior = latent_prior(prior)
        if prior == "exponential":
            raise ValueError("prior must be 'gaussian' or 'laplace' for a linear generative model")
        if not (isinstance(noise_std, (int, float)) and math.isfinite(noise_std) and noise_std > 0):
            raise ValueError(f"noise_std must be a positive number, got {noise_std!r}")
        if init_std < 0:
            raise ValueError(f"init_std must be non-negative, got {init_std}")
        self.noise_std = float(noise_std)
        if max_basis_norm is not None and not max_basis_norm > 0:
            raise ValueError(f"max_basis_norm must be positive or None, got {max_basis_norm!r}")
        self.max_basis_norm = None if max_basis_norm is None else float(max_basis_norm)
        self.basis = nn.Parameter(torch.randn(self.num_visible, self.num_latent, generator=generator) * init_std)

    def extra_repr(self) -> str:
        """The sizes, shown by ``repr``: ``LinearGenerative(...)``."""
        return f"num_visible={self.num_visible}, num_latent={self.num_latent}, prior={self.prior.name!r}"

    @classmethod
    def from_tensors(
        cls, basis: torch.Tensor, *, prior: str = "laplace", noise_std: float = 0.1, max_basis_norm: float | None = None
    ) -> "LinearGenerative":
        """A model with a copy of ``basis [M, L]`` (Φ)."""
        check_tensors(basis=basis)
        if not isinstance(basis, torch.Tensor) or basis.dim() != 2:
            raise ValueError(f"basis must be a [M, L] tensor, got {getattr(basis, 'shape', type(basis).__name__)}")
        if not all_finite(basis):
            raise ValueError("basis contains NaN or infinite values")
        model = cls(basis.shape[0], basis.shape[1], prior=prior, noise_std=noise_std, init_std=0.0, max_basis_norm=max_basis_norm)
        model.to(device=basis.device, dtype=check_model_dtype(basis.dtype, "basis"))
        with torch.no_grad():
            model.basis.copy_(basis)
        return model

    def config(self) -> dict:
        return {
            "num_visible": self.num_visible,
            "num_latent": self.num_latent,
            "prior": self.prior.name,
            "noise_std": self.noise_std,
            "max_basis_norm": self.max_basis_norm,
        }

    @torch.no_grad()
    def project_parameters(self) -> None:
        """Shrink every basis column longer than ``max_basis_norm`` back to that length (no-op without a bound)."""
        if self.max_basis_norm is not None:
            norms = self.basis.norm(dim=0, keepdim=True)
            self.basis.mul_(torch.clamp(self.max_basis_norm / norms.clamp_min(torch.finfo(norms.dtype).tiny), max=1.0))

    # ---- the joint ------------------------------------------------------------------------

    def likelihood_energy_and_grad(self, x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``-log p(x | z)`` ``[N]`` and ``∇_z = -Φᵀ(x - Φz) / σ_n²`` ``[N, L]`` for aligned rows. Not validated."""
        variance = self.noise_std**2
        residual = x - z @ self.basis.T
        energy = residual.square().sum(-1) / (2 * variance) + 0.5 * self.num_visible * (_LOG_2PI + math.log(variance))
        return energy, -(residual @ self.basis) / variance

    @torch.no_grad()
    def likelihood_stiffness(self) -> float:
        """``λ_max(ΦᵀΦ) / σ_n²``: the largest curvature of ``-log p(x | z)`` in z, the same for every x. Annealing from
        the prior to the posterior, ``E_β(z)`` is at most that much (times β) stiffer than the prior: pass it as
        ``HAIS(..., stiffness=...)`` for per-example HAIS."""
        return (torch.linalg.matrix_norm(self.basis.double(), ord=2).square() / self.noise_std**2).item()

    def sample_visible(self, z: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """``x = Φz + σ_n ε``, ``ε ~ N(0, I)``, one row per row of ``z [N, L]`` → ``[N, M]``. Not validated."""
        noise = torch.randn(z.shape[0], self.num_visible, generator=generator, dtype=self.dtype, device=self.device)
        return z @ self.basis.T + self.noise_std * noise

    # ---- exact marginal (Gaussian prior) ----------------------------------------------------

    @property
    def free_energy_cost(self) -> int | None:
        return 0 if self.prior.name == "gaussian" else None

    def marginal_covariance(self) -> torch.Tensor:
        """``ΦΦᵀ + σ_n² I`` ``[M, M]``: the covariance of x under the Gaussian prior."""
        return self.basis @ self.basis.T + self.noise_std**2 * torch.eye(self.num_visible, dtype=self.dtype, device=self.device)

    def free_energy(self, x: torch.Tensor) -> torch.Tensor:
        """``-log p(x)`` ``[B]`` in closed form for the Gaussian prior; raises for the Laplace prior (no closed form)."""
        return -self.log_prob(x).to(x.dtype)

    def log_prob(self, x: torch.Tensor, *, log_z=None) -> torch.Tensor:
        """Exact ``log p(x) = log N(x; 0, ΦΦᵀ + σ_n² I)`` (float64 ``[B]``) for the Gaussian prior; the model is
        normalised, so ``log_z`` is ignored. Raises for the Laplace prior."""
        self.check_visible(x, "x")
        if self.prior.name != "gaussian":
            raise NotImplementedError(
                "p(x) under a Laplace prior has no closed form; estimate it with HAIS(...).log_likelihood(model, data)"
            )
        cholesky = torch.linalg.cholesky(self.marginal_covariance().double())
        whitened = torch.linalg.solve_triangular(cholesky, x.double().T, upper=False)
        log_det = 2 * torch.log(torch.diagonal(cholesky)).sum()
        return -(0.5 * whitened.square().sum(0) + 0.5 * (self.num_visible * _LOG_2PI + log_det))
