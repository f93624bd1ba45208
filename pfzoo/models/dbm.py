"""Deep Boltzmann machine (Salakhutdinov & Hinton 2009) with binary units in every layer."""

from __future__ import annotations

from typing import Iterator

import torch
from torch import nn
from torch.nn import functional as F

from pfzoo.kernels import run_chain
from pfzoo.models.base import EnergyModel, PathStateProposal
from pfzoo.models.capabilities import Capability
from pfzoo.models.centering import center_chain_gradients
from pfzoo.models.dbm_heating import bernoulli_log_prob, heat_clamped
from pfzoo.models.dbm_surgery import LayerSurgery
from pfzoo.models.enumeration import logsumexp_over_binary_states
from pfzoo.models.rbm import DEFAULT_MAX_ENUMERATION_UNITS, RBM, base_rate_visible_bias
from pfzoo.models.registry import register_model
from pfzoo.sampling import bernoulli
from pfzoo.validation import (
    all_finite, allocates, check_binary, check_finite_number, check_generator, check_layer_sizes, check_model_dtype, check_non_negative_int, check_positive_int,
    check_tensors, describe,
)

DEFAULT_MEAN_FIELD_ITERATIONS = 50
DEFAULT_MEAN_FIELD_TOLERANCE = 1e-6
RECONSTRUCTION_MEAN_FIELD_ITERATIONS = 10
"""Mean-field sweeps (at most; fewer when converged) behind a DBM's reconstruction: as in training."""
BASE_RATE_MEAN_FIELD_ROWS = 10_000  # data rows whose mean-field posteriors set a "base_rate" base's hidden biases
OFFSET_MEAN_FIELD_ITERATIONS = 10
"""Mean-field sweeps (at most) behind the centering offsets (:meth:`DBM.layer_means`), as in training: the offsets only
precondition the updates. On binarized MNIST (784–500–1000, a training checkpoint, all 50,000 training digits) the
layer means after 10 sweeps are within 1.4e-5 of those after 50 (mean difference 3e-7), in a third of the time (9.5 s
against 28.5 s, one thread, in blocks of :data:`MEAN_FIELD_BLOCK_ROWS`)."""
MEAN_FIELD_BLOCK_ROWS = 1_000
"""Rows per block of :meth:`DBM.mean_field` on the CPU: the whole training set in one block streams ``[N, n_i]`` tensors
through memory at every sweep; in blocks they stay in cache (50,000 MNIST digits, 784–500–1000, 50 sweeps, one thread:
113 s in one block, 28.5 s in blocks of 1,000)."""


