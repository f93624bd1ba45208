"""Geometric and moment-averaged paths between Gaussians against their closed forms (Grosse et al. 2013, §4.1)."""

import math

import pytest
import torch

from pfzoo.estimators.annealing import anneal
from pfzoo.logmath import summarize_log_weights
from pfzoo.kernels import HMCKernel
from pfzoo.models import RBM, Gaussian
from pfzoo.paths import GaussianGeodesicPath, GaussianGeometricPath, GaussianMomentAveragedPath, OptimalSchedule, build, make_betas
from pfzoo.paths.gaussian import gaussian_kl, symmetric_divergence


def random_gaussian(dim, seed, shift=0.0):
    generator = torch.Generator().manual_seed(seed)
    factor = torch.randn(dim, dim, generator=generator, dtype=torch.float64)
    precision = factor @ factor.T / dim + 0.5 * torch.eye(dim, dtype=torch.float64)
    mean = torch.randn(dim, generator=generator, dtype=torch.float64) + shift
    return Gaussian.from_tensors(precision, mean)


@pytest.fixture
def endpoints():
    return random_gaussian(3, seed=0, shift=2.0), random_gaussian(3, seed=1)  # target, base


@pytest.mark.parametrize("beta", [0.0, 0.2, 0.7, 1.0])
def test_moment_averaged_path_matches_the_closed_form(endpoints, beta):
    target, base = endpoints
    p = GaussianMomentAveragedPath(target, base).parameters(beta)
    mu0, mu1 = base.mean.detach(), target.mean.detach()
    sigma0, sigma1 = base.covariance.detach(), target.covariance.detach()
    delta = mu1 - mu0
    torch.testing.assert_close(p.mean, (1 - beta) * mu0 + beta * mu1)
    torch.testing.assert_close(p.covariance, (1 - beta) * sigma0 + beta * sigma1 + beta * (1 - beta) * torch.outer(delta, delta))
    # the defining property: E_β[x xᵀ] is the β-average of the endpoints' second moments
    second = lambda m, s: s + torch.outer(m, m)  # noqa: E731
    torch.testing.assert_close(p.second_moment, (1 - beta) * second(mu0, sigma0) + beta * second(mu1, sigma1))


@pytest.mark.parametrize("beta", [0.0, 0.3, 1.0])
def test_geometric_path_averages_natural_parameters(endpoints, beta):
    target, base = endpoints
    p = GaussianGeometricPath(target, base).parameters(beta)
    precision0, precision1 = base.precision.detach(), target.precision.detach()
    torch.testing.assert_close(p.precision, (1 - beta) * precision0 + beta * precision1)
    torch.testing.assert_close(p.linear, (1 - beta) * precision0 @ base.mean.detach() + beta * precision1 @ target.mean.detach())


