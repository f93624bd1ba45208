"""``torch.compile`` in the library: ``AIS``/``HAIS``/``RAISE(compile=True)`` run their annealing steps compiled and agree
with eager runs and with exact answers; the RBM step's only graph breaks are the draws' host-side random streams; and a
compiled ``model(x)`` gives the eager unnormalised log densities for every family kind."""

import pytest
import torch
from compile_support import compile_works, needs_compile  # noqa: F401 (compile_works: the skip condition reads it)
from factories import random_dbm, random_gbrbm, random_ica, random_poe, random_rbm

from pfzoo.estimators import AIS, HAIS, RAISE
from pfzoo.estimators.annealing import _advance, _increment, _transition
from pfzoo.sampling import ChainStreams




@pytest.mark.parametrize("estimator", [AIS, HAIS, RAISE])
def test_compile_is_off_by_default_and_refuses_non_bools(estimator):
    assert estimator().compile is False
    with pytest.raises(ValueError, match="compile"):
        estimator(compile="yes")


def _rbm_path_and_state():
    model = random_rbm(8, 6, scale=0.5, seed=0, dtype=torch.float32)
    path, _ = AIS(num_chains=64, num_steps=10, schedule="linear").build_path(model, None, torch.Generator().manual_seed(0))
    streams = ChainStreams([torch.Generator().manual_seed(block) for block in range(2)], [32, 32])
    state, _ = path.transition(path.sample_base(64, generator=streams), 0.1, generator=streams)
    return path, state, streams


def test_rbm_step_breaks_only_at_the_draws():
    """The increment is one graph; the transition's breaks are all at torch.compiler.disable'd draws (numpy's SFC64
    streams on the host): no .item(), no value check, no data-dependent Python in the step."""
    path, state, streams = _rbm_path_and_state()
    increment = torch._dynamo.explain(_increment)(path, state, 0.1, 0.2)
    assert (increment.graph_count, increment.graph_break_count) == (1, 0)
    transition = torch._dynamo.explain(_transition)(path, state, 0.2, generator=streams)
    reasons = {reason.reason.splitlines()[0] for reason in transition.break_reasons}
    assert transition.graph_break_count > 0 and all("torch.compiler.disable()" in reason for reason in reasons), reasons
    torch._dynamo.reset()


def test_rbm_step_with_its_keys_drawn_first_is_one_graph():
    """The RBM path's compiled step: the sweep's keys drawn eagerly first (path.draw_noise, one per chain and layer), the
    increment and the hashed sweep are one graph without a break, for ChainStreams as for a plain generator."""
    path, state, streams = _rbm_path_and_state()
    for generator in (streams, torch.Generator().manual_seed(3)):
        noise = path.draw_noise(state, generator=generator)
        assert noise.shape == (2, 64) and noise.dtype == torch.int64
        step = torch._dynamo.explain(_advance)(path, state, 0.1, 0.2, None, noise)
        assert (step.graph_count, step.graph_break_count) == (1, 0), [reason.reason for reason in step.break_reasons]
    torch._dynamo.reset()


