"""Geometric-average path for models over real vectors, with any position-space kernel (HMC, Metropolis), and their
bases: Gaussians and a heavy-tailed product of Student-t experts along the data's principal axes."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from pfzoo.kernels import ENERGY_AND_GRADIENT, REAL_ENERGY_VALUES, Evaluation, HMCKernel, Kernel, check_kernel, reflection_bounds
from pfzoo.models.gaussian import Gaussian
from pfzoo.models.poe import student_t_responses
from pfzoo.paths.base import AnnealingPath
from pfzoo.paths.registry import register_family, register_path
from pfzoo.validation import check_matrix

DEFAULT_STEP_SIZE = 0.2
"""The leapfrog step of the default HMC transition (HAIS's ε)."""

HEAVY_TAIL_KURTOSIS = 1.0
"""base="auto" anneals a model that cannot draw its own samples, and says nothing of its tails, from a Student-t base when
some principal component of the data has excess kurtosis above this (a Gaussian has 0, a Laplace 3, a Student t with ν ≤ 4 degrees of freedom infinitely much)."""

_FIT_ROWS = 2048
"""At most this many rows of the data enter the shape fit (the first ones; the fit is deterministic)."""

_FIT_ITERATIONS = 30
"""Iterations of Tyler's fixed point, and of the per-axis (σ, λ) fit, in :meth:`StudentTBase.fit`."""

_FIT_ICA_STEPS = 300
"""At most this many FastICA iterations in :meth:`StudentTBase.fit` (they converge in tens)."""

_MAX_SHAPE = 1e3

PROBE_RADIUS = 1e3
"""Base standard deviations from the base's centre at which :func:`far_density_warnings` probes the target."""

PROBE_DIRECTIONS = 32
"""Random directions :func:`far_density_warnings` probes along (from a private generator: the caller's stream is
untouched)."""
"""Largest Student-t shape a fit returns (λ = 1000 is Gaussian to within 0.1 % in its core)."""


class ContinuousPathStatistics(NamedTuple):
    """Base and target energies ``[N]`` and gradients ``[N, D]`` (with respect to the kernel's coordinates) at the chains' positions."""

    base_energy: torch.Tensor
    target_energy: torch.Tensor
    base_grad: torch.Tensor
    target_grad: torch.Tensor


class GeometricEnergyTarget:
    """``E_β = (1−β) E_0 + β E_1`` as a :class:`~pfzoo.kernels.PositionTarget`: statistics are both energies and gradients.

    With a frame ``(location [M], mixing [M, M])`` the kernel moves ``z`` and the models see ``x = location + z · mixing``;
    gradients are ``∇_z E = ∇_x E · mixingᵀ``. The map is linear, so its Jacobian is constant and cancels in every AIS
    increment (evaluated at one point for two β); what changes is the geometry the kernel steps in.
    """

    offers = frozenset({ENERGY_AND_GRADIENT, REAL_ENERGY_VALUES})

    def __init__(self, target, base, location: torch.Tensor | None = None, mixing: torch.Tensor | None = None) -> None:
        self.target = target
        self.base = base
        self.location = location
        self.mixing = mixing

    def position(self, z: torch.Tensor) -> torch.Tensor:
        """``x = location + z · mixing`` ``[N, M]`` (``z`` itself without a frame)."""
        return z if self.mixing is None else self.location + z @ self.mixing

    def coordinates(self, x: torch.Tensor) -> torch.Tensor:
        """The kernel's coordinates ``z [N, M]`` of positions ``x [N, M]``."""
        if self.mixing is None:
            return x
        return torch.linalg.solve(self.mixing.T, (x - self.location).T).T

    def statistics(self, z: torch.Tensor) -> ContinuousPathStatistics:
        x = self.position(z)
        base_energy, base_grad = self.base.energy_and_grad(x)
        target_energy, target_grad = self.target.energy_and_grad(x)
        if self.mixing is not None:
            base_grad, target_grad = base_grad @ self.mixing.T, target_grad @ self.mixing.T
        return ContinuousPathStatistics(base_energy, target_energy, base_grad, target_grad)

    def evaluation(self, stats: ContinuousPathStatistics, beta: float) -> Evaluation:
        # (1 − β) E_0 + β E_1 written out rather than torch.lerp: lerp's weight is a constant of the op, so under
        # torch.compile every β would be a graph of its own; here β stays a symbolic input
        energy = stats.base_energy + beta * (stats.target_energy - stats.base_energy)
        grad = stats.base_grad + beta * (stats.target_grad - stats.base_grad)
        return Evaluation(energy, grad, stats)


class StudentTBase:
    """Independent Student-t experts along linear axes: ``x = μ + s A``, ``p(s) = Π_i (1 + s_i²)^{−λ_i} / c(λ_i)``,
    ``c(λ) = √π Γ(λ − ½) / Γ(λ)`` (the complete product of experts' one-dimensional integral, λ_i > ½).

    A heavy-tailed base (:attr:`heavy_tailed`) for annealing: where the target's tails are polynomial (Student-t experts, Cauchy-like
    data), a Gaussian base puts too little mass out there, the chains cannot travel far enough within the
    schedule, and ``log Ẑ`` comes out low by more than its stderr. Energy ``E(x) = Σ_i λ_i log(1 + s_i²)`` with
    ``s = (x − μ) A⁻¹``; ``log Z = Σ_i log c(λ_i) + log|det A|``; exact samples by :func:`student_t_responses`.

    Args:
        location: μ ``[M]``.
        mixing: A ``[M, M]``, invertible (rows: the axes, scaled).
        shape: λ ``[M]``, every entry > ½.
    """

    heavy_tailed = True

    def __init__(self, location: torch.Tensor, mixing: torch.Tensor, shape: torch.Tensor) -> None:
        width = location.shape[0]
        if mixing.shape != (width, width) or shape.shape != (width,):
            raise ValueError(f"mixing must be [{width}, {width}] and shape [{width}], got {tuple(mixing.shape)} and {tuple(shape.shape)}")
        if not bool((shape > 0.5).all()):
            raise ValueError(f"shape must exceed 1/2 everywhere (finite Z), got min {shape.min().item():.4g}")
        self.num_visible = width
        self.location = location
        self.mixing = mixing
        self.unmixing = torch.linalg.inv(mixing.double()).to(mixing.dtype)
        self.shape = shape.to(mixing.dtype)

    @classmethod
    def fit(cls, data: torch.Tensor) -> "StudentTBase":
        """A base fitted to ``data [N, M]`` (float64 inside, stored in data's dtype; the first :data:`_FIT_ROWS` rows),
        along axes found by independent component analysis that needs no finite moment of the data:

        1. μ = the coordinate-wise median; whiten with Tyler's scatter Σ (Tyler 1987: the fixed point of
           ``Σ ← (M/n) Σ_n x_n x_nᵀ / (x_nᵀ Σ⁻¹ x_n)``), ``z = (x − μ) Σ^{−½}``. Σ is affine equivariant, so for
           ``x = s A`` with independent symmetric ``s`` it is ``Aᵀ D A`` (D diagonal) and ``z`` is a rotation of
           scaled independent experts.
        2. the rotation R maximising the fourth moments ``Σ_i E[(r_iᵀu)⁴]`` of the *spatial signs* ``u = z/|z|``
           (symmetric FastICA's fixed point and orthogonalisation, Hyvärinen 1999): bounded, so every moment exists,
           and for heavy-tailed experts the far-out points, one expert dominating each, point along the axes.
        3. per axis y_i = (z Rᵀ)_i, the maximum-likelihood ``(σ_i, λ_i)`` of ``p(y) ∝ (1 + y²/σ²)^{−λ}``, alternating
           ``σ² ← mean(2λ y² / (1 + y²/σ²))`` and :func:`_student_t_shape`.

        The axes matter: a complete Student-t product of experts puts its mass far out along the M directions in
        which one expert alone grows, and a product base along other axes (the covariance's principal axes, or an
        elliptical t) has far lighter tails there, and HAIS from it misses that mass by nats (measured on the 36-d
        product with shapes 0.66–3, 200 chains: −7.2 nats at K = 10³ from Student-t experts along the principal axes;
        from these axes −0.02 at K = 10³, and −0.024 … +0.061 over five seeds at K = 10⁴, each within 1.7 stderr).
        """
        rows = data[:_FIT_ROWS].double()
        location = rows.median(0).values
        centered = rows - location
        count, width = rows.shape
        eye = torch.eye(width, dtype=torch.float64, device=rows.device)
        scatter = eye
        for _ in range(_FIT_ITERATIONS):
            distance = (centered @ torch.linalg.inv(scatter) * centered).sum(-1).clamp(min=1e-300)
            scatter = width * (centered.T / distance) @ centered / count
            scatter = (scatter + scatter.T) / 2 / scatter.diagonal().mean()
        whitening = _inverse_sqrt(scatter)
        whitened = centered @ whitening.T
        signs = whitened / whitened.norm(dim=1, keepdim=True).clamp(min=1e-300)
        rotation = eye
        for _ in range(_FIT_ICA_STEPS):
            projected = signs @ rotation.T
            # maximise Σ_i E[(r_iᵀu)⁴] over rotations: step to its gradient E[u (r_iᵀu)³] (the contrast is convex) and
            # re-orthogonalise R ← (R Rᵀ)^{−½} R. FastICA's Gaussian reference term −3E[y²]w is left out: for unit vectors
            # it outweighs the gradient and led to a wrong fixed point (measured KL(base‖target) 44 nats instead of 2.6)
            update = projected.pow(3).T @ signs / count
            update = _inverse_sqrt(update @ update.T) @ update
            converged = (1 - (update * rotation).sum(1).abs()).max().item() < 1e-10
            rotation = update
            if converged:
                break
        responses = whitened @ rotation.T
        shape = torch.ones(width, dtype=torch.float64, device=rows.device)
        scale2 = torch.ones(width, dtype=torch.float64, device=rows.device)
        for _ in range(_FIT_ITERATIONS):
            for _ in range(5):
                scale2 = (2 * shape * responses.square() / (1 + responses.square() / scale2)).mean(0).clamp(min=1e-300)
            shape = _student_t_shape(torch.log1p(responses.square() / scale2).mean(0))
        unmixing = (rotation / scale2.sqrt()[:, None]) @ whitening  # s = (x − μ) Uᵀ
        mixing = torch.linalg.inv(unmixing.T)
        return cls(location.to(data.dtype), mixing.to(data.dtype), shape.to(data.dtype))

    def responses(self, x: torch.Tensor) -> torch.Tensor:
        """``s = (x − μ) A⁻¹`` ``[N, M]``."""
        return (x - self.location) @ self.unmixing

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """``E(x) = Σ_i λ_i log(1 + s_i²)`` for ``x [N, M]`` → ``[N]``."""
        return torch.log1p(self.responses(x).square()) @ self.shape

    def energy_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(E(x) [N], ∇E(x) [N, M])``, ``∇E = (2 λ s / (1 + s²)) A⁻ᵀ``."""
        s = self.responses(x)
        return torch.log1p(s.square()) @ self.shape, (2 * self.shape * s / (1 + s.square())) @ self.unmixing.T

    def log_partition(self) -> torch.Tensor:
        """``log Z = Σ_i [½ log π + lnΓ(λ_i − ½) − lnΓ(λ_i)] + log|det A|`` (float64 scalar)."""
        shape = self.shape.double()
        log_c = 0.5 * math.log(math.pi) + torch.lgamma(shape - 0.5) - torch.lgamma(shape)
        return log_c.sum() + torch.linalg.slogdet(self.mixing.double()).logabsdet

    def sample(self, num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Exact samples ``[num_samples, M]``: ``s`` by :func:`student_t_responses`, then ``x = μ + s A``."""
        s = student_t_responses(self.shape.double(), num_samples, generator=generator)
        return (self.location.double() + s @ self.mixing.double()).to(self.mixing.dtype)

    def frame(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(μ [M], diag(1/√(2λ)) A [M, M])``: coordinates of unit curvature at the mode (``E''(0) = 2λ_i`` along axis i),
        the width of each expert's core whatever its tails (a nearly Gaussian expert, λ → ∞, has variance ≈ 1/(2λ))."""
        return self.location, self.mixing / torch.sqrt(2 * self.shape)[:, None]


def _inverse_sqrt(matrix: torch.Tensor) -> torch.Tensor:
    """``S^{−½}`` of a symmetric positive definite ``S [M, M]`` by its eigendecomposition."""
    eigenvalues, eigenvectors = torch.linalg.eigh((matrix + matrix.T) / 2)
    return (eigenvectors * eigenvalues.clamp(min=1e-300).rsqrt()) @ eigenvectors.T


def _student_t_shape(mean_log1p: torch.Tensor) -> torch.Tensor:
    """Per axis the λ ∈ (½, :data:`_MAX_SHAPE`] solving ``ψ₀(λ) − ψ₀(λ − ½) = mean_log1p [M]`` (the Student-t
    likelihood equation in λ; its left side falls from ∞ to 0 as λ grows), by 60 bisections of log(λ − ½)."""
    low = torch.full_like(mean_log1p, math.log(1e-6))
    high = torch.full_like(mean_log1p, math.log(_MAX_SHAPE))
    for _ in range(60):
        middle = (low + high) / 2
        shape = 0.5 + middle.exp()
        too_heavy = torch.digamma(shape) - torch.digamma(shape - 0.5) > mean_log1p
        low, high = torch.where(too_heavy, middle, low), torch.where(too_heavy, high, middle)
    return 0.5 + high.exp()


def base_frame(base) -> tuple[torch.Tensor, torch.Tensor]:
    """``(location [M], mixing [M, M])`` with ``x = location + z · mixing`` and ``z`` of unit scale under ``base`` (a
    :class:`~pfzoo.models.Gaussian` or a :class:`StudentTBase`: both state their frame)."""
    with torch.no_grad():
        return base.frame()


class ContinuousGeometricPath(AnnealingPath):
    """``log f_β(x) = −(1−β) E_0(x) − β E_1(x)`` from a tractable base (a Gaussian or a :class:`StudentTBase`) to the
    target (HAIS eq. 13).

    Statistics are the two energies and gradients, so ``log f_β``, its gradient and the AIS increment
    ``log f_{β'}(x) − log f_β(x) = −(β'−β)(E_1(x) − E_0(x))`` follow at any β without re-evaluating
    the models; one kernel step then costs one joint energy-and-gradient evaluation of base and
    target per leapfrog step. The kernel (:class:`~pfzoo.kernels.HMCKernel` for HAIS, whose momentum
    is part of the state and so carried across intermediate distributions, or
    :class:`~pfzoo.kernels.RandomWalkMetropolis`) leaves ``f_β`` invariant; its state carries the statistics.

    The kernel moves in the base's unit-scale coordinates ``z`` (:func:`base_frame`, ``x = μ + z A``), i.e. HMC with
    the mass matrix ``(AᵀA)⁻¹``: a step ε is ε times the base's own scale in every direction, so one ε (HAIS's 0.2)
    fits a target of any scale once the base is fitted to it (a product of experts with filters ×1000 has
    responses 1000× narrower than N(0, I)). A kernel that reflects at lower bounds (``kernel.lower``) moves in ``x``
    itself, where the bounds are stated.

    Args:
        target: a model with ``energy_and_grad(x) -> (energy [N], grad [N, D])``.
        base: a model with the same, plus exact ``sample(n, generator=...)`` and ``log_partition()``.
        kernel: the transition kernel.

    :attr:`warnings` holds one line per reason the path itself makes the estimate unreliable (a Gaussian base for a
    target that declares heavy tails, ``target.heavy_tailed``); AIS adds them to the estimate's warnings.
    """

    linear_in_beta = True

    def __init__(self, target, base, kernel: Kernel) -> None:
        check_kernel(kernel, GeometricEnergyTarget.offers, "a continuous path")
        if base.num_visible != target.num_visible:
            raise ValueError(f"base has {base.num_visible} dimensions, target {target.num_visible}")
        self.base = base
        self.kernel = kernel
        frame = base_frame(base) if reflection_bounds(kernel) is None else (None, None)
        self.target = GeometricEnergyTarget(target, base, *frame)
        # a Student-t base draws its Gamma variates by rejection in rounds over the whole batch: not per block
        self.batches_chain_streams = not isinstance(base, StudentTBase)
        self.warnings: tuple[str, ...] = ()
        if target.heavy_tailed and not base.heavy_tailed:
            self.warnings = (
                f"{type(target).__name__} has heavy-tailed experts but the base is Gaussian: the chains cannot reach the far "
                f"tails within the schedule, so log Ẑ can be low by more than its stderr (measured: 0.5 nats at K = 10⁴ on a "
                f"36-d Student-t product of experts); pass data so that base='auto' fits a Student-t base",
            )
        self.warnings += far_density_warnings(target, base)

    def draw_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Exact base samples in the kernel's coordinates (``target.position`` maps them to ``x``)."""
        with torch.no_grad():
            return self.target.coordinates(self.base.sample(num_chains, generator=generator))

    def base_log_partition(self) -> torch.Tensor:
        return self.base.log_partition()

    def log_f(self, stats: ContinuousPathStatistics, beta: float) -> torch.Tensor:
        """``log f_β(x)`` (float64 ``[N]``)."""
        base_energy = stats.base_energy.double()
        return -(base_energy + beta * (stats.target_energy.double() - base_energy))

    def log_weight_increment(self, stats: ContinuousPathStatistics, beta_from: float, beta_to: float) -> torch.Tensor:
        return (beta_from - beta_to) * (stats.target_energy.double() - stats.base_energy.double())


def far_density_warnings(target, base) -> tuple[str, ...]:
    """Whether ``target``'s density far outside ``base`` exceeds its density at every one of the base's draws, or is
    not a number there: at :data:`PROBE_RADIUS` base standard deviations from its centre, along
    :data:`PROBE_DIRECTIONS` random directions. A normalisable density must fall off; one that is larger 1000 scales
    out is improper (``E = Σ x``: the estimate then grows with the number of steps without limit) or has its mass where
    the base never goes (a base fitted to too few data), and no annealing from that base estimates its Z."""
    probe = torch.Generator(device=target.device).manual_seed(0)
    with torch.no_grad():
        location, mixing = base_frame(base)
        near = target.energy(base.sample(PROBE_DIRECTIONS, generator=probe)).double()
        directions = torch.randn(PROBE_DIRECTIONS, target.num_visible, generator=probe, dtype=torch.float64,
                                 device=target.device)
        directions = directions / directions.norm(dim=1, keepdim=True)
        far_points = location + (PROBE_RADIUS * directions).to(mixing.dtype) @ mixing
        far = target.energy(far_points.to(target.dtype)).double()
    undefined = int(torch.isnan(far).sum().item()) + int(torch.isnan(near).sum().item())
    if undefined:
        return (f"{type(target).__name__}'s energy is NaN at {undefined} of {2 * PROBE_DIRECTIONS} probe points (base draws, "
                f"and {PROBE_RADIUS:g} base scales out): chains that reach such points give NaN weights; make the energy "
                f"finite everywhere",)
    higher = int((far < near.min()).sum().item())
    if higher == 0:
        return ()
    return (f"{type(target).__name__}'s density {PROBE_RADIUS:g} base scales out exceeds its density at every base draw "
            f"in {higher} of {PROBE_DIRECTIONS} directions: either ∫exp(−E) is infinite (an improper target: the estimate "
            f"is meaningless and grows with num_steps) or the target's mass lies far outside the base (a base fitted to "
            f"too few data); check that the energy grows at infinity, or fit the base to more data",)


def gaussian_base(model, name: str, data: torch.Tensor | None, smoothing: float) -> Gaussian:
    """A Gaussian with exactly known ``log Z`` to anneal from, on the model's device and dtype.

    ``"fitted"``: :meth:`Gaussian.fit <pfzoo.models.Gaussian.fit>` of ``data [N, M]``, i.e.
    ``N(mean(data), cov(data) + 1e-6 · I)`` (the ``1e-6 · I`` keeps the precision finite when the data lie
    in a subspace). ``"isotropic"``: ``N(0, I)``. ``smoothing`` is the binary families' pseudo-count, unused here.
    """
    if name == "fitted":
        return Gaussian.fit(_fitting_data(model, name, data))
    return Gaussian(model.num_visible).to(device=model.device, dtype=model.dtype)


OWN_SAMPLES = 2048
"""A model that samples exactly fits its base to this many of its own samples."""


def fitting_samples(model, data: torch.Tensor | None) -> torch.Tensor | None:
    """What a base is fitted to: ``OWN_SAMPLES`` exact samples of a model that draws them (``model.samples_exactly``:
    complete products of experts, ICA), since the base should approximate the model, not the data it was trained on;
    they come from a private generator with a fixed seed, so the base is a function of the model alone and the
    caller's random stream is untouched. Any other model: ``data`` (``None`` without)."""
    if not model.samples_exactly:
        return data
    return model.sample(OWN_SAMPLES, generator=torch.Generator(model.device).manual_seed(0))


def continuous_base(model, name: str, data: torch.Tensor | None, smoothing: float) -> Gaussian | StudentTBase:
    """The continuous family's bases: ``"student_t"`` (:meth:`StudentTBase.fit`) or a Gaussian (:func:`gaussian_base`:
    ``"fitted"``, ``"isotropic"``), fitted to :func:`fitting_samples`."""
    data = fitting_samples(model, data) if name != "isotropic" else data
    if name == "student_t":
        return StudentTBase.fit(_fitting_data(model, name, data))
    return gaussian_base(model, name, data, smoothing)


def _fitting_data(model, name: str, data: torch.Tensor | None) -> torch.Tensor:
    if data is None:
        raise ValueError(f"base={name!r} needs data [N, M] to fit")
    # data only supplies statistics here (moments, shapes), so it is cast, not refused, when its dtype differs
    data = check_matrix(data, "data", width=model.num_visible, device=model.device, allow_empty=False)
    if data.shape[0] <= model.num_visible:
        # a location and a full M × M scatter: fewer than M + 1 rows leave the base degenerate in some direction
        raise ValueError(f"base={name!r} fits a location and a full {model.num_visible}×{model.num_visible} scale to "
                         f"base_data (or data), which needs at least {model.num_visible + 1} rows, got {data.shape[0]}; "
                         f"pass more rows or base='isotropic'")
    return data.to(model.dtype)


def heavy_tailed(data: torch.Tensor) -> bool:
    """Whether some principal component of ``data [N, M]`` has excess kurtosis above :data:`HEAVY_TAIL_KURTOSIS`."""
    data64 = data.double()
    centered = data64 - data64.mean(0)
    _, eigenvectors = torch.linalg.eigh(centered.T @ centered / data.shape[0])
    components = centered @ eigenvectors
    variance = components.square().mean(0).clamp(min=1e-300)
    kurtosis = components.pow(4).mean(0) / variance.square() - 3
    return bool((kurtosis > HEAVY_TAIL_KURTOSIS).any())


STUDENT_T_MARGIN = 0.02
"""Nats per draw by which a Student-t base must beat the fitted Gaussian on held-out draws of the model to be chosen."""


def student_t_fits_better(samples: torch.Tensor) -> bool:
    """Whether a :class:`StudentTBase` fitted to the first half of ``samples [N, M]`` (a model's exact draws) gives the
    second half a mean log density above the fitted Gaussian's by more than :data:`STUDENT_T_MARGIN`: the base nearer
    the model in KL(model ‖ base), the divergence an annealing run's weights pay for. A Gaussian model's draws leave the
    two within noise (the Student-t then adds nothing); exponential tails gain about 0.07 nats a dimension (a Laplace
    against the Gaussian of its variance), whatever mixing of the axes hides them from the principal components'
    kurtosis (:func:`heavy_tailed`), as it does for products of experts whose filters are far from orthogonal."""
    draws = samples.double()
    half = draws.shape[0] // 2
    fit, held_out = draws[:half], draws[half:]
    gaussian, student_t = Gaussian.fit(fit), StudentTBase.fit(fit)
    gaussian_log_density = -gaussian.energy(held_out) - gaussian.log_partition()
    student_t_log_density = -student_t.energy(held_out) - student_t.log_partition()
    return bool((student_t_log_density - gaussian_log_density).mean() > STUDENT_T_MARGIN)


def choose_continuous_base(model, data: torch.Tensor | None) -> str:
    """What ``base="auto"`` anneals from: N(0, I) ("isotropic") with nothing to fit to (:func:`fitting_samples`);
    else a Student-t base ("student_t") for a target whose tails are heavier than a Gaussian's, and the fitted Gaussian
    ("fitted") otherwise.

    The base must cover the target's tails. A model that draws exact samples is judged by them
    (:func:`student_t_fits_better`, or its word ``model.heavy_tailed``): a Gaussian keeps the fitted Gaussian, which is
    then the model itself, while the exponential tails of ICA and complete Laplace products of experts get the
    Student-t.
    Measured from each base fitted to the model's own draws (seeds 0–39, one thread, 2-core AMD EPYC shared with
    other jobs): SMC's defaults on the zoo's ICA (``ica-patches``, 36-d) err with sd 0.037 from the Student-t against
    0.078 from the Gaussian (mean z² 1.27 and 1.63) in 0.18 against 0.11 s, and on a complete 10-d Laplace product
    0.014 against 0.041 (mean z² 1.07 and 2.05; 0 and 2 runs of 40 beyond max(3 stderr, 0.05)) in 0.075 against
    0.018 s; AIS's defaults (seeds 0–19) 0.026 against 0.028 on the ICA and 0.008 against 0.015 on the product, in
    about twice the time (0.15 s of it fitting the Student-t). A heavy-tailed model that cannot sample itself gets the
    Gaussian, with the heavy-tail warning of :class:`ContinuousGeometricPath`: a Student-t base fitted to *data*
    rather than to the model did worse than the Gaussian on the zoo's overcomplete Student-t POE (N = 10³: ESS 1.5 and
    log Ẑ 7 nats lower), and heavy-tailed data (natural image patches) say nothing of an overcomplete Laplace
    product's tails. Only a model that says nothing of its tails (a user's :class:`~pfzoo.models.EnergyFunction`) is
    judged by its data."""
    samples = fitting_samples(model, data)
    if samples is None:
        return "isotropic"
    if model.samples_exactly:
        return "student_t" if model.heavy_tailed or student_t_fits_better(samples) else "fitted"
    if model.heavy_tailed is None:
        return "student_t" if heavy_tailed(_fitting_data(model, "auto", samples)) else "fitted"
    return "fitted"


register_family("continuous", bases=("fitted", "student_t", "isotropic"), make_base=continuous_base, free_base="isotropic",
                choose_base=choose_continuous_base)


@register_path("continuous", "geometric")
def continuous_geometric_path(model, base, kernel) -> ContinuousGeometricPath:
    """Default transition: HAIS's HMC (one leapfrog step of ε = 0.2, partial momentum refresh)."""
    return ContinuousGeometricPath(target=model, base=base, kernel=HMCKernel(DEFAULT_STEP_SIZE) if kernel is None else kernel)
