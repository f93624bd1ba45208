import math

import pytest
import torch
from torch.nn import functional as F

from pfzoo.logmath import (
    PARETO_K_UNRELIABLE,
    SERIES_MAX_DELTA,
    SERIES_ORDER_MAX_DELTA,
    log_mean_exp,
    pareto_tail_index,
    softplus,
    softplus_difference,
    summarize_log_weights,
)
from pfzoo.sampling import BULK_DRAWS, UNIFORM_BITS, bernoulli, bernoulli_logits, uniform_integers


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_softplus_and_its_gradient_against_a_float64_reference(dtype):
    """log(1 + eˣ) to the dtype's unit roundoff in absolute terms, from deep saturation on both sides to 0, and σ(x) as
    its gradient (first and second order: the natural gradient differentiates through it)."""
    x = torch.cat([torch.linspace(-120, 120, 4001, dtype=torch.float64), torch.tensor([0.0, 1e-30, -1e-30, 1e-8])])
    reference = torch.where(x > 0, x + torch.log1p(torch.exp(-x)), torch.log1p(torch.exp(x)))
    assert ((softplus(x.to(dtype)).double() - reference).abs() <= 4 * torch.finfo(dtype).eps * reference.abs().clamp_min(1)).all()
    assert torch.equal(softplus(torch.tensor([-200.0, 200.0], dtype=dtype)), torch.tensor([0.0, 200.0], dtype=dtype))
    inputs = x.to(dtype).requires_grad_()
    (gradient,) = torch.autograd.grad(softplus(inputs).sum(), inputs, create_graph=True)
    torch.testing.assert_close(gradient, torch.sigmoid(inputs.detach()))
    (second,) = torch.autograd.grad(gradient.sum(), inputs)
    torch.testing.assert_close(second, torch.sigmoid(inputs.detach()) * torch.sigmoid(-inputs.detach()))


def test_log_mean_exp_is_stable():
    x = torch.tensor([1000.0, 1000.0 + math.log(3.0)], dtype=torch.float64)
    assert log_mean_exp(x).item() == pytest.approx(1000.0 + math.log(2.0), abs=1e-12)


def test_summary_matches_direct_formulas():
    log_w = torch.tensor([0.1, -0.3, 0.7, 0.2, -1.0], dtype=torch.float64)
    w = log_w.exp()
    summary = summarize_log_weights(log_w + 500.0)  # shifting log weights shifts only log_mean
    assert summary.log_mean.item() == pytest.approx(math.log(w.mean().item()) + 500.0, abs=1e-10)
    assert summary.stderr.item() == pytest.approx((w.std() / (math.sqrt(5) * w.mean())).item(), rel=1e-10)
    assert summary.ess.item() == pytest.approx((w.sum() ** 2 / (w**2).sum()).item(), rel=1e-10)


def test_equal_weights_have_zero_error_and_full_ess():
    summary = summarize_log_weights(torch.full((10,), 3.0, dtype=torch.float64))
    assert summary.stderr.item() == 0.0 and summary.ess.item() == pytest.approx(10.0)
    with pytest.raises(ValueError, match="at least 2"):
        summarize_log_weights(torch.zeros(1))


@pytest.mark.parametrize("scale", [1e-5, 1e-3, SERIES_MAX_DELTA, 0.5, 3.0])
def test_softplus_difference_is_accurate_on_both_branches(scale):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 300, generator=g) * 10
    delta = (torch.rand(50, 300, generator=g) * 2 - 1) * scale
    exact = (F.softplus(x.double()) - F.softplus(x.double() - delta.double())).sum(-1)
    series = softplus_difference(x, delta, max_abs_delta=scale)
    direct = softplus_difference(x, delta, max_abs_delta=math.inf)
    tolerance = 300 * 1e-7 * max(scale, 1e-3)
    assert (direct - exact).abs().max().item() < tolerance
    assert (series - exact).abs().max().item() < tolerance
    assert series.dtype == torch.float64


