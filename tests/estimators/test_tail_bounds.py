"""Order-statistic tail bounds on log Z (Gogate, Bidyuk & Dechter 2007, cited by the RAISE paper §2.2)."""

import math

import pytest
import torch
from factories import random_rbm

from pfzoo.estimators import AIS, Exact
from pfzoo.estimators.tail_bounds import binomial_upper_tail, order_statistic_bound, order_statistic_slacks


def test_binomial_upper_tail_is_the_sum_of_the_binomial_terms():
    n, p = 7, torch.tensor([0.05, 0.3, 0.8], dtype=torch.float64)
    for r in range(1, n + 1):
        expected = [sum(math.comb(n, k) * q ** k * (1 - q) ** (n - k) for k in range(r, n + 1)) for q in p.tolist()]
        torch.testing.assert_close(binomial_upper_tail(n, p, torch.full((3,), float(r), dtype=torch.float64)),
                                   torch.tensor(expected, dtype=torch.float64))


def test_the_minimums_slack_is_the_closed_form_and_the_largests_is_the_union_bound():
    n, delta = 20, 0.01
    slacks = order_statistic_slacks(n, torch.tensor([1.0, float(n)]), delta)
    # Pr(min > cZ) ≤ c^-n = δ  →  log c = log(1/δ)/n;  Pr(max > cZ) ≤ 1 − (1 − 1/c)^n = δ
    torch.testing.assert_close(slacks[1], torch.tensor(math.log(1 / delta) / n, dtype=torch.float64), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(slacks[0], torch.tensor(-math.log(1 - (1 - delta) ** (1 / n)), dtype=torch.float64), rtol=1e-9, atol=1e-12)


def lognormal_log_estimates(num_runs, n, sigma, generator):
    """``log Ẑ`` of unbiased estimates of Z = 1 with a heavy right tail (log-normal: E Ẑ = 1)."""
    return sigma * torch.randn(num_runs, n, generator=generator, dtype=torch.float64) - sigma ** 2 / 2


@pytest.mark.parametrize("sigma, n", [(0.5, 50), (2.0, 20), (3.0, 200)])
def test_the_bound_holds_at_its_confidence_and_is_never_far_below_the_means_markov_bound(sigma, n):
    confidence, runs = 0.8, 150
    estimates = lognormal_log_estimates(runs, n, sigma, torch.Generator().manual_seed(int(10 * sigma) + n))
    bounds = torch.tensor([order_statistic_bound(row, confidence)[0] for row in estimates], dtype=torch.float64)
    # failures ~ Binomial(150, ≤ 0.2): above 45 (4.3 sd over the mean) is a false failure with probability < 1e-4
    assert (bounds > 0).sum() <= 45
    markov = estimates.logsumexp(1) - math.log(n) - math.log(1 / (1 - confidence))  # the mean's Markov bound
    assert (bounds >= markov - math.log(2) - 1e-9).all()
    if sigma < 1:  # light tails: the order statistics beat the mean's Markov bound
        assert (bounds > markov).float().mean() > 0.9


def test_estimates_that_overstate_z_break_the_bound():
    estimates = lognormal_log_estimates(100, 50, 1.0, torch.Generator().manual_seed(3)) + 2.0  # E Ẑ = e² Z
    bounds = torch.tensor([order_statistic_bound(row, 0.95)[0] for row in estimates])
    assert (bounds > 0).float().mean() > 0.9


def test_ais_chains_bound_the_exact_log_z_more_tightly_than_markov():
    rbm = random_rbm(8, 5, seed=2)
    exact = Exact()(rbm).log_z
    estimate = AIS(num_chains=200, num_steps=100)(rbm, generator=torch.Generator().manual_seed(0))
    combined, markov = estimate.order_statistic_bound(0.95), estimate.markov_bound(0.95)
    assert markov.value < combined.value <= exact
    assert "order statistics" in str(combined) and "Markov" in str(markov)
    assert Exact()(rbm).order_statistic_bound(0.95) is None


@pytest.mark.parametrize("bad", [torch.tensor([]), torch.zeros(2, 2), torch.tensor([0.0, float("nan")]), [0.0, 1.0]])
def test_bad_inputs_are_refused_in_one_line(bad):
    with pytest.raises(ValueError, match="log_estimates must"):
        order_statistic_bound(bad)
    with pytest.raises(ValueError, match="confidence must be a probability"):
        order_statistic_bound(torch.zeros(3), 1.5)
