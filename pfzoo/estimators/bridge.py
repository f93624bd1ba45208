"""Bridge sampling (Bennett 1976; Meng & Wong 1996; *Deep Learning* §18.7, eq. 18.62): ``log Z_1 − log Z_0`` from
draws of both ends, and the estimator of ``log Z`` that bridges a model with its tractable base."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pfzoo.estimators.annealing import anneal
from pfzoo.estimators.base import MIN_ACCEPTANCE, MIN_TAIL_FIT_CHAINS, BoundKind, PartitionEstimate, ProgressCallback
from pfzoo.estimators.bridge_ladder import BRIDGES, MAX_ITERATIONS, LadderBridge, ladder_log_ratio, pilot_ladder
from pfzoo.estimators.on_path import PathPartitionEstimator
from pfzoo.estimators.sharding import sharded_chains
from pfzoo.kernels import Kernel
from pfzoo.logmath import PARETO_K_UNRELIABLE, log_mean_exp, pareto_tail_index
from pfzoo.models.base import EnergyModel
from pfzoo.paths.schedules import make_betas
from pfzoo.validation import all_finite, allocating, check_finite_number, check_positive_int, check_sample_count

MIN_WEIGHT_ESS_FRACTION = 0.25
"""Below this fraction of the chains as the annealing weights' ESS at some level, the chains are far from that level's
distribution: the weights correct for mass the chains reach too rarely, not for mass none reaches. Measured with the
defaults: enumerable RBMs 0.87-0.98, the zoo's PCD(20) MNIST RBM 0.49 (0.06 nats from exact), its CD-1(20) 0.17 (0.77
nats low, stderr 0.13: 40 % of its mass sits on a hidden configuration the chains never reach); 48-64 × 4-6 RBMs whose
all-on hidden state holds 90 % of the mass at β = 1 0.01-0.14."""

DRIFT_Z = 4.0
"""A target chain whose first- and second-half means of the log ratio differ by more than this many standard errors
is still drifting (burn-in too short)."""


@dataclass(frozen=True)
class BridgeRatio:
    """``log r̂ = log Z_1 − log Z_0`` by bridge sampling.

    log_ratio, stderr: the estimate and its delta-method standard error, from the spread of the base side's draws and
    of the target side's per-chain means (which carries the chains' autocorrelation).
    effective_target_draws: ``n_1 / τ`` with τ the target chains' integrated autocorrelation time of the log ratio
        (from per-chain means; ``n_1`` for independent draws); what the optimal bridge weights the target side by.
    iterations: fixed-point iterations of the optimal bridge (0 for the geometric one).
    drift_z: |z| of the change in the target side's mean log ratio between the first and second halves of the chains'
        draws (``None`` with one draw per chain): a large value says the chains had not reached the target.
    tail_index: the larger Pareto k̂ of the two sides' terms (``None`` below the fit's minimum of draws): above
        :data:`~pfzoo.logmath.PARETO_K_UNRELIABLE` a few draws carry a side's mean and the stderr understates the
        error (the geometric bridge's terms are unbounded; the optimal bridge's are bounded).
    converged: whether the optimal bridge's fixed point converged within :data:`MAX_ITERATIONS` (always for the
        geometric one); when it did not, the ends overlap too little for the estimate to mean anything.
    """

    log_ratio: float
    stderr: float
    effective_target_draws: float
    iterations: int
    drift_z: float | None
    tail_index: float | None
    converged: bool = True


def bridge_log_ratio(log_ratio_base: torch.Tensor, log_ratio_target: torch.Tensor, *, bridge: str = "optimal",
                     tolerance: float = 1e-12) -> BridgeRatio:
    """Bridge-sampling estimate of ``log Z_1/Z_0`` from ``ℓ(x) = log f_1(x) − log f_0(x)`` at draws of both ends.

    ``log_ratio_base [n_0]``: ℓ at independent draws of ``p_0``; ``log_ratio_target [C, T]``: ℓ at T successive draws
    of each of C independent chains on ``p_1`` (T = 1 for independent draws). With a bridge α,
    ``r = E_0[f_1 α] / E_1[f_0 α]`` (Meng & Wong 1996, eq. 2.2):

    - "geometric": ``α = (f_0 f_1)^{-1/2}``, so ``r̂ = mean_0 e^{ℓ/2} / mean_1 e^{−ℓ/2}``;
    - "optimal": ``α ∝ 1 / (s_1 f_1 + s_0 r f_0)`` with ``s_i = n_i / (n_0 + n_1)`` (eq. 4.1; *Deep Learning* eq. 18.62),
      which depends on r, so r̂ is iterated to its fixed point
      ``r ← mean_0[1 / (s_1 + s_0 r e^{−ℓ})] / mean_1[1 / (s_1 e^{ℓ} + s_0 r)]``, with n_1 the target side's effective
      number of draws (Meng & Wong §3.4).

    All in log space, float64 on the CPU. The stderr treats r̂ as a ratio of two independent means: the base side's
    from the draws' variance, the target side's from the variance of per-chain means (so it counts the chains'
    autocorrelation; C ≥ 2).
    """
    if bridge not in BRIDGES:
        raise ValueError(f"bridge must be one of {', '.join(BRIDGES)}, got {bridge!r}")
    base = log_ratio_base.detach().double().cpu().reshape(-1)
    target = log_ratio_target.detach().double().cpu()
    if target.dim() != 2 or target.shape[0] < 2:
        raise ValueError(f"log_ratio_target must be [chains ≥ 2, draws per chain], got {tuple(target.shape)}")
    if base.numel() < 2:
        raise ValueError(f"log_ratio_base needs at least 2 draws, got {base.numel()}")
    if not (all_finite(base) and all_finite(target)):
        raise ValueError("log ratios must be finite at every draw (a draw outside one end's support has no bridge)")
    num_chains, per_chain = target.shape
    effective = float(target.numel())
    if per_chain > 1:
        chain_means = target.mean(1)
        variance = target.var().item()
        # τ ≈ T · Var(chain mean) / Var(draw): 1 for independent draws, T for chains that do not move
        tau = per_chain * chain_means.var().item() / variance if variance > 0 else 1.0
        effective = target.numel() / min(max(tau, 1.0), per_chain)
    if bridge == "geometric":
        log_base_terms, log_target_terms, iterations = base / 2, -target / 2, 0
        converged = True
        log_ratio = (log_mean_exp(log_base_terms, 0) - log_mean_exp(log_target_terms.reshape(-1), 0)).item()
    else:
        log_s0 = math.log(base.numel() / (base.numel() + effective))
        log_s1 = math.log(effective / (base.numel() + effective))
        log_ratio = (log_mean_exp(base / 2, 0) - log_mean_exp(-target.reshape(-1) / 2, 0)).item()  # the geometric start
        for iterations in range(1, MAX_ITERATIONS + 1):
            log_base_terms = -torch.logaddexp(torch.tensor(log_s1, dtype=torch.float64), log_s0 + log_ratio - base)
            log_target_terms = -torch.logaddexp(log_s1 + target, torch.tensor(log_s0 + log_ratio, dtype=torch.float64))
            updated = (log_mean_exp(log_base_terms, 0) - log_mean_exp(log_target_terms.reshape(-1), 0)).item()
            converged = abs(updated - log_ratio) < tolerance
            log_ratio = updated
            if converged:
                break
    base_terms = torch.exp(log_base_terms - log_base_terms.max())
    target_terms = torch.exp(log_target_terms - log_target_terms.max()).mean(1)  # per chain [C]
    relative_variance = (base_terms.var() / (base_terms.numel() * base_terms.mean() ** 2)
                         + target_terms.var() / (num_chains * target_terms.mean() ** 2)).item()
    drift = None
    if per_chain > 1:
        half = per_chain // 2
        difference = target[:, per_chain - half:].mean(1) - target[:, :half].mean(1)  # [C]
        spread = difference.std().item() / math.sqrt(num_chains)
        drift = abs(difference.mean().item()) / spread if spread > 0 else 0.0
    tail_index = None
    if min(base.numel(), target.numel()) >= MIN_TAIL_FIT_CHAINS:
        tail_index = max(pareto_tail_index(log_base_terms), pareto_tail_index(log_target_terms.reshape(-1)))
    return BridgeRatio(log_ratio, math.sqrt(relative_variance), effective, iterations, drift, tail_index, converged)


class BridgeSampling(PathPartitionEstimator):
    """Bridge-sampling estimate of ``log Z`` from the family's tractable base (exact draws, exact ``log Z_0``) to the
    model, along a ladder of the model's path when the base is far from the model (:mod:`~pfzoo.estimators.bridge_ladder`).

    The ladder ``0 = β_0 < … < β_K = 1`` comes from a pilot run (``ladder="auto"``: each rung as long as keeps a
    conditional ESS of ``target_overlap`` between neighbours; ``[0, 1]``, the direct bridge, where the base overlaps
    the model) or is given. ``num_chains`` chains start at base draws and anneal up the ladder, ``burn_in`` steps in all
    (an equal share, linear in β, between each pair of levels), carrying their annealing weights; at each level they
    give ``samples_per_chain`` draws, ``thin`` kernel steps apart. Each rung's ratio bridges its two levels' draws,
    weighted by the chains' annealing weights (properly weighted draws: consistent where the chains have not reached a
    level's distribution, as on trained MNIST RBMs whose modes a chain at β = 1 cannot cross), and ``log Ẑ = log Z_0 +
    Σ_k log r̂_k`` (:func:`~pfzoo.estimators.bridge_ladder.ladder_log_ratio`). Consistent, neither a bound: a ratio of means.
    The base side of the first rung draws as many independent samples as a level. Warnings: an optimal bridge that did
    not converge, chains still drifting at a level, annealing weights carried by a few chains, a kernel that barely moves.

    Measured with the defaults (one CPU thread, seeds 0-1) on the zoo's 784×20 binarized-MNIST RBMs, whose exact log Z
    enumerates 2^20 hidden states: PCD(20) within 0.1 nats (stderr 0.07, 15 s); CD-1(20), whose modes the Gibbs chains
    cannot cross, 0.6-0.8 nats low (stderr 0.13-0.17; AIS and SMC with their defaults are 0.7-1.7 low there), warned by
    its weights' ESS (:data:`MIN_WEIGHT_ESS_FRACTION`).

    Args:
        num_chains: C ≥ 2 independent chains (the stderr's units; also the pilot's chains).
        samples_per_chain: draws per chain at each level (T).
        burn_in: annealing steps from the base to the model over the whole ladder (≥ 1).
        thin: kernel steps between a chain's draws.
        bridge: "optimal" (iterated, Meng & Wong eq. 4.1) or "geometric".
        ladder: "auto" (pilot) or an explicit β sequence from 0 to 1 (``[0, 1]``: the direct bridge).
        target_overlap: the pilot's conditional ESS fraction per rung, in (0, 1).
        base, base_smoothing, kernel, path, posterior_samples: as :class:`~pfzoo.estimators.AIS`.
    """

    config_name = "bridge"

    def __init__(
        self,
        num_chains: int = 300,
        samples_per_chain: int = 10,
        burn_in: int = 3000,
        thin: int = 3,
        bridge: str = "optimal",
        ladder: str | Sequence[float] | torch.Tensor = "auto",
        target_overlap: float = 0.8,
        base: str = "auto",
        base_smoothing: float = 1.0,
        kernel: Kernel | None = None,
        path: str = "geometric",
        posterior_samples: int = 100,
    ) -> None:
        super().__init__(base=base, base_smoothing=base_smoothing, kernel=kernel, path=path, posterior_samples=posterior_samples)
        self.num_chains = check_sample_count(num_chains, "num_chains")
        self.samples_per_chain = check_positive_int(samples_per_chain, "samples_per_chain")
        self.burn_in = check_positive_int(burn_in, "burn_in")
        self.thin = check_positive_int(thin, "thin")
        if bridge not in BRIDGES:
            raise ValueError(f"bridge must be one of {', '.join(BRIDGES)}, got {bridge!r}")
        self.bridge = bridge
        self.target_overlap = check_finite_number(target_overlap, "target_overlap", minimum=0.0, exclusive=True)
        if self.target_overlap >= 1.0:
            raise ValueError(f"target_overlap must lie strictly between 0 and 1, got {target_overlap}")
        if isinstance(ladder, str):
            if ladder != "auto":
                raise ValueError(f"ladder must be 'auto' or a sequence of β's from 0 to 1, got {ladder!r}")
            self.ladder = None
        else:
            betas = make_betas(ladder, None, steps_name="ladder")
            if (betas.diff() <= 0).any():
                raise ValueError(f"ladder must increase strictly from 0 to 1, got {betas.tolist()}")
            self.ladder = betas.tolist()

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
        with torch.no_grad(), allocating("num_chains", self.num_chains):
            betas = self.ladder or pilot_ladder(path, self.num_chains, target_overlap=self.target_overlap, steps_per_rung=self.thin,
                                                generator=generator)
            per_rung = max(1, round(self.burn_in / (len(betas) - 1)))

            def run(num_rows: int, chain_generator, chain_progress: ProgressCallback | None) -> tuple[torch.Tensor, ...]:
                return ladder_draws(path, betas, num_rows, self.samples_per_chain, self.thin, per_rung,
                                    generator=chain_generator, progress=chain_progress)

            blocks = sharded_chains(path, self.num_chains, run, generator=generator, device=model.device, progress=progress)
        lower, upper, log_weights, acceptance = (torch.cat([block[i] for block in blocks]) for i in range(4))
        ladder = ladder_log_ratio(list(lower.unbind(1)), list(upper.unbind(1)), log_weights, bridge=self.bridge)
        log_z0 = path.base_log_partition().item()
        info = {"estimator": type(self).__name__, "num_chains": self.num_chains, "samples_per_chain": self.samples_per_chain,
                "burn_in": self.burn_in, "thin": self.thin, "bridge": self.bridge, "base": base, "path": self.path,
                "ladder": betas, "num_rungs": len(betas) - 1, "rung_log_ratios": list(ladder.pair_log_ratios),
                "min_weight_ess": ladder.min_weight_ess, "drift_z": ladder.drift_z, "tail_index": ladder.tail_index}
        mean_acceptance = None
        if not torch.isnan(acceptance).all():
            level_acceptance = acceptance.mean(0)
            info["acceptance"] = level_acceptance.tolist()
            mean_acceptance = level_acceptance.min().item()
        return PartitionEstimate(
            log_z=log_z0 + ladder.log_ratio, stderr=ladder.stderr, log_weights=None, ess=ladder.min_weight_ess,
            kind=BoundKind.CONSISTENT, info=info,
            warnings=ladder_warnings(ladder, self.num_chains, mean_acceptance) + path.warnings,
        )


def ladder_draws(path, betas: list[float], num_rows: int, draws: int, thin: int, per_rung: int, *, generator,
                 progress: ProgressCallback | None = None) -> tuple[torch.Tensor, ...]:
    """``num_rows`` chains up the ladder ``betas`` (K rungs): ``(lower [rows, K, T], upper [rows, K, T], log_weights
    [rows, K + 1], acceptance [rows, K])`` with ``lower[:, k]`` the rung's ``log f_{k+1} − log f_k`` at level k's T draws
    (level 0: independent base draws), ``upper[:, k]`` at level k+1's, the chains' annealing log weights on arriving at
    each level and the kernel's mean acceptance over each level's draws (NaN for moves that always accept)."""
    rungs = len(betas) - 1
    base = [path.statistics(path.sample_base(num_rows, generator=generator)) for _ in range(draws)]
    lower = [torch.stack([path.log_weight_increment(stats, 0.0, betas[1]) for stats in base], 1)]
    state = path.sample_base(num_rows, generator=generator)
    log_weight = torch.zeros(num_rows, dtype=torch.float64, device=lower[0].device)
    columns, upper, acceptance = [log_weight], [], []
    for k in range(1, rungs + 1):
        segment = torch.linspace(betas[k - 1], betas[k], per_rung + 1, dtype=torch.float64)
        annealed = anneal(path, segment, state, generator=generator)  # no transition after its last increment
        state, log_weight = annealed.state, log_weight + annealed.log_weights
        level, accepted = [], torch.zeros(num_rows, dtype=torch.float64, device=log_weight.device)
        for _ in range(draws):
            for _ in range(thin):
                state, info = path.transition(state, betas[k], generator=generator)
                accepted = accepted + (torch.nan if info.accept_prob is None else info.accept_prob.double())
            level.append(path.statistics(state))
        upper.append(torch.stack([path.log_weight_increment(stats, betas[k - 1], betas[k]) for stats in level], 1))
        if k < rungs:
            lower.append(torch.stack([path.log_weight_increment(stats, betas[k], betas[k + 1]) for stats in level], 1))
        columns.append(log_weight)
        acceptance.append(accepted / (draws * thin))
        if progress is not None:
            progress(k, rungs)
    return torch.stack(lower, 1), torch.stack(upper, 1), torch.stack(columns, 1), torch.stack(acceptance, 1)


def ladder_warnings(ladder: LadderBridge, num_chains: int, acceptance: float | None) -> tuple[str, ...]:
    """One line per reason not to trust a ladder bridge: an optimal bridge that did not converge, chains still drifting
    at a level, annealing weights heavy-tailed or of an ESS below :data:`MIN_WEIGHT_ESS_FRACTION`, a kernel that barely
    moves."""
    warnings = []
    if not ladder.converged:
        warnings.append(f"an optimal bridge did not converge in {MAX_ITERATIONS} iterations: neighbouring levels barely overlap, so "
                        f"the estimate can be off by many nats; raise target_overlap or give a denser ladder")
    if ladder.drift_z is not None and ladder.drift_z > DRIFT_Z:
        warnings.append(f"the chains were still drifting at a level (log ratio's first and second halves differ by "
                        f"{ladder.drift_z:.1f} standard errors): raise burn_in")
    if ladder.tail_index is not None and ladder.tail_index > PARETO_K_UNRELIABLE:
        warnings.append(f"the chains' annealing weights at β = 1 are heavy-tailed (Pareto k̂ = {ladder.tail_index:.2f} > "
                        f"{PARETO_K_UNRELIABLE}): the chains that would carry the estimate were probably not drawn, so it is likely "
                        f"low by more than its stderr; raise burn_in or num_chains")
    if ladder.min_weight_ess < max(2.0, MIN_WEIGHT_ESS_FRACTION * num_chains):
        warnings.append(f"the chains' annealing weights have an ESS of {ladder.min_weight_ess:.1f} of {num_chains} at some level (below "
                        f"{MIN_WEIGHT_ESS_FRACTION:.0%}): the chains are far from that level's distribution, so a mode they do not "
                        f"reach is missed and the stderr understates the error; raise burn_in or num_chains, or compare with "
                        f"estimator=pt and raise")
    if acceptance is not None and acceptance < MIN_ACCEPTANCE:
        warnings.append(f"kernel acceptance fell to {acceptance:.3f} at a level: the chains barely move; reduce the step size")
    return tuple(warnings)
