"""Bernoulli–Bernoulli restricted Boltzmann machine."""

from __future__ import annotations

from typing import Any, Iterator

import torch
from torch import nn
from torch.nn import functional as F

from pfzoo.logmath import softplus
from pfzoo.models.bipartite import BipartiteModel
from pfzoo.models.capabilities import Capability
from pfzoo.models.centering import center_chain_gradients
from pfzoo.models.enumeration import binary_configurations, logsumexp_over_binary_states, sample_binary_states
from pfzoo.models.registry import register_model
from pfzoo.sampling import bernoulli_logits
from pfzoo.validation import all_finite, check_finite_number, check_model_dtype, check_positive_int, check_tensors

DEFAULT_MAX_ENUMERATION_UNITS = 25

EXACT_SAMPLING_UNITS = 20
"""The largest smaller layer :meth:`RBM.exact_samples` enumerates: 2^20 log-probabilities (8 MiB) and as many
matrix-vector products, about a second on a CPU for 784 visible units."""


@register_model("rbm")
class RBM(BipartiteModel):
    """Binary RBM with energy ``E(v, h) = -vᵀWh - b·v - c·h``, ``v ∈ {0,1}^V``, ``h ∈ {0,1}^H``.

    Parameters: ``weight [V, H]`` (W), ``visible_bias [V]`` (b), ``hidden_bias [H]`` (c).
    At inverse temperature β the conditionals are ``p(h_j = 1 | v) = σ(β (vW + c)_j)`` and
    ``p(v_i = 1 | h) = σ(β (Wh + b)_i)``.

    Args:
        num_visible: V.
        num_hidden: H.
        init_std: standard deviation of the Gaussian initial weights (biases start at 0).
        max_enumeration_units: :meth:`log_partition` refuses to enumerate more than
            ``2**max_enumeration_units`` configurations of the smaller layer.
        generator: random generator for the initial weights.
    """

    family_capabilities = frozenset({
        Capability.BINARY_STATES, Capability.BLOCK_GIBBS, Capability.VISIBLE_GIBBS_CHAIN, Capability.HIDDEN_CHAIN,
        Capability.POSTERIOR_PROPOSAL, Capability.RECONSTRUCTION, Capability.CENTERING, Capability.HIDDEN_MEANS,
    })
    path_family = "rbm"

    def __init__(
        self,
        num_visible: int,
        num_hidden: int,
        *,
        init_std: float = 0.01,
        max_enumeration_units: int = DEFAULT_MAX_ENUMERATION_UNITS,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.num_visible = check_positive_int(num_visible, "num_visible")
        self.num_hidden = check_positive_int(num_hidden, "num_hidden")
        init_std = check_finite_number(init_std, "init_std", minimum=0.0)
        self.max_enumeration_units = check_positive_int(max_enumeration_units, "max_enumeration_units")
        self.weight = nn.Parameter(torch.randn(num_visible, num_hidden, generator=generator) * init_std)
        self.visible_bias = nn.Parameter(torch.zeros(num_visible))
        self.hidden_bias = nn.Parameter(torch.zeros(num_hidden))

    def extra_repr(self) -> str:
        """The sizes, shown by ``repr``: ``RBM(...)``."""
        return f"num_visible={self.num_visible}, num_hidden={self.num_hidden}"

    @classmethod
    def from_tensors(
        cls,
        weight: torch.Tensor,
        visible_bias: torch.Tensor,
        hidden_bias: torch.Tensor,
        *,
        max_enumeration_units: int = DEFAULT_MAX_ENUMERATION_UNITS,
    ) -> "RBM":
        """An RBM holding copies of ``weight [V, H]``, ``visible_bias [V]``, ``hidden_bias [H]``."""
        check_tensors(weight=weight, visible_bias=visible_bias, hidden_bias=hidden_bias)
        if weight.dim() != 2:
            raise ValueError(f"weight must have shape [V, H], got {tuple(weight.shape)}")
        num_visible, num_hidden = weight.shape
        if visible_bias.shape != (num_visible,):
            raise ValueError(f"visible_bias must have shape [{num_visible}], got {tuple(visible_bias.shape)}")
        if hidden_bias.shape != (num_hidden,):
            raise ValueError(f"hidden_bias must have shape [{num_hidden}], got {tuple(hidden_bias.shape)}")
        for name, tensor in (("weight", weight), ("visible_bias", visible_bias), ("hidden_bias", hidden_bias)):
            if not all_finite(tensor):
                raise ValueError(f"{name} contains NaN or infinite values")
        model = cls(num_visible, num_hidden, init_std=0.0, max_enumeration_units=max_enumeration_units)
        model.to(device=weight.device, dtype=check_model_dtype(weight.dtype, "weight"))
        with torch.no_grad():
            model.weight.copy_(weight)
            model.visible_bias.copy_(visible_bias)
            model.hidden_bias.copy_(hidden_bias)
        return model

    @classmethod
    def from_sklearn(cls, estimator: Any, *, max_enumeration_units: int = DEFAULT_MAX_ENUMERATION_UNITS) -> "RBM":
        """The RBM of a fitted scikit-learn ``BernoulliRBM``, exactly. scikit-learn's energy is
        ``E(v, h) = −hᵀ C v − a·v − c·h`` with ``C = components_ [H, V]``, ``a = intercept_visible_ [V]`` and
        ``c = intercept_hidden_ [H]``: ours with ``weight = Cᵀ``, ``visible_bias = a``, ``hidden_bias = c``, so free
        energies (its ``_free_energy``) and hidden probabilities (its ``transform``) agree. Tensors keep the estimator's dtype (float64 unless fitted on float32).
        An unfitted or misshapen estimator is refused in one line."""
        arrays = {name: getattr(estimator, name, None) for name in ("components_", "intercept_visible_", "intercept_hidden_")}
        absent = [name for name, value in arrays.items() if value is None]
        if absent:
            raise ValueError(f"estimator must be a fitted sklearn BernoulliRBM; {type(estimator).__name__} has no {', '.join(absent)}")
        weight, visible_bias, hidden_bias = (torch.as_tensor(arrays[name]).clone() for name in arrays)
        if weight.dim() != 2:
            raise ValueError(f"estimator.components_ must have shape [H, V], got {tuple(weight.shape)}")
        return cls.from_tensors(weight.T, visible_bias, hidden_bias, max_enumeration_units=max_enumeration_units)

    def to_sklearn(self, **params: Any) -> Any:
        """This RBM as a fitted scikit-learn ``BernoulliRBM`` (``n_components = H``; ``params``: its other constructor
        arguments, e.g. ``learning_rate``, ``batch_size`` for further ``partial_fit``), the inverse of :meth:`from_sklearn`:
        ``components_ = weightᵀ [H, V]``, ``intercept_visible_ [V]``, ``intercept_hidden_ [H]`` as numpy arrays of the
        model's dtype, ``n_features_in_ = V`` and zeroed persistent chains ``h_samples_ [batch_size, H]`` as its ``fit``
        leaves them at the start. scikit-learn is imported here, only when asked for."""
        from sklearn.neural_network import BernoulliRBM  # imported here: scikit-learn is slow to import and optional here

        if "n_components" in params:
            raise ValueError(f"n_components is the RBM's num_hidden ({self.num_hidden}); leave it out of to_sklearn's params")
        estimator = BernoulliRBM(n_components=self.num_hidden, **params)
        weight = self.weight.detach().cpu()
        estimator.components_ = weight.T.contiguous().numpy().copy()
        estimator.intercept_visible_ = self.visible_bias.detach().cpu().numpy().copy()
        estimator.intercept_hidden_ = self.hidden_bias.detach().cpu().numpy().copy()
        estimator.n_features_in_ = self.num_visible
        estimator.h_samples_ = torch.zeros(estimator.batch_size, self.num_hidden, dtype=weight.dtype).numpy()
        estimator._n_features_out = self.num_hidden  # what sklearn's fit sets for get_feature_names_out
        return estimator

    def visible_filters(self) -> torch.Tensor:
        """``[K, V]``: ``self.weight.T``, detached."""
        return self.weight.T.detach()

    def config(self) -> dict:
        return {
            "num_visible": self.num_visible,
            "num_hidden": self.num_hidden,
            "max_enumeration_units": self.max_enumeration_units,
        }

    # ---- input checks -------------------------------------------------------------------

    # ---- energies -----------------------------------------------------------------------

    def energy(self, v: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """``E(v, h) = -vᵀWh - b·v - c·h`` for ``v [B, V]``, ``h [B, H]`` → ``[B]``."""
        self.check_visible(v)
        self.check_hidden(h)
        return -((v @ self.weight) * h).sum(-1) - v @ self.visible_bias - h @ self.hidden_bias

    def free_energy(self, v: torch.Tensor) -> torch.Tensor:
        """``F(v) = -b·v - Σ_j softplus((vW + c)_j)`` for ``v [B, V]`` → ``[B]``."""
        self.check_visible(v)
        return -v @ self.visible_bias - softplus(v @ self.weight + self.hidden_bias).sum(-1)

    def tempered_log_density(self, v: torch.Tensor, *, beta: float | torch.Tensor = 1.0) -> torch.Tensor:
        """``log f_β(v) = β b·v + Σ_j softplus(β (vW + c)_j)`` (``p_β(v, h) ∝ exp(−β E(v, h))`` with ``h`` summed out) for
        ``v [B, V]``: float64 ``[B]`` for β a number, ``[B, K]`` for β a ``[B, K]`` tensor. Not validated."""
        return self.tempered_log_density_from_input(v, self.hidden_input(v), beta=beta)

    def tempered_log_density_from_input(self, v: torch.Tensor, hidden_input: torch.Tensor, *,
                                        beta: float | torch.Tensor = 1.0) -> torch.Tensor:
        """:meth:`tempered_log_density` of ``v [B, V]`` given its :meth:`hidden_input` ``[B, H]``. Not validated."""
        visible_term = (v @ self.visible_bias).double()
        if not torch.is_tensor(beta):
            return beta * visible_term + softplus(beta * hidden_input).sum(-1, dtype=torch.float64)
        scaled = beta.to(hidden_input.dtype)[:, :, None] * hidden_input[:, None, :]  # [B, K, H]
        return beta * visible_term[:, None] + softplus(scaled).sum(-1, dtype=torch.float64)

    def flip_free_energy_gaps(self, v: torch.Tensor, units: torch.Tensor | None = None) -> torch.Tensor:
        """``F(v⁽ⁱ⁾) - F(v)`` for single-unit flips of ``v [B, V]``: all V units (→ ``[B, V]``) or ``units [B, k]`` (→ ``[B, k]``).

        Flipping visible unit i by ``d_i = 1 - 2v_i`` moves the hidden input ``a = vW + c`` to ``a + d_i W_i``, so
        ``F(v⁽ⁱ⁾) - F(v) = -d_i b_i - Σ_j [softplus(a_j + d_i W_ij) - softplus(a_j)]`` (MPF for RBMs with the
        hidden units summed out, thesis appendix F). Builds a ``[B, k, H]`` tensor; not validated.
        """
        hidden_input = v @ self.weight + self.hidden_bias
        direction = 1 - 2 * v
        if units is None:
            rows, bias = self.weight, self.visible_bias
        else:
            direction = direction.gather(1, units)
            rows, bias = self.weight[units], self.visible_bias[units]
        moved = hidden_input.unsqueeze(-2) + direction.unsqueeze(-1) * rows
        return -direction * bias - (F.softplus(moved) - F.softplus(hidden_input).unsqueeze(-2)).sum(-1)

    def block_free_energies(self, v: torch.Tensor, blocks: torch.Tensor) -> torch.Tensor:
        """``F`` of ``v [B, V]`` with each index set's units set to each of their configurations: ``blocks [m, s]`` (shared)
        or ``[B, m, s]`` (per row) → ``[B, m, 2^s]`` (the layout of :meth:`EnergyModel.block_free_energies`).

        Setting the units S to c moves the hidden input ``a = vW + c_h`` to ``a + c W_S − v_S W_S``, so
        ``F = −b·v − (c − v_S)·b_S − Σ_j softplus(a_j + (c W_S)_j − (v_S W_S)_j)``: the configurations' products ``c W_S``
        once per set (shared sets), then one ``[B, m, 2^s, H]`` softplus instead of the free energies of ``B·m·2^s``
        whole states. Not validated.
        """
        num_rows = v.shape[0]
        shared = blocks.dim() == 2
        sets = blocks.expand(num_rows, -1, -1)
        num_sets, size = sets.shape[1:]
        configurations = binary_configurations(size, dtype=v.dtype, device=v.device)  # [C, s]
        current = v.gather(1, sets.reshape(num_rows, -1)).reshape(num_rows, num_sets, size)  # v_S [B, m, s]
        rows, biases = self.weight[blocks], self.visible_bias[blocks]  # W_S [(B,) m, s, H], b_S [(B,) m, s]
        pattern = "ms" if shared else "bms"
        current_input = torch.einsum(f"bms,{pattern}h->bmh", current, rows)  # v_S W_S [B, m, H]
        configuration_input = torch.einsum(f"cs,{pattern}h->{pattern[:-1]}ch", configurations, rows)  # c W_S [(B,) m, C, H]
        moved = (v @ self.weight + self.hidden_bias)[:, None, None, :] - current_input.unsqueeze(2) + configuration_input
        visible = ((v @ self.visible_bias)[:, None] - (current * biases).sum(-1)).unsqueeze(-1)  # b·v − b_S·v_S [B, m, 1]
        visible = visible + torch.einsum(f"cs,{pattern}->{pattern[:-1]}c", configurations, biases)  # + b_S·c
        return -visible - F.softplus(moved).sum(-1)

    # ---- conditionals -------------------------------------------------------------------
    # ``hidden_probs``/``visible_probs``/``draw_*`` are the unchecked hot-loop primitives used by
    # kernels and trainers; the public ``sample_*`` methods validate their input first.

    def hidden_probs(self, v: torch.Tensor, *, beta: float = 1.0) -> torch.Tensor:
        """``p(h = 1 | v) = σ(β (vW + c))``, ``[B, H]``; β a number or a ``[B, 1]`` tensor. Inputs are not validated."""
        return torch.sigmoid(_tempered(self.hidden_input(v), beta))

    def visible_probs(self, h: torch.Tensor, *, beta: float = 1.0) -> torch.Tensor:
        """``p(v = 1 | h) = σ(β (Wh + b))``, ``[B, V]``; β a number or a ``[B, 1]`` tensor. Inputs are not validated."""
        return torch.sigmoid(_tempered(torch.addmm(self.visible_bias, h, self.weight.T), beta))

    def reconstruct(self, v: torch.Tensor) -> torch.Tensor:
        """Mean-field reconstruction ``σ(σ(vW + c) Wᵀ + b)`` of ``v [B, V]`` → ``[B, V]``. Not validated."""
        return self.visible_probs(self.hidden_probs(v))

    def hidden_input(self, v: torch.Tensor) -> torch.Tensor:
        """``vW + c`` ``[B, H]`` of ``v [B, V]``, what the hidden conditional and the tempered log density at every β share.
        Not validated."""
        return torch.addmm(self.hidden_bias, v, self.weight)

    def draw_hidden(self, v: torch.Tensor, *, beta: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
        """A sample ``h ~ p_β(h | v)``, ``[B, H]``. Inputs are not validated."""
        return self.draw_hidden_from_input(self.hidden_input(v), beta=beta, generator=generator)

    def draw_hidden_from_input(self, hidden_input: torch.Tensor, *, beta: float = 1.0,
                               generator: torch.Generator | None = None) -> torch.Tensor:
        """:meth:`draw_hidden` given the states' :meth:`hidden_input` ``[B, H]``. Inputs are not validated."""
        return bernoulli_logits(_tempered(hidden_input, beta), generator=generator)

    def draw_visible(self, h: torch.Tensor, *, beta: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
        """A sample ``v ~ p_β(v | h)``, ``[B, V]``. Inputs are not validated."""
        return bernoulli_logits(_tempered(torch.addmm(self.visible_bias, h, self.weight.T), beta), generator=generator)

    # ---- centering (Capability.CENTERING) ---------------------------------------------------

    def layer_means(self, v: torch.Tensor) -> list[torch.Tensor]:
        """Each layer's mean over ``v [B, V]``, hidden units at their conditional means: ``[v̄ [V], mean p(h | v) [H]]``
        (the data offsets of centering). Not validated."""
        return [v.mean(0), self.hidden_probs(v).mean(0)]

    def center_gradients(self, offsets: list[torch.Tensor]) -> None:
        """Replace the plain gradients in ``.grad`` by the centered update on ``offsets = [μ [V], λ [H]]``
        (:func:`~pfzoo.models.centering.center_chain_gradients`: ``G̃_W = G_W − μ G_cᵀ − G_b λᵀ``, ``G_b − G̃_W λ``,
        ``G_c − G̃_Wᵀ μ``). The model stays an ordinary RBM; only the direction of its updates changes."""
        center_chain_gradients([self.weight], [self.visible_bias, self.hidden_bias], offsets)

    # ---- chains for sampling-based likelihoods (CSL) --------------------------------------

    def log_prob_visible_given_hidden(self, v: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """``log p(v_b | h_s)`` for every pair: ``v [B, V]``, ``hidden [S, H]`` → float64 ``[B, S]``.

        With ``a_s = W h_s + b``: ``log p(v | h_s) = v·a_s - Σ_i softplus(a_s,i)``.
        """
        self.check_visible(v)
        self.check_hidden(hidden, "hidden")
        logits = self.visible_logits(hidden).double()
        return v.double() @ logits.T - F.softplus(logits).sum(-1)

    def visible_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits ``W h + b`` of ``p(v = 1 | h)`` for ``hidden [S, H]`` → ``[S, V]``. Not validated."""
        return hidden @ self.weight.T + self.visible_bias

    @torch.no_grad()
    def hidden_chain(self, initial_visible: torch.Tensor, *, generator: torch.Generator | None = None) -> Iterator[torch.Tensor]:
        """Endless block Gibbs chains from ``initial_visible [C, V]``; each step yields the hidden states ``[C, H]``."""
        kernel, target = self.gibbs_chain()
        state = kernel.init(self.check_visible(initial_visible, "initial_visible"), target)
        while True:
            state, _ = kernel.step(state, target, generator=generator)
            yield state.hidden

    @torch.no_grad()
    def exact_samples(self, num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor | None:
        """Exact samples ``[num_samples, V]`` when the smaller layer has at most :data:`EXACT_SAMPLING_UNITS` units:
        that layer is drawn from its marginal by enumeration (``p(h) ∝ exp(c·h + Σ_i softplus((Wh + b)_i))``, or the
        same with the roles swapped), then the visible layer from ``p(v | h)`` (no second step when the visible layer
        was enumerated). ``None`` for larger models."""
        check_positive_int(num_samples, "num_samples")
        if self.log_partition_cost > EXACT_SAMPLING_UNITS:
            return None
        weight = self.weight.double()
        if self.num_hidden <= self.num_visible:
            def log_marginal(h: torch.Tensor) -> torch.Tensor:
                return h @ self.hidden_bias.double() + F.softplus(h @ weight.T + self.visible_bias.double()).sum(-1)

            hidden = sample_binary_states(self.num_hidden, log_marginal, num_samples, width=self.num_visible, device=self.device,
                                          generator=generator)
            return self.draw_visible(hidden.to(self.dtype), generator=generator)

        def log_free(v: torch.Tensor) -> torch.Tensor:
            return v @ self.visible_bias.double() + F.softplus(v @ weight + self.hidden_bias.double()).sum(-1)

        return sample_binary_states(self.num_visible, log_free, num_samples, width=self.num_hidden, device=self.device,
                                    generator=generator).to(self.dtype)

    # ---- partition function -------------------------------------------------------------

    @property
    def log_partition_cost(self) -> int:
        return min(self.num_visible, self.num_hidden)

    @torch.no_grad()
    def log_partition(self) -> torch.Tensor:
        """Exact ``log Z`` (float64 scalar) by enumerating the smaller layer in chunks.

        Enumerating ``h``: ``log Z = logsumexp_h [c·h + Σ_i softplus((Wh + b)_i)]``; enumerating ``v``
        is the same with the roles swapped. Costs ``2^min(V, H)`` matrix-vector products.
        """
        self.check_computable()
        weight = self.weight.double()
        if self.num_hidden <= self.num_visible:
            enumerated_bias, other_bias, coupling = self.hidden_bias.double(), self.visible_bias.double(), weight.T
        else:
            enumerated_bias, other_bias, coupling = self.visible_bias.double(), self.hidden_bias.double(), weight

        def log_f(states: torch.Tensor) -> torch.Tensor:
            return states @ enumerated_bias + F.softplus(states @ coupling + other_bias).sum(-1)

        return logsumexp_over_binary_states(
            enumerated_bias.shape[0], log_f, width=coupling.shape[1], max_units=self.max_enumeration_units, device=self.device
        )

    # ---- annealing ----------------------------------------------------------------------

    def annealing_base(self, kind: str = "uniform", data: torch.Tensor | None = None, *, smoothing: float = 1.0) -> "RBM":
        """A tractable RBM with ``W = 0`` to anneal from.

        ``kind="uniform"``: all parameters zero (``log Z_0 = (V + H) log 2``).
        ``kind="base_rate"``: visible biases ``logit(p)`` with ``p = (Σ_n v_n + smoothing) / (N + 2 smoothing)``
        the smoothed pixel means of ``data [N, V]`` (Salakhutdinov & Murray 2008), hidden biases 0.
        """
        zeros_w = torch.zeros_like(self.weight)
        zeros_c = torch.zeros_like(self.hidden_bias)
        if kind == "uniform":
            return RBM.from_tensors(zeros_w, torch.zeros_like(self.visible_bias), zeros_c)
        if kind == "base_rate":
            if data is None:
                raise ValueError("annealing_base(kind='base_rate') needs data [N, V] to take pixel means from")
            return RBM.from_tensors(zeros_w, base_rate_visible_bias(self.check_visible(data, "data"), smoothing), zeros_c)
        raise ValueError(f"kind must be 'uniform' or 'base_rate', got {kind!r}")

    @torch.no_grad()
    def init_from_data(self, data: torch.Tensor, *, smoothing: float = 1.0) -> None:
        """Set the visible biases to the base-rate logits of ``data [N, V]`` (Hinton 2010, practical guide §8.1)."""
        self.visible_bias.copy_(base_rate_visible_bias(self.check_visible(data, "data"), smoothing))


def base_rate_visible_bias(data: torch.Tensor, smoothing: float = 1.0) -> torch.Tensor:
    """``logit(p)`` of the smoothed pixel means ``p = (Σ_n v_n + smoothing) / (N + 2 smoothing)``, ``[V]``.

    ``smoothing`` is a pseudo-count per outcome; it keeps the biases finite for pixels that are
    constant in the data.
    """
    if smoothing <= 0:
        raise ValueError(f"smoothing must be positive (a pseudo-count), got {smoothing}")
    p = (data.sum(0) + smoothing) / (data.shape[0] + 2 * smoothing)
    return torch.logit(p)


def _tempered(logits: torch.Tensor, beta: float | torch.Tensor) -> torch.Tensor:
    """``β · logits``; at the number β = 1 (every untempered draw: training, sampling) the logits themselves, one pass
    fewer in the Gibbs sweep's hot loop."""
    return logits if not torch.is_tensor(beta) and beta == 1 else beta * logits
