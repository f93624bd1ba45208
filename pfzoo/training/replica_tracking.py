"""Tracking log Z through parallel-tempering training on the trainer's own replicas (Desjardins, Courville & Bengio
2011, "On tracking the partition function"; *Deep Learning* §18.7).

:class:`~pfzoo.training.PT` already keeps persistent chains at every inverse temperature ``β_1 < … < β_R = 1`` of its
ladder, distributed (up to their lag) as ``p_β(x) ∝ f_β(x) = Σ_h exp(−β E(x, h))``. For the binary families this
tempered family is the geometric annealing path from the *uniform* base (``W_β = βW``, ``b_β = βb``, …; checked
numerically on the replicas at the first observation, else refused), whose ``log Z_0`` is exact. So the replicas give
the samples that :class:`~pfzoo.training.PartitionTracker` runs a second ladder for, and this tracker follows
``ζ_t = (log Z_{β_1}(θ_t), …, log Z_{β_R}(θ_t))`` by the same Kalman filter
(:class:`~pfzoo.training.partition_tracking.LogPartitionFilter`) from these sources, at every epoch's end (and every
``observe_every`` updates if set):

* **the cold levels annealed** (``top_levels="smc"``, the default): the replicas are the training's negatives, and
  every update lowers the model's density where they are, so they sit where the model has just become less likely than
  on average, and estimates made on them come out low (one epoch into PT training of a 784 × 500 RBM, lr 0.01, the
  bridges below put log Z 14 nats under AIS's). Below β = ``relax_from`` a copy of the ladder's levels up to there run
  ``hot_sweeps`` parallel-tempering sweeps of the tracker's own sheds that in a few sweeps; above it, where the model
  grows modes far denser than the data, the pushed-down chains take hundreds of sweeps to redistribute between the
  modes. So from the copy's chains at ``relax_from`` upward the tracker runs adaptive SMC (those chains after each of
  the last ``smc_copies`` sweeps as particles, reweighted, resampled and moved by ``smc_sweeps`` Gibbs sweeps per
  temperature up to β = 1; Zhou, Johansen & Aston 2016), read at every level above;
* **relaxed replicas** (``top_levels="relax"``): instead, the copy's levels at β ≥ ``relax_from`` run
  parallel-tempering sweeps of their own (until they settle, at most ``relax_sweeps``) at the model's current
  parameters (after 1, 3, 10, 30 sweeps the one-epoch gap above was 11, 5, −0.4 and −0.7 nats), which also carries
  them over the update made since they were drawn (early in training one update can move log Z by 6 nats), and the
  bridges below read them;
* **temporal**: the change of every level since the last observation by the trapezoid rule of thermodynamic integration
  in parameter space, ``ζ_{t,k} − ζ_{s,k} ≈ ½ (mean_c [log f_t − log f_s](x_{s,k,c}) + mean_c [log f_t − log f_s](x_{t,k,c}))``
  over the states kept at the last observation (near θ_s) and the current ones (near θ_t) — means of log ratios, which do
  not degenerate as importance weights do when a hundred updates early in training move log Z by tens of nats — the
  filter's prediction between observations within an epoch (``observe_every``), and from one epoch to the next only
  with ``across_epochs``: over an MNIST epoch (500 updates) the rule's error exceeded its stated noise and carried one
  epoch's error into the next (below);
* **spatial**: the geometric bridge between neighbouring levels,
  ``y_k = log mean_c (f_{β_{k+1}}/f_{β_k})^{½}(x_{k,c}) − log mean_c (f_{β_k}/f_{β_{k+1}})^{½}(x_{k+1,c})``, estimating
  ``ζ_{k+1} − ζ_k`` (with SMC above ``relax_from``, the differences of its cumulative estimates there) — observed
  differences 2 … R. For an RBM with more visible than hidden units the ``x`` are hidden draws ``h ~ p_{β_k}(h | v)``
  of the replicas' states and ``f_β`` the hidden marginal (the visible layer summed out): the same ratios of partition
  functions, without the visible units' Bernoulli noise (three times less spread on MNIST; :meth:`_bridge_marginal`);
* **the hot anchor** (at the first observation and at every epoch's end): the hottest replica's ``β_1`` is rarely close
  enough to 0 for a bridge from uniform draws (on the zoo's 784 × 500 PCD(500) RBM, ``log f_{0.1}/f_0`` over uniform
  draws has a standard deviation of about 6 nats), so ``ζ_1 − log Z_0`` comes from a short AIS run of its own from the
  uniform base to ``β_1`` (``anchor_steps`` linear steps × ``anchor_chains`` chains: hot distributions are easy, and at
  reports/tracking's fifth-epoch checkpoints the default's log mean spreads 0.08 nat) — observed difference 1.

The trainer's random stream is untouched (the tracker reads the replicas and draws from its own generator), so a
tracked run trains bit for bit as the same run without it.

Cost: per observation ``hot_sweeps`` sweeps of the ladder's levels up to ``relax_from`` (of the whole ladder when
relaxing) and three products of all R·C states; with SMC (the default) about 100 temperatures from β ≈ 0.54 to 1 on the
MNIST runs below, each ``smc_sweeps`` Gibbs sweeps of ``smc_copies`` × C particles and about one evaluation of their
weight increments (the conditional-ESS search reuses the statistics); relaxing instead, :data:`MIN_RELAX_SWEEPS` to
``relax_sweeps`` PT sweeps of the levels above ``relax_from`` and a product of their states with the weights for the
last :data:`POOLED_SWEEPS` sweeps of each block of :data:`RELAX_BLOCK` that checks whether the copy settled; per epoch
one anchor run. Measured on binarized MNIST (784 × 500 from scratch, 30 replicas × 100 chains, five training seeds × five
or ten epochs, one thread; reports/tracking/README.md, which also holds the other modes and settings): 35 of 35 epochs
within 1 nat of the higher of two AIS starts (K = 10⁴) at 5.1–8.1 % of the training's CPU time on a 2-core AMD EPYC (an
observation at a fifth-epoch checkpoint spreads 0.27 nat, mostly the SMC's last two temperatures). The SMC's particles are
``smc_copies`` × the chains per replica: with 33 per replica 13 of 15 (7.7–10.7 %), one run ending at a model where an
observation spreads 0.78 nat, its stderr 1.6 times too small.

What the stderr leaves out: consecutive observations share the replicas' history (the filter takes them as independent),
and neighbouring levels that rarely exchange barely overlap, so their bridge is biased beyond its stderr; the SMC's
stderr is the delta method over only ``smc_copies`` groups that share their chains' history (above). The tracker warns
when the ladder's least exchange acceptance over the epoch is below :data:`~pfzoo.training.partition_tracking.MIN_SWAP_ACCEPTANCE`
(raise the PT trainer's ``num_replicas``), when a relaxation ends without settling, and, with a prediction
(``observe_every`` or ``across_epochs``), when its observations keep correcting it one way. Observed afresh each epoch
(the defaults) there is no prediction to correct, so a miss within a few of its stderr goes unwarned.
"""

