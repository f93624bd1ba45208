"""Sequential Monte Carlo with adaptive tempering (Del Moral, Doucet & Jasra 2006; Zhou, Johansen & Aston 2016), standard
or waste-free (Dau & Chopin 2022), in blocks that ``torch.distributed`` ranks share.

The annealed particles of AIS along the model's path, with two additions: the particles are resampled when their
weights degenerate, and each next inverse temperature is chosen from the particles themselves (the conditional ESS, ZJA
eq. 3.16), so that no schedule has to be set or piloted. One run is :func:`~pfzoo.estimators.adaptive_tempering.adaptive_smc`;
this module cuts the particles into blocks, runs each block on its rank and combines the gathered blocks into the
estimate.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from pfzoo import distributed
from pfzoo.estimators import trust
from pfzoo.estimators.adaptive_tempering import SMCRun, adaptive_smc
from pfzoo.estimators.base import (
    BoundKind, LikelihoodEstimate, PartitionEstimate, ProgressCallback, independent_examples_stderr, likelihood_estimate,
    reliability_warnings,
)
from pfzoo.estimators.on_path import PathPartitionEstimator
from pfzoo.estimators.posterior_annealing import check_kernel_bounds, posterior_kernel
from pfzoo.estimators.sharding import gather, offset_progress, run_blocks
from pfzoo.kernels import Kernel
from pfzoo.logmath import summarize_log_weights
from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability
from pfzoo.paths.base import AnnealingPath
from pfzoo.paths.posterior import PosteriorPath
from pfzoo.validation import allocating, check_finite_number, check_generator, check_positive_int, check_sample_count

MIN_GROUP_ESS_FRACTION = 0.5
"""Below this fraction of the groups, the ESS of the groups' estimates says that a few groups carry Ẑ."""


class BlockRuns(NamedTuple):
    """The gathered :class:`~pfzoo.estimators.adaptive_tempering.SMCRun` of every block, pooled.

    log_z_groups: float64 CPU ``[G]``, every group's ``log Ẑ_g − log Z_0`` in block order. schedules: each block's
    schedule ``[0, β_1, …, 1]``. resampled, final_ess, floored: summed over the blocks; min_cess: the least of any step.
    acceptance ``[S]`` / segment_betas ``[S]``: every block's acceptance per stretch of steps, ordered by β (``None`` for
    kernels that always accept).
    """

    log_z_groups: torch.Tensor
    schedules: list[list[float]]
    resampled: int
    final_ess: float
    min_cess: float
    floored: int
    acceptance: torch.Tensor | None
    segment_betas: torch.Tensor | None

    @classmethod
    def pool(cls, runs: list[SMCRun]) -> BlockRuns:
        acceptance = segment_betas = None
        if runs[0].acceptance is not None:
            segment_betas, order = torch.cat([run.segment_betas for run in runs]).sort(stable=True)
            acceptance = torch.cat([run.acceptance for run in runs])[order]
        return cls(torch.cat([run.log_z_groups for run in runs]), [run.betas for run in runs], sum(run.resampled for run in runs),
                   sum(run.final_ess for run in runs), min(run.min_cess for run in runs), sum(run.floored for run in runs),
                   acceptance, segment_betas)


