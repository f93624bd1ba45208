"""log Z from a parallel-tempering run over the levels of the model's annealing path: the stepping-stone estimate
(Xie, Lewis, Fan, Kuo & Chen 2011; the ratio identity of Neal 1993, §6.2), with round-trip and exchange diagnostics.

Levels ``0 = β_0 < β_1 < … < β_R = 1`` of the path ``f_β`` (AIS's paths, bases and kernels). Level 0 is the base, drawn
exactly at every step; levels 1..R run :class:`~pfzoo.kernels.ParallelTempering` around the path's kernel
(:class:`~pfzoo.paths.tempered.TemperedPathTarget`), and level 1 exchanges with the fresh base draw every step, so new
states enter the ladder from below whatever the kernel does near β = 0 (Syed et al.'s reference level, sampled exactly).
Measured on a complete 3-d ICA (seeds 0–11, 50 chains × 400 steps, 10 batches): mean z² of the error against its
stderr 2.85 without that exchange and 0.74 with it from the fitted Gaussian base; 4.65 and 2.06 from the Student-t. Each neighbouring ratio is a mean over level k's states,

    Z_{k+1} / Z_k = E_{p_k}[f_{k+1}(x) / f_k(x)],     log Ẑ = log Z_0 + Σ_k log mean_{t,c} f_{k+1}(x_{k,t,c}) / f_k(x_{k,t,c}),

over the T kept steps and the C chains of each level. The steps of a run are correlated, so the standard error is from
batch means: the kept steps are cut into B consecutive batches, each batch gives its own stepping-stone estimate
``L_b``, and ``stderr = sd(L_b) / √B`` (valid once a batch is much longer than the chains' autocorrelation time; a
ladder that does not mix makes the batches disagree, or fail to, and the diagnostics say so).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from pfzoo.estimators.base import BoundKind, MIN_ACCEPTANCE, PartitionEstimate, ProgressCallback, reliability_warnings
from pfzoo.estimators.on_path import PathPartitionEstimator
from pfzoo.kernels import SWAP_SCHEMES, Kernel, ParallelTempering, adapt_ladder, take_chains
from pfzoo.models.base import EnergyModel
from pfzoo.paths.schedules import ScheduleSpec, betas_for_path, make_betas, path_fitted_schedule
from pfzoo.paths.tempered import TemperedPathTarget
from pfzoo.sampling import uniform
from pfzoo.validation import allocating, check_bool, check_choice, check_positive_int, check_sample_count

MIN_SWAP_ACCEPTANCE = 0.05
"""A neighbouring pair whose mean exchange acceptance is below this barely overlaps: its ratio's estimate is dominated
by rare states, biased beyond its stderr, and states cannot cross it."""

MIN_ROUND_TRIP_FRACTION = 0.3
"""With alternating (non-reversible) exchanges, a ladder whose states move freely between levels makes
``1 / (2 + 2Λ)`` round trips per chain per step, ``Λ = Σ_k (1 − a_k)`` over the PT pairs' exchange acceptances a_k
(Syed, Bouchard-Côté, Deligiannidis & Doucet 2022, Theorem 3). Below this fraction of it, states stay in modes of the top
levels that the ladder does not refresh from the base, and the run misses mass there. Measured (seeds 0-1): the
enumerable RBMs, DBM, DBN, Ising, Hopfield, Gaussian, ICA and POEs of the estimator tests 0.77-0.98 at 50 chains × 400
steps, 0.49-0.89 at 50 × 200 (a 12×8 RBM with strong base rates the lowest), 0.69-0.98 with the defaults; the zoo's
784×20 MNIST RBMs with the defaults: CD-1(20) 0.04 (0.73 nats low), PCD(20) 0.18-0.19 on seeds 0-4 (−0.10, −0.05, −0.06, −0.05, −0.09 nats, 2-5 stderr), whose
level at β = 1 holds too little of a mode, not an estimator's or stderr's failure: against the enumerated log Z of each
level (seed 0), the last pair (β 0.90 → 1) is 0.067 low and the three below 0.015 each; its forward, reverse
(harmonic) and bridge ratios agree within 0.006, the batch-means stderr within 0.01 of one from 10-20 groups of the
independent columns and of 5-40 batches, and a 10× longer burn-in or chains started from the data leave it 0.06 low
(2.4, 2.2 stderr)."""

MIN_ROUND_TRIP_BOUND = 20.0
"""The round-trip fraction is judged only when the bound promises at least this many round trips (fewer make it noise)."""

DRIFT_Z = 4.0
"""A run whose second half's stepping-stone estimate differs from its first half's by more than this many standard
errors is still moving (Welch's t over the batches of each half: 18 degrees of freedom at 20 batches, so a false alarm
has probability about 1e-3). The zoo's CD-1(20) MNIST RBM measures +5.9 and +4.1 at 500 steps on seeds 0 and 1 (its chains at β = 1 are
still finding the configuration that holds 40 % of the mass); well-mixing ladders on enumerable models within ±2.8."""

ADAPTATION_ROUNDS = 4
"""With ``adapt_ladder``, the burn-in is cut into this many rounds, each ending with a move of the ladder towards equal
exchange acceptance (:func:`~pfzoo.kernels.adapt_ladder`)."""


class LadderRun:
    """What one PT run keeps: per kept step and level the log-sum over chains of the level's ratio ``f_{k+1}/f_k`` (on the
    device, stacked at the end), the exchange acceptance per pair, the inner kernel's acceptance per level, and the
    walkers' round trips between the hottest PT level and β = 1."""

    def __init__(self, num_levels: int, num_chains: int, device: torch.device) -> None:
        """``num_levels`` R: the PT levels β_1..β_R, so R pairs with the base's (base–β_1 first)."""
        self.log_sums: list[torch.Tensor] = []
        self.swap_sum = torch.zeros(num_levels, dtype=torch.float64, device=device)
        self.swap_count = torch.zeros(num_levels, dtype=torch.float64, device=device)
        self.inner_sum = torch.zeros(num_levels, dtype=torch.float64, device=device)
        self.inner_count = 0
        # walker w of column c sits at labels[r, c]; last_end[w, c]: −1 not yet at an end, 0 last at the bottom, 1 at the top
        self.labels = torch.arange(num_levels, device=device)[:, None].expand(num_levels, num_chains).clone()
        self.last_end = torch.full((num_levels, num_chains), -1, dtype=torch.long, device=device)
        self.round_trips = torch.zeros((), dtype=torch.long, device=device)

    def follow(self, swapped: torch.Tensor) -> None:
        """Move the walkers by this step's accepted exchanges ``swapped [R − 1, C]`` (pairs of one parity, disjoint) and
        count a round trip for each walker that reaches the bottom having been at the top since it was last there."""
        labels = self.labels.clone()
        labels[:-1] = torch.where(swapped, self.labels[1:], labels[:-1])
        labels[1:] = torch.where(swapped, self.labels[:-1], labels[1:])
        self.labels = labels
        bottom, top = labels[0], labels[-1]
        at_bottom = self.last_end.gather(0, bottom[None])[0]
        self.round_trips = self.round_trips + (at_bottom == 1).sum()
        self.last_end.scatter_(0, bottom[None], torch.zeros_like(bottom)[None])
        at_top = self.last_end.gather(0, top[None])[0]
        self.last_end.scatter_(0, top[None], torch.where(at_top == 0, 1, at_top)[None])


