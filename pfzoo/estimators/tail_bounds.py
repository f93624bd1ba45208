"""Lower bounds on ``log Z`` from several independent unbiased estimates, sharper than one estimate's Markov bound.

An unbiased estimate ``Ẑ ≥ 0`` of ``Z`` exceeds ``c·Z`` with probability at most ``1/c`` (Markov's inequality, RAISE
eq. 6), so one estimate gives ``log Z ≥ log Ẑ − log(1/δ)`` with probability ≥ 1 − δ. With ``n`` independent such
estimates (AIS's chains: each chain's weight ``w_i`` is unbiased for Z) the RAISE paper notes, after Gogate, Bidyuk &
Dechter (2007), that combining them gives stronger tail bounds. Their order statistics do: the number of estimates
above ``c·Z`` is a sum of ``n`` independent indicators each true with probability at most ``1/c``, so it is
stochastically below ``Binomial(n, 1/c)`` and

    Pr(Ẑ_(r) > c·Z) ≤ Pr(Binomial(n, 1/c) ≥ r),                                                    (1)

with ``Ẑ_(r)`` the r-th largest. For ``r = n`` (the minimum) this is Gogate et al.'s ``(1/c)^n``; for ``r ≈ n/2`` (the
median) ``c`` tends to 2 as ``n`` grows, so the bound approaches ``log median Ẑ − log 2`` instead of losing
``log(1/δ)``. :func:`order_statistic_bound` evaluates (1) for up to :data:`MAX_RANKS` ranks spread evenly over
``1 … n`` at level ``δ/(2m)`` each and the Markov bound of the average (itself unbiased) at level ``δ/2``, and returns
the largest: by the union bound it holds with probability ≥ 1 − δ whichever candidate wins. Light-tailed estimates
(the mean and the median close) gain from the order statistics; heavy-tailed ones keep the mean's Markov bound, at
the price of ``log 2`` for having looked at both.
"""

from __future__ import annotations

import functools
import math

import torch

MAX_RANKS = 64
"""Order statistics tried: more cost a larger Bonferroni share each and gain little (neighbouring ranks bound alike)."""


def binomial_upper_tail(n: int, p: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """``Pr(Binomial(n, p) ≥ r)`` for float64 ``p [...]`` in (0, 1) and integer-valued ``r [...]`` in 1 … n (broadcast),
    summed in log space over ``k = r … n``."""
    k = torch.arange(n + 1, dtype=torch.float64, device=p.device)
    log_choose = math.lgamma(n + 1) - torch.lgamma(k + 1) - torch.lgamma(n - k + 1)
    log_terms = log_choose + k * torch.log(p).unsqueeze(-1) + (n - k) * torch.log1p(-p).unsqueeze(-1)
    return torch.where(k >= r.unsqueeze(-1), log_terms, -torch.inf).logsumexp(-1).exp()


def order_statistic_slacks(n: int, ranks: torch.Tensor, delta: float, *, iterations: int = 60) -> torch.Tensor:
    """``log c_r`` for each rank ``r`` of float64 ``ranks [m]`` (in 1 … n): the smallest ``c_r`` with
    ``Pr(Binomial(n, 1/c_r) ≥ r) ≤ delta``, found by bisection on ``p = 1/c`` (the tail grows with ``p``), so that
    ``Pr(log Ẑ_(r) − log c_r > log Z) ≤ delta`` for the r-th largest of ``n`` independent unbiased estimates."""
    r = ranks.double()
    low, high = torch.zeros_like(r), torch.ones_like(r)
    for _ in range(iterations):  # keep low feasible (tail ≤ delta) and high infeasible
        middle = 0.5 * (low + high)
        feasible = binomial_upper_tail(n, middle.clamp(1e-300, 1 - 1e-16), r) <= delta
        low, high = torch.where(feasible, middle, low), torch.where(feasible, high, middle)
    return -torch.log(low.clamp(min=1e-300))


def order_statistic_bound(log_estimates: torch.Tensor, confidence: float = 0.95) -> tuple[float, str]:
    """A lower bound on ``log Z`` that holds with probability ≥ ``confidence``, from ``log_estimates [n]``: the logs of
    ``n`` independent unbiased estimates of ``Z`` (e.g. AIS's per-chain log weights with the base's log Z added).

    Returns ``(bound, rule)``: the largest of eq. (1)'s order-statistic bounds (``m`` ranks, each at level
    ``(1 − confidence)/(2m)``) and the average's Markov bound (at level ``(1 − confidence)/2``), and which of them won
    (``"r-th largest of n"`` or ``"mean of n"``).
    """
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be a probability strictly between 0 and 1, got {confidence!r}")
    if not isinstance(log_estimates, torch.Tensor) or log_estimates.dim() != 1 or log_estimates.numel() == 0:
        raise ValueError(f"log_estimates must be a non-empty 1-D tensor of log Ẑ values, got {type(log_estimates).__name__} "
                         f"of shape {tuple(getattr(log_estimates, 'shape', ()))}")
    values = log_estimates.detach().double().cpu()
    if torch.isnan(values).any() or torch.isposinf(values).any():
        raise ValueError("log_estimates must hold no NaN or +inf (an unbiased estimate is finite)")
    n, delta = values.numel(), 1.0 - confidence
    ranks, slacks = _candidate_slacks(n, delta)
    mean_bound = (values.logsumexp(0) - math.log(n)).item() - math.log(2.0 / delta)
    candidates = values.sort(descending=True).values[ranks.long() - 1] - slacks
    best = int(candidates.argmax())
    if candidates[best].item() >= mean_bound:
        return candidates[best].item(), f"{int(ranks[best])}-th largest of {n}"
    return mean_bound, f"mean of {n}"


@functools.lru_cache(maxsize=64)
def _candidate_slacks(n: int, delta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The ranks tried for ``n`` estimates and their slacks at level ``delta/(2m)`` (cached: a bisection per call
    would cost more than the bound's use, e.g. one bound per training checkpoint)."""
    ranks = torch.linspace(1, n, min(n, MAX_RANKS), dtype=torch.float64).round().unique()
    return ranks, order_statistic_slacks(n, ranks, delta / (2 * ranks.numel()))
