"""Reasons not to trust an estimate that every estimator shares: the one place their checks and wording live.

Each function returns warning lines (empty when the check passes); the estimators add them to their estimate's
``warnings``. The checks look at what any estimate has (its value and standard error, per-chain log weights, the
β schedule it annealed along), never at a model family: a value no probability allows, a standard error that measures
nothing, chains whose weights are not numbers, a schedule whose first step the chains cannot follow.
"""

from __future__ import annotations

import math

import torch

SCHEDULE_STEP_NATS = 3.0
"""Largest ``Δβ_1 · σ_0`` (nats) allowed for a schedule's first step, where σ_0 is the spread of ``log f_1 − log f_0``
under the base: the step's divergence is about ``(Δβ_1 σ_0)² / 2`` nats (Grosse, Maddison & Salakhutdinov 2013, §3),
so beyond this one step alone costs several nats and the chains after it describe where they started."""

SCHEDULE_PROBE_SAMPLES = 100
"""Base draws that measure σ_0 for :func:`schedule_warnings` (from a private generator, so the caller's stream and the
estimate do not change)."""

MIN_MOVE_FRACTION = 0.25
"""A chain whose state changed at fewer than this fraction of its draws is stuck (:func:`stuck_chain_warnings`)."""

ZERO_STDERR = 1e-6
"""A stochastic estimate whose standard error is below this fraction of ``max(1, |value|)`` reports no error at all."""


def nonfinite_weight_warnings(log_weights: torch.Tensor | None, num_chains: int, remedy: str) -> tuple[str, ...]:
    """The chains (rows of the last dim of ``log_weights [..., N]``) with a NaN or +∞ log weight: the target's energy
    is NaN or −∞ where they went, so ``log Ẑ`` is not a number (−∞ weights, states the target excludes, are fine)."""
    if log_weights is None:
        return ()
    bad = torch.isnan(log_weights) | (log_weights == math.inf)
    count = int(bad.sum().item())
    if count == 0:
        return ()
    return (f"{count} of {log_weights.numel()} chain log weights ({num_chains} chains) are NaN or +inf: the energy is NaN "
            f"or −inf where those chains went, so the estimate is not a number; make the energy finite everywhere "
            f"(clamp it, or guard the operation that fails) and estimate again",)


def schedule_warnings(path, betas: torch.Tensor, energy_scale: float | None = None, *, steps: str = "num_steps",
                      energy_schedule: bool = True) -> tuple[str, ...]:
    """Whether the first step of ``betas [K + 1]`` along ``path`` moves the chains' distribution further than they
    can follow: ``Δβ_1 · σ_0 >`` :data:`SCHEDULE_STEP_NATS` with σ_0 the standard deviation of ``log f_1 − log f_0``
    at base draws (``energy_scale`` when the estimator measured it already, as the "energy" schedule does; else
    :data:`SCHEDULE_PROBE_SAMPLES` draws from a private generator). On a strongly coupled model a linear schedule
    crosses the whole change from base to target in its first steps and the chains freeze where they started: the
    estimate is then off by far more than its stderr (hundreds of nats on an RBM with weights ×1000). ``steps``: the
    setting that sets the number of steps, named in the remedy with (``energy_schedule``) schedule='energy'."""
    first_step = float(betas[1] - betas[0]) if betas.numel() > 1 else 0.0
    if first_step <= 0.0:
        return ()
    if energy_scale is None:
        with torch.no_grad():
            probe = torch.Generator(device=path.base_log_partition().device).manual_seed(0)
            stats = path.statistics(path.sample_base(SCHEDULE_PROBE_SAMPLES, generator=probe))
            energy_scale = path.log_weight_increment(stats, 0.0, 1.0).double().std().item()
    if not math.isfinite(energy_scale):
        return (f"log f_1 − log f_0 is not finite at the base's draws (spread {energy_scale}): the target's energy is "
                f"NaN or infinite where the base puts mass; make it finite there",)
    nats = first_step * energy_scale
    if nats <= SCHEDULE_STEP_NATS:
        return ()
    needed = math.ceil((betas.numel() - 1) * nats / SCHEDULE_STEP_NATS)
    alternative = "schedule='energy' or " if energy_schedule else ""
    return (f"the schedule's first step (Δβ = {first_step:.3g}) moves log f by {nats:.3g} nats (log f_1 − log f_0 "
            f"varies by σ_0 = {energy_scale:.3g} under the base): the chains cannot follow, so the estimate can be off by "
            f"far more than its stderr; use {alternative}{steps} ≥ {needed}",)


def stuck_chain_warnings(moves: torch.Tensor, num_samples: int, remedy: str) -> tuple[str, ...]:
    """Whether at least half the chains changed state at fewer than :data:`MIN_MOVE_FRACTION` of their ``num_samples``
    kept draws (``moves [C]``, the draws at which each chain's state differed from its previous one): their draws are
    nearly copies of their starting states (a kernel frozen by strong coupling), and the spread between chains
    measures only where they started (CSL on an RBM with weights ×100: 150 nats above the exact log-likelihood, the
    chains moving at 3 of 20 draws)."""
    transitions = num_samples - 1
    stuck = int((moves < MIN_MOVE_FRACTION * transitions).sum().item())
    if transitions < 1 or 2 * stuck < moves.numel():
        return ()
    return (f"{stuck} of {moves.numel()} chains changed state at fewer than {MIN_MOVE_FRACTION:.0%} of their "
            f"{num_samples} draws: they are frozen near where they started, so the estimate and its stderr describe the "
            f"starting states, not the model; {remedy}",)


def value_warnings(value: float, stderr: float, *, stochastic: bool, frozen_chains: bool = False) -> tuple[str, ...]:
    """A value or standard error that is not a number, and (``frozen_chains``: an estimator whose chains start at the
    data, RAISE, CSL) a stochastic estimate whose standard error is zero: its chains gave identical values, i.e.
    never left where they started, so nothing measured its error."""
    warnings = []
    if not (math.isfinite(value) and math.isfinite(stderr)):
        warnings.append(f"the estimate {value} ± {stderr} is not a finite number: see the other warnings, or check the "
                        f"model's energy for NaN and overflow")
    elif stochastic and frozen_chains and stderr <= ZERO_STDERR * max(1.0, abs(value)):
        warnings.append(f"standard error {stderr:.3g} of a Monte Carlo estimate: every chain gave the same value because "
                        f"the chains never left their starting states (a kernel frozen by strong coupling), so the "
                        f"error is unmeasured and can be hundreds of nats; anneal with schedule='energy' and more steps")
    return tuple(warnings)


def log_likelihood_warnings(per_example: torch.Tensor, mean: float, stderr: float, *, discrete: bool) -> tuple[str, ...]:
    """For discrete visible units, log-likelihoods above 0 (no probability exceeds 1) beyond ``3 · stderr`` of the
    mean: the estimate is wrong (for log f − log Ẑ, ``log Ẑ`` is far too low; for RAISE, the annealing model is far
    from the model)."""
    if not discrete:
        return ()
    slack = (3.0 * stderr if math.isfinite(stderr) else 0.0) + 1e-9
    above = int((per_example > slack).sum().item())
    if mean <= slack and above == 0:
        return ()
    return (f"log-likelihood {mean:.4g} nats on average ({above} of {per_example.numel()} examples above 0) for "
            f"discrete data, where every probability is at most 1 (log p ≤ 0): the estimate is wrong; anneal longer "
            f"(num_steps, schedule='energy') with more chains",)
