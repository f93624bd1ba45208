"""Annealing schedules: increasing sequences ``0 = β_0 < β_1 ≤ … ≤ β_K = 1``."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch

from pfzoo.paths.base import AnnealingPath
from pfzoo.validation import check_finite_number, check_positive_int


class Schedule(ABC):
    """Maps a number of intermediate distributions ``K`` to ``K + 1`` inverse temperatures."""

    @abstractmethod
    def betas(self, num_steps: int) -> torch.Tensor:
        """float64 ``[num_steps + 1]``, from exactly 0 to exactly 1, non-decreasing."""


class LinearSchedule(Schedule):
    """``β_k = k / K``."""

    def betas(self, num_steps: int) -> torch.Tensor:
        return torch.linspace(0.0, 1.0, num_steps + 1, dtype=torch.float64)


class SigmoidSchedule(Schedule):
    """Wu et al. (2017): ``β̃_k = σ(δ (2k/K - 1))``, rescaled to ``β_k = (β̃_k - β̃_0) / (β̃_K - β̃_0)``.

    Spends more distributions near both ends of the path; ``scale`` is δ (larger: more extreme).
    """

    def __init__(self, scale: float = 4.0) -> None:
        scale = check_finite_number(scale, "scale", minimum=0.0, exclusive=True)
        self.scale = float(scale)

    def betas(self, num_steps: int) -> torch.Tensor:
        raw = torch.sigmoid(self.scale * torch.linspace(-1.0, 1.0, num_steps + 1, dtype=torch.float64))
        betas = (raw - raw[0]) / (raw[-1] - raw[0])
        betas[0], betas[-1] = 0.0, 1.0
        return betas


class PowerSchedule(Schedule):
    """``β_k = 1 − (1 − k/K)^p``: denser towards β = 1 as the power p grows (p = 1 is linear).

    Step k's width is ``≈ p (1 − k/K)^{p−1} / K``: the last steps run many transitions at nearly the
    target's temperature, where the modes of a sharply trained model separate. On the zoo's CD-1 MNIST
    RBM with 20 hidden units, p = 5 at K = 10⁴ cuts RAISE's excess over the exact log-likelihood from
    3.8 to 1.4 nats (300 test digits) and shrinks the AIS–RAISE gap of the 500-unit PCD RBM on the test
    set from 1.9 to 0.4 (``estimators/raise/table.md``). A model whose hard part lies near the base gets too few steps there.
    """

    def __init__(self, power: float = 3.0) -> None:
        power = check_finite_number(power, "power")
        if not 1.0 <= power < math.inf:
            raise ValueError(f"power must be a finite number of at least 1, got {power}")
        self.power = float(power)

    def betas(self, num_steps: int) -> torch.Tensor:
        remaining = torch.linspace(1.0, 0.0, num_steps + 1, dtype=torch.float64)
        betas = 1.0 - remaining**self.power
        betas[0], betas[-1] = 0.0, 1.0
        return betas


class GeometricSchedule(Schedule):
    """``β_0 = 0`` and ``β_k = start^{(K−k)/(K−1)}`` for k = 1..K: log-spaced from ``start`` to 1.

    Spends most distributions at small β, where a base far from the target changes fastest
    (Neal 2001's choice for AIS; HAIS uses it too).
    """

    def __init__(self, start: float = 1e-3) -> None:
        start = check_finite_number(start, "start")
        if not 0.0 < start < 1.0:
            raise ValueError(f"start must lie in (0, 1), got {start}")
        self.start = float(start)

    def betas(self, num_steps: int) -> torch.Tensor:
        if num_steps == 1:
            return torch.tensor([0.0, 1.0], dtype=torch.float64)
        betas = torch.cat([torch.zeros(1, dtype=torch.float64), torch.logspace(math.log10(self.start), 0.0, num_steps, dtype=torch.float64)])
        betas[-1] = 1.0
        return betas


class OptimalSchedule(Schedule):
    """The optimal piecewise-linear allocation of Grosse, Maddison & Salakhutdinov (2013, §3).

    Over a partition ``0 = b_0 < b_1 < … < b_J = 1`` of the path with symmetric divergences
    ``J_j = KL(p_{b_j}‖p_{b_{j+1}}) + KL(p_{b_{j+1}}‖p_{b_j}) = (η_{j+1} − η_j)ᵀ(s_{j+1} − s_j)``
    between neighbouring knots (η natural parameters, s expected sufficient statistics), segment j
    gets ``K_j ∝ √J_j`` of the K steps, spaced linearly inside it. With perfect transitions the
    bias of log Ẑ is ``≈ Σ_j J_j / (2 K_j)``, which this allocation minimises for a given K.

    The β's are placed at equal steps of the cumulative length ``ℓ(b_j) = Σ_{i<j} √J_i``,
    interpolated linearly inside segments (constant speed along the path's Fisher–Rao length),
    so K need not be a multiple of, or larger than, J; segments with zero divergence are stepped
    over. Divergences come exactly from
    a path that offers them (``OptimalSchedule.for_path`` with a Gaussian path) or estimated from a
    pilot run's diagnostics (``OptimalSchedule.from_diagnostics``).

    Args:
        knots: float64 ``[J + 1]``, strictly increasing from 0 to 1.
        divergences: ``[J]`` symmetric divergences of the segments, ≥ 0 (negative estimates are clamped to 0).
    """

    def __init__(self, knots: Sequence[float] | torch.Tensor, divergences: Sequence[float] | torch.Tensor) -> None:
        knots = torch.as_tensor(knots, dtype=torch.float64).flatten().cpu()
        divergences = torch.as_tensor(divergences, dtype=torch.float64).flatten().cpu()
        if knots.numel() < 2 or knots[0] != 0.0 or knots[-1] != 1.0 or (knots.diff() <= 0).any():
            raise ValueError("knots must increase strictly from 0 to 1")
        if divergences.numel() != knots.numel() - 1:
            raise ValueError(f"divergences must have one entry per segment ({knots.numel() - 1}), got {divergences.numel()}")
        if not torch.isfinite(divergences).all():
            raise ValueError("divergences must be finite")
        self.knots = knots
        self.divergences = divergences.clamp(min=0.0)

    @classmethod
    def for_path(cls, path, knots: Sequence[float] | torch.Tensor | int = 100) -> "OptimalSchedule":
        """From a path's exact ``symmetric_divergences(knots)``; ``knots`` an int J means J equal segments of β."""
        if isinstance(knots, int):
            knots = torch.linspace(0.0, 1.0, knots + 1, dtype=torch.float64)
        knots = torch.as_tensor(knots, dtype=torch.float64).flatten().cpu()
        divergences = path.symmetric_divergences(knots) if isinstance(path, AnnealingPath) else None
        if divergences is None:
            raise ValueError(f"{type(path).__name__} has no exact symmetric_divergences; use OptimalSchedule.from_diagnostics with a pilot run")
        return cls(knots, divergences)

    @classmethod
    def from_diagnostics(cls, diagnostics) -> "OptimalSchedule":
        """From a pilot run's :class:`~pfzoo.estimators.annealing.AnnealingDiagnostics` (its ``betas`` and
        per-step ``symmetric_kl`` estimates), e.g. ``AIS(..., diagnostics=True)``'s ``info["diagnostics"]``."""
        betas = torch.as_tensor(diagnostics.betas, dtype=torch.float64).cpu()
        knots = torch.cat([torch.zeros(1, dtype=torch.float64), betas])
        keep = torch.cat([torch.ones(1, dtype=torch.bool), knots.diff() > 0])
        divergences = torch.as_tensor(diagnostics.symmetric_kl, dtype=torch.float64).cpu()[keep[1:]]
        return cls(knots[keep], divergences)

    def betas(self, num_steps: int) -> torch.Tensor:
        lengths = self.divergences.sqrt()
        if lengths.sum() == 0:
            lengths = self.knots.diff()  # no divergence anywhere: linear in β
        cumulative = torch.cat([torch.zeros(1, dtype=torch.float64), lengths.cumsum(0)])
        targets = torch.linspace(0.0, 1.0, num_steps + 1, dtype=torch.float64) * cumulative[-1]
        # the segment each target falls in: the last knot at or below it (zero-length segments are skipped)
        segment = (torch.searchsorted(cumulative, targets, right=True) - 1).clamp(0, lengths.numel() - 1)
        fraction = ((targets - cumulative[segment]) / lengths[segment].clamp(min=torch.finfo(torch.float64).tiny)).clamp(0.0, 1.0)
        betas = self.knots[segment] + fraction * self.knots.diff()[segment]
        betas[0], betas[-1] = 0.0, 1.0
        return betas


ENERGY_SCALE_SAMPLES = 100
"""Base samples from which :meth:`EnergyScaleSchedule.fitted_to` measures a path's energy scale σ_0."""


class EnergyScaleSchedule(Schedule):
    """Steps spaced by the thermodynamic length of a path whose log density ratio varies by σ_0 nats under the base.

    Step k of a geometric path costs the divergence ``J_k ≈ (β_k − β_{k−1})² σ(β)²`` with
    ``σ(β) = sd_{p_β}[log f_1 − log f_0]`` (:class:`~pfzoo.estimators.annealing.AnnealingDiagnostics`), so steps of
    equal length ``Δβ · σ(β)`` share the divergence evenly (Grosse, Maddison & Salakhutdinov 2013, §3). σ is known
    where the path starts: ``σ(0) = σ_0``, measured under the base. It stays near σ_0 while ``β σ_0 ≲ 1`` (p_β is
    still the base, tilted by a nat or so), and beyond ``β* = 1 / σ_0`` a system that has settled into its low energy
    states fluctuates by about a nat of ``β (log f_1 − log f_0)``: ``σ(β) ≈ 1/β``. The length is then

        ℓ(β) = β σ_0  for β ≤ β*,    ℓ(β) = 1 + log(β / β*)  beyond,

    linear up to β* and logarithmic to 1. On an RBM whose weights are N(0, s²) the whole change from the base to the
    target happens at β ≈ 1/s, which a linear schedule crosses in a few steps (s = 5000: in one of K = 1000 steps,
    30 stderr below the exact log Z); equal steps of ℓ place hundreds of steps there. Models whose σ_0 is at most 1
    (β* = 1) get the linear schedule. A fraction ``1 − share`` of the steps stays linear in β, a defence for
    trained models whose hard part is near β = 1 rather than at 1/σ_0: β_k solves
    ``(1 − share) β + share · ℓ(β) / ℓ(1) = k / K`` (monotone; solved by bisection), so no stretch of β gets fewer
    than ``1 − share`` of a linear schedule's steps.

    Args:
        energy_scale: σ_0 ≥ 0; ``None`` (the ``"energy"`` schedule): measured from the path's base samples by the
            estimator that runs it (:meth:`fitted_to`; AIS does), linear until then.
        share: the fraction of the steps spaced by ℓ, in [0, 1].
    """

    def __init__(self, energy_scale: float | None = None, share: float = 0.2) -> None:
        if energy_scale is not None:
            energy_scale = float(check_finite_number(energy_scale, "energy_scale", minimum=0.0))
        share = check_finite_number(share, "share", minimum=0.0)
        if share > 1.0:
            raise ValueError(f"share must lie in [0, 1], got {share}")
        self.energy_scale = energy_scale
        self.share = float(share)

    def fitted_to(self, path, *, generator: torch.Generator | None = None) -> "EnergyScaleSchedule":
        """This schedule with σ_0 = the standard deviation of ``log f_1 − log f_0`` over :data:`ENERGY_SCALE_SAMPLES`
        base samples of ``path`` (an :class:`~pfzoo.paths.base.AnnealingPath`), drawn with ``generator``; itself when
        σ_0 was given. The samples are not the estimator's chains, so the schedule does not depend on them and AIS's
        ``Ẑ`` stays unbiased."""
        if self.energy_scale is not None:
            return self
        stats = path.statistics(path.sample_base(ENERGY_SCALE_SAMPLES, generator=generator))
        scale = path.log_weight_increment(stats, 0.0, 1.0).std().item()
        if not math.isfinite(scale):
            raise ValueError(f"the model's log density ratio to the base is not finite on base samples (sd {scale}); "
                             f"expected a model with finite energies")
        return EnergyScaleSchedule(scale, self.share)

    def betas(self, num_steps: int) -> torch.Tensor:
        scale = 0.0 if self.energy_scale is None else self.energy_scale
        knee = min(1.0, 1.0 / scale) if scale > 0 else 1.0  # β*
        total = 1.0 - math.log(knee)  # ℓ(1) in units of β* σ_0

        def position(beta: torch.Tensor) -> torch.Tensor:
            length = torch.where(beta <= knee, beta / knee, 1.0 + torch.log(beta.clamp(min=knee) / knee))
            return (1.0 - self.share) * beta + self.share * length / total

        targets = torch.linspace(0.0, 1.0, num_steps + 1, dtype=torch.float64)
        low, high = torch.zeros_like(targets), torch.ones_like(targets)
        for _ in range(64):  # bisection: position is increasing, and 2⁻⁶⁴ is below float64's resolution of β
            middle = (low + high) / 2
            below = position(middle) < targets
            low, high = torch.where(below, middle, low), torch.where(below, high, middle)
        betas = (low + high) / 2
        betas[0], betas[-1] = 0.0, 1.0
        return betas


SCHEDULES: dict[str, type[Schedule]] = {
    "linear": LinearSchedule, "sigmoid": SigmoidSchedule, "geometric": GeometricSchedule, "power": PowerSchedule,
    "energy": EnergyScaleSchedule,
}

ScheduleSpec = str | Schedule | Sequence[float] | torch.Tensor


def schedule_from_name(name: str) -> Schedule:
    """A :data:`SCHEDULES` entry by name, optionally with its one argument after a colon: ``"linear"``,
    ``"power:5"`` (``PowerSchedule(5.0)``), ``"sigmoid:8"`` (``SigmoidSchedule(8.0)``), ``"geometric:1e-4"``,
    ``"energy"`` (``EnergyScaleSchedule()``: σ_0 measured on the path) or ``"energy:5000"`` (σ_0 = 5000)."""
    kind, colon, argument = name.partition(":")
    if kind not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; expected one of {sorted(SCHEDULES)} (optionally '<name>:<number>'), "
                         "a Schedule or a β sequence")
    if not colon:
        return SCHEDULES[kind]()
    try:
        value = float(argument)
    except ValueError:
        raise ValueError(f"schedule {name!r}: the argument after ':' must be a number, got {argument!r}") from None
    if kind == "linear":
        raise ValueError(f"schedule {name!r}: 'linear' takes no argument")
    return SCHEDULES[kind](value)


def path_fitted_schedule(schedule: ScheduleSpec) -> EnergyScaleSchedule | None:
    """The schedule an estimator must fit to each path it anneals (``"energy"`` without σ_0), or ``None``."""
    resolved = schedule_from_name(schedule) if isinstance(schedule, str) else schedule
    return resolved if isinstance(resolved, EnergyScaleSchedule) and resolved.energy_scale is None else None


def betas_for_path(
    fitted: EnergyScaleSchedule | None, betas: torch.Tensor, path, *, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, float | None]:
    """``(β's, σ_0)`` an estimator anneals ``path`` with: ``betas`` as they are (σ_0 ``None``) unless ``fitted``
    (:func:`path_fitted_schedule`) is to be fitted to the path, then its β's for as many steps (:meth:`EnergyScaleSchedule.fitted_to`)."""
    if fitted is None:
        return betas, None
    schedule = fitted.fitted_to(path, generator=generator)
    return schedule.betas(betas.numel() - 1), schedule.energy_scale


def make_betas(schedule: ScheduleSpec, num_steps: int | None, *, steps_name: str = "num_steps") -> torch.Tensor:
    """Resolve a schedule given by name (see :func:`schedule_from_name`), :class:`Schedule` or explicit β sequence
    to float64 ``[K + 1]``; ``steps_name`` is what the caller calls ``num_steps`` (e.g. linked importance sampling's
    ``num_levels``), so errors name the caller's argument.

    An explicit sequence must be one-dimensional, start at 0, end at 1 and never decrease; ``num_steps`` must then be
    ``None`` or equal to its length minus one.
    """
    if isinstance(schedule, str):
        schedule = schedule_from_name(schedule)
    if isinstance(schedule, Schedule):
        check_positive_int(num_steps, steps_name)
        return schedule.betas(num_steps)
    try:
        betas = torch.as_tensor(schedule, dtype=torch.float64).cpu()
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValueError(f"schedule must be a name, a Schedule or a sequence of numbers (β's), got {type(schedule).__name__}: {error}") from None
    if betas.dim() != 1:
        raise ValueError(f"an explicit schedule must be a one-dimensional sequence of β's, got shape {tuple(betas.shape)}")
    if betas.numel() < 2:
        raise ValueError(f"an explicit schedule needs at least two inverse temperatures, got {betas.numel()}")
    if num_steps is not None and num_steps != betas.numel() - 1:
        raise ValueError(f"{steps_name}={num_steps} disagrees with the explicit schedule's {betas.numel() - 1} steps")
    if not torch.isfinite(betas).all() or betas[0] != 0.0 or betas[-1] != 1.0:
        raise ValueError(f"an explicit schedule must start at 0 and end at 1, got {betas[0].item()} … {betas[-1].item()}")
    if (betas.diff() < 0).any():
        raise ValueError("an explicit schedule must be non-decreasing")
    return betas
