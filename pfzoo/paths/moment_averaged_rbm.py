"""The moment-averaged spline path for binary RBMs (Grosse, Maddison & Salakhutdinov 2013, §4.2).

The moment-averaged (MA) path between a base RBM p_0 (``W = 0``) and a target RBM p_1 runs through the
RBMs whose moments ``s = (E[v], E[h], E[vhᵀ])`` are the averages (eq. 7)

    s_β = (1−β) s_0 + β s_1.

Those RBMs have no closed form, so the path is approximated by a *spline*: knot RBMs ``θ_j`` at
``0 = b_0 < b_1 < … < b_J = 1`` (``θ_0`` the base, ``θ_J`` the target), the interior ones fitted to
their moments ``s_{b_j}`` by moment matching (:func:`fit_moment_averaged_knots`), and between two
neighbouring knots their geometric average, which for RBMs (energies linear in the parameters) is
the RBM with linearly interpolated parameters

    θ(β) = (1−t) θ_j + t θ_{j+1},   t = (β − b_j) / (b_{j+1} − b_j)

(:class:`RBMSplinePath`). Each segment is therefore a geometric path between two RBMs, evaluated
the way :class:`~pfzoo.paths.geometric.RBMGeometricPath` evaluates its single segment.
"""

from __future__ import annotations

import bisect
import math
from typing import NamedTuple

import torch
from torch.nn import functional as F

from pfzoo.kernels import BLOCK_CONDITIONALS, BlockGibbs, Kernel, check_kernel
from pfzoo.logmath import softplus, softplus_difference
from pfzoo.models.capabilities import Capability, require
from pfzoo.models.rbm import RBM
from pfzoo.paths.base import AnnealingPath, tempered_block_rows
from pfzoo.paths.registry import register_path
from pfzoo.sampling import bernoulli
from pfzoo.validation import check_beta, check_non_negative_int, check_positive_int

_MAX_EXACT_MOMENT_UNITS = 20


def _check_knot_betas(knot_betas, name: str = "knot_betas") -> torch.Tensor:
    """``knot_betas`` as float64 CPU ``[J + 1]``, strictly increasing from exactly 0 to exactly 1."""
    betas = torch.as_tensor(knot_betas, dtype=torch.float64).flatten().cpu()
    if betas.numel() < 2 or not torch.isfinite(betas).all():
        raise ValueError(f"{name} must hold at least two finite values (0 and 1), got {betas.tolist()}")
    if betas[0] != 0.0 or betas[-1] != 1.0 or (betas.diff() <= 0).any():
        raise ValueError(f"{name} must increase strictly from 0 to 1, got {betas.tolist()}")
    return betas


class RBMSplineStatistics(NamedTuple):
    """Statistics of visible states ``v [N, V]`` in segment ``j`` (between knots ``b_j`` and ``b_{j+1}``).

    visible: ``v [N, V]`` itself, kept to evaluate other segments on demand (a reference, no copy).
    segment: j; ``None`` for rows kept in different segments (the replicas of a ladder's levels stacked by
        :class:`~pfzoo.kernels.ParallelTempering`): every use then recomputes them from ``visible`` (:meth:`RBMSplinePath._in_segment`).
    hidden_input: ``u_j = vW_j + c_j`` ``[N, H]``; the hidden pre-activation at position t is ``u_j + t · hidden_delta``.
    hidden_delta: ``v(W_{j+1} − W_j) + (c_{j+1} − c_j)`` ``[N, H]``.
    visible_term: ``b_j·v`` ``[N]``.
    visible_delta: ``(b_{j+1} − b_j)·v`` ``[N]``.
    """

    visible: torch.Tensor
    segment: int | None
    hidden_input: torch.Tensor
    hidden_delta: torch.Tensor
    visible_term: torch.Tensor
    visible_delta: torch.Tensor


