"""How many intermediate distributions a path and schedule need for a given bias (Grosse, Maddison & Salakhutdinov 2013).

With perfect transitions (an exact draw from every intermediate distribution, the setting of the paper's §3
analysis) the bias of ``E[log w]`` along ``β_0 = 0 < … < β_K = 1`` is exactly ``Σ_k KL(p_(k−1) ‖ p_k)``: each
increment is evaluated at an exact sample of p_(k−1). A path that computes that sum in closed form
(:meth:`pfzoo.paths.GaussianPath.kl_sum`) therefore tells, without sampling, the smallest K whose bias is at most a
given accuracy. :func:`end_dense_knots` is the partition the optimal schedule's divergences are measured on
(:meth:`pfzoo.paths.OptimalSchedule.for_path`): the moment-averaged path between distant Gaussians moves fastest
near both ends.
"""

from __future__ import annotations

import math

import torch

from pfzoo.paths.base import AnnealingPath
from pfzoo.paths.schedules import ScheduleSpec, make_betas
from pfzoo.validation import check_positive_int

MAX_STEPS = 1 << 26


def end_dense_knots(num_per_side: int, *, smallest: float = 1e-9) -> torch.Tensor:
    """Knots float64 ``[2 num_per_side + 1]`` from 0 to 1: 0, then ``num_per_side − 1`` values log-spaced from
    ``smallest`` towards ½, ½, and the mirror image ``1 − b`` of the first half, then 1."""
    check_positive_int(num_per_side, "num_per_side")
    if num_per_side < 2:
        raise ValueError(f"num_per_side must be at least 2 (one log-spaced knot below ½), got {num_per_side}")
    if not 0.0 < smallest < 0.5:
        raise ValueError(f"smallest must lie in (0, ½), got {smallest}")
    half = torch.logspace(math.log10(smallest), math.log10(0.5), num_per_side, dtype=torch.float64)
    zero, middle, one = (torch.tensor([value], dtype=torch.float64) for value in (0.0, 0.5, 1.0))
    return torch.cat([zero, half[:-1], middle, (1 - half[:-1]).flip(0), one])


def steps_for_bias(path, schedule: ScheduleSpec, accuracy: float, *, max_steps: int = MAX_STEPS) -> tuple[int, float]:
    """The smallest K whose perfect-transition bias ``path.kl_sum(make_betas(schedule, K))`` is at most ``accuracy``
    nats, and that bias.

    Doubles K until the bias is small enough, then bisects between the last two K (the bias falls with K for
    the schedules in :mod:`pfzoo.paths.schedules`). Raises ``RuntimeError`` beyond ``max_steps``.
    """
    if not isinstance(path, AnnealingPath) or path.kl_sum(torch.tensor([0.0, 1.0], dtype=torch.float64)) is None:
        raise ValueError(f"path must compute its perfect-transition bias (kl_sum), got {type(path).__name__}")
    if not accuracy > 0 or math.isinf(accuracy):
        raise ValueError(f"accuracy must be a positive finite number of nats, got {accuracy}")

    def bias(num_steps: int) -> float:
        return path.kl_sum(make_betas(schedule, num_steps)).item()

    high = 1
    while bias(high) > accuracy:
        high *= 2
        if high > max_steps:
            raise RuntimeError(f"more than {max_steps} steps needed for accuracy {accuracy}")
    low = high // 2  # bias(low) > accuracy, or low = 0
    while high - low > 1:
        middle = (low + high) // 2
        if bias(middle) > accuracy:
            low = middle
        else:
            high = middle
    return high, bias(high)


def growth_exponents(distances, steps) -> tuple[float, float]:
    """How K grows with the distance d between the ends (Grosse et al. 2013, §3: GA ~ d², MA-optimal ~ (log d)²).

    Least-squares slopes of ``log K`` against ``log d`` (2 for K ∝ d²) and against ``log((log d)²)`` (1 for
    K ∝ (log d)²), over paired ``distances`` (> 1, at least two) and ``steps``.
    """
    distances, steps = [float(d) for d in distances], [float(k) for k in steps]
    if len(distances) != len(steps) or len(distances) < 2 or min(distances) <= 1 or min(steps) <= 0:
        raise ValueError(f"need at least two pairs of distances > 1 and positive steps, got {distances} and {steps}")

    def slope(x: list[float], y: list[float]) -> float:
        x_, y_ = torch.tensor(x, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)
        return (((x_ - x_.mean()) * (y_ - y_.mean())).sum() / (x_ - x_.mean()).square().sum()).item()

    log_k = [math.log(k) for k in steps]
    return slope([math.log(d) for d in distances], log_k), slope([math.log(math.log(d) ** 2) for d in distances], log_k)