@pytest.mark.parametrize("order", sorted(SERIES_ORDER_MAX_DELTA))
def test_each_cut_of_the_series_keeps_its_remainder_below_the_bound(order):
    """At the largest |δ| of each order the series is within 3.4e-10 of the exact difference per term, wherever x lies
    (float64 inputs, so that only the truncation shows)."""
    largest = SERIES_ORDER_MAX_DELTA[order]
    x = torch.linspace(-12, 12, 24001, dtype=torch.float64)[:, None]
    delta = torch.full_like(x, largest) * torch.tensor([1.0, -1.0], dtype=torch.float64)
    exact = F.softplus(x) - F.softplus(x - delta)
    series = torch.stack([softplus_difference(x, delta[:, i:i + 1], max_abs_delta=largest) for i in range(2)], -1)
    assert (series - exact).abs().max().item() < 3.4e-10


def test_bernoulli_frequencies_and_reproducibility():
    probs = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0]).expand(100000, -1)
    draws = bernoulli(probs, generator=torch.Generator().manual_seed(0))
    assert set(draws.unique().tolist()) <= {0.0, 1.0} and draws.dtype == probs.dtype
    se = torch.sqrt(probs[0] * (1 - probs[0]) / 100000)
    assert ((draws.mean(0) - probs[0]).abs() <= 5 * se + 1e-9).all()
    assert torch.equal(draws, bernoulli(probs, generator=torch.Generator().manual_seed(0)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bernoulli_logits_frequencies_dtype_and_reproducibility(dtype):
    """Float64 logits draw in float32 but return float64 draws at σ(x) within the 2⁻²⁴ spacing of the uniforms."""
    logits = torch.tensor([-30.0, -2.0, 0.0, 1.5, 30.0], dtype=dtype, requires_grad=True).expand(100000, -1)
    draws = bernoulli_logits(logits, generator=torch.Generator().manual_seed(0))
    assert draws.dtype == dtype and not draws.requires_grad and set(draws.unique().tolist()) <= {0.0, 1.0}
    probs = torch.sigmoid(logits[0].detach().double())
    se = torch.sqrt(probs * (1 - probs) / 100000)
    assert ((draws.mean(0).double() - probs).abs() <= 5 * se + 2.0**-24).all()
    assert torch.equal(draws, bernoulli_logits(logits, generator=torch.Generator().manual_seed(0)))
    assert bernoulli_logits(logits, dtype=torch.float64, generator=torch.Generator()).dtype == torch.float64


def test_bernoulli_logits_below_the_bulk_size_draws_at_the_same_law():
    """Fewer than BULK_DRAWS draws take torch's uniforms: the same frequencies, reproducible, any memory layout."""
    logits = torch.tensor([[-3.0, 0.5], [2.0, -0.5]], dtype=torch.float64).T.contiguous().T  # a transposed layout
    repeats = BULK_DRAWS // 8  # 4 draws per call
    draws = torch.stack([bernoulli_logits(logits, generator=torch.Generator().manual_seed(seed)) for seed in range(repeats)])
    probs = torch.sigmoid(logits)
    assert ((draws.mean(0) - probs).abs() <= 5 * torch.sqrt(probs * (1 - probs) / repeats)).all()
    assert torch.equal(bernoulli_logits(logits, generator=torch.Generator().manual_seed(3)), draws[3])


def test_uniform_integers_are_uniform_independent_and_reproducible():
    """Each of the 24 bits is a fair coin, neighbouring integers are uncorrelated, and a seed fixes them all."""
    integers = uniform_integers((1000, 101), generator=torch.Generator().manual_seed(0))  # odd count: half a word unused
    assert integers.dtype == torch.int32 and integers.shape == (1000, 101)
    assert integers.min() >= 0 and integers.max() < 1 << UNIFORM_BITS
    bits = torch.stack([(integers >> bit) & 1 for bit in range(UNIFORM_BITS)]).double().flatten(1)
    assert ((bits.mean(1) - 0.5).abs() <= 5 * 0.5 / bits.shape[1] ** 0.5).all()
    uniforms = integers.double().flatten() / (1 << UNIFORM_BITS)
    correlation = torch.corrcoef(torch.stack([uniforms[:-1], uniforms[1:]]))[0, 1]
    assert abs(correlation) <= 5 / uniforms.numel() ** 0.5
    assert torch.equal(integers, uniform_integers((1000, 101), generator=torch.Generator().manual_seed(0)))
    assert not torch.equal(integers, uniform_integers((1000, 101), generator=torch.Generator().manual_seed(1)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_softplus_difference_stays_exact_for_large_steps_near_saturation(dtype):
    """σ(x) rounds to 1 for large x; the log1p form then gives +inf (x = 20, δ = 25) or tenths of a nat of error."""
    x = torch.tensor([[20.0, 17.0, 40.0, 60.0, -5.0]], dtype=dtype)
    delta = torch.tensor([[25.0, 25.0, 50.0, 61.0, 3.0]], dtype=dtype)
    exact = (torch.nn.functional.softplus(x.double()) - torch.nn.functional.softplus((x - delta).double())).sum().item()
    assert softplus_difference(x, delta, max_abs_delta=61.0).item() == pytest.approx(exact, abs=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_softplus_difference_survives_overflowing_expm1(dtype):
    """Large negative δ: expm1(−δ) overflows (float32 beyond 88, float64 beyond 709) and s · inf was NaN where σ(x) underflowed
    to 0 (x = −200) or ±inf where it did not (x = −100, whose exact difference is −100)."""
    x = torch.tensor([[-200.0, -100.0, -1000.0, 5.0, -750.0]], dtype=dtype)
    delta = torch.tensor([[-150.0, -200.0, -1500.0, -800.0, -760.0]], dtype=dtype)
    exact = (F.softplus(x.double()) - F.softplus(x.double() - delta.double())).sum().item()
    assert softplus_difference(x, delta, max_abs_delta=1500.0).item() == pytest.approx(exact, abs=1e-6)


def test_ais_on_an_rbm_with_weights_in_the_thousands_is_finite():
    """W and visible bias ≈ 5000 in float32 at K = 100 (AIS returned NaN before: σ(x) underflowed to 0 times expm1 = inf)."""
    from pfzoo.estimators import AIS
    from pfzoo.models import RBM

    g = torch.Generator().manual_seed(0)
    model = RBM.from_tensors(torch.randn(12, 8, generator=g) * 5000, torch.randn(12, generator=g) * 5000, torch.zeros(8))
    estimate = AIS(num_chains=100, num_steps=100)(model, generator=torch.Generator().manual_seed(1))
    assert math.isfinite(estimate.log_z) and math.isfinite(estimate.stderr)


def test_ais_on_an_rbm_with_huge_weights_is_finite():
    """|W| ≈ 200 at K = 100: every step is large, on the exact branch (it returned NaN before)."""
    from pfzoo.estimators import AIS
    from pfzoo.models import RBM

    g = torch.Generator().manual_seed(0)
    model = RBM.from_tensors(torch.randn(10, 6, generator=g) * 200, torch.zeros(10), torch.zeros(6))
    estimate = AIS(num_chains=20, num_steps=100)(model, generator=torch.Generator().manual_seed(1))
    assert math.isfinite(estimate.log_z) and estimate.log_z <= model.log_partition().item() + 1e-3 + 3 * estimate.stderr


@pytest.mark.parametrize("shape", [0.2, 0.5, 1.0, 1.5])
def test_pareto_tail_index_recovers_the_shape_of_pareto_weights(shape):
    """Weights ``w = U^{−k}`` have a Pareto tail of shape k; over 20 seeds of 4000 weights the fit's mean is within
    0.06 of k (its spread per seed is about 0.1)."""
    fits = [pareto_tail_index(-shape * torch.log(torch.rand(4000, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)))
            for seed in range(20)]
    assert abs(sum(fits) / len(fits) - shape) < 0.06


def test_pareto_tail_index_separates_light_from_heavy_log_normal_weights():
    g = torch.Generator().manual_seed(0)
    light = pareto_tail_index(0.3 * torch.randn(1000, generator=g, dtype=torch.float64))
    heavy = pareto_tail_index(4.0 * torch.randn(1000, generator=g, dtype=torch.float64))
    assert light < 0.5 < PARETO_K_UNRELIABLE < heavy


def test_pareto_tail_index_of_equal_weights_is_nan_and_needs_ten_weights():
    assert math.isnan(pareto_tail_index(torch.zeros(50)))
    with pytest.raises(ValueError, match="log_weights needs at least 10"):
        pareto_tail_index(torch.zeros(9))
