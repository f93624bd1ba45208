"""The modified RBMs of a DBM's greedy pretraining (Salakhutdinov & Hinton 2009, §3.1): an RBM whose visible or hidden
layer appears in several tied copies."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from pfzoo.kernels import BLOCK_CONDITIONALS, BlockGibbs
from pfzoo.models.rbm import base_rate_visible_bias
from pfzoo.sampling import bernoulli_logits
from pfzoo.validation import check_bool

PRETRAIN_INIT_STD = 0.01


class TiedRBM(nn.Module):
    """RBM with ``up`` tied copies of its visible layer and ``down`` tied copies of its hidden layer.

    ``E = -Σ_{a,b} v^aᵀ W h^b - b·Σ_a v^a - c·Σ_b h^b`` for ``v^a [n]``, ``h^b [m]``; with all visible copies equal to
    ``x``, ``p(h^b | x) = σ(up · xW + c)``. The energy depends on the copies through their sums only, so chains carry the
    sums ``Σ_a v^a [B, n]`` (values 0 … up) and ``Σ_b h^b [B, m]`` (0 … down): see :meth:`gibbs_chain`.

    Starts from ``N(0, 0.01²)`` weights, zero hidden biases and visible biases at the smoothed base-rate logits of
    ``data [N, n]``.
    """

    def __init__(self, data: torch.Tensor, num_hidden: int, *, up: int, down: int, generator: torch.Generator | None) -> None:
        super().__init__()
        num_visible = data.shape[1]
        self.up, self.down = up, down
        weight = torch.randn(num_visible, num_hidden, generator=generator, device=data.device, dtype=data.dtype)
        self.weight = nn.Parameter(PRETRAIN_INIT_STD * weight)
        self.visible_bias = nn.Parameter(base_rate_visible_bias(data).to(data.dtype))
        self.hidden_bias = nn.Parameter(data.new_zeros(num_hidden))

    def free_energy(self, visible_sum: torch.Tensor) -> torch.Tensor:
        """``F`` of visible copies given their sum ``Σ_a v^a [B, n]`` → ``[B]`` (hidden copies summed out)."""
        return -visible_sum @ self.visible_bias - self.down * F.softplus(visible_sum @ self.weight + self.hidden_bias).sum(-1)

    def upward_probs(self, x: torch.Tensor) -> torch.Tensor:
        """``p(h = 1 | all visible copies = x) = σ(up · xW + c)``, ``[B, m]``."""
        return torch.sigmoid(self.up * (x @ self.weight) + self.hidden_bias)

    def gibbs_chain(self, *, keep_statistics: bool = False) -> tuple[BlockGibbs, TiedConditionals]:
        """Block Gibbs on the copies' sums: ``(kernel, target)`` for :func:`~pfzoo.kernels.run_chain`, positions
        ``Σ_a v^a [B, n]``. ``keep_statistics`` changes nothing (the target keeps none)."""
        check_bool(keep_statistics, "keep_statistics")
        return BlockGibbs(), TiedConditionals(self.weight.detach(), self.visible_bias.detach(), self.hidden_bias.detach(), self.up, self.down)


class TiedConditionals:
    """A :class:`TiedRBM`'s block conditionals at β on the copies' sums (:class:`~pfzoo.kernels.BlockConditionals`): every
    copy of a layer is drawn independently from the layer's conditional, and the draws are summed."""

    offers = frozenset({BLOCK_CONDITIONALS})

    def __init__(self, weight: torch.Tensor, visible_bias: torch.Tensor, hidden_bias: torch.Tensor, up: int, down: int) -> None:
        self.weight, self.visible_bias, self.hidden_bias, self.up, self.down = weight, visible_bias, hidden_bias, up, down

    def statistics(self, visible: torch.Tensor, *, beta: float = 0.0) -> None:
        """None: the hidden draw computes its input itself."""
        return None

    def draw_hidden(self, visible: torch.Tensor, stats: None, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        """``Σ_b h^b [B, m]``, each copy ``h^b ~ σ(β (Σ_a v^a W + c))``, given visible sums ``[B, n]``."""
        logits = beta * (visible @ self.weight + self.hidden_bias)
        return bernoulli_logits(logits[:, None, :].expand(-1, self.down, -1).contiguous(), generator=generator).sum(1)

    def draw_visible(self, hidden: torch.Tensor, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        """``Σ_a v^a [B, n]``, each copy ``v^a ~ σ(β (W Σ_b h^b + b))``, given hidden sums ``[B, m]``."""
        logits = beta * (hidden @ self.weight.T + self.visible_bias)
        return bernoulli_logits(logits[:, None, :].expand(-1, self.up, -1).contiguous(), generator=generator).sum(1)
