"""One run of sequential Monte Carlo with adaptive tempering (Del Moral, Doucet & Jasra 2006; Zhou, Johansen & Aston
2016), standard or waste-free (Dau & Chopin 2022): the loop :class:`~pfzoo.estimators.SMC` runs once per block.

With normalised weights ``W_i`` at ``β`` and incremental weights ``w̃_i(β') = f_{β'}(x_i) / f_β(x_i)``, the conditional
effective sample size of the move to ``β'`` (ZJA eq. 3.16) is

    CESS(β') = N (Σ_i W_i w̃_i)² / Σ_i W_i w̃_i²,

the ESS the weights would have if the particles had just been resampled; ``β'`` is the largest β' ≤ 1 with
``CESS(β') ≥ τ N``, found by a secant search (ZJA §3.4). Each step: reweight, ``log Ẑ += log Σ_i W_i w̃_i`` (the incoming
weights need not be uniform: ZJA eq. 2.7), then

- standard SMC: resample systematically when the ESS ``1 / Σ W_i²`` falls below ``threshold · N``, then move every
  particle by the path's kernel at ``β'``;
- waste-free SMC (Dau & Chopin 2022, Algorithm 2): resample ``M = N / P`` ancestors at every step and run a chain of
  ``P − 1`` kernel moves at ``β'`` from each, keeping all ``P`` states of every chain (the ancestor included) as the N
  equally weighted particles of the next step. It is a standard SMC sampler whose M particles are the chains (D&C:
  the chain's potential is the mean of its states' ``w̃``), so ``Ẑ = Π_t (1/N) Σ_n w̃_t(x_n)`` stays unbiased for a
  given schedule.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Sequence

import torch

from pfzoo.estimators.base import ProgressCallback
from pfzoo.kernels import take_chains
from pfzoo.paths.base import AnnealingPath
from pfzoo.sampling import uniform

STEP_TOLERANCE = 0.25
"""A step is taken once ``−log CESS`` is within 25 % of ``−log τ`` (about 12 % in Δβ, since ``−log CESS ≈ Δβ² Var``): the
CESS target is a rule of thumb, and the estimate's unbiasedness does not depend on the step, so more precision would
buy nothing but evaluations."""

MAX_SEARCH = 12
"""Most CESS evaluations one step's search makes (it takes one or two on a smooth path)."""

ACCEPTANCE_SEGMENTS = 10
"""Stretches of the steps over which the kernel's acceptance is averaged for the estimate's info and warnings."""


class SMCRun(NamedTuple):
    """One run of :func:`adaptive_smc`.

    log_z_groups: float64 ``[G]``, each group's ``log Ẑ_g − log Z_0`` (``E[Ẑ_g] = Z / Z_0`` for a fixed schedule; from a
    later start β_s, ``Z / Z_{β_s}``). betas: the schedule taken, ``[β_s = 0, β_1, …, 1]`` (floats). resampled: resampling events, summed over the groups.
    final_ess: the particles' ESS at β = 1 summed over the groups (before any last resampling: there is none).
    min_cess: the least CESS fraction of a step (averaged over the groups). floored: the steps whose CESS fell short of
    ``target_cess`` because the floor ``1 / max_steps`` forced them longer. acceptance ``[S]`` / segment_betas ``[S]``: the
    kernel's mean acceptance per stretch of steps and the β ending each stretch (CPU), ``None`` for kernels that always
    accept.
    """

    log_z_groups: torch.Tensor
    betas: list[float]
    resampled: int
    final_ess: float
    min_cess: float
    floored: int
    acceptance: torch.Tensor | None
    segment_betas: torch.Tensor | None
    log_z_marks: torch.Tensor | None = None
    """float64 ``[M, G]``: each group's ``log Ẑ_g`` up to each of the run's ``marks`` (``None`` without marks)."""


