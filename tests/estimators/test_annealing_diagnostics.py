"""Per-step annealing diagnostics against exact divergences (Grosse, Maddison & Salakhutdinov 2013, §3)."""

import itertools
from functools import partial

import pytest
import torch
from factories import random_rbm

from pfzoo.estimators import AIS, HAIS
from pfzoo.estimators.annealing import anneal
from pfzoo.models import RBM, Gaussian
from pfzoo.paths import OptimalSchedule, build, make_betas


tiny_rbm = partial(random_rbm, 6, 3, 1.5, bias_scale=1.0, draw_dtype=None)  # float64 draws: weights N(0, 1.5²), biases N(0, 1)


def exact_path_kls(path, betas):
    """Exact KL(p_{k−1} ‖ p_k) along an RBM geometric path, by enumerating the 2⁶ visible states."""
    states = torch.tensor(list(itertools.product([0.0, 1.0], repeat=6)), dtype=torch.float64)
    stats = path.target.statistics(states)
    log_p = []
    for beta in betas.tolist():
        log_f = path.log_f(states, stats, beta)
        log_p.append(log_f - torch.logsumexp(log_f, 0))
    return torch.stack([(p.exp() * (p - q)).sum() for p, q in zip(log_p[:-1], log_p[1:])])


def test_increment_variances_estimate_the_exact_divergences_along_an_rbm_path():
    rbm = tiny_rbm()
    path, _ = build(rbm, base="uniform")
    betas = make_betas("linear", 20)
    generator = torch.Generator().manual_seed(1)
    result = anneal(path, betas, path.sample_base(40_000, generator=generator), generator=generator, diagnostics=True)
    diagnostics = result.diagnostics
    exact = exact_path_kls(path, betas)
    # J_k ≈ 2 KL to second order; the chains lag the path a little, so compare the totals and the shape
    assert diagnostics.cost_functional == pytest.approx(exact.sum().item(), rel=0.15)
    assert torch.corrcoef(torch.stack([diagnostics.symmetric_kl, 2 * exact]))[0, 1] > 0.95
    torch.testing.assert_close(diagnostics.increment_mean.sum(), result.log_weights.mean(), rtol=1e-9, atol=1e-9)
    assert diagnostics.betas.tolist() == betas[1:].tolist()
    assert ((diagnostics.ess >= 1.0 - 1e-9) & (diagnostics.ess <= 40_000 * (1 + 1e-9))).all()
    assert (diagnostics.ess.diff() <= 1e-6 * 40_000).all()  # accumulating weights only lose effective samples here


def test_diagnostics_leave_the_weights_and_the_random_stream_unchanged():
    rbm = tiny_rbm(2)
    path, _ = build(rbm, base="uniform")
    runs = []
    for diagnostics in (False, True):
        generator = torch.Generator().manual_seed(3)
        result = anneal(path, make_betas("linear", 15), path.sample_base(50, generator=generator), generator=generator, diagnostics=diagnostics)
        runs.append((result, torch.rand(1, generator=generator)))
    assert torch.equal(runs[0][0].log_weights, runs[1][0].log_weights) and torch.equal(runs[0][1], runs[1][1])
    assert runs[0][0].diagnostics is None and runs[1][0].diagnostics is not None


def test_estimators_return_diagnostics_in_their_info():
    rbm = tiny_rbm(4)
    estimate = AIS(num_chains=200, num_steps=30, diagnostics=True)(rbm, generator=torch.Generator().manual_seed(5))
    assert estimate.info["diagnostics"].increment_var.shape == (30,)
    assert "diagnostics" not in AIS(num_chains=200, num_steps=30)(rbm, generator=torch.Generator().manual_seed(5)).info
    target = Gaussian.from_tensors(torch.eye(2, dtype=torch.float64) * 4.0, torch.tensor([1.0, -1.0], dtype=torch.float64))
    hais = HAIS(num_chains=100, num_steps=40, diagnostics=True)(target, generator=torch.Generator().manual_seed(6))
    assert hais.info["diagnostics"].ess.shape == (40,)


def test_pilot_diagnostics_give_a_better_schedule():
    """An OptimalSchedule fitted to a pilot run's divergences beats the linear schedule at equal K (exact KL sums)."""
    generator = torch.Generator().manual_seed(7)
    rbm = RBM.from_tensors(4 * torch.randn(6, 3, generator=generator, dtype=torch.float64),  # strong weights: divergence piles up late
                           torch.randn(6, generator=generator, dtype=torch.float64), torch.randn(3, generator=generator, dtype=torch.float64))
    path, _ = build(rbm, base="uniform")
    pilot = AIS(num_chains=5000, num_steps=50, diagnostics=True)(rbm, generator=torch.Generator().manual_seed(8)).info["diagnostics"]
    schedule = OptimalSchedule.from_diagnostics(pilot)
    linear_cost = exact_path_kls(path, make_betas("linear", 40)).sum().item()
    optimal_cost = exact_path_kls(path, schedule.betas(40)).sum().item()
    assert optimal_cost < 0.85 * linear_cost  # measured: 0.159 against 0.221


def test_raise_diagnostics_pool_batches_and_report_per_example_ess(monkeypatch):
    from pfzoo.estimators import RAISE, raise_

    rbm = tiny_rbm(9)
    data = torch.bernoulli(torch.full((6, 6), 0.4), generator=torch.Generator().manual_seed(10)).double()
    estimator = RAISE(num_chains=50, num_steps=20, base="uniform", diagnostics=True)
    whole = estimator.log_likelihood(rbm, data, generator=torch.Generator().manual_seed(11)).info["diagnostics"]
    monkeypatch.setattr(raise_, "_CHAIN_ROWS_PER_BATCH", 100)  # two examples per batch: three batches
    split = estimator.log_likelihood(rbm, data, generator=torch.Generator().manual_seed(11)).info["diagnostics"]
    assert whole.betas.tolist() == make_betas("linear", 20).flip(0)[1:].tolist()  # β descending
    assert ((whole.ess >= 1.0 - 1e-9) & (whole.ess <= 50 * (1 + 1e-9))).all()  # per example: at most its 50 chains
    torch.testing.assert_close(split.increment_mean, whole.increment_mean, rtol=0.2, atol=0.05)
    assert whole.cost_functional > 0


def test_pooled_increment_statistics_equal_those_of_the_whole_batch():
    from pfzoo.estimators.annealing import AnnealingDiagnostics
    from pfzoo.estimators.raise_ import _pool_diagnostics

    increments = torch.randn(3, 10 * 4, generator=torch.Generator().manual_seed(12), dtype=torch.float64)  # 3 steps, 10 examples × 4 chains
    first, second = increments[:, :12], increments[:, 12:]  # 3 and 7 examples

    def summary(block):
        return AnnealingDiagnostics(torch.ones(3, dtype=torch.float64), block.mean(1), block.var(1), torch.full((3,), float(block.shape[1] // 4)))

    pooled = _pool_diagnostics([(summary(first), 3), (summary(second), 7)], num_chains=4)
    torch.testing.assert_close(pooled.increment_mean, increments.mean(1))
    torch.testing.assert_close(pooled.increment_var, increments.var(1))
    torch.testing.assert_close(pooled.ess, torch.full((3,), (3 * 3 + 7 * 7) / 10, dtype=torch.float64))
