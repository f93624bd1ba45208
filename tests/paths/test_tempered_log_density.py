"""The one-pass tempered densities of the paths whose ``log f_β`` is not a multiple of one statistic
(:meth:`~pfzoo.paths.base.AnnealingPath.tempered_log_density`): row by row each entry's weight increment from 0, in blocks
of rows or not, and parallel tempering and stepping stone over such a path give the numbers of the level-by-level
increments they replace."""

import pytest
import torch
from factories import random_gaussian, random_gbrbm, random_rbm

import pfzoo.paths.base as path_base
from pfzoo.estimators import SteppingStone
from pfzoo.kernels import ParallelTempering, take_chains
from pfzoo.models import RBM, Gaussian
from pfzoo.paths import GaussianGeodesicPath, GaussianGeometricPath, GaussianMomentAveragedPath, RBMSplinePath, build, pair_path
from pfzoo.paths.base import AnnealingPath
from pfzoo.paths.gaussian_rbm import GaussianRBMGeometricPath
from pfzoo.paths.tempered import TemperedPathTarget

KNOT_BETAS = torch.tensor([0.0, 0.3, 0.6, 1.0], dtype=torch.float64)
BETAS = torch.tensor([[0.0, 1.0, 0.5, 0.3], [0.45, 0.05, 1.0, 0.6], [1.0, 0.7, 0.0, 0.0], [0.6, 0.6, 0.25, 0.9],
                      [0.9, 0.2, 0.75, 1.0], [0.3, 0.0, 0.15, 0.5]], dtype=torch.float64)  # [6, 4]: a β per row and column
"""Every row its own βs, 0 and 1 among them, and the spline's knots 0.3 and 0.6 (a segment's ends) beside points inside
its segments."""


def univariate(mean: float, variance: float) -> Gaussian:
    return Gaussian.from_tensors(torch.tensor([[1 / variance]], dtype=torch.float64), torch.tensor([mean], dtype=torch.float64))


def spline() -> RBMSplinePath:
    """A spline through unfitted knots at :data:`KNOT_BETAS` (as tests/paths/test_moment_averaged_rbm.py builds one)."""
    target = random_rbm(6, 3, 2.0, 5, bias_scale=1.0, draw_dtype=None)
    knots = [target.annealing_base("uniform")]
    for j, b in enumerate(KNOT_BETAS[1:-1].tolist()):
        noise = random_rbm(6, 3, 0.5, 10 + j, bias_scale=1.0, draw_dtype=None)
        knots.append(RBM.from_tensors(b * target.weight + noise.weight, b * target.visible_bias + noise.visible_bias,
                                      b * target.hidden_bias + noise.hidden_bias))
    knots.append(target)
    return RBMSplinePath(knots, KNOT_BETAS)


# The GBRBM's weights are small enough that no hidden input reaches 20, above which its increments' torch softplus
# (softplus_difference's exact branch) returns x and is off by e^{−x} (2e-9 at 20); the one-pass form is exact there.
PATHS = {
    "gaussian-geometric": lambda: GaussianGeometricPath(random_gaussian(3, seed=0), random_gaussian(3, seed=1)),
    "gaussian-moment-averaged": lambda: GaussianMomentAveragedPath(random_gaussian(3, seed=0), random_gaussian(3, seed=1)),
    "gaussian-geodesic": lambda: GaussianGeodesicPath(univariate(2.0, 0.5), univariate(-1.0, 3.0)),
    "gaussian-geodesic-equal-means": lambda: GaussianGeodesicPath(univariate(1.0, 0.5), univariate(1.0, 3.0)),
    "gaussian-rbm": lambda: build(random_gbrbm(5, 4, scale=0.5, seed=2), kind="geometric", base="uniform")[0],
    "rbm-pair": lambda: pair_path(random_rbm(7, 4, 1.0, 1), random_rbm(7, 6, 1.0, 2)),
    "rbm-spline": spline,
}
BLOCKED = ["gaussian-moment-averaged", "gaussian-rbm", "rbm-pair", "rbm-spline"]
"""The paths whose one pass runs in blocks of rows (the geometric Gaussian's is β times one increment, the geodesic's
elementwise)."""