@pytest.mark.parametrize("path_class", [GaussianGeometricPath, GaussianMomentAveragedPath])
def test_endpoint_densities_are_the_models(endpoints, path_class):
    target, base = endpoints
    path = path_class(target, base)
    x = torch.randn(7, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    torch.testing.assert_close(path.log_f(x, 0.0), -base.energy(x).detach())
    torch.testing.assert_close(path.log_f(x, 1.0), -target.energy(x).detach())
    torch.testing.assert_close(path.base_log_partition(), base.log_partition().detach())
    # the log density is the intermediate Gaussian's, up to a constant in x
    p = path.parameters(0.4)
    reference = torch.distributions.MultivariateNormal(p.mean, covariance_matrix=p.covariance).log_prob(x)
    difference = path.log_f(x, 0.4) - reference
    torch.testing.assert_close(difference, difference[:1].expand(7))


@pytest.mark.parametrize("path_class", [GaussianGeometricPath, GaussianMomentAveragedPath])
def test_transitions_draw_the_intermediate_gaussian(endpoints, path_class):
    target, base = endpoints
    path = path_class(target, base)
    generator = torch.Generator().manual_seed(3)
    _, info = path.transition(path.sample_base(4, generator=generator), 0.6, generator=generator)
    assert info.accept_prob is None  # perfect transitions: always accepted
    x = path.transition(path.init(torch.zeros(200_000, 3, dtype=torch.float64)), 0.6, generator=generator)[0].position
    p = path.parameters(0.6)
    stderr = (p.covariance.diagonal() / x.shape[0]).sqrt()
    assert ((x.mean(0) - p.mean).abs() < 4 * stderr).all()
    torch.testing.assert_close(torch.cov(x.T), p.covariance, atol=0.03 * p.covariance.abs().max().item(), rtol=0)


def test_symmetric_divergence_is_the_sum_of_both_kls(endpoints):
    target, base = endpoints
    path = GaussianMomentAveragedPath(target, base)
    p, q = path.parameters(0.1), path.parameters(0.35)
    torch.testing.assert_close(symmetric_divergence(p, q), gaussian_kl(p, q) + gaussian_kl(q, p))
    # one-dimensional check of the KL formula
    a = GaussianMomentAveragedPath(Gaussian.from_tensors(torch.tensor([[0.25]], dtype=torch.float64), torch.tensor([3.0], dtype=torch.float64)),
                                   Gaussian.from_tensors(torch.eye(1, dtype=torch.float64)))
    kl = gaussian_kl(a.parameters(0.0), a.parameters(1.0)).item()  # N(0,1) ‖ N(3, 4)
    assert kl == pytest.approx(0.5 * (1 / 4 + 9 / 4 - 1 + math.log(4)))


@pytest.mark.parametrize("path_class", [GaussianGeometricPath, GaussianMomentAveragedPath])
def test_ais_with_perfect_transitions_is_unbiased_and_its_bias_in_log_is_the_kl_sum(endpoints, path_class):
    """E[log w] = log Z − Σ_k KL(p_{k−1} ‖ p_k) exactly under perfect transitions; log Ẑ within 3 stderr of log Z."""
    target, base = endpoints
    path = path_class(target, base)
    betas = make_betas("linear", 30)
    generator = torch.Generator().manual_seed(4)
    result = anneal(path, betas, path.sample_base(20_000, generator=generator), generator=generator)
    log_weights = result.log_weights + path.base_log_partition()
    summary = summarize_log_weights(log_weights)
    exact = target.log_partition().item()
    assert abs(summary.log_mean.item() - exact) < 3 * summary.stderr.item()
    kl_sum = sum(path.kl_between(a, b).item() for a, b in zip(betas[:-1].tolist(), betas[1:].tolist()))
    mean_log_weight = log_weights.mean().item()
    assert kl_sum > 0.05  # the check below is not vacuous
    assert abs((exact - mean_log_weight) - kl_sum) < 4 * log_weights.std().item() / math.sqrt(log_weights.numel())


def test_moment_averaged_path_needs_far_fewer_distributions_for_distant_means():
    """Two unit-variance Gaussians d apart: with optimal schedules the first-order cost (Σ √J_j)²/2
    grows like d² on the geometric path and like (log d)² on the moment-averaged one (§4.1)."""
    base = Gaussian.from_tensors(torch.eye(1, dtype=torch.float64))
    knots = torch.cat([torch.zeros(1, dtype=torch.float64), torch.logspace(-8, -0.302, 400, dtype=torch.float64)])
    knots = torch.cat([knots, (1 - knots.flip(0))[1:]])  # dense near both ends
    costs = {}
    for d in (10.0, 100.0):
        target = Gaussian.from_tensors(torch.eye(1, dtype=torch.float64), torch.tensor([d], dtype=torch.float64))
        for name, path_class in (("GA", GaussianGeometricPath), ("MA", GaussianMomentAveragedPath)):
            schedule = OptimalSchedule.for_path(path_class(target, base), knots)
            costs[name, d] = schedule.divergences.sqrt().sum().item() ** 2 / 2
    assert costs["GA", 10.0] == pytest.approx(50.0, rel=1e-3)  # (d/σ)²/2
    assert costs["GA", 100.0] / costs["GA", 10.0] == pytest.approx(100.0, rel=1e-3)
    ratio = costs["MA", 100.0] / costs["MA", 10.0]
    assert 3.0 < ratio < 6.0  # (log 100 / log 10)² = 4, against 100 for the geometric path


def test_bad_arguments_raise(endpoints):
    target, base = endpoints
    with pytest.raises(ValueError, match="a Gaussian path's base needs a pfzoo model"):
        GaussianGeometricPath(target, object())
    with pytest.raises(ValueError, match="a Gaussian path's target needs a Gaussian density"):
        GaussianGeometricPath(RBM(3, 2), base)
    with pytest.raises(ValueError, match="dimensions"):
        GaussianMomentAveragedPath(target, Gaussian(2).double())
    with pytest.raises(ValueError, match=r"beta must lie in \[0, 1\]"):
        GaussianMomentAveragedPath(target, base).parameters(1.5)
    with pytest.raises(ValueError, match="path must be one of"):
        build(target, kind="spline", base="isotropic")
    with pytest.raises(ValueError, match="kernel must be a pfzoo kernel"):
        build(target, kind="moment_averaged", base="isotropic", kernel=object())
    with pytest.raises(ValueError, match="kernel=HMCKernel needs an energy and its gradient over real vectors; a Gaussian path offers exact draws"):
        build(target, kind="moment_averaged", base="isotropic", kernel=HMCKernel(0.1))


@pytest.mark.parametrize("path_class", [GaussianGeometricPath, GaussianMomentAveragedPath])
def test_batched_kl_sum_matches_the_stepwise_sum(endpoints, path_class):
    target, base = endpoints
    path = path_class(target, base)
    betas = make_betas("sigmoid", 17)
    stepwise = sum(path.kl_between(a, b) for a, b in zip(betas[:-1].tolist(), betas[1:].tolist()))
    torch.testing.assert_close(path.kl_sum(betas), stepwise)


@pytest.mark.parametrize("kind", ["geometric", "moment_averaged"])
def test_ais_estimator_runs_either_path_on_a_gaussian(endpoints, kind):
    from pfzoo.estimators import AIS

    target, _ = endpoints
    estimate = AIS(num_chains=4000, num_steps=50, base="isotropic", path=kind)(target, generator=torch.Generator().manual_seed(5))
    assert abs(estimate.log_z - target.log_partition().item()) < 3 * estimate.stderr
    with pytest.raises(ValueError, match="path must be one of"):
        AIS(num_chains=10, num_steps=5, base="isotropic", path="spline")(target)


def univariate(mean, variance):
    return Gaussian.from_tensors(torch.tensor([[1.0 / variance]], dtype=torch.float64), torch.tensor([mean], dtype=torch.float64))


@pytest.mark.parametrize("mean, variance", [(4.0, 1.0), (0.0, 9.0), (2.0, 0.25), (-30.0, 4.0)])
def test_the_geodesic_is_the_optimal_path_with_energy_its_squared_fisher_rao_length(mean, variance):
    """K · Σ KL → ℓ²/2 on the geodesic at constant speed (its ends are the models, its length the closed-form distance),
    and no other path does better: GA and MA under their optimal schedules spend at least as much."""
    target, base = univariate(mean, variance), univariate(0.0, 1.0)
    geodesic = GaussianGeodesicPath(target, base)
    means, covariances = geodesic.mean_covariance(torch.tensor([0.0, 1.0], dtype=torch.float64))  # the formula at its ends, not the cache
    torch.testing.assert_close(means[:, 0], torch.tensor([0.0, mean], dtype=torch.float64))
    torch.testing.assert_close(covariances[:, 0, 0], torch.tensor([1.0, variance], dtype=torch.float64))
    sigma = math.sqrt(variance)
    length = math.sqrt(2) * math.acosh(1 + (mean**2 / 2 + (sigma - 1) ** 2) / (2 * sigma))
    assert geodesic.length().item() == pytest.approx(length, rel=1e-12)
    num_steps = 4000
    energy = num_steps * geodesic.kl_sum(torch.linspace(0, 1, num_steps + 1, dtype=torch.float64)).item()
    assert energy == pytest.approx(length**2 / 2, rel=1e-3)
    knots = torch.linspace(0, 1, 401, dtype=torch.float64)
    for path_class in (GaussianGeometricPath, GaussianMomentAveragedPath):
        path = path_class(target, base)
        betas = OptimalSchedule.for_path(path, knots).betas(num_steps)
        assert num_steps * path.kl_sum(betas).item() >= energy * (1 - 1e-3), path_class.__name__


def test_the_geodesic_path_refuses_more_than_one_dimension(endpoints):
    with pytest.raises(ValueError, match="GaussianGeodesicPath needs univariate Gaussians .* got dimension 3"):
        GaussianGeodesicPath(*endpoints)
