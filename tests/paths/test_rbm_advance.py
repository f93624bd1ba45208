"""RBMGeometricPath.advance, the annealing step with shared work and reused buffers (issue 53), gives the numbers of
the increment and the transition called one after the other: the same draws from the same streams, the same increments
(bit for bit on the series branch of small steps, to rounding on the large-step one), step after step, while its
buffers alternate under the states it returns."""

import pytest
import torch
from factories import random_rbm

from pfzoo.paths import RBMGeometricPath
from pfzoo.sampling import ChainStreams


def _streams(sizes=(352, 352, 396)):
    return ChainStreams([torch.Generator().manual_seed(10 + block) for block in range(len(sizes))], list(sizes))


def _generator(kind: str):
    return _streams() if kind == "streams" else torch.Generator().manual_seed(7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("generator_kind", ["streams", "plain"])
@pytest.mark.parametrize("num_steps, scale", [(200, 0.05), (6, 1.0)], ids=["series", "large_steps"])
def test_advance_gives_the_increment_and_transition_of_separate_calls(dtype, generator_kind, num_steps, scale):
    """1,100 chains of a 30×20 RBM from base rates (three ChainStreams blocks, or one plain generator: torch's uniforms
    for the hidden layer, below the bulk-draw size, and bulk integers for the visible one), every step of a linear
    schedule: equal states; increments equal on the series, within 1e-5 on large steps (the sum-of-positives form
    against the float64 log1p/softplus one)."""
    model = random_rbm(30, 20, scale=scale, seed=1, dtype=dtype)
    base = model.annealing_base("base_rate", (torch.rand(64, 30, generator=torch.Generator().manual_seed(2)) < 0.3).to(dtype))
    path = RBMGeometricPath(target=model, base=base)
    betas = torch.linspace(0, 1, num_steps + 1, dtype=torch.float64).tolist()
    generators = [_generator(generator_kind), _generator(generator_kind)]
    fused = path.sample_base(1100, generator=generators[0])
    separate = path.sample_base(1100, generator=generators[1])
    workspace = {}
    for beta_from, beta_to in zip(betas[:-1], betas[1:]):
        increment, fused, _ = path.advance(fused, beta_from, beta_to, generator=generators[0], workspace=workspace)
        expected = path.log_weight_increment(separate.stats, beta_from, beta_to)
        separate, _ = path.transition(separate, beta_to, generator=generators[1])
        if num_steps > 100:
            assert torch.equal(increment, expected)
        else:
            torch.testing.assert_close(increment, expected, rtol=0, atol=1e-5)
        assert torch.equal(fused.position, separate.position) and torch.equal(fused.hidden, separate.hidden)
        assert torch.equal(fused.stats.hidden_input, separate.stats.hidden_input)
    assert workspace  # the buffers were used


def test_advance_returns_states_in_two_alternating_sets_of_buffers():
    """A state lives until the step after next: step k + 2 writes into step k's tensors, never into step k + 1's."""
    model = random_rbm(12, 8, scale=0.3, seed=0, dtype=torch.float32)
    path = RBMGeometricPath(target=model, base=model.annealing_base("uniform", None))
    streams = _streams((64,))
    state = path.sample_base(64, generator=streams)
    workspace = {}
    _, first, _ = path.advance(state, 0.0, 0.1, generator=streams, workspace=workspace)
    kept = first.position.clone()
    _, second, _ = path.advance(first, 0.1, 0.2, generator=streams, workspace=workspace)
    assert torch.equal(first.position, kept) and second.position.data_ptr() != first.position.data_ptr()
    _, third, _ = path.advance(second, 0.2, 0.3, generator=streams, workspace=workspace)
    assert third.position.data_ptr() == first.position.data_ptr()
