"""Mean-covariance RBM (Ranzato & Hinton 2010) with its hidden units summed out, as in the released code (HAIS eqs. 39–40)."""

from __future__ import annotations

import math

import torch
from torch import nn

from pfzoo.models.capabilities import Capability
from pfzoo.models.continuous import ContinuousModel
from pfzoo.models.registry import register_model
from pfzoo.sampling import bernoulli
from pfzoo.validation import all_finite, check_beta, check_binary, check_generator, check_model_dtype, check_positive_int, check_tensors, describe

DEFAULT_NORMALIZATION_EPS = 0.5
"""``small`` of Ranzato's released code (mcRBM_04May2010): ``x̃ = x / √(|x|²/D + small)``."""

# Initial values of the released code.
DEFAULT_INIT_STD = 0.02  # factors C ~ 0.02 · N(0, 1)
DEFAULT_MEAN_INIT_STD = 0.05  # mean weights W ~ 0.05 · N(0, 1)
INITIAL_COVARIANCE_BIAS = 2.0
INITIAL_MEAN_BIAS = -2.0


def _softplus(t: torch.Tensor) -> torch.Tensor:
    """``log(1 + eᵗ)`` to working precision everywhere, with the exact derivative σ(t).

    ``F.softplus`` returns ``t`` itself above its threshold (20), an error of up to e⁻²⁰ ≈ 2·10⁻⁹ that
    would make the energy disagree with its analytic gradient (which uses the exact σ(t)).
    """
    return torch.logaddexp(t, t.new_zeros(()))


