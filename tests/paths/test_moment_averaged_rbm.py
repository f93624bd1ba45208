"""The moment-averaged spline path for RBMs on tiny models, against enumeration (Grosse et al. 2013, §4.2)."""

from functools import partial

import pytest
import torch
from factories import all_binary_states, random_rbm
from scipy import stats as scipy_stats

from pfzoo.estimators.annealing import anneal
from pfzoo.kernels import GibbsState
from pfzoo.logmath import summarize_log_weights
from pfzoo.models import RBM
from pfzoo.paths import RBMSplinePath, build, exact_rbm_moments, fit_moment_averaged_knots, make_betas, path_kinds, rbm_moments

V, H = 6, 3
STATES = all_binary_states(V, msb_first=True)  # [64, V]
HIDDEN_STATES = all_binary_states(H, msb_first=True)  # [8, H]
KNOT_BETAS = torch.tensor([0.0, 0.3, 0.6, 1.0], dtype=torch.float64)


# This file's RBMs: weight scale 2 unless given, N(0, 1) biases, drawn in the model's dtype.
random_rbm = partial(random_rbm, scale=2.0, bias_scale=1.0, draw_dtype=None)


def geometric_rbm(target, base, b):
    """The geometric path's RBM at b: W = b W_1, biases interpolated."""
    return RBM.from_tensors(b * target.weight.detach(), torch.lerp(base.visible_bias, target.visible_bias, b).detach(),
                            torch.lerp(base.hidden_bias, target.hidden_bias, b).detach())


def moment_error(moments, goal):
    """Largest absolute deviation over all entries of (E[v], E[h], E[vhᵀ])."""
    return max((a - b).abs().max().item() for a, b in zip(moments, goal))


def state_index(v):
    return (v.double() @ (2.0 ** torch.arange(V - 1, -1, -1, dtype=torch.float64))).long()


@pytest.fixture(scope="module")
def spline():
    target = random_rbm(V, H)
    base = target.annealing_base("uniform")
    knots = fit_moment_averaged_knots(target, base, KNOT_BETAS, target_moments=exact_rbm_moments(target), num_chains=1000, iterations=600,
                                      generator=torch.Generator().manual_seed(1))
    return target, base, knots, RBMSplinePath(knots, KNOT_BETAS)


def arbitrary_spline(dtype=torch.float64, shape=(V, H), scale=2.0):
    """A spline through unfitted knots (the path's mechanics do not depend on how knots were found)."""
    target = random_rbm(*shape, scale=scale, seed=5, dtype=dtype)
    knots = [target.annealing_base("uniform")]
    for j, b in enumerate(KNOT_BETAS[1:-1].tolist()):
        noise = random_rbm(*shape, scale=0.5, seed=10 + j, dtype=dtype)
        knots.append(RBM.from_tensors(b * target.weight + noise.weight, b * target.visible_bias + noise.visible_bias,
                                      b * target.hidden_bias + noise.hidden_bias))
    knots.append(target)
    return knots, RBMSplinePath(knots, KNOT_BETAS)


# ---- the path's densities and increments ----------------------------------------------------


def test_log_f_is_each_knot_rbm_at_its_knot_and_the_interpolated_rbm_between():
    knots, path = arbitrary_spline()
    for knot, beta in zip(knots, KNOT_BETAS.tolist()):
        torch.testing.assert_close(path.log_f(STATES, beta), -knot.free_energy(STATES).detach(), rtol=0, atol=1e-12)
    halfway = RBM.from_tensors((knots[1].weight + knots[2].weight) / 2, (knots[1].visible_bias + knots[2].visible_bias) / 2,
                               (knots[1].hidden_bias + knots[2].hidden_bias) / 2)
    for got, expected in zip(path.interpolated(0.45), (halfway.weight, halfway.visible_bias, halfway.hidden_bias)):
        torch.testing.assert_close(got, expected.detach())
    torch.testing.assert_close(path.log_f(STATES, 0.45), -halfway.free_energy(STATES).detach(), rtol=0, atol=1e-12)
    assert path.base_log_partition().item() == pytest.approx(knots[0].log_partition().item(), abs=1e-12)


