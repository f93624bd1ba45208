"""Log-domain arithmetic and the one reduction of log importance weights to an estimate.

Every estimator turns per-chain log weights into ``log Z``, its standard error and an
effective sample size here. Under ``torch.distributed`` the chains' weights are gathered from
all ranks just before (:mod:`pfzoo.estimators.sharding`), so every rank reduces the same tensor.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch.nn import functional as F


def log_mean_exp(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``log(mean(exp(x)))`` along ``dim``, computed without overflow."""
    return torch.logsumexp(x, dim=dim) - math.log(x.shape[dim])


class WeightSummary(NamedTuple):
    """Reduction of log importance weights ``log w_i``, ``i = 1..N``.

    log_mean: ``log( (1/N) Σ w_i )``, the log of the unbiased estimate of the normaliser ratio.
    stderr: delta-method standard error of ``log_mean``: ``sd(w) / (sqrt(N) · mean(w))``.
    ess: effective sample size ``(Σ w)² / Σ w²`` in [1, N].
    """

    log_mean: torch.Tensor
    stderr: torch.Tensor
    ess: torch.Tensor


def summarize_log_weights(log_weights: torch.Tensor, dim: int = -1) -> WeightSummary:
    """Reduce log weights along ``dim`` (float64 recommended) to a :class:`WeightSummary`.

    The standard error uses the delta method on the ratio estimate: with
    ``w̃_i = exp(log w_i - max_j log w_j)``, ``Var(log Ẑ) ≈ Var(w̃) / (N · mean(w̃)²)``.
    It is only as good as the sample variance of the weights; when the weights are
    heavy-tailed (small ESS) it underestimates the true error, so report ESS beside it.
    """
    num = log_weights.shape[dim]
    if num < 2:
        raise ValueError(f"log_weights needs at least 2 entries along dim {dim} for a standard error, got {num}")
    shift = log_weights.amax(dim=dim, keepdim=True)
    scaled = torch.exp(log_weights - shift)
    mean = scaled.mean(dim=dim)
    log_mean = torch.log(mean) + shift.squeeze(dim)
    stderr = scaled.std(dim=dim, unbiased=True) / (math.sqrt(num) * mean)
    ess = scaled.sum(dim=dim) ** 2 / (scaled**2).sum(dim=dim)
    return WeightSummary(log_mean=log_mean, stderr=stderr, ess=ess)


PARETO_K_UNRELIABLE = 0.7
"""Pareto k̂ above which an importance-weighted mean is unreliable (Vehtari et al. 2024, "Pareto smoothed importance
sampling", §3: beyond 0.7 the number of chains needed for a stable mean grows too fast to be practical)."""


