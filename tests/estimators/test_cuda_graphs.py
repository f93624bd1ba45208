"""The annealing loop with its β's on the device and its blocks of steps replayed from CUDA graphs (issue 53, item 2).

On the CPU: the device-β step is the host-β step's arithmetic (its increment equals the path's on every form of the
increment, its draws keep AIS exact on enumerable models), it reads nothing back to the host, and the loop's block
machinery (static buffers, staged β's, per-step rows, runs of one form) gives its eager twin's numbers bit for bit when
each "graph" is replayed by running its block. On CUDA (``pytest -m cuda``; written without a GPU at hand, so the
first run on one is its first check): real graphs give the eager numbers bit for bit, through AIS and RAISE.
"""

import math

import pytest
import torch
from factories import random_dbm, random_rbm
from host_reads import no_host_reads

from pfzoo.estimators import AIS, RAISE
from pfzoo.estimators.annealing import StepDiagnostics, anneal
from pfzoo.estimators.cuda_graphs import anneal_on_device, device_steps_unavailable
from pfzoo.kernels import BlockGibbs, Repeat
from pfzoo.logmath import softplus_difference_form
from pfzoo.paths import RBMGeometricPath
from pfzoo.sampling import ChainStreams

needs_cuda = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


class ReplayByRunning:
    """Stands in for :class:`~pfzoo.estimators.cuda_graphs.CudaGraphs` on the CPU: a "graph" replays by running its
    block (never at capture), so the loop's buffers, staging and bookkeeping are those a real graph reads."""

    def __init__(self):
        self.captures = 0

    def capture(self, run_block, warm_up):
        self.captures += 1
        return run_block


def _path(model, base="uniform", data=None, **kwargs):
    return RBMGeometricPath(target=model, base=model.annealing_base(base, data), **kwargs)


def _mixed_betas(path):
    """A schedule whose steps take every form of the increment: two large steps, then runs of the series of order 4, 3
    and 2 (step sizes set from the path's bound on the hidden input, which picks the form)."""
    bound = path.target.hidden_input_bound
    steps = [0.1 / bound] * 2 + [0.04 / bound] * 20 + [0.01 / bound] * 20 + [0.002 / bound] * 60
    return torch.tensor([0.0, *steps], dtype=torch.float64).cumsum(0)


def _forms(path, betas):
    values = betas.tolist()
    return {path.device_step_form(a, b) for a, b in zip(values[:-1], values[1:])}


@pytest.mark.parametrize("scale", [0.05, 0.5, 3.0])
def test_the_device_increment_is_the_hosts_on_every_form(scale):
    model = random_rbm(30, 20, scale=scale, seed=3)
    path = _path(model)
    state = path.sample_base(200, generator=torch.Generator().manual_seed(0))
    for beta_from, beta_to in [(0.0, 0.6), (0.2, 0.21), (0.5, 0.5015), (0.7, 0.7004), (0.9, 0.2)]:
        form = path.device_step_form(beta_from, beta_to)
        expected = path.log_weight_increment(state.stats, beta_from, beta_to)
        got = path.device_increment(state.stats, torch.tensor(beta_from, dtype=torch.float64),
                                    torch.tensor(beta_to, dtype=torch.float64), form=form)
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    assert softplus_difference_form(1e-3, 1.0, torch.float32) == ("series", 2)
    assert softplus_difference_form(100.0, 1.0, torch.float32) == "guarded"


@pytest.mark.parametrize("layers, marginalize, dtype", [((8, 5), "hidden", torch.float64), ((8, 5), "visible", torch.float64),
                                                       ((8, 5), "hidden", torch.float32), ((6, 4, 3), "hidden", torch.float64)],
                         ids=["rbm", "rbm-visible-summed", "rbm-float32", "dbm"])
def test_device_beta_annealing_is_exact_ais(layers, marginalize, dtype):
    """log of the mean weight within 4 stderr of the exact log Z (the weights are unbiased for Z), on both marginals of
    an RBM's path, in float32, and on a DBM's even/odd path."""
    model = (random_rbm(*layers, scale=1.0, seed=1, dtype=dtype) if len(layers) == 2
             else random_dbm(list(layers), scale=1.0, seed=1, dtype=dtype))
    target = model if len(layers) == 2 else model.even_odd_rbm()
    path = _path(target, marginalize=marginalize)
    generator = torch.Generator().manual_seed(4)
    log_weights, _, note = anneal_on_device(path, torch.linspace(0, 1, 101).double(), path.sample_base(4000, generator=generator),
                                            generator=generator)
    log_z = torch.logsumexp(log_weights, 0) - math.log(log_weights.numel()) + path.base_log_partition()
    weights = (log_weights - log_weights.max()).exp()
    stderr = (weights.std() / weights.mean() / math.sqrt(weights.numel())).item()
    assert note is None and abs(log_z.item() - model.log_partition().item()) < 4 * stderr + 1e-9