from __future__ import annotations

import copy
import logging
import math
from typing import Any, Mapping

import torch

from pfzoo.estimators.adaptive_tempering import adaptive_smc
from pfzoo.estimators.annealing import anneal
from pfzoo.kernels import ParallelTempering
from pfzoo.kernels.base import take_chains
from pfzoo.logmath import log_mean_exp, summarize_log_weights
from pfzoo.models.capabilities import Capability, MissingCapability, describe
from pfzoo.paths import RBMGeometricPath, build_from_base, is_annealable, make_base, path_kinds
from pfzoo.training.callbacks import TrainingCallback
from pfzoo.training.centering import Centered
from pfzoo.training.dbm import DBMParallelTempering
from pfzoo.training.natural_gradient import NaturalGradient
from pfzoo.training.parallel_tempering import PT
from pfzoo.training.partition_tracking import (MIN_SWAP_ACCEPTANCE, LagMonitor, LogPartitionFilter, bridge_differences,
                                                bridge_log_ratios, log_mean_and_covariance, tracked_record, tracker_from_settings)
from pfzoo.validation import check_bool, check_choice, check_finite_number, check_positive_int

PATH_KIND = "geometric"
BASE = "uniform"

RELAX_BLOCK = 10
"""Sweeps per block of the relaxation, after each of which it checks whether the relaxed copy has settled."""

POOLED_SWEEPS = 3
"""The last sweeps of each block whose states the block's bridge estimate pools."""

MIN_RELAX_SWEEPS = 160
"""Sweeps before the settling check may stop the relaxation: with the check allowed after 40 or 80 the MNIST runs of
reports/tracking tracked 1.6–3.1 nats low (the copy rises too slowly per block for the check to see; README, "Trials")."""

TOP_LEVELS = ("smc", "relax")
"""How the levels at β ≥ ``relax_from`` are observed: annealed by adaptive SMC from the level below them, or relaxed."""

HOT_POOLED_FROM = 0.5
"""The share of the hot sweeps after which their bridges are pooled: the first sweeps still carry the training's lag
(pooled from the first sweep, reports/tracking's seed 2 tracked its first epoch at −0.94 nats against −0.19)."""

SMC_RESAMPLE_THRESHOLD = 0.5
"""The top levels' SMC resamples a group when its ESS falls below this fraction of its particles (SMC's default)."""

logger = logging.getLogger(__name__)


def level_log_f(path, stats: list, ladder: tuple[float, ...]) -> torch.Tensor:
    """``log f_{β_k} − log f_0`` ``[R, C]`` of every level's states at its β_k, from their statistics."""
    return torch.stack([path.log_weight_increment(level, 0.0, beta) for level, beta in zip(stats, ladder)])


