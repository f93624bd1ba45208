"""Sequential Monte Carlo with adaptive tempering (Del Moral, Doucet & Jasra 2006; Zhou, Johansen & Aston 2016).

The annealed particles of AIS along the model's path, with two additions: the particles are resampled when their
weights degenerate, and each next inverse temperature is chosen from the particles themselves, so that no schedule has
to be set or piloted. With normalised weights ``W_i`` at ``β`` and incremental weights ``w̃_i(β') = f_{β'}(x_i) /
f_β(x_i)``, the conditional effective sample size of the move to ``β'`` (ZJA eq. 3.16) is

    CESS(β') = N (Σ_i W_i w̃_i)² / Σ_i W_i w̃_i²,

the ESS the weights would have if the particles had just been resampled; ``β'`` is the largest β' ≤ 1 with
``CESS(β') ≥ τ N``, found by bisection (ZJA §3.4). Each step: reweight, ``log Ẑ += log Σ_i W_i w̃_i`` (the incoming
weights need not be uniform: ZJA eq. 2.7), resample systematically when the ESS ``1 / Σ W_i²`` falls below
``threshold · N``, then move every particle by the path's kernel at ``β'``.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch

from pfzoo.estimators import trust
from pfzoo.estimators.base import (
    BoundKind, LikelihoodEstimate, PartitionEstimate, ProgressCallback, independent_examples_stderr, likelihood_estimate,
    reliability_warnings,
)
from pfzoo.estimators.on_path import PathPartitionEstimator
from pfzoo.estimators.posterior_annealing import check_kernel_bounds, posterior_kernel
from pfzoo.kernels import Kernel, take_chains
from pfzoo.logmath import summarize_log_weights
from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability
from pfzoo.paths.base import AnnealingPath
from pfzoo.paths.posterior import PosteriorPath
from pfzoo.sampling import uniform
from pfzoo.validation import allocating, check_finite_number, check_generator, check_positive_int, check_sample_count

STEP_TOLERANCE = 0.25
"""A step is taken once ``−log CESS`` is within 25 % of ``−log τ`` (about 12 % in Δβ, since ``−log CESS ≈ Δβ² Var``): the
CESS target is a rule of thumb, and the estimate's unbiasedness does not depend on the step, so more precision would
buy nothing but evaluations."""

MAX_SEARCH = 12
"""Most CESS evaluations one step's search makes (it takes one or two on a smooth path)."""

ACCEPTANCE_SEGMENTS = 10
"""Stretches of the steps over which the kernel's acceptance is averaged for the estimate's info and warnings."""

MIN_GROUP_ESS_FRACTION = 0.5
"""Below this fraction of the groups, the ESS of the groups' estimates says that a few groups carry Ẑ."""


class SMCRun(NamedTuple):
    """One run of :func:`adaptive_smc`.

    log_z_groups: float64 ``[G]``, each group's ``log Ẑ_g − log Z_0`` (``E[Ẑ_g] = Z / Z_0`` for a fixed schedule).
    betas: the schedule taken, ``[0, β_1, …, 1]`` (floats). resampled: resampling events, summed over the groups.
    final_ess: the particles' ESS at β = 1 summed over the groups (before any last resampling: there is none).
    min_cess: the least CESS fraction of a step (averaged over the groups). floored: the steps whose CESS fell short of
    ``target_cess`` because the floor ``1 / max_steps`` forced them longer. acceptance ``[S]`` / segment_betas ``[S]``: the kernel's mean acceptance per
    stretch of steps and the β ending each stretch, ``None`` for kernels that always accept.
    """

    log_z_groups: torch.Tensor
    betas: list[float]
    resampled: int
    final_ess: float
    min_cess: float
    floored: int
    acceptance: torch.Tensor | None
    segment_betas: torch.Tensor | None


