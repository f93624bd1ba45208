"""HMC and random-walk Metropolis: integrator properties and invariance of target distributions."""

import math

import pytest
import torch

from pfzoo.kernels import Evaluation, HMCKernel, HMCState, RandomWalkMetropolis, hais_momentum_refresh, leapfrog

PRECISION = torch.tensor([[2.0, 1.2], [1.2, 1.0]], dtype=torch.float64)  # correlation ≈ -0.85
COVARIANCE = torch.linalg.inv(PRECISION)


def gaussian_evaluate(x):
    grad = x @ PRECISION
    return Evaluation(0.5 * (grad * x).sum(-1), grad, None)


class FunctionTarget:
    """A :class:`~pfzoo.kernels.PositionTarget` from an energy function: statistics are the evaluation at β = 1,
    ``E_β = β E``."""

    def __init__(self, evaluate):
        self.evaluate = evaluate

    def statistics(self, x):
        return self.evaluate(x)

    def evaluation(self, stats, beta):
        return Evaluation(beta * stats.energy, beta * stats.grad, stats)


def exact_gaussian_samples(n, generator):
    chol = torch.linalg.cholesky(COVARIANCE)
    return torch.randn(n, 2, generator=generator, dtype=torch.float64) @ chol.T


def assert_moments_match(x, mean, cov, k=5.0):
    """Sample mean and covariance within k standard errors (Gaussian fourth-moment formula)."""
    n = x.shape[0]
    assert ((x.mean(0) - mean).abs() <= k * torch.sqrt(torch.diagonal(cov) / n)).all(), x.mean(0)
    sample_cov = torch.cov(x.T)
    se = torch.sqrt((cov**2 + torch.outer(torch.diagonal(cov), torch.diagonal(cov))) / n)
    assert ((sample_cov - cov).abs() <= k * se).all(), sample_cov


def run_kernel(kernel, x, evaluate, steps, generator):
    target = FunctionTarget(evaluate)
    state = kernel.init(x, target, generator=generator)
    accepted = []
    for _ in range(steps):
        state, info = kernel.step(state, target, beta=1.0, generator=generator)
        accepted.append(info.accepted.double().mean().item())
    return state.position, sum(accepted) / len(accepted)


@pytest.mark.parametrize(
    "kernel",
    [
        HMCKernel(0.3, num_leapfrog=1),  # HAIS: one leapfrog step, partial momentum refresh
        HMCKernel(0.6, num_leapfrog=5, momentum_refresh=1.0),  # standard HMC
        HMCKernel(0.8, num_leapfrog=1, momentum_refresh=0.1, flip="reduced"),  # many rejections and flips
        RandomWalkMetropolis(0.5),
    ],
    ids=["hais", "standard", "reduced-flips", "metropolis"],
)
def test_kernel_leaves_correlated_gaussian_invariant(kernel):
    g = torch.Generator().manual_seed(0)
    x, acceptance = run_kernel(kernel, exact_gaussian_samples(20000, g), gaussian_evaluate, 40, g)
    assert 0.05 < acceptance < 1.0
    assert_moments_match(x, torch.zeros(2, dtype=torch.float64), COVARIANCE)


def test_moment_test_has_power():
    """A kernel that ignores rejections (always moves) must fail the same check."""
    g = torch.Generator().manual_seed(0)
    x = exact_gaussian_samples(20000, g)
    p = torch.randn(x.shape, generator=g, dtype=torch.float64)
    for _ in range(40):
        x, p, _ = leapfrog(x, p, gaussian_evaluate(x), gaussian_evaluate, step_size=1.3, num_steps=1)
        p = torch.randn(x.shape, generator=g, dtype=torch.float64)
    with pytest.raises(AssertionError):
        assert_moments_match(x, torch.zeros(2, dtype=torch.float64), COVARIANCE)


def test_reflection_samples_truncated_gaussian():
    """With reflection at 0, HMC on E = ½x² restricted to x ≥ 0 samples the half-normal."""
    g = torch.Generator().manual_seed(1)
    evaluate = lambda x: Evaluation(0.5 * x.square().sum(-1), x.clone(), None)
    start = torch.randn(20000, 3, generator=g, dtype=torch.float64).abs()
    x, _ = run_kernel(HMCKernel(0.5, num_leapfrog=3, lower=0.0), start, evaluate, 30, g)
    assert (x >= 0).all()
    mean, var = math.sqrt(2 / math.pi), 1 - 2 / math.pi
    assert ((x.mean(0) - mean).abs() < 5 * math.sqrt(var / 20000)).all()
    assert ((x.square().mean(0) - 1.0).abs() < 5 * math.sqrt(2 / 20000)).all()


def test_leapfrog_is_reversible_with_a_momentum_flip():
    g = torch.Generator().manual_seed(2)
    x0 = torch.randn(50, 2, generator=g, dtype=torch.float64)
    p0 = torch.randn(50, 2, generator=g, dtype=torch.float64)
    x1, p1, e1 = leapfrog(x0, p0, gaussian_evaluate(x0), gaussian_evaluate, step_size=0.3, num_steps=7)
    x2, p2, _ = leapfrog(x1, -p1, e1, gaussian_evaluate, step_size=0.3, num_steps=7)
    assert torch.allclose(x2, x0, atol=1e-12) and torch.allclose(-p2, p0, atol=1e-12)
    lower = torch.zeros(2, dtype=torch.float64)
    x0 = x0.abs()
    x1, p1, e1 = leapfrog(x0, p0, gaussian_evaluate(x0), gaussian_evaluate, step_size=0.3, num_steps=7, lower=lower)
    x2, p2, _ = leapfrog(x1, -p1, e1, gaussian_evaluate, step_size=0.3, num_steps=7, lower=lower)
    assert torch.allclose(x2, x0, atol=1e-12) and torch.allclose(-p2, p0, atol=1e-12)


