"""Bridge sampling along a ladder of distributions: ``log Z_K − log Z_0 = Σ_k log Z_{k+1}/Z_k``, each neighbouring ratio
by a bridge between the two levels' draws (Meng & Wong 1996, eq. 2.2 and 4.1; Gelman & Meng 1998, §3.3 on chaining
bridges), with the draws of each level weighted by the chains' annealing weights (Neal 2001, eq. 4) so that the
estimate stays consistent where the chains have not reached their level's distribution.

The ladder ``0 = β_0 < β_1 < … < β_K = 1`` is chosen by a pilot run of chains of its own (:func:`pilot_ladder`): each
next β is the largest whose conditional ESS from the current level's draws stays at least ``target_overlap`` (Zhou,
Johansen & Aston 2016, eq. 3.16, with uniform weights), so a base that already overlaps the model gives the one-rung
ladder ``[0, 1]`` (the direct bridge) and a base far from it gives as many rungs as the overlap needs. The estimation
chains never choose their own ladder, so the ladder's noise is independent of theirs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from pfzoo.estimators.base import MIN_TAIL_FIT_CHAINS
from pfzoo.estimators.adaptive_tempering import next_step
from pfzoo.logmath import log_mean_exp, pareto_tail_index
from pfzoo.paths.base import AnnealingPath
from pfzoo.validation import all_finite

BRIDGES = ("optimal", "geometric")

MAX_ITERATIONS = 1000
"""Fixed-point iterations of an optimal bridge before giving up (it converges in tens for overlapping levels)."""

MAX_RUNGS = 1000
"""The pilot's steps are at least ``1 / MAX_RUNGS`` long (a ladder of more rungs costs more than AIS would)."""


@dataclass(frozen=True)
class LadderBridge:
    """``log Z_K − log Z_0`` by bridge sampling between the neighbours of a ladder.

    log_ratio, stderr: the estimate and its delta-method standard error, from the spread over chains of each chain's
        influence on every rung (so it counts the chains' autocorrelation, the annealing weights' spread and the
        dependence between neighbouring rungs that share a level's draws).
    pair_log_ratios ``[K]``: each rung's ``log Z_{k+1}/Z_k``.
    min_weight_ess: the least effective number of chains at any level (from the annealing weights; C when the weights
        are equal): where it is small, a few chains carry the level's draws.
    converged: whether every optimal bridge's fixed point converged within :data:`MAX_ITERATIONS`.
    drift_z: the largest |z| over the levels above the base of the change in the mean log ratio between the first and
        second halves of the chains' draws there (``None`` with one draw per chain).
    tail_index: the Pareto k̂ of the chains' annealing weights at β = 1 (``None`` below the fit's minimum of chains, or
        for the equal weights of a direct bridge): above :data:`~pfzoo.logmath.PARETO_K_UNRELIABLE` the chains that
        would carry the weighted means were probably not drawn.
    """

    log_ratio: float
    stderr: float
    pair_log_ratios: tuple[float, ...]
    min_weight_ess: float
    converged: bool
    drift_z: float | None
    tail_index: float | None


def _log_weighted_mean(log_weights: torch.Tensor, log_terms: torch.Tensor) -> torch.Tensor:
    """``log Σ_c W_c mean_t exp(log_terms[c, t])`` with normalised ``log_weights [C]``; float64 scalar."""
    return torch.logsumexp(log_weights + log_mean_exp(log_terms, 1), 0)


def _effective_draws(values: torch.Tensor, ess: float) -> float:
    """``ess · T / τ`` for draws ``values [C, T]`` with τ the integrated autocorrelation time from per-chain means,
    clamped to [1, T] (what the optimal bridge weights a side by; Meng & Wong §3.4)."""
    per_chain = values.shape[1]
    if per_chain == 1:
        return ess
    variance = values.var().item()
    tau = per_chain * values.mean(1).var().item() / variance if variance > 0 else 1.0
    return ess * per_chain / min(max(tau, 1.0), per_chain)


