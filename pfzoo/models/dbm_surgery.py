"""A DBM's construction from RBMs and its layer surgery, as methods of :class:`~pfzoo.models.DBM` (this mixin): the
composition of a greedily trained RBM stack, the start from a trained RBM, and the removal of the top layer that
measures what the top layer contributes."""

from __future__ import annotations

import math

import torch

from pfzoo.models.rbm import RBM
from pfzoo.validation import check_generator

DEAD_UNIT_ACTIVITY = 0.01
"""A hidden unit whose mean posterior probability over the data is below this is dead: on for almost no example, it
takes no part in the model (a pretrained RBM's over its training inputs; a DBM's mean-field means over the rows of
:meth:`LayerSurgery.dead_unit_shares`)."""


class LayerSurgery:
    """DBM methods that build or cut layers (mixed into :class:`~pfzoo.models.DBM`, whose ``weights`` ``[W_0 …
    W_{L−1}]``, ``biases`` ``[b_0 … b_L]``, ``layer_sizes``, ``num_layers``, ``mean_field`` and ``from_tensors`` they use)."""

    @torch.no_grad()
    def compose_from_stack(self, stack: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> None:
        """Overwrite the parameters with the composition of a greedily trained RBM stack (S&H 2009 §3.1).

        ``stack[i] = (weight [n_i, n_{i+1}], visible_bias [n_i], hidden_bias [n_{i+1}])`` is the RBM between layers ``i``
        and ``i + 1``, trained with doubled upward input for ``i = 0`` and doubled downward input for ``i = L-1`` (when
        ``L ≥ 2``), as :func:`~pfzoo.training.pretrain_dbm` does. Then ``W_i`` is copied for the bottom and top RBMs and
        halved for the middle ones; ``b_0`` is ``stack[0]``'s visible bias, ``b_L`` is ``stack[L-1]``'s hidden bias, and
        each interior ``b_i`` is the mean of ``stack[i-1]``'s hidden bias and ``stack[i]``'s visible bias. So every interior
        layer's conditional log-odds are the average of the two RBMs' (doubled) inputs, and the DBM's prior over an
        interior layer is the geometric mean of the two RBMs' priors over it.
        """
        num_rbms = self.num_layers - 1
        if len(stack) != num_rbms:
            raise ValueError(f"stack must hold {num_rbms} RBMs (one per weight matrix of layer sizes {self.layer_sizes}), got {len(stack)}")
        for index, (weight, visible_bias, hidden_bias) in enumerate(stack):
            lower, upper = self.layer_sizes[index], self.layer_sizes[index + 1]
            shapes = (tuple(weight.shape), tuple(visible_bias.shape), tuple(hidden_bias.shape))
            if shapes != ((lower, upper), (lower,), (upper,)):
                raise ValueError(f"stack[{index}] must hold tensors of shapes ({lower}, {upper}), ({lower},), ({upper},); got {shapes}")
        for index, (weight, _, _) in enumerate(stack):
            self.weights[index].copy_((0.5 if 0 < index < num_rbms - 1 else 1.0) * weight)
        self.biases[0].copy_(stack[0][1])
        self.biases[num_rbms].copy_(stack[-1][2])
        for layer in range(1, num_rbms):
            self.biases[layer].copy_(0.5 * (stack[layer - 1][2] + stack[layer][1]))

    @torch.no_grad()
    def start_from_rbm(self, rbm: RBM, *, upper_init_std: float = 0.001, generator: torch.Generator | None = None) -> None:
        """Overwrite the parameters with the binary ``rbm`` (``[V, H1]``) below layers that are all but detached.

        ``W_0``, ``b_0`` and ``b_1`` are the RBM's weight, visible and hidden biases; every weight above is drawn from
        ``N(0, upper_init_std²)`` and every bias above is 0. With the upper weights at zero the marginal on ``(v, h¹)`` is
        the RBM's joint (each upper unit multiplies every state by the same 2), so the DBM has the RBM's log-likelihood
        and an exact mean-field posterior over ``h¹``. Needs at least two hidden layers.
        """
        check_generator(generator, self.device)
        if self.num_layers < 3:
            raise ValueError(f"model must have at least two hidden layers to start from an RBM below them, got layer sizes {self.layer_sizes}")
        if not (isinstance(upper_init_std, (int, float)) and math.isfinite(upper_init_std) and upper_init_std >= 0):
            raise ValueError(f"upper_init_std must be a finite number ≥ 0, got {upper_init_std!r}")
        shape = tuple(rbm.weight.shape) if isinstance(rbm, RBM) else None
        if shape != tuple(self.layer_sizes[:2]):
            raise ValueError(f"rbm must be a binary RBM with weight shape {tuple(self.layer_sizes[:2])} (the DBM's first two layers), "
                             f"got {type(rbm).__name__} with weight shape {shape}")
        self.weights[0].copy_(rbm.weight)
        self.biases[0].copy_(rbm.visible_bias)
        self.biases[1].copy_(rbm.hidden_bias)
        for weight in self.weights[1:]:
            weight.copy_(upper_init_std * torch.randn(weight.shape, generator=generator, device=weight.device, dtype=weight.dtype))
        for bias in self.biases[2:]:
            bias.zero_()

    @torch.no_grad()
    def without_top_layer(self, v: torch.Tensor):
        """The DBM one layer shorter, its top layer replaced by its average input (issue 48's depth diagnostic).

        ``W_0 … W_{L−2}`` and ``b_0 … b_{L−2}`` are kept and the new top layer's bias is ``b_{L−1} + W_{L−1} m_L``, with
        ``m_L [n_L]`` the average over ``v [B, V]`` of the mean-field posterior means ``q(h^L | v)``: what the layer below
        would receive from a top layer frozen at its average. For a two-hidden-layer DBM the result is an RBM with the
        DBM's first-layer weights and visible biases and hidden biases ``b_1 + W_1 m_2``. The log-likelihood the DBM loses
        when its top layer is removed is then ``log p_DBM(v) − log p_short(v)``; near 0 the top layer models nothing.
        """
        if self.num_layers < 3:
            raise ValueError(f"model must have at least two hidden layers to remove its top one, got layer sizes {self.layer_sizes}")
        top_means = self.mean_field(self.check_visible(v, "v"))[-1].mean(0)
        biases = [bias.detach().clone() for bias in self.biases[:-1]]
        biases[-1] += self.weights[-1] @ top_means
        return type(self).from_tensors([weight.detach() for weight in self.weights[:-1]], biases,
                                       max_enumeration_units=self.max_enumeration_units)

    @torch.no_grad()
    def top_layer_share(self, v: torch.Tensor) -> float:
        """The top layer's share of the posterior's activity, in [0, 1]: over ``v [B, V]``, the variance across examples of
        the top-down input ``W_{L−1} μ^L`` to the layer below, against that plus the variance of its bottom-up input
        ``x_{L−2} W_{L−2}`` (each summed over the layer's units; ``x`` and ``μ`` the mean-field means). 0 when the top layer
        sends every example the same input (a constant: the DBM acts as the shorter model of :meth:`without_top_layer`)."""
        if self.num_layers < 3:
            raise ValueError(f"model must have at least two hidden layers to measure its top one, got layer sizes {self.layer_sizes}")
        return self.top_layer_share_of([self.check_visible(v, "v"), *self.mean_field(v)])

    def top_layer_share_of(self, layers: list[torch.Tensor]) -> float:
        """:meth:`top_layer_share` from the visible rows and their mean-field means ``[v [B, V], μ¹ [B, n_1], …]``."""
        top_down = (layers[-1] @ self.weights[-1].T).double().var(0).sum()
        bottom_up = (layers[-3] @ self.weights[-2]).double().var(0).sum()
        return (top_down / (top_down + bottom_up).clamp(min=1e-300)).item()

    @staticmethod
    def dead_unit_shares(layers: list[torch.Tensor]) -> list[float]:
        """Each hidden layer's share of dead units (mean-field mean below :data:`DEAD_UNIT_ACTIVITY` averaged over the
        rows), bottom first, from ``[v [B, V], μ¹ [B, n_1], …]``: units that die during joint training are capacity lost
        without any other sign (zoo_dbm_500_1000_deep's top layer, on 2,000 random test digits: 19 of 1,000 dead after 7
        joint epochs, 157 after 102). A unit that serves a few digits looks dead on rows without them: judge on rows
        drawn at random (the first 2,000 test digits called 375 of those 1,000 dead)."""
        return [(means.mean(0) < DEAD_UNIT_ACTIVITY).double().mean().item() for means in layers[1:]]