def test_leapfrog_energy_error_is_second_order_on_harmonic_oscillator():
    evaluate = lambda x: Evaluation(0.5 * x.square().sum(-1), x.clone(), None)

    def max_energy_error(step_size):
        x = torch.tensor([[1.0]], dtype=torch.float64)
        p = torch.tensor([[0.0]], dtype=torch.float64)
        start = 0.5
        worst, current = 0.0, evaluate(x)
        for _ in range(int(round(2 * math.pi / step_size))):  # one period
            x, p, current = leapfrog(x, p, current, evaluate, step_size=step_size)
            worst = max(worst, abs(current.energy.item() + 0.5 * p.square().sum().item() - start))
        return worst

    coarse, fine = max_energy_error(0.1), max_energy_error(0.05)
    assert coarse < 0.01
    assert 3.5 < coarse / fine < 4.5  # O(ε²)


def test_hais_refresh_rule_and_bad_arguments():
    assert hais_momentum_refresh(1.0) == pytest.approx(0.5)
    assert 1 - hais_momentum_refresh(0.2) == pytest.approx(0.5**0.2)
    with pytest.raises(ValueError, match="step_size"):
        HMCKernel(0.0)
    with pytest.raises(ValueError, match="momentum_refresh"):
        HMCKernel(0.1, momentum_refresh=1.5)
    with pytest.raises(ValueError, match="flip"):
        HMCKernel(0.1, flip="sometimes")
    with pytest.raises(ValueError, match="scale"):
        RandomWalkMetropolis(-1.0)


def test_stiffness_shrinks_the_step_with_beta():
    """At β the kernel steps ε / √(1 + β s); HAIS's default refresh follows that step, a fixed refresh stays fixed."""
    kernel = HMCKernel(0.4, stiffness=3.0, lower=0.0)
    assert kernel.step_size_at(0.0) == pytest.approx(0.4)
    hot = kernel.step_size_at(1.0)
    assert hot == pytest.approx(0.2) and kernel.refresh_at(hot) == pytest.approx(hais_momentum_refresh(0.2))
    # a step at β = 1 uses (and reports) the shrunken step, and the kernel keeps its settings
    target = FunctionTarget(lambda x: Evaluation(0.5 * x.square().sum(-1), x.clone(), None))
    g = torch.Generator().manual_seed(0)
    _, info = kernel.step(kernel.init(torch.ones(3, 2, dtype=torch.float64), target, generator=g), target, beta=1.0, generator=g)
    assert info.step_size == pytest.approx(0.2)
    assert kernel.step_size == 0.4 and kernel.stiffness == 3.0 and kernel.lower.item() == 0.0
    fixed = HMCKernel(0.4, stiffness=3.0, momentum_refresh=0.3)
    assert fixed.refresh_at(fixed.step_size_at(1.0)) == 0.3
    plain = HMCKernel(0.4)
    assert plain.step_size_at(0.7) == 0.4 and plain.refresh_at(plain.step_size_at(0.7)) == hais_momentum_refresh(plain.step_size)
    reflecting = kernel.reflecting_at(-1.0)
    assert reflecting.stiffness == 3.0 and reflecting.lower.item() == -1.0 and reflecting.step_size == 0.4
    for bad in (-1.0, float("nan"), "1"):
        with pytest.raises(ValueError, match="stiffness"):
            HMCKernel(0.1, stiffness=bad)


def test_same_seed_same_chains():
    def run(seed):
        g = torch.Generator().manual_seed(seed)
        return run_kernel(HMCKernel(0.3), exact_gaussian_samples(100, g), gaussian_evaluate, 5, g)[0]

    assert torch.equal(run(0), run(0)) and not torch.equal(run(0), run(1))


def test_a_diverging_trajectory_is_rejected_with_acceptance_zero_not_nan():
    """An energy that overflows along the trajectory (inf or NaN Hamiltonian) is a rejection, so step-size adaptation
    that averages acceptance probabilities never sees NaN."""

    def evaluate(x):
        energy = torch.where(x[:, 0] > 1.0, torch.full_like(x[:, 0], float("nan")), 0.5 * x.square().sum(-1))
        return Evaluation(energy, x.clone())

    start = torch.tensor([[0.0, 0.0], [0.0, 0.0]])
    target = FunctionTarget(evaluate)
    state = HMCState(start, torch.tensor([[100.0, 0.0], [0.01, 0.0]]), target.statistics(start))
    kernel = HMCKernel(0.1, momentum_refresh=1e-12)
    new_state, info = kernel.step(state, target, beta=1.0, generator=torch.Generator().manual_seed(0))
    assert info.accept_prob[0].item() == 0.0 and not info.accepted[0] and torch.equal(new_state.position[0], start[0])
    assert info.accept_prob[1].item() > 0.9
