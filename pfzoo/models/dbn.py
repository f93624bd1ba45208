"""Deep belief net (Hinton, Osindero & Teh 2006): an RBM on top of directed sigmoid belief layers."""

from __future__ import annotations

from typing import Iterator, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from pfzoo.kernels import run_chain
from pfzoo.models.capabilities import Capability
from pfzoo.models.base import EnergyModel, PathStateProposal
from pfzoo.models.enumeration import logsumexp_over_binary_states
from pfzoo.models.rbm import DEFAULT_MAX_ENUMERATION_UNITS, RBM, base_rate_visible_bias
from pfzoo.models.registry import register_model
from pfzoo.sampling import bernoulli
from pfzoo.validation import all_finite, allocates, check_binary, check_finite_number, check_generator, check_layer_sizes, check_model_dtype, check_positive_int, check_tensors


@register_model("dbn")
class DBN(EnergyModel):
    """Binary DBN over layers ``x_0 = v, x_1 = h¹, …, x_L = h^L`` (L ≥ 2), RAISE eq. 3:

        p(v, h¹, …, h^L) = p(v | h¹) p(h¹ | h²) … p(h^{L-2} | h^{L-1}) · p_top(h^{L-1}, h^L)

    Parameters: ``rbms`` (an ``nn.ModuleList``), ``rbms.i`` an :class:`RBM` over ``(x_i, x_{i+1})``
    with ``weight [n_i, n_{i+1}]`` (W_i), ``visible_bias [n_i]`` (b_i), ``hidden_bias [n_{i+1}]`` (c_i).

    - The top one, ``rbms[L-1]``, is an undirected RBM ``p_top(h^{L-1}, h^L) = exp(-E_top) / Z_top``;
      ``Z_top`` is the DBN's partition function.
    - The lower ones are directed sigmoid belief layers. Generative (top-down):
      ``p(x_i | x_{i+1}) = Π_k σ(W_i x_{i+1} + b_i)_k^{x_ik} (1 - σ(…)_k)^{1 - x_ik}``.
      Recognition (bottom-up, the approximate posterior of greedy training):
      ``q(x_{i+1} | x_i) = Π_k Bernoulli(σ(x_i W_i + c_i)_k)``. The hidden bias ``c_i`` of a lower
      RBM is used only for recognition.

    The unnormalised marginal of ``v`` sums the hidden layers out (``h^L`` analytically, inside the
    top RBM's free energy ``F_top``):

        f(v) = Σ_{h¹ … h^{L-1}} p(v | h¹) … p(h^{L-2} | h^{L-1}) exp(-F_top(h^{L-1})),
        log p(v) = log f(v) - log Z_top.

    Args:
        layer_sizes: ``[V, H1, …, HL]``, at least three entries (L ≥ 2). Alternatively give
            ``num_visible`` and ``hidden_sizes`` (how the app instantiates models: it supplies
            ``num_visible`` from the data set); with both ``layer_sizes`` and ``num_visible``
            they must agree.
        num_visible: V (see ``layer_sizes``).
        hidden_sizes: ``[H1, …, HL]`` (see ``layer_sizes``).
        init_std: standard deviation of the Gaussian initial weights (biases start at 0).
        max_enumeration_units: exact ``log Z`` and free energies refuse to enumerate more than
            ``2**max_enumeration_units`` states.
        generator: random generator for the initial weights.
    """

    family_capabilities = frozenset({
        Capability.BINARY_STATES, Capability.BLOCK_GIBBS, Capability.HIDDEN_CHAIN, Capability.POSTERIOR_PROPOSAL, Capability.RBM_STACK,
        Capability.HIDDEN_MEANS,
    })
    path_family = "dbn"

    def __init__(
        self,
        layer_sizes: Sequence[int] | None = None,
        *,
        num_visible: int | None = None,
        hidden_sizes: Sequence[int] | None = None,
        init_std: float = 0.01,
        max_enumeration_units: int = DEFAULT_MAX_ENUMERATION_UNITS,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        layer_sizes = check_layer_sizes(layer_sizes, num_visible, hidden_sizes, min_layers=3)
        init_std = check_finite_number(init_std, "init_std", minimum=0.0)
        self.layer_sizes = layer_sizes
        self.num_visible = layer_sizes[0]
        self.max_enumeration_units = check_positive_int(max_enumeration_units, "max_enumeration_units")
        self.rbms = nn.ModuleList(
            RBM(lower, upper, init_std=init_std, max_enumeration_units=self.max_enumeration_units, generator=generator)
            for lower, upper in zip(layer_sizes[:-1], layer_sizes[1:])
        )

    def extra_repr(self) -> str:
        """The sizes, shown by ``repr``: ``DBN(...)``."""
        return f"layer_sizes={list(self.layer_sizes)}"

    @classmethod
    def from_tensors(
        cls,
        weights: Sequence[torch.Tensor],
        visible_biases: Sequence[torch.Tensor],
        hidden_biases: Sequence[torch.Tensor],
        *,
        max_enumeration_units: int = DEFAULT_MAX_ENUMERATION_UNITS,
    ) -> "DBN":
        """A DBN holding copies of ``weights[i] [n_i, n_{i+1}]``, ``visible_biases[i] [n_i]``, ``hidden_biases[i] [n_{i+1}]``.

        Entry ``i`` of each list is the parameter of ``rbms[i]``; L ≥ 2 entries each.
        """
        weights, visible_biases, hidden_biases = list(weights), list(visible_biases), list(hidden_biases)
        if len(weights) < 2:
            raise ValueError(f"weights must hold L ≥ 2 weight matrices (one per RBM), got {len(weights)}")
        for name, tensors in (("visible_biases", visible_biases), ("hidden_biases", hidden_biases)):
            if len(tensors) != len(weights):
                raise ValueError(f"{name} must hold {len(weights)} vectors (one per weight matrix), got {len(tensors)}")
        for name, tensors in (("weights", weights), ("visible_biases", visible_biases), ("hidden_biases", hidden_biases)):
            for index, tensor in enumerate(tensors):
                check_tensors(**{f"{name}[{index}]": tensor})
        for index, weight in enumerate(weights):
            if weight.dim() != 2:
                raise ValueError(f"weights[{index}] must be a matrix [n_{index}, n_{index + 1}], got shape {tuple(weight.shape)}")
            if index > 0 and weight.shape[0] != weights[index - 1].shape[1]:
                raise ValueError(
                    f"weights[{index}] has {weight.shape[0]} rows but weights[{index - 1}] has "
                    f"{weights[index - 1].shape[1]} columns; consecutive layers must match"
                )
            if visible_biases[index].shape != (weight.shape[0],):
                raise ValueError(f"visible_biases[{index}] must have shape [{weight.shape[0]}], got {tuple(visible_biases[index].shape)}")
            if hidden_biases[index].shape != (weight.shape[1],):
                raise ValueError(f"hidden_biases[{index}] must have shape [{weight.shape[1]}], got {tuple(hidden_biases[index].shape)}")
        for name, tensors in (("weights", weights), ("visible_biases", visible_biases), ("hidden_biases", hidden_biases)):
            for index, tensor in enumerate(tensors):
                if not all_finite(tensor):
                    raise ValueError(f"{name}[{index}] contains NaN or infinite values")
        sizes = [weights[0].shape[0]] + [weight.shape[1] for weight in weights]
        model = cls(sizes, init_std=0.0, max_enumeration_units=max_enumeration_units)
        model.to(device=weights[0].device, dtype=check_model_dtype(weights[0].dtype, "weights[0]"))
        with torch.no_grad():
            for rbm, weight, visible_bias, hidden_bias in zip(model.rbms, weights, visible_biases, hidden_biases):
                rbm.weight.copy_(weight)
                rbm.visible_bias.copy_(visible_bias)
                rbm.hidden_bias.copy_(hidden_bias)
        return model

    @classmethod
    def from_rbms(cls, rbms: Sequence[RBM], *, max_enumeration_units: int = DEFAULT_MAX_ENUMERATION_UNITS) -> "DBN":
        """A DBN holding copies of the parameters of ``rbms`` (bottom first); consecutive sizes must match.

        ``rbms[i].num_hidden`` must equal ``rbms[i + 1].num_visible``; at least two RBMs.
        """
        rbms = list(rbms)
        for index, rbm in enumerate(rbms):
            if not isinstance(rbm, RBM):
                raise ValueError(f"rbms[{index}] must be a binary pfzoo.models.RBM, got {type(rbm).__name__}")
        if len(rbms) < 2:
            raise ValueError(f"rbms must hold at least two RBMs (a DBN with one RBM is that RBM), got {len(rbms)}")
        for index in range(1, len(rbms)):
            if rbms[index].num_visible != rbms[index - 1].num_hidden:
                raise ValueError(
                    f"rbms[{index}] has {rbms[index].num_visible} visible units but rbms[{index - 1}] has "
                    f"{rbms[index - 1].num_hidden} hidden units; consecutive sizes must match"
                )
        return cls.from_tensors(
            [rbm.weight.detach() for rbm in rbms],
            [rbm.visible_bias.detach() for rbm in rbms],
            [rbm.hidden_bias.detach() for rbm in rbms],
            max_enumeration_units=max_enumeration_units,
        )

    def visible_filters(self) -> torch.Tensor:
        """``[K, V]``: ``self.rbms[0].weight.T``, detached."""
        return self.rbms[0].weight.T.detach()

    def config(self) -> dict:
        return {"layer_sizes": list(self.layer_sizes), "max_enumeration_units": self.max_enumeration_units}

    # ---- layers -------------------------------------------------------------------------

    @property
    def num_layers(self) -> int:
        """Number of layers including the visible one (L + 1)."""
        return len(self.layer_sizes)

    @property
    def top(self) -> RBM:
        """The undirected top RBM over ``(h^{L-1}, h^L)``."""
        return self.rbms[-1]

    def check_layers(self, layers: Sequence[torch.Tensor]) -> None:
        """Raise ``ValueError`` unless ``layers`` are binary ``[B, n_i]`` tensors, one per layer, equal batch sizes."""
        if len(layers) != self.num_layers:
            raise ValueError(f"expected {self.num_layers} layer states (visible first), got {len(layers)}")
        for index, (layer, size) in enumerate(zip(layers, self.layer_sizes)):
            check_binary(layer, f"layer {index}", width=size, device=self.device, dtype=self.dtype)
            if layer.shape[0] != layers[0].shape[0]:
                raise ValueError(f"layer {index} has batch size {layer.shape[0]}, layer 0 has {layers[0].shape[0]}")

    # ---- directed layers (unchecked fast paths) -----------------------------------------

    def generative_logits(self, index: int, upper: torch.Tensor) -> torch.Tensor:
        """Logits of ``p(x_index | x_{index+1})``: ``x_{index+1} W_indexᵀ + b_index``, ``[B, n_index]``. Not validated."""
        rbm = self.rbms[index]
        return upper @ rbm.weight.T + rbm.visible_bias

    def recognition_logits(self, index: int, lower: torch.Tensor) -> torch.Tensor:
        """Logits of ``q(x_{index+1} | x_index)``: ``x_index W_index + c_index``, ``[B, n_{index+1}]``. Not validated."""
        rbm = self.rbms[index]
        return lower @ rbm.weight + rbm.hidden_bias

    def _log_generative(self, index: int, lower: torch.Tensor, upper: torch.Tensor) -> torch.Tensor:
        """``log p(x_index = lower | x_{index+1} = upper)``, float64 ``[B]``. Not validated."""
        return _bernoulli_logit_log_prob(lower.double(), self.generative_logits(index, upper).double())

    def _draw_down(
        self, upper_layer: int, upper: torch.Tensor, *, lowest: int = 0, generator: torch.Generator | None
    ) -> list[torch.Tensor]:
        """Ancestral draws ``x_k ~ p(x_k | x_{k+1})`` for k = upper_layer − 1 … lowest from ``x_upper_layer = upper``.

        Returns ``[x_lowest, …, x_{upper_layer−1}]``. Not validated.
        """
        layers = [upper]
        for index in range(upper_layer - 1, lowest - 1, -1):
            layers.append(bernoulli(torch.sigmoid(self.generative_logits(index, layers[-1])), generator=generator))
        return layers[:0:-1]

    # ---- energies -----------------------------------------------------------------------

    def energy(self, *layers: torch.Tensor) -> torch.Tensor:
        """Negative log of the *unnormalised* joint, for layer states ``x_i [B, n_i]`` → float64 ``[B]``:

            E(v, h¹, …, h^L) = -Σ_{i=0}^{L-2} log p(x_i | x_{i+1}) + E_top(h^{L-1}, h^L)

        so ``p(v, h¹, …, h^L) = exp(-E) / Z_top``. This is not a Boltzmann energy (the directed
        factors are normalised conditionals); the only partition function is the top RBM's.
        """
        self.check_layers(layers)
        return self._energy_unchecked(list(layers))

    def _energy_unchecked(self, layers: list[torch.Tensor]) -> torch.Tensor:
        top_visible, top_hidden = (layer.double() for layer in layers[-2:])
        top = self.top
        weight, visible_bias, hidden_bias = top.weight.double(), top.visible_bias.double(), top.hidden_bias.double()
        energy = -((top_visible @ weight) * top_hidden).sum(-1) - top_visible @ visible_bias - top_hidden @ hidden_bias
        for index in range(self.num_layers - 2):
            energy = energy - self._log_generative(index, layers[index], layers[index + 1])
        return energy

    @property
    def free_energy_cost(self) -> int:
        """``log2`` of the number of terms the exact :meth:`free_energy` sums: ``Σ_{i=1}^{L-1} n_i``."""
        return sum(self.layer_sizes[1:-1])

    def free_energy(self, v: torch.Tensor) -> torch.Tensor:
        """Exact ``F(v) = -log f(v)`` for ``v [B, V]`` → float64 ``[B]``, with

            f(v) = Σ_{h¹ … h^{L-1}} p(v | h¹) … p(h^{L-2} | h^{L-1}) exp(-F_top(h^{L-1})),

        ``h^L`` summed out analytically in the top RBM's free energy ``F_top``. Enumerates
        ``h¹ … h^{L-1}`` jointly, ``2^(Σ_{i=1}^{L-1} n_i)`` terms; raises ``ValueError`` above
        ``max_enumeration_units`` (then estimate ``log f(v)`` by importance sampling with
        :meth:`propose_path_state`, or ``log p(v)`` with RAISE, see :mod:`pfzoo.estimators`).
        """
        self.check_visible(v)
        v = v.double()
        sizes = self.layer_sizes[1:-1]  # h¹ … h^{L-1}
        top = self.top
        top_weight, top_visible_bias, top_hidden_bias = top.weight.double(), top.visible_bias.double(), top.hidden_bias.double()
        weights = [rbm.weight.double() for rbm in self.rbms[:-1]]
        visible_biases = [rbm.visible_bias.double() for rbm in self.rbms[:-1]]

        def log_f(states: torch.Tensor) -> torch.Tensor:  # [M, Σ n] → [M, B]
            hidden = list(torch.split(states, sizes, dim=1))
            logits = hidden[0] @ weights[0].T + visible_biases[0]  # [M, V]
            log_terms = (logits @ v.T) - F.softplus(logits).sum(-1, keepdim=True)  # log p(v | h¹), [M, B]
            prior = hidden[-1] @ top_visible_bias + F.softplus(hidden[-1] @ top_weight + top_hidden_bias).sum(-1)  # -F_top
            for index in range(1, len(hidden)):
                prior = prior + _bernoulli_logit_log_prob(hidden[index - 1], hidden[index] @ weights[index].T + visible_biases[index])
            return log_terms + prior[:, None]

        width = max(v.shape[0], max(self.layer_sizes))
        try:
            log_marginal = logsumexp_over_binary_states(
                self.free_energy_cost, log_f, width=width, max_units=self.max_enumeration_units, device=self.device
            )
        except ValueError as error:
            raise ValueError(
                f"exact DBN free energy would enumerate 2^{self.free_energy_cost} hidden states (h¹ … h^(L-1)), above "
                f"max_enumeration_units={self.max_enumeration_units}; estimate log f(v) by importance sampling with "
                f"propose_path_state, or log p(v) with RAISE (pfzoo.estimators)"
            ) from error
        return -log_marginal

    # ---- partition function -------------------------------------------------------------

    @property
    def log_partition_cost(self) -> int:
        return self.top.log_partition_cost

    @torch.no_grad()
    def log_partition(self) -> torch.Tensor:
        """Exact ``log Z_top`` (float64 scalar), the DBN's only normaliser: ``Σ_v f(v) = Z_top``."""
        return self.top.log_partition()

    # ---- recognition, CSL and sampling --------------------------------------------------

    @torch.no_grad()
    def recognize(self, v: torch.Tensor) -> list[torch.Tensor]:
        """Deterministic bottom-up pass ``μ_{i+1} = σ(μ_i W_i + c_i)``, ``μ_0 = v [B, V]`` → ``[μ_1, …, μ_L]``, ``μ_i [B, n_i]``."""
        self.check_visible(v)
        means = [v]
        for index in range(self.num_layers - 1):
            means.append(torch.sigmoid(self.recognition_logits(index, means[-1])))
        return means[1:]

    def hidden_means(self, v: torch.Tensor) -> list[torch.Tensor]:
        """The recognition means ``[μ_1 [B, n_1], …, μ_L [B, n_L]]`` of ``v [B, V]`` (:meth:`recognize`, the bottom-up
        pass; :attr:`Capability.HIDDEN_MEANS`: features for a classifier, as Hinton, Osindero & Teh 2006 read them)."""
        return self.recognize(v)

    def _recognize_top_visible(self, v: torch.Tensor, *, sample: bool, generator: torch.Generator | None) -> torch.Tensor:
        """``h^{L-1}`` from ``v`` through the recognition layers: sampled binary states, or means. Not validated."""
        state = v
        for index in range(self.num_layers - 2):
            probs = torch.sigmoid(self.recognition_logits(index, state))
            state = bernoulli(probs, generator=generator) if sample else probs
        return state

    def log_prob_visible_given_hidden(self, v: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """``log p(v_b | h¹_s)`` for every pair, ``v [B, V]``, ``hidden [S, H1]`` → float64 ``[B, S]``.

        With logits ``a = hidden W_0ᵀ + b_0`` ``[S, V]``: ``v aᵀ - Σ_i softplus(a_i)`` (the CSL
        estimator's ``p(v | h)``, Bengio, Yao & Cho 2013, eq. 3).
        """
        self.check_visible(v)
        check_binary(hidden, "hidden", width=self.layer_sizes[1], device=self.device, dtype=self.dtype)
        with torch.no_grad():
            logits = self.visible_logits(hidden).double()
            return v.double() @ logits.T - F.softplus(logits).sum(-1)[None, :]

    def visible_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits of ``p(v = 1 | h¹)`` for first-hidden-layer states ``[S, H1]`` → ``[S, V]``. Not validated."""
        return self.generative_logits(0, hidden)

    def hidden_chain(self, initial_visible: torch.Tensor, *, generator: torch.Generator | None = None) -> Iterator[torch.Tensor]:
        """An infinite iterator of first-hidden-layer samples ``h¹ [C, H1]``, for the CSL estimator.

        ``C`` chains start from ``h^{L-1}`` sampled through the recognition layers from
        ``initial_visible [C, V]``. Each ``next()`` runs one block Gibbs sweep of the top RBM
        (``h^L ~ p(h^L | h^{L-1})``, ``h^{L-1} ~ p(h^{L-1} | h^L)``) and yields ``h¹`` drawn by ancestral
        sampling down the directed layers from ``h^{L-1}`` (for L = 2, ``h¹`` is the top RBM's visible
        state itself). The marginal of the yielded ``h¹`` converges to the DBN's ``p(h¹)``.
        """
        self.check_visible(initial_visible, "initial_visible")
        check_generator(generator, self.device)
        return self._hidden_chain(initial_visible, generator)

    def _hidden_chain(self, initial_visible: torch.Tensor, generator: torch.Generator | None) -> Iterator[torch.Tensor]:
        kernel, target = self.top.gibbs_chain()
        with torch.no_grad():
            state = kernel.init(self._recognize_top_visible(initial_visible, sample=True, generator=generator), target)
        while True:
            with torch.no_grad():  # not held across the yield: the caller's grad mode is its own
                state, _ = kernel.step(state, target, generator=generator)
                top_visible = state.position
                first = self._draw_down(self.num_layers - 2, top_visible, lowest=1, generator=generator)[0] if self.num_layers > 3 else top_visible
            yield first

    @allocates("num_samples")
    @torch.no_grad()
    def sample(self, num_samples: int, *, num_steps: int = 1000, generator: torch.Generator | None = None) -> torch.Tensor:
        """Approximate samples of the visible layer ``[num_samples, V]``: :meth:`sample_layers`'s first layer (MCMC
        with ``num_steps`` sweeps from random states; see there)."""
        self.check_computable()
        return self.sample_layers(num_samples, num_steps, generator=generator)[0]

    @torch.no_grad()
    def sample_layers(
        self,
        num_samples: int,
        num_steps: int = 1000,
        *,
        initial_visible: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> list[torch.Tensor]:
        """Approximate samples of all layers: ``num_steps`` block Gibbs sweeps in the top RBM, then ancestral sampling down.

        The top chains start from ``h^{L-1}`` sampled through the recognition layers from
        ``initial_visible [num_samples, V]`` or, by default, uniformly at random. After the sweeps,
        ``h^L ~ p_top(h^L | h^{L-1})`` and ``x_i ~ p(x_i | x_{i+1})`` for i = L-2 … 0 (binary draws from
        the generative probabilities). Returns all layers ``[v, h¹, …, h^L]``, ``x_i [num_samples, n_i]``;
        the visible samples are ``sample(...)[0]``.
        """
        check_positive_int(num_samples, "num_samples")
        check_positive_int(num_steps, "num_steps")
        check_generator(generator, self.device)
        top = self.top
        if initial_visible is None:
            state = bernoulli(torch.full((num_samples, top.num_visible), 0.5, device=self.device, dtype=self.dtype), generator=generator)
        else:
            self.check_visible(initial_visible, "initial_visible")
            if initial_visible.shape[0] != num_samples:
                raise ValueError(f"initial_visible must have {num_samples} rows, got {initial_visible.shape[0]}")
            state = self._recognize_top_visible(initial_visible, sample=True, generator=generator)
        kernel, target = top.gibbs_chain()
        state = run_chain(kernel, target, state, num_steps, generator=generator)[0].position
        top_hidden = top.draw_hidden(state, generator=generator)
        return self._draw_down(self.num_layers - 2, state, generator=generator) + [state, top_hidden]

    # ---- annealing and importance sampling ----------------------------------------------

    @torch.no_grad()
    def propose_path_state(
        self, v: torch.Tensor, *, num_samples: int = 1, generator: torch.Generator | None = None
    ) -> PathStateProposal:
        """``h^{L-1}`` drawn through the recognition layers, with its importance weight (RAISE §5.1).

        Samples ``h^{i+1} ~ q(h^{i+1} | h^i)`` for i = 0 … L-2 (``h^0 = v [B, V]``) and returns
        ``state = h^{L-1} [B, n_{L-1}]`` (a state of the top RBM's geometric path) and

            log_weight = Σ_{i=0}^{L-2} log p(h^i | h^{i+1}) - F_top(h^{L-1}) - Σ_{i=0}^{L-2} log q(h^{i+1} | h^i)

        (float64 ``[B]``), so ``E_q[exp(log_weight)] = f(v)``. With ``num_samples`` > 1, every row
        of ``v`` is repeated that many times (example-major) and each copy draws its own path.
        """
        self.check_visible(v)
        check_generator(generator, self.device)
        check_positive_int(num_samples, "num_samples")
        v = v.repeat_interleave(num_samples, dim=0)
        layers = [v]
        log_weight = torch.zeros(v.shape[0], dtype=torch.float64, device=v.device)
        for index in range(self.num_layers - 2):
            logits = self.recognition_logits(index, layers[-1])
            upper = bernoulli(torch.sigmoid(logits), generator=generator)
            log_weight -= _bernoulli_logit_log_prob(upper.double(), logits.double())
            log_weight += self._log_generative(index, layers[-1], upper)
            layers.append(upper)
        log_weight += _rbm_log_marginal(self.top, layers[-1])
        return PathStateProposal(layers[-1], log_weight)

    def annealing_base(self, kind: str = "uniform", data: torch.Tensor | None = None, *, smoothing: float = 1.0) -> RBM:
        """An RBM of the top RBM's shape with zero weights, to anneal ``Z_top`` from.

        ``kind="uniform"``: all parameters zero. ``kind="base_rate"``: visible biases ``logit(p)``
        with ``p = (Σ_n μ_n + smoothing) / (N + 2 smoothing)``, ``μ_n [n_{L-1}]`` the recognition
        means of ``h^{L-1}`` for ``data [N, V]`` (the deterministic bottom-up pass of :meth:`recognize`);
        hidden biases 0.
        """
        top = self.top
        zeros_w, zeros_c = torch.zeros_like(top.weight).detach(), torch.zeros_like(top.hidden_bias).detach()
        if kind == "uniform":
            visible_bias = torch.zeros_like(top.visible_bias).detach()
        elif kind == "base_rate":
            if data is None:
                raise ValueError("annealing_base(kind='base_rate') needs data [N, V] to take the h^(L-1) base rates from")
            self.check_visible(data, "data")
            with torch.no_grad():
                means = self._recognize_top_visible(data, sample=False, generator=None)
                visible_bias = base_rate_visible_bias(means, smoothing).to(top.visible_bias)
        else:
            raise ValueError(f"kind must be 'uniform' or 'base_rate', got {kind!r}")
        return RBM.from_tensors(zeros_w, visible_bias, zeros_c, max_enumeration_units=self.max_enumeration_units)

    @torch.no_grad()
    def init_from_data(self, data: torch.Tensor, *, smoothing: float = 1.0) -> None:
        """Set the bottom RBM's visible biases (the generative biases of ``v``) to the base-rate logits of ``data [N, V]``."""
        self.rbms[0].init_from_data(self.check_visible(data, "data"), smoothing=smoothing)


def _bernoulli_logit_log_prob(x: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """``Σ_k log Bernoulli(x_k; σ(a_k)) = Σ_k [x_k a_k - softplus(a_k)]`` over the last dim, ``[...]``."""
    return (x * logits - F.softplus(logits)).sum(-1)


def _rbm_log_marginal(rbm: RBM, v: torch.Tensor) -> torch.Tensor:
    """``-F(v) = b·v + Σ_j softplus((vW + c)_j)`` of an RBM, float64 ``[B]``. Not validated."""
    v = v.double()
    return v @ rbm.visible_bias.double() + F.softplus(v @ rbm.weight.double() + rbm.hidden_bias.double()).sum(-1)