def systematic_resample(log_weights: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Systematic resampling (Kitagawa 1996; Douc, Cappé & Moulines 2005) within each row of ``log_weights [G, n]``:
    one uniform ``u_g`` per row, and particle i is copied once for every ``(u_g + j) / n``, j = 0..n−1, that falls in its
    cumulative-weight interval. Returns the ancestors' indices within each row, int64 ``[G, n]``. Unbiased: each
    particle is copied ``n W_i`` times in expectation, with at most one copy more or less."""
    rows, count = log_weights.shape
    cumulative = torch.softmax(log_weights.double(), -1).cumsum(-1)
    offsets = uniform((rows, 1), generator=generator, device=log_weights.device, dtype=torch.float64)
    points = (offsets + torch.arange(count, device=log_weights.device, dtype=torch.float64)) / count
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


@torch.no_grad()
def adaptive_smc(
    path: AnnealingPath,
    num_chains: int,
    num_groups: int,
    *,
    target_cess: float,
    resample_threshold: float,
    num_mcmc_steps: int = 1,
    max_steps: int = 10_000,
    generator: torch.Generator | None = None,
    progress: ProgressCallback | None = None,
) -> SMCRun:
    """Adaptive-tempering SMC of ``num_groups`` independent groups of ``num_chains // num_groups`` particles along ``path``.

    The groups are resampled apart and each accumulates its own ``log Ẑ_g``; they share the schedule, chosen where the
    CESS averaged over the groups meets ``target_cess`` (a fraction of a group's particles; :func:`next_step`), with
    steps no shorter than ``1 / max_steps``. After a step's reweighting, a group whose ESS is below
    ``resample_threshold`` of its particles is resampled (:func:`systematic_resample`); then every particle takes
    ``num_mcmc_steps`` steps of the path's kernel at the new β (none after β = 1). One host read per CESS evaluation
    (about eight per step) and one for the resampling decision.
    """
    size = num_chains // num_groups
    rows = size * num_groups
    state = path.sample_base(rows, generator=generator)
    log_weights = torch.full((num_groups, size), -math.log(size), dtype=torch.float64)
    log_weights = log_weights.to(path.base_log_partition().device)
    log_z = torch.zeros(num_groups, dtype=torch.float64, device=log_weights.device)
    offsets = (torch.arange(num_groups, device=log_weights.device) * size)[:, None]
    resampled = torch.zeros((), dtype=torch.long, device=log_weights.device)
    betas, acceptance = [0.0], []
    beta, step, min_cess, floor, floored = 0.0, None, 1.0, 1.0 / max_steps, 0
    while beta < 1.0:
        stats, remaining, evaluated = path.statistics(state), 1.0 - beta, {}

        def log_cess_at(delta: float) -> float:
            # the search's increments are kept: the step taken reuses its own
            evaluated[delta] = path.log_weight_increment(stats, beta, 1.0 if delta >= remaining else beta + delta).view(num_groups, size)
            return torch.logsumexp(log_conditional_ess(log_weights, evaluated[delta]), 0).item() - math.log(num_groups)

        step, cess = next_step(log_cess_at, remaining, remaining if step is None else step, target_cess, min(floor, remaining))
        min_cess = min(min_cess, cess)
        floored += step <= floor < remaining and cess < target_cess
        beta_next = 1.0 if step >= remaining else beta + step
        increment = evaluated[step]
        weighted = log_weights + increment
        group_log_sum = torch.logsumexp(weighted, -1)
        log_z = log_z + group_log_sum
        log_weights = weighted - group_log_sum[:, None]
        beta = beta_next
        betas.append(beta)
        if progress is not None:
            progress(round(beta * 1000), 1000)
        if beta >= 1.0:
            break
        degenerate = torch.exp(-torch.logsumexp(2 * log_weights, -1)) < resample_threshold * size  # ESS = 1 / Σ W²
        if degenerate.any().item():
            ancestors = torch.where(degenerate[:, None], systematic_resample(log_weights, generator=generator),
                                    torch.arange(size, device=log_weights.device))
            state = take_chains(state, (ancestors + offsets).reshape(-1), rows)
            log_weights = torch.where(degenerate[:, None], torch.full_like(log_weights, -math.log(size)), log_weights)
            resampled = resampled + degenerate.sum()
        for _ in range(num_mcmc_steps):
            state, info = path.transition(state, beta, generator=generator)
            if info.accept_prob is not None:
                acceptance.append(info.accept_prob.double().mean())
    final_ess = torch.exp(-torch.logsumexp(2 * log_weights, -1)).sum().item()
    segments, segment_betas = _acceptance_by_segment(acceptance, betas, num_mcmc_steps)
    return SMCRun(log_z, betas, int(resampled.item()), final_ess, min_cess, floored, segments, segment_betas)


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


class SMC(PathPartitionEstimator):
    """SMC estimate of ``log Z`` with adaptive tempering and resampling (module docstring): no schedule to choose.

    The ``num_chains`` particles are split into ``num_groups`` groups of equal size that are resampled apart and give
    independent unbiased estimates ``Ẑ_g`` of Z (for a given schedule); ``Ẑ = mean_g Ẑ_g``, and the standard error is
    the delta-method one of the groups' estimates (:func:`~pfzoo.logmath.summarize_log_weights` over the G values,
    which the estimate's ``log_weights [G]`` hold). The groups share the schedule, chosen from all particles, so they are
    independent given it; the schedule's own dependence on the particles makes Ẑ unbiased only up to a bias that
    vanishes as the particles grow (ZJA §3.4: "adaptive schemes ... negligible in practice"), so ``log Ẑ`` is a
    stochastic lower bound on log Z as AIS's is. Paths, bases and kernels are AIS's (:mod:`pfzoo.paths.registry`):
    block Gibbs for RBMs, DBMs, DBNs and Ising models, HMC for energies over real vectors, exact draws for Gaussians,
    or any kernel the path accepts.

    Why τ = 0.995 by default: with one kernel step per temperature, as AIS, the number of steps is what lets the
    particles mix, and the steps number about ``L / √(−log τ)`` for a path of thermodynamic length L (CESS ≈
    τ N when ``Δβ² Var[log w̃] ≈ −log τ``), so τ = 0.995 takes 14 L steps. Lower targets (0.5–0.9, BlackJAX's and
    PyMC's) assume several MCMC moves per temperature (``num_mcmc_steps``). Measured with 1,000 particles (one CPU
    thread): 15–100 steps and 0.02–0.4 s on enumerable RBMs (to 25 × 12 with weights N(0, 2²)), 12-unit Ising models
    with couplings N(0, 2²), a 10-d Gaussian and a 10-d Laplace product of experts, each within max(3 stderr, 0.05) of
    the exact log Z with stderr 0.02–0.04; τ ∈ {0.99, 0.998, 0.999} or 500–2000 particles gave the same error for the
    time to within the noise of 8 repeats.

    Args:
        num_chains: particles N over all groups (≥ 4; rounded down to a multiple of the groups).
        target_cess: τ ∈ (0, 1), the CESS each step keeps, as a fraction of the particles.
        resample_threshold: resample a group when its ESS falls below this fraction of its particles (0.5: the usual
            rule; 0 never resamples, which with a fixed schedule is AIS).
        num_groups: G independent groups for the standard error; at most ``num_chains // 2`` are made.
        num_mcmc_steps: kernel steps per temperature.
        max_steps: the schedule's steps are at least ``1 / max_steps`` long; where that floor overrides the CESS
            target the estimate warns.
        base, base_smoothing, kernel, posterior_samples, path: as :class:`~pfzoo.estimators.AIS`.
    """

    config_name = "smc"
    remedy = "use more particles (num_chains), a higher target_cess or more num_mcmc_steps"

    def __init__(
        self,
        num_chains: int = 1000,
        target_cess: float = 0.995,
        resample_threshold: float = 0.5,
        num_groups: int = 20,
        num_mcmc_steps: int = 1,
        max_steps: int = 10_000,
        base: str = "auto",
        base_smoothing: float = 1.0,
        kernel: Kernel | None = None,
        posterior_samples: int = 100,
        path: str = "geometric",
    ) -> None:
        super().__init__(base=base, base_smoothing=base_smoothing, kernel=kernel, path=path, posterior_samples=posterior_samples)
        self.num_chains = check_sample_count(num_chains, "num_chains")
        if self.num_chains < 4:
            raise ValueError(f"num_chains must be at least 4 (two groups of two particles), got {num_chains}")
        self.target_cess = check_finite_number(target_cess, "target_cess", minimum=0.0, exclusive=True)
        if self.target_cess >= 1.0:  # a CESS of 1 allows no step at all
            raise ValueError(f"target_cess must lie strictly between 0 and 1, got {target_cess}")
        self.resample_threshold = check_finite_number(resample_threshold, "resample_threshold", minimum=0.0, maximum=1.0)
        self.num_groups = min(check_positive_int(num_groups, "num_groups"), self.num_chains // 2)
        if self.num_groups < 2:
            raise ValueError(f"num_groups must be at least 2 (the standard error compares groups), got {num_groups}")
        self.num_mcmc_steps = check_positive_int(num_mcmc_steps, "num_mcmc_steps")
        self.max_steps = check_positive_int(max_steps, "max_steps")

    def forward(
        self,
        model: EnergyModel,
        *,
        data: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> PartitionEstimate:
        """Estimate ``log Z`` of ``model``; ``data [N, V]`` feeds data-fitted bases."""
        path, base = self.build_path(model, data, generator)
        with allocating("num_chains", self.num_chains):
            run = adaptive_smc(path, self.num_chains, self.num_groups, target_cess=self.target_cess,
                               resample_threshold=self.resample_threshold, num_mcmc_steps=self.num_mcmc_steps,
                               max_steps=self.max_steps, generator=generator, progress=progress)
        log_weights = run.log_z_groups + path.base_log_partition()
        summary = summarize_log_weights(log_weights)
        info = {"estimator": type(self).__name__, "num_chains": self.num_chains, "num_groups": self.num_groups,
                "target_cess": self.target_cess, "base": base, "path": self.path, "betas": run.betas,
                "num_steps": len(run.betas) - 1, "resampling_events": run.resampled, "final_ess": run.final_ess,
                "min_cess": run.min_cess, "group_ess": summary.ess.item()}
        if run.acceptance is not None:
            info.update(acceptance=run.acceptance.tolist(), acceptance_betas=run.segment_betas.tolist())
        return PartitionEstimate(
            log_z=summary.log_mean.item(), stderr=summary.stderr.item(), log_weights=log_weights, ess=run.final_ess,
            kind=BoundKind.UNBIASED_Z, info=info, warnings=self.warnings(run, log_weights, summary.ess.item()) + path.warnings,
        )

    def missing(self, model: EnergyModel) -> str | None:
        if Capability.LATENT_GENERATIVE in model.capabilities:
            return None  # per-example SMC over the latents
        return super().missing(model)

    def log_likelihood(
        self,
        model: EnergyModel,
        data: torch.Tensor,
        *,
        base_data: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> LikelihoodEstimate:
        """As :meth:`PartitionEstimator.log_likelihood`; for a latent-variable generative model, SMC over each example's
        latents from the prior (β = 0) to its posterior (β = 1) along :class:`~pfzoo.paths.posterior.PosteriorPath`, as HAIS
        anneals them (eqs. 27–29): every example gets ``num_chains`` particles in ``num_groups`` groups (resampled apart),
        all examples as one batch sharing the schedule (the CESS averaged over every group of every example). An example's
        ``log p̂(x)`` is the log mean of its groups' estimates, unbiased for p(x) given the schedule, so a stochastic lower
        bound on log p(x); its stderr is the delta method over its groups. The examples are independent given the schedule.
        """
        self.check(model)
        if Capability.LATENT_GENERATIVE not in model.capabilities:
            return super().log_likelihood(model, data, base_data=base_data, generator=generator, progress=progress)
        model.check_visible(data, "data")
        check_generator(generator, model.device)
        kernel = posterior_kernel(model, self.kernel)
        check_kernel_bounds(model, kernel)
        num_examples, size = data.shape[0], self.num_chains // self.num_groups
        path = PosteriorPath(model, data.repeat_interleave(size * self.num_groups, dim=0), kernel)
        with allocating("num_chains", self.num_chains * num_examples):
            run = adaptive_smc(path, size * self.num_groups * num_examples, self.num_groups * num_examples,
                               target_cess=self.target_cess, resample_threshold=self.resample_threshold,
                               num_mcmc_steps=self.num_mcmc_steps, max_steps=self.max_steps, generator=generator, progress=progress)
        summary = summarize_log_weights(run.log_z_groups.view(num_examples, self.num_groups), dim=1)
        info = {"estimator": type(self).__name__, "mode": "per-example SMC from the prior to the posterior", "betas": run.betas,
                "num_steps": len(run.betas) - 1, "resampling_events": run.resampled, "per_example_stderr": summary.stderr}
        if run.acceptance is not None:
            info.update(acceptance=run.acceptance.tolist(), acceptance_betas=run.segment_betas.tolist())
        group_ess = summary.ess.min().item()
        return likelihood_estimate(
            summary.log_mean, stderr=independent_examples_stderr(summary.stderr), kind=BoundKind.LIKELIHOOD_LOWER_BOUND, info=info,
            warnings=self.warnings(run, run.log_z_groups, group_ess), independent_examples=True,
        )

    def warnings(self, run: SMCRun, log_weights: torch.Tensor, group_ess: float) -> tuple[str, ...]:
        """One line per reason not to trust the estimate: NaN or +∞ group estimates, the step floor overriding the CESS
        target, groups whose estimates disagree (a few carry Ẑ, so the stderr understates the error), a collapsed
        kernel acceptance."""
        lines = list(trust.nonfinite_weight_warnings(log_weights, self.num_groups, self.remedy))
        if lines:
            return tuple(lines)
        if run.floored:
            lines.append(
                f"{run.floored} steps reached the floor of 1/max_steps = {1 / self.max_steps:.3g} and the CESS fell to "
                f"{run.min_cess:.3f} of the particles (target {self.target_cess}): the path moves faster than max_steps "
                f"allows, so the weights may have degenerated; raise max_steps={self.max_steps} or {self.remedy}"
            )
        if group_ess < MIN_GROUP_ESS_FRACTION * self.num_groups:
            lines.append(
                f"the {self.num_groups} groups' estimates disagree (their ESS is {group_ess:.1f}): a few groups carry Ẑ, so "
                f"the stderr understates the error; {self.remedy}"
            )
        lines.extend(reliability_warnings(None, self.num_chains, run.acceptance, run.segment_betas, remedy=self.remedy))
        return tuple(lines)

    def extra_repr(self) -> str:
        return (f"num_chains={self.num_chains}, target_cess={self.target_cess}, resample_threshold={self.resample_threshold}, "
                f"num_groups={self.num_groups}, num_mcmc_steps={self.num_mcmc_steps}, max_steps={self.max_steps}")