@pytest.mark.parametrize(
    "beta_from, beta_to",
    [(0.0, 0.1), (0.31, 0.32), (0.3, 0.45), (0.25, 0.3), (0.25, 0.65), (0.0, 1.0), (0.9, 1.0), (0.6, 0.3), (0.95, 0.05), (0.4, 0.4),
     (0.5, 0.5 + 1e-9)],
)
@pytest.mark.parametrize("stats_beta", [0.0, 0.45, 1.0])
def test_increments_are_differences_of_log_f_within_and_across_knots(beta_from, beta_to, stats_beta):
    """Whatever segment the statistics were computed for, increments split at knots equal log f_to − log f_from."""
    _, path = arbitrary_spline()
    stats = path.segment_statistics(STATES, path.locate(stats_beta)[0])
    expected = path.log_f(STATES, beta_to) - path.log_f(STATES, beta_from)
    torch.testing.assert_close(path.log_weight_increment(stats, beta_from, beta_to), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("num_steps", [7, 5000])
def test_float32_increments_telescope_to_the_end_point_difference(num_steps):
    """Per-step increments of a float32 path on a fixed state sum to log f_1 − log f_0 (float64) to high accuracy."""
    knots, path = arbitrary_spline(torch.float32, shape=(40, 30), scale=1.0)
    knots64 = [RBM.from_tensors(k.weight.double(), k.visible_bias.double(), k.hidden_bias.double()) for k in knots]
    v = (torch.rand(8, 40, generator=torch.Generator().manual_seed(3)) < 0.5).float()
    stats = path.segment_statistics(v)
    betas = make_betas("linear", num_steps).tolist()
    total = sum(path.log_weight_increment(stats, b0, b1) for b0, b1 in zip(betas[:-1], betas[1:]))
    exact = (knots64[0].free_energy(v.double()) - knots64[-1].free_energy(v.double())).detach()
    assert (total - exact).abs().max().item() < 1e-3


# ---- transitions -----------------------------------------------------------------------------


def exact_transition_matrix(path, beta):
    """T[v, v'] = Σ_h p_β(h | v) p_β(v' | h) of one block Gibbs sweep of the interpolated RBM, [64, 64]."""
    weight, visible_bias, hidden_bias = (x.double() for x in path.interpolated(beta))
    hidden_probs = torch.sigmoid(STATES @ weight + hidden_bias)  # [64, H]
    p_h = (HIDDEN_STATES[None] * hidden_probs[:, None] + (1 - HIDDEN_STATES[None]) * (1 - hidden_probs[:, None])).prod(-1)  # [64, 8]
    visible_probs = torch.sigmoid(HIDDEN_STATES @ weight.T + visible_bias)  # [8, V]
    p_v = (STATES[None] * visible_probs[:, None] + (1 - STATES[None]) * (1 - visible_probs[:, None])).prod(-1)  # [8, 64]
    return p_h @ p_v


@pytest.mark.parametrize("beta", [0.0, 0.2, 0.3, 0.45, 1.0])
def test_transition_kernel_leaves_p_beta_invariant_and_is_sampled_by_transition(beta):
    _, path = arbitrary_spline()
    pi = torch.softmax(path.log_f(STATES, beta), 0)
    kernel = exact_transition_matrix(path, beta)
    torch.testing.assert_close(pi @ kernel, pi, rtol=0, atol=1e-12)
    # path.transition draws from the row of that kernel, also from statistics of another segment
    start_index = 37
    start = STATES[start_index].expand(40_000, -1).clone()
    state = GibbsState(start, start.new_empty(0), path.segment_statistics(start, 2))
    state, info = path.transition(state, beta, generator=torch.Generator().manual_seed(4))
    moved, new_stats = state.position, state.stats
    assert info.accept_prob is None  # exact block Gibbs: always accepted
    counts = torch.bincount(state_index(moved), minlength=64).double()
    expected = 40_000 * kernel[start_index]
    keep = expected > 0
    assert scipy_stats.chisquare(counts[keep].numpy(), expected[keep].numpy() * counts.sum().item() / expected[keep].sum().item()).pvalue > 1e-4
    assert new_stats.segment == path.locate(beta)[0]
    torch.testing.assert_close(path.log_weight_increment(new_stats, beta, 0.7), path.log_f(moved, 0.7) - path.log_f(moved, beta),
                               rtol=1e-9, atol=1e-12)


# ---- moments and the fitted knots ----------------------------------------------------------------


@pytest.mark.parametrize("shape", [(V, H), (3, 5)])
def test_exact_moments_match_joint_enumeration(shape):
    rbm = random_rbm(*shape, scale=1.5, seed=7)
    vs = all_binary_states(shape[0], msb_first=True)
    hs = all_binary_states(shape[1], msb_first=True)
    v, h = vs.repeat_interleave(len(hs), 0), hs.repeat(len(vs), 1)
    p = torch.softmax(-rbm.energy(v, h).detach(), 0)
    expected = (p @ v, p @ h, (v * p[:, None]).T @ h)
    for got, want in zip(exact_rbm_moments(rbm), expected):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_rao_blackwellised_moments_from_exact_samples():
    rbm = random_rbm(V, H, scale=1.0, seed=8)
    p = torch.softmax(-rbm.free_energy(STATES).detach(), 0)
    samples = STATES[torch.multinomial(p, 50_000, replacement=True, generator=torch.Generator().manual_seed(5))]
    assert moment_error(rbm_moments(rbm, samples), exact_rbm_moments(rbm)) < 0.015  # ≤ 0.5/√50000 ≈ 0.0022 sd per entry


def test_fitted_knots_match_the_averaged_moments_much_better_than_the_geometric_path(spline):
    target, base, knots, _ = spline
    s0, s1 = exact_rbm_moments(base), exact_rbm_moments(target)
    for knot, b in zip(knots[1:-1], KNOT_BETAS[1:-1].tolist()):
        goal = [torch.lerp(a, c, b) for a, c in zip(s0, s1)]
        fitted, geometric = moment_error(exact_rbm_moments(knot), goal), moment_error(exact_rbm_moments(geometric_rbm(target, base, b)), goal)
        assert fitted < 0.02 and fitted < 0.15 * geometric, (b, fitted, geometric)  # measured: 0.003 vs 0.16, 0.008 vs 0.13
    assert knots[0] is base and knots[-1] is target


def test_target_moments_from_gibbs_chains_are_accurate():
    target = random_rbm(V, H, scale=1.0, seed=4)
    base = target.annealing_base("uniform")
    knots = fit_moment_averaged_knots(target, base, [0.0, 0.5, 1.0], num_chains=2000, burn_in=100, moment_sweeps=50, iterations=400,
                                      generator=torch.Generator().manual_seed(6))
    goal = [torch.lerp(a, c, 0.5) for a, c in zip(exact_rbm_moments(base), exact_rbm_moments(target))]
    assert moment_error(exact_rbm_moments(knots[1]), goal) < 0.02


def test_same_seed_gives_identical_knots_and_another_seed_different_ones():
    target = random_rbm(V, H, scale=1.0, seed=4)
    base = target.annealing_base("uniform")

    def fit(seed):
        return fit_moment_averaged_knots(target, base, KNOT_BETAS, num_chains=100, burn_in=20, moment_sweeps=5, iterations=20,
                                         generator=torch.Generator().manual_seed(seed))

    first, second, other = fit(0), fit(0), fit(1)
    for a, b in zip(first, second):
        assert torch.equal(a.weight, b.weight) and torch.equal(a.visible_bias, b.visible_bias) and torch.equal(a.hidden_bias, b.hidden_bias)
    assert not torch.equal(first[1].weight, other[1].weight)


# ---- AIS along the spline ------------------------------------------------------------------------


@pytest.mark.parametrize("num_steps", [200, 47])  # with K = 47 the steps k/47 straddle the knots 0.3 and 0.6
def test_ais_along_the_spline_is_within_three_stderr_of_the_exact_log_z(spline, num_steps):
    target, _, _, path = spline
    generator = torch.Generator().manual_seed(2)
    result = anneal(path, make_betas("linear", num_steps), path.sample_base(2000, generator=generator), generator=generator)
    summary = summarize_log_weights(result.log_weights + path.base_log_partition())
    exact = target.log_partition().item()
    assert abs(summary.log_mean.item() - exact) < 3 * summary.stderr.item() and summary.ess.item() > 200


def test_reverse_annealing_from_exact_target_samples_estimates_the_inverse_ratio(spline):
    """RAISE's direction: from exact samples of p_1 down to β = 0, E[w] = Z_0 / Z_1 (steps straddle the knots)."""
    target, _, _, path = spline
    generator = torch.Generator().manual_seed(3)
    p = torch.softmax(-target.free_energy(STATES).detach(), 0)
    start = STATES[torch.multinomial(p, 2000, replacement=True, generator=generator)]
    result = anneal(path, make_betas("linear", 47).flip(0), path.init(start), generator=generator)
    summary = summarize_log_weights(result.log_weights)
    expected = (path.base_log_partition() - target.log_partition()).item()
    assert abs(summary.log_mean.item() - expected) < 3 * summary.stderr.item() and summary.ess.item() > 200


def test_rbm_annealing_path_builds_a_reproducible_spline():
    target = random_rbm(V, H, scale=1.0, seed=4)
    base = target.annealing_base("uniform")
    options = dict(num_knots=2, num_chains=200, burn_in=50, moment_sweeps=10, iterations=50)
    (first, name), (second, _) = (build(target, kind="moment_averaged", base="uniform", **options) for _ in range(2))
    assert name == "uniform" and isinstance(first, RBMSplinePath) and torch.equal(first.weights, second.weights)
    assert first.knot_betas.tolist() == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])
    assert torch.equal(first.weights[0], base.weight) and torch.equal(first.visible_biases[0], base.visible_bias)  # from the uniform base
    seeded, _ = build(target, kind="moment_averaged", base="uniform", generator=torch.Generator().manual_seed(0), **options)
    assert torch.equal(first.weights, seeded.weights)
    assert "moment_averaged" in path_kinds(target)