def systematic_resample(log_weights: torch.Tensor, draws: int | None = None, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Systematic resampling (Kitagawa 1996; Douc, Cappé & Moulines 2005) within each row of ``log_weights [G, n]``:
    one uniform ``u_g`` per row, and particle i is copied once for every ``(u_g + j) / m``, j = 0..m−1, that falls in its
    cumulative-weight interval, ``m = draws`` (n when ``None``). Returns the ancestors' indices within each row, int64
    ``[G, m]``. Unbiased: each particle is copied ``m W_i`` times in expectation, with at most one copy more or less."""
    rows, count = log_weights.shape
    draws = count if draws is None else draws
    cumulative = torch.softmax(log_weights.double(), -1).cumsum(-1)
    offsets = uniform((rows, 1), generator=generator, device=log_weights.device, dtype=torch.float64)
    points = (offsets + torch.arange(draws, device=log_weights.device, dtype=torch.float64)) / draws
    return torch.searchsorted(cumulative, points, right=True).clamp(max=count - 1)


def log_conditional_ess(log_weights: torch.Tensor, increment: torch.Tensor) -> torch.Tensor:
    """``log[(Σ_i W_i w̃_i)² / Σ_i W_i w̃_i²]`` per row of normalised log weights ``log_weights [G, n]`` and log incremental
    weights ``increment [G, n]``: the log of ZJA eq. 3.16's CESS divided by n, ≤ 0, float64 ``[G]`` (in logs, so that a CESS
    near 1 keeps its digits)."""
    weighted = log_weights + increment
    return 2 * torch.logsumexp(weighted, -1) - torch.logsumexp(weighted + increment, -1)


def next_step(log_cess_at: Callable[[float], float], remaining: float, previous: float, target: float, floor: float) -> tuple[float, float]:
    """A step ``Δ ∈ [floor, remaining]`` whose CESS fraction ``exp(log_cess_at(Δ))`` meets ``target`` → ``(Δ, CESS)``.

    ``−log CESS(Δ)`` grows as ``Δ² Var_W[log w̃]`` for small steps (and more slowly once the weights degenerate), so the
    search is a secant method on ``log(−log CESS)`` against ``log Δ``, starting from the last step with slope 2. It stops
    within :data:`STEP_TOLERANCE` of the target, at ``remaining`` when even that falls short of it, at ``floor`` when even
    that overshoots (the caller warns), or after :data:`MAX_SEARCH` evaluations at the closest step seen."""
    goal = math.log(-math.log(target))

    def error(delta: float) -> tuple[float, float]:
        log_cess = log_cess_at(delta)
        return log_cess, (math.log(-log_cess) if log_cess < 0 else -math.inf) - goal

    delta = min(max(previous, floor), remaining)
    log_cess, miss = error(delta)
    best = (abs(miss), delta, log_cess)
    slope, last = 2.0, None
    for _ in range(MAX_SEARCH - 1):
        if abs(miss) <= math.log1p(STEP_TOLERANCE) or (miss < 0 and delta >= remaining) or (miss > 0 and delta <= floor):
            return delta, math.exp(log_cess)
        if last is not None and math.isfinite(miss) and math.isfinite(last[1]) and delta != last[0]:
            slope = min(max((miss - last[1]) / math.log(delta / last[0]), 0.5), 4.0)
        last = (delta, miss)
        delta = remaining if miss == -math.inf else min(max(delta * math.exp(-miss / slope), floor), remaining)
        log_cess, miss = error(delta)
        best = min(best, (abs(miss), delta, log_cess))
    return best[1], math.exp(best[2])


def join_chains(trees: list[Any], rows: int) -> Any:
    """The chains of several kernel states (or infos) of ``rows`` chains each, one after another: every tensor whose
    first dimension is ``rows`` concatenated along it; other leaves (a step size) taken from the first tree. The
    counterpart of :func:`~pfzoo.kernels.take_chains`, for waste-free SMC's states kept along its chains."""
    first = trees[0]
    if torch.is_tensor(first):
        return torch.cat(trees) if first.dim() > 0 and first.shape[0] == rows else first
    if isinstance(first, tuple):
        items = [join_chains([tree[index] for tree in trees], rows) for index in range(len(first))]
        return type(first)(*items) if hasattr(first, "_fields") else tuple(items)
    return first


def waste_free_order(num_groups: int, draws: int, chain_length: int, device: torch.device) -> torch.Tensor:
    """The rows, int64 ``[G·M·P]``, that put the states :func:`waste_free_move` visits, stacked (step, group, chain)-major,
    in group-major order (a group's ``M·P`` states contiguous, so that a group keeps its rows, e.g. its data row on a
    :class:`~pfzoo.paths.posterior.PosteriorPath`)."""
    rows = num_groups * draws * chain_length
    return torch.arange(rows, device=device).view(chain_length, num_groups, draws).transpose(0, 1).reshape(-1)