def _rung(lower: torch.Tensor, upper: torch.Tensor, log_w0: torch.Tensor, log_w1: torch.Tensor, bridge: str,
          tolerance: float) -> tuple[float, torch.Tensor, bool]:
    """One rung's ``log r̂ = log Z_{k+1}/Z_k`` from ``ℓ = log f_{k+1} − log f_k`` at level k's draws ``lower [C, T]`` and
    level k+1's ``upper [C, T]``, each chain weighted by normalised log weights ``log_w0``, ``log_w1 [C]`` →
    ``(log r̂, influence [C], converged)``; ``influence_c`` is chain c's first-order effect on ``log r̂`` times C."""
    num_chains = lower.shape[0]
    if bridge == "geometric":
        log_a, log_b, scale, converged = lower / 2, -upper / 2, 1.0, True
        log_ratio = (_log_weighted_mean(log_w0, log_a) - _log_weighted_mean(log_w1, log_b)).item()
    else:
        n0 = _effective_draws(lower, 1.0 / torch.exp(torch.logsumexp(2 * log_w0, 0)).item())
        n1 = _effective_draws(upper, 1.0 / torch.exp(torch.logsumexp(2 * log_w1, 0)).item())
        log_s0, log_s1 = math.log(n0 / (n0 + n1)), math.log(n1 / (n0 + n1))
        s1 = torch.tensor(log_s1, dtype=torch.float64)
        log_ratio = (_log_weighted_mean(log_w0, lower / 2) - _log_weighted_mean(log_w1, -upper / 2)).item()  # geometric start
        for _ in range(MAX_ITERATIONS):
            log_a = -torch.logaddexp(s1, log_s0 + log_ratio - lower)  # 1 / (s_1 + s_0 r e^{−ℓ}): α f_{k+1} / f_k
            log_b = -torch.logaddexp(log_s1 + upper, torch.tensor(log_s0 + log_ratio, dtype=torch.float64))  # α f_k / f_{k+1}
            updated = (_log_weighted_mean(log_w0, log_a) - _log_weighted_mean(log_w1, log_b)).item()
            converged = abs(updated - log_ratio) < tolerance
            log_ratio = updated
            if converged:
                break
        # r̂ solves log r = log m_0(r) − log m_1(r), so a change δ in the two means moves log r̂ by δ / (1 − ∂/∂log r):
        # ∂ log m_0 / ∂ log r = −E_0[a u_0] / m_0 with u_0 = s_0 r e^{−ℓ} a, and likewise with u_1 = s_0 r b
        log_u0 = log_s0 + log_ratio - lower + log_a
        log_u1 = log_s0 + log_ratio + log_b
        scale = 1.0 + torch.exp(_log_weighted_mean(log_w0, log_a + log_u0) - _log_weighted_mean(log_w0, log_a)).item() \
            - torch.exp(_log_weighted_mean(log_w1, log_b + log_u1) - _log_weighted_mean(log_w1, log_b)).item()
    # a weighted mean m = Σ W_c A_c moves by W_c (A_c − m) when chain c does: in relative terms C W_c (A_c / m − 1)
    relative_a = torch.exp(log_mean_exp(log_a, 1) - _log_weighted_mean(log_w0, log_a))
    relative_b = torch.exp(log_mean_exp(log_b, 1) - _log_weighted_mean(log_w1, log_b))
    influence = num_chains * (torch.exp(log_w0) * (relative_a - 1) - torch.exp(log_w1) * (relative_b - 1)) / scale
    return log_ratio, influence, converged


