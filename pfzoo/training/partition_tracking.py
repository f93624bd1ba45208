"""Tracking log Z during training (Desjardins, Courville & Bengio 2011, "On tracking the partition function").

Training changes the parameters by small steps θ_t → θ_{t+1}, so the log partition function changes by little between
updates and can be followed instead of re-estimated. The tracker keeps ``ζ_{t,k} = log Z_{β_k}(θ_t)`` at every level of a
ladder ``0 = β_0 < β_1 < … < β_K = 1`` of the model's geometric annealing path ``f_β = f_0^{1−β} f_θ^β`` from its tractable
base (``log Z_0`` exact and fixed), and combines two sources of information by a Kalman filter over ``ζ_t = (ζ_{t,1}, …,
ζ_{t,K})``:

* **temporal** (after every update): with samples ``x_{k,c} ~ p_{β_k, θ_t}`` (C persistent chains per
  level), importance sampling gives the change ``Δ_{t,k} = log (1/C) Σ_c f_{β_k,θ_{t+1}}(x_{k,c}) / f_{β_k,θ_t}(x_{k,c})``,
  an estimate of ``ζ_{t+1,k} − ζ_{t,k}``: the filter's prediction ``ζ_{t+1} = ζ_t + Δ_t + w_t`` with ``w_t`` of the
  delta-method covariance ``Q_t`` of the ``Δ_t``;
* **spatial** (every ``anchor_every`` updates): bridge sampling (Meng & Wong 1996, the geometric bridge) between
  neighbouring levels at the current parameters,
  ``y_k = log (1/C) Σ_c (f_{β_{k+1}}/f_{β_k})^{½}(x_{k,c}) − log (1/C) Σ_c (f_{β_k}/f_{β_{k+1}})^{½}(x_{k+1,c})``, an
  estimate of ``ζ_k+1 − ζ_k`` (with ``ζ_0 = log Z_0`` exact): the filter's observation ``y = H ζ + v`` with ``H`` the
  difference matrix and ``v`` of the delta-method covariance ``R``.

The samples come from the tracker's own parallel tempering over the ladder (so it works whatever the objective is): level
0 is redrawn exactly from the base at every sweep, and the levels above it take one step of
:class:`~pfzoo.kernels.ParallelTempering` around the path's kernel (:class:`~pfzoo.paths.tempered.TemperedPathTarget`):
one kernel step of every level at its β, then one round of exchanges between neighbours (even pairs and odd pairs in
turn) that moves states up and down the ladder. Chains of the same index are coupled through the exchanges and chains of
different indices are independent, so every covariance is the delta method over the C chain indices, levels jointly.

The filter: predict ``m ← m + Δ``, ``P ← P + Q``; observe ``S = H P Hᵀ + R``, ``G = P Hᵀ S⁻¹``, ``m ← m + G (y − H m)``,
``P ← (I − G H) P (I − G H)ᵀ + G R Gᵀ`` (Joseph's form); it starts from the first observation alone
(``m = H⁻¹ y``, ``P = H⁻¹ R H⁻ᵀ``). The tracked ``log Ẑ`` is ``m_K`` with stderr ``√P_KK``, and each epoch logs
``{train,<held>}_tracked_log_likelihood = mean_n log f(v_n) − log Ẑ``.

What the stderr leaves out. The filter takes every ``Δ_t`` and every ``y`` as independent, while the chains are Markov
chains, so consecutive estimates share samples; ``log`` of a mean is biased by about ``−Var/2`` per estimate; and, the
largest in practice, the chains *lag*: after a sweep at θ_t they are still partly distributed as at earlier parameters,
and training moves θ away from where model samples sit (a PCD update lowers ``f`` at its negatives), so both estimates
come out low, the importance-sampling changes most. The epoch's ``log_z_tracking_correction`` (the sum of the
observations' corrections to ``log Ẑ``) shows it: a correction of one sign, epoch after epoch, larger than
``log_z_tracked_stderr``, means the chains lag the training — raise ``sweeps``. Measured on the default 64 × 20 digits RBM
under PCD-1 (SGD 0.05, momentum 0.5, 1,500 updates; exact log Z by enumeration at every epoch): with ``sweeps=1`` the
tracked log Z falls up to 1.5 nats low once the model sharpens (corrections ≈ +1.2 nats per epoch), with ``sweeps=5``
about 0.4 nats, with ``sweeps=20`` it stays within 0.16 nats and 2.8 of its stderr at every epoch; at learning rate 0.01
``sweeps=1`` stays within 0.03 nats.

At MNIST scale the ladder is the limit. On the zoo's 784 × 500 PCD(500) RBM, held fixed (one thread): 10 levels × 50
chains cost 62 ms per update against 9 ms for a PCD-1 update, their least exchange acceptance is 0.001, and after 100
updates the tracked log Z is 520.4 ± 0.09 where AIS (K = 10⁴) gives 516.3 ± 0.35: the bridges between levels that
barely overlap are biased and their stderr does not show it (the exchange acceptance does). Such a model needs far
more levels than a per-update budget allows; track it with an estimator at checkpoints (``trainer.evaluate_every``)
instead, or watch ``tracking_swap_acceptance_min``.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

import torch

from pfzoo.kernels import ParallelTempering, check_ladder
from pfzoo.models.capabilities import Capability, MissingCapability, describe
from pfzoo.paths import build_from_base, is_annealable, make_base, path_kinds
from pfzoo.paths.tempered import TemperedPathTarget
from pfzoo.training.callbacks import TrainingCallback
from pfzoo.validation import allocating, check_positive_int

PATH_KIND = "geometric"

LAG_EPOCHS = 3
"""Epochs in a row whose corrections to log Ẑ share a sign and exceed 3 stderr (and :data:`LAG_FLOOR`) before the
tracker warns that it lags."""

LAG_FLOOR = 0.1
"""Nats per epoch below which a correction is not worth a warning, whatever the stderr (small early in training)."""

MIN_SWAP_ACCEPTANCE = 0.1
"""Least mean exchange acceptance between neighbouring levels over an epoch below which the tracker warns that its ladder
is too coarse: neighbours that rarely exchange barely overlap, and the bridge between them is biased beyond its stderr
(module docstring; the digits RBM's default ladder accepts 0.9, the MNIST one's at most 0.09)."""

logger = logging.getLogger(__name__)


def log_mean_and_covariance(log_ratios: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``log (1/C) Σ_c exp(a_{j,c})`` for every row of ``log_ratios [J, C]`` (float64) and the delta-method covariance
    of those J estimates, ``Cov_jl ≈ Ĉov_c(ã_j, ã_l) / (C · mean ã_j · mean ã_l)`` with ``ã = exp(a − max_c a)``: the
    columns (chain indices) independent, the rows of one column possibly dependent → ``([J], [J, J])``."""
    num_chains = log_ratios.shape[1]
    shift = log_ratios.amax(1, keepdim=True)
    scaled = torch.exp(log_ratios - shift)
    mean = scaled.mean(1)
    centred = (scaled - mean[:, None]) / mean[:, None]
    covariance = centred @ centred.T / ((num_chains - 1) * num_chains)
    return torch.log(mean) + shift[:, 0], covariance