def waste_free_move(path: AnnealingPath, start: Any, beta: float, order: torch.Tensor, *, chain_length: int, num_mcmc_steps: int,
                    generator: torch.Generator | None, acceptance: list[torch.Tensor]) -> Any:
    """Dau & Chopin's (2022) Algorithm 2 move: from ``start``, the resampled particles, a chain of ``chain_length − 1``
    moves of ``num_mcmc_steps`` kernel steps each at ``beta``; returns the state of every visited state (the starts
    included) in the rows ``order`` (:func:`waste_free_order`) picks. Each kernel step's mean acceptance is appended to
    ``acceptance``."""
    states, state = [start], start
    for _ in range(chain_length - 1):
        for _ in range(num_mcmc_steps):
            state, info = path.transition(state, beta, generator=generator)
            if info.accept_prob is not None:
                acceptance.append(info.accept_prob.double().mean())
        states.append(state)
    return take_chains(join_chains(states, order.numel() // chain_length), order, order.numel())


@torch.no_grad()
def adaptive_smc(
    path: AnnealingPath,
    num_groups: int,
    group_size: int,
    *,
    target_cess: float,
    resample_threshold: float,
    num_mcmc_steps: int = 1,
    chain_length: int | None = None,
    max_steps: int = 10_000,
    move_path: AnnealingPath | None = None,
    state: Any = None,
    start_beta: float = 0.0,
    marks: Sequence[float] = (),
    generator: torch.Generator | None = None,
    progress: ProgressCallback | None = None,
) -> SMCRun:
    """Adaptive-tempering SMC of ``num_groups`` independent groups of ``group_size`` particles along ``path``.

    The groups are resampled apart and each accumulates its own ``log Ẑ_g``; they share the schedule, chosen where the
    CESS averaged over the groups meets ``target_cess`` (a fraction of a group's particles; :func:`next_step`), with
    steps no shorter than ``1 / max_steps``. After a step's reweighting (none after β = 1):

    - ``chain_length`` ``None`` (standard SMC): a group whose ESS is below ``resample_threshold`` of its particles is
      resampled (:func:`systematic_resample`); then every particle takes ``num_mcmc_steps`` kernel steps at the new β;
    - ``chain_length`` P (waste-free SMC; ``group_size`` a multiple of P): every group draws ``group_size / P`` ancestors
      and :func:`waste_free_move` runs ``P − 1`` moves of ``num_mcmc_steps`` kernel steps from each, through
      ``move_path``'s kernel (a path over the ancestors' rows where the path's target holds per-row data; ``path``
      when ``None``).

    ``state`` (kernel states of the ``num_groups · group_size`` particles, group-major) starts the run at ``start_beta``
    instead of at base draws at 0: the particles must then be draws of ``f_{start_beta}``, and every ``log Ẑ_g``
    estimates ``log Z − log Z_{start_beta}``. No step crosses a β of ``marks`` (increasing, inside (start_beta, 1)): it
    ends there, and each group's ``log Ẑ_g`` so far is kept (``log_z_marks``), so one run also estimates every marked
    level's ``log Z_β``.

    One host read per CESS evaluation (about eight per step) and, for standard SMC, one for the resampling decision.
    """
    rows = group_size * num_groups
    marks = [float(mark) for mark in marks]
    if not 0.0 <= start_beta < 1.0:
        raise ValueError(f"start_beta must be in [0, 1), got {start_beta!r}")
    if any(not start_beta < mark < 1.0 for mark in marks) or marks != sorted(set(marks)):
        raise ValueError(f"marks must increase strictly inside (start_beta, 1) = ({start_beta}, 1), got {marks}")
    if state is None:
        if start_beta:
            raise ValueError("a run from start_beta > 0 needs the particles' state there (draws of f_{start_beta})")
        state = path.sample_base(rows, generator=generator)
    elif state.position.shape[0] != rows:
        raise ValueError(f"state must hold num_groups · group_size = {rows} particles, got {state.position.shape[0]}")
    device = path.base_log_partition().device
    uniform_weights = torch.full((num_groups, group_size), -math.log(group_size), dtype=torch.float64, device=device)
    log_weights = uniform_weights
    log_z = torch.zeros(num_groups, dtype=torch.float64, device=device)
    resampled = torch.zeros((), dtype=torch.long, device=device)
    offsets = (torch.arange(num_groups, device=device) * group_size)[:, None]  # each group's first row
    if chain_length is not None:
        draws = group_size // chain_length
        order = waste_free_order(num_groups, draws, chain_length, device)
    betas, acceptance, at_marks, pending = [float(start_beta)], [], [], [*marks, 1.0]
    beta, step, min_cess, floor, floored = float(start_beta), None, 1.0, 1.0 / max_steps, 0
    while beta < 1.0:
        goal = pending[0]  # the next mark, or 1
        stats, remaining, evaluated = path.statistics(state), goal - beta, {}

        def log_cess_at(delta: float) -> float:
            # the search's increments are kept: the step taken reuses its own
            evaluated[delta] = path.log_weight_increment(stats, beta, goal if delta >= remaining else beta + delta).view(num_groups, group_size)
            return torch.logsumexp(log_conditional_ess(log_weights, evaluated[delta]), 0).item() - math.log(num_groups)

        step, cess = next_step(log_cess_at, remaining, remaining if step is None else step, target_cess, min(floor, remaining))
        min_cess = min(min_cess, cess)
        floored += step <= floor < remaining and cess < target_cess
        weighted = log_weights + evaluated[step]
        group_log_sum = torch.logsumexp(weighted, -1)
        log_z = log_z + group_log_sum
        log_weights = weighted - group_log_sum[:, None]
        beta = goal if step >= remaining else beta + step
        betas.append(beta)
        if beta == goal and pending.pop(0) < 1.0:
            at_marks.append(log_z)
        if progress is not None:
            progress(round(beta * 1000), 1000)
        if beta >= 1.0:
            break
        if chain_length is not None:
            ancestors = systematic_resample(log_weights, draws, generator=generator)
            start = take_chains(state, (ancestors + offsets).reshape(-1), rows)
            state = waste_free_move(path if move_path is None else move_path, start, beta, order, chain_length=chain_length,
                                    num_mcmc_steps=num_mcmc_steps, generator=generator, acceptance=acceptance)
            log_weights = uniform_weights
            resampled = resampled + num_groups
            continue
        degenerate = torch.exp(-torch.logsumexp(2 * log_weights, -1)) < resample_threshold * group_size  # ESS = 1 / Σ W²
        if degenerate.any().item():
            ancestors = torch.where(degenerate[:, None], systematic_resample(log_weights, generator=generator),
                                    torch.arange(group_size, device=device))
            state = take_chains(state, (ancestors + offsets).reshape(-1), rows)
            log_weights = torch.where(degenerate[:, None], uniform_weights, log_weights)
            resampled = resampled + degenerate.sum()
        for _ in range(num_mcmc_steps):
            state, info = path.transition(state, beta, generator=generator)
            if info.accept_prob is not None:
                acceptance.append(info.accept_prob.double().mean())
    final_ess = torch.exp(-torch.logsumexp(2 * log_weights, -1)).sum().item()
    per_temperature = num_mcmc_steps * (1 if chain_length is None else chain_length - 1)
    segments, segment_betas = _acceptance_by_segment(acceptance, betas, per_temperature)
    return SMCRun(log_z.cpu(), betas, int(resampled.item()), final_ess, min_cess, floored, segments, segment_betas,
                  torch.stack(at_marks).cpu() if marks else None)


def _acceptance_by_segment(acceptance: list[torch.Tensor], betas: list[float], per_step: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The per-transition mean acceptances averaged over up to :data:`ACCEPTANCE_SEGMENTS` equal stretches, float64 CPU
    ``[S]``, and the β at the end of each stretch ``[S]``; ``(None, None)`` when the kernel always accepts."""
    if not acceptance:
        return None, None
    values = torch.stack(acceptance).cpu()
    parts = torch.tensor_split(torch.arange(values.numel()), min(ACCEPTANCE_SEGMENTS, values.numel()))
    means = torch.stack([values[part].mean() for part in parts])
    # transition t runs at β_{t // per_step + 1}
    ends = torch.tensor([betas[int(part[-1]) // per_step + 1] for part in parts], dtype=torch.float64)
    return means, ends