def ladder_log_ratio(lower: list[torch.Tensor], upper: list[torch.Tensor], log_weights: torch.Tensor, *,
                     bridge: str = "optimal", tolerance: float = 1e-12) -> LadderBridge:
    """Bridge-sampling estimate of ``log Z_K / Z_0`` along a ladder of K rungs.

    For rung k (k = 0..K−1), ``ℓ_k = log f_{k+1} − log f_k`` at ``lower[k] [C, T]`` (T draws of each of C chains at
    level k; level 0's are the base's exact draws) and at ``upper[k] [C, T]`` (the chains' draws at level k+1).
    ``log_weights [C, K + 1]``: each chain's log annealing weight on arriving at each level (column 0 zeros): the chains'
    draws at level k are properly weighted for ``p_k`` by them, so rung k's two means are weighted means over chains
    (equal weights for chains that reached their levels). Each rung's ratio is Meng & Wong's (eq. 2.2),
    ``r_k = E_k[f_{k+1} α] / E_{k+1}[f_k α]`` with α the "optimal" bridge (eq. 4.1, iterated to its fixed point, each
    side's size its effective number of draws) or the "geometric" one ``(f_k f_{k+1})^{−1/2}``;
    ``log r̂ = Σ_k log r̂_k``. The standard error treats the C chains as the independent units (a chain's draws at every
    level, and its base draws, are one unit): ``stderr = sd_c(Σ_k ψ_{k,c}) / √C`` with ψ the chains' influences on
    each rung (delta method, the optimal bridge's dependence on r̂ included). All in float64 on the CPU.
    """
    if bridge not in BRIDGES:
        raise ValueError(f"bridge must be one of {', '.join(BRIDGES)}, got {bridge!r}")
    if len(lower) != len(upper) or not lower:
        raise ValueError(f"lower and upper must hold one [chains, draws] tensor per rung each, got {len(lower)} and {len(upper)}")
    weights = log_weights.detach().double().cpu()
    if weights.dim() != 2 or weights.shape[1] != len(lower) + 1 or weights.shape[0] < 2:
        raise ValueError(f"log_weights must be [chains ≥ 2, rungs + 1 = {len(lower) + 1}], got {tuple(weights.shape)}")
    normalised = weights - torch.logsumexp(weights, 0)
    total, influence, ratios, converged = 0.0, torch.zeros(weights.shape[0], dtype=torch.float64), [], True
    drift = None
    for k, (below, above) in enumerate(zip(lower, upper)):
        below, above = below.detach().double().cpu(), above.detach().double().cpu()
        if below.shape != above.shape or below.dim() != 2 or below.shape[0] != weights.shape[0]:
            raise ValueError(f"rung {k}: lower and upper must both be [chains = {weights.shape[0]}, draws], got "
                             f"{tuple(below.shape)} and {tuple(above.shape)}")
        if not (all_finite(below) and all_finite(above)):
            raise ValueError(f"rung {k}: log ratios must be finite at every draw (a draw outside one level's support has no bridge)")
        log_ratio, rung_influence, rung_converged = _rung(below, above, normalised[:, k], normalised[:, k + 1], bridge, tolerance)
        total += log_ratio
        ratios.append(log_ratio)
        influence += rung_influence
        converged &= rung_converged
        if above.shape[1] > 1:
            half = above.shape[1] // 2
            difference = above[:, -half:].mean(1) - above[:, :half].mean(1)
            spread = difference.std().item() / math.sqrt(difference.numel())
            z = abs(difference.mean().item()) / spread if spread > 0 else 0.0
            drift = z if drift is None else max(drift, z)
    min_ess = torch.exp(-torch.logsumexp(2 * normalised, 0)).min().item()
    stderr = influence.std().item() / math.sqrt(weights.shape[0])
    final = weights[:, -1]
    tail = pareto_tail_index(final) if final.numel() >= MIN_TAIL_FIT_CHAINS and bool((final != final[0]).any()) else None
    return LadderBridge(total, stderr, tuple(ratios), min_ess, converged, drift, tail)


def pilot_ladder(path: AnnealingPath, num_chains: int, *, target_overlap: float, steps_per_rung: int,
                 generator: Any) -> list[float]:
    """A ladder ``[0, β_1, …, 1]`` for ``path`` from a pilot run of ``num_chains`` chains of its own: at each level, the
    next β is the largest (up to 1) whose conditional ESS over the chains' states, ``(Σ w̃)² / (C Σ w̃²)`` with
    ``w̃ = f_{β'} / f_β``, stays at least ``target_overlap`` (:func:`~pfzoo.estimators.adaptive_tempering.next_step`'s secant search;
    steps no shorter than ``1 / MAX_RUNGS``); the chains then take ``steps_per_rung`` kernel steps there. One host read
    per CESS evaluation."""
    state = path.sample_base(num_chains, generator=generator)
    beta, betas, step = 0.0, [0.0], None
    while beta < 1.0:
        stats, remaining = path.statistics(state), 1.0 - beta

        def log_cess_at(delta: float) -> float:
            increment = path.log_weight_increment(stats, beta, 1.0 if delta >= remaining else beta + delta)
            return (2 * torch.logsumexp(increment, 0) - torch.logsumexp(2 * increment, 0)).item() - math.log(num_chains)

        step, _ = next_step(log_cess_at, remaining, remaining if step is None else step, target_overlap,
                            min(1.0 / MAX_RUNGS, remaining))
        beta = 1.0 if step >= remaining else beta + step
        betas.append(beta)
        for _ in range(steps_per_rung if beta < 1.0 else 0):
            state, _ = path.transition(state, beta, generator=generator)
    return betas
