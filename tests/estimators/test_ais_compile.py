"""``AIS(compile=True)``: the annealing step under ``torch.compile`` finishes, agrees with eager AIS and with the exact
``log Z`` of a small RBM, and the step's only graph breaks are the draws' host-side random streams."""

import pytest
import torch
from factories import random_rbm

from pfzoo.estimators import AIS
from pfzoo.estimators.annealing import _increment, _transition
from pfzoo.sampling import ChainStreams


def _compile_works() -> bool:
    """Whether torch.compile (dynamo and the inductor CPU backend, which needs a C++ compiler) runs on this platform."""
    if not torch._dynamo.is_dynamo_supported():
        return False
    try:
        return bool(torch.compile(lambda x: x + 1)(torch.zeros(2)).eq(1).all())
    except Exception:
        return False


needs_compile = pytest.mark.skipif("not _compile_works()", reason="torch.compile is unavailable on this platform")


def test_compile_is_off_by_default_and_refuses_non_bools():
    assert AIS().compile is False
    with pytest.raises(ValueError, match="compile"):
        AIS(compile="yes")


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


@pytest.mark.slow
@needs_compile
def test_compiled_ais_agrees_with_eager_and_exact_on_a_small_rbm():
    """8×6 float32 RBM, 64 chains × 50 linear steps: compiled and eager within the estimate's standard error of each
    other, and both within 4 standard errors of the enumerated log Z."""
    model = random_rbm(8, 6, scale=0.5, seed=0, dtype=torch.float32)
    exact = model.log_partition().item()
    estimates = [AIS(num_chains=64, num_steps=50, schedule="linear", compile=compile)(model, generator=torch.Generator().manual_seed(1))
                 for compile in (False, True)]
    eager, compiled = estimates
    assert abs(compiled.log_z - eager.log_z) <= eager.stderr, (compiled.log_z, eager.log_z, eager.stderr)
    for estimate in estimates:
        assert abs(estimate.log_z - exact) <= 4 * estimate.stderr, (estimate.log_z, exact, estimate.stderr)
