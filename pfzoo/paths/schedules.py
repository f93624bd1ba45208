"""Annealing schedules: increasing sequences ``0 = β_0 < β_1 ≤ … ≤ β_K = 1``."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch

from pfzoo.validation import check_finite_number


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
        if not hasattr(path, "symmetric_divergences"):
            raise ValueError(f"{type(path).__name__} has no exact symmetric_divergences; use OptimalSchedule.from_diagnostics with a pilot run")
        if isinstance(knots, int):
            knots = torch.linspace(0.0, 1.0, knots + 1, dtype=torch.float64)
        knots = torch.as_tensor(knots, dtype=torch.float64).flatten().cpu()
        return cls(knots, path.symmetric_divergences(knots))

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


SCHEDULES: dict[str, type[Schedule]] = {
    "linear": LinearSchedule, "sigmoid": SigmoidSchedule, "geometric": GeometricSchedule, "power": PowerSchedule,
}

ScheduleSpec = str | Schedule | Sequence[float] | torch.Tensor


def schedule_from_name(name: str) -> Schedule:
    """A :data:`SCHEDULES` entry by name, optionally with its one argument after a colon: ``"linear"``,
    ``"power:5"`` (``PowerSchedule(5.0)``), ``"sigmoid:8"`` (``SigmoidSchedule(8.0)``), ``"geometric:1e-4"``."""
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


def make_betas(schedule: ScheduleSpec, num_steps: int | None) -> torch.Tensor:
    """Resolve a schedule given by name (see :func:`schedule_from_name`), :class:`Schedule` or explicit β sequence
    to float64 ``[K + 1]``.

    An explicit sequence must start at 0, end at 1 and never decrease; ``num_steps`` must then be
    ``None`` or equal to its length minus one.
    """
    if isinstance(schedule, str):
        schedule = schedule_from_name(schedule)
    if isinstance(schedule, Schedule):
        if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1:
            raise ValueError(f"num_steps must be a positive integer, got {num_steps!r}")
        return schedule.betas(num_steps)
    betas = torch.as_tensor(schedule, dtype=torch.float64).flatten().cpu()
    if betas.numel() < 2:
        raise ValueError(f"an explicit schedule needs at least two inverse temperatures, got {betas.numel()}")
    if num_steps is not None and num_steps != betas.numel() - 1:
        raise ValueError(f"num_steps={num_steps} disagrees with the explicit schedule's {betas.numel() - 1} steps")
    if not torch.isfinite(betas).all() or betas[0] != 0.0 or betas[-1] != 1.0:
        raise ValueError(f"an explicit schedule must start at 0 and end at 1, got {betas[0].item()} … {betas[-1].item()}")
    if (betas.diff() < 0).any():
        raise ValueError("an explicit schedule must be non-decreasing")
    return betas