def moved_statistics(path, num_chains: int = 6):
    """Statistics of base draws after three transitions at 0.7 (away from the base; the spline's kept in its last segment)."""
    generator = torch.Generator().manual_seed(0)
    state = path.sample_base(num_chains, generator=generator)
    for _ in range(3):
        state, _ = path.transition(state, 0.7, generator=generator)
    return path.statistics(state)


@pytest.mark.parametrize("name", PATHS)
def test_the_one_pass_density_is_each_rows_increment_from_zero(name):
    path = PATHS[name]()
    stats = moved_statistics(path)
    density = path.tempered_log_density(stats, BETAS)
    assert density is not None and density.dtype == torch.float64 and density.shape == BETAS.shape
    for column in range(BETAS.shape[1]):
        expected = torch.stack([path.log_weight_increment(stats, 0.0, beta)[row] for row, beta in enumerate(BETAS[:, column].tolist())])
        torch.testing.assert_close(density[:, column], expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", BLOCKED)
def test_blocks_of_rows_give_what_one_block_gives(name, monkeypatch):
    """One row a block (what thousands of chains over a ladder take) gives the numbers of one block of every row."""
    path = PATHS[name]()
    stats = moved_statistics(path)
    whole = path.tempered_log_density(stats, BETAS)
    monkeypatch.setattr(path_base, "TEMPERED_BLOCK_ELEMENTS", 1)
    torch.testing.assert_close(path.tempered_log_density(stats, BETAS), whole, rtol=0, atol=1e-13)


def test_the_spline_reads_only_the_states_whatever_segment_their_statistics_were_kept_in():
    path = spline()
    v = moved_statistics(path).visible
    densities = [path.tempered_log_density(path.segment_statistics(v, segment), BETAS) for segment in range(path.num_segments)]
    assert all(torch.equal(density, densities[0]) for density in densities[1:])


@pytest.mark.parametrize("path_class, kind", [(GaussianGeometricPath, "geometric"), (GaussianMomentAveragedPath, "moment_averaged"),
                                              (GaussianRBMGeometricPath, "geometric")])
def test_stepping_stone_gives_the_estimate_of_the_level_by_level_increments(path_class, kind, monkeypatch):
    """The whole estimate (exchanges, adapted ladder, ratios, batches) with the one-pass density and with every level's
    increment from 0 (``tempered_log_density`` → None, as before these paths had one): the same to float rounding."""
    gaussian = path_class is not GaussianRBMGeometricPath
    model = random_gaussian(4, seed=6, normalize_factor=True) if gaussian else random_gbrbm(5, 4, scale=0.5, seed=2)
    estimator = SteppingStone(num_chains=30, num_levels=6, num_steps=60, burn_in=20, path=kind, base="isotropic" if gaussian else "uniform")
    runs = []
    for one_pass in (True, False):
        if not one_pass:
            monkeypatch.setattr(path_class, "linear_in_beta", False)
            monkeypatch.setattr(path_class, "tempered_log_density", AnnealingPath.tempered_log_density)
        runs.append(estimator(model, generator=torch.Generator().manual_seed(0)))
    fast, slow = runs
    assert fast.log_z == pytest.approx(slow.log_z, rel=0, abs=1e-10) and fast.stderr == pytest.approx(slow.stderr, rel=1e-8, abs=1e-12)
    torch.testing.assert_close(torch.tensor(fast.info["betas"]), torch.tensor(slow.info["betas"]), rtol=0, atol=1e-12)
    torch.testing.assert_close(torch.tensor(fast.info["log_ratios"]), torch.tensor(slow.info["log_ratios"]), rtol=0, atol=1e-10)
    torch.testing.assert_close(torch.tensor(fast.info["exchange_acceptance"]), torch.tensor(slow.info["exchange_acceptance"]), rtol=0, atol=1e-10)
    assert fast.info["round_trips"] == slow.info["round_trips"]


@pytest.mark.parametrize("name", ["gaussian-geodesic", "rbm-pair", "rbm-spline"])
def test_parallel_tempering_over_the_path_exchanges_as_level_by_level(name, monkeypatch):
    """Replica exchange over a ladder with the one-pass density and with each level's increment: the same replicas, bit
    for bit, and exchange probabilities equal to float rounding; and every level's stepping-stone ratio
    ``f_{k+1}/f_k`` of its states from the one pass equals its increment from statistics made afresh from the states.
"""
    path = PATHS[name]()
    ladder, chains = [0.1, 0.25, 0.45, 0.7, 1.0], 20
    runs = []
    for one_pass in (True, False):
        if not one_pass:
            monkeypatch.setattr(path, "tempered_log_density", lambda stats, beta: None)
        tempering, target = ParallelTempering(path.kernel, ladder), TemperedPathTarget(path, ladder)
        generator = torch.Generator().manual_seed(1)
        state = tempering.init_replicas(torch.stack([path.draw_base(chains, generator=generator) for _ in ladder]), target, generator=generator)
        probabilities = []
        for _ in range(15):
            state, info = tempering.step(state, target, generator=generator)
            probabilities.append(info.swap_accept_prob)
        runs.append((state, torch.stack(probabilities)))
    (state, fast), (other, slow) = runs
    assert torch.equal(state.replicas.position, other.replicas.position)
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-12)
    monkeypatch.undo()
    pairs = torch.tensor(list(zip(ladder[:-1], ladder[1:])), dtype=torch.float64).repeat_interleave(chains, 0)  # as stepping stone asks
    rows = pairs.shape[0]
    density = path.tempered_log_density(path.target.statistics(state.replicas.position[:rows]), pairs)
    kept = take_chains(path.statistics(state.replicas), slice(0, rows), state.replicas.position.shape[0])  # as stepping stone reads them
    torch.testing.assert_close(path.tempered_log_density(kept, pairs), density, rtol=0, atol=1e-12)
    for level, (low, high) in enumerate(zip(ladder[:-1], ladder[1:])):
        positions = state.replica(level).position
        expected = path.log_weight_increment(path.target.statistics(positions), low, high)
        torch.testing.assert_close(density[level * chains:(level + 1) * chains].diff(dim=1)[:, 0], expected, rtol=0, atol=1e-10)


