"""RAISE Algorithm 3's clamped heating chain for a DBM: AIS over the hidden layers with the visible layer clamped, from
the mean-field posterior ``q(h | v)`` to ``p(h | v)`` (Burda, Grosse & Salakhutdinov 2015, §4.2).

The chain anneals along ``g_α(h) ∝ q(h)^{1 − α} exp(−α E(v, h))``, α ∈ [0, 1]. :class:`ClampedHeatingTarget` is ``g_α``
as a scan-Gibbs target (:class:`~pfzoo.kernels.ScanConditionals`), so the transitions are :class:`~pfzoo.kernels.ScanGibbs`
steps and this module only accumulates the AIS weights.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from pfzoo.kernels import SCAN_CONDITIONALS, ScanGibbs
from pfzoo.models.base import PathStateProposal
from pfzoo.sampling import bernoulli

HEATING_MEAN_LIMIT = 1e-6  # q's means are kept this far from 0 and 1 so that log q stays finite


def bernoulli_log_prob(x: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """``log Bernoulli(x; p)`` elementwise, safe at p ∈ {0, 1}."""
    return torch.where(x > 0.5, torch.log(p), torch.log1p(-p))


class ClampedHeatingTarget:
    """``g_α(h) ∝ q(h)^{1 − α} exp(−α E(v, h))`` over a DBM's hidden layers with ``v`` clamped, as a scan-Gibbs target.

    Positions are all layers concatenated, ``(v, h¹, h², …) [N, Σ n_i]``; the scan visits the odd layers, then the even
    hidden layers, one block per layer (the visible block is never drawn: it stays clamped). Layers of one parity are
    conditionally independent given the other, and layer i's conditional under ``g_α`` has logits
    ``(1 − α) logit(μ_i) + α · drive_i`` with ``drive_i = x_{i−1} W_{i−1} + x_{i+1} W_iᵀ + b_i``. The statistics of a
    position are ``−E(v, h) − log q(h)`` float64 ``[N]``, the AIS increment per unit of α.

    Args:
        weights: the DBM's ``[W_0 [n_0, n_1], …, W_{L−1}]``.
        biases: the DBM's ``[b_0 [n_0], …, b_L [n_L]]``.
        means: the clamped mean-field means ``[μ¹ [N, n_1], …, μ^L [N, n_L]]``, each within ``[1e-6, 1 − 1e-6]``.
    """

    offers = frozenset({SCAN_CONDITIONALS})

    def __init__(self, weights: list[torch.Tensor], biases: list[torch.Tensor], means: list[torch.Tensor]) -> None:
        self.weights, self.biases = weights, biases
        self.means = means
        self.proposal_logits = [torch.logit(mean) for mean in means]
        sizes = [bias.shape[0] for bias in biases]
        starts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
        self.bounds = [(starts[i], starts[i + 1]) for i in range(len(sizes))]
        device = means[0].device
        order = [*range(1, len(sizes), 2), *range(2, len(sizes), 2)]
        self.scan = [torch.arange(*self.bounds[i], device=device) for i in order]
        # ScanGibbs hands back the block objects of ``scan``; their identity names their layer without a host read
        self._layer_of_block = {id(block): layer for block, layer in zip(self.scan, order)}

    def layer(self, x: torch.Tensor, i: int) -> torch.Tensor:
        """Layer i ``[N, n_i]`` (a contiguous copy) of positions ``x [N, Σ n_i]``."""
        start, stop = self.bounds[i]
        return x[:, start:stop].contiguous()

    def layers(self, x: torch.Tensor) -> list[torch.Tensor]:
        """``[x_0, …, x_L]`` (contiguous copies) of positions ``x [N, Σ n_i]``."""
        return [self.layer(x, i) for i in range(len(self.bounds))]

    def drive(self, layers: Mapping[int, torch.Tensor] | list[torch.Tensor], i: int) -> torch.Tensor:
        """Layer i's total input ``x_{i−1} W_{i−1} + x_{i+1} W_iᵀ + b_i`` ``[N, n_i]`` from its neighbours in ``layers``
        (all layers, or layer index → layer holding at least i's neighbours)."""
        drive = layers[i - 1] @ self.weights[i - 1] + self.biases[i]
        return drive + layers[i + 1] @ self.weights[i].T if i + 1 < len(self.bounds) else drive

    def statistics(self, x: torch.Tensor, *, beta: float = 0.0) -> torch.Tensor:
        """``−E(v, h) − log q(h)`` float64 ``[N]`` of positions ``x``: ``log g_α − log g_0`` per unit of α."""
        layers = self.layers(x)
        log_q = sum(bernoulli_log_prob(layer.double(), mean.double()).sum(-1) for layer, mean in zip(layers[1:], self.means))
        # every weight joins an odd layer to an even one, so −E(v, h) = Σ_even b·x + Σ_odd x·drive(odd | even)
        even_bias_term = sum(layers[i] @ self.biases[i] for i in range(0, len(layers), 2))
        negative_energy = even_bias_term + sum((layers[i] * self.drive(layers, i)).sum(-1) for i in range(1, len(layers), 2))
        return negative_energy.double() - log_q

    def draw_block(self, x: torch.Tensor, block: torch.Tensor, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        """Layer ``block``'s units ``[N, n_i]`` from their conditional under ``g_β`` given the other layers."""
        i = self._layer_of_block[id(block)]
        neighbours = {j: self.layer(x, j) for j in (i - 1, i + 1) if j < len(self.bounds)}  # only what layer i's input reads
        drive = self.drive(neighbours, i)
        return bernoulli(torch.sigmoid((1 - beta) * self.proposal_logits[i - 1] + beta * drive), generator=generator)


@torch.no_grad()
def heat_clamped(weights: list[torch.Tensor], biases: list[torch.Tensor], v: torch.Tensor, means: list[torch.Tensor], *, num_samples: int,
                 alphas: torch.Tensor, generator: torch.Generator | None) -> PathStateProposal:
    """RAISE Algorithm 3's clamped heating chain of the DBM with ``weights`` and ``biases`` (as
    :class:`ClampedHeatingTarget`), ``num_samples`` chains per row of ``v [B, V]`` whose mean-field means are ``means``
    (inputs checked by the caller, :meth:`DBM.heat_clamped <pfzoo.models.DBM.heat_clamped>`).

    ``h_0 ~ q``; then for t = 1 … T the log weight gains ``(α_t − α_{t−1}) [−E(v, h_{t−1}) − log q(h_{t−1})]`` and a
    :class:`~pfzoo.kernels.ScanGibbs` step of :class:`ClampedHeatingTarget` at ``α_t`` moves the hidden layers, for the
    ascending ``alphas [T + 1]`` from 0 to 1 (``t / T``, or an annealing path's own β's: RAISE Algorithm 3 as written).
    As for any AIS run from the normalised ``g_0 = q``, ``E[exp(log_weight)] = Σ_h exp(−E(v, h)) = f(v)``. Returns the
    even layers ``(v, h², h⁴, …) [B · num_samples, Σ n_even]``: dropping the odd ones is the exact reversal
    ``p(h_odd | v, h_even)``, which changes no weight.
    """
    means = [mean.clamp(HEATING_MEAN_LIMIT, 1 - HEATING_MEAN_LIMIT).repeat_interleave(num_samples, dim=0) for mean in means]
    layers = [v.repeat_interleave(num_samples, dim=0)] + [bernoulli(mean, generator=generator) for mean in means]
    target, kernel = ClampedHeatingTarget(weights, biases, means), ScanGibbs()
    state = kernel.init(torch.cat(layers, dim=1), target)
    log_weight = torch.zeros(layers[0].shape[0], dtype=torch.float64, device=v.device)
    for previous, alpha in zip(alphas[:-1].tolist(), alphas[1:].tolist()):
        log_weight += (alpha - previous) * state.stats
        state, _ = kernel.step(state, target, beta=alpha, generator=generator)
    layers = target.layers(state.position)
    return PathStateProposal(torch.cat(layers[0::2], dim=1), log_weight)
