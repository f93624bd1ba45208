"""Annealing paths between two Gaussians: geometric and moment averages (Grosse, Maddison & Salakhutdinov 2013), and
between two univariate Gaussians the optimal path, the Fisher–Rao geodesic (Gelman & Meng 1998).

Every intermediate distribution of either path is itself a Gaussian ``N(μ_β, Σ_β)``, so the paths
use *perfect transitions* (a fresh exact sample at each β, the idealisation the paper's analysis
assumes) and give every quantity of the analysis in closed form: natural parameters, moments and
the KL divergence between neighbouring distributions.

Both are exponential-family paths with sufficient statistics ``s(x) = (x, xxᵀ)`` and natural
parameters ``η = (h, −½Λ)``, ``Λ = Σ⁻¹``, ``h = Λμ``:

* geometric average (eq. 2): ``η_β = (1−β) η_0 + β η_1``, i.e. ``Λ_β = (1−β)Λ_0 + βΛ_1`` and
  ``h_β = (1−β)h_0 + βh_1``;
* moment average (eq. 7): ``E_β[s] = (1−β) E_0[s] + β E_1[s]``, i.e. ``μ_β = (1−β)μ_0 + βμ_1`` and
  ``Σ_β = (1−β)Σ_0 + βΣ_1 + β(1−β)ΔμΔμᵀ`` with ``Δμ = μ_1 − μ_0`` (§4.1).
"""

from __future__ import annotations

from abc import abstractmethod
from functools import cached_property

import torch

from pfzoo.kernels import EXACT_DRAWS, Kernel, PerfectTransition, check_kernel
from pfzoo.models.capabilities import Capability, require
from pfzoo.paths.base import AnnealingPath, tempered_block_rows
from pfzoo.paths.continuous import ContinuousGeometricPath, gaussian_base
from pfzoo.paths.registry import register_family, register_path
from pfzoo.sampling import normal


class GaussianParameters:
    """One Gaussian on a path, float64: ``mean [M]``, ``covariance [M, M]`` and what derives from them.

    ``checked=False`` is for covariances positive definite by construction (the path's intermediate
    distributions): it skips the factorisation's error check, which reads a flag back from a GPU.
    """

    def __init__(self, mean: torch.Tensor, covariance: torch.Tensor, *, checked: bool = True) -> None:
        self.mean = mean
        self.covariance = (covariance + covariance.T) / 2
        self.covariance_cholesky = cholesky_factor(self.covariance, checked=checked)
        self.precision = torch.cholesky_inverse(self.covariance_cholesky)
        self.precision = (self.precision + self.precision.T) / 2
        self.linear = self.precision @ mean  # h = Λμ
        self.log_det_covariance = 2 * self.covariance_cholesky.diagonal().log().sum()

    @property
    def second_moment(self) -> torch.Tensor:
        """``E[xxᵀ] = Σ + μμᵀ`` ``[M, M]``."""
        return self.covariance + torch.outer(self.mean, self.mean)


def cholesky_factor(matrix: torch.Tensor, *, checked: bool) -> torch.Tensor:
    """Lower Cholesky factor of ``matrix [..., M, M]``; unchecked, a matrix that is not positive definite gives a meaningless factor instead of an error."""
    if checked:
        return torch.linalg.cholesky(matrix)
    return torch.linalg.cholesky_ex(matrix).L


def gaussian_kl(p: GaussianParameters, q: GaussianParameters) -> torch.Tensor:
    """``KL(p ‖ q) = ½ [tr(Σ_q⁻¹ Σ_p) + (μ_q − μ_p)ᵀ Σ_q⁻¹ (μ_q − μ_p) − M + log det Σ_q − log det Σ_p]`` (float64 scalar)."""
    difference = q.mean - p.mean
    trace = (q.precision * p.covariance).sum()
    return 0.5 * (trace + difference @ q.precision @ difference - p.mean.numel() + q.log_det_covariance - p.log_det_covariance)


def symmetric_divergence(p: GaussianParameters, q: GaussianParameters) -> torch.Tensor:
    """``KL(p‖q) + KL(q‖p) = (η_q − η_p)·(s_q − s_p)`` for the exponential family ``s(x) = (x, xxᵀ)`` (float64 scalar)."""
    linear_term = (q.linear - p.linear) @ (q.mean - p.mean)
    quadratic_term = -0.5 * ((q.precision - p.precision) * (q.second_moment - p.second_moment)).sum()
    return linear_term + quadratic_term


