"""Product of experts over linear filter responses, with Laplace or Student-t experts (HAIS eqs. 36–38)."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from pfzoo.models.capabilities import Capability
from pfzoo.models.continuous import ContinuousModel
from pfzoo.models.registry import register_model
from pfzoo.validation import all_finite, allocates, check_choice, check_generator, check_model_dtype, check_positive_int, check_tensors, checking_values

EXPERTS = ("laplace", "student_t")
DEFAULT_STUDENT_T_SHAPE = 1.5  # λ > ½, so a complete model has finite Z from the start
_HALF_LOG_PI = 0.5 * math.log(math.pi)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
DEFAULT_KINK_BANDWIDTH = 0.01  # the default blur of x standing for a Laplace kink's delta (score_and_laplacian)


def standard_gamma(concentration: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Draws of Gamma(a, 1) for every entry of ``concentration`` (a > 0, any shape), by Marsaglia & Tsang (2000).

    For a ≥ 1: ``d = a − ⅓``, ``c = 1/√(9d)``; propose ``v = (1 + c n)³``, ``n ~ N(0, 1)``, accept when
    ``log u < ½n² + d − d v + d log v``. For a < 1, ``Gamma(a) = Gamma(a + 1) · u^{1/a}``. Written here because
    ``torch.distributions.Gamma`` takes no generator. Entries are redrawn until all accept (≥ 95 % per round).
    """
    boosted = torch.where(concentration < 1, concentration + 1, concentration).double()
    d = boosted - 1.0 / 3.0
    c = 1.0 / torch.sqrt(9.0 * d)
    draws = torch.zeros_like(d)
    pending = torch.ones_like(d, dtype=torch.bool)
    while bool(pending.any()):
        normal = torch.randn(d.shape, generator=generator, dtype=d.dtype, device=d.device)
        uniform = torch.rand(d.shape, generator=generator, dtype=d.dtype, device=d.device)
        v = (1 + c * normal) ** 3
        accept = pending & (v > 0) & (uniform.log() < 0.5 * normal.square() + d - d * v + d * v.clamp(min=1e-300).log())
        draws = torch.where(accept, d * v, draws)
        pending = pending & ~accept
    small = concentration < 1
    if bool(small.any()):
        uniform = torch.rand(d.shape, generator=generator, dtype=d.dtype, device=d.device)
        draws = torch.where(small, draws * uniform.pow(1.0 / concentration.double()), draws)
    return draws.to(concentration.dtype)