def pareto_tail_index(log_weights: torch.Tensor) -> float:
    """Pareto k̂ of the largest importance weights: the shape of a generalized Pareto fitted to their upper tail.

    ``log_weights [N]`` (N ≥ 10); returns k̂ (``nan`` when the tail is degenerate, e.g. all weights equal). Following
    PSIS (Vehtari et al. 2024, §3), the tail is the ``M = min(N/5, 3√N)`` largest weights, taken as exceedances
    ``x_i = w_(i) − w_(N−M)`` over the next largest, and k̂ is the Zhang & Stephens (2009) posterior-mean fit with
    PSIS's weak prior pulling it towards ½ by ``M / (M + 10)``. The variance of the weights is infinite for k ≥ ½ and
    their mean is unstable beyond :data:`PARETO_K_UNRELIABLE`, whatever the sample variance (and so the delta-method
    stderr and ESS) suggests; this is the diagnostic that still sees it.

    Zhang & Stephens fit, with the exceedances sorted ascending ``x_1 ≤ … ≤ x_M`` and ``m = 30 + ⌊√M⌋`` grid points:
    ``θ_j = 1/x_M + (1 − √(m / (j − ½))) / (3 x_⌊M/4+½⌋)``, profile ``k(θ) = −mean log(1 − θ x)``, log-likelihood
    ``ℓ(θ) = M (log(θ / k(θ)) + k(θ) − 1)``, ``θ̂ = Σ_j θ_j softmax(ℓ)_j`` and ``k̂ = −k(θ̂)`` (the sign of the
    usual parametrisation, where heavier tails mean larger k).
    """
    weights = log_weights.detach().double().flatten()
    num = weights.numel()
    if num < 10:
        raise ValueError(f"log_weights needs at least 10 entries for a tail fit, got {num}")
    tail_size = int(min(num / 5, 3 * math.sqrt(num)))
    largest = torch.sort(weights).values[-(tail_size + 1):]
    scaled = torch.exp(largest - largest[-1])  # w / max w: the fit is scale-free
    exceedances = scaled[1:] - scaled[0]
    if not bool(exceedances[-1] > 0) or not bool(torch.isfinite(exceedances).all()):
        return math.nan
    size = exceedances.numel()
    grid = 30 + int(math.sqrt(size))
    quartile = exceedances[int(size / 4 + 0.5) - 1].clamp_min(torch.finfo(torch.float64).tiny)
    j = torch.arange(1, grid + 1, dtype=torch.float64, device=weights.device)
    thetas = 1 / exceedances[-1] + (1 - torch.sqrt(grid / (j - 0.5))) / (3 * quartile)
    profile = torch.log1p(-thetas[:, None] * exceedances).mean(1)  # = −k(θ_j)
    log_likelihood = size * (torch.log(-thetas / profile) - profile - 1)
    theta = (torch.softmax(log_likelihood, 0) * thetas).sum()
    k = torch.log1p(-theta * exceedances).mean().item()
    return (k * size + 10 * 0.5) / (size + 10)


class _Softplus(torch.autograd.Function):
    """``softplus(x) = max(x, 0) − log σ(|x|)`` from σ and log, whose CPU kernels are vectorised; torch's CPU
    ``softplus`` and ``log1p`` ran as scalar loops, six to ten times slower, on the AMD EPYC (AVX2) these were measured
    on. On an Intel Xeon where torch dispatches AVX-512 kernels they are vectorised too, and this is about as fast
    (1000 × 500, one thread: float32 0.86 against torch's 0.82 ms, float64 2.10 against 1.74). Backward:
    ``∂/∂x softplus(x) = σ(x)``."""

    generate_vmap_rule = True  # torch.func transforms (the natural gradient's per-example Jacobians) map it

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, min=0).sub_(torch.abs(x).sigmoid_().log_())

    @staticmethod
    def setup_context(ctx, inputs: tuple[torch.Tensor], output: torch.Tensor) -> None:
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * torch.sigmoid(x)


def softplus(x: torch.Tensor) -> torch.Tensor:
    """``log(1 + eˣ)`` elementwise, same shape and dtype, differentiable; accurate to the dtype's unit roundoff in
    absolute terms (where ``σ(|x|)`` rounds to 1 the correction ``log(1 + e^{−|x|}) < 2⁻²⁴`` (float32) is dropped,
    as ``x + that`` would round it away for ``x`` above 1). The hot loops' free energies use it on the CPU; elsewhere
    torch's own kernel, which is fast there."""
    if x.device.type != "cpu" or torch.compiler.is_compiling():
        return F.softplus(x)
    return _Softplus.apply(x)


SERIES_MAX_DELTA = 0.05
"""Largest ``|δ|`` for which :func:`softplus_difference` uses its series; its remainder is then
below ``|δ|⁵ max|σ''''| / 5! ≈ 3.3e-10`` per term."""

SERIES_ORDER_MAX_DELTA = {2: 2.7e-3, 3: 0.0159, 4: SERIES_MAX_DELTA}
"""The largest ``|δ|`` at which :func:`softplus_difference`'s series to each order keeps that remainder, ≈ 3.3e-10 per
term: cut after the δⁿ term it is below ``|δ|ⁿ⁺¹ max|σ⁽ⁿ⁾| / (n+1)!``, with ``max|σ''| ≈ 0.0962`` and ``max|σ'''| = 1/8``.
An AIS run of K = 10⁴ or 10⁵ steps then takes the shorter series: fewer passes over its units a step."""