# ---- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda t, b: RBMSplinePath([b, t], [0.0, 0.5]), "knot_betas must increase strictly from 0 to 1"),
        (lambda t, b: RBMSplinePath([b, t, t], [0.0, 0.6, 0.4, 1.0][:3]), "knot_betas must increase strictly"),
        (lambda t, b: RBMSplinePath([b], [0.0]), "knot_betas must hold at least two"),
        (lambda t, b: RBMSplinePath([b, t], [0.0, 0.5, 1.0]), "one RBM per knot"),
        (lambda t, b: RBMSplinePath([t, b], [0.0, 1.0]), r"knots\[0\] \(the base\) must have zero weights"),
        (lambda t, b: RBMSplinePath([b, random_rbm(V, H + 1)], [0.0, 1.0]), r"knots\[1\] has weight shape"),
        (lambda t, b: RBMSplinePath([b, random_rbm(V, H, dtype=torch.float32)], [0.0, 1.0]), r"knots\[1\] is torch.float32"),
        (lambda t, b: RBMSplinePath([b, t], [0.0, 1.0]).log_weight_increment(None, 0.0, 1.5), "beta_to must lie in"),
        (lambda t, b: fit_moment_averaged_knots(t, t, [0.0, 1.0]), "base must have zero weights"),
        (lambda t, b: fit_moment_averaged_knots(t, random_rbm(V, H + 1).annealing_base("uniform"), [0.0, 1.0]), "base has weight shape"),
        (lambda t, b: fit_moment_averaged_knots(t, b, [0.0, 0.5, 0.5, 1.0]), "knot_betas must increase strictly"),
        (lambda t, b: fit_moment_averaged_knots(t, b, [0.0, 0.5, 1.0], target_moments=(torch.zeros(V), torch.zeros(H + 1), torch.zeros(V, H))),
         r"target_moments: E\[h\] must have shape"),
        (lambda t, b: fit_moment_averaged_knots(t, b, [0.0, 0.5, 1.0], num_chains=0), "num_chains must be a positive integer"),
        (lambda t, b: fit_moment_averaged_knots(t, b, [0.0, 0.5, 1.0], learning_rate=-1.0), "learning_rate must be"),
        (lambda t, b: fit_moment_averaged_knots(t, b, [0.0, 0.5, 1.0], momentum=1.0), "momentum must lie in"),
        (lambda t, b: build(t, kind="moment_averaged", base="uniform", kernel=object()), "kernel must be a pfzoo kernel with init, step and needs"),
        (lambda t, b: build(t, kind="moment_averaged", base="uniform", num_knots=0), "num_knots must be a positive integer"),
        (lambda t, b: build(t, kind="spline", base="uniform"), "path must be one of"),
    ],
)
def test_bad_arguments_raise(make, message):
    target = random_rbm(V, H)
    with pytest.raises(ValueError, match=message):
        make(target, target.annealing_base("uniform"))
