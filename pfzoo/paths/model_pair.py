"""Annealing paths between two trained models of one family, for estimating ``log Z_B − log Z_A`` directly
(*Deep Learning* eqs. 18.38–18.40): the path's ends are the two models themselves, neither of them tractable."""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch
from torch.nn import functional as F

from pfzoo.kernels import BLOCK_CONDITIONALS, BlockGibbs, Kernel, check_kernel
from pfzoo.logmath import softplus
from pfzoo.paths.base import AnnealingPath, tempered_block_rows
from pfzoo.sampling import bernoulli_logits

PairPathBuilder = Callable[..., AnnealingPath]
_PAIR_PATHS: dict[str, PairPathBuilder] = {}


def register_pair_path(family: str) -> Callable[[PairPathBuilder], PairPathBuilder]:
    """Decorator: ``builder(model_a, model_b, kernel)`` builds the path from ``model_a`` to ``model_b`` of ``family``."""

    def decorate(builder: PairPathBuilder) -> PairPathBuilder:
        if family in _PAIR_PATHS:
            raise ValueError(f"a pair path is already registered for family {family!r}")
        _PAIR_PATHS[family] = builder
        return builder

    return decorate


def pair_path(model_a, model_b, *, kernel: Kernel | None = None) -> AnnealingPath | None:
    """The annealing path from ``model_a`` (β = 0) to ``model_b`` (β = 1) when both are of one family that registered
    one, else ``None``."""
    family = model_a.path_family
    if family is None or family != model_b.path_family or family not in _PAIR_PATHS:
        return None
    return _PAIR_PATHS[family](model_a, model_b, kernel)


class RBMPairStatistics(NamedTuple):
    """Statistics of visible states ``v [N, V]`` on an :class:`RBMPairPath`: both models' hidden inputs
    ``vW + c`` (``[N, H_A]``, ``[N, H_B]``) and visible terms ``b·v`` (``[N]``)."""

    hidden_input_a: torch.Tensor
    hidden_input_b: torch.Tensor
    visible_term_a: torch.Tensor
    visible_term_b: torch.Tensor