class GaussianPath(AnnealingPath):
    """A path of Gaussians from ``base`` (β = 0) to ``target`` (β = 1), with perfect transitions.

    ``log f_β(x) = h_βᵀx − ½ xᵀΛ_βx + c(β)``, where ``c(β) = −(1−β) E_0(0) − β E_1(0)`` makes
    ``f_0 = exp(−E_0)`` and ``f_1 = exp(−E_1)`` exactly (constants in between cancel in the
    weights). Positions are ``x [N, M]``; the kernel (:class:`~pfzoo.kernels.PerfectTransition`) ignores them and
    draws ``x ~ N(μ_β, Σ_β)`` exactly (:class:`GaussianPathDraws`). Computation is in float64; states are in the target's
    dtype.

    Args:
        target, base: :class:`pfzoo.models.Gaussian` models of the same dimension.
    """

    def __init__(self, target, base, kernel: Kernel | None = None) -> None:
        require(target, Capability.GAUSSIAN_MOMENTS, by="a Gaussian path's target")
        require(base, Capability.GAUSSIAN_MOMENTS, by="a Gaussian path's base")
        if base.num_visible != target.num_visible:
            raise ValueError(f"base has {base.num_visible} dimensions, target {target.num_visible}")
        with torch.no_grad():
            self.base_gaussian = GaussianParameters(base.mean.double(), base.covariance.double())
            self.target_gaussian = GaussianParameters(target.mean.double(), target.covariance.double())
            zero = target.mean.new_zeros(1, target.num_visible)
            self.base_offset = -base.energy(zero.to(base.mean)).double().squeeze(0)
            self.target_offset = -target.energy(zero).double().squeeze(0)
            self._base_log_partition = base.log_partition().double()
        self.dtype = target.mean.dtype
        self._cache: dict[float, GaussianParameters] = {}
        self.target = GaussianPathDraws(self)
        self.kernel = PerfectTransition() if kernel is None else check_kernel(kernel, self.target.offers, "a Gaussian path")

    @abstractmethod
    def mean_covariance(self, betas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The intermediate Gaussians at ``betas [B]`` (float64): means ``[B, M]`` and covariances ``[B, M, M]``."""

    def parameters(self, beta: float) -> GaussianParameters:
        """The intermediate Gaussian ``N(μ_β, Σ_β)`` at β ∈ [0, 1] (the last few are cached)."""
        beta = float(beta)
        if not 0.0 <= beta <= 1.0:
            raise ValueError(f"beta must lie in [0, 1], got {beta}")
        if beta not in self._cache:
            if len(self._cache) >= 4:
                self._cache.pop(next(iter(self._cache)))
            if beta in (0.0, 1.0):
                self._cache[beta] = self.base_gaussian if beta == 0.0 else self.target_gaussian
            else:
                # torch.full fills on the device; torch.tensor([beta], device=...) would copy from the host and stall a GPU's queue
                mean, covariance = self.mean_covariance(torch.full((1,), beta, dtype=torch.float64, device=self.base_gaussian.mean.device))
                self._cache[beta] = GaussianParameters(mean[0], covariance[0], checked=False)
        return self._cache[beta]

    def kl_between(self, beta_from: float, beta_to: float) -> torch.Tensor:
        """Exact ``KL(p_{beta_from} ‖ p_{beta_to})`` (float64 scalar)."""
        return gaussian_kl(self.parameters(beta_from), self.parameters(beta_to))

    def kl_sum(self, betas: torch.Tensor) -> torch.Tensor:
        """``Σ_k KL(p_{β_{k−1}} ‖ p_{β_k})`` along a schedule ``betas [K+1]`` (float64 scalar), in one batch.

        Under perfect transitions ``E[log w] = log Z_1 − log Z_0 − Σ_k KL(p_{k−1} ‖ p_k)`` exactly (each
        increment is evaluated at an exact sample of p_{k−1}), so this is the bias of ``E[log Ẑ]``.
        """
        betas = torch.as_tensor(betas, dtype=torch.float64, device=self.base_gaussian.mean.device)
        mean, covariance = self.mean_covariance(betas)
        mean[0], covariance[0] = self.base_gaussian.mean, self.base_gaussian.covariance  # the endpoints exactly
        mean[-1], covariance[-1] = self.target_gaussian.mean, self.target_gaussian.covariance
        cholesky = torch.linalg.cholesky((covariance + covariance.transpose(-1, -2)) / 2)
        log_det = 2 * cholesky.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        precision = torch.cholesky_inverse(cholesky)
        difference = mean[1:] - mean[:-1]
        trace = (precision[1:] * covariance[:-1]).sum((-1, -2))
        mahalanobis = torch.einsum("bi,bij,bj->b", difference, precision[1:], difference)
        return 0.5 * (trace + mahalanobis - mean.shape[-1] + log_det[1:] - log_det[:-1]).sum()

    def symmetric_divergences(self, betas: torch.Tensor) -> torch.Tensor:
        """Exact ``J_j = KL(p_j‖p_{j+1}) + KL(p_{j+1}‖p_j)`` between neighbours of ``betas [J+1]`` → float64 ``[J]``."""
        values = [self.parameters(b) for b in betas.tolist()]
        return torch.stack([symmetric_divergence(p, q) for p, q in zip(values[:-1], values[1:])])

    def draw_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        return self.draw(self.base_gaussian, num_chains, generator)

    def base_log_partition(self) -> torch.Tensor:
        return self._base_log_partition

    def log_f(self, x: torch.Tensor, beta: float) -> torch.Tensor:
        """``log f_β(x)`` for ``x [N, M]`` → float64 ``[N]``."""
        p = self.parameters(beta)
        x = x.double()
        offset = (1 - beta) * self.base_offset + beta * self.target_offset
        return x @ p.linear - 0.5 * ((x @ p.precision) * x).sum(-1) + offset

    def log_weight_increment(self, stats: torch.Tensor, beta_from: float, beta_to: float) -> torch.Tensor:
        return self.log_f(stats, beta_to) - self.log_f(stats, beta_from)

    def draw(self, p: GaussianParameters, num: int, generator: torch.Generator | None) -> torch.Tensor:
        """``num`` exact samples ``[num, M]`` of ``N(p.mean, p.covariance)`` in the target's dtype."""
        noise = normal((num, p.mean.numel()), generator=generator, dtype=torch.float64, device=p.mean.device)
        return (p.mean + noise @ p.covariance_cholesky.T).to(self.dtype)


class GaussianPathDraws:
    """A :class:`GaussianPath` at β as a target of perfect transitions (:class:`~pfzoo.kernels.ExactDraws`); a state's
    statistics are its positions."""

    offers = frozenset({EXACT_DRAWS})

    def __init__(self, path: GaussianPath) -> None:
        self.path = path

    def statistics(self, x: torch.Tensor, *, beta: float = 0.0) -> torch.Tensor:
        return x

    def draw(self, num_samples: int, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        return self.path.draw(self.path.parameters(beta), num_samples, generator)


class GaussianGeometricPath(GaussianPath):
    """Geometric average of two Gaussians: ``Λ_β = (1−β)Λ_0 + βΛ_1``, ``h_β = (1−β)h_0 + βh_1`` (Grosse et al. 2013, eq. 2)."""

    linear_in_beta = True
    """``h_β``, ``Λ_β`` and the offset ``c(β)`` are linear in β, so ``log f_β − log f_0 = β (log f_1 − log f_0)``: the
    one-pass tempered density is β times the increment between the exact endpoints."""

    def mean_covariance(self, betas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        betas = betas.to(torch.float64)[:, None]
        precision = (1 - betas[:, :, None]) * self.base_gaussian.precision + betas[:, :, None] * self.target_gaussian.precision
        linear = (1 - betas) * self.base_gaussian.linear + betas * self.target_gaussian.linear
        # a convex combination of two precisions is positive definite, so the factorisation needs no check
        covariance = torch.cholesky_inverse(cholesky_factor((precision + precision.transpose(-1, -2)) / 2, checked=False))
        return (covariance @ linear[:, :, None]).squeeze(-1), covariance


class GaussianMomentAveragedPath(GaussianPath):
    """Moment average of two Gaussians: ``μ_β = (1−β)μ_0 + βμ_1``,
    ``Σ_β = (1−β)Σ_0 + βΣ_1 + β(1−β)ΔμΔμᵀ`` (Grosse et al. 2013, §4.1): the Gaussian whose
    ``E[x]`` and ``E[xxᵀ]`` are the β-averages of the endpoints'."""

    def mean_covariance(self, betas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        betas = betas.to(torch.float64)[:, None]
        base, target = self.base_gaussian, self.target_gaussian
        difference = target.mean - base.mean
        mean = (1 - betas) * base.mean + betas * target.mean
        weights = betas[:, :, None]
        covariance = (1 - weights) * base.covariance + weights * target.covariance + weights * (1 - weights) * torch.outer(difference, difference)
        return mean, covariance

    def tempered_log_density(self, stats: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
        """``log f_β(x) − log f_0(x)`` of ``stats = x [N, M]`` at a β per row and column ``beta [N, K]``, float64 ``[N, K]``,
        without a factorisation per β.

        ``Σ_β = S_β + γ ΔμΔμᵀ`` with ``S_β = (1−β)Σ_0 + βΣ_1`` and ``γ = β(1−β)``. The pencil ``(Σ_0, Σ_1)`` is diagonal in
        one basis: with ``Σ_0 = LLᵀ`` and ``L⁻¹Σ_1L⁻ᵀ = U diag(λ) Uᵀ``, ``T = UᵀL⁻¹`` gives ``TΣ_0Tᵀ = I``, ``TΣ_1Tᵀ = diag(λ)``,
        so ``aᵀS_β⁻¹b = Σ_i (Ta)_i (Tb)_i / g_i`` with ``g = (1−β) + βλ``, and Sherman–Morrison adds ``ΔμΔμᵀ``. With ``y = Tx``,
        ``e = TΔμ``, ``m = Tμ_0`` and ``w = 1/g``: ``p = Σ y e w``, ``q = Σ e² w``, ``r = Σ y (m + βe) w``, ``s = Σ e (m + βe) w``,
        ``t = Σ y² w``, and

            log f_β(x) = xᵀΛ_βμ_β − ½ xᵀΛ_βx + c(β) = r − ½t − γ p (s − ½p) / (1 + γq) + (1−β) c_0 + β c_1,

        ``N K M`` work after one ``[N, M] @ [M, M]`` product for ``y``, in blocks of rows of at most
        :data:`~pfzoo.paths.base.TEMPERED_BLOCK_ELEMENTS` elements, where each of K levels' increments takes an ``[M, M]``
        factorisation and ``N M²`` work. At β = 0 it is ``y·m − ½ y·y + c_0``, ``log f_0``."""
        basis, eigenvalues, shift, start = self._pencil
        y = stats.double() @ basis.T  # [N, M]
        rows = tempered_block_rows(beta.shape[1], eigenvalues.numel())
        parts = []
        for block, block_y in zip(beta.split(rows), y.split(rows)):
            b = block[:, :, None]
            w = ((1 - b) + b * eigenvalues).reciprocal_()  # [n, K, M]
            yw = block_y[:, None, :] * w
            p, t = yw @ shift, (yw * block_y[:, None, :]).sum(-1)
            r = yw @ start + block * p
            q = w @ shift.square()
            s = w @ (shift * start) + block * q
            gamma = block * (1 - block)
            parts.append(r - 0.5 * t - gamma * p * (s - 0.5 * p) / (1 + gamma * q))
        at_zero = y @ start - 0.5 * y.square().sum(-1)
        return torch.cat(parts) - at_zero[:, None] + beta * (self.target_offset - self.base_offset)

    @cached_property
    def _pencil(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(T [M, M], λ [M], e = TΔμ [M], m = Tμ_0 [M])`` of :meth:`tempered_log_density`, float64, made on first use."""
        base, target = self.base_gaussian, self.target_gaussian
        lower = base.covariance_cholesky
        inverse = torch.linalg.solve_triangular(lower, torch.eye(lower.shape[0], dtype=lower.dtype, device=lower.device), upper=False)
        whitened = inverse @ target.covariance @ inverse.T
        eigenvalues, vectors = torch.linalg.eigh((whitened + whitened.T) / 2)
        basis = vectors.T @ inverse
        return basis, eigenvalues, basis @ (target.mean - base.mean), basis @ base.mean


class GaussianGeodesicPath(GaussianPath):
    """The optimal path between two univariate Gaussians: the Fisher–Rao geodesic, travelled at constant speed.

    With perfect transitions the bias of AIS's ``E[log w]`` is ``Σ_k KL(p_{k−1} ‖ p_k) ≈ F / (2K)``, where
    ``F = ∫ γ̇ᵀ G(γ) γ̇ dβ`` is the path's energy under the Fisher metric G (Grosse et al. 2013, §3; Gelman & Meng 1998);
    among all paths of distributions, the minimiser is the geodesic at constant speed, with ``F = ℓ²``, ℓ its length.
    For N(μ, σ²) the metric ``ds² = (dμ² + 2 dσ²) / σ²`` is the hyperbolic half-plane's in ``(u, σ) = (μ/√2, σ)``, scaled
    by 2, whose geodesics are half-circles centred on ``σ = 0`` (a vertical line when ``μ_0 = μ_1``). Along the circle
    ``(u, σ) = (c + R cos θ, R sin θ)`` the hyperbolic arc length is ``log tan(θ/2)``, so constant speed means
    ``log tan(θ_β / 2)`` linear in β; on a vertical line, ``log σ_β`` linear in β. ``ℓ = √2 · arccosh(1 + ((μ_1 − μ_0)²/2
    + (σ_1 − σ_0)²) / (2 σ_0 σ_1))``, :meth:`length`.

    Only one dimension: refused otherwise (the geodesics of multivariate Gaussians have no closed form in general).
    """

    @torch.no_grad()
    def __init__(self, target, base, kernel: Kernel | None = None) -> None:
        super().__init__(target, base, kernel)
        if self.target_gaussian.mean.numel() != 1:
            raise ValueError(f"GaussianGeodesicPath needs univariate Gaussians (closed-form geodesics), got dimension {self.target_gaussian.mean.numel()}")
        (mu0, sigma0), (mu1, sigma1) = ((g.mean[0], g.covariance[0, 0].sqrt()) for g in (self.base_gaussian, self.target_gaussian))
        self._sigmas = (sigma0, sigma1)
        self._u = (mu0 / 2**0.5, mu1 / 2**0.5)
        if torch.isclose(self._u[0], self._u[1], rtol=0.0, atol=1e-12):
            self._circle = None
        else:  # the centre c on the σ = 0 axis is equidistant from both endpoints
            c = (self._u[1] ** 2 + sigma1**2 - self._u[0] ** 2 - sigma0**2) / (2 * (self._u[1] - self._u[0]))
            radius = torch.sqrt((self._u[0] - c) ** 2 + sigma0**2)
            angles = [torch.atan2(sigma, u - c) for u, sigma in ((self._u[0], sigma0), (self._u[1], sigma1))]
            self._circle = (c, radius, [torch.log(torch.tan(angle / 2)) for angle in angles])

    def length(self) -> torch.Tensor:
        """The Fisher–Rao distance ℓ between base and target (float64 scalar)."""
        (mu0, mu1), (sigma0, sigma1) = (2**0.5 * self._u[0], 2**0.5 * self._u[1]), self._sigmas
        return 2**0.5 * torch.arccosh(1 + ((mu1 - mu0) ** 2 / 2 + (sigma1 - sigma0) ** 2) / (2 * sigma0 * sigma1))

    def tempered_log_density(self, stats: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
        """``log f_β(x) − log f_0(x) = (μ_β x − ½x²) / σ_β² − (μ_0 x − ½x²) / σ_0² + β (c_1 − c_0)`` of ``stats = x [N, 1]``
        at a β per row and column ``beta [N, K]``, float64 ``[N, K]``: the geodesic's ``μ_β`` and ``σ_β`` are elementwise
        functions of β (:meth:`mean_covariance`), so every entry is a few elementwise operations."""
        mean, covariance = self.mean_covariance(beta.reshape(-1))
        mean, variance = mean.view(beta.shape), covariance.view(beta.shape)
        x = stats.double()  # [N, 1]
        base = self.base_gaussian
        at_zero = x * (base.linear - 0.5 * base.precision[0] * x)  # [N, 1]
        return x * (mean - 0.5 * x) / variance - at_zero + beta * (self.target_offset - self.base_offset)

    def mean_covariance(self, betas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        betas = betas.to(torch.float64)
        if self._circle is None:
            u = torch.zeros_like(betas) + self._u[0]
            sigma = torch.exp((1 - betas) * self._sigmas[0].log() + betas * self._sigmas[1].log())
        else:
            c, radius, (start, end) = self._circle
            angle = 2 * torch.atan(torch.exp((1 - betas) * start + betas * end))
            u, sigma = c + radius * torch.cos(angle), radius * torch.sin(angle)
        return (2**0.5 * u)[:, None], (sigma**2)[:, None, None]


register_family("gaussian", bases=("fitted", "isotropic"), make_base=gaussian_base, free_base="isotropic")


@register_path("gaussian", "geometric")
def gaussian_geometric_path(model, base, kernel) -> GaussianPath | ContinuousGeometricPath:
    """Perfect transitions (exact draws of each intermediate Gaussian); with a position-space ``kernel`` (e.g. HMC) the
    generic continuous path instead, which is how kernels are checked against a closed form."""
    if kernel is not None and not (isinstance(kernel, Kernel) and kernel.needs == EXACT_DRAWS):
        return ContinuousGeometricPath(target=model, base=base, kernel=kernel)
    return GaussianGeometricPath(target=model, base=base, kernel=kernel)


@register_path("gaussian", "moment_averaged")
def gaussian_moment_averaged_path(model, base, kernel) -> GaussianMomentAveragedPath:
    return GaussianMomentAveragedPath(target=model, base=base, kernel=kernel)