def _hais_path_and_state():
    model = random_poe(4, expert="student_t", seed=0, dtype=torch.float32)
    path, _ = HAIS(num_chains=64, num_steps=10).build_path(model, None, torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(1)
    return path, path.sample_base(64, generator=generator), generator


def test_hmc_step_with_its_draws_made_first_is_one_graph():
    """HAIS's step, its draws made eagerly first (path.draw_noise), is one graph without a break: increment and
    transition, no draw, no host read."""
    path, state, generator = _hais_path_and_state()
    noise = path.draw_noise(state, generator=generator)
    step = torch._dynamo.explain(_advance)(path, state, 0.1, 0.2, None, noise)
    assert (step.graph_count, step.graph_break_count) == (1, 0), [reason.reason for reason in step.break_reasons]
    torch._dynamo.reset()


def test_hmc_draws_made_first_give_the_eager_step():
    """The same generator gives the same step whether HMC draws inside the step or its noise is drawn first."""
    path, state, _ = _hais_path_and_state()
    drawn_inside, _ = path.transition(state, 0.3, generator=torch.Generator().manual_seed(2))
    drawn_first, _ = path.transition(state, 0.3, noise=path.draw_noise(state, generator=torch.Generator().manual_seed(2)))
    assert torch.equal(drawn_inside.position, drawn_first.position) and torch.equal(drawn_inside.momentum, drawn_first.momentum)


@pytest.mark.slow
@needs_compile
def test_compiled_hais_compiles_once_for_every_schedule():
    """No recompilation per β: a second run along another schedule (other β's, another step count) compiles nothing
    new, and the compiled runs give the eager estimates (the same draws, made before each step) within 1e-4 of their
    standard error."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    model = random_poe(4, expert="student_t", seed=0, dtype=torch.float32)
    graphs = []
    for num_steps in (20, 33):
        estimates = [HAIS(num_chains=64, num_steps=num_steps, compile=compile)(model, generator=torch.Generator().manual_seed(1))
                     for compile in (False, True)]
        graphs.append(counters["stats"]["unique_graphs"])
        assert abs(estimates[1].log_z - estimates[0].log_z) <= 1e-4 * estimates[0].stderr, [e.log_z for e in estimates]
    assert graphs[1] == graphs[0], graphs
    torch._dynamo.reset()


@pytest.mark.slow
@needs_compile
def test_compiled_ais_agrees_with_eager_and_exact_on_a_small_rbm():
    """8×6 float32 RBM, 64 chains × 50 linear steps: compiled and eager within 4 of their joint standard error of each
    other (the compiled sweeps draw hashed numbers, pfzoo.hashed_draws, not the eager stream's), both within 4 standard
    errors of the enumerated log Z; a second compiled run with other chains and β's whose steps take the same branch of
    the increment (softplus_difference's exact form: every |δ| here is above the series' range) compiles no new graph,
    and a third with the first's seed gives its log weights again."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    model = random_rbm(8, 6, scale=0.5, seed=0, dtype=torch.float32)
    exact = model.log_partition().item()
    estimates = [AIS(num_chains=64, num_steps=50, schedule="linear", compile=compile)(model, generator=torch.Generator().manual_seed(1))
                 for compile in (False, True)]
    graphs = counters["stats"]["unique_graphs"]
    AIS(num_chains=32, num_steps=37, schedule="linear", compile=True)(model, generator=torch.Generator().manual_seed(2))
    assert counters["stats"]["unique_graphs"] == graphs
    again = AIS(num_chains=64, num_steps=50, schedule="linear", compile=True)(model, generator=torch.Generator().manual_seed(1))
    assert torch.equal(again.log_weights, estimates[1].log_weights)  # the same seed, the same compiled numbers
    eager, compiled = estimates
    assert abs(compiled.log_z - eager.log_z) <= 4 * (eager.stderr ** 2 + compiled.stderr ** 2) ** 0.5, (compiled.log_z, eager.log_z)
    for estimate in estimates:
        assert abs(estimate.log_z - exact) <= 4 * estimate.stderr, (estimate.log_z, exact, estimate.stderr)


@pytest.mark.slow
@needs_compile
def test_compiled_hais_agrees_with_eager_and_exact_on_a_small_ica():
    """4-d ICA (exact log Z), 64 chains × 200 HMC steps: compiled within the eager estimate's standard error, both
    within 4 standard errors of the exact value."""
    model = random_ica(4, seed=0, dtype=torch.float32)
    exact = model.log_partition().item()
    estimates = [HAIS(num_chains=64, num_steps=200, compile=compile)(model, generator=torch.Generator().manual_seed(1))
                 for compile in (False, True)]
    eager, compiled = estimates
    assert abs(compiled.log_z - eager.log_z) <= eager.stderr + 1e-4, (compiled.log_z, eager.log_z, eager.stderr)
    for estimate in estimates:
        assert abs(estimate.log_z - exact) <= 4 * estimate.stderr + 0.01, (estimate.log_z, exact, estimate.stderr)


@pytest.mark.slow
@needs_compile
def test_compiled_raise_agrees_with_eager_and_exact_on_a_small_rbm():
    """8×6 RBM, 10 reverse chains × 50 steps on 20 rows: the compiled and eager mean log-likelihoods within the eager
    standard error, both within 4 of it of the exact mean (a stochastic lower bound, so not above it by more)."""
    model = random_rbm(8, 6, scale=0.5, seed=0, dtype=torch.float32)
    rows = model.sample(20, generator=torch.Generator().manual_seed(3))
    exact = model.log_prob(rows).mean().item()
    estimates = [RAISE(num_chains=10, num_steps=50, base="uniform", compile=compile).log_likelihood(
        model, rows, generator=torch.Generator().manual_seed(1)) for compile in (False, True)]
    eager, compiled = estimates
    assert abs(compiled.mean - eager.mean) <= eager.stderr + 1e-4, (compiled.mean, eager.mean, eager.stderr)
    for estimate in estimates:
        assert estimate.mean <= exact + 4 * estimate.stderr + 0.01, (estimate.mean, exact, estimate.stderr)


@needs_compile
@pytest.mark.parametrize("build", [
    lambda: random_rbm(8, 6, seed=0, dtype=torch.float32),
    lambda: random_dbm([6, 4, 3], seed=0, dtype=torch.float32),
    lambda: random_gbrbm(5, 4, seed=0, dtype=torch.float32),
    lambda: random_poe(4, expert="student_t", seed=0, dtype=torch.float32),
], ids=["rbm", "dbm", "gaussian_rbm", "poe_student_t"])
def test_compiled_model_call_gives_the_eager_log_densities(build):
    model = build()
    rows = model.sample(16, generator=torch.Generator().manual_seed(0)) if model.binary_visible else torch.randn(16, model.num_visible)
    compiled = torch.compile(model)
    torch.testing.assert_close(compiled(rows), model(rows), rtol=1e-5, atol=1e-4)
    torch._dynamo.reset()


@pytest.mark.slow
@needs_compile
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_blocks_of_chain_streams_anneal_as_alone(dtype):
    """The sharding promise under compile=True: a 12×7 RBM annealed compiled (hashed sweeps) with ChainStreams of three
    blocks gives each block the final states and log weights it gets annealed alone with its own generator: in float64
    bit for bit; in float32 to 1e-6, as products over 100 rows and over 40 round differently on some CPUs (an AMD EPYC's
    BLAS: 1.2e-7 compiled, 2.4e-7 eager) though not on others (an Intel Xeon's)."""
    from pfzoo.estimators.annealing import anneal

    model = random_rbm(12, 7, scale=0.5, seed=2, dtype=dtype)
    path, _ = AIS(num_chains=8, num_steps=4).build_path(model, None, torch.Generator().manual_seed(0))
    betas = torch.linspace(0, 1, 31, dtype=torch.float64)
    sizes = [40, 24, 36]

    def streams(blocks):
        return ChainStreams([torch.Generator().manual_seed(20 + block) for block in blocks], [sizes[block] for block in blocks])

    def run(blocks):
        generator = streams(blocks)
        return anneal(path, betas, path.sample_base(generator.num_rows, generator=generator), generator=generator, compile=True)

    together = run([0, 1, 2])
    for block, rows in zip(range(3), torch.arange(sum(sizes)).split(sizes)):
        alone = run([block])
        if dtype == torch.float64:
            assert torch.equal(together.log_weights[rows], alone.log_weights), block
        else:
            torch.testing.assert_close(together.log_weights[rows], alone.log_weights, rtol=0, atol=1e-6, msg=f"block {block}")
        assert torch.equal(together.state.position[rows], alone.state.position), block
    torch._dynamo.reset()