@pytest.mark.parametrize("chains", ["plain", "streams"])
def test_replayed_blocks_give_the_eager_twins_numbers_bit_for_bit(chains):
    """Steps of four forms in blocks of 7, with the per-step diagnostics (per block of chains under ChainStreams): the
    same log weights, final state and diagnostics as every step run eagerly, one capture per form that fills a block,
    and progress after every step."""
    model = random_rbm(30, 20, scale=0.5, seed=2, dtype=torch.float32)
    data = (torch.rand(50, 30, generator=torch.Generator().manual_seed(5)) < 0.3).float()
    path = _path(model, "base_rate", data)
    betas = _mixed_betas(path)
    assert len(_forms(path, betas)) == 4

    def run(graphs):
        generator = (ChainStreams([torch.Generator().manual_seed(9 + b) for b in range(3)], [40, 40, 48]) if chains == "streams"
                     else torch.Generator().manual_seed(9))
        diagnostics = StepDiagnostics(betas, generator.sizes if chains == "streams" else None, None)
        done = []
        log_weights, state, note = anneal_on_device(
            path, betas, path.sample_base(128, generator=generator), generator=generator, graphs=graphs, block_steps=7,
            observe=lambda k, increment, log_weights: diagnostics.observe(k, increment, log_weights, None),
            row=diagnostics.row, rows_observed=diagnostics.extend, progress=done.append)
        return log_weights, state, note, diagnostics.result(), done

    graphs = ReplayByRunning()
    eager_weights, eager_state, eager_note, eager_diagnostics, _ = run(None)
    weights, state, note, diagnostics, done = run(graphs)
    assert torch.equal(eager_weights, weights)
    assert torch.equal(eager_state.position, state.position) and torch.equal(eager_state.hidden, state.hidden)
    assert diagnostics.increment_mean.shape[0] == betas.numel() - 1
    assert all(torch.equal(a, b) for a, b in zip(eager_diagnostics, diagnostics))
    assert eager_note is None and note.startswith("cuda_graphs: ") and not note.startswith("cuda_graphs: 0 of")
    assert graphs.captures == 3  # the two large steps make no whole block
    assert done == list(range(1, betas.numel()))


def test_the_device_step_reads_nothing_back_to_the_host():
    model = random_rbm(30, 20, scale=0.5, seed=2, dtype=torch.float32)
    path = _path(model)
    generator = torch.Generator().manual_seed(1)
    state = path.sample_base(64, generator=generator)
    one, two = torch.tensor(0.25, dtype=torch.float64), torch.tensor(0.26, dtype=torch.float64)
    with no_host_reads("cpu"):
        path.device_advance(state, one, two, form=path.device_step_form(0.25, 0.26), generator=generator)


def test_paths_without_device_steps_and_the_cpu_say_why_no_graph_ran():
    model = random_rbm(12, 8, scale=0.5, seed=2)
    repeated = _path(model, kernel=Repeat(BlockGibbs(), 2))
    state = repeated.sample_base(8, generator=torch.Generator().manual_seed(0))
    assert "has no device-β step" in device_steps_unavailable(repeated, [0.0, 0.5, 1.0], state)
    result = anneal(_path(model), torch.linspace(0, 1, 11).double(), state, generator=torch.Generator().manual_seed(0), cuda_graphs=True)
    assert result.graph_note == "cuda_graphs: none (the chains are on the cpu, not CUDA)"
    data = (torch.rand(40, 12, generator=torch.Generator().manual_seed(5)) < 0.3).double()
    plain = AIS(num_chains=50, num_steps=30)(model, data=data, generator=torch.Generator().manual_seed(3))
    graphed = AIS(num_chains=50, num_steps=30, cuda_graphs=True)(model, data=data, generator=torch.Generator().manual_seed(3))
    assert graphed.log_z == plain.log_z and "none (the chains are on the cpu" in graphed.info["cuda_graphs"]
    assert "cuda_graphs" not in plain.info
    with pytest.raises(ValueError, match="cuda_graphs"):
        AIS(cuda_graphs="yes")


@pytest.mark.parametrize("layers", [(784, 500), (100, 50, 80)], ids=["rbm", "dbm"])
@pytest.mark.parametrize("cuda", [pytest.param("cuda", marks=needs_cuda)])
def test_cuda_graphs_give_the_eager_numbers_and_replay_most_steps(layers, cuda):
    model = (random_rbm(*layers, scale=0.05, seed=1, dtype=torch.float32) if len(layers) == 2
             else random_dbm(list(layers), scale=0.05, seed=1, dtype=torch.float32)).to(cuda)
    data = (torch.rand(200, layers[0], generator=torch.Generator().manual_seed(5)) < 0.3).float().to(cuda)

    def ais(graphs, diagnostics=False):
        estimator = AIS(num_chains=1000, num_steps=1000, base="base_rate", cuda_graphs=graphs, diagnostics=diagnostics).to(cuda)
        return estimator(model, data=data, generator=torch.Generator(cuda).manual_seed(3))

    eager, graphed = ais(False), ais(True)
    assert torch.equal(eager.log_weights, graphed.log_weights)
    replayed = int(graphed.info["cuda_graphs"].split()[1])  # "cuda_graphs: R of K steps replayed ..."
    assert replayed >= 800, graphed.info["cuda_graphs"]  # the fitted schedule's steps change form a few times
    with_diagnostics = ais(True, diagnostics=True)
    assert torch.equal(with_diagnostics.log_weights, eager.log_weights)
    assert torch.equal(with_diagnostics.info["diagnostics"].ess, ais(False, diagnostics=True).info["diagnostics"].ess)


@pytest.mark.parametrize("cuda", [pytest.param("cuda", marks=needs_cuda)])
def test_raise_with_cuda_graphs_gives_the_eager_bounds(cuda):
    model = random_rbm(100, 40, scale=0.1, seed=1, dtype=torch.float32).to(cuda)
    data = (torch.rand(20, 100, generator=torch.Generator().manual_seed(5)) < 0.3).float().to(cuda)

    def bound(graphs):
        estimator = RAISE(num_chains=10, num_steps=500, num_examples=None, cuda_graphs=graphs).to(cuda)
        return estimator.log_likelihood(model, data, base_data=data, generator=torch.Generator(cuda).manual_seed(2))

    eager, graphed = bound(False), bound(True)
    assert torch.equal(eager.per_example, graphed.per_example)
    assert "cuda_graphs: " in graphed.info["cuda_graphs"] and " 0 of " not in graphed.info["cuda_graphs"]