def test_parallel_tempering_over_the_spline_samples_each_levels_distribution():
    """Replicas at levels in all three segments of the spline, 4,000 independent chains after 60 steps: each replica's
    mean visible units within 4.5 standard errors of the exact ones of its level (the 64 states enumerated); and the
    statistics the stacked replicas keep describe their rows. They were once kept under the first replica's segment label
    whatever segment each replica's rows were drawn in, so that rows exchanged in from a level of another segment drew
    their next hidden units from that segment's inputs (too rare to move these means measurably: 20,000 chains gave
    |z| ≤ 1.9 either way)."""
    path = spline()
    ladder, chains = [0.1, 0.25, 0.45, 0.7, 1.0], 4000
    tempering, target = ParallelTempering(path.kernel, ladder), TemperedPathTarget(path, ladder)
    generator = torch.Generator().manual_seed(3)
    state = tempering.init_replicas(torch.stack([path.draw_base(chains, generator=generator) for _ in ladder]), target, generator=generator)
    for _ in range(60):
        state, _ = tempering.step(state, target, generator=generator)
        kept = state.replicas.stats
        if kept.segment is not None:
            assert torch.equal(kept.hidden_input, path.segment_statistics(state.replicas.position, kept.segment).hidden_input)
    states = ((torch.arange(64)[:, None] >> torch.arange(6)) & 1).double()  # every v of the 6 visible units
    log_f = path.tempered_log_density(path.target.statistics(states), torch.tensor(ladder, dtype=torch.float64).expand(64, -1))
    for level in range(len(ladder)):
        exact = torch.softmax(log_f[:, level], 0) @ states  # the base is uniform over v: f_β ∝ exp(log f_β − log f_0)
        samples = state.replica(level).position.double()
        stderr = (exact * (1 - exact) / chains).sqrt()
        assert ((samples.mean(0) - exact).abs() <= 4.5 * stderr).all(), (ladder[level], samples.mean(0), exact)