class RBMSplinePath(AnnealingPath):
    """Piecewise-geometric path through knot RBMs (the MA spline, Grosse et al. 2013, §4.2); state ``v [N, V]``.

    With the hidden units summed out, inside segment j at position ``t``:

        log f_β(v) = b(β)·v + Σ_k softplus(c(β) + vW(β))_k,   θ(β) = θ_j + t (θ_{j+1} − θ_j),

    so the hidden input ``c(β) + vW(β) = u_j + t d_j`` is linear in t, with ``u_j = vW_j + c_j`` and
    ``d_j = v(W_{j+1} − W_j) + c_{j+1} − c_j``. ``log Z_0 = Σ_i softplus(b_0,i) + Σ_k softplus(c_0,k)``.

    Statistics design: a state's statistics hold ``u_j``, ``d_j``, ``b_j·v`` and ``(b_{j+1} − b_j)·v`` for
    *one* segment only — the segment of the β of the transition that produced the state, which
    contains every β the next increment needs unless the schedule steps over a knot. They cost one
    matrix product ``v [N, V] @ [W_j | W_{j+1} − W_j] [V, 2H]`` per state, independently of the number
    of knots (storing ``vW_j`` for every knot would cost J + 1 products per step, for increments that
    almost never leave a segment). An increment that crosses knots is split at them, and each other
    segment's statistics are computed from the stored ``v`` when needed (one extra product per knot
    crossed, i.e. at most J per annealing run). The transition reuses ``u_j + t d_j`` as the hidden input,
    so one step costs the work of three ``N·V·H`` products (``h W(β)ᵀ`` and the new state's ``[V, 2H]``
    product) against the geometric path's two: about 1.6× its time per step at 784 × 500 on a CPU.

    Increments inside a segment are those of a geometric path (cf. :class:`~pfzoo.paths.geometric.RBMGeometricPath`):

        log f_{t'}(v) − log f_t(v) = (t'−t) (b_{j+1} − b_j)·v + Σ_k [softplus(x'_k) − softplus(x'_k − (t'−t) d_k)],

    ``x' = u_j + t' d_j``, the hidden sum evaluated without cancellation by
    :func:`pfzoo.logmath.softplus_difference` (tiny steps give tiny, accurate increments) and
    accumulated in float64. The transition at β is one block Gibbs sweep of the interpolated RBM,
    ``h ~ p_β(h | v)``, ``v ~ p_β(v | h)``: it leaves ``p_β`` invariant, and is its own reversal as RAISE needs.

    Args:
        knots: knot RBMs ``[θ_0, …, θ_J]`` of one shape, dtype and device; ``θ_0`` (the base) with zero
            weights, so that ``log Z_0`` is exact.
        knot_betas: float64 ``[J + 1]`` strictly increasing from 0 to 1, the knot positions ``b_j``.
        kernel: a kernel on block conditionals (default one :class:`~pfzoo.kernels.BlockGibbs` sweep per step).
    """

    def __init__(self, knots, knot_betas, kernel: Kernel | None = None) -> None:
        knots = list(knots)
        knot_betas = _check_knot_betas(knot_betas)
        if len(knots) < 2 or len(knots) != knot_betas.numel():
            raise ValueError(f"knots must hold one RBM per knot β (at least two), got {len(knots)} RBMs and {knot_betas.numel()} knot_betas")
        first = knots[0].weight
        for index, knot in enumerate(knots):
            weight = knot.weight
            if weight.shape != first.shape or knot.visible_bias.shape != (first.shape[0],) or knot.hidden_bias.shape != (first.shape[1],):
                raise ValueError(f"knots[{index}] has weight shape {tuple(weight.shape)}; every knot RBM must have shape {tuple(first.shape)}")
            if weight.dtype != first.dtype or weight.device != first.device:
                raise ValueError(f"knots[{index}] is {weight.dtype} on {weight.device}; every knot must be {first.dtype} on {first.device}")
        if torch.any(first != 0):
            raise ValueError("knots[0] (the base) must have zero weights (a factorised, tractable model)")
        with torch.no_grad():
            weights = torch.stack([knot.weight.detach() for knot in knots])  # [J+1, V, H]
            visible_biases = torch.stack([knot.visible_bias.detach() for knot in knots])  # [J+1, V]
            hidden_biases = torch.stack([knot.hidden_bias.detach() for knot in knots])  # [J+1, H]
            self.weights, self.visible_biases, self.hidden_biases = weights, visible_biases, hidden_biases
            self.weight_deltas = weights.diff(dim=0)  # [J, V, H]
            self.visible_bias_deltas = visible_biases.diff(dim=0)  # [J, V]
            hidden_bias_deltas = hidden_biases.diff(dim=0)  # [J, H]
            # per segment, one product gives u_j and d_j: v @ [W_j | ΔW_j] + [c_j | Δc_j]
            self.segment_weights = torch.cat([weights[:-1], self.weight_deltas], dim=-1)  # [J, V, 2H]
            self.segment_hidden_biases = torch.cat([hidden_biases[:-1], hidden_bias_deltas], dim=-1)  # [J, 2H]
            self.segment_visible_biases = torch.stack([visible_biases[:-1], self.visible_bias_deltas], dim=-1)  # [J, V, 2]
            # |d_k| ≤ Σ_i |ΔW_ik| + |Δc_k| for v ∈ {0,1}^V: bounds each segment's hidden change without a device sync
            self.segment_delta_bounds = (self.weight_deltas.abs().sum(1) + hidden_bias_deltas.abs()).amax(-1).tolist()
        self.knot_betas = knot_betas
        self._device_knot_betas = knot_betas.to(first.device)  # located against on the device (tempered_log_density)
        self._knots = knot_betas.tolist()
        self.num_segments = len(self._knots) - 1
        self.target = RBMSplineConditionals(self)
        self.kernel = BlockGibbs() if kernel is None else check_kernel(kernel, self.target.offers, "an RBM spline path")

    # ---- where a β lies ------------------------------------------------------------------

    def locate(self, beta: float) -> tuple[int, float]:
        """Segment j with ``b_j ≤ β < b_{j+1}`` (β = 1: the last segment) and the position ``t ∈ [0, 1]`` in it."""
        j = min(max(bisect.bisect_right(self._knots, beta) - 1, 0), self.num_segments - 1)
        return j, self._position(beta, j)

    def _position(self, beta: float, j: int) -> float:
        """``t = (β − b_j) / (b_{j+1} − b_j)`` clipped to [0, 1], exactly 0 and 1 at the knots."""
        low, high = self._knots[j], self._knots[j + 1]
        if beta <= low:
            return 0.0
        if beta >= high:
            return 1.0
        return (beta - low) / (high - low)

    def interpolated(self, beta: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The RBM at β: ``(W(β) [V, H], b(β) [V], c(β) [H])`` in the knots' dtype."""
        j, t = self.locate(check_beta(beta))
        return (torch.add(self.weights[j], self.weight_deltas[j], alpha=t),
                torch.add(self.visible_biases[j], self.visible_bias_deltas[j], alpha=t),
                torch.lerp(self.hidden_biases[j], self.hidden_biases[j + 1], t))

    # ---- AnnealingPath -------------------------------------------------------------------

    def draw_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        check_positive_int(num_chains, "num_chains")
        return bernoulli(torch.sigmoid(self.visible_biases[0]).expand(num_chains, -1), generator=generator)

    def base_log_partition(self) -> torch.Tensor:
        return F.softplus(self.visible_biases[0].double()).sum() + F.softplus(self.hidden_biases[0].double()).sum()

    def segment_statistics(self, v: torch.Tensor, segment: int = 0) -> RBMSplineStatistics:
        """Statistics of ``v [N, V]`` in ``segment`` (default the first, where annealing from the base starts)."""
        hidden = torch.addmm(self.segment_hidden_biases[segment], v, self.segment_weights[segment])
        visible = v @ self.segment_visible_biases[segment]
        num_hidden = self.weights.shape[-1]
        return RBMSplineStatistics(v, segment, hidden[:, :num_hidden], hidden[:, num_hidden:], visible[:, 0], visible[:, 1])

    def _in_segment(self, stats: RBMSplineStatistics, segment: int) -> RBMSplineStatistics:
        return stats if stats.segment == segment else self.segment_statistics(stats.visible, segment)

    def log_f(self, v: torch.Tensor, beta: float) -> torch.Tensor:
        """``log f_β(v)`` for ``v [N, V]`` → float64 ``[N]``, from scratch in float64 (a reference; the engine uses increments)."""
        j, t = self.locate(check_beta(beta))
        weight = torch.lerp(self.weights[j].double(), self.weights[j + 1].double(), t)
        visible_bias = torch.lerp(self.visible_biases[j].double(), self.visible_biases[j + 1].double(), t)
        hidden_bias = torch.lerp(self.hidden_biases[j].double(), self.hidden_biases[j + 1].double(), t)
        v = v.double()
        return v @ visible_bias + F.softplus(torch.addmm(hidden_bias, v, weight)).sum(-1)

    def log_weight_increment(self, stats: RBMSplineStatistics, beta_from: float, beta_to: float) -> torch.Tensor:
        """``log f_{beta_to}(v) − log f_{beta_from}(v)`` float64 ``[N]`` (class docstring), split at any knots in between."""
        beta_from, beta_to = check_beta(beta_from, "beta_from"), check_beta(beta_to, "beta_to")
        low, high = min(beta_from, beta_to), max(beta_from, beta_to)
        total = None
        if low < high:
            first = min(max(bisect.bisect_right(self._knots, low) - 1, 0), self.num_segments - 1)
            last = min(max(bisect.bisect_left(self._knots, high) - 1, 0), self.num_segments - 1)
            for j in range(first, last + 1):
                segment_stats = self._in_segment(stats, j)
                t_from, t_to = self._position(beta_from, j), self._position(beta_to, j)
                part = self._segment_increment(segment_stats, j, t_from, t_to)
                total = part if total is None else total + part
        if total is None:
            return torch.zeros(stats.visible.shape[0], dtype=torch.float64, device=stats.visible.device)
        return total

    def _segment_increment(self, stats: RBMSplineStatistics, j: int, t_from: float, t_to: float) -> torch.Tensor:
        step = t_to - t_from
        x_to = torch.add(stats.hidden_input, stats.hidden_delta, alpha=t_to)
        hidden = softplus_difference(x_to, step * stats.hidden_delta, max_abs_delta=abs(step) * self.segment_delta_bounds[j])
        return step * stats.visible_delta.double() + hidden

    def tempered_log_density(self, stats: RBMSplineStatistics, beta: torch.Tensor) -> torch.Tensor:
        """``log f_β(v) − log f_0(v)`` at a β per row and column ``beta [N, K]``, float64 ``[N, K]``, with every entry in
        its own segment j at its own position t (:meth:`locate`, elementwise):

            log f_β(v) − log f_0(v) = e_j + t (e_{j+1} − e_j) − e_0 + Σ_k [softplus(a_j + t (a_{j+1} − a_j))_k − softplus(c_0,k)],

        from every knot's hidden input ``a_j = vW_j + c_j`` ``[H]`` (``a_0 = c_0``: ``W_0 = 0``) and visible term
        ``e_j = b_j·v``: the telescoped sum of the increments over the segments below β. One product
        ``v [N, V] @ W_{1..J}`` gives the knots' inputs from the states' ``v`` alone, whatever segment their statistics
        were kept in (the replicas of a ladder's levels keep several), where a level's increment from 0 costs one product
        per segment it crosses; then one ``[N, K, H]`` pass, in blocks of rows whose ``[rows, max(K, J + 1), H]``
        intermediates hold at most :data:`~pfzoo.paths.base.TEMPERED_BLOCK_ELEMENTS` elements (thousands of chains over
        a ladder would otherwise hold gigabytes)."""
        v = stats.visible
        knot_betas = self._device_knot_betas
        segment = (torch.searchsorted(knot_betas, beta.contiguous(), right=True) - 1).clamp_(0, self.num_segments - 1)  # [N, K]
        low, high = knot_betas[segment], knot_betas[segment + 1]
        position = ((beta - low) / (high - low)).clamp_(0.0, 1.0)  # exactly 0 and 1 at the knots, as _position
        visible_terms = (v @ self.visible_biases.T).double()  # [N, J + 1]
        visible = torch.lerp(visible_terms.gather(1, segment), visible_terms.gather(1, segment + 1), position) - visible_terms[:, :1]
        base_hidden_bias = self.hidden_biases[0].double()
        num_knots, num_hidden = self.hidden_biases.shape
        rows = tempered_block_rows(max(beta.shape[1], num_knots), num_hidden)
        hidden = []
        for block_v, block_segment, block_position in zip(v.split(rows), segment.split(rows), position.split(rows)):
            inputs = torch.matmul(block_v, self.weights[1:]) + self.hidden_biases[1:, None]  # [J, n, H]: knots 1..J
            inputs = torch.cat([base_hidden_bias.expand(block_v.shape[0], 1, -1), inputs.transpose(0, 1).double()], 1)  # [n, J + 1, H]
            chains = torch.arange(block_v.shape[0], device=v.device)[:, None]
            hidden_input = torch.lerp(inputs[chains, block_segment], inputs[chains, block_segment + 1], block_position[:, :, None])
            hidden.append(softplus(hidden_input).sum(-1))
        return visible + torch.cat(hidden) - softplus(base_hidden_bias).sum()



class RBMSplineConditionals:
    """The RBM θ(β) of an :class:`RBMSplinePath` as a block-Gibbs target (:class:`~pfzoo.kernels.BlockConditionals`).

    A state's statistics are kept in the segment of the β it was drawn at (:meth:`RBMSplinePath.segment_statistics`),
    so the next draw and the path's increments reuse them; statistics of another segment are recomputed from the
    stored ``v`` when needed."""

    offers = frozenset({BLOCK_CONDITIONALS})

    def __init__(self, path: RBMSplinePath) -> None:
        self.path = path

    def statistics(self, v: torch.Tensor, *, beta: float = 0.0) -> RBMSplineStatistics:
        return self.path.segment_statistics(v, self.path.locate(beta)[0])

    def draw_hidden(self, v: torch.Tensor, stats: RBMSplineStatistics, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        j, t = self.path.locate(check_beta(beta))
        stats = self.path._in_segment(stats, j)
        return bernoulli(torch.add(stats.hidden_input, stats.hidden_delta, alpha=t).sigmoid_(), generator=generator)

    def draw_visible(self, h: torch.Tensor, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        path = self.path
        j, t = path.locate(beta)
        weight = torch.add(path.weights[j], path.weight_deltas[j], alpha=t)
        visible_bias = torch.add(path.visible_biases[j], path.visible_bias_deltas[j], alpha=t)
        return bernoulli(torch.addmm(visible_bias, h, weight.T).sigmoid_(), generator=generator)


# ---- moments and knot fitting ------------------------------------------------------------


def rbm_moments(rbm, v: torch.Tensor, weights: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rao–Blackwellised moment estimates from samples ``v [N, V]`` of an RBM:
    ``(E[v] [V], E[h] [H], E[vhᵀ] [V, H])`` with the sampled ``h`` replaced by ``E[h | v] = σ(vW + c)``; with
    ``weights [N]`` (summing to 1, e.g. self-normalised importance weights) the weighted averages instead of the means."""
    with torch.no_grad():
        hidden = torch.sigmoid(torch.addmm(rbm.hidden_bias, v, rbm.weight))
        if weights is None:
            return v.mean(0), hidden.mean(0), v.T @ hidden / v.shape[0]
        return weights @ v, weights @ hidden, (v * weights[:, None]).T @ hidden


@torch.no_grad()
def exact_rbm_moments(rbm, *, max_units: int = _MAX_EXACT_MOMENT_UNITS) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exact ``(E[v] [V], E[h] [H], E[vhᵀ] [V, H])`` (float64) by enumerating the smaller layer (tiny RBMs).

    Enumerating v: ``p(v) ∝ exp(b·v + Σ_k softplus(vW + c)_k)`` and ``E[h | v] = σ(vW + c)``; enumerating h
    is the same with the layers swapped. Raises ``ValueError`` beyond ``2^max_units`` states.
    """
    weight, visible_bias, hidden_bias = rbm.weight.double(), rbm.visible_bias.double(), rbm.hidden_bias.double()
    swap = weight.shape[1] < weight.shape[0]
    if swap:
        weight, visible_bias, hidden_bias = weight.T, hidden_bias, visible_bias
    num_units = weight.shape[0]
    if num_units > max_units:
        raise ValueError(f"exact moments would enumerate 2^{num_units} states, above max_units={max_units}")
    index = torch.arange(1 << num_units, device=weight.device)
    states = ((index[:, None] & (1 << torch.arange(num_units, device=weight.device))) != 0).double()
    hidden_input = torch.addmm(hidden_bias, states, weight)
    log_p = states @ visible_bias + F.softplus(hidden_input).sum(-1)
    p = torch.softmax(log_p, 0)
    other = torch.sigmoid(hidden_input)
    mean_states, mean_other, cross = p @ states, p @ other, (states * p[:, None]).T @ other
    if swap:
        return mean_other, mean_states, cross.T
    return mean_states, mean_other, cross


def _check_moments(moments, shape: tuple[int, int], name: str, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if not isinstance(moments, (tuple, list)) or len(moments) != 3:
        raise ValueError(f"{name} must be a triple (E[v] [V], E[h] [H], E[vhᵀ] [V, H])")
    expected = ((shape[0],), (shape[1],), shape)
    out = []
    for part, want, label in zip(moments, expected, ("E[v]", "E[h]", "E[vhᵀ]")):
        part = torch.as_tensor(part)
        if tuple(part.shape) != want:
            raise ValueError(f"{name}: {label} must have shape {list(want)}, got {list(part.shape)}")
        if not torch.isfinite(part).all() or (part < 0).any() or (part > 1).any():
            raise ValueError(f"{name}: {label} must be finite probabilities in [0, 1]")
        out.append(part.to(like))
    return tuple(out)


def _gibbs_sweeps(rbm, v: torch.Tensor, num_sweeps: int, generator) -> torch.Tensor:
    """``num_sweeps`` ≥ 0 steps of ``rbm``'s own block-Gibbs chain from ``v [N, V]``."""
    kernel, target = rbm.gibbs_chain()
    state = kernel.init(v, target)
    for _ in range(num_sweeps):
        state, _ = kernel.step(state, target, generator=generator)
    return state.position


@torch.no_grad()
def estimate_rbm_moments(rbm, start: torch.Tensor, *, burn_in: int = 1000, moment_sweeps: int = 100,
                         generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rao–Blackwellised ``(E[v] [V], E[h] [H], E[vhᵀ] [V, H])`` of ``rbm`` from its block-Gibbs chains started at
    ``start [N, V]``: ``burn_in`` ≥ 0 sweeps discarded, then :func:`rbm_moments` averaged over ``moment_sweeps`` sweeps.
    The target moments of :func:`fit_moment_averaged_knots` (its chains start at base draws unless given a start)."""
    check_non_negative_int(burn_in, "burn_in")
    check_positive_int(moment_sweeps, "moment_sweeps")
    v = _gibbs_sweeps(rbm, start, burn_in, generator)
    sums = [torch.zeros_like(rbm.visible_bias), torch.zeros_like(rbm.hidden_bias), torch.zeros_like(rbm.weight)]
    for _ in range(moment_sweeps):
        v = _gibbs_sweeps(rbm, v, 1, generator)
        for total, estimate in zip(sums, rbm_moments(rbm, v)):
            total.add_(estimate)
    return tuple(total / moment_sweeps for total in sums)


@torch.no_grad()
def fit_moment_averaged_knots(
    target,
    base,
    knot_betas,
    *,
    target_moments: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    moment_start: torch.Tensor | None = None,
    num_chains: int = 1000,
    burn_in: int = 1000,
    moment_sweeps: int = 100,
    iterations: int = 300,
    gibbs_steps: int = 1,
    learning_rate: float = 0.1,
    momentum: float = 0.5,
    generator: torch.Generator | None = None,
) -> list:
    """Knot RBMs of the moment-averaged spline, ``[base, θ_1, …, θ_{J−1}, target]`` (Grosse et al. 2013, §4.2).

    Target moments ``s_1``: ``target_moments`` if given (e.g. :func:`exact_rbm_moments` for tiny RBMs),
    else Rao–Blackwellised estimates (:func:`estimate_rbm_moments`) from ``num_chains`` Gibbs chains of the target,
    started at base samples (or at the rows of ``moment_start [N, V]``, e.g. training data, when given), averaged over
    ``moment_sweeps`` sweeps after ``burn_in`` discarded ones. On an RBM whose Gibbs chains mix poorly, chains started at
    uniform noise may not reach the target's mass however long they run, and the knots then lead towards the wrong
    moments (the zoo's CD1(500) from a uniform base: log Ẑ 13 nats low; ``reports/paths``, the spline ablation) — start
    them at training data or pass ``target_moments``.
    Base moments ``s_0`` are exact (a ``W = 0`` RBM factorises: ``E[v] = σ(b_0)``, ``E[h] = σ(c_0)``,
    ``E[vhᵀ] = E[v] E[h]ᵀ``).

    Knot j (``0 < b_j < 1``) starts at the geometric path's RBM at ``b_j`` (``W = b_j W_1``, biases
    interpolated) and is fitted to ``s_{b_j} = (1−b_j) s_0 + b_j s_1`` (eq. 7) by ``iterations`` steps of
    persistent moment matching: ``gibbs_steps`` block Gibbs sweeps of ``num_chains`` persistent chains of
    the current θ_j, then a step along ``g = s_{b_j} − ŝ(chains)``, the log-likelihood gradient of an RBM
    whose data statistics are ``s_{b_j}`` (PCD, Tieleman 2008), with classical momentum:
    ``u ← momentum · u + g``, ``θ_j += learning_rate · u``. Moment matching is ill-conditioned, so plain
    small steps converge slowly, while effective steps ``learning_rate / (1 − momentum)`` above ~0.4
    oscillated on RBMs of 50 × 20 units (the persistent chains cannot follow); the defaults (effective
    step 0.2, as in the zoo's PCD training) converged on every small RBM tried. The returned
    knot is the average of the iterates over the second half (Polyak averaging, which removes most of
    the chains' noise). The chains carry over from one knot to the next (they are close to equilibrium
    for the nearby knot).

    Args:
        target: the target RBM (β = 1); base: a ``W = 0`` RBM of the same shape (β = 0).
        knot_betas: float64 ``[J + 1]`` strictly increasing from 0 to 1.
        generator: drives every random draw; the same seed gives identical knots.

    Returns:
        ``J + 1`` RBMs, the first ``base`` and the last ``target`` themselves.
    """
    knot_betas = _check_knot_betas(knot_betas)
    for model, name in ((target, "the spline's target"), (base, "the spline's base")):
        require(model, Capability.BINARY_STATES, Capability.VISIBLE_GIBBS_CHAIN, Capability.HIDDEN_CHAIN, by=name)
    if base.weight.shape != target.weight.shape:
        raise ValueError(f"base has weight shape {tuple(base.weight.shape)}, target {tuple(target.weight.shape)}; they must match")
    if base.dtype != target.dtype or base.device != target.device:
        raise ValueError(f"base is {base.dtype} on {base.device}, target {target.dtype} on {target.device}; they must match")
    if torch.any(base.weight != 0):
        raise ValueError("base must have zero weights (a factorised, tractable model)")
    for value, name in ((num_chains, "num_chains"), (burn_in, "burn_in"), (moment_sweeps, "moment_sweeps"),
                        (iterations, "iterations"), (gibbs_steps, "gibbs_steps")):
        check_positive_int(value, name)
    if not (isinstance(learning_rate, (int, float)) and math.isfinite(learning_rate) and learning_rate > 0):
        raise ValueError(f"learning_rate must be a positive finite number, got {learning_rate!r}")
    if not (isinstance(momentum, (int, float)) and 0 <= momentum < 1):
        raise ValueError(f"momentum must lie in [0, 1), got {momentum!r}")

    mean_v0, mean_h0 = torch.sigmoid(base.visible_bias.detach()), torch.sigmoid(base.hidden_bias.detach())
    base_moments = (mean_v0, mean_h0, torch.outer(mean_v0, mean_h0))
    if target_moments is None:
        if moment_start is None:
            moment_start = bernoulli(mean_v0.expand(num_chains, -1), generator=generator)
        else:
            moment_start = target.check_visible(moment_start, "moment_start")
        target_moments = estimate_rbm_moments(target, moment_start, burn_in=burn_in, moment_sweeps=moment_sweeps, generator=generator)
    else:
        target_moments = _check_moments(target_moments, tuple(target.weight.shape), "target_moments", base_moments[0])

    knots = [base]
    chains = bernoulli(mean_v0.expand(num_chains, -1), generator=generator)
    averaged_from = iterations // 2
    for b in knot_betas[1:-1].tolist():
        goal = [torch.lerp(s0, s1, b) for s0, s1 in zip(base_moments, target_moments)]
        knot = RBM.from_tensors(b * target.weight.detach(), torch.lerp(base.visible_bias.detach(), target.visible_bias.detach(), b),
                                torch.lerp(base.hidden_bias.detach(), target.hidden_bias.detach(), b))
        parameters = (knot.visible_bias, knot.hidden_bias, knot.weight)
        averages = [torch.zeros_like(parameter) for parameter in parameters]
        velocities = [torch.zeros_like(parameter) for parameter in parameters]
        for iteration in range(iterations):
            chains = _gibbs_sweeps(knot, chains, gibbs_steps, generator)
            for parameter, velocity, wanted, estimate in zip(parameters, velocities, goal, rbm_moments(knot, chains)):
                velocity.mul_(momentum).add_(wanted).sub_(estimate)
                parameter.add_(velocity, alpha=learning_rate)
            if iteration >= averaged_from:
                for average, parameter in zip(averages, parameters):
                    average.add_(parameter, alpha=1.0 / (iterations - averaged_from))
        for parameter, average in zip(parameters, averages):
            parameter.copy_(average)
        knots.append(knot)
    knots.append(target)
    return knots


@register_path("rbm", "moment_averaged")
def rbm_moment_averaged_path(
    model, base, kernel, *, num_knots: int | None = None, knot_betas=None, generator: torch.Generator | None = None, **fit_options
) -> RBMSplinePath:
    """The moment-averaged spline of Grosse, Maddison & Salakhutdinov (2013, §4.2) from the ``W = 0`` RBM ``base``.

    :class:`RBMSplinePath` through ``num_knots`` (default 5) interior knot RBMs at evenly spaced ``b_j = j / (num_knots + 1)``,
    or at ``knot_betas`` (float64 ``[J + 1]``, strictly increasing from 0 to 1; ``num_knots``, if also given, must be J − 1),
    fitted by :func:`fit_moment_averaged_knots` (target moments from Gibbs chains; ``fit_options`` are passed on,
    e.g. ``num_chains``, ``iterations``, ``target_moments``, ``moment_start``). Even spacing in β is even spacing in moment
    space along the MA path (its moments are linear in β), so every knot is fitted to the same share of the moment change.
    ``generator`` drives the fitting and defaults to a fresh generator seeded with 0, so the same model and base always
    give the same path. Fitting costs a few hundred Gibbs sweeps of ``num_chains`` chains per knot, paid once per path.
    """
    if knot_betas is None:
        num_knots = 5 if num_knots is None else check_positive_int(num_knots, "num_knots")
        knot_betas = torch.linspace(0.0, 1.0, num_knots + 2, dtype=torch.float64)
    else:
        knot_betas = _check_knot_betas(knot_betas)
        if num_knots is not None and num_knots != knot_betas.numel() - 2:
            raise ValueError(f"num_knots={num_knots!r} disagrees with knot_betas, which hold {knot_betas.numel() - 2} interior knots")
    if generator is None:
        generator = torch.Generator(device=model.device).manual_seed(0)
    knots = fit_moment_averaged_knots(model, base, knot_betas, generator=generator, **fit_options)
    return RBMSplinePath(knots, knot_betas, kernel)
