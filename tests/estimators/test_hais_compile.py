"""``HAIS(compile=True)`` compiles its annealing step once: one graph serves every β of a schedule, other schedules, other
chain counts and later calls, and the compiled run draws what the eager run draws (the same estimate to rounding).

Counted with dynamo's own ``unique_graphs`` statistic, so a recompilation per β (β specialised into the graph), per call
(a graph not cached across runs) or for the first step (a state that differs in layout from the step's outputs) would
each show as more graphs."""

import torch
from compile_support import compile_works, needs_compile  # noqa: F401 (compile_works: the skip condition reads it)
from factories import random_poe

from pfzoo.estimators import HAIS




def _graphs() -> int:
    """Graphs dynamo has compiled in this process so far."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


@needs_compile
def test_compiled_hais_compiles_one_graph_for_every_beta_and_call():
    """3-d Student-t product of experts, 16 chains: a 30-step linear run (29 compiled steps, at 29 β's) compiles exactly
    one graph; a second run along a sigmoid schedule of 45 steps (44 other β's) with 24 chains, and a third like the
    first, compile none. The first and third equal the eager run of the same seed to rounding (within 1e-4 of its
    standard error: other draws would differ by about one)."""
    torch._dynamo.reset()
    model = random_poe(3, expert="student_t", seed=0, dtype=torch.float32)

    def run(compile: bool, num_chains: int = 16, num_steps: int = 30, schedule: str = "linear", seed: int = 1):
        estimator = HAIS(num_chains=num_chains, num_steps=num_steps, schedule=schedule, compile=compile)
        return estimator(model, generator=torch.Generator().manual_seed(seed))

    before = _graphs()
    first = run(True)
    after_first = _graphs()
    run(True, num_chains=24, num_steps=45, schedule="sigmoid", seed=2)
    third = run(True)
    assert (after_first - before, _graphs() - after_first) == (1, 0), (before, after_first, _graphs())
    eager = run(False)
    for compiled in (first, third):
        assert abs(compiled.log_z - eager.log_z) <= 1e-4 * eager.stderr, (compiled.log_z, eager.log_z, eager.stderr)
    torch._dynamo.reset()
