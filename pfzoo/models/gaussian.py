"""Multivariate Gaussian: the exact reference model, and the base distribution continuous models anneal from."""

from __future__ import annotations

import math

import torch
from torch import nn

from pfzoo.models.capabilities import Capability
from pfzoo.models.continuous import ContinuousModel
from pfzoo.models.registry import register_model
from pfzoo.sampling import normal
from pfzoo.validation import all_finite, allocates, check_generator, check_matrix, check_model_dtype, check_positive_int, check_tensors

_LOG_2PI = math.log(2 * math.pi)


@register_model("gaussian")
class Gaussian(ContinuousModel):
    """``p(x) = N(x; μ, Λ⁻¹)``, ``x ∈ ℝ^M``, with energy ``E(x) = ½ (x − μ)ᵀ Λ (x − μ)`` and
    ``log Z = (M/2) log 2π − ½ log det Λ``.

    Parameters: ``mean [M]`` (μ) and ``precision_log_cholesky [M, M]``, the log-Cholesky
    parametrisation of the precision (Pinheiro & Bates 1996): with ``Λ = L Lᵀ`` and ``L`` lower
    triangular, its strictly lower triangle is that of ``L`` and its diagonal is ``log diag L``; its
    upper triangle is not used. Every real value gives a positive-definite Λ, so gradient steps never
    leave the family, and ``log det Λ = 2 Σ_i precision_log_cholesky_ii``.

    Args:
        num_visible: M.
        generator: accepted so every model config instantiates alike; the initial ``N(0, I)``
            (μ = 0, Λ = I) is deterministic.
    """

    path_family = "gaussian"
    family_capabilities = ContinuousModel.family_capabilities | {Capability.GAUSSIAN_MOMENTS, Capability.ANALYTIC_SCORE}
    samples_exactly = True  # sample() transforms independent normal draws

    def __init__(self, num_visible: int, *, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.num_visible = check_positive_int(num_visible, "num_visible")
        self.mean = nn.Parameter(torch.zeros(num_visible))
        self.precision_log_cholesky = nn.Parameter(torch.zeros(num_visible, num_visible))

    def extra_repr(self) -> str:
        """The sizes, shown by ``repr``: ``Gaussian(...)``."""
        return f"num_visible={self.num_visible}"

    @classmethod
    def from_tensors(cls, precision: torch.Tensor, mean: torch.Tensor | None = None) -> "Gaussian":
        """A Gaussian with precision ``Λ [M, M]`` (symmetric positive definite) and mean ``μ [M]`` (default 0).

        Λ must be symmetric to within ``√ε`` of its largest entry (ε the dtype's machine epsilon);
        its symmetric part is used.
        """
        check_tensors(precision=precision, **({} if mean is None else {"mean": mean}))
        if not isinstance(precision, torch.Tensor) or precision.dim() != 2 or precision.shape[0] != precision.shape[1]:
            shape = tuple(precision.shape) if isinstance(precision, torch.Tensor) else type(precision).__name__
            raise ValueError(f"precision must be a square matrix [M, M], got {shape}")
        if not precision.is_floating_point():
            raise ValueError(f"precision must be a floating-point tensor, got dtype {precision.dtype}")
        check_model_dtype(precision.dtype, "precision")
        num_visible = precision.shape[0]
        if mean is None:
            mean = torch.zeros(num_visible, device=precision.device, dtype=precision.dtype)
        if mean.shape != (num_visible,):
            raise ValueError(f"mean must have shape [{num_visible}], got {tuple(mean.shape)}")
        for name, tensor in (("precision", precision), ("mean", mean)):
            if not all_finite(tensor):
                raise ValueError(f"{name} contains NaN or infinite values")
        tolerance = math.sqrt(torch.finfo(precision.dtype).eps) * precision.abs().max().item()
        if (precision - precision.T).abs().max().item() > tolerance:
            raise ValueError("precision must be symmetric")
        precision64 = precision.double()
        cholesky, info = torch.linalg.cholesky_ex((precision64 + precision64.T) / 2)
        if info.item() != 0:
            raise ValueError("precision must be positive definite (its Cholesky factorisation failed)")
        return cls._from_cholesky(cholesky.to(precision.dtype), mean)

    @classmethod
    def fit(cls, data: torch.Tensor, *, regularization: float = 1e-6) -> "Gaussian":
        """The maximum-likelihood Gaussian of ``data [N, M]`` with ``regularization · I`` added to its covariance.

        ``μ = (1/N) Σ_n x_n``, ``Σ = (1/N) Σ_n (x_n − μ)(x_n − μ)ᵀ + regularization · I``, computed in
        float64 and stored in ``data``'s dtype and device.
        """
        check_matrix(data, "data")
        check_model_dtype(data.dtype, "data")
        if data.shape[0] == 0:
            raise ValueError("data must have at least one row to fit a Gaussian")
        if not regularization >= 0:
            raise ValueError(f"regularization must be non-negative, got {regularization}")
        data64 = data.double()
        mean = data64.mean(0)
        centered = data64 - mean
        covariance = centered.T @ centered / data.shape[0]
        covariance.diagonal().add_(regularization)
        covariance_cholesky, info = torch.linalg.cholesky_ex(covariance)
        if info.item() != 0:
            raise ValueError("the covariance of data is singular; fit with regularization > 0")
        precision = torch.cholesky_inverse(covariance_cholesky)
        cholesky = torch.linalg.cholesky((precision + precision.T) / 2)
        return cls._from_cholesky(cholesky.to(data.dtype), mean.to(data.dtype))

    @classmethod
    def _from_cholesky(cls, cholesky: torch.Tensor, mean: torch.Tensor) -> "Gaussian":
        """A Gaussian with ``Λ = L Lᵀ`` for a lower-triangular ``cholesky [M, M]`` with positive diagonal."""
        model = cls(cholesky.shape[0])
        model.to(device=cholesky.device, dtype=cholesky.dtype)
        with torch.no_grad():
            model.mean.copy_(mean)
            model.precision_log_cholesky.copy_(torch.tril(cholesky, -1) + torch.diag(cholesky.diagonal().log()))
        return model

    def config(self) -> dict:
        return {"num_visible": self.num_visible}

    @property
    def precision_cholesky(self) -> torch.Tensor:
        """Lower-triangular ``L [M, M]`` with positive diagonal and ``Λ = L Lᵀ``."""
        raw = self.precision_log_cholesky
        return torch.tril(raw, -1) + torch.diag(raw.diagonal().exp())

    @property
    def precision(self) -> torch.Tensor:
        """``Λ = L Lᵀ``, ``[M, M]``."""
        cholesky = self.precision_cholesky
        return cholesky @ cholesky.T

    @property
    def covariance(self) -> torch.Tensor:
        """``Λ⁻¹``, ``[M, M]``."""
        return torch.cholesky_inverse(self.precision_cholesky)

    # ---- energies -----------------------------------------------------------------------

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """``E(x) = ½ (x − μ)ᵀ Λ (x − μ) = ½ |(x − μ) L|²`` for ``x [B, M]`` → ``[B]``."""
        self.check_visible(x, "x")
        return 0.5 * ((x - self.mean) @ self.precision_cholesky).square().sum(-1)

    def energy_grad(self, x: torch.Tensor) -> torch.Tensor:
        """``∇E(x) = Λ (x − μ)`` for ``x [B, M]`` → ``[B, M]``. Unchecked hot-loop primitive."""
        return (x - self.mean) @ self.precision

    def energy_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(E(x) [B], ∇E(x) [B, M])`` from ``z = (x − μ) L``: ``E = ½ |z|²``, ``∇E = z Lᵀ``. Unchecked hot-loop primitive."""
        cholesky = self.precision_cholesky
        z = (x - self.mean) @ cholesky
        return 0.5 * z.square().sum(-1), z @ cholesky.T

    def score_and_laplacian(self, x: torch.Tensor, *, kink_bandwidth: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(∇_x log p̃(x) [B, M], Σ_i ∂² log p̃/∂x_i² [B])`` for ``x [B, M]``, what score matching needs (Hyvärinen 2005):
        ``∇ log p̃ = −Λ (x − μ)`` and the Laplacian ``−tr Λ`` (the same for every row). ``kink_bandwidth`` (the smoothing
        of a non-differentiable energy's kinks, see :class:`~pfzoo.models.ProductOfExperts`) is unused: the density is
        smooth. Unchecked, differentiable in the parameters."""
        precision = self.precision
        return -(x - self.mean) @ precision, (-precision.diagonal().sum()).expand(x.shape[0])

    # ---- partition function and sampling ------------------------------------------------

    @property
    def log_partition_cost(self) -> int:
        return 0

    def log_partition(self) -> torch.Tensor:
        """``log Z = (M/2) log 2π − ½ log det Λ = (M/2) log 2π − Σ_i log L_ii`` (float64 scalar, differentiable)."""
        self.check_computable()
        return 0.5 * self.num_visible * _LOG_2PI - self.precision_log_cholesky.double().diagonal().sum()

    def frame(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(μ [M], L⁻¹ [M, M])`` with ``Λ = L Lᵀ``, detached: ``x = μ + z L⁻¹`` is this Gaussian for ``z ~ N(0, I)``, the
        unit-scale coordinates an annealing kernel steps in."""
        cholesky = self.precision_cholesky.detach()
        eye = torch.eye(cholesky.shape[0], dtype=cholesky.dtype, device=cholesky.device)
        return self.mean.detach(), torch.linalg.solve_triangular(cholesky, eye, upper=False)

    @allocates("num_samples")
    @torch.no_grad()
    def sample(self, num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Exact samples ``x = μ + L⁻ᵀ ε``, ``ε ~ N(0, I)``, ``[num_samples, M]`` (covariance ``L⁻ᵀ L⁻¹ = Λ⁻¹``)."""
        self.check_computable()
        check_positive_int(num_samples, "num_samples")
        check_generator(generator, self.device)
        noise = normal((num_samples, self.num_visible), generator=generator, device=self.device, dtype=self.dtype)
        return self.mean + torch.linalg.solve_triangular(self.precision_cholesky, noise, upper=False, left=False)