def bridge_log_ratios(path, stats: Sequence[Any], betas: Sequence[float]) -> torch.Tensor:
    """The geometric bridge's log ratios between neighbouring levels of ``betas`` (K + 1 of them), from each level's path
    statistics ``stats`` of C chains: ``½[log f_{β_{k+1}} − log f_{β_k}]`` at level k's states and
    ``½[log f_{β_k} − log f_{β_{k+1}}]`` at level k+1's, for each pair k in turn → ``[2K, C]`` float64."""
    rows = []
    for low in range(len(betas) - 1):
        rows.append(0.5 * path.log_weight_increment(stats[low], betas[low], betas[low + 1]))
        rows.append(0.5 * path.log_weight_increment(stats[low + 1], betas[low + 1], betas[low]))
    return torch.stack(rows)


def bridge_differences(log_ratios: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Bridge-sampling estimates of ``ζ_{k+1} − ζ_k`` ``[K]`` from :func:`bridge_log_ratios`'s ``[2K, C]`` (the forward
    pair's log mean minus the backward one's) and their joint delta-method covariance ``[K, K]`` over the chain indices."""
    log_means, covariance = log_mean_and_covariance(log_ratios)  # [2K], [2K, 2K]: (forward, backward) per pair
    size = log_ratios.shape[0] // 2
    combine = torch.zeros(size, 2 * size, dtype=torch.float64, device=log_means.device)
    pairs = torch.arange(size, device=log_means.device)
    combine[pairs, 2 * pairs], combine[pairs, 2 * pairs + 1] = 1.0, -1.0
    return combine @ log_means, combine @ covariance @ combine.T


def tracked_record(model, splits: Mapping[str, torch.Tensor], log_z: float, stderr: float, correction: float) -> dict[str, float]:
    """The numbers every tracker logs per epoch: ``log_z_tracked`` and its stderr, ``{split}_tracked_log_likelihood``
    (mean ``log f(v) = −F(v)`` of each split's rows ``[N, V]`` minus ``log_z``) with that stderr, and
    ``log_z_tracking_correction``, the epoch's sum of the observations' corrections to ``log Ẑ``."""
    record = {"log_z_tracked": log_z, "log_z_tracked_stderr": stderr}
    for split, rows in splits.items():
        record[f"{split}_tracked_log_likelihood"] = -model.free_energy(rows).double().mean().item() - log_z
        record[f"{split}_tracked_log_likelihood_stderr"] = stderr
    record["log_z_tracking_correction"] = correction
    return record


class LagMonitor:
    """Warns when a tracker's observations keep correcting its prediction one way: :data:`LAG_EPOCHS` epochs in a row
    whose corrections share a sign and exceed 3 stderr and :data:`LAG_FLOOR` (a diagnostic, not resumed)."""

    def __init__(self, advice: str) -> None:
        self.advice = advice
        self.epochs = 0
        self.last_sign = 0

    def observe(self, correction: float, stderr: float) -> None:
        sign = (correction > 0) - (correction < 0)
        beyond = abs(correction) > max(3 * stderr, LAG_FLOOR)
        self.epochs = self.epochs + 1 if beyond and sign == self.last_sign else int(beyond)
        self.last_sign = sign
        if self.epochs >= LAG_EPOCHS:
            logger.warning("the tracked log Z lags the training: %d epochs in a row its observations moved it by %+.3g nats "
                           "(this epoch), beyond 3 of its stderr %.3g and %g nats, so the tracked log-likelihoods are "
                           "biased; %s", self.epochs, correction, stderr, LAG_FLOOR, self.advice)


class LogPartitionFilter:
    """The Kalman filter over ``ζ = (log Z_{β_1}, …, log Z_{β_K})`` (module docstring): ``mean [K]`` and ``covariance
    [K, K]`` (float64), with ``log Z_0`` known exactly; observations are the K differences of neighbouring levels."""

    def __init__(self, log_z0: torch.Tensor, mean: torch.Tensor | None = None, covariance: torch.Tensor | None = None) -> None:
        self.log_z0 = log_z0
        self.mean = mean
        self.covariance = covariance
        self.correction = torch.zeros((), dtype=torch.float64, device=log_z0.device)
        """The sum of the observations' corrections to ``log Z_{β_K}`` since it was last reset (``(G ν)_K`` each)."""

    @property
    def started(self) -> bool:
        return self.mean is not None

    def predict(self, change: torch.Tensor, noise: torch.Tensor) -> None:
        """``ζ ← ζ + change [K]``, its covariance grown by ``noise [K, K]`` (the importance-sampling estimate's)."""
        self.mean = self.mean + change
        self.covariance = self.covariance + noise

    def observe(self, differences: torch.Tensor, noise: torch.Tensor, rows: Sequence[int] | None = None) -> None:
        """Fold in ``differences [J]``, estimates of ``ζ_k − ζ_{k−1}`` (``ζ_0 = log Z_0``) for all K differences or for
        those numbered ``rows`` (0-based, J of them; 0 is ``ζ_1 − log Z_0``), of covariance ``noise [J, J]``. The first
        observation must hold all K and sets the state alone."""
        observed = differences.clone()
        rows = list(range(differences.shape[0])) if rows is None else list(rows)
        if rows and rows[0] == 0:
            observed[0] += self.log_z0
        if not self.started:  # ζ = H⁻¹ y: cumulative sums; H⁻¹ is the lower triangle of ones
            if rows != list(range(len(rows))):
                raise ValueError(f"the first observation must hold every difference from the base, got rows {rows}")
            size = differences.shape[0]
            lower = torch.ones(size, size, dtype=differences.dtype, device=differences.device).tril()
            self.mean = observed.cumsum(0)
            self.covariance = lower @ noise @ lower.T
            return
        size = self.mean.shape[0]
        step = torch.eye(size, dtype=differences.dtype, device=differences.device) - torch.diag(differences.new_ones(size - 1), -1)
        step = step[rows]
        innovation = observed - step @ self.mean
        innovation_covariance = step @ self.covariance @ step.T + noise
        # the pseudo-inverse keeps a degenerate case finite: a model equal to its base has zero-variance estimates
        gain = self.covariance @ step.T @ torch.linalg.pinv(innovation_covariance, hermitian=True)
        keep = torch.eye(size, dtype=differences.dtype, device=differences.device) - gain @ step
        update = gain @ innovation
        self.mean = self.mean + update
        self.correction += update[-1]
        self.covariance = keep @ self.covariance @ keep.T + gain @ noise @ gain.T


class PartitionTracker(TrainingCallback):
    """Follows ``log Z`` of the model a :class:`~pfzoo.training.Trainer` trains, update by update, and logs it and the
    train and test log-likelihoods every epoch (module docstring; Desjardins, Courville & Bengio 2011).

    Works with every model whose family has a geometric annealing path from an exact base (:mod:`pfzoo.paths`) and whose
    free energy is exact: RBMs, Gaussian–Bernoulli RBMs, Ising models and Hopfield networks, small DBMs, the continuous
    families with a path. It refuses other models in one line. Its sampling runs on its own generator, so the training is
    the same with or without it; its chains, filter and generator are checkpointed (:meth:`state_dict`).

    Per epoch it logs ``log_z_tracked``, ``log_z_tracked_stderr``, ``{train,<held>}_tracked_log_likelihood`` (mean
    ``log f(v) = −F(v)`` of the Trainer's diagnostic rows minus ``log_z_tracked``) with their ``…_stderr`` (that of
    ``log Ẑ``: the data rows' own sampling error is not included), ``log_z_tracking_correction`` (the epoch's sum of the
    observations' corrections to ``log Ẑ``: consistently of one sign and above the stderr, the chains lag the training and
    need more ``sweeps``; module docstring) and ``tracking_swap_acceptance_min``, the least mean exchange acceptance
    between neighbouring levels over the epoch (small values: the ladder needs more levels).

    Cost per update, for C chains per level and K levels: one kernel step of each level at the new parameters, the
    statistics of the K·C states under them (for an RBM one ``[K·C, V] × [V, H]`` product) and once more for the exchanges,
    and float64 work of order K²·C (plus K³ for the filter); the Trainer logs the time spent as ``callback_seconds``.

    Args:
        num_chains: C ≥ 2, persistent chains per level.
        num_temperatures: K, when ``betas`` is not given: the ladder ``β_k = k / K``, k = 0 … K.
        betas: the levels above the base, strictly increasing in (0, 1] and ending at 1 (β_0 = 0 is added).
        sweeps: parallel-tempering sweeps per update (each: a kernel step of every level, then one round of exchanges);
            more sweeps keep the chains closer to the current parameters (less lag, module docstring), at a cost linear in it.
        anchor_every: updates between bridge-sampling observations.
        burn_in: sweeps at the starting parameters, from base draws, before the first observation.
        base: the path's base (``"auto"``: the family's data base, fitted to the training set, e.g. an RBM's base rates).
    """

    def __init__(self, num_chains: int = 50, num_temperatures: int = 10, betas: Sequence[float] | None = None, sweeps: int = 1,
                 anchor_every: int = 1, burn_in: int = 100, base: str = "auto") -> None:
        self.num_chains = check_positive_int(num_chains, "num_chains")
        if self.num_chains < 2:
            raise ValueError(f"num_chains must be at least 2 (a variance needs two chains), got {num_chains}")
        if betas is None:
            size = check_positive_int(num_temperatures, "num_temperatures")
            betas = [k / size for k in range(1, size + 1)]
        levels = (1.0,) if list(betas) == [1.0] else check_ladder(betas)  # one level: the bridge from the base to the model
        self.betas = (0.0, *levels)
        self.sweeps = check_positive_int(sweeps, "sweeps")
        self.anchor_every = check_positive_int(anchor_every, "anchor_every")
        if isinstance(burn_in, bool) or not isinstance(burn_in, int) or burn_in < 0:
            raise ValueError(f"burn_in must be a non-negative integer, got {burn_in!r}")
        self.burn_in = burn_in
        if not isinstance(base, str):
            raise ValueError(f"base must be a string ('auto' or a base the model's family offers), got {type(base).__name__}")
        self.base = base
        self._path = None
        self._lag = LagMonitor("raise track_partition.sweeps")

    @property
    def num_levels(self) -> int:
        """K + 1, the base's level included."""
        return len(self.betas)

    def check(self, model) -> None:
        offered = model.capabilities
        if Capability.EXACT_FREE_ENERGY in offered and is_annealable(model) and PATH_KIND in path_kinds(model):
            return
        raise MissingCapability(
            f"PartitionTracker needs {Capability.EXACT_FREE_ENERGY.value} and a {PATH_KIND} annealing path from an exact base; "
            f"{type(model).__name__} {describe(model)} and lacks "
            f"{'an exact free energy' if Capability.EXACT_FREE_ENERGY not in offered else 'such a path'}"
            " — use trainer.evaluate_every with an estimator that applies instead"
        )

    # ---- the run ----------------------------------------------------------------------------------

    @torch.no_grad()
    def start(self, model, train: torch.Tensor, *, seed: int, state: dict[str, Any] | None = None) -> None:
        """Fit the base to ``train [N, V]`` and build the path at ``model``'s parameters; then either resume ``state``
        (chains, filter, generator) or draw every level from the base, run ``burn_in`` sweeps and observe once."""
        self.check(model)
        self._base, _ = make_base(model, base=self.base, data=train, by="PartitionTracker")
        self._path = build_from_base(model, self._base, kind=PATH_KIND, by="PartitionTracker")
        self._generator = torch.Generator(model.device).manual_seed(seed)
        self._filter = LogPartitionFilter(self._path.base_log_partition().to(model.device))
        ladder = self.betas[1:]
        self._tempering = ParallelTempering(self._path.kernel, ladder) if len(ladder) > 1 else None
        self._accept_sum = torch.zeros(len(ladder), dtype=torch.float64, device=model.device)
        self._accept_count = torch.zeros_like(self._accept_sum)
        self._updates = 0
        if state is not None:
            self._load(state, model.device)
            return
        with allocating("num_chains", self.num_chains):
            self._base_state = self._path.sample_base(self.num_chains, generator=self._generator)
            positions = torch.stack([self._path.draw_base(self.num_chains, generator=self._generator) for _ in ladder])
            self._chains = self._init_chains(positions, swap_round=0, generator=self._generator)
        for _ in range(self.burn_in):
            self._sweep()
        self._observe()
        self._reset_epoch_sums()

    @torch.no_grad()
    def on_step(self, model) -> None:
        """Predict the change of every level's log Z over the update (importance sampling on the chains, drawn at the old
        parameters), advance the chains ``sweeps`` sweeps at the new ones and observe every ``anchor_every`` updates."""
        old_path, old_levels = self._path, self._levels()
        self._path = build_from_base(model, self._base, kind=PATH_KIND, by="PartitionTracker")
        # level 0 is redrawn from the base at the next sweep; the others get their statistics at the new parameters
        positions = torch.stack([level.position for level in old_levels[1:]])
        self._chains = self._init_chains(positions, swap_round=self._swap_round(), generator=self._generator)
        # log f_{β,θ_{t+1}}(x) − log f_{β,θ_t}(x) = [log f_β − log f_0](x) at θ_{t+1} minus the same at θ_t: the base is shared
        log_ratios = torch.stack([
            self._path.log_weight_increment(self._path.statistics(new), 0.0, beta)
            - old_path.log_weight_increment(old_path.statistics(old), 0.0, beta)
            for new, old, beta in zip(self._levels()[1:], old_levels[1:], self.betas[1:])
        ])  # [K, C]
        change, noise = log_mean_and_covariance(log_ratios)
        self._filter.predict(change, noise)
        for _ in range(self.sweeps):
            self._sweep()
        self._updates += 1
        if self._updates % self.anchor_every == 0:
            self._observe()

    @torch.no_grad()
    def on_epoch_end(self, model, epoch: int, splits: Mapping[str, torch.Tensor]) -> dict[str, float]:
        log_z, stderr = self.log_partition()
        correction = self._filter.correction.item()
        record = tracked_record(model, splits, log_z, stderr, correction)
        self._lag.observe(correction, stderr)
        if self._accept_count.gt(0).all():
            acceptance = (self._accept_sum / self._accept_count).min().item()
            record["tracking_swap_acceptance_min"] = acceptance
            if acceptance < MIN_SWAP_ACCEPTANCE:
                logger.warning("the tracked log Z may be off by more than its stderr: its ladder is too coarse (least exchange "
                               "acceptance %.3g between neighbouring levels this epoch, below %g); raise "
                               "track_partition.num_temperatures or estimate log Z at checkpoints instead",
                               acceptance, MIN_SWAP_ACCEPTANCE)
        self._reset_epoch_sums()
        return record

    def _reset_epoch_sums(self) -> None:
        self._accept_sum.zero_()
        self._accept_count.zero_()
        self._filter.correction.zero_()

    def log_partition(self) -> tuple[float, float]:
        """The tracked ``(log Ẑ, stderr)`` of the model at its last update."""
        if self._path is None:
            raise ValueError("the tracker has not started: the Trainer starts it at the beginning of fit")
        return self._filter.mean[-1].item(), self._filter.covariance[-1, -1].clamp(min=0).sqrt().item()

    # ---- sampling and observation -----------------------------------------------------------------

    def _sweep(self) -> None:
        """Level 0 redrawn from the base; the levels above it one step of :class:`~pfzoo.kernels.ParallelTempering` over
        their ladder (each level one kernel step at its β, then one round of exchanges between neighbours), or one kernel
        step when there is one level. The base's draws are fresh at every sweep, so level 1 exchanges with none of them;
        the acceptance such an exchange would have, ``min(1, f_{β_1}(x_0) f_0(x_1) / (f_0(x_0) f_{β_1}(x_1)))``, is
        recorded beside the ladder's as the overlap of the first pair."""
        path, generator = self._path, self._generator
        self._base_state = path.sample_base(self.num_chains, generator=generator)
        if self._tempering is None:
            self._chains, _ = path.transition(self._chains, 1.0, generator=generator)
            first = self._chains
        else:
            self._chains, info = self._tempering.step(self._chains, self._target, generator=generator)
            self._accept_sum[1:] += torch.where(info.attempted, info.swap_accept_prob.mean(-1), 0.0)
            self._accept_count[1:] += info.attempted
            first = self._chains.replica(0)
        log_ratio = (path.log_weight_increment(path.statistics(self._base_state), 0.0, self.betas[1])
                     - path.log_weight_increment(path.statistics(first), 0.0, self.betas[1]))
        self._accept_sum[0] += torch.exp(log_ratio.clamp(max=0.0)).mean()
        self._accept_count[0] += 1

    def _init_chains(self, positions: torch.Tensor, *, swap_round: int, generator: torch.Generator) -> Any:
        """The levels above the base at ``positions [K, C, D]`` (β ascending) as the ladder's kernel state, with their
        statistics at the current parameters."""
        if self._tempering is None:
            return self._path.init(positions[0], generator=generator)
        self._target = TemperedPathTarget(self._path, self.betas[1:])
        return self._tempering.init_replicas(positions, self._target, swap_round=swap_round, generator=generator)

    def _levels(self) -> list[Any]:
        """Every level's chains as a kernel state of the path, β ascending from the base."""
        if self._tempering is None:
            return [self._base_state, self._chains]
        return [self._base_state, *(self._chains.replica(index) for index in range(len(self.betas) - 1))]

    def _swap_round(self) -> int:
        return 0 if self._tempering is None else self._chains.swap_round

    def _observe(self) -> None:
        """Bridge-sampling estimates of ``ζ_{k+1} − ζ_k`` for every neighbouring pair, folded into the filter: for pair k
        the log ratios ``½[log f_{β_{k+1}} − log f_{β_k}]`` at level k's states and ``½[log f_{β_k} − log f_{β_{k+1}}]`` at
        level k+1's, their log means and joint covariance over the chain indices, then their difference."""
        path = self._path
        stats = [path.statistics(level) for level in self._levels()]
        self._filter.observe(*bridge_differences(bridge_log_ratios(path, stats, self.betas)))

    # ---- checkpoint -------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The chains' positions ``[K + 1, C, D]``, the filter's mean and covariance, the generator, the update count and
        the exchange round, the epoch's acceptance sums, and the ladder (checked on resume)."""
        return {
            "betas": list(self.betas),
            "positions": torch.stack([level.position for level in self._levels()]).cpu(),
            "mean": self._filter.mean.cpu(), "covariance": self._filter.covariance.cpu(),
            "generator": self._generator.get_state(),
            "updates": self._updates, "swap_round": self._swap_round(),
            "accept_sum": self._accept_sum.cpu(), "accept_count": self._accept_count.cpu(),
            "correction": self._filter.correction.cpu(),
        }

    def _load(self, state: dict[str, Any], device: torch.device) -> None:
        """Continue from :meth:`state_dict`'s ``state``; refuses one of another ladder or number of chains. The chains'
        statistics are recomputed at the current parameters (what the run had cached); a throwaway generator serves a
        kernel whose state draws auxiliary variables (HMC momenta): the next update draws them afresh anyway."""
        positions = state["positions"]
        if list(state["betas"]) != list(self.betas) or positions.shape[:2] != (self.num_levels, self.num_chains):
            raise ValueError(f"the checkpoint's tracker state has betas {state['betas']} and {positions.shape[1]} chains per level; "
                             f"this tracker has betas {list(self.betas)} and {self.num_chains} (resume with the same settings)")
        throwaway = torch.Generator(device).manual_seed(0)
        positions = positions.to(device)
        self._base_state = self._path.init(positions[0], generator=throwaway)
        self._chains = self._init_chains(positions[1:], swap_round=int(state["swap_round"]), generator=throwaway)
        self._filter.mean, self._filter.covariance = state["mean"].to(device), state["covariance"].to(device)
        self._generator.set_state(state["generator"])
        self._updates = int(state["updates"])
        self._accept_sum.copy_(state["accept_sum"])
        self._accept_count.copy_(state["accept_count"])
        self._filter.correction.copy_(state["correction"])

    def __repr__(self) -> str:
        ladder = ", ".join(f"{beta:.3g}" for beta in self.betas)
        return (f"PartitionTracker(num_chains={self.num_chains}, betas=[{ladder}], sweeps={self.sweeps}, "
                f"anchor_every={self.anchor_every}, burn_in={self.burn_in}, base={self.base!r})")


TRACKER_SETTINGS = ("num_chains", "num_temperatures", "betas", "sweeps", "anchor_every", "burn_in", "base")


def tracker_from_settings(settings: bool | Mapping[str, Any] | None) -> PartitionTracker | None:
    """The Trainer's ``track_partition``: ``None`` or ``False`` (no tracking), ``True`` (a :class:`PartitionTracker` with
    its defaults) or a mapping of its keyword settings (e.g. ``{num_chains: 100, anchor_every: 10}``)."""
    if settings is None or settings is False:
        return None
    if settings is True:
        return PartitionTracker()
    if not isinstance(settings, Mapping):
        raise ValueError(f"track_partition must be null, true or a mapping of PartitionTracker settings ({', '.join(TRACKER_SETTINGS)}), "
                         f"got {type(settings).__name__}")
    unknown = sorted(map(str, set(settings) - set(TRACKER_SETTINGS)))
    if unknown:
        raise ValueError(f"track_partition has unknown settings {', '.join(unknown)}: expected {', '.join(TRACKER_SETTINGS)}")
    return PartitionTracker(**{key: (list(value) if key == "betas" and value is not None else value) for key, value in settings.items()})