def softplus_difference_form(max_abs_delta: float, max_abs_input: float, dtype: torch.dtype) -> tuple[str, int] | str:
    """Which form :func:`softplus_difference` evaluates for these bounds (its docstring): ``("series", order)``,
    ``"complement"`` (the two-σ form) or ``"guarded"`` (log1p where it is safe, the float64 difference elsewhere). Steps of
    one form run the same operations whatever their δ (what a CUDA graph of annealing steps relies on,
    :mod:`pfzoo.estimators.cuda_graphs`)."""
    if max_abs_delta <= SERIES_MAX_DELTA:
        return "series", min(n for n, largest in SERIES_ORDER_MAX_DELTA.items() if max_abs_delta <= largest)
    if max(max_abs_delta, max_abs_input) > math.log(torch.finfo(dtype).max) - 8:
        return "guarded"
    return "complement"


def softplus_difference(x_to: torch.Tensor, delta: torch.Tensor, *, max_abs_delta: float = math.inf, max_abs_input: float = math.inf,
                        probs: torch.Tensor | None = None, scratch: tuple[torch.Tensor, ...] | None = None,
                        sum_buffer: torch.Tensor | None = None, form: tuple[str, int] | str | None = None) -> torch.Tensor:
    """``Σ_j [softplus(x_to_j) - softplus(x_to_j - δ_j)]`` over the last dim, float64 ``[...]``.

    This is the per-step AIS weight increment of a layer of binary units summed out, with
    ``x_to`` the units' input at the new β and ``δ`` its change since the old β. Subtracting two
    softplus values would cancel catastrophically for the small steps AIS takes, so:

    - if ``max_abs_delta`` (a bound on ``|δ|`` the caller knows without a device sync) is at most
      :data:`SERIES_MAX_DELTA`, the Taylor series in δ around ``x_to`` to fourth order, with
      ``s = σ(x_to)``, ``q = s(1-s)``:
      ``δ s − δ² q [1/2 − δ ((1−2s)/6 − δ (1−6q)/24)]``, all elementwise products (fast), cut after the δ² or the δ³
      term where ``max_abs_delta`` keeps the remainder as small (:data:`SERIES_ORDER_MAX_DELTA`);
    - else, if ``max_abs_delta`` and ``max_abs_input`` (a bound on ``|x_to|``) keep ``e^{|δ|}`` and ``e^{|x_to|}`` a few
      nats below the dtype's overflow (float32: 80, float64: 700), ``−log(σ(−x_to) + σ(x_to) e^{−δ})``: a sum of two
      positive terms, each to a few ulps, so the log is accurate to ~1e-7 (float32) in absolute terms whatever the
      saturation, from σ, exp and log alone (torch's CPU ``expm1``/``log1p``/``softplus`` are scalar loops, ten times
      slower);
    - otherwise the exact ``−log1p(s · expm1(−δ))`` where ``|s · expm1(−δ)| ≤ ½``, and elsewhere the difference
      ``softplus(x_to) − softplus(x_to − δ)`` in float64, which loses nothing at such δ. The log1p form fails there:
      with σ(x_to) near 1 and large δ (x_to = 20, δ = 25 in float32) ``s`` rounds to 1 and it gives +inf or a value
      off by tenths of a nat; with large negative δ ``expm1(−δ)`` overflows (float32: δ < −88) and ``s · inf`` is
      +inf, or NaN where ``s`` underflowed to 0 (the weights of RBMs with weights in the thousands).

    ``probs``: ``σ(x_to)`` when the caller has it (an RBM path's hidden draw shares it); ``scratch``: three tensors like
    ``x_to`` that the first two branches may overwrite instead of allocating, and ``sum_buffer`` a float64 one (an
    annealing run's buffers), with the same numbers. Terms are accurate to ~1e-9 in float32 on the series and summed
    in float64: converted, then summed (``sum(dtype=float64)`` gives the same sums at three times the cost on the CPU).
    ``form``: the form the bounds would choose (:func:`softplus_difference_form`), given instead of them by a caller whose
    ``δ`` is a device tensor of a step chosen earlier.
    """
    s = torch.sigmoid(x_to) if probs is None else probs
    if form is None:
        form = softplus_difference_form(max_abs_delta, max_abs_input, x_to.dtype)
    if form == "guarded":
        shrink = s * torch.expm1(-delta)  # e^{−term} − 1 ∈ (−1, ∞)
        by_log1p = -torch.log1p(shrink)
        direct = F.softplus(x_to.double()) - F.softplus(x_to.double() - delta.double())
        # |shrink| ≤ ½ also rejects NaN: where expm1(−δ) overflows (float32: δ < −88) and s = 0, s · inf is NaN
        return torch.where(shrink.abs() <= 0.5, by_log1p.double(), direct).sum(-1)
    q, a, b = (None, None, None) if scratch is None else scratch  # out=None allocates (torch.compile refuses strided outs)
    if form == "complement":
        complement = torch.sigmoid(torch.neg(x_to, out=b), out=b)  # σ(−x), not 1 − σ(x): exact where σ(x) rounds to 1
        return _float64_sum(torch.neg(delta, out=a).exp_().mul_(s).add_(complement).log_(), sum_buffer).neg_()
    # Horner form with fused, in-place elementwise ops: this runs once per annealing step.
    order = form[1]
    q = torch.addcmul(s, s, s, value=-1, out=q)  # s(1-s)
    if order == 2:  # δ (s − δ q / 2)
        return _float64_sum(torch.addcmul(s, delta, q, value=-0.5, out=b).mul_(delta), sum_buffer)
    sixth, third, twenty_fourth, quarter, half = _series_constants(s)  # c − x·y in one pass: addcmul(c, x, y, value=−1)
    a = torch.addcmul(sixth, s, third, value=-1, out=a)  # (1-2s)/6
    if order == 4:
        b = torch.addcmul(twenty_fourth, q, quarter, value=-1, out=b)  # (1-6q)/24
        a = torch.addcmul(a, delta, b, value=-1, out=None if scratch is None else a)  # (1-2s)/6 - δ(1-6q)/24
    a = torch.addcmul(half, delta, a, value=-1, out=None if scratch is None else a)
    b = torch.addcmul(s, delta, q.mul_(a), value=-1, out=None if scratch is None else b).mul_(delta)
    return _float64_sum(b, sum_buffer)


_SERIES_VALUES = (1 / 6, 1 / 3, 1 / 24, 1 / 4, 1 / 2)
_SERIES_CONSTANTS: dict[tuple[torch.dtype, torch.device], tuple[torch.Tensor, ...]] = {}


def _series_constants(like: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """0-d tensors ``1/6, 1/3, 1/24, 1/4, 1/2`` in ``like``'s dtype and device, made once per pair (no fill a step); in a
    compiled graph made in it (they fold into its fused kernel, and reading the cache would guard the graph on it)."""
    if torch.compiler.is_compiling():
        return _full_constants(like)
    key = (like.dtype, like.device)
    if key not in _SERIES_CONSTANTS:
        _SERIES_CONSTANTS[key] = _full_constants(like)
    return _SERIES_CONSTANTS[key]


def _full_constants(like: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(torch.full((), value, dtype=like.dtype, device=like.device) for value in _SERIES_VALUES)


def _float64_sum(terms: torch.Tensor, buffer: torch.Tensor | None) -> torch.Tensor:
    """``Σ`` over the last dim of ``terms [..., H]`` in float64 ``[...]``, converted into ``buffer`` (like ``terms``) if given."""
    return (terms.double() if buffer is None else buffer.copy_(terms)).sum(-1)
