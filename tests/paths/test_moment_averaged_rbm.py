"""The moment-averaged spline path for RBMs on tiny models, against enumeration (Grosse et al. 2013, §4.2)."""

import itertools

import pytest
import torch

from pfzoo.estimators.annealing import anneal
from pfzoo.logmath import summarize_log_weights
from pfzoo.models import RBM
from pfzoo.paths import RBMSplinePath, fit_moment_averaged_knots, make_betas

STATES = torch.tensor(list(itertools.product([0.0, 1.0], repeat=6)), dtype=torch.float64)


def tiny_rbm(seed=0, scale=2.0):
    generator = torch.Generator().manual_seed(seed)
    return RBM.from_tensors(scale * torch.randn(6, 3, generator=generator, dtype=torch.float64),
                            torch.randn(6, generator=generator, dtype=torch.float64), torch.randn(3, generator=generator, dtype=torch.float64))


def exact_moments(rbm):
    """(E[v], E[h], E[vhᵀ]) by enumerating the visible states."""
    log_p = -rbm.free_energy(STATES).double()
    p = (log_p - torch.logsumexp(log_p, 0)).exp()
    hidden = torch.sigmoid(STATES @ rbm.weight + rbm.hidden_bias).detach()
    return p @ STATES, p @ hidden, (STATES * p[:, None]).T @ hidden


def moment_distance(moments, goal):
    return sum((a - b).abs().max().item() for a, b in zip(moments, goal))


@pytest.fixture
def spline():
    target = tiny_rbm()
    base = target.annealing_base("uniform")
    knot_betas = torch.tensor([0.0, 0.3, 0.6, 1.0], dtype=torch.float64)
    knots = fit_moment_averaged_knots(target, base, knot_betas, target_moments=exact_moments(target), num_chains=4000, iterations=1000,
                                      generator=torch.Generator().manual_seed(1))
    return target, base, knots, knot_betas


def test_log_f_is_each_knot_rbm_at_its_knot_and_the_interpolated_rbm_between(spline):
    target, base, knots, knot_betas = spline
    path = RBMSplinePath(knots, knot_betas)
    stats = path.statistics(STATES)
    for knot, beta in zip(knots, knot_betas.tolist()):
        torch.testing.assert_close(path.log_f(stats, beta), -knot.free_energy(STATES).double())
    weight, visible_bias, hidden_bias = path.interpolated(0.45)  # halfway between the knots at 0.3 and 0.6
    halfway = RBM.from_tensors((knots[1].weight + knots[2].weight) / 2, (knots[1].visible_bias + knots[2].visible_bias) / 2,
                               (knots[1].hidden_bias + knots[2].hidden_bias) / 2)
    torch.testing.assert_close(weight, halfway.weight)
    torch.testing.assert_close(path.log_f(stats, 0.45), -halfway.free_energy(STATES).double())
    # increments inside a segment and across knots are differences of log f
    for beta_from, beta_to in ((0.31, 0.32), (0.25, 0.65), (0.9, 1.0)):
        torch.testing.assert_close(path.log_weight_increment(stats, beta_from, beta_to),
                                   path.log_f(stats, beta_to) - path.log_f(stats, beta_from), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(path.base_log_partition(), base.log_partition().double())


def test_fitted_knots_match_the_averaged_moments_better_than_the_geometric_path(spline):
    target, base, knots, knot_betas = spline
    s0, s1 = exact_moments(base), exact_moments(target)
    for knot, b in zip(knots[1:-1], knot_betas[1:-1].tolist()):
        goal = [(1 - b) * a + b * c for a, c in zip(s0, s1)]
        geometric = RBM.from_tensors(b * target.weight, torch.lerp(base.visible_bias, target.visible_bias, b),
                                     torch.lerp(base.hidden_bias, target.hidden_bias, b))
        fitted_error, geometric_error = moment_distance(exact_moments(knot), goal), moment_distance(exact_moments(geometric), goal)
        assert fitted_error < 0.15 * geometric_error and fitted_error < 0.04


def test_ais_along_the_spline_is_within_its_stderr_of_the_exact_log_z(spline):
    target, _, knots, knot_betas = spline
    path = RBMSplinePath(knots, knot_betas)
    generator = torch.Generator().manual_seed(2)
    result = anneal(path, make_betas("linear", 200), path.sample_base(3000, generator=generator), generator=generator)
    summary = summarize_log_weights(result.log_weights + path.base_log_partition())
    assert abs(summary.log_mean.item() - target.log_partition().item()) < 3 * summary.stderr.item()


def test_transition_leaves_the_interpolated_rbm_invariant(spline):
    """Many chains from the exact p_β, one transition: the empirical distribution stays p_β (χ² over the 64 states)."""
    _, _, knots, knot_betas = spline
    path = RBMSplinePath(knots, knot_betas)
    stats = path.statistics(STATES)
    log_p = path.log_f(stats, 0.45)
    p = (log_p - torch.logsumexp(log_p, 0)).exp()
    generator = torch.Generator().manual_seed(3)
    start = STATES[torch.multinomial(p, 100_000, replacement=True, generator=generator)]
    moved, _ = path.transition(start, path.statistics(start), 0.45, generator=generator)
    counts = torch.zeros(64, dtype=torch.float64).index_add_(0, (moved @ (2.0 ** torch.arange(5, -1, -1, dtype=torch.float64))).long(),
                                                             torch.ones(100_000, dtype=torch.float64))
    expected = 100_000 * p
    chi_square = ((counts - expected).square() / expected).sum().item()
    assert chi_square < 63 + 5 * (2 * 63) ** 0.5  # 63 degrees of freedom, 5 sd


def test_rbm_annealing_path_builds_a_reproducible_spline():
    target = tiny_rbm(4, scale=1.0)
    base = target.annealing_base("uniform")
    first = target.annealing_path("moment_averaged", base, num_knots=2)
    second = target.annealing_path("moment_averaged", base, num_knots=2)
    assert isinstance(first, RBMSplinePath) and torch.equal(first.weights, second.weights)
    assert first.knot_betas.tolist() == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda t, b: RBMSplinePath([b, t], [0.0, 0.5]), "increase strictly"),
        (lambda t, b: RBMSplinePath([b], [0.0]), "one knot RBM per knot"),
        (lambda t, b: RBMSplinePath([t, b], [0.0, 1.0]), "zero weights"),
        (lambda t, b: fit_moment_averaged_knots(t, t, [0.0, 1.0]), "zero weights"),
        (lambda t, b: t.annealing_path("moment_averaged", b, kernel=object()), "kernel must be None"),
        (lambda t, b: t.annealing_path("spline", b), "path must be one of"),
    ],
)
def test_bad_arguments_raise(make, message):
    target = tiny_rbm()
    with pytest.raises(ValueError, match=message):
        make(target, target.annealing_base("uniform"))