def group_blocks(num_groups: int, num_blocks: int) -> list[range]:
    """``num_blocks`` contiguous blocks of ``range(num_groups)`` whose sizes differ by at most one: a function of the
    settings alone, so the same for any number of ranks."""
    return [range(block * num_groups // num_blocks, (block + 1) * num_groups // num_blocks) for block in range(num_blocks)]


class SMC(PathPartitionEstimator):
    """SMC estimate of ``log Z`` with adaptive tempering and resampling: no schedule to choose.

    **Groups and blocks.** The ``num_chains`` particles are split into ``num_groups`` groups of equal size, each resampled
    on its own, so each group's ``Ẑ_g`` is an independent unbiased estimate of Z (for a given schedule). The groups are
    dealt into ``num_blocks`` contiguous blocks (:func:`group_blocks`), and **each block is an independent SMC run**
    with its own adaptive schedule (chosen where the CESS averaged over the block's groups meets ``target_cess``), its
    own random stream (:func:`pfzoo.distributed.block_generator` of the seed and the block's index) and resampling
    within its groups. Under ``torch.distributed`` (``torchrun``) the ranks share the blocks out (:mod:`pfzoo.distributed`)
    and gather their groups' estimates once; the blocks depend on the settings only, never on the number of ranks, so
    the same seed gives the same numbers, bit for bit, plain, on one rank or on several. ``Ẑ = mean_g Ẑ_g`` (log-mean-exp
    over the G groups: the blocks' Ẑ averaged, each weighted by its groups), and the standard error is the delta-method
    one over the groups (:func:`~pfzoo.logmath.summarize_log_weights` of the G values the estimate's ``log_weights [G]``
    hold). The groups of a block share its schedule, chosen from their particles, so ``Ẑ`` is unbiased only up to a
    bias that vanishes as the particles grow (ZJA §3.4: "adaptive schemes ... negligible in practice"), and ``log Ẑ``
    is a stochastic lower bound on log Z as AIS's is. Paths, bases and kernels are AIS's (:mod:`pfzoo.paths.registry`):
    block Gibbs for RBMs, DBMs, DBNs and Ising models, HMC for energies over real vectors, exact draws for Gaussians,
    or any kernel the path accepts.

    **Blocks cost time on small models**: a block's steps cannot batch with another's (their β differ), so a process
    runs its blocks one after another and pays the per-step overhead once per block; on models small enough for that
    overhead to dominate, the wall time grows with ``num_blocks``: measured (one thread, CPU time, median of 3), 2 and 4
    blocks take 1.2–1.6× and 1.7–3.2× the time of one on scripts/smc_vs_ais.py's four families (0.03–0.2 s in one
    block), 1.11× and 1.17× on a 784 × 100 RBM (0.8 s). One block (the default) is the fastest run on one process; set
    ``num_blocks`` to the number of ranks (or a multiple of it) for ``torchrun``.

    Why τ = 0.995 by default: with one kernel step per temperature, as AIS, the number of steps is what lets the
    particles mix, and the steps number about ``L / √(−log τ)`` for a path of thermodynamic length L (CESS ≈
    τ N when ``Δβ² Var[log w̃] ≈ −log τ``), so τ = 0.995 takes 14 L steps. Lower targets (0.5–0.9, BlackJAX's and
    PyMC's) assume several MCMC moves per temperature (``num_mcmc_steps``, or waste-free SMC). Measured with 1,000
    particles in one block (one CPU thread): 15–100 steps and 0.02–0.4 s on enumerable RBMs (to 25 × 12 with weights
    N(0, 2²)), 12-unit Ising models with couplings N(0, 2²), a 10-d Gaussian and a 10-d Laplace product of experts, each
    within max(3 stderr, 0.05) of the exact log Z with stderr 0.02–0.04; τ ∈ {0.99, 0.998, 0.999} or 500–2000 particles
    gave the same error for the time to within the noise of 8 repeats.

    Why 50 groups by default (20 before): the stderr is the delta method over the groups, so it is itself estimated from
    G values, and with 20 it was too often small exactly when the error was large. Measured (scripts/smc_vs_ais.py's
    families, 1,000 particles, one thread, a 2-core AMD EPYC shared with other jobs): on the 10-d Gaussian (precision
    eigenvalues 5.9–238, exact draws, 166 steps) 20 groups over seeds 0–199 gave errors of mean +0.002 and sd 0.037
    against a root-mean-square stderr of 0.032, and 4 of 200 runs (2 %; seed 1: −0.094 ± 0.021) more than 3 stderr
    off; the error built up evenly over the steps (no last step or schedule jump to blame) while the 20 groups agreed
    (their ESS 19.8). On the 20 × 12 RBM (weights N(0, 2.5²)), seeds 0–59: error sd 0.037, stderr 0.033, mean z² 1.55,
    2 of 60 beyond 3 stderr. The particles were not the trouble: with 50 groups of 20 the error sd was the same (0.035
    on the Gaussian over held-out seeds 200–349, 0.031 on the RBM) at the same time per run, the stderr 0.033, mean z²
    1.20 and 0.96, and 1 of 150 and 0 of 60 runs beyond 3 stderr; 100 groups of 10 gave 0 of 150 (mean z² 1.18).
    On the Ising model (seeds 500–539) 50 groups gave 0 of 40 beyond 3 stderr (mean z² 1.40), 20 groups 2 of 40 (1.85).
    On the 10-d Laplace POE the base decides: from a Gaussian fitted to the model's own draws (15 steps, HMC) 3 of 40
    runs (50 groups) and 1 of 40 (20 groups) were more than max(3 stderr, 0.05) off, mean z² 1.80 and 1.67, the
    stderr varying from run to run (root mean square 0.051 against mean 0.043): the groups' estimates are heavy-tailed
    there, which more groups do not cure, and ``num_mcmc_steps=3`` left 1 of 40 off (error sd 0.022, mean z² 1.58).
    From the Student-t base fitted to the same draws, which ``base="auto"`` chooses for any model whose own draws have
    heavier tails than a Gaussian's (:func:`~pfzoo.paths.continuous.choose_continuous_base`, with the ICA's numbers),
    none of 40 were, error sd 0.014 against 0.055, mean z² 1.11, in 8 steps.
    (The measurements of the other paragraphs were made with 20 groups.)

    **Waste-free SMC** (``chain_length`` P; Dau & Chopin 2022): every step resamples ``n / P`` ancestors per group of n
    particles and keeps all P states of a chain of ``P − 1`` kernel moves from each as the next particles
    (:mod:`pfzoo.estimators.adaptive_tempering`); Ẑ stays unbiased for a given schedule. Resampling then happens at every
    step, so ``resample_threshold`` plays no part. Measured at equal time (scripts/smc_waste_free.py; a 2-core AMD EPYC
    shared with other jobs, one thread, CPU time, 300 runs each) on an enumerable RBM (20 × 12, weights N(0, 2.5²), from
    the uniform base): ``SMC()`` 0.067 s, 85 steps, RMSE 0.034; waste-free P = 10, τ = 0.5 with 10,800 particles (7
    steps) 0.034 and P = 20, τ = 0.5 with 9,200 particles 0.032 (±4 %), scaled to the default's time; P ∈ {5, 10, 20}
    × τ ∈ {0.5, 0.8} over 100 runs 0.030–0.043 (±7 %). No gain there, where one block-Gibbs sweep per temperature
    already moves the particles, so standard SMC stays the default. Waste-free needs a kernel that moves within its
    ``P − 1`` steps: with the posterior path's HAIS-style HMC (acceptance 0.998) on a 10-d linear-Gaussian model, P = 5
    and τ = 0.8 left an example's groups disagreeing (ESS 3.4 of 10, errors to 0.5 nats) until ``num_mcmc_steps=5``.

    Args:
        num_chains: particles N over all groups (≥ 4; rounded down to a multiple of the groups, and with
            ``chain_length`` of P groups).
        target_cess: τ ∈ (0, 1), the CESS each step keeps, as a fraction of the particles.
        resample_threshold: resample a group when its ESS falls below this fraction of its particles (0.5: the usual
            rule; 0 never resamples, which with a fixed schedule is AIS). Standard SMC only.
        num_groups: G independent groups for the standard error; at most ``num_chains // 2`` are made.
        num_mcmc_steps: kernel steps per temperature (waste-free: per move along a chain).
        max_steps: the schedule's steps are at least ``1 / max_steps`` long; where that floor overrides the CESS
            target the estimate warns.
        num_blocks: independent SMC runs the groups are dealt into (1 ≤ num_blocks ≤ the groups made): the units the
            ranks share under ``torch.distributed``. The per-example form of :meth:`log_likelihood` blocks its examples
            instead (:func:`pfzoo.distributed.blocks`).
        chain_length: P ≥ 2 for waste-free SMC, at most the particles of a group; ``None`` for standard SMC.
        base, base_smoothing, kernel, posterior_samples, path: as :class:`~pfzoo.estimators.AIS`.
    """

    config_name = "smc"
    remedy = "use more particles (num_chains), a higher target_cess or more num_mcmc_steps"

    def __init__(
        self,
        num_chains: int = 1000,
        target_cess: float = 0.995,
        resample_threshold: float = 0.5,
        num_groups: int = 50,
        num_mcmc_steps: int = 1,
        max_steps: int = 10_000,
        num_blocks: int = 1,
        chain_length: int | None = None,
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
        self.num_blocks = check_positive_int(num_blocks, "num_blocks")
        if self.num_blocks > self.num_groups:
            raise ValueError(f"num_blocks must be at most the {self.num_groups} groups made (each block runs whole groups), got {num_blocks}")
        self.chain_length = None if chain_length is None else check_positive_int(chain_length, "chain_length")
        self.group_size = self.num_chains // self.num_groups
        if self.chain_length is not None:
            if not 2 <= self.chain_length <= self.group_size:
                raise ValueError(f"chain_length must lie between 2 and the {self.group_size} particles of a group "
                                 f"(num_chains // num_groups), got {chain_length}")
            self.group_size -= self.group_size % self.chain_length  # M = n / P ancestors per group

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
            runs = BlockRuns.pool(self._run_blocks(path, generator=generator, device=model.device, progress=progress))
        log_weights = runs.log_z_groups.to(model.device) + path.base_log_partition()
        summary = summarize_log_weights(log_weights)
        info = {"estimator": type(self).__name__, "num_chains": self.group_size * self.num_groups, "num_groups": self.num_groups,
                "num_blocks": self.num_blocks, "chain_length": self.chain_length, "target_cess": self.target_cess, "base": base,
                "path": self.path, "betas": runs.schedules, "num_steps": [len(betas) - 1 for betas in runs.schedules],
                "resampling_events": runs.resampled, "final_ess": runs.final_ess, "min_cess": runs.min_cess,
                "group_ess": summary.ess.item()}
        if runs.acceptance is not None:
            info.update(acceptance=runs.acceptance.tolist(), acceptance_betas=runs.segment_betas.tolist())
        return PartitionEstimate(
            log_z=summary.log_mean.item(), stderr=summary.stderr.item(), log_weights=log_weights, ess=runs.final_ess,
            kind=BoundKind.UNBIASED_Z, info=info, warnings=self.warnings(runs, log_weights, summary.ess.item()) + path.warnings,
        )

    def _run_blocks(self, path: AnnealingPath, *, generator: torch.Generator | None, device: torch.device,
                    progress: ProgressCallback | None) -> list[SMCRun]:
        """Every block's run, in block order: this process's blocks (all of them without sharding) one after another,
        each with its own generator, then gathered from every rank."""
        blocks = group_blocks(self.num_groups, self.num_blocks)
        seed = distributed.stream_seed(generator, device)  # one draw, the same on every rank; the blocks' streams derive from it
        mine = distributed.owned_blocks(len(blocks))
        runs = []
        for position, index in enumerate(mine):
            block_progress = None if progress is None else offset_progress(progress, position, len(mine))
            runs.append(self._run(path, len(blocks[index]), distributed.block_generator(seed, index, device), block_progress))
        return gather(runs)

    def _run(self, path: AnnealingPath, num_groups: int, generator: torch.Generator, progress: ProgressCallback | None,
             move_path: AnnealingPath | None = None) -> SMCRun:
        return adaptive_smc(path, num_groups, self.group_size, target_cess=self.target_cess, resample_threshold=self.resample_threshold,
                            num_mcmc_steps=self.num_mcmc_steps, chain_length=self.chain_length, max_steps=self.max_steps,
                            move_path=move_path, generator=generator, progress=progress)

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
        anneals them (eqs. 27–29): every example gets ``num_chains`` particles in ``num_groups`` groups (resampled apart).
        The examples are cut into blocks (:func:`pfzoo.distributed.blocks`: a function of their number alone), each block
        an independent SMC run, with its own stream, of its examples as one batch sharing the block's schedule (the CESS
        averaged over every group of the block's examples); ranks share the blocks under ``torch.distributed``, so the
        numbers do not depend on the launcher. An example's ``log p̂(x)`` is the log mean of its groups' estimates,
        unbiased for p(x) given the schedule, so a stochastic lower bound on log p(x); its stderr is the delta method over
        its groups.
        """
        self.check(model)
        if Capability.LATENT_GENERATIVE not in model.capabilities:
            return super().log_likelihood(model, data, base_data=base_data, generator=generator, progress=progress)
        model.check_visible(data, "data")
        check_generator(generator, model.device)
        kernel = posterior_kernel(model, self.kernel)
        check_kernel_bounds(model, kernel)
        per_example = self.group_size * self.num_groups

        def run(examples: range, block_generator: torch.Generator, block_progress: ProgressCallback | None) -> SMCRun:
            rows = data[examples.start:examples.stop]
            path = PosteriorPath(model, rows.repeat_interleave(per_example, dim=0), kernel)
            # waste-free moves act on the ancestors alone: a path over their data rows
            move_path = None if self.chain_length is None else PosteriorPath(
                model, rows.repeat_interleave(per_example // self.chain_length, dim=0), kernel)
            return self._run(path, self.num_groups * len(examples), block_generator, block_progress, move_path)

        with allocating("num_chains", self.num_chains * data.shape[0]):
            runs = BlockRuns.pool(run_blocks(data.shape[0], run, generator=generator, device=model.device, progress=progress))
        summary = summarize_log_weights(runs.log_z_groups.view(data.shape[0], self.num_groups), dim=1)
        info = {"estimator": type(self).__name__, "mode": "per-example SMC from the prior to the posterior", "betas": runs.schedules,
                "num_steps": [len(betas) - 1 for betas in runs.schedules], "resampling_events": runs.resampled,
                "chain_length": self.chain_length, "per_example_stderr": summary.stderr}
        if runs.acceptance is not None:
            info.update(acceptance=runs.acceptance.tolist(), acceptance_betas=runs.segment_betas.tolist())
        return likelihood_estimate(
            summary.log_mean.to(model.device), stderr=independent_examples_stderr(summary.stderr), kind=BoundKind.LIKELIHOOD_LOWER_BOUND,
            info=info, warnings=self.warnings(runs, runs.log_z_groups, summary.ess.min().item()), independent_examples=True,
        )

    def warnings(self, runs: BlockRuns, log_weights: torch.Tensor, group_ess: float) -> tuple[str, ...]:
        """One line per reason not to trust the estimate: NaN or +∞ group estimates, the step floor overriding the CESS
        target, groups whose estimates disagree (a few carry Ẑ, so the stderr understates the error), a collapsed
        kernel acceptance."""
        lines = list(trust.nonfinite_weight_warnings(log_weights, self.num_groups, self.remedy))
        if lines:
            return tuple(lines)
        if runs.floored:
            lines.append(
                f"{runs.floored} steps reached the floor of 1/max_steps = {1 / self.max_steps:.3g} and the CESS fell to "
                f"{runs.min_cess:.3f} of the particles (target {self.target_cess}): the path moves faster than max_steps "
                f"allows, so the weights may have degenerated; raise max_steps={self.max_steps} or {self.remedy}"
            )
        if group_ess < MIN_GROUP_ESS_FRACTION * self.num_groups:
            lines.append(
                f"the {self.num_groups} groups' estimates disagree (their ESS is {group_ess:.1f}): a few groups carry Ẑ, so "
                f"the stderr understates the error; {self.remedy}"
            )
        lines.extend(reliability_warnings(None, self.num_chains, runs.acceptance, runs.segment_betas, remedy=self.remedy))
        return tuple(lines)

    def extra_repr(self) -> str:
        return (f"num_chains={self.num_chains}, target_cess={self.target_cess}, resample_threshold={self.resample_threshold}, "
                f"num_groups={self.num_groups}, num_mcmc_steps={self.num_mcmc_steps}, max_steps={self.max_steps}, "
                f"num_blocks={self.num_blocks}, chain_length={self.chain_length}")