@register_model("dbm")
class DBM(LayerSurgery, EnergyModel):
    """Binary DBM over layers ``x_0 = v, x_1 = h¹, …, x_L = h^L`` (any depth L ≥ 1):

        E(x) = -Σ_{i<L} x_iᵀ W_i x_{i+1} - Σ_i b_i·x_i          (RAISE eq. 1 for L = 2)

    Parameters: ``weights.i [n_i, n_{i+1}]`` (W_i) and ``biases.i [n_i]`` (b_i).

    **Even/odd view.** Layers of one parity are conditionally independent given the other, so the
    DBM's joint distribution *is* an RBM whose "visible" units are the even layers
    ``(v, h², h⁴, …)`` and whose "hidden" units are the odd layers ``(h¹, h³, …)``, with a
    block weight matrix (:meth:`even_odd_rbm`). Exact ``log Z``, block Gibbs at β, and the AIS path
    with the odd layers summed out analytically (Salakhutdinov & Hinton 2009, §4) all come from
    that RBM. Path states are the concatenated even layers ``[N, Σ n_even]``, visible units first.

    Args:
        layer_sizes: ``[V, H1, H2, …]``, at least two entries; or give ``num_visible`` and
            ``hidden_sizes`` instead (how the app builds models whose V comes from the data set).
        init_std: standard deviation of the Gaussian initial weights (biases start at 0).
        max_enumeration_units: exact ``log Z`` / free energies refuse to enumerate more than
            ``2**max_enumeration_units`` states.
        generator: random generator for the initial weights.
    """

    family_capabilities = frozenset({
        Capability.BINARY_STATES, Capability.BLOCK_GIBBS, Capability.HIDDEN_CHAIN, Capability.POSTERIOR_PROPOSAL, Capability.MEAN_FIELD,
        Capability.RECONSTRUCTION, Capability.CENTERING, Capability.HIDDEN_MEANS,
    })
    path_family = "dbm"

    def __init__(
        self,
        layer_sizes: list[int] | None = None,
        *,
        num_visible: int | None = None,
        hidden_sizes: list[int] | None = None,
        init_std: float = 0.01,
        max_enumeration_units: int = DEFAULT_MAX_ENUMERATION_UNITS,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        layer_sizes = check_layer_sizes(layer_sizes, num_visible, hidden_sizes, min_layers=2)
        init_std = check_finite_number(init_std, "init_std", minimum=0.0)
        self.layer_sizes = [int(size) for size in layer_sizes]
        self.num_visible = self.layer_sizes[0]
        self.max_enumeration_units = check_positive_int(max_enumeration_units, "max_enumeration_units")
        self.weights = nn.ParameterList(
            nn.Parameter(torch.randn(lower, upper, generator=generator) * init_std)
            for lower, upper in zip(self.layer_sizes[:-1], self.layer_sizes[1:])
        )
        self.biases = nn.ParameterList(nn.Parameter(torch.zeros(size)) for size in self.layer_sizes)

    def extra_repr(self) -> str:
        """The sizes, shown by ``repr``: ``DBM(...)``."""
        return f"layer_sizes={self.layer_sizes}"

    @classmethod
    def from_tensors(
        cls,
        weights: list[torch.Tensor],
        biases: list[torch.Tensor],
        *,
        max_enumeration_units: int = DEFAULT_MAX_ENUMERATION_UNITS,
    ) -> "DBM":
        """A DBM holding copies of ``weights[i] [n_i, n_{i+1}]`` and ``biases[i] [n_i]``."""
        check_tensors(**{f"weights[{i}]": w for i, w in enumerate(weights)}, **{f"biases[{i}]": b for i, b in enumerate(biases)})
        if len(weights) < 1 or len(biases) != len(weights) + 1:
            raise ValueError(f"need L ≥ 1 weight matrices and L + 1 bias vectors, got {len(weights)} and {len(biases)}")
        for index, weight in enumerate(weights):
            if weight.dim() != 2:
                raise ValueError(f"weights[{index}] must be a matrix [n_{index}, n_{index + 1}], got shape {tuple(weight.shape)}")
        expected = [weights[0].shape[0]] + [weight.shape[1] for weight in weights]
        for index in range(1, len(weights)):
            if weights[index].shape[0] != weights[index - 1].shape[1]:
                raise ValueError(
                    f"weights[{index}] has {weights[index].shape[0]} rows but weights[{index - 1}] has "
                    f"{weights[index - 1].shape[1]} columns; consecutive layers must match"
                )
        for index, (bias, size) in enumerate(zip(biases, expected)):
            if bias.shape != (size,):
                raise ValueError(f"biases[{index}] must have shape [{size}], got {tuple(bias.shape)}")
        for name, tensors in (("weights", weights), ("biases", biases)):
            for index, tensor in enumerate(tensors):
                if not all_finite(tensor):
                    raise ValueError(f"{name}[{index}] contains NaN or infinite values")
        model = cls(expected, init_std=0.0, max_enumeration_units=max_enumeration_units)
        model.to(device=weights[0].device, dtype=check_model_dtype(weights[0].dtype, "weights[0]"))
        with torch.no_grad():
            for parameter, tensor in zip(list(model.weights) + list(model.biases), list(weights) + list(biases)):
                parameter.copy_(tensor)
        return model

    def visible_filters(self) -> torch.Tensor:
        """``[K, V]``: ``self.weights[0].T``, detached."""
        return self.weights[0].T.detach()

    def config(self) -> dict:
        return {"layer_sizes": list(self.layer_sizes), "max_enumeration_units": self.max_enumeration_units}

    # ---- layers -------------------------------------------------------------------------

    @property
    def num_layers(self) -> int:
        """Number of layers including the visible one (L + 1)."""
        return len(self.layer_sizes)

    @property
    def even_layers(self) -> list[int]:
        return list(range(0, self.num_layers, 2))

    @property
    def odd_layers(self) -> list[int]:
        return list(range(1, self.num_layers, 2))

    @property
    def num_even_units(self) -> int:
        return sum(self.layer_sizes[i] for i in self.even_layers)

    @property
    def num_odd_units(self) -> int:
        return sum(self.layer_sizes[i] for i in self.odd_layers)

    def split_even(self, even_state: torch.Tensor) -> list[torch.Tensor]:
        """``[N, Σ n_even]`` → the even layers ``[x_0, x_2, …]``."""
        return list(torch.split(even_state, [self.layer_sizes[i] for i in self.even_layers], dim=-1))

    def split_odd(self, odd_state: torch.Tensor) -> list[torch.Tensor]:
        """``[N, Σ n_odd]`` → the odd layers ``[x_1, x_3, …]``."""
        return list(torch.split(odd_state, [self.layer_sizes[i] for i in self.odd_layers], dim=-1))

    def check_layers(self, layers: tuple[torch.Tensor, ...] | list[torch.Tensor]) -> None:
        """Raise ``ValueError`` unless ``layers`` are binary ``[B, n_i]`` tensors, one per layer, equal batch sizes."""
        if len(layers) != self.num_layers:
            raise ValueError(f"expected {self.num_layers} layer states (visible first), got {len(layers)}")
        for index, (layer, size) in enumerate(zip(layers, self.layer_sizes)):
            check_binary(layer, f"layer {index}", width=size, device=self.device, dtype=self.dtype)
            if layer.shape[0] != layers[0].shape[0]:
                raise ValueError(f"layer {index} has batch size {layer.shape[0]}, layer 0 has {layers[0].shape[0]}")

    # ---- energies -----------------------------------------------------------------------

    def energy(self, *layers: torch.Tensor) -> torch.Tensor:
        """``E(x_0, …, x_L)`` for layer states ``x_i [B, n_i]`` → ``[B]``."""
        self.check_layers(layers)
        return self.energy_unchecked(list(layers))

    def energy_unchecked(self, layers: list[torch.Tensor]) -> torch.Tensor:
        """:meth:`energy` for real-valued layer tensors (e.g. mean-field means); no validation."""
        energy = -sum(layer @ bias for layer, bias in zip(layers, self.biases))
        for lower, weight, upper in zip(layers[:-1], self.weights, layers[1:]):
            energy = energy - ((lower @ weight) * upper).sum(-1)
        return energy

    def even_odd_rbm(self) -> RBM:
        """The RBM over (even layers, odd layers) with exactly this DBM's joint distribution.

        Weight ``[Σ n_even, Σ n_odd]``: block ``(x_i, x_{i+1})`` holds ``W_i`` (i even) or ``W_iᵀ``
        (i odd); all other blocks are zero. Built from the parameters, so it is differentiable.
        """
        rows = []
        for layer in self.even_layers:
            blocks = []
            for other in self.odd_layers:
                if other == layer + 1:
                    blocks.append(self.weights[layer])
                elif other == layer - 1:
                    blocks.append(self.weights[other].T)
                else:
                    blocks.append(self.weights[0].new_zeros(self.layer_sizes[layer], self.layer_sizes[other]))
            rows.append(torch.cat(blocks, dim=1))
        weight = torch.cat(rows, dim=0)
        even_bias = torch.cat([self.biases[i] for i in self.even_layers])
        odd_bias = torch.cat([self.biases[i] for i in self.odd_layers])
        return _RBMView(weight, even_bias, odd_bias, self.max_enumeration_units)

    @property
    def free_energy_cost(self) -> int:
        """``log2`` of the number of terms the exact :meth:`free_energy` sums: the even hidden units."""
        return self.num_even_units - self.num_visible

    def free_energy(self, v: torch.Tensor) -> torch.Tensor:
        """Exact ``F(v) = -log Σ_h exp(-E(v, h))`` for ``v [B, V]`` → float64 ``[B]``.

        Enumerates the even hidden layers and sums the odd ones out analytically, so it costs
        ``2^(Σ n_even - V)`` terms per example; raises ``ValueError`` above ``max_enumeration_units``
        (use :func:`pfzoo.estimators.importance_log_unnormalized` or the mean-field bound).
        """
        self.check_visible(v)
        if self.num_layers == 2:
            return self.even_odd_rbm().free_energy(v).double()
        rbm = self.even_odd_rbm()
        weight, even_bias, odd_bias = rbm.weight.double(), rbm.visible_bias.double(), rbm.hidden_bias.double()
        v = v.double()
        visible_weight, hidden_weight = weight[: self.num_visible], weight[self.num_visible :]
        visible_term = v @ even_bias[: self.num_visible]  # [B]
        visible_input = v @ visible_weight + odd_bias  # [B, O]

        def log_f(hidden_even: torch.Tensor) -> torch.Tensor:  # [M, n] → [M, B]
            hidden_input = hidden_even @ hidden_weight  # [M, O]
            odd_term = F.softplus(hidden_input[:, None, :] + visible_input[None, :, :]).sum(-1)
            return (hidden_even @ even_bias[self.num_visible :])[:, None] + visible_term[None, :] + odd_term

        log_marginal = logsumexp_over_binary_states(
            self.free_energy_cost,
            log_f,
            width=v.shape[0] * self.num_odd_units,
            max_units=self.max_enumeration_units,
            device=self.device,
        )
        return -log_marginal

    # ---- partition function -------------------------------------------------------------

    @property
    def log_partition_cost(self) -> int:
        return min(self.num_even_units, self.num_odd_units)

    @torch.no_grad()
    def log_partition(self) -> torch.Tensor:
        """Exact ``log Z`` (float64) by enumerating the smaller of the even and odd unit sets."""
        return self.even_odd_rbm().log_partition()

    # ---- conditionals and sampling ------------------------------------------------------

    def draw_odd(self, even_state: torch.Tensor, *, beta: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
        """``x_odd ~ p_β(x_odd | x_even)`` for ``even_state [N, Σ n_even]`` → ``[N, Σ n_odd]``. Not validated."""
        return self.even_odd_rbm().draw_hidden(even_state, beta=beta, generator=generator)

    def draw_even(self, odd_state: torch.Tensor, *, beta: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
        """``x_even ~ p_β(x_even | x_odd)`` for ``odd_state [N, Σ n_odd]`` → ``[N, Σ n_even]``. Not validated."""
        return self.even_odd_rbm().draw_visible(odd_state, beta=beta, generator=generator)

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
        beta: float = 1.0,
        initial_visible: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> list[torch.Tensor]:
        """Approximate samples of all layers after ``num_steps`` odd/even block Gibbs sweeps at β.

        Chains start from ``initial_visible [num_samples, V]`` (other even layers at 0) or, by
        default, from uniform random even layers. Returns ``[x_0, …, x_L]``, ``x_i [num_samples, n_i]``.
        """
        check_positive_int(num_samples, "num_samples")
        check_positive_int(num_steps, "num_steps")
        check_generator(generator, self.device)
        rbm = self.even_odd_rbm()
        if initial_visible is None:
            even = bernoulli(torch.full((num_samples, self.num_even_units), 0.5, device=self.device, dtype=self.dtype), generator=generator)
        else:
            check_binary(initial_visible, "initial_visible", width=self.num_visible, device=self.device, dtype=self.dtype)
            if initial_visible.shape[0] != num_samples:
                raise ValueError(f"initial_visible must have {num_samples} rows, got {initial_visible.shape[0]}")
            even = torch.cat([initial_visible, initial_visible.new_zeros(num_samples, self.num_even_units - self.num_visible)], 1)
        kernel, target = rbm.gibbs_chain()  # odd/even sweeps: block Gibbs on the even/odd RBM
        state, _ = run_chain(kernel, target, even, num_steps, beta=beta, generator=generator)
        even = state.position
        odd = rbm.draw_hidden(even, beta=beta, generator=generator)
        return _interleave(self.split_even(even), self.split_odd(odd))

    # ---- chains for sampling-based likelihoods (CSL) --------------------------------------

    def log_prob_visible_given_hidden(self, v: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """``log p(v_b | h¹_s)`` for every pair: ``v [B, V]``, first hidden layer ``hidden [S, H1]`` → float64 ``[B, S]``."""
        self.check_visible(v)
        check_binary(hidden, "hidden", width=self.layer_sizes[1], device=self.device, dtype=self.dtype)
        logits = self.visible_logits(hidden).double()
        return v.double() @ logits.T - F.softplus(logits).sum(-1)

    def visible_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits ``W_0 h¹ + b_0`` of ``p(v = 1 | h¹)`` for first-hidden-layer states ``[S, H1]`` → ``[S, V]``. Not validated."""
        return hidden @ self.weights[0].T + self.biases[0]

    @torch.no_grad()
    def hidden_chain(self, initial_visible: torch.Tensor, *, generator: torch.Generator | None = None) -> Iterator[torch.Tensor]:
        """Endless odd/even Gibbs chains from ``initial_visible [C, V]`` (other even layers from mean field);
        each sweep yields the first hidden layer ``[C, H1]``."""
        self.check_visible(initial_visible, "initial_visible")
        rbm = self.even_odd_rbm()
        means = self.mean_field(initial_visible)
        even_hidden = [bernoulli(means[i - 1], generator=generator) for i in self.even_layers[1:]]
        kernel, target = rbm.gibbs_chain()
        state = kernel.init(torch.cat([initial_visible, *even_hidden], dim=1), target)
        while True:
            state, _ = kernel.step(state, target, generator=generator)
            yield state.hidden[:, : self.layer_sizes[1]]

    # ---- mean field ---------------------------------------------------------------------

    @torch.no_grad()
    def layer_means(self, v: torch.Tensor) -> list[torch.Tensor]:
        """``[v̄ [V], mean μ¹ [n_1], …, mean μ^L [n_L]]`` over ``v [B, V]``, hidden layers at their mean-field posterior
        means (:meth:`mean_field`, at most :data:`OFFSET_MEAN_FIELD_ITERATIONS` sweeps): the data offsets of centering
        (Montavon & Müller 2012), computed on the whole training set at every epoch's start."""
        return [v.mean(0)] + [means.mean(0) for means in self.mean_field(v, num_iterations=OFFSET_MEAN_FIELD_ITERATIONS)]

    def center_gradients(self, offsets: list[torch.Tensor]) -> None:
        """Replace the plain gradients in ``.grad`` by the centered update on one offset per layer
        (:func:`~pfzoo.models.centering.center_chain_gradients`); the model stays an ordinary DBM."""
        center_chain_gradients(list(self.weights), list(self.biases), offsets)

    @torch.no_grad()
    def mean_field(
        self,
        v: torch.Tensor,
        *,
        num_iterations: int = DEFAULT_MEAN_FIELD_ITERATIONS,
        tolerance: float = DEFAULT_MEAN_FIELD_TOLERANCE,
    ) -> list[torch.Tensor]:
        """Fully factorised posterior ``q(h | v) = Π_i Π_j Bernoulli(μ_i,j)`` by fixed-point iteration.

        Maximises the variational lower bound of :meth:`mean_field_lower_bound` (Salakhutdinov &
        Hinton 2009, eq. 7) by the updates ``μ_i = σ(μ_{i-1} W_{i-1} + W_i μ_{i+1} + b_i)``, odd
        layers then even layers, each half-sweep an exact coordinate ascent step (so the bound
        never decreases). Initialised by a bottom-up pass with doubled input for the layers that
        also receive top-down input. Each row stops after ``num_iterations`` sweeps or after the first sweep
        in which none of its means moved by more than ``tolerance``, so a row's means do not depend on the other rows
        of ``v`` (beyond the rounding of the products).

        The stopping test stays on the device: a converged row's means are frozen (``torch.where``), so a GPU runs all
        ``num_iterations`` sweeps without waiting for a value read back, with the same result as stopping there. On
        the CPU, where a read costs nothing, the loop ends when every row has converged, and ``v`` is taken in blocks
        of :data:`MEAN_FIELD_BLOCK_ROWS` rows (the same means, in far less time for large ``v``).

        Returns the hidden means ``[μ_1, …, μ_L]``, ``μ_i [B, n_i]``.
        """
        self.check_visible(v)
        check_positive_int(num_iterations, "num_iterations")
        if v.device.type == "cpu" and v.shape[0] > MEAN_FIELD_BLOCK_ROWS:
            blocks = [self._mean_field_block(rows, num_iterations, tolerance) for rows in v.split(MEAN_FIELD_BLOCK_ROWS)]
            return [torch.cat(layer) for layer in zip(*blocks)]
        return self._mean_field_block(v, num_iterations, tolerance)

    def _mean_field_block(self, v: torch.Tensor, num_iterations: int, tolerance: float) -> list[torch.Tensor]:
        """:meth:`mean_field` of one block of rows ``v [B, V]``."""
        visible_drive = v @ self.weights[0]  # the first hidden layer's input from v, the same in every sweep
        means = [v]
        for i in range(1, self.num_layers):
            scale = 1.0 if i == self.num_layers - 1 else 2.0
            drive = visible_drive if i == 1 else means[-1] @ self.weights[i - 1]
            means.append(torch.sigmoid(scale * drive + self.biases[i]))
        converged = torch.zeros((v.shape[0], 1), dtype=torch.bool, device=v.device)  # per row
        for _ in range(num_iterations):
            change = torch.zeros((v.shape[0], 1), dtype=v.dtype, device=v.device)
            for parity in (1, 2):
                for i in range(parity, self.num_layers, 2):
                    total = (visible_drive if i == 1 else means[i - 1] @ self.weights[i - 1]) + self.biases[i]
                    if i + 1 < self.num_layers:
                        total = total + means[i + 1] @ self.weights[i].T
                    updated = torch.sigmoid(total)
                    change = torch.maximum(change, (updated - means[i]).abs().amax(dim=1, keepdim=True))
                    means[i] = torch.where(converged, means[i], updated)
            converged = converged | (change < tolerance)
            if v.device.type == "cpu" and converged.all():
                break
        return means[1:]

    def hidden_means(self, v: torch.Tensor) -> list[torch.Tensor]:
        """The mean-field posterior means ``[μ_1 [B, n_1], …, μ_L [B, n_L]]`` of ``v [B, V]`` (:meth:`mean_field` at its
        defaults; :attr:`Capability.HIDDEN_MEANS`: features for a classifier, as Salakhutdinov & Hinton 2009 §4 use them)."""
        return self.mean_field(v)

    def reconstruct(self, v: torch.Tensor, *, num_iterations: int = RECONSTRUCTION_MEAN_FIELD_ITERATIONS) -> torch.Tensor:
        """Reconstruction ``σ(μ¹ W_0ᵀ + b_0)`` of binary ``v [B, V]`` through the first hidden layer's mean-field means
        ``μ¹`` (at most ``num_iterations`` sweeps, as in training); for one hidden layer exactly the RBM's. Not validated."""
        first = self.mean_field(v, num_iterations=num_iterations)[0]
        return torch.sigmoid(first @ self.weights[0].T + self.biases[0])

    def mean_field_lower_bound(self, v: torch.Tensor, means: list[torch.Tensor] | None = None) -> torch.Tensor:
        """``log f(v) ≥ E_q[-E(v, h)] + H(q)`` (RAISE §5.2) for ``v [B, V]`` → float64 ``[B]``.

        ``means``: the factorised posterior's hidden means, by default :meth:`mean_field` of ``v``.
        """
        self.check_visible(v)
        if means is None:
            means = self.mean_field(v)
        with torch.no_grad():
            expected_energy = self.energy_unchecked([v] + list(means)).double()
            entropy = sum(_bernoulli_entropy(mean.double()).sum(-1) for mean in means)
        return -expected_energy + entropy

    @torch.no_grad()
    def init_from_data(self, data: torch.Tensor, *, smoothing: float = 1.0) -> None:
        """Set the visible biases ``b_0`` to the smoothed base-rate logits of ``data [N, V]`` (as :meth:`RBM.init_from_data`)."""
        self.biases[0].copy_(base_rate_visible_bias(self.check_visible(data, "data"), smoothing))

    # ---- annealing ----------------------------------------------------------------------

    def annealing_base(self, kind: str = "uniform", data: torch.Tensor | None = None, *, smoothing: float = 1.0) -> "DBM":
        """A DBM with zero weights to anneal from, ``"uniform"`` (all biases 0) or ``"base_rate"``.

        ``"base_rate"`` puts *every* layer at its smoothed base rate under ``data [N, V]``: the
        visible biases at the pixel means' logits (as for an RBM), each hidden layer's at the logits
        of its mean-field posterior means averaged over the data (at most
        ``BASE_RATE_MEAN_FIELD_ROWS`` evenly spaced rows). The hidden rates matter: a DBM can have
        a spurious mode that uniform hidden units fall into and never leave, so AIS from hidden
        biases 0 can miss the mode the data live in. On a greedily pretrained
        784–500–1000 MNIST DBM (``reports/raise_dbm_greedy``; K = 10³, 100 chains), AIS from visible-only base rates
        ended in a mode with ~436 of 1000 top units on and gave log Ẑ = 738.2; from these base rates it ended with ~22
        on (like the data's posterior) and gave 776.9. Both are stochastic lower bounds on
        log Z, so the larger one is the better estimate.
        """
        weights = [torch.zeros_like(weight) for weight in self.weights]
        biases = [torch.zeros_like(bias) for bias in self.biases]
        if kind == "base_rate":
            if data is None:
                raise ValueError("annealing_base(kind='base_rate') needs data [N, V] to take pixel and posterior means from")
            data = self.check_visible(data, "data")
            biases[0] = base_rate_visible_bias(data, smoothing).to(biases[0])
            rows = data[:: -(-data.shape[0] // BASE_RATE_MEAN_FIELD_ROWS)].to(self.weights[0].dtype)
            for layer, means in enumerate(self.mean_field(rows), start=1):
                biases[layer] = base_rate_visible_bias(means, smoothing).to(biases[layer])
        elif kind != "uniform":
            raise ValueError(f"kind must be 'uniform' or 'base_rate', got {kind!r}")
        return DBM.from_tensors([w.detach() for w in weights], [b.detach() for b in biases], max_enumeration_units=self.max_enumeration_units)

    @torch.no_grad()
    def training_diagnostics(self, v: torch.Tensor) -> dict[str, float]:
        """On ``v [B, V]``'s mean-field means: ``top_layer_share`` (:meth:`top_layer_share`: near 0, the top layer models
        nothing) for DBMs with at least two hidden layers (issue 48: watch whether joint training puts the top layer
        to use), and ``dead_units_h{i}``, hidden layer i's share of dead units (:meth:`dead_unit_shares`)."""
        layers = [self.check_visible(v, "v"), *self.mean_field(v)]
        record = {"top_layer_share": self.top_layer_share_of(layers)} if self.num_layers >= 3 else {}
        record.update({f"dead_units_h{layer}": share for layer, share in enumerate(self.dead_unit_shares(layers), start=1)})
        return record

    @torch.no_grad()
    def propose_path_state(
        self, v: torch.Tensor, *, num_samples: int = 1, generator: torch.Generator | None = None, heating_steps: int = 0,
        heating_start: DBM | None = None, heating_schedule: torch.Tensor | None = None,
    ) -> PathStateProposal:
        """Even hidden layers from the mean-field posterior, odd layers summed out (RAISE §5.2, footnote 5).

        ``state = (v, h², h⁴, …) [B, Σ n_even]`` with ``h_even ~ q(h_even | v)``;
        ``log_weight = log f(v, h_even) - log q(h_even | v)`` with ``f(v, h_even) = Σ_{h_odd} exp(-E)``.
        Mean field runs once per example; its ``num_samples`` draws follow.

        ``heating_steps`` T > 0 refines the draw by RAISE Algorithm 3's clamped heating chain (:meth:`heat_clamped`,
        which ``heating_start`` and ``heating_schedule`` go to): the latents then follow p(h | v) more closely than the
        factorised q, at T block-Gibbs sweeps per draw.
        """
        self.check_visible(v)
        check_positive_int(num_samples, "num_samples")
        check_non_negative_int(heating_steps, "heating_steps")
        if self.num_layers == 2:  # one hidden layer: summed out exactly, nothing to propose
            v = v.repeat_interleave(num_samples, dim=0)
            return PathStateProposal(v, -self.even_odd_rbm().free_energy(v).double())
        if heating_steps:
            return self.heat_clamped(v, num_samples=num_samples, num_steps=heating_steps, generator=generator, start=heating_start,
                                     schedule=heating_schedule)
        means = self.mean_field(v)
        v = v.repeat_interleave(num_samples, dim=0)
        hidden_means = torch.cat([means[i - 1] for i in self.even_layers[1:]], dim=1).repeat_interleave(num_samples, dim=0)
        hidden = bernoulli(hidden_means, generator=generator)
        state = torch.cat([v, hidden], dim=1)
        log_q = bernoulli_log_prob(hidden.double(), hidden_means.double()).sum(-1)
        return PathStateProposal(state, -self.even_odd_rbm().free_energy(state).double() - log_q)

    @torch.no_grad()
    def heat_clamped(
        self, v: torch.Tensor, *, num_samples: int = 1, num_steps: int = 100, generator: torch.Generator | None = None,
        start: DBM | None = None, schedule: torch.Tensor | None = None,
    ) -> PathStateProposal:
        """RAISE Algorithm 3's clamped heating chain: AIS over the hidden layers with ``v [B, V]`` clamped, towards
        ``p(h | v)``, ``num_samples`` chains per example, ``num_steps`` T sweeps at ``α_t = t / T``
        (:func:`pfzoo.models.dbm_heating.heat_clamped`: ``E[exp(log_weight)] = f(v)``, the contract of
        :class:`PathStateProposal`; the state holds the even layers ``[B · num_samples, Σ n_even]``).

        The chain starts from the mean-field posterior ``q(h | v)`` (``start=None``), or from the hidden conditionals of
        ``start``, a DBM of this shape without weights (an annealing path's base, whose ``p_0(h | v)`` is
        ``Bernoulli(σ(b_i))`` in every hidden layer). With ``start`` the path's base and ``schedule`` its β's ``[K + 1]``
        (ascending from 0 to 1; T = K), the chain's distributions are the path's ``p_k(h | v)`` and this is Algorithm 3
        exactly as the RAISE paper writes it (heating along ``p_k`` from ``p_0(h | v)``, eq. 13). The start's means are
        kept within ``[1e-6, 1 - 1e-6]`` so that ``log q`` is finite (q is that clamped distribution, from which ``h_0``
        is drawn).
        """
        self.check_visible(v)
        check_positive_int(num_samples, "num_samples")
        check_generator(generator, self.device)
        if schedule is None:
            check_positive_int(num_steps, "num_steps")
            alphas = torch.arange(num_steps + 1, dtype=torch.float64) / num_steps
        else:
            alphas = self._checked_heating_schedule(schedule)
        if start is None:
            means = self.mean_field(v)
        else:
            self._check_heating_start(start)
            means = [torch.sigmoid(bias.detach()).expand(v.shape[0], -1) for bias in start.biases[1:]]
        return heat_clamped(list(self.weights), list(self.biases), v, means, num_samples=num_samples, alphas=alphas, generator=generator)

    def _check_heating_start(self, start) -> None:
        if not isinstance(start, DBM) or start.layer_sizes != self.layer_sizes or any(weight.any() for weight in start.weights):
            raise ValueError(f"start must be a DBM with layer sizes {self.layer_sizes} and no weights (an annealing path's base), "
                             f"got {type(start).__name__}" + (f" with layer sizes {start.layer_sizes}" if isinstance(start, DBM) else ""))

    @staticmethod
    def _checked_heating_schedule(schedule) -> torch.Tensor:
        betas = schedule.detach().double().cpu() if isinstance(schedule, torch.Tensor) else None
        if betas is None or betas.dim() != 1 or betas.numel() < 2 or betas[0] != 0 or betas[-1] != 1 or (betas.diff() < 0).any():
            raise ValueError(f"schedule must be a 1-D tensor of β's ascending from 0 to 1, got {describe(schedule)}")
        return betas


def _interleave(even: list[torch.Tensor], odd: list[torch.Tensor]) -> list[torch.Tensor]:
    layers = []
    for index in range(len(even) + len(odd)):
        layers.append(even[index // 2] if index % 2 == 0 else odd[index // 2])
    return layers


class _RBMView(RBM):
    """An RBM whose weight and biases *are* given tensors (no copy), so gradients flow to their owner."""

    def __init__(self, weight: torch.Tensor, visible_bias: torch.Tensor, hidden_bias: torch.Tensor, max_units: int) -> None:
        nn.Module.__init__(self)
        self.num_visible, self.num_hidden = weight.shape
        self.max_enumeration_units = max_units
        self.weight, self.visible_bias, self.hidden_bias = weight, visible_bias, hidden_bias

    @property
    def device(self) -> torch.device:
        return self.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.weight.dtype


def _bernoulli_entropy(p: torch.Tensor) -> torch.Tensor:
    return -(torch.special.xlogy(p, p) + torch.special.xlogy(1 - p, 1 - p))
