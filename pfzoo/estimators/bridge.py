"""Bridge sampling (Bennett 1976; Meng & Wong 1996; *Deep Learning* §18.7, eq. 18.62): ``log Z_1 − log Z_0`` from
draws of both ends, and the estimator of ``log Z`` that bridges a model with its tractable base."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pfzoo.estimators.annealing import anneal
from pfzoo.estimators.base import MIN_TAIL_FIT_CHAINS, BoundKind, PartitionEstimate, ProgressCallback
from pfzoo.estimators.on_path import PathPartitionEstimator
from pfzoo.estimators.sharding import offset_progress, sharded_chains
from pfzoo.estimators.trust import schedule_warnings
from pfzoo.kernels import Kernel
from pfzoo.logmath import PARETO_K_UNRELIABLE, log_mean_exp, pareto_tail_index
from pfzoo.models.base import EnergyModel
from pfzoo.paths.schedules import make_betas
from pfzoo.validation import allocating, check_positive_int, check_sample_count

BRIDGES = ("optimal", "geometric")

MAX_ITERATIONS = 1000
"""Fixed-point iterations of the optimal bridge before giving up (it converges in tens for overlapping ends)."""

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
    if not (torch.isfinite(base).all() and torch.isfinite(target).all()):
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
    """Bridge-sampling estimate of ``log Z`` between the family's tractable base (exact draws, exact ``log Z_0``) and the
    model, whose draws come from its path's kernel at β = 1 (:func:`bridge_log_ratio`).

    ``num_chains`` chains start at base draws and are brought to the model by ``burn_in`` steps of annealing (a linear
    schedule on the model's path: chains reach the model's modes far more reliably than by running at β = 1 from the
    start); each then gives ``samples_per_chain`` draws, ``thin`` kernel steps apart. The base side draws as many
    independent samples. The estimate is consistent, neither a bound: bridge sampling is a ratio of two means.
    The model side's draws must reach every mode the model has: where its chains miss modes, ``log Ẑ`` misses their
    mass. Warnings: chains still drifting at the end of burn-in, chains that barely move (few effective draws).

    Args:
        num_chains: C ≥ 2 independent chains on the model.
        samples_per_chain: draws per chain (T).
        burn_in: annealing steps that bring each chain from the base to the model (≥ 1).
        thin: kernel steps between a chain's draws.
        bridge: "optimal" (iterated, Meng & Wong eq. 4.1) or "geometric".
        base, base_smoothing, kernel, path, posterior_samples: as :class:`~pfzoo.estimators.AIS`.
    """

    config_name = "bridge"

    def __init__(
        self,
        num_chains: int = 100,
        samples_per_chain: int = 20,
        burn_in: int = 1000,
        thin: int = 5,
        bridge: str = "optimal",
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
        burn_in_betas = make_betas("linear", self.burn_in)
        draws = self.samples_per_chain
        rejects = False  # whether the kernel reports acceptance probabilities (exact Gibbs always accepts)

        def run(num_rows: int, chain_generator, chain_progress: ProgressCallback | None) -> tuple[torch.Tensor, ...]:
            nonlocal rejects
            base_ratios = torch.stack([path.log_weight_increment(path.statistics(path.sample_base(num_rows, generator=chain_generator)), 0.0, 1.0)
                                       for _ in range(draws)], 1)
            burn_progress = None if chain_progress is None else offset_progress(chain_progress, 0, 2)
            state = anneal(path, burn_in_betas, path.sample_base(num_rows, generator=chain_generator), generator=chain_generator,
                           progress=burn_progress).state
            target_ratios, acceptance = [], torch.zeros(num_rows, dtype=torch.float64, device=model.device)
            for draw in range(draws):
                for _ in range(self.thin):
                    state, info = path.transition(state, 1.0, generator=chain_generator)
                    if info.accept_prob is not None:
                        rejects = True
                        acceptance += info.accept_prob.double()
                target_ratios.append(path.log_weight_increment(path.statistics(state), 0.0, 1.0))
                if chain_progress is not None:
                    chain_progress(draws + draw + 1, 2 * draws)
            return base_ratios, torch.stack(target_ratios, 1), acceptance / (draws * self.thin)

        with torch.no_grad(), allocating("num_chains", self.num_chains):
            blocks = sharded_chains(path, self.num_chains, run, generator=generator, device=model.device, progress=progress)
        base_ratios, target_ratios, acceptance = (torch.cat([block[i] for block in blocks]) for i in range(3))
        ratio = bridge_log_ratio(base_ratios, target_ratios, bridge=self.bridge)
        log_z0 = path.base_log_partition().item()
        info = {"estimator": type(self).__name__, "num_chains": self.num_chains, "samples_per_chain": draws, "burn_in": self.burn_in,
                "thin": self.thin, "bridge": self.bridge, "base": base,
                "path": self.path, "iterations": ratio.iterations, "effective_target_draws": ratio.effective_target_draws,
                "drift_z": ratio.drift_z}
        mean_acceptance = None
        if rejects:
            mean_acceptance = acceptance.mean().item()
            info["acceptance"] = [mean_acceptance]
        return PartitionEstimate(
            log_z=log_z0 + ratio.log_ratio, stderr=ratio.stderr, log_weights=None, ess=ratio.effective_target_draws,
            kind=BoundKind.CONSISTENT, info=info, warnings=bridge_warnings(ratio, self.num_chains, draws, mean_acceptance)
            + schedule_warnings(path, burn_in_betas, steps="burn_in", energy_schedule=False) + path.warnings,
        )


def bridge_warnings(ratio: BridgeRatio, num_chains: int, draws_per_chain: int, acceptance: float | None) -> tuple[str, ...]:
    """One line per reason not to trust a bridge estimate: an optimal bridge that did not converge, heavy-tailed terms, target chains still drifting, chains
    that barely move, a kernel that rejects almost everything."""
    warnings = []
    if not ratio.converged:
        warnings.append(f"the optimal bridge did not converge in {MAX_ITERATIONS} iterations: the base's and the model's draws "
                        f"barely overlap, so the estimate can be off by many nats; raise burn_in and samples_per_chain, or "
                        f"use intermediate distributions (estimator=ais or estimator=linked)")
    if ratio.tail_index is not None and ratio.tail_index > PARETO_K_UNRELIABLE:
        warnings.append(f"the bridge's terms are heavy-tailed (Pareto k̂ = {ratio.tail_index:.2f} > {PARETO_K_UNRELIABLE}): a few draws "
                        f"carry the estimate and its stderr is unreliable (the two ends barely overlap); use more draws, or "
                        f"intermediate distributions (estimator=ais or estimator=linked)")
    if ratio.drift_z is not None and ratio.drift_z > DRIFT_Z:
        warnings.append(f"the model's chains were still drifting (log ratio's first and second halves differ by {ratio.drift_z:.1f} "
                        f"standard errors): raise burn_in")
    if draws_per_chain >= 4 and ratio.effective_target_draws < 2 * num_chains:  # τ above half the chain's length
        warnings.append(f"{ratio.effective_target_draws:.0f} effective draws from {num_chains} chains: the chains barely move, so the "
                        f"model side rests on their starting points; raise thin or burn_in")
    if acceptance is not None and acceptance < 0.05:
        warnings.append(f"kernel acceptance at β = 1 was {acceptance:.3f}: the chains barely move; reduce the step size")
    return tuple(warnings)
