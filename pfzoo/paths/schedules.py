"""Annealing schedules: increasing sequences ``0 = β_0 < β_1 ≤ … ≤ β_K = 1``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch


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
        if not scale > 0:
            raise ValueError(f"scale must be positive, got {scale}")
        self.scale = float(scale)

    def betas(self, num_steps: int) -> torch.Tensor:
        raw = torch.sigmoid(self.scale * torch.linspace(-1.0, 1.0, num_steps + 1, dtype=torch.float64))
        betas = (raw - raw[0]) / (raw[-1] - raw[0])
        betas[0], betas[-1] = 0.0, 1.0
        return betas


SCHEDULES: dict[str, type[Schedule]] = {"linear": LinearSchedule, "sigmoid": SigmoidSchedule}

ScheduleSpec = str | Schedule | Sequence[float] | torch.Tensor


def make_betas(schedule: ScheduleSpec, num_steps: int | None) -> torch.Tensor:
    """Resolve a schedule given by name, :class:`Schedule` or explicit β sequence to float64 ``[K + 1]``.

    An explicit sequence must start at 0, end at 1 and never decrease; ``num_steps`` must then be
    ``None`` or equal to its length minus one.
    """
    if isinstance(schedule, str):
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {schedule!r}; expected one of {sorted(SCHEDULES)}, a Schedule or a β sequence")
        schedule = SCHEDULES[schedule]()
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
