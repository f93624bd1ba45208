"""The moment-averaged spline path for binary RBMs (Grosse, Maddison & Salakhutdinov 2013, §4.2).

The moment-averaged path between a base RBM p_0 (``W = 0``) and a target RBM p_1 runs through the RBMs
whose moments ``s = (E[v], E[h], E[vhᵀ])`` are ``s_β = (1−β) s_0 + β s_1``. Those RBMs have no closed
form, so the path is approximated by a *spline*: knot RBMs ``θ_j`` at ``0 = b_0 < … < b_J = 1``
(``θ_0`` the base, ``θ_J`` the target), each fitted to its moments ``s_{b_j}`` by moment matching, with
geometric averages between neighbouring knots — for RBMs, the RBM with linearly interpolated
parameters ``θ(β) = (1−t) θ_j + t θ_{j+1}``, ``t = (β − b_j) / (b_{j+1} − b_j)``.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

import torch
from torch.nn import functional as F

from pfzoo.paths.base import AnnealingPath
from pfzoo.sampling import bernoulli


class RBMSplineStatistics(NamedTuple):
    """Per-state statistics at every knot j: ``hidden_inputs [J+1, N, H]`` = ``vW_j + c_j``, ``visible_terms [J+1, N]`` = ``b_j·v``."""

    hidden_inputs: torch.Tensor
    visible_terms: torch.Tensor


class RBMSplinePath(AnnealingPath):
    """Piecewise-geometric path through knot RBMs; state ``v [N, V]`` with the hidden units summed out.

    ``log f_β(v) = b(β)·v + Σ_k softplus(c(β) + v W(β))_k``; since every parameter is linear in β inside
    a segment, so is ``c(β) + vW(β) = (1−t) u_j + t u_{j+1}`` with ``u_j = vW_j + c_j``. The statistics
    hold ``u_j`` and ``b_j·v`` for every knot (J + 1 matrix products per new state against one for the
    geometric path: the spline's extra cost per step), so increments at any β need no further products.
    Increments are differences of ``log f_β`` evaluated entirely in float64 (about 1e-12 relative per
    step, whatever the step size or knots crossed). The transition is one block Gibbs
    sweep of the interpolated RBM, ``h ~ p_β(h | v)``, ``v ~ p_β(v | h)``, reversible as RAISE needs.

    Args:
        knots: knot RBMs ``[θ_0, …, θ_J]`` of one shape, ``θ_0`` with zero weights (exact ``log Z_0``).
        knot_betas: ``[J + 1]`` strictly increasing from 0 to 1.
    """

    def __init__(self, knots, knot_betas) -> None:
        knot_betas = torch.as_tensor(knot_betas, dtype=torch.float64).flatten().cpu()
        if len(knots) < 2 or len(knots) != knot_betas.numel():
            raise ValueError(f"need one knot RBM per knot β (at least two), got {len(knots)} RBMs and {knot_betas.numel()} β's")
        if knot_betas[0] != 0.0 or knot_betas[-1] != 1.0 or (knot_betas.diff() <= 0).any():
            raise ValueError("knot_betas must increase strictly from 0 to 1")
        shape = tuple(knots[0].weight.shape)
        if any(tuple(knot.weight.shape) != shape for knot in knots):
            raise ValueError(f"every knot RBM must have the weight shape {shape}")
        if torch.any(knots[0].weight != 0):
            raise ValueError("the first knot (the base) must have zero weights")
        self.weights = torch.stack([knot.weight.detach() for knot in knots])  # [J+1, V, H]
        self.visible_biases = torch.stack([knot.visible_bias.detach() for knot in knots])  # [J+1, V]
        self.hidden_biases = torch.stack([knot.hidden_bias.detach() for knot in knots])  # [J+1, H]
        self.knot_betas = knot_betas
        self._knot_list = knot_betas.tolist()

    def _locate(self, beta: float) -> tuple[int, float]:
        """Segment j with ``b_j ≤ β ≤ b_{j+1}`` and the position t in it."""
        j = min(max(bisect.bisect_right(self._knot_list, beta) - 1, 0), len(self._knot_list) - 2)
        low, high = self._knot_list[j], self._knot_list[j + 1]
        return j, (beta - low) / (high - low)

    def interpolated(self, beta: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(W(β) [V, H], b(β) [V], c(β) [H])``."""
        j, t = self._locate(beta)
        mix = lambda stack: torch.lerp(stack[j], stack[j + 1], t)  # noqa: E731
        return mix(self.weights), mix(self.visible_biases), mix(self.hidden_biases)

    def sample_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        return bernoulli(torch.sigmoid(self.visible_biases[0]).expand(num_chains, -1), generator=generator)

    def base_log_partition(self) -> torch.Tensor:
        return F.softplus(self.visible_biases[0].double()).sum() + F.softplus(self.hidden_biases[0].double()).sum()

    def statistics(self, v: torch.Tensor) -> RBMSplineStatistics:
        hidden_inputs = torch.baddbmm(self.hidden_biases[:, None, :], v.expand(len(self._knot_list), -1, -1), self.weights)
        return RBMSplineStatistics(hidden_inputs, self.visible_biases @ v.T)

    def _inputs(self, stats: RBMSplineStatistics, beta: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """Hidden inputs ``c(β) + vW(β)`` ``[N, H]`` and visible terms ``b(β)·v`` ``[N]`` in ``dtype``."""
        j, t = self._locate(beta)
        hidden = torch.lerp(stats.hidden_inputs[j].to(dtype), stats.hidden_inputs[j + 1].to(dtype), t)
        return hidden, torch.lerp(stats.visible_terms[j].double(), stats.visible_terms[j + 1].double(), t)

    def log_f(self, stats: RBMSplineStatistics, beta: float) -> torch.Tensor:
        """``log f_β(v)`` float64 ``[N]``, evaluated in float64 throughout."""
        hidden, visible = self._inputs(stats, beta, torch.float64)
        return visible + F.softplus(hidden).sum(-1)

    def log_weight_increment(self, stats: RBMSplineStatistics, beta_from: float, beta_to: float) -> torch.Tensor:
        return self.log_f(stats, beta_to) - self.log_f(stats, beta_from)

    def transition(self, v, stats, beta: float, *, generator: torch.Generator | None = None):
        weight, visible_bias, _ = self.interpolated(beta)
        hidden, _ = self._inputs(stats, beta, stats.hidden_inputs.dtype)
        h = bernoulli(torch.sigmoid(hidden), generator=generator)
        v = bernoulli(torch.sigmoid(torch.addmm(visible_bias, h, weight.T)), generator=generator)
        return v, self.statistics(v)


def rbm_moments(rbm, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rao–Blackwellised moment estimates from samples ``v [N, V]``: ``(E[v] [V], E[h] [H], E[vhᵀ] [V, H])`` with ``h`` → ``p(h=1 | v)``."""
    hidden = torch.sigmoid(v @ rbm.weight + rbm.hidden_bias)
    return v.mean(0), hidden.mean(0), v.T @ hidden / v.shape[0]


@torch.no_grad()
def fit_moment_averaged_knots(
    target,
    base,
    knot_betas,
    *,
    num_chains: int = 1000,
    burn_in: int = 1000,
    iterations: int = 300,
    learning_rate: float = 0.1,
    target_moments: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    generator: torch.Generator | None = None,
) -> list:
    """Knot RBMs of the moment-averaged spline: ``[base, θ_1, …, θ_{J−1}, target]``.

    Target moments ``s_1`` come from ``target_moments`` or from ``num_chains`` Gibbs chains of the target
    started at base samples, after ``burn_in`` sweeps; the base's are exact (factorised). Each interior
    knot starts at the geometric path's RBM at ``b_j`` (``W = b_j W_1``, biases interpolated) and is fitted
    to ``s_{b_j} = (1−b_j) s_0 + b_j s_1`` by ``iterations`` steps of persistent moment matching:
    one Gibbs sweep of its chains, then ``θ += learning_rate · (s_{b_j} − ŝ(chains))`` — the
    log-likelihood gradient of a model whose data statistics are ``s_{b_j}`` — returning the average
    of the iterates over the second half (Polyak averaging, which removes most of the chains' noise).
    """
    from pfzoo.models.rbm import RBM

    knot_betas = torch.as_tensor(knot_betas, dtype=torch.float64).flatten().cpu()
    if knot_betas.numel() < 2 or knot_betas[0] != 0.0 or knot_betas[-1] != 1.0 or (knot_betas.diff() <= 0).any():
        raise ValueError("knot_betas must increase strictly from 0 to 1")
    if tuple(base.weight.shape) != tuple(target.weight.shape) or torch.any(base.weight != 0):
        raise ValueError("base must be an RBM of the target's shape with zero weights")
    if target_moments is None:
        v = bernoulli(torch.sigmoid(base.visible_bias).expand(num_chains, -1), generator=generator)
        for _ in range(burn_in):
            v = target.draw_visible(target.draw_hidden(v, generator=generator), generator=generator)
        target_moments = rbm_moments(target, v)
    mean_v0, mean_h0 = torch.sigmoid(base.visible_bias), torch.sigmoid(base.hidden_bias)
    base_moments = (mean_v0, mean_h0, torch.outer(mean_v0, mean_h0))
    knots = [base]
    chains = bernoulli(mean_v0.expand(num_chains, -1), generator=generator)
    for b in knot_betas[1:-1].tolist():
        goal = [(1 - b) * s0 + b * s1 for s0, s1 in zip(base_moments, target_moments)]
        knot = RBM.from_tensors(b * target.weight.detach(), torch.lerp(base.visible_bias, target.visible_bias, b).detach(),
                                torch.lerp(base.hidden_bias, target.hidden_bias, b).detach())
        parameters = (knot.visible_bias, knot.hidden_bias, knot.weight)
        averages = [torch.zeros_like(parameter) for parameter in parameters]
        for iteration in range(iterations):
            chains = knot.draw_visible(knot.draw_hidden(chains, generator=generator), generator=generator)
            for parameter, wanted, estimate in zip(parameters, goal, rbm_moments(knot, chains)):
                parameter.add_(learning_rate * (wanted - estimate))
            if iteration >= iterations // 2:
                for average, parameter in zip(averages, parameters):
                    average.add_(parameter, alpha=1.0 / (iterations - iterations // 2))
        for parameter, average in zip(parameters, averages):
            parameter.copy_(average)
        knots.append(knot)
    knots.append(target)
    return knots