class ReplicaPartitionTracker(TrainingCallback):
    """Follows ``log Z`` of a model trained by :class:`~pfzoo.training.PT` from the objective's own replicas (module
    docstring), and logs it with the train and held-out log-likelihoods every epoch.

    Logs per epoch the same numbers as :class:`~pfzoo.training.PartitionTracker` — ``log_z_tracked``,
    ``log_z_tracked_stderr``, ``{train,<held>}_tracked_log_likelihood`` (and ``…_stderr``), ``log_z_tracking_correction``
    — plus ``tracking_anchor_log_z`` (the hot anchor's ``log Z_{β_1}``) and ``tracking_anchor_ess`` (its AIS's effective
    sample size, of ``anchor_chains``), ``tracking_relax_sweeps`` (the sweeps the copy ran) and, with
    ``top_levels="smc"``, ``tracking_smc_steps`` and ``tracking_smc_ess`` (the SMC's temperatures and its particles'
    ESS at β = 1, of ``smc_copies`` × the chains per level). Its filter, the states and log densities kept for the next temporal estimate and
    its generator are checkpointed. When the objective's ladder moves (``adapt_ladder``) the filter restarts from a full
    observation at the new ladder. Under a process group each rank tracks from its own share of the replicas.

    Args:
        objective: the :class:`~pfzoo.training.PT` objective the Trainer runs (its ``chains`` and ``betas`` are read).
        observe_every: updates between observations within an epoch; 0 (default): at every epoch's end only.
        relax_sweeps: with ``top_levels="relax"``, the most parallel-tempering sweeps run on a copy of the replicas before
            each observation, in blocks of :data:`RELAX_BLOCK` until the copy settles (module docstring); 0 observes the
            replicas as the training left them.
        relax_from: the least β of the levels annealed by SMC or relaxed (the two top levels always are); the levels
            below are observed through bridges on the hot-swept copy.
        burn_in: with ``observe_every``, updates before the first observation within the first epoch.
        anchor_steps: linear AIS steps from the uniform base to the hottest replica's β.
        anchor_chains: AIS chains of the anchor.
        hot_sweeps: parallel-tempering sweeps of a copy of the ladder's levels up to ``relax_from`` before the SMC (of
            the whole ladder before a relaxation, counted in its sweeps); the levels below ``relax_from`` are observed
            there, their bridges pooled over the second half of these sweeps; 0: as the training left them (on MNIST
            two of three seeds' first epochs then tracked 1.7–5.0 nats low: reports/tracking, "Each epoch observed
            afresh").
        across_epochs: fold each epoch's first observation into the temporal prediction from the epoch before (the
            Kalman filter runs through the whole training); False (default): it starts the filter afresh, so an epoch's
            estimate carries no error of the last one (on MNIST, 500 updates an epoch, the prediction across epochs
            carried −1.33 and −1.00 nats into epochs 3–4: reports/tracking, "Each epoch observed afresh").
        top_levels: ``"smc"`` (default): the levels at β ≥ ``relax_from`` by adaptive SMC from the hot-swept copy's chains
            at ``relax_from``; ``"relax"``: by relaxing the copy there (module docstring). Measured on the MNIST runs of
            reports/tracking (README): SMC 35 of 35 epochs within 1 nat of AIS at 5.1–8.1 % of the training time (five
            seeds, 100 chains per replica), 13 of 15 at 7.7–10.7 % (three seeds, 33); relaxing (33, before
            the bridges moved to the hidden marginal) 12 of 15, the three misses all low (−1.08 to −2.52), at 9.4–11.1 %.
        smc_copies: groups of the SMC, each started from the chains at ``relax_from`` after another of the last hot
            sweeps (the estimate's stderr is the delta method over the groups, so at least 2; groups from the same
            sweep share their start, and their stderr came out too small: reports/tracking, "The cold levels annealed").
        smc_target_cess: the SMC's conditional-ESS target per temperature (higher: more, shorter steps); see ``smc_sweeps``.
        smc_sweeps: Gibbs sweeps of every particle per temperature. On the MNIST runs (reports/tracking, "Fewer, longer
            SMC steps") two at CESS target 0.99 (the defaults) err as one at 0.998 in 20 % less time, three at 0.99 a
            quarter less for 10 % more; the SMC is most of an observation's error.
        smc_chain_length: ``None`` (default), standard SMC; P, waste-free SMC (Dau & Chopin 2022; the chains per level a
            multiple of P), which spread more than the default on reports/tracking's MNIST run ("Waste-free SMC").
    """

    def __init__(self, objective: PT, observe_every: int = 0, relax_sweeps: int = 400, relax_from: float = 0.5,
                 burn_in: int = 100, anchor_steps: int = 50, anchor_chains: int = 64, hot_sweeps: int = 10,
                 across_epochs: bool = False, top_levels: str = "smc", smc_copies: int = 5, smc_target_cess: float = 0.99,
                 smc_sweeps: int = 2, smc_chain_length: int | None = None) -> None:
        if not isinstance(objective, PT):
            raise ValueError(f"objective must be the pfzoo.training.PT objective whose replicas are tracked, got {type(objective).__name__}")
        self.objective = objective
        if isinstance(observe_every, bool) or not isinstance(observe_every, int) or observe_every < 0:
            raise ValueError(f"observe_every must be a non-negative integer (0: at every epoch's end only), got {observe_every!r}")
        self.observe_every = observe_every
        if isinstance(burn_in, bool) or not isinstance(burn_in, int) or burn_in < 0:
            raise ValueError(f"burn_in must be a non-negative integer, got {burn_in!r}")
        self.burn_in = burn_in
        least = MIN_RELAX_SWEEPS + RELAX_BLOCK  # room for one settling check
        if (isinstance(relax_sweeps, bool) or not isinstance(relax_sweeps, int) or relax_sweeps % RELAX_BLOCK
                or not (relax_sweeps == 0 or relax_sweeps >= least)):
            raise ValueError(f"relax_sweeps must be 0 or a multiple of {RELAX_BLOCK} of at least {least} (room to see the copy "
                             f"settle), got {relax_sweeps!r}")
        self.relax_sweeps = relax_sweeps
        self.relax_from = check_finite_number(relax_from, "relax_from", minimum=0.0)
        if self.relax_from > 1.0:
            raise ValueError(f"relax_from must be an inverse temperature in [0, 1], got {relax_from}")
        self.anchor_steps = check_positive_int(anchor_steps, "anchor_steps")
        self.anchor_chains = check_positive_int(anchor_chains, "anchor_chains")
        if (isinstance(hot_sweeps, bool) or not isinstance(hot_sweeps, int) or hot_sweeps < 0
                or (relax_sweeps and hot_sweeps + RELAX_BLOCK > relax_sweeps)):
            raise ValueError(f"hot_sweeps must be a non-negative integer leaving at least one block of {RELAX_BLOCK} of "
                             f"relax_sweeps={relax_sweeps} to the top levels, got {hot_sweeps!r}")
        self.hot_sweeps = hot_sweeps
        self.across_epochs = check_bool(across_epochs, "across_epochs")
        self.top_levels = check_choice(top_levels, "top_levels", TOP_LEVELS)
        self.smc_copies = check_positive_int(smc_copies, "smc_copies")
        if self.smc_copies < 2:
            raise ValueError(f"smc_copies must be at least 2 (the stderr is taken over the copies), got {smc_copies}")
        self.smc_target_cess = check_finite_number(smc_target_cess, "smc_target_cess", minimum=0.0, maximum=1.0)
        if not 0.0 < self.smc_target_cess < 1.0:
            raise ValueError(f"smc_target_cess must be in (0, 1), got {smc_target_cess}")
        self.smc_sweeps = check_positive_int(smc_sweeps, "smc_sweeps")
        self.smc_chain_length = None if smc_chain_length is None else check_positive_int(smc_chain_length, "smc_chain_length")
        if self.smc_chain_length is not None and self.smc_chain_length < 2:
            raise ValueError(f"smc_chain_length must be at least 2 (waste-free SMC keeps every state of chains that long), got {smc_chain_length}")
        if self.anchor_chains < 2:
            raise ValueError(f"anchor_chains must be at least 2 (a variance needs two chains), got {anchor_chains}")
        self._lag = LagMonitor("raise track_partition.smc_copies, or relax_sweeps with top_levels='relax' (the observations "
                               "keep correcting the prediction one way)")

    def check(self, model) -> None:
        offered = model.capabilities
        if Capability.EXACT_FREE_ENERGY in offered and is_annealable(model) and PATH_KIND in path_kinds(model):
            self.objective.check(model)
            return
        raise MissingCapability(
            f"ReplicaPartitionTracker needs {Capability.EXACT_FREE_ENERGY.value} and a {PATH_KIND} annealing path from a "
            f"{BASE} base; {type(model).__name__} {describe(model)} — use trainer.evaluate_every with an estimator instead")

    # ---- the run ----------------------------------------------------------------------------------

    def start(self, model, train: torch.Tensor, *, seed: int, state: dict[str, Any] | None = None) -> None:
        self.check(model)
        self._base, _ = make_base(model, base=BASE, data=train, by="ReplicaPartitionTracker")
        self._log_z0 = self._path(model).base_log_partition().to(model.device)
        self._generator = torch.Generator(model.device).manual_seed(seed)
        self._filter, self._ladder = None, None
        self._kept_positions = self._kept_log_f = None  # the last observation's states [R, C, V] and log f_β − log f_0 [R, C]
        self._updates, self._sweeps_run, self._settled = 0, 0, True
        self._smc_run: tuple[int, float] = (0, math.nan)  # the last observation's SMC steps and final ESS
        self._epoch_begun = True  # no observation yet this epoch (a checkpoint is taken after the epoch's last one)
        self._anchor: tuple[float, float] = (math.nan, math.nan)
        self._marginal = None  # the path the observation's bridges read (_bridge_marginal), set by each observation
        # the parameters of the last observation, where the filter's state and the kept log densities stand
        self._observed_at = copy.deepcopy(model).requires_grad_(False)
        if state is not None:
            self._load(state, model.device)

    @torch.no_grad()
    def on_step(self, model) -> None:
        self._updates += 1
        due = self.observe_every and self._updates >= self.burn_in and (self._updates - self.burn_in) % self.observe_every == 0
        if due and self.objective.chains.numel():
            self._observe(model, anchor=False)

    @torch.no_grad()
    def on_epoch_end(self, model, epoch: int, splits: Mapping[str, torch.Tensor]) -> dict[str, float]:
        if not self.objective.chains.numel():
            return {}
        self._observe(model, anchor=True)
        log_z, stderr = self.log_partition()
        correction = self._filter.correction.item()
        record = tracked_record(model, splits, log_z, stderr, correction)
        record["tracking_anchor_log_z"], record["tracking_anchor_ess"] = self._anchor
        record["tracking_relax_sweeps"] = self._sweeps_run
        if self.top_levels == "smc":
            record["tracking_smc_steps"], record["tracking_smc_ess"] = self._smc_run
        if not self._settled:
            logger.warning("the tracked log Z may be low: %d relaxation sweeps did not settle the copy of the PT replicas "
                           "(its log Z still rose by more than one standard error per block); raise "
                           "track_partition.relax_sweeps", self._sweeps_run)
        self._lag.observe(correction, stderr)
        acceptance = [rate for rate in self.objective.pair_acceptance() if not math.isnan(rate)]
        if acceptance and min(acceptance) < MIN_SWAP_ACCEPTANCE:
            logger.warning("the tracked log Z may be off by more than its stderr: the PT ladder's least exchange acceptance "
                           "this epoch is %.3g (below %g), so its neighbouring replicas barely overlap; raise "
                           "trainer.objective.num_replicas", min(acceptance), MIN_SWAP_ACCEPTANCE)
        self._filter.correction.zero_()
        self._epoch_begun = True
        return record

    def log_partition(self) -> tuple[float, float]:
        """The tracked ``(log Ẑ, stderr)`` of the model at the last observation."""
        if self._filter is None or not self._filter.started:
            raise ValueError("the tracker has not observed yet: it observes after burn_in updates and at every epoch's end")
        return self._filter.mean[-1].item(), self._filter.covariance[-1, -1].clamp(min=0).sqrt().item()

    # ---- observations -----------------------------------------------------------------------------

    def _path(self, model):
        return build_from_base(model, self._base, kind=PATH_KIND, by="ReplicaPartitionTracker")

    def _statistics(self, path, positions: torch.Tensor) -> list:
        """Every level's path statistics of ``positions [R, C, V]``, from one product for all levels."""
        num_levels, num_chains = positions.shape[:2]
        state = path.init(positions.flatten(0, 1), generator=self._generator)
        return [path.statistics(take_chains(state, slice(level * num_chains, (level + 1) * num_chains), num_levels * num_chains))
                for level in range(num_levels)]

    def _bridge_marginal(self, model, path):
        """The path whose bridges the tracker reads: for an RBM with more visible than hidden units, the same joint path
        annealed on the hidden marginal (its visible layer summed out, as ``marginalize="auto"`` chooses); None (the
        tracker's own ``path``, over visible states) otherwise.

        Why: a bridge's log ratio on visible states carries the Bernoulli noise of every visible unit (the term
        ``(β' − β) b·v``), which summing the visible layer out removes. Measured on the hot-swept copy's bridges from
        β = 0.05 to 0.54 at the fifth-epoch checkpoints of reports/tracking's MNIST runs (16 tracker seeds each): their
        total spread 0.63, 0.47, 0.46 nat on visible states, 0.20, 0.11, 0.15 on hidden draws from them (same means)."""
        if not isinstance(path, RBMGeometricPath) or path.summed_layer != "hidden":
            return None
        marginal = build_from_base(model, self._base, kind=PATH_KIND, by="ReplicaPartitionTracker", marginalize="auto")
        return marginal if marginal.summed_layer == "visible" else None

    def _bridge_ratios(self, path, positions: torch.Tensor, stats: list, ladder: tuple[float, ...]) -> torch.Tensor:
        """:func:`~pfzoo.training.partition_tracking.bridge_log_ratios` between neighbouring levels of ``ladder`` for the
        states ``positions [L, C, V]`` with their ``path`` statistics ``stats``: on the observation's
        :meth:`_bridge_marginal` from one hidden draw ``h ~ p_β(h | v)`` of each state at its level (a draw of the
        joint, so of the hidden marginal), else on ``path`` → ``[2(L − 1), C]``."""
        marginal = self._marginal
        if marginal is None:
            return bridge_log_ratios(path, stats, ladder)
        hidden = [path.target.draw_hidden(level, level_stats, beta=beta, generator=self._generator).to(level.dtype)
                  for level, level_stats, beta in zip(positions, stats, ladder)]
        return bridge_log_ratios(marginal, self._statistics(marginal, torch.stack(hidden)), ladder)

    def _observe(self, model, *, anchor: bool) -> None:
        """At ``model``'s parameters, on a copy of the replicas (hot-swept, and above ``relax_from`` annealed by SMC or
        relaxed): fold the temporal change since the last
        observation, the bridges between neighbouring levels and, with ``anchor`` or when the filter (re)starts, the hot
        anchor into the filter; keep the states and parameters for the next one.

        The temporal change of every level is the trapezoid rule of thermodynamic integration in parameter space,
        ``log Z_t − log Z_s ≈ ½ (mean_c [log f_t − log f_s](x_{s,c}) + mean_c [log f_t − log f_s](x_{t,c}))`` over the
        kept states ``x_s`` (drawn near θ_s) and the current ones ``x_t`` (near θ_t), with the covariance of those per-chain
        averages over the chain indices: means of log ratios do not degenerate as importance weights do when a hundred
        updates early in training move log Z by tens of nats. By Jensen's inequality the forward mean is a lower and the
        backward mean an upper bound on the change, so the rule errs by at most half their gap: the prediction's variance
        gains the outer product of those half-widths over the levels (their errors share a sign)."""
        ladder = tuple(self.objective.betas.tolist())
        path = self._path(model)
        self._marginal = self._bridge_marginal(model, path)
        if self.top_levels == "smc":  # [R, C, V] β ascending, the levels' statistics, the differences 1 … R − 1
            positions, stats, differences, noise = self._annealed_top_levels(path, model, ladder)
        else:
            positions, stats, bridge_ratios = self._relaxed_replicas(model, path, ladder)
            differences, noise = bridge_differences(bridge_ratios)
        log_f = level_log_f(path, stats, ladder)  # [R, C]
        afresh = ladder != self._ladder or (self._epoch_begun and not self.across_epochs)
        if afresh:  # the first observation, a moved ladder, or (unless across_epochs) an epoch's first
            if ladder != self._ladder:
                self._check_tempered_family(model, positions[0], log_f[0], ladder[0])
            self._filter, self._ladder, anchor = LogPartitionFilter(self._log_z0), ladder, True
        elif self._kept_positions is not None:
            kept_now = level_log_f(path, self._statistics(path, self._kept_positions), ladder)
            then = self._path(self._observed_at)
            current_then = level_log_f(then, self._statistics(then, positions), ladder)
            forward, backward = kept_now - self._kept_log_f, log_f - current_then  # [R, C] each
            per_chain = 0.5 * (forward + backward)
            centred = per_chain - per_chain.mean(1, keepdim=True)
            num_chains = per_chain.shape[1]
            half_width = (0.5 * (backward.mean(1) - forward.mean(1))).clamp(min=0.0)  # the rule's error is within it
            prediction_noise = centred @ centred.T / ((num_chains - 1) * num_chains) + torch.outer(half_width, half_width)
            self._filter.predict(per_chain.mean(1), prediction_noise)
        rows = list(range(1, len(ladder)))
        if anchor:
            anchor_difference, anchor_noise = self._anchor_run(path, ladder[0])
            differences, noise, rows = torch.cat([anchor_difference, differences]), torch.block_diag(anchor_noise, noise), [0, *rows]
        if rows:
            self._filter.observe(differences, noise, rows=rows)
        if self.observe_every or self.across_epochs:  # what the next observation's prediction reads
            self._kept_positions, self._kept_log_f = positions, log_f
            _copy_parameters(model, self._observed_at)
        self._epoch_begun = False

    def _top_index(self, ladder: tuple[float, ...]) -> int:
        """The first level at β ≥ ``relax_from`` (at most the second-last: the two top levels are always treated)."""
        return min(next(index for index, beta in enumerate(ladder) if beta >= self.relax_from), len(ladder) - 2)

    def _hot_sweeps(self, path, kernel, target, ladder: tuple[float, ...], positions: torch.Tensor, pooled_levels: int,
                    keep: tuple[int, int] = (0, 0)) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """``hot_sweeps`` parallel-tempering sweeps of a copy of the levels ``ladder`` (the whole ladder, or its hottest
        levels) from ``positions [R, C, V]``: the final positions ``[R, C, V]``, the bridge log ratios
        (:meth:`_bridge_ratios`) among the first ``pooled_levels`` levels after each sweep from :data:`HOT_POOLED_FROM`
        of them on (none for fewer than two levels), and, for ``keep = (level, count)``, that level's chains ``[C, V]``
        after each of the last ``count`` sweeps."""
        top = ladder[-1]  # a kernel's ladder ends at 1: the levels are run as ``top`` times the ladder divided by it
        whole = ParallelTempering(kernel, [beta / top for beta in ladder], swaps=self.objective.swaps)
        state = whole.init_replicas(positions.clone(), target, generator=self._generator)
        pooled, kept = [], []
        for sweep in range(self.hot_sweeps):
            state, _ = whole.step(state, target, beta=top, generator=self._generator)
            if pooled_levels > 1 and sweep >= HOT_POOLED_FROM * self.hot_sweeps:
                levels = state.replica_positions[:pooled_levels]
                stats = self._statistics(path, levels)
                pooled.append(self._bridge_ratios(path, levels, stats, ladder[:pooled_levels]))
            if sweep >= self.hot_sweeps - keep[1]:
                kept.append(state.replica_positions[keep[0]])
        return state.replica_positions, pooled, kept

    def _annealed_top_levels(self, path, model, ladder: tuple[float, ...]) -> tuple[torch.Tensor, list, torch.Tensor, torch.Tensor]:
        """The neighbouring levels' differences ``ζ_k − ζ_{k−1}``, k = 1 … R − 1 ``[R − 1]``, with their covariance, from
        ``hot_sweeps`` parallel-tempering sweeps of a copy of the levels up to ``low`` and adaptive SMC above: below level
        ``low`` (the first at β ≥ ``relax_from``) the geometric bridges of the copy pooled over the second half of the
        sweeps; from ``low`` to β = 1 one SMC run (:func:`~pfzoo.estimators.adaptive_tempering.adaptive_smc`, Zhou,
        Johansen & Aston 2016) whose particles are the copy's chains at ``low`` after each of the last ``smc_copies`` hot
        sweeps (repeated when there are fewer sweeps), one group per sweep, annealed with CESS target
        ``smc_target_cess``, ``smc_sweeps`` Gibbs sweeps per temperature, and read at every level above ``low`` (its
        marks): the differences of the groups' cumulative log-mean estimates, their covariance by the delta method over
        the groups. Also the positions ``[R, C, V]`` (the swept copy's up to ``low``, the training's replicas above) and
        every level's statistics (what a prediction reads).

        Why anneal rather than relax the cold levels: relaxation needs the copy's chains to reach equilibrium there,
        and once the model's own states are far denser than the data the chains that the training pushed down take
        hundreds of sweeps to redistribute between its modes (reports/tracking/README.md); SMC's weights and
        resampling correct the shares of the modes that the particles reach, from draws of the level below, which
        mix quickly. Measured at the fifth epochs of reports/tracking's three training seeds: the defaults' SMC put
        the top part (β 0.54 → 1) within 1 nat of AIS where 160 relaxation sweeps were 1.7–3.0 nats low, in less time."""
        low = self._top_index(ladder)
        kernel, target = model.gibbs_chain(keep_statistics=True)
        replicas = self.objective.chains.unflatten(0, (len(ladder), -1))
        # only the levels up to ``low`` are swept (at least two): the SMC replaces those above, and exchanges with them
        # would bring the training's pushed-down states into the SMC's starts; each group starts from another sweep's
        # chains at ``low``
        swept = max(low, 1) + 1
        lower, pooled, starts = self._hot_sweeps(path, kernel, target, ladder[:swept], replicas[:swept], low + 1,
                                                 keep=(low, self.smc_copies))
        positions = torch.cat([lower, replicas[swept:]])
        starts = starts or [positions[low]]
        stats = self._statistics(path, positions)
        if low and not pooled:  # no hot sweeps: the training's replicas as they are
            pooled.append(self._bridge_ratios(path, positions[: low + 1], stats[: low + 1], ladder[: low + 1]))
        num_chains = positions.shape[1]
        start = path.init(torch.cat([starts[index % len(starts)] for index in range(self.smc_copies)]), generator=self._generator)
        run = adaptive_smc(path, self.smc_copies, num_chains, target_cess=self.smc_target_cess, resample_threshold=SMC_RESAMPLE_THRESHOLD,
                           num_mcmc_steps=self.smc_sweeps, chain_length=self.smc_chain_length,
                           state=start, start_beta=ladder[low], marks=ladder[low + 1:-1], generator=self._generator)
        cumulative = run.log_z_groups[None] if run.log_z_marks is None else torch.cat([run.log_z_marks, run.log_z_groups[None]])
        log_means, covariance = log_mean_and_covariance(cumulative.to(positions.device))  # [L], [L, L]: log Z_β − log Z_{β_low}
        size = log_means.shape[0]
        step = torch.eye(size, dtype=torch.float64, device=log_means.device) - torch.diag(log_means.new_ones(size - 1), -1)
        differences, noise = step @ log_means, step @ covariance @ step.T
        if low:
            lower, lower_noise = bridge_differences(log_mean_exp(torch.stack(pooled), dim=0))
            differences, noise = torch.cat([lower, differences]), torch.block_diag(lower_noise, noise)
        self._sweeps_run, self._settled, self._smc_run = self.hot_sweeps, True, (len(run.betas) - 1, run.final_ess)
        return positions, stats, differences, noise

    def _relaxed_replicas(self, model, path, ladder: tuple[float, ...]) -> tuple[torch.Tensor, list, torch.Tensor]:
        """A copy of the objective's replicas whose levels at β ≥ ``relax_from`` are relaxed by parallel-tempering sweeps
        of the tracker's own over those levels, at ``model``'s parameters (its generator; the objective's chains are not
        touched): the positions ``[R, C, V]``, their path statistics per level, and each chain's bridge log ratios, pooled
        over the last :data:`POOLED_SWEEPS` of the last block of sweeps, ``log mean_sweeps (f_{β_{k±1}}/f_{β_k})^{½}``
        ``[2(R − 1), C]`` (forward and backward per pair, as
        :func:`~pfzoo.training.partition_tracking.bridge_log_ratios`): averaging within a chain before
        the delta method across chains keeps the covariance honest about the sweeps' correlation.

        With ``hot_sweeps`` the whole ladder first runs that many sweeps (the levels below ``relax_from`` keep where they
        end, their bridge ratios pooled over the second half of them). The sweeps run in blocks of :data:`RELAX_BLOCK`,
        at least :data:`MIN_RELAX_SWEEPS` (the whole ladder's sweeps counted), until the bridges' total
        ``log Z_1 − log Z_{β_1}`` of a block rises by less than one standard error of the difference over the block
        before (the copy climbs out of where the training pushed the density down, so its drift is upward; only the blocks
        that check compute the pooled statistics: the same estimate, about a quarter less time), or
        ``relax_sweeps`` are spent; the number run is the epoch record's ``tracking_relax_sweeps``. Why relax: the
        replicas are the training's persistent negatives (module docstring). Why only the top: on the MNIST run of
        reports/tracking (2-core CPU) after its second and third epochs, the copy relaxed 80 sweeps over the whole ladder
        moved the bridges' total from the base to β = 0.66 by under 1.2 nats and that to β = 1 by 13–16 nats."""
        positions = self.objective.chains.unflatten(0, (len(ladder), -1))
        if self.relax_sweeps == 0:
            stats = self._statistics(path, positions)
            self._sweeps_run, self._settled = 0, True
            return positions.clone(), stats, self._bridge_ratios(path, positions, stats, ladder)
        low = self._top_index(ladder)
        kernel, target = model.gibbs_chain(keep_statistics=True)  # the exchanges read each sweep's vW + c
        hot_pooled = []
        if low and self.hot_sweeps:
            positions, hot_pooled, _ = self._hot_sweeps(path, kernel, target, ladder, positions, low)
        fixed_stats = self._statistics(path, positions[:low]) if low else []
        tempering = ParallelTempering(kernel, ladder[low:], swaps=self.objective.swaps)
        state = tempering.init_replicas(positions[low:].clone(), target, generator=self._generator)
        previous, self._sweeps_run, self._settled = None, self.hot_sweeps if low else 0, False
        while self._sweeps_run < self.relax_sweeps:
            pooled = []
            checked = self._sweeps_run + 2 * RELAX_BLOCK >= MIN_RELAX_SWEEPS
            for sweep in range(RELAX_BLOCK):
                state, _ = tempering.step(state, target, generator=self._generator)
                if checked and sweep >= RELAX_BLOCK - POOLED_SWEEPS:
                    stats = fixed_stats + self._statistics(path, state.replica_positions)
                    levels = torch.cat([positions[:low], state.replica_positions])
                    pooled.append(self._bridge_ratios(path, levels, stats, ladder))
            self._sweeps_run += RELAX_BLOCK
            if not checked:
                continue
            ratios = log_mean_exp(torch.stack(pooled), dim=0)
            if hot_pooled:
                ratios = torch.cat([log_mean_exp(torch.stack(hot_pooled), dim=0), ratios[2 * (low - 1):]])
            differences, noise = bridge_differences(ratios)
            total, variance = differences.sum().item(), noise.sum().item()
            settling = self._sweeps_run >= MIN_RELAX_SWEEPS and previous is not None
            if settling and total - previous[0] <= math.sqrt(max(variance + previous[1], 0.0)):
                self._settled = True
                break
            previous = (total, variance)
        return torch.cat([positions[:low], state.replica_positions]), stats, ratios

    def _anchor_run(self, path, beta: float) -> tuple[torch.Tensor, torch.Tensor]:
        """AIS from the uniform base to ``beta`` (Neal 2001): ``log Z_β − log Z_0`` ``[1]`` and its delta-method variance
        ``[1, 1]``; keeps the estimate and its ESS for the epoch's record."""
        betas = torch.linspace(0.0, beta, self.anchor_steps + 1, dtype=torch.float64)
        result = anneal(path, betas, path.sample_base(self.anchor_chains, generator=self._generator), generator=self._generator)
        summary = summarize_log_weights(result.log_weights.double())
        self._anchor = ((summary.log_mean + self._filter.log_z0).item(), summary.ess.item())
        return summary.log_mean.reshape(1), summary.stderr.square().reshape(1, 1)

    def _check_tempered_family(self, model, states: torch.Tensor, log_f: torch.Tensor, beta: float) -> None:
        """Refuse, in one line, a model whose PT replicas are not the uniform-base geometric path's levels: the path's
        ``log f_β − log f_0`` must equal the Gibbs target's ``log f_β − log f_0`` on the hottest replica's states."""
        target = model.gibbs_chain()[1]
        tempered = target.log_density(states, beta=beta) - target.log_density(states, beta=0.0)
        scale = 1.0 + tempered.abs().max().item()
        if not torch.allclose(tempered.double(), log_f, rtol=0.0, atol=1e-5 * scale):
            raise MissingCapability(f"ReplicaPartitionTracker needs PT's tempered family p_β ∝ exp(−βE) to be the {PATH_KIND} "
                                    f"path from the {BASE} base; {type(model).__name__}'s is not (use "
                                    "trainer.evaluate_every with an estimator instead)")

    # ---- checkpoint -------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The filter, the ladder it follows, the states and log densities kept for the next temporal estimate, the
        generator, the update count and the last anchor."""
        started = self._filter is not None and self._filter.started
        return {
            "ladder": list(self._ladder) if self._ladder is not None else None,
            "mean": self._filter.mean.cpu() if started else None,
            "covariance": self._filter.covariance.cpu() if started else None,
            "correction": self._filter.correction.cpu() if started else None,
            "kept_positions": None if self._kept_positions is None else self._kept_positions.cpu(),
            "kept_log_f": None if self._kept_log_f is None else self._kept_log_f.cpu(),
            "generator": self._generator.get_state(), "updates": self._updates, "anchor": self._anchor,
        }

    def _load(self, state: dict[str, Any], device: torch.device) -> None:
        self._generator.set_state(state["generator"])
        self._updates, self._anchor = int(state["updates"]), state["anchor"]
        if state["ladder"] is None:
            return
        self._ladder = tuple(state["ladder"])
        self._filter = LogPartitionFilter(self._log_z0)
        if state["mean"] is not None:
            self._filter.mean, self._filter.covariance = state["mean"].to(device), state["covariance"].to(device)
            self._filter.correction.copy_(state["correction"])
        if state["kept_positions"] is not None:
            self._kept_positions, self._kept_log_f = state["kept_positions"].to(device), state["kept_log_f"].to(device)

    def __repr__(self) -> str:
        return (f"ReplicaPartitionTracker(observe_every={self.observe_every}, relax_sweeps={self.relax_sweeps}, relax_from={self.relax_from}, "
                f"burn_in={self.burn_in}, anchor_steps={self.anchor_steps}, anchor_chains={self.anchor_chains}, hot_sweeps={self.hot_sweeps}, "
                f"across_epochs={self.across_epochs}, top_levels={self.top_levels!r}, smc_copies={self.smc_copies}, "
                f"smc_target_cess={self.smc_target_cess}, smc_sweeps={self.smc_sweeps}, "
                f"smc_chain_length={self.smc_chain_length})")


REPLICA_TRACKER_SETTINGS = ("observe_every", "relax_sweeps", "relax_from", "burn_in", "anchor_steps", "anchor_chains", "hot_sweeps",
                            "across_epochs", "top_levels", "smc_copies", "smc_target_cess", "smc_sweeps", "smc_chain_length")


def tempering_objective(objective) -> PT | None:
    """The :class:`~pfzoo.training.PT` objective inside ``objective`` (itself, or wrapped by centering or a natural
    gradient) whose replicas can be tracked; None for any other objective (a DBM's PT included: its replicas are the
    even/odd layers' chains, not a path's levels)."""
    while isinstance(objective, (Centered, NaturalGradient)):
        objective = objective.objective
    return objective if isinstance(objective, PT) and not isinstance(objective, DBMParallelTempering) else None


def partition_tracker(settings: bool | Mapping[str, Any] | None, objective) -> TrainingCallback | None:
    """The Trainer's ``track_partition`` for ``objective``: with a PT objective a :class:`ReplicaPartitionTracker` on its
    replicas (``settings`` True or a mapping of :data:`REPLICA_TRACKER_SETTINGS`), otherwise
    :func:`~pfzoo.training.partition_tracking.tracker_from_settings`'s own-ladder tracker; None/False: no tracking."""
    tempering = tempering_objective(objective)
    if tempering is None or settings is None or settings is False:
        return tracker_from_settings(settings)
    if settings is True:
        return ReplicaPartitionTracker(tempering)
    if not isinstance(settings, Mapping):
        raise ValueError(f"track_partition must be null, true or a mapping of ReplicaPartitionTracker settings "
                         f"({', '.join(REPLICA_TRACKER_SETTINGS)}), got {type(settings).__name__}")
    unknown = sorted(map(str, set(settings) - set(REPLICA_TRACKER_SETTINGS)))
    if unknown:
        raise ValueError(f"track_partition has unknown settings {', '.join(unknown)}: under PT training the tracker reads the "
                         f"trainer's replicas and takes {', '.join(REPLICA_TRACKER_SETTINGS)}")
    return ReplicaPartitionTracker(tempering, **settings)


def _copy_parameters(source: torch.nn.Module, target: torch.nn.Module) -> None:
    """``target``'s parameters and buffers ← ``source``'s (same architecture), in place."""
    for into, value in zip(target.parameters(), source.parameters()):
        into.copy_(value)
    for into, value in zip(target.buffers(), source.buffers()):
        into.copy_(value)