class SteppingStone(PathPartitionEstimator):
    """log Z from parallel tempering over the model's path (module docstring): ``estimator=pt``.

    The ladder starts from ``schedule`` with ``num_levels`` steps (by default AIS's "energy" schedule fitted to the path:
    linear for weakly coupled models, log-spaced from β ≈ 1/σ_0 for strongly coupled ones) and, with ``adapt_ladder``,
    moves during the burn-in towards equal exchange acceptance between neighbours (Syed et al. 2022, §5.2; β_1 and 1
    stay). The estimate is consistent, not unbiased: log of means of correlated draws.

    The result's info holds the ladder, the exchange acceptance of each neighbouring pair (the first, base–β_1, that of
    the exchange of each level-1 state with a fresh base draw, made at every step), the round trips of states
    from the hottest PT level to β = 1 and back (total and per chain per step) and the inner kernel's acceptance per
    level. Warnings: a pair whose acceptance is below :data:`MIN_SWAP_ACCEPTANCE`, no round trip at all, a collapsed
    inner kernel.

    Measured with the defaults (seed 0, one CPU thread) on the zoo's 784×20 binarized-MNIST RBMs against the log Z that
    enumerates 2^20 hidden states: PCD(20), seeds 0-4, −0.097 ± 0.024, −0.051 ± 0.017, −0.062 ± 0.027, −0.054 ± 0.028,
    −0.086 ± 0.017, each warned by its round trips (0.18-0.19 of the bound, :data:`MIN_ROUND_TRIP_FRACTION`: its top level
    holds too little of a mode; 500 steps: −0.09 ± 0.03); CD-1(20) −0.73 ± 0.06, warned (round trips 0.04 of the bound):
    40 % of its mass sits on a hidden configuration that only β ≈ 1 holds (3.5 % at β = 0.92), which the chains there
    find too slowly and the ladder cannot bring up (20 levels, 2000 steps: −0.78 ± 0.05).

    Args:
        num_chains: C, chains per level.
        num_levels: R, levels above the base (≥ 2).
        num_steps: T, kept PT steps (each: one kernel step at every level, one round of exchanges).
        burn_in: PT steps run before keeping any.
        schedule: the starting ladder as an AIS schedule ("energy", "linear", "sigmoid", a Schedule or an explicit β
            sequence from 0 to 1 of ``num_levels`` steps); it must increase strictly.
        num_batches: B, batches of kept steps for the standard error (≥ 2, at most T).
        adapt_ladder: adapt the ladder during the burn-in.
        swaps: which pairs a step proposes, "alternate" (non-reversible even/odd) or "random".
        base, base_smoothing, kernel, posterior_samples, path: as :class:`~pfzoo.estimators.AIS`.
    """

    config_name = "pt"

    def __init__(
        self,
        num_chains: int = 100,
        num_levels: int = 10,
        num_steps: int = 2000,
        burn_in: int = 400,
        schedule: ScheduleSpec = "energy",
        num_batches: int = 20,
        adapt_ladder: bool = True,
        swaps: str = "alternate",
        base: str = "auto",
        base_smoothing: float = 1.0,
        kernel: Kernel | None = None,
        posterior_samples: int = 100,
        path: str = "geometric",
    ) -> None:
        super().__init__(base=base, base_smoothing=base_smoothing, kernel=kernel, path=path, posterior_samples=posterior_samples)
        self.num_chains = check_sample_count(num_chains, "num_chains")
        if check_positive_int(num_levels, "num_levels") < 2:
            raise ValueError(f"num_levels must be at least 2 (a ladder to exchange along), got {num_levels}")
        self.num_steps = check_positive_int(num_steps, "num_steps")
        self.burn_in = check_positive_int(burn_in, "burn_in") if burn_in else 0
        self.num_batches = check_positive_int(num_batches, "num_batches")
        if not 2 <= self.num_batches <= self.num_steps:
            raise ValueError(f"num_batches must lie between 2 and num_steps={num_steps}, got {num_batches}")
        self.adapt_ladder = check_bool(adapt_ladder, "adapt_ladder")
        self.swaps = check_choice(swaps, "swaps", SWAP_SCHEMES)
        self.schedule = schedule
        self.fitted_schedule = path_fitted_schedule(schedule)
        self.register_buffer("betas", make_betas(schedule, num_levels, steps_name="num_levels"), persistent=False)

    @property
    def num_levels(self) -> int:
        return self.betas.numel() - 1

    @torch.no_grad()
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
        betas, _ = betas_for_path(self.fitted_schedule, self.betas, path, generator=generator)
        ladder = [float(beta) for beta in betas[1:].tolist()]
        if any(high <= low for low, high in zip([0.0, *ladder], ladder)):
            raise ValueError(f"schedule must give a strictly increasing ladder of {self.num_levels} levels, got {[0.0, *ladder]}")
        with allocating("num_chains", self.num_chains * self.num_levels):
            ladder, run = self.run_ladder(path, ladder, generator, progress)
        levels = torch.stack(run.log_sums)  # [T, R]: per kept step and level, log Σ_c of the level's ratio
        total = torch.logsumexp(levels, 0) - math.log(levels.shape[0] * self.num_chains)
        batches = torch.stack([torch.logsumexp(part, 0) - math.log(part.shape[0] * self.num_chains)
                               for part in levels.tensor_split(self.num_batches)]).sum(1)  # [B]
        log_z = (path.base_log_partition() + total.sum()).item()
        stderr = (batches.std() / math.sqrt(self.num_batches)).item()
        drift_z = half_drift(batches)
        pair_acceptance = (run.swap_sum / run.swap_count.clamp(min=1)).cpu()
        inner = (run.inner_sum / max(run.inner_count, 1)).cpu() if run.inner_count else None
        trips = int(run.round_trips.item())
        info: dict[str, Any] = {
            "estimator": type(self).__name__, "num_chains": self.num_chains, "num_levels": self.num_levels, "num_steps": self.num_steps,
            "burn_in": self.burn_in, "base": base, "path": self.path, "betas": [0.0, *ladder],
            "exchange_acceptance": pair_acceptance.tolist(), "round_trips": trips,
            "round_trip_rate": trips / (self.num_chains * self.num_steps), "log_ratios": total.cpu().tolist(),
            "round_trip_bound": round_trip_bound(pair_acceptance[1:]), "drift_z": drift_z,
        }
        if inner is not None:
            info["acceptance"] = inner.tolist()
        return PartitionEstimate(log_z=log_z, stderr=stderr, log_weights=None, ess=None, kind=BoundKind.CONSISTENT, info=info,
                                 warnings=self.warnings([0.0, *ladder], pair_acceptance, trips, inner, drift_z) + path.warnings)

    def run_ladder(self, path, ladder: list[float], generator, progress: ProgressCallback | None) -> tuple[list[float], LadderRun]:
        """Burn in (adapting the ladder in :data:`ADAPTATION_ROUNDS` rounds when asked), then keep ``num_steps`` PT steps
        → ``(the final ladder, what the kept steps recorded)``. Every level starts from exact base draws."""
        levels, chains = len(ladder), self.num_chains
        positions = path.draw_base(levels * chains, generator=generator)
        tempering = ParallelTempering(path.kernel, ladder, swaps=self.swaps)
        target = TemperedPathTarget(path, ladder)
        state = tempering.init_replicas(positions.unflatten(0, (levels, chains)), target, generator=generator)
        total = self.burn_in + self.num_steps
        rounds = ADAPTATION_ROUNDS if self.adapt_ladder and self.burn_in >= ADAPTATION_ROUNDS else 1
        ends = [round(self.burn_in * (r + 1) / rounds) for r in range(rounds)]
        done = 0
        for end in ends:
            record = LadderRun(levels, chains, positions.device)
            for _ in range(end - done):
                state, info = tempering.step(state, target, generator=generator)
                state = self._observe(path, tempering, target, ladder, state, info, record, generator)
            done = end
            if self.adapt_ladder and self.burn_in:
                acceptance = record.swap_sum[1:] / record.swap_count[1:].clamp(min=1)
                ladder = [float(beta) for beta in adapt_ladder(ladder, acceptance.cpu()).tolist()]
                tempering = ParallelTempering(path.kernel, ladder, swaps=self.swaps)
                target = TemperedPathTarget(path, ladder)
            if progress is not None:
                progress(done, total)
        record = LadderRun(levels, chains, positions.device)
        every = max(1, self.num_steps // 100)
        pair_betas = _neighbour_betas(ladder, chains, positions.device)
        for step in range(self.num_steps):
            state, info = tempering.step(state, target, generator=generator)
            state = self._observe(path, tempering, target, ladder, state, info, record, generator, pair_betas=pair_betas)
            if progress is not None and (step + 1) % every == 0:
                progress(self.burn_in + step + 1, total)
        return ladder, record

    def _observe(self, path, tempering: ParallelTempering, target, ladder: list[float], state, info, record: LadderRun, generator,
                 *, pair_betas: torch.Tensor | None = None):
        """Exchange level 1 with a fresh base draw and record the PT step: the exchanges (and, for a kept step, given
        ``pair_betas`` of :func:`_neighbour_betas`, the walkers' moves, the inner kernel's acceptance and every level's
        log Σ_c of its ratio ``f_{k+1}/f_k``, with the fresh base draw for level 0) → the state after the exchange.

        The base level is drawn exactly at every step, so an exchange with it is an independence Metropolis move at β_1
        with the base as its proposal: accepted with ``min(1, f_1(x_0) f_0(x_1) / (f_0(x_0) f_1(x_1)))``, it leaves
        ``p_1`` invariant and brings fresh states into the ladder from below, which the inner kernel alone may not
        (HMC near a heavy-tailed base's β = 0 moves slowly in its tails)."""
        fresh = tempering.kernel.init(path.draw_base(self.num_chains, generator=generator), target, generator=generator)
        base = path.statistics(fresh)
        first = path.statistics(state.replica(0))
        to_first = path.log_weight_increment(base, 0.0, ladder[0])
        log_exchange = to_first - path.log_weight_increment(first, 0.0, ladder[0])
        exchange_prob = torch.exp(log_exchange.clamp(max=0.0))
        record.swap_sum[0] += exchange_prob.mean()
        record.swap_count[0] += 1
        accepted = uniform(exchange_prob.shape, generator=generator, device=exchange_prob.device, dtype=torch.float64) < exchange_prob
        exchanged = state.with_replica(0, fresh, accepted)
        record.swap_sum[1:] += torch.where(info.attempted, info.swap_accept_prob.mean(-1), 0.0)
        record.swap_count[1:] += info.attempted
        if pair_betas is None:
            return exchanged
        record.follow(info.swapped)
        inner = [level.accept_prob for level in info.inner]
        if all(prob is not None for prob in inner):
            record.inner_sum += torch.stack([prob.double().mean() for prob in inner])
            record.inner_count += 1
        record.log_sums.append(torch.cat([torch.logsumexp(to_first, 0)[None], _level_log_sums(path, state, ladder, pair_betas)]))
        return exchanged

    def warnings(self, betas: list[float], pair_acceptance: torch.Tensor, round_trips: int, inner: torch.Tensor | None,
                 drift_z: float | None = None) -> tuple[str, ...]:
        """A pair that barely exchanges (its ratio biased beyond the stderr), no round trip or far fewer than the exchange
        acceptances allow (the ladder does not mix), an estimate still moving between the run's halves, a collapsed inner
        kernel."""
        lines = []
        worst = int(pair_acceptance.argmin())
        if pair_acceptance[worst] < MIN_SWAP_ACCEPTANCE:
            low = sum(1 for rate in pair_acceptance.tolist() if rate < MIN_SWAP_ACCEPTANCE)
            lines.append(
                f"exchange acceptance {pair_acceptance[worst].item():.3f} between β = {betas[worst]:.4g} and {betas[worst + 1]:.4g} "
                f"({low} of {len(betas) - 1} pairs below {MIN_SWAP_ACCEPTANCE}): neighbouring levels barely overlap, so their "
                f"ratio is biased beyond the stderr; use more levels (num_levels) or a longer burn-in to adapt the ladder"
            )
        if round_trips == 0:
            lines.append(
                f"no state went from β = {betas[1]:.4g} to β = 1 and back in {self.num_steps} steps: the ladder does not mix, so "
                f"the batches are not independent and the stderr understates the error; use more levels or more steps"
            )
        bound = round_trip_bound(pair_acceptance[1:])
        expected = bound * self.num_chains * self.num_steps
        if self.swaps == "alternate" and round_trips and expected >= MIN_ROUND_TRIP_BOUND \
                and round_trips < MIN_ROUND_TRIP_FRACTION * expected:
            lines.append(
                f"{round_trips} round trips between β = {betas[1]:.4g} and 1, {round_trips / expected:.3f} of the {expected:.0f} "
                f"the exchange acceptances allow (below {MIN_ROUND_TRIP_FRACTION}): states stay stuck in modes of the top levels, "
                f"so a mode the ladder does not carry is missed and the estimate is likely low by more than its stderr; use "
                f"more steps (num_steps, burn_in) and levels, and compare with estimator=raise or exact on a smaller model"
            )
        if drift_z is not None and abs(drift_z) > DRIFT_Z:
            lines.append(
                f"the estimate moved by {drift_z:+.1f} standard errors from the first to the second half of the kept steps "
                f"(beyond {DRIFT_Z}): the chains are still finding mass at the top levels, so the estimate is likely low by more "
                f"than its stderr; raise num_steps and burn_in until the halves agree"
            )
        if inner is not None and inner.min().item() < MIN_ACCEPTANCE:
            lines.extend(reliability_warnings(None, self.num_chains, inner, torch.tensor(betas[1:], dtype=torch.float64)))
        return tuple(lines)

    def extra_repr(self) -> str:
        return (f"num_chains={self.num_chains}, num_levels={self.num_levels}, num_steps={self.num_steps}, burn_in={self.burn_in}, "
                f"num_batches={self.num_batches}, adapt_ladder={self.adapt_ladder}, swaps={self.swaps!r}")


def _neighbour_betas(ladder: list[float], num_chains: int, device: torch.device) -> torch.Tensor:
    """``[(R − 1)·C, 2]`` float64: for the chains of each PT level but the last, replica-major, that level's β and the next
    one's (the pairs whose ratio :func:`_level_log_sums` reads)."""
    pairs = torch.tensor(list(zip(ladder[:-1], ladder[1:])), dtype=torch.float64).repeat_interleave(num_chains, 0)
    return pairs.to(device)


def _level_log_sums(path, state, ladder: list[float], pair_betas: torch.Tensor) -> torch.Tensor:
    """``log Σ_c f_{k+1}(x_{k,c}) / f_k(x_{k,c})`` for each PT level k but the last, float64 ``[R − 1]``: one pass over all
    their chains where the path evaluates a β per row (:meth:`~pfzoo.paths.base.AnnealingPath.tempered_log_density`),
    else level by level."""
    rows, total = pair_betas.shape[0], state.replicas.position.shape[0]
    density = path.tempered_log_density(take_chains(path.statistics(state.replicas), slice(0, rows), total), pair_betas)
    if density is not None:
        return torch.logsumexp((density[:, 1] - density[:, 0]).view(len(ladder) - 1, -1), 1)
    return torch.stack([torch.logsumexp(path.log_weight_increment(path.statistics(state.replica(index)), ladder[index], ladder[index + 1]), 0)
                        for index in range(len(ladder) - 1)])


def round_trip_bound(acceptance: torch.Tensor) -> float:
    """Round trips per chain per step of non-reversible PT whose states move freely between levels, ``1 / (2 + 2Λ)``
    with ``Λ = Σ_k (1 − a_k)`` over the exchange acceptances ``acceptance [R − 1]`` (Syed et al. 2022, Theorem 3)."""
    return 1.0 / (2.0 + 2.0 * (1.0 - acceptance).sum().item())


def half_drift(batches: torch.Tensor) -> float | None:
    """Welch's t of the change in mean from the first to the second half of the batch estimates ``batches [B]`` (``None``
    with fewer than two batches in a half; 0 when neither half varies)."""
    half = batches.numel() // 2
    first, second = batches[:half], batches[half:]
    if half < 2:
        return None
    spread = math.sqrt(first.var().item() / first.numel() + second.var().item() / second.numel())
    return (second.mean() - first.mean()).item() / spread if spread > 0 else 0.0