class RBMPairConditionals:
    """The RBM whose hidden layer is both models' (``[h_A, h_B]``), with A's energy scaled by 1 − β and B's by β:
    ``−E_β(v, h) = (1−β)(b_A·v + h_A·(vW_A + c_A)) + β(b_B·v + h_B·(vW_B + c_B))``, as a block-Gibbs target."""

    offers = frozenset({BLOCK_CONDITIONALS})

    def __init__(self, model_a, model_b) -> None:
        self.weight_a, self.weight_b = model_a.weight.detach(), model_b.weight.detach().to(model_a.weight)
        self.visible_bias_a, self.visible_bias_b = model_a.visible_bias.detach(), model_b.visible_bias.detach().to(self.weight_a)
        self.hidden_bias_a, self.hidden_bias_b = model_a.hidden_bias.detach(), model_b.hidden_bias.detach().to(self.weight_a)
        self.num_hidden_a = self.weight_a.shape[1]

    def statistics(self, v: torch.Tensor, *, beta: float = 0.0) -> RBMPairStatistics:
        return RBMPairStatistics(torch.addmm(self.hidden_bias_a, v, self.weight_a), torch.addmm(self.hidden_bias_b, v, self.weight_b),
                                 v @ self.visible_bias_a, v @ self.visible_bias_b)

    def draw_hidden(self, v: torch.Tensor, stats: RBMPairStatistics, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        logits = torch.cat([(1 - beta) * stats.hidden_input_a, beta * stats.hidden_input_b], 1)
        return bernoulli_logits(logits, dtype=v.dtype, generator=generator)

    def draw_visible(self, h: torch.Tensor, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        hidden_a, hidden_b = h[:, : self.num_hidden_a], h[:, self.num_hidden_a:]
        logits = (1 - beta) * torch.addmm(self.visible_bias_a, hidden_a, self.weight_a.T) + beta * torch.addmm(self.visible_bias_b, hidden_b, self.weight_b.T)
        return bernoulli_logits(logits, dtype=self.weight_a.dtype, generator=generator)


class RBMPairPath(AnnealingPath):
    """From binary RBM A to binary RBM B over the same visible units (Salakhutdinov & Murray 2008, §3.2, with A in
    place of the base RBM): :class:`RBMPairConditionals` with its hidden units summed out,

        log f_β(v) = (1−β) b_A·v + β b_B·v + Σ_j softplus((1−β)(vW_A + c_A)_j) + Σ_k softplus(β(vW_B + c_B)_k) − c(β),

    with ``c(β) = (1−β) H_B log 2 + β H_A log 2`` removing the other model's hidden units' ``log 2`` each, so that
    ``f_0 = f_A`` and ``f_1 = f_B`` exactly and the log weights estimate ``log Z_B − log Z_A``. Neither end is
    tractable: its "base" draws come from model A's own sampler (approximate), and it has no known ``log Z_0``.
    """

    def __init__(self, model_a, model_b, kernel: Kernel | None = None) -> None:
        if model_a.num_visible != model_b.num_visible:
            raise ValueError(f"model_a and model_b must share a visible space, got {model_a.num_visible} and {model_b.num_visible} units")
        self.model_a = model_a
        self.target = RBMPairConditionals(model_a, model_b)
        self.kernel = BlockGibbs() if kernel is None else check_kernel(kernel, self.target.offers, "an RBM pair path")
        self.log2_gap = (model_a.num_hidden - model_b.num_hidden) * math.log(2)  # c(β') − c(β) = (β' − β)(H_A − H_B) log 2

    def draw_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Samples of model A by its own (MCMC) sampler: approximate."""
        return self.model_a.sample(num_chains, generator=generator)

    def base_log_partition(self) -> torch.Tensor:
        raise ValueError("a path between two models has no known log Z at either end: its log weights estimate log Z_B − log Z_A")

    def log_weight_increment(self, stats: RBMPairStatistics, beta_from: float, beta_to: float) -> torch.Tensor:
        """``log f_{β'}(v) − log f_β(v)`` (float64 ``[N]``)."""
        step = beta_to - beta_from
        input_a, input_b = stats.hidden_input_a.double(), stats.hidden_input_b.double()  # small differences of large sums
        hidden_a = (F.softplus((1 - beta_to) * input_a) - F.softplus((1 - beta_from) * input_a)).sum(-1)
        hidden_b = (F.softplus(beta_to * input_b) - F.softplus(beta_from * input_b)).sum(-1)
        visible = step * (stats.visible_term_b.double() - stats.visible_term_a.double())
        return visible + hidden_a + hidden_b - step * self.log2_gap

    def tempered_log_density(self, stats: RBMPairStatistics, beta: torch.Tensor) -> torch.Tensor:
        """At a β per row and column ``beta [N, K]``, float64 ``[N, K]``, with ``a = vW_A + c_A`` and ``b = vW_B + c_B``:

            log f_β(v) − log f_0(v) = β (b_B − b_A)·v + Σ_j [softplus((1−β) a_j) − softplus(a_j)]
                                      + Σ_k [softplus(β b_k) − log 2] − β (H_A − H_B) log 2,

        one ``[N, K, H_A + H_B]`` pass, in blocks of rows of at most :data:`~pfzoo.paths.base.TEMPERED_BLOCK_ELEMENTS`
        elements (thousands of chains over a ladder would otherwise hold gigabytes). The softplus is
        :func:`pfzoo.logmath.softplus`, exact to float64 rounding where :meth:`log_weight_increment`'s torch softplus
        returns ``x`` above 20 (off by ``log(1 + e^{−x}) < 2.1e-9`` a unit there)."""
        input_a, input_b = stats.hidden_input_a.double(), stats.hidden_input_b.double()
        rows = tempered_block_rows(beta.shape[1], input_a.shape[1] + input_b.shape[1])
        hidden = torch.cat([softplus((1 - block)[:, :, None] * a[:, None, :]).sum(-1) + softplus(block[:, :, None] * b[:, None, :]).sum(-1)
                            for block, a, b in zip(beta.split(rows), input_a.split(rows), input_b.split(rows))])
        at_zero = softplus(input_a).sum(-1) + input_b.shape[1] * math.log(2)  # the hidden sums at β = 0: A's, and B's units at 0
        visible = stats.visible_term_b.double() - stats.visible_term_a.double()
        return beta * (visible[:, None] - self.log2_gap) + hidden - at_zero[:, None]


@register_pair_path("rbm")
def rbm_pair_path(model_a, model_b, kernel) -> RBMPairPath:
    return RBMPairPath(model_a, model_b, kernel)
