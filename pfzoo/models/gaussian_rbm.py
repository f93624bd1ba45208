"""Gaussian–Bernoulli restricted Boltzmann machine (real-valued visible units, binary hidden units)."""

from __future__ import annotations

import math

import torch
from torch import nn

from pfzoo.logmath import softplus
from pfzoo.models.bipartite import BipartiteModel
from pfzoo.models.capabilities import Capability
from pfzoo.models.enumeration import logsumexp_over_binary_states
from pfzoo.models.rbm import DEFAULT_MAX_ENUMERATION_UNITS
from pfzoo.models.registry import register_model
from pfzoo.sampling import bernoulli
from pfzoo.validation import all_finite, check_finite_number, check_model_dtype, check_positive_int, check_tensors

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


@register_model("gaussian_rbm")
class GaussianBernoulliRBM(BipartiteModel):
    """Gaussian–Bernoulli RBM, ``v ∈ ℝ^V``, ``h ∈ {0,1}^H``, with the energy of Cho et al. (2011)
    and Hinton's practical guide (2010):

        E(v, h) = Σ_i (v_i - b_i)² / (2σ_i²) - Σ_ij (v_i / σ_i) W_ij h_j - c·h

    Parameters: ``weight [V, H]`` (W), ``visible_bias [V]`` (b, the visible mean offset),
    ``hidden_bias [H]`` (c) and ``log_sigma [V]`` (σ = exp(log_sigma), the visible standard
    deviations; a parameter if ``learn_sigma`` else a buffer, initially σ = 1).

    Inverse temperature: ``p_β(v, h) ∝ exp(-β E(v, h))`` has the conditionals

        p_β(h_j = 1 | v) = sigmoid(β (c + (v/σ) W)_j)
        p_β(v | h)       = N(b + σ ⊙ (W h), diag(σ²) / β)

    so only the visible *variance* depends on β. ``p_β`` is improper at β = 0 (a flat density
    on ℝ^V), so the samplers require 0 < β ≤ 1; anneal with :meth:`geometric_path` instead,
    which interpolates parameters and keeps every intermediate distribution proper.

    Args:
        num_visible: V.
        num_hidden: H.
        init_std: standard deviation of the Gaussian initial weights (biases and log σ start at 0).
        learn_sigma: make ``log_sigma`` an ``nn.Parameter`` (trained) rather than a buffer (fixed).
        max_enumeration_units: :meth:`log_partition` refuses to enumerate more than
            ``2**max_enumeration_units`` hidden configurations.
        generator: random generator for the initial weights.
    """

    family_capabilities = frozenset(
        {Capability.BLOCK_GIBBS, Capability.VISIBLE_GIBBS_CHAIN, Capability.POSTERIOR_PROPOSAL, Capability.ANALYTIC_SCORE,
         Capability.HIDDEN_MEANS}
    )
    path_family = "gaussian_rbm"

    binary_visible = False

    def __init__(
        self,
        num_visible: int,
        num_hidden: int,
        *,
        init_std: float = 0.01,
        learn_sigma: bool = False,
        max_enumeration_units: int = DEFAULT_MAX_ENUMERATION_UNITS,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.num_visible = check_positive_int(num_visible, "num_visible")
        self.num_hidden = check_positive_int(num_hidden, "num_hidden")
        init_std = check_finite_number(init_std, "init_std", minimum=0.0)
        if not isinstance(learn_sigma, bool):
            raise ValueError(f"learn_sigma must be a bool, got {learn_sigma!r}")
        self.learn_sigma = learn_sigma
        self.max_enumeration_units = check_positive_int(max_enumeration_units, "max_enumeration_units")
        self.weight = nn.Parameter(torch.randn(num_visible, num_hidden, generator=generator) * init_std)
        self.visible_bias = nn.Parameter(torch.zeros(num_visible))
        self.hidden_bias = nn.Parameter(torch.zeros(num_hidden))
        if learn_sigma:
            self.log_sigma = nn.Parameter(torch.zeros(num_visible))
        else:
            self.register_buffer("log_sigma", torch.zeros(num_visible))

    def extra_repr(self) -> str:
        """The sizes, shown by ``repr``: ``GaussianBernoulliRBM(...)``."""
        return f"num_visible={self.num_visible}, num_hidden={self.num_hidden}, learn_sigma={self.learn_sigma}"

    @classmethod
    def from_tensors(
        cls,
        weight: torch.Tensor,
        visible_bias: torch.Tensor,
        hidden_bias: torch.Tensor,
        log_sigma: torch.Tensor | None = None,
        *,
        learn_sigma: bool = False,
        max_enumeration_units: int = DEFAULT_MAX_ENUMERATION_UNITS,
    ) -> "GaussianBernoulliRBM":
        """A GBRBM holding copies of ``weight [V, H]``, ``visible_bias [V]``, ``hidden_bias [H]``, ``log_sigma [V]``.

        ``log_sigma=None`` means σ = 1 for every visible unit.
        """
        check_tensors(weight=weight, visible_bias=visible_bias, hidden_bias=hidden_bias)
        if weight.dim() != 2:
            raise ValueError(f"weight must have shape [V, H], got {tuple(weight.shape)}")
        num_visible, num_hidden = weight.shape
        if visible_bias.shape != (num_visible,):
            raise ValueError(f"visible_bias must have shape [{num_visible}], got {tuple(visible_bias.shape)}")
        if hidden_bias.shape != (num_hidden,):
            raise ValueError(f"hidden_bias must have shape [{num_hidden}], got {tuple(hidden_bias.shape)}")
        if log_sigma is None:
            log_sigma = torch.zeros_like(visible_bias)
        if log_sigma.shape != (num_visible,):
            raise ValueError(f"log_sigma must have shape [{num_visible}], got {tuple(log_sigma.shape)}")
        tensors = (("weight", weight), ("visible_bias", visible_bias), ("hidden_bias", hidden_bias), ("log_sigma", log_sigma))
        for name, tensor in tensors:
            if not all_finite(tensor):
                raise ValueError(f"{name} contains NaN or infinite values")
        model = cls(num_visible, num_hidden, init_std=0.0, learn_sigma=learn_sigma, max_enumeration_units=max_enumeration_units)
        model.to(device=weight.device, dtype=check_model_dtype(weight.dtype, "weight"))
        with torch.no_grad():
            model.weight.copy_(weight)
            model.visible_bias.copy_(visible_bias)
            model.hidden_bias.copy_(hidden_bias)
            model.log_sigma.copy_(log_sigma)
        return model

    def visible_filters(self) -> torch.Tensor:
        """``[K, V]``: ``self.weight.T``, detached."""
        return self.weight.T.detach()

    def config(self) -> dict:
        return {
            "num_visible": self.num_visible,
            "num_hidden": self.num_hidden,
            "learn_sigma": self.learn_sigma,
            "max_enumeration_units": self.max_enumeration_units,
        }

    @property
    def sigma(self) -> torch.Tensor:
        """Visible standard deviations ``σ = exp(log_sigma)``, ``[V]``."""
        return self.log_sigma.exp()

    # ---- energies -----------------------------------------------------------------------

    def energy(self, v: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """``E(v, h) = Σ_i (v_i - b_i)²/(2σ_i²) - Σ_ij (v_i/σ_i) W_ij h_j - c·h``, ``v [B, V]``, ``h [B, H]`` → ``[B]``."""
        self.check_visible(v)
        self.check_hidden(h)
        sigma = self.sigma
        quadratic = ((v - self.visible_bias) / sigma).square().sum(-1) / 2
        return quadratic - (((v / sigma) @ self.weight) * h).sum(-1) - h @ self.hidden_bias

    def free_energy(self, v: torch.Tensor) -> torch.Tensor:
        """``F(v) = Σ_i (v_i - b_i)²/(2σ_i²) - Σ_j softplus(c_j + ((v/σ) W)_j)`` for ``v [B, V]`` → ``[B]``."""
        self.check_visible(v)
        sigma = self.sigma
        quadratic = ((v - self.visible_bias) / sigma).square().sum(-1) / 2
        return quadratic - softplus((v / sigma) @ self.weight + self.hidden_bias).sum(-1)

    def score_and_laplacian(self, v: torch.Tensor, *, kink_bandwidth: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(∇_v log p̃(v) [B, V], Σ_i ∂² log p̃/∂v_i² [B])`` for ``v [B, V]``, what score matching needs (Hyvärinen 2005),
        from the free energy above (``log p̃ = −F``). With ``a = c + (v/σ) W`` and ``p = sigmoid(a)`` (the hidden
        probabilities), ``∂a_j/∂v_i = W_ij/σ_i`` and ``d softplus/da = p``, ``d² softplus/da² = p (1 − p)``, so

            ∇_v log p̃ = −(v − b)/σ² + (p Wᵀ)/σ
            Σ_i ∂² log p̃/∂v_i² = −Σ_i 1/σ_i² + Σ_j p_j (1 − p_j) Σ_i W_ij²/σ_i²

        ``kink_bandwidth`` (the smoothing of a non-differentiable energy's kinks, see
        :class:`~pfzoo.models.ProductOfExperts`) is unused: the density is smooth. Unchecked, differentiable in the
        parameters (σ included when it is learned)."""
        inverse_sigma = (-self.log_sigma).exp()
        scaled_weight = self.weight * inverse_sigma[:, None]  # W_ij / σ_i
        hidden_probs = torch.sigmoid(v @ scaled_weight + self.hidden_bias)
        score = hidden_probs @ scaled_weight.T - (v - self.visible_bias) * inverse_sigma.square()
        curvature = (hidden_probs * (1 - hidden_probs)) @ scaled_weight.square().sum(0)
        return score, curvature - inverse_sigma.square().sum()

    def tempered_log_density(self, v: torch.Tensor, *, beta: float | torch.Tensor = 1.0) -> torch.Tensor:
        """``log f_β(v) = −β Σ_i (v_i − b_i)²/(2σ_i²) + Σ_j softplus(β (c + (v/σ) W)_j)`` (``p_β(v, h) ∝ exp(−β E(v, h))``
        with ``h`` summed out) for ``v [B, V]`` and β > 0: float64 ``[B]`` for β a number, ``[B, K]`` for β a ``[B, K]``
        tensor. Not validated."""
        return self.tempered_log_density_from_input(v, self.hidden_input(v), beta=beta)

    def tempered_log_density_from_input(self, v: torch.Tensor, hidden_input: torch.Tensor, *,
                                        beta: float | torch.Tensor = 1.0) -> torch.Tensor:
        """:meth:`tempered_log_density` of ``v [B, V]`` given its :meth:`hidden_input` ``[B, H]``. Not validated."""
        quadratic = ((v - self.visible_bias) / self.sigma).square().sum(-1, dtype=torch.float64) / 2
        if not torch.is_tensor(beta):
            return softplus(beta * hidden_input).sum(-1, dtype=torch.float64) - beta * quadratic
        scaled = beta.to(hidden_input.dtype)[:, :, None] * hidden_input[:, None, :]  # [B, K, H]
        return softplus(scaled).sum(-1, dtype=torch.float64) - beta * quadratic[:, None]

    # ---- conditionals -------------------------------------------------------------------
    # ``hidden_probs``/``visible_mean``/``draw_*`` are the unchecked hot-loop primitives used by
    # kernels and trainers; the public ``sample_*`` methods validate their input first.

    def hidden_input(self, v: torch.Tensor) -> torch.Tensor:
        """``c + (v/σ) W`` ``[B, H]`` of ``v [B, V]``, what the hidden conditional and the tempered log density at every β
        share. Not validated."""
        return (v / self.sigma) @ self.weight + self.hidden_bias

    def hidden_probs(self, v: torch.Tensor, *, beta: float = 1.0) -> torch.Tensor:
        """``p_β(h = 1 | v) = sigmoid(β (c + (v/σ) W))``, ``[B, H]``; β a number or a ``[B, 1]`` tensor. Not validated."""
        return torch.sigmoid(beta * self.hidden_input(v))

    def visible_mean(self, h: torch.Tensor) -> torch.Tensor:
        """``E[v | h] = b + σ ⊙ (W h)``, ``[B, V]``, the same at every β. Inputs are not validated."""
        return self.visible_bias + self.sigma * (h @ self.weight.T)

    def draw_hidden(self, v: torch.Tensor, *, beta: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
        """A sample ``h ~ p_β(h | v)``, ``[B, H]``. Inputs are not validated."""
        return self.draw_hidden_from_input(self.hidden_input(v), beta=beta, generator=generator)

    def draw_hidden_from_input(self, hidden_input: torch.Tensor, *, beta: float = 1.0,
                               generator: torch.Generator | None = None) -> torch.Tensor:
        """:meth:`draw_hidden` given the states' :meth:`hidden_input` ``[B, H]``. Inputs are not validated."""
        return bernoulli(torch.sigmoid(beta * hidden_input), generator=generator)

    @torch.no_grad()
    def draw_visible(self, h: torch.Tensor, *, beta: float | torch.Tensor = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
        """A sample ``v ~ N(b + σ ⊙ (W h), σ²/β)``, ``[B, V]`` (no gradient); β a number or a ``[B, 1]`` tensor (one per
        row). Inputs are not validated; needs β > 0."""
        mean = self.visible_mean(h)
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        return mean + (self.sigma / (beta.sqrt() if torch.is_tensor(beta) else math.sqrt(beta))) * noise

    def check_sampler_beta(self, beta: float) -> float:
        """Require 0 < β ≤ 1: ``p_β`` of a Gaussian visible layer is improper at β = 0."""
        beta = check_finite_number(beta, "beta")
        if not 0.0 < beta <= 1.0:
            raise ValueError(f"beta must lie in (0, 1] for a Gaussian–Bernoulli RBM (p_β is improper at beta = 0), got {beta}")
        return beta

    # ---- partition function -------------------------------------------------------------

    @property
    def log_partition_cost(self) -> int:
        return self.num_hidden

    @torch.no_grad()
    def log_partition(self) -> torch.Tensor:
        """Exact ``log Z`` (float64 scalar) by enumerating the hidden layer in chunks.

        For fixed ``h`` with ``u = W h``, the Gaussian integral over ``v`` is

            ∫ exp(-Σ_i (v_i - b_i)²/(2σ_i²) + Σ_i (v_i/σ_i) u_i) dv = Π_i √(2π) σ_i exp(b_i u_i / σ_i + u_i²/2),

        so ``log Z = Σ_i log(√(2π) σ_i) + logsumexp_h [c·h + Σ_i (b_i u_i / σ_i + u_i²/2)]``.
        Costs ``2^H`` matrix-vector products.
        """
        self.check_computable()
        weight_t = self.weight.double().T
        hidden_bias = self.hidden_bias.double()
        scaled_visible_bias = self.visible_bias.double() / self.log_sigma.double().exp()

        def log_f(states: torch.Tensor) -> torch.Tensor:
            u = states @ weight_t
            return states @ hidden_bias + u @ scaled_visible_bias + u.square().sum(-1) / 2

        log_sum = logsumexp_over_binary_states(
            self.num_hidden, log_f, width=self.num_visible, max_units=self.max_enumeration_units, device=self.device
        )
        gaussian_term = self.num_visible * _HALF_LOG_2PI + self.log_sigma.double().sum()
        return gaussian_term + log_sum

    # ---- annealing ----------------------------------------------------------------------

    def annealing_base(
        self, kind: str = "uniform", data: torch.Tensor | None = None, *, smoothing: float = 1.0
    ) -> "GaussianBernoulliRBM":
        """A tractable GBRBM with ``W = 0``, ``c = 0`` and this model's σ, to anneal from.

        Its visible units are independent ``N(b_0, σ²)`` and its hidden units uniform, so
        ``log Z_0 = Σ_i log(√(2π) σ_i) + H log 2``. The base shares σ with the target because
        :class:`~pfzoo.paths.gaussian_rbm.GaussianRBMGeometricPath` interpolates means, not variances.

        ``kind="uniform"``: ``b_0 = b``, the model's own visible means.
        ``kind="base_rate"``: ``b_0 = (Σ_n v_n + smoothing · b) / (N + smoothing)``, the mean of
        ``data [N, V]`` shrunk towards ``b`` by ``smoothing`` pseudo-observations (≥ 0).
        """
        zeros_w = torch.zeros_like(self.weight)
        zeros_c = torch.zeros_like(self.hidden_bias)
        log_sigma = self.log_sigma.detach()
        if kind == "uniform":
            return GaussianBernoulliRBM.from_tensors(zeros_w, self.visible_bias.detach(), zeros_c, log_sigma)
        if kind == "base_rate":
            if data is None:
                raise ValueError("annealing_base(kind='base_rate') needs data [N, V] to take visible means from")
            if not smoothing >= 0:
                raise ValueError(f"smoothing must be non-negative (a pseudo-count), got {smoothing}")
            self.check_visible(data, "data")
            if data.shape[0] == 0 and smoothing == 0:
                raise ValueError("data must have at least one row when smoothing=0 (the mean of no examples is undefined)")
            mean = (data.sum(0) + smoothing * self.visible_bias.detach()) / (data.shape[0] + smoothing)
            return GaussianBernoulliRBM.from_tensors(zeros_w, mean, zeros_c, log_sigma)
        raise ValueError(f"kind must be 'uniform' or 'base_rate', got {kind!r}")