@register_model("mcrbm")
class MeanCovarianceRBM(ContinuousModel):
    """Mean-covariance RBM over ``x ∈ ℝ^D`` with its binary hidden units summed out (HAIS eqs. 39–40).

    The energy is the one the released code of Ranzato & Hinton (2010) computes. With the input
    normalisation of the covariance part

        s(x) = √(|x|²/D + ε),   x̃ = x / s(x)                                 (ε = ``normalization_eps``)

    the joint energy of ``x`` with covariance hiddens ``h^c ∈ {0,1}^K`` and mean hiddens ``h^m ∈ {0,1}^J`` is

        E(x, h^c, h^m) = ½ Σ_k h^c_k Σ_f P_fk (C_fᵀ x̃)² − cᵀh^c − h^mᵀ(Wᵀx + b) − b_vᵀx + ½|x|²      (eq. 39)

    and summing the hiddens out gives the energy of this model,

        E(x) = −Σ_k softplus(−½ Σ_f P_fk (C_fᵀ x̃)² + c_k) − Σ_j softplus(W_jᵀx + b_j) − b_vᵀx + ½|x|²   (eq. 40)

    i.e. the released code's sequence ``lengthsq = Σ x²/D + small``, ``normdata = x/√lengthsq``,
    ``feat = VFᵀ normdata``, ``t1 = −½ FHᵀ feat² + bias_cov``, ``E = −Σ log(1 + e^{t1})
    − Σ log(1 + e^{w_meanᵀx + bias_mean}) − bias_visᵀx + ½ Σ x²`` (VF = C, FH = P, w_mean = W).

    Parameters (names as in ``state_dict``):
        factors ``[D, F]``: C, the factor filters (VF).
        pooling ``[F, K]``: P ≥ 0, pools squared factor responses into covariance hiddens (FH).
        covariance_bias ``[K]``: c.
        mean_weight ``[D, J]``: W.
        mean_bias ``[J]``: b.
        visible_bias ``[D]``: b_v.

    ``Z`` is finite for every parameter value: ``|x̃|² < D`` bounds the covariance term, the mean
    term grows at most linearly in ``|x|``, and ``½|x|²`` dominates both. It has no closed form, so
    :meth:`log_partition` raises ``NotImplementedError``; estimate it with Hamiltonian AIS along the
    geometric path from ``N(0, I)`` (:class:`pfzoo.estimators.HAIS`). Given ``x`` the hiddens are
    independent Bernoullis (:meth:`covariance_hidden_probs`, :meth:`mean_hidden_probs`,
    :meth:`sample_hidden`); ``p(x | h)`` is not Gaussian because of the normalisation, so there is
    no exact visible sampler (the released code samples ``x`` with HMC on ``E(x)``).

    Constraints: ``P ≥ 0`` (with negative entries the covariance hiddens would reward large filter
    responses). The energy is defined for any P; :meth:`project_parameters`, which the Trainer calls
    after every optimiser step, clamps P back to ``P ≥ 0`` and, if configured, also normalises the
    columns of P (``normalize_pooling``) and of C (``factor_norm``) as the released code does.

    Args:
        num_visible: D.
        num_factors: F.
        num_covariance_hidden: K.
        num_mean_hidden: J.
        init_std: standard deviation of the Gaussian initial factors C (released code: 0.02).
        mean_init_std: standard deviation of the Gaussian initial mean weights W (released code: 0.05).
        normalization_eps: ε > 0 in ``s(x) = √(|x|²/D + ε)``; the released code's ``small = 0.5``.
            It keeps ``x̃`` finite at ``x = 0`` and shrinks the normalised norm of small inputs.
        factor_norm: if set, :meth:`project_parameters` rescales every column of C to this Euclidean
            length. The released code rescales them to a running average of their mean length
            (which starts at 1); a fixed length keeps the projection stateless. ``None``: no rescaling.
        normalize_pooling: if true, :meth:`project_parameters` also scales every non-zero column of P
            to unit L1 norm, as the released code does once P is being learned.
        generator: random generator for the initial C and W.

    Initial values follow the released code: ``P = I [F, K]`` (factor f pooled by hidden f; a
    rectangular identity), ``c = 2``, ``b = −2``, ``b_v = 0``.
    """

    family_capabilities = ContinuousModel.family_capabilities | {Capability.ANALYTIC_SCORE}

    def __init__(
        self,
        num_visible: int,
        num_factors: int,
        num_covariance_hidden: int,
        num_mean_hidden: int,
        *,
        init_std: float = DEFAULT_INIT_STD,
        mean_init_std: float = DEFAULT_MEAN_INIT_STD,
        normalization_eps: float = DEFAULT_NORMALIZATION_EPS,
        factor_norm: float | None = None,
        normalize_pooling: bool = False,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.num_visible = check_positive_int(num_visible, "num_visible")
        self.num_factors = check_positive_int(num_factors, "num_factors")
        self.num_covariance_hidden = check_positive_int(num_covariance_hidden, "num_covariance_hidden")
        self.num_mean_hidden = check_positive_int(num_mean_hidden, "num_mean_hidden")
        for name, value in (("init_std", init_std), ("mean_init_std", mean_init_std)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite non-negative number, got {describe(value)}")
        if isinstance(normalization_eps, bool) or not (
            isinstance(normalization_eps, (int, float)) and math.isfinite(normalization_eps) and normalization_eps > 0
        ):
            raise ValueError(f"normalization_eps must be a finite positive number, got {normalization_eps!r}")
        self.normalization_eps = float(normalization_eps)
        if factor_norm is not None and not (
            isinstance(factor_norm, (int, float)) and not isinstance(factor_norm, bool) and math.isfinite(factor_norm) and factor_norm > 0
        ):
            raise ValueError(f"factor_norm must be a finite positive number or None, got {factor_norm!r}")
        self.factor_norm = None if factor_norm is None else float(factor_norm)
        if not isinstance(normalize_pooling, bool):
            raise ValueError(f"normalize_pooling must be a bool, got {normalize_pooling!r}")
        self.normalize_pooling = normalize_pooling

        d, f, k, j = self.num_visible, self.num_factors, self.num_covariance_hidden, self.num_mean_hidden
        self.factors = nn.Parameter(torch.randn(d, f, generator=generator) * init_std)
        self.pooling = nn.Parameter(torch.eye(f, k))
        self.covariance_bias = nn.Parameter(torch.full((k,), INITIAL_COVARIANCE_BIAS))
        self.mean_weight = nn.Parameter(torch.randn(d, j, generator=generator) * mean_init_std)
        self.mean_bias = nn.Parameter(torch.full((j,), INITIAL_MEAN_BIAS))
        self.visible_bias = nn.Parameter(torch.zeros(d))

    def extra_repr(self) -> str:
        """The sizes, shown by ``repr``: ``MeanCovarianceRBM(...)``."""
        return (
            f"num_visible={self.num_visible}, num_factors={self.num_factors}, "
            f"num_covariance_hidden={self.num_covariance_hidden}, num_mean_hidden={self.num_mean_hidden}"
        )

    @classmethod
    def from_tensors(
        cls,
        factors: torch.Tensor,
        pooling: torch.Tensor,
        covariance_bias: torch.Tensor,
        mean_weight: torch.Tensor,
        mean_bias: torch.Tensor,
        visible_bias: torch.Tensor,
        *,
        normalization_eps: float = DEFAULT_NORMALIZATION_EPS,
        factor_norm: float | None = None,
        normalize_pooling: bool = False,
    ) -> "MeanCovarianceRBM":
        """An mcRBM holding copies of ``factors [D, F]`` (C), ``pooling [F, K]`` (P ≥ 0), ``covariance_bias [K]`` (c),
        ``mean_weight [D, J]`` (W), ``mean_bias [J]`` (b) and ``visible_bias [D]`` (b_v), on the device and
        dtype of ``factors``.

        Raises ``ValueError`` naming the argument for a non-tensor, a wrong shape, NaN/inf entries or a
        negative pooling entry. The released code's ``VF, FH, bias_cov, w_mean, bias_mean, bias_vis``
        map onto the arguments in this order (biases flattened from columns to vectors).
        """
        check_tensors(factors=factors, pooling=pooling, covariance_bias=covariance_bias, mean_weight=mean_weight, mean_bias=mean_bias,
                      visible_bias=visible_bias)
        matrices = (("factors", factors, "[D, F]"), ("pooling", pooling, "[F, K]"), ("mean_weight", mean_weight, "[D, J]"))
        for name, tensor, layout in matrices:
            if not isinstance(tensor, torch.Tensor) or tensor.dim() != 2:
                found = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
                raise ValueError(f"{name} must be a tensor of shape {layout}, got {found}")
        num_visible, num_factors = factors.shape
        num_mean_hidden = mean_weight.shape[1]
        if pooling.shape[0] != num_factors:
            raise ValueError(f"pooling must have shape [F, K] with F = {num_factors} (the columns of factors), got {tuple(pooling.shape)}")
        if mean_weight.shape[0] != num_visible:
            raise ValueError(f"mean_weight must have shape [D, J] with D = {num_visible} (the rows of factors), got {tuple(mean_weight.shape)}")
        num_covariance_hidden = pooling.shape[1]
        vectors = (
            ("covariance_bias", covariance_bias, num_covariance_hidden),
            ("mean_bias", mean_bias, num_mean_hidden),
            ("visible_bias", visible_bias, num_visible),
        )
        for name, tensor, size in vectors:
            if not isinstance(tensor, torch.Tensor) or tuple(tensor.shape) != (size,):
                found = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
                raise ValueError(f"{name} must have shape [{size}], got {found}")
        tensors = {name: tensor for name, tensor, _ in matrices + vectors}
        for name, tensor in tensors.items():
            if not tensor.is_floating_point():
                raise ValueError(f"{name} must be a floating-point tensor, got dtype {tensor.dtype}")
            if not all_finite(tensor):
                raise ValueError(f"{name} contains NaN or infinite values")
        if (pooling < 0).any():
            raise ValueError(f"pooling must be non-negative (P ≥ 0), got min {pooling.min().item():.6g}")
        model = cls(
            num_visible,
            num_factors,
            num_covariance_hidden,
            num_mean_hidden,
            init_std=0.0,
            mean_init_std=0.0,
            normalization_eps=normalization_eps,
            factor_norm=factor_norm,
            normalize_pooling=normalize_pooling,
        )
        model.to(device=factors.device, dtype=check_model_dtype(factors.dtype, "factors"))
        with torch.no_grad():
            for name, tensor in tensors.items():
                getattr(model, name).copy_(tensor)
        return model

    def visible_filters(self) -> torch.Tensor:
        """``[K, V]``: ``self.factors.T``, detached."""
        return self.factors.T.detach()

    def config(self) -> dict:
        return {
            "num_visible": self.num_visible,
            "num_factors": self.num_factors,
            "num_covariance_hidden": self.num_covariance_hidden,
            "num_mean_hidden": self.num_mean_hidden,
            "normalization_eps": self.normalization_eps,
            "factor_norm": self.factor_norm,
            "normalize_pooling": self.normalize_pooling,
        }

    @torch.no_grad()
    def project_parameters(self) -> None:
        """Project onto the constraint set after an optimiser step (the Trainer calls it after every step).

        Always clamps ``P ≥ 0`` (the released code zeroes negative entries of FH). With
        ``normalize_pooling``, then scales every non-zero column of P to unit L1 norm (all-zero columns
        stay zero). With ``factor_norm``, rescales every column of C to that Euclidean length (zero
        columns stay zero).
        """
        self.pooling.clamp_(min=0)
        if self.normalize_pooling:
            sums = self.pooling.sum(0, keepdim=True)
            self.pooling.div_(torch.where(sums > 0, sums, torch.ones_like(sums)))
        if self.factor_norm is not None:
            norms = self.factors.norm(dim=0, keepdim=True)
            self.factors.mul_(torch.where(norms > 0, self.factor_norm / norms.clamp_min(torch.finfo(norms.dtype).tiny), torch.ones_like(norms)))

    # ---- pieces of the energy -------------------------------------------------------------

    def _normalise(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(x̃ [B, D], s [B, 1], |x|² [B])`` with ``s = √(|x|²/D + ε)`` and ``x̃ = x / s``."""
        squared_norm = x.square().sum(-1)
        scale = (squared_norm / self.num_visible + self.normalization_eps).sqrt().unsqueeze(-1)
        return x / scale, scale, squared_norm

    def _covariance_input(self, normalized: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(feat = x̃ C [B, F], t = −½ (feat²) P + c [B, K])``: factor responses and covariance-hidden inputs."""
        feat = normalized @ self.factors
        return feat, torch.addmm(self.covariance_bias, feat.square(), self.pooling, alpha=-0.5)

    def _mean_input(self, x: torch.Tensor) -> torch.Tensor:
        """``x W + b`` ``[B, J]``: mean-hidden inputs."""
        return torch.addmm(self.mean_bias, x, self.mean_weight)

    # ---- energies -----------------------------------------------------------------------

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """``E(x)`` of eq. 40 (hiddens summed out) for ``x [B, D]`` → ``[B]``."""
        self.check_visible(x, "x")
        normalized, _, squared_norm = self._normalise(x)
        _, covariance_input = self._covariance_input(normalized)
        return (
            -_softplus(covariance_input).sum(-1)
            - _softplus(self._mean_input(x)).sum(-1)
            - x @ self.visible_bias
            + 0.5 * squared_norm
        )

    def energy_grad(self, x: torch.Tensor) -> torch.Tensor:
        """``∇_x E(x)`` for ``x [B, D]`` → ``[B, D]`` (see :meth:`energy_and_grad`). Unchecked hot-loop primitive."""
        return self.energy_and_grad(x)[1]

    def energy_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(E(x) [B], ∇_x E(x) [B, D])`` for ``x [B, D]``, analytically. Unchecked hot-loop primitive.

        With ``σ_c = σ(t)``, ``t = −½ (x̃C)² P + c``, and ``σ_m = σ(xW + b)``:

            g̃ = ∂E/∂x̃ = ((σ_c Pᵀ) ⊙ x̃C) Cᵀ                         (the released code's ``normgradient``)
            ∂x̃/∂x = I/s − x xᵀ/(D s³)                                (symmetric)
            ∇E(x) = g̃/s − x (g̃·x)/(D s³) − σ_m Wᵀ − b_v + x
        """
        normalized, scale, squared_norm = self._normalise(x)
        feat, covariance_input = self._covariance_input(normalized)
        mean_input = self._mean_input(x)
        energy = (
            -_softplus(covariance_input).sum(-1)
            - _softplus(mean_input).sum(-1)
            - x @ self.visible_bias
            + 0.5 * squared_norm
        )
        grad_normalized = (torch.sigmoid(covariance_input) @ self.pooling.T * feat) @ self.factors.T
        projection = (grad_normalized * normalized).sum(-1, keepdim=True)  # g̃·x / s
        return energy, self._energy_grad(x, normalized, scale, grad_normalized, projection, torch.sigmoid(mean_input))

    def _energy_grad(
        self,
        x: torch.Tensor,
        normalized: torch.Tensor,
        scale: torch.Tensor,
        grad_normalized: torch.Tensor,
        projection: torch.Tensor,
        mean_probs: torch.Tensor,
    ) -> torch.Tensor:
        """``∇E(x) = g̃/s − x (g̃·x)/(D s³) − σ_m Wᵀ − b_v + x`` ``[B, D]`` from ``x``, ``x̃``, ``s [B, 1]``, ``g̃ = ∂E/∂x̃``,
        ``g̃·x̃ [B, 1]`` and ``σ_m = σ(xW + b) [B, J]`` (see :meth:`energy_and_grad`)."""
        grad = (grad_normalized - normalized * (projection / self.num_visible)) / scale
        return grad - mean_probs @ self.mean_weight.T - self.visible_bias + x

    def score_and_laplacian(self, x: torch.Tensor, *, kink_bandwidth: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(∇_x log p̃(x) [B, D], Σ_i ∂² log p̃/∂x_i² [B])`` for ``x [B, D]``, what score matching needs (Hyvärinen
        2005), with ``log p̃ = −E``: the score is ``−∇E`` of :meth:`energy_and_grad` and the Laplacian ``−tr ∇²E``.

        Write the covariance term as ``g(x̃) = −Σ_k softplus(t_k)`` with ``u = x̃C``, ``t = −½ u² P + c``, ``σ_c = σ(t)``,
        ``q = σ_c Pᵀ [F]``. Its derivatives in ``u`` are ``∂g/∂u_f = q_f u_f`` and

            H_u = ∂²g/∂u∂u = diag(q) − diag(u) P diag(σ_c (1 − σ_c)) Pᵀ diag(u),   H̃ = ∂²g/∂x̃∂x̃ = C H_u Cᵀ.

        By the chain rule through ``x̃ = x/s``, with ``J = ∂x̃/∂x = I/s − x xᵀ/(D s³)`` (symmetric) and ``g̃ = ∂g/∂x̃``,
        ``tr ∇²_x g = tr(J² H̃) + Σ_a g̃_a Δx̃_a``, where ``J² = I/s² + x xᵀ (|x|²/(D² s⁶) − 2/(D s⁴))`` and
        ``Δx̃ = x (3|x|²/(D² s⁵) − (1 + 2/D)/s³)``. With ``r = |x̃|²/D`` and ``Cᵀx = s uᵀ`` this is

            tr ∇²_x g = [ tr H̃ + (r − 2)/D · uᵀH_u u + ((3r − 2)/D − 1) g̃·x̃ ] / s²
            tr H̃ = Σ_f q_f |C_f|² − Σ_k σ_c,k (1 − σ_c,k) |C (u ⊙ P_k)|²
            uᵀH_u u = Σ_f q_f u_f² − Σ_k σ_c,k (1 − σ_c,k) ((u²) P)_k²

        and the rest of ``E`` adds ``tr ∇²(−Σ_j softplus(x W_j + b_j) − b_vᵀx + ½|x|²) = D − Σ_j σ_m,j (1 − σ_m,j) |W_j|²``.
        Cost ``O(B D F K)`` for ``tr H̃``. ``kink_bandwidth`` (the smoothing of a non-differentiable energy's kinks, see
        :class:`~pfzoo.models.ProductOfExperts`) is unused: the density is smooth. Unchecked, differentiable in the
        parameters.
        """
        normalized, scale, _ = self._normalise(x)
        feat, covariance_input = self._covariance_input(normalized)
        covariance_probs = torch.sigmoid(covariance_input)
        covariance_curvature = covariance_probs * (1 - covariance_probs)  # σ_c (1 − σ_c) [B, K]
        pooled = covariance_probs @ self.pooling.T  # q [B, F]
        grad_normalized = (pooled * feat) @ self.factors.T  # g̃ [B, D]
        projection = (grad_normalized * normalized).sum(-1, keepdim=True)  # g̃·x̃ [B, 1]
        mean_probs = torch.sigmoid(self._mean_input(x))
        score = -self._energy_grad(x, normalized, scale, grad_normalized, projection, mean_probs)

        # C (u ⊙ P_k) for every k: [B, D, F] @ [F, K] → [B, D, K]
        pooled_filters = (self.factors * feat[:, None, :]) @ self.pooling
        trace_normalized = pooled @ self.factors.square().sum(0) - (covariance_curvature * pooled_filters.square().sum(1)).sum(-1)
        squared_feat = feat.square()
        quadratic = (pooled * squared_feat).sum(-1) - (covariance_curvature * (squared_feat @ self.pooling).square()).sum(-1)
        dim = self.num_visible
        ratio = normalized.square().sum(-1) / dim  # r = |x̃|²/D
        covariance_trace = (
            trace_normalized + (ratio - 2) / dim * quadratic + ((3 * ratio - 2) / dim - 1) * projection.squeeze(-1)
        ) / scale.squeeze(-1).square()
        mean_trace = (mean_probs * (1 - mean_probs)) @ self.mean_weight.square().sum(0)
        return score, mean_trace - covariance_trace - dim

    def joint_energy(self, x: torch.Tensor, covariance_hidden: torch.Tensor, mean_hidden: torch.Tensor) -> torch.Tensor:
        """``E(x, h^c, h^m)`` of eq. 39 for ``x [B, D]``, binary ``h^c [B, K]`` and ``h^m [B, J]`` → ``[B]``:

            E = ½ Σ_k h^c_k Σ_f P_fk (C_fᵀ x̃)² − cᵀh^c − h^mᵀ(Wᵀx + b) − b_vᵀx + ½|x|²

        ``log Σ_{h^c, h^m} exp(−E(x, h^c, h^m)) = −E(x)`` (:meth:`energy`).
        """
        self.check_visible(x, "x")
        check_binary(covariance_hidden, "covariance_hidden", width=self.num_covariance_hidden, device=self.device, dtype=self.dtype)
        check_binary(mean_hidden, "mean_hidden", width=self.num_mean_hidden, device=self.device, dtype=self.dtype)
        for name, h in (("covariance_hidden", covariance_hidden), ("mean_hidden", mean_hidden)):
            if h.shape[0] != x.shape[0]:
                raise ValueError(f"{name} must have one row per row of x ({x.shape[0]}), got {h.shape[0]}")
        normalized, _, squared_norm = self._normalise(x)
        _, covariance_input = self._covariance_input(normalized)
        return (
            -(covariance_hidden * covariance_input).sum(-1)
            - (mean_hidden * self._mean_input(x)).sum(-1)
            - x @ self.visible_bias
            + 0.5 * squared_norm
        )

    # ---- hidden conditionals ------------------------------------------------------------

    def covariance_hidden_probs(self, x: torch.Tensor, *, beta: float = 1.0) -> torch.Tensor:
        """``p_β(h^c_k = 1 | x) = σ(β (−½ Σ_f P_fk (C_fᵀ x̃)² + c_k))`` for ``x [B, D]`` → ``[B, K]``."""
        self.check_visible(x, "x")
        beta = check_beta(beta)
        normalized, _, _ = self._normalise(x)
        return torch.sigmoid(beta * self._covariance_input(normalized)[1])

    def mean_hidden_probs(self, x: torch.Tensor, *, beta: float = 1.0) -> torch.Tensor:
        """``p_β(h^m_j = 1 | x) = σ(β (W_jᵀ x + b_j))`` for ``x [B, D]`` → ``[B, J]``."""
        self.check_visible(x, "x")
        beta = check_beta(beta)
        return torch.sigmoid(beta * self._mean_input(x))

    @torch.no_grad()
    def sample_hidden(
        self, x: torch.Tensor, *, beta: float = 1.0, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Exact draw ``(h^c [B, K], h^m [B, J]) ~ p_β(h^c, h^m | x)`` for ``x [B, D]``: independent Bernoullis
        with the probabilities of :meth:`covariance_hidden_probs` and :meth:`mean_hidden_probs`."""
        check_generator(generator, self.device)
        covariance = bernoulli(self.covariance_hidden_probs(x, beta=beta), generator=generator)
        return covariance, bernoulli(self.mean_hidden_probs(x, beta=beta), generator=generator)