def student_t_responses(shape: torch.Tensor, num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Exact draws ``[num_samples, L]`` of ``u_l`` with density ``∝ (1 + u_l²)^{−λ_l}`` for shapes ``λ [L]`` (all > ½).

    That density is a Student t with ``ν = 2λ − 1`` degrees of freedom scaled by ``1/√ν``, so
    ``u = n / √(2 g)`` with ``n ~ N(0, 1)`` and ``g ~ Gamma(ν/2, 1)``.
    """
    nu = 2 * shape - 1
    gamma = standard_gamma((nu / 2).expand(num_samples, -1), generator=generator)
    normal = torch.randn(gamma.shape, generator=generator, dtype=gamma.dtype, device=gamma.device)
    return normal / torch.sqrt(2 * gamma)


def laplace_responses(num_samples: int, width: int, *, generator: torch.Generator | None = None, dtype=None, device=None) -> torch.Tensor:
    """Exact draws ``[num_samples, width]`` of the density ``½ e^{−|u|}``: the difference of two Exp(1) draws."""
    uniform = torch.rand(2, num_samples, width, generator=generator, dtype=dtype, device=device)
    exponential = -torch.log1p(-uniform)
    return exponential[0] - exponential[1]


@register_model("poe")
class ProductOfExperts(ContinuousModel):
    """Product of experts ``p(x) = exp(-E(x)) / Z``, ``x ∈ ℝ^M``, with ``E(x) = Σ_l E_l(φ_l · x)`` (HAIS eqs. 36–38)
    over the responses ``u = x Φᵀ`` of ``L`` filters ``Φ [L, M]``:

        Laplace experts   E_l(u) = |u|
        Student-t experts E_l(u) = λ_l log(1 + u²),  λ_l > 0

    Parameters: ``filters [L, M]`` (Φ) and, for Student-t experts, ``log_shape [L]``
    (λ = exp(log_shape)), or with ``shape_above_half=True`` ``shape_excess [L]`` (λ = ½ + softplus(ρ));
    Laplace experts have no shape parameter.

    ``Z`` has a closed form when the model is complete (L = M): substituting ``u = Φx`` factorises
    the integral into one-dimensional ones, ``∫ e^{-|u|} du = 2`` and
    ``∫ (1 + u²)^{-λ} du = √π Γ(λ − ½) / Γ(λ)`` (finite only for λ > ½), divided by ``|det Φ|``.
    Overcomplete models (L > M) need an estimator such as Hamiltonian AIS; undercomplete ones (L < M)
    are flat along the null space of Φ, so their Z is infinite.

    Args:
        num_visible: M.
        num_experts: L.
        expert: ``"laplace"`` or ``"student_t"``.
        init_std: standard deviation of the Gaussian initial filters; ``None`` means ``1/√M``, so each
            filter starts with about unit norm. Student-t shapes start at λ = 1.5.
        generator: random generator for the initial filters.
        shape_above_half: parametrize the Student-t shapes as λ = ½ + softplus(ρ), so λ > ½ and a complete
            model's Z is finite for *every* parameter value. Exact maximum likelihood with full-batch L-BFGS needs
            it: the strong-Wolfe line search evaluates log Z at trial points, and with λ = exp(log_shape) a trial
            step past λ = ½ makes :meth:`log_partition` raise (measured: 36 experts on 20,000 whitened patches,
            first epoch). The optimum is the same; the path to it differs.
    """

    family_capabilities = ContinuousModel.family_capabilities | {Capability.ANALYTIC_SCORE}

    def __init__(
        self,
        num_visible: int,
        num_experts: int,
        expert: str = "laplace",
        *,
        init_std: float | None = None,
        generator: torch.Generator | None = None,
        shape_above_half: bool = False,
    ) -> None:
        super().__init__()
        self.num_visible = check_positive_int(num_visible, "num_visible")
        self.num_experts = check_positive_int(num_experts, "num_experts")
        check_choice(expert, "expert", EXPERTS)
        self.expert = expert
        if init_std is None:
            init_std = 1 / math.sqrt(num_visible)
        if init_std < 0:
            raise ValueError(f"init_std must be non-negative, got {init_std}")
        self.filters = nn.Parameter(torch.randn(num_experts, num_visible, generator=generator) * init_std)
        self.shape_above_half = bool(shape_above_half)
        if expert == "student_t" and self.shape_above_half:
            softplus_inverse = math.log(math.expm1(DEFAULT_STUDENT_T_SHAPE - 0.5))  # ρ with ½ + softplus(ρ) = 1.5
            self.shape_excess = nn.Parameter(torch.full((num_experts,), softplus_inverse))
        elif expert == "student_t":
            self.log_shape = nn.Parameter(torch.full((num_experts,), math.log(DEFAULT_STUDENT_T_SHAPE)))

    def extra_repr(self) -> str:
        """The sizes, shown by ``repr``: ``ProductOfExperts(...)``."""
        return f"num_visible={self.num_visible}, num_experts={self.num_experts}, expert={self.expert!r}"

    @classmethod
    def from_tensors(
        cls, filters: torch.Tensor, shape: torch.Tensor | None = None, *, expert: str = "laplace", shape_above_half: bool = False
    ) -> "ProductOfExperts":
        """A product of experts holding copies of ``filters [L, M]`` and, for ``expert="student_t"``, shapes ``λ [L]``.

        ``shape=None`` means λ = 1.5 for every Student-t expert; Laplace experts take no shape. With
        ``shape_above_half`` every λ must exceed ½.
        """
        check_tensors(filters=filters, **({} if shape is None else {"shape": shape}))
        if not isinstance(filters, torch.Tensor) or filters.dim() != 2:
            shape_found = tuple(filters.shape) if isinstance(filters, torch.Tensor) else type(filters).__name__
            raise ValueError(f"filters must have shape [L, M], got {shape_found}")
        check_choice(expert, "expert", EXPERTS)
        if not all_finite(filters):
            raise ValueError("filters contains NaN or infinite values")
        num_experts, num_visible = filters.shape
        if shape is not None:
            if expert != "student_t":
                raise ValueError(f"shape applies only to expert='student_t', got expert={expert!r}")
            if shape.shape != (num_experts,):
                raise ValueError(f"shape must have shape [{num_experts}], got {tuple(shape.shape)}")
            if not (all_finite(shape) and (shape > 0).all()):
                raise ValueError("shape must be finite and positive (λ_l > 0)")
            if shape_above_half and not (shape > 0.5).all():
                raise ValueError("shape must exceed 1/2 (λ_l > ½) with shape_above_half=True")
        model = cls(num_visible, num_experts, expert, init_std=0.0, shape_above_half=shape_above_half)
        model.to(device=filters.device, dtype=check_model_dtype(filters.dtype, "filters"))
        with torch.no_grad():
            model.filters.copy_(filters)
            if shape is not None and shape_above_half:
                excess = shape.to(filters) - 0.5
                model.shape_excess.copy_(excess + torch.log(-torch.expm1(-excess)))  # softplus⁻¹
            elif shape is not None:
                model.log_shape.copy_(shape.log())
        return model

    def visible_filters(self) -> torch.Tensor:
        """``[K, V]``: ``self.filters``, detached."""
        return self.filters.detach()

    def config(self) -> dict:
        config = {"num_visible": self.num_visible, "num_experts": self.num_experts, "expert": self.expert}
        if self.shape_above_half:  # only when set, so checkpoints written before the option load unchanged
            config["shape_above_half"] = True
        return config

    @property
    def shape(self) -> torch.Tensor:
        """Expert shapes ``λ [L]``: ``exp(log_shape)`` (or ``½ + softplus(shape_excess)``) for Student-t experts,
        ones for Laplace experts (λ ≡ 1)."""
        if self.expert == "laplace":
            return torch.ones_like(self.filters[:, 0])
        if self.shape_above_half:
            return 0.5 + F.softplus(self.shape_excess)
        return self.log_shape.exp()

    @property
    def is_complete(self) -> bool:
        """Whether Φ is square (L = M), the case with a closed-form ``log Z``."""
        return self.num_experts == self.num_visible

    @property
    def log_partition_cost(self) -> int | None:
        """0 (closed form) for a complete model with finite Z; ``None`` otherwise, so no estimator offers an exact
        log Z of a model whose Z is infinite."""
        return 0 if self.samples_exactly else None

    @property
    def samples_exactly(self) -> bool:
        """A complete model with finite Z samples exactly (:meth:`sample`) and has a closed-form log Z."""
        return self.is_complete and self.improper_reason() is None

    @property
    def twice_differentiable(self) -> bool:
        """Student-t experts are smooth; Laplace experts' ``|u|`` has a kink at 0 (see :meth:`score_and_laplacian`)."""
        return self.expert != "laplace"

    @property
    def heavy_tailed(self) -> bool:
        """Whether the experts have polynomial tails (Student-t): an annealing base should then be heavy-tailed too."""
        return self.expert == "student_t"

    def improper_reason(self) -> str | None:
        """Why ``Z = ∫ exp(−E(x)) dx`` is infinite, in words, or ``None`` when no reason is known.

        - filters of rank < M (fewer experts than dimensions, or linearly dependent filters): ``E`` is constant
          along the null space of Φ;
        - a complete model with a Student-t shape λ_l ≤ ½: ``∫ (1 + u²)^{−λ} du`` diverges;
        - any Student-t model with ``2 Σ_l λ_l ≤ M``: along almost every ray ``p(t x) ~ |t|^{−2Σλ}``, which is not
          integrable against the ``r^{M−1}`` volume element. (Overcomplete models passing this are not proven finite.)
        """
        filters = self.filters.detach().double()
        rank = int(torch.linalg.matrix_rank(filters))
        if rank < self.num_visible:
            return (f"its {self.num_experts} filters span only {rank} of {self.num_visible} dimensions, so the density is flat "
                    f"along the rest and Z is infinite")
        if self.expert == "laplace":
            return None
        shape = self.shape.detach().double()
        if self.is_complete and bool((shape <= 0.5).any()):
            worst = int(shape.argmin())
            return f"expert {worst} has Student-t shape λ = {shape[worst].item():.4g} ≤ 1/2, so Z is infinite"
        if 2 * shape.sum().item() <= self.num_visible:
            return f"its Student-t shapes sum to {shape.sum().item():.4g} ≤ M/2 = {self.num_visible / 2:g}, so Z is infinite"
        return None

    # ---- energies -----------------------------------------------------------------------

    def _expert_energy(self, u: torch.Tensor) -> torch.Tensor:
        """``Σ_l E_l(u_l)`` for filter responses ``u [B, L]`` → ``[B]``."""
        if self.expert == "laplace":
            return u.abs().sum(-1)
        return torch.log1p(u.square()) @ self.shape

    def _expert_derivative(self, u: torch.Tensor) -> torch.Tensor:
        """``E_l'(u_l)`` for ``u [B, L]`` → ``[B, L]``: ``sign(u)`` (Laplace) or ``2 λ u / (1 + u²)`` (Student-t)."""
        if self.expert == "laplace":
            return u.sign()
        return (2 * u / (1 + u.square())) * self.shape

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """``E(x) = Σ_l E_l(φ_l · x)`` (HAIS eqs. 36–38) for ``x [B, M]`` → ``[B]``."""
        self.check_visible(x, "x")
        return self._expert_energy(x @ self.filters.T)

    def energy_grad(self, x: torch.Tensor) -> torch.Tensor:
        """``∇E(x) = Σ_l E_l'(φ_l · x) φ_l = E'(x Φᵀ) Φ`` for ``x [B, M]`` → ``[B, M]``. Unchecked hot-loop primitive."""
        return self._expert_derivative(x @ self.filters.T) @ self.filters

    def energy_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(E(x) [B], ∇E(x) [B, M])`` from one projection ``u = x Φᵀ`` and one product ``E'(u) Φ``. Unchecked hot-loop primitive."""
        u = x @ self.filters.T
        return self._expert_energy(u), self._expert_derivative(u) @ self.filters

    def score_and_laplacian(
        self, x: torch.Tensor, *, kink_bandwidth: float = DEFAULT_KINK_BANDWIDTH
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(∇_x log p̃(x) [B, M], Σ_i ∂² log p̃/∂x_i² [B])`` for ``x [B, M]``, what score matching needs (Hyvärinen 2005).

        With ``u = x Φᵀ``: ``∇ log p̃ = −E'(u) Φ`` and, since ``∂²/∂x_i² E_l(φ_l · x) = E_l''(u_l) φ_li²``,
        the Laplacian ``−Σ_l E_l''(u_l) |φ_l|²``. Student-t experts: ``E'(u) = 2λu / (1 + u²)``,
        ``E''(u) = 2λ (1 − u²) / (1 + u²)²``.

        A Laplace expert ``|u|`` has ``E'' = 2 δ(u)``, a delta at its kink that autograd sees as zero, and without it
        score matching shrinks the filters to zero. Here each expert is smoothed as if ``x`` were blurred by ``N(0, h²
        I)``, ``h = kink_bandwidth`` (in the units of x): ``E_l(x) = E_ε |φ_l · (x + h ε)| = (|·| ∗ N(0, w_l²))(u_l)`` with
        ``w_l = h |φ_l|``, whose derivatives are ``E'(u) = erf(u / (√2 w_l))`` and ``E''(u) = 2 N(u; 0, w_l²)``: score
        matching of a smooth density that tends to the Laplace experts as ``h → 0`` (the delta's expectation, the data's
        response density at 0, becomes a kernel density estimate, so the fit is biased by ``O(h)``). A width fixed in x
        rather than in u keeps the objective bounded below however peaked the data are at 0 (with ``w`` fixed, growing
        filters sharpen the kernel and ``J → −∞`` on natural image patches). Smoothing the score as well as the Laplacian
        keeps the objective's parameter gradient exact (with ``sign(u)`` it would miss the jumps of ``½|s|²`` where a
        response changes sign). Unchecked, differentiable in the parameters.
        """
        u = x @ self.filters.T
        squared_norms = self.filters.square().sum(1)
        if self.expert == "laplace":
            if not kink_bandwidth > 0:
                raise ValueError(f"kink_bandwidth must be positive, got {kink_bandwidth}")
            width = kink_bandwidth * squared_norms.sqrt()
            slope = torch.erf(u / (math.sqrt(2) * width))
            curvature = (2 * _INV_SQRT_2PI / width) * torch.exp(-0.5 * (u / width).square())
        else:
            squared = u.square()
            slope = self._expert_derivative(u)
            curvature = 2 * (1 - squared) / (1 + squared).square() * self.shape
        return -slope @ self.filters, -(curvature @ squared_norms)

    @allocates("num_samples")
    @torch.no_grad()
    def sample(self, num_samples: int, *, generator: torch.Generator | None = None, **hmc_options) -> torch.Tensor:
        """Samples ``[num_samples, M]``. A complete model with finite Z is sampled exactly: independent expert
        responses ``u`` (Laplace: difference of two exponentials; Student-t: :func:`student_t_responses`) mapped
        back through ``x = u Φ⁻ᵀ``. Any other model falls back to :meth:`ContinuousModel.sample` (HMC; ``hmc_options``)."""
        self.check_computable()
        if not self.samples_exactly:
            return super().sample(num_samples, generator=generator, **hmc_options)
        check_positive_int(num_samples, "num_samples")
        check_generator(generator, self.device)
        if self.expert == "laplace":
            responses = laplace_responses(num_samples, self.num_experts, generator=generator, dtype=torch.float64, device=self.device)
        else:
            responses = student_t_responses(self.shape.double(), num_samples, generator=generator)
        return torch.linalg.solve(self.filters.double(), responses.T).T.to(self.dtype)

    # ---- partition function -------------------------------------------------------------

    def log_partition(self) -> torch.Tensor:
        """Exact ``log Z`` of a complete model (L = M) as a float64 scalar, differentiable in the parameters:

            Laplace:   log Z = L log 2 − log|det Φ|
            Student-t: log Z = Σ_l [½ log π + lnΓ(λ_l − ½) − lnΓ(λ_l)] − log|det Φ|   (every λ_l > ½)

        Raises ``NotImplementedError`` for an overcomplete model and ``ValueError`` when Z is infinite
        (an undercomplete model, singular Φ, or a Student-t shape λ_l ≤ ½); within
        :func:`pfzoo.validation.values_checked` the last two return ``+inf`` instead (no value read back).
        """
        self.check_computable()
        if self.num_experts < self.num_visible:
            raise ValueError(
                f"Z is infinite: {self.num_experts} experts in {self.num_visible} dimensions leave the density flat "
                f"along the null space of the filters (need num_experts >= num_visible)"
            )
        if not self.is_complete:
            raise NotImplementedError(
                f"log Z of a product of experts has a closed form only when it is complete (num_experts == num_visible); "
                f"this one has {self.num_experts} experts in {self.num_visible} dimensions: estimate it with Hamiltonian AIS"
            )
        log_abs_det = torch.linalg.slogdet(self.filters.double()).logabsdet
        if checking_values() and not torch.isfinite(log_abs_det):
            raise ValueError("filters are singular (det Φ = 0), so Z is infinite")
        if self.expert == "laplace":
            return self.num_experts * math.log(2) - log_abs_det
        shape = 0.5 + F.softplus(self.shape_excess.double()) if self.shape_above_half else self.log_shape.double().exp()
        if checking_values() and (shape <= 0.5).any():
            raise ValueError(
                f"every Student-t shape λ_l must exceed 1/2 for Z to be finite, got min λ = {shape.min().item():.6g}"
            )
        log_z = (_HALF_LOG_PI + torch.lgamma(shape - 0.5) - torch.lgamma(shape)).sum() - log_abs_det
        # Unchecked (inside the Trainer's steps, pfzoo.validation.values_checked) an infinite Z is +inf, a non-finite loss
        # the Trainer reports, where lnΓ of a negative λ − ½ would give a finite, wrong value.
        return torch.where((shape > 0.5).all(), log_z, torch.inf)
