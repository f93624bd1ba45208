"""The annealing loop with its β's on the device, and CUDA graphs of its steps (issue 53, item 2).

On a GPU an RBM annealing step at 1,000 chains is about twenty small kernels, each a few microseconds of work: the
launches, not the arithmetic, set the pace (0.03 of the matmul bound on an H200). A CUDA graph records a block of
steps once and replays it with one launch. Replaying needs steps whose every value stays on the device, so this loop
runs the path's device-β step (:meth:`~pfzoo.paths.base.AnnealingPath.device_advance`): β and β' are 0-d float64
tensors on the chains' device, and what the host must choose per step (the form of an RBM path's weight increment,
:func:`~pfzoo.logmath.softplus_difference_form`) is chosen before the run (:meth:`device_step_form`); steps of one
form run the same kernels, so one graph per form serves every block of that form.

:func:`anneal_on_device` runs the steps as Neal's AIS loop does (:func:`pfzoo.estimators.annealing.anneal`): the first
step eagerly (it gives the state its shapes), then each run of consecutive steps of one form in blocks of
``block_steps`` replayed from its graph, the rest of a run eagerly with the same kernels, and the last step's increment
eagerly. A graph reads and writes static buffers: the chains' state, the log weights, the block's β's (copied in on
the device before each replay) and, with diagnostics, the block's per-step rows. The run's generators are registered
with every graph (``CUDAGraph.register_generator_state``), so a replay draws what the same steps draw eagerly: with
``graphs=None`` the same function is its own eager twin, and the numbers of the two are the same for the same seed.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Sequence

import torch

from pfzoo.paths.base import AnnealingPath
from pfzoo.sampling import ChainStreams, Generator

GRAPH_BLOCK_STEPS = 64
"""Steps a CUDA graph holds: enough that a replay's launch is a small share of its work, few enough that capturing a
graph per form costs no more than a few blocks of steps."""


def device_steps_unavailable(path: AnnealingPath, betas: Sequence[float], state: Any) -> str | None:
    """Why ``path`` cannot run its annealing along ``betas`` with device β's (one clause), or ``None`` when it can: each
    step's form must be known on the host (:meth:`~pfzoo.paths.base.AnnealingPath.device_step_form`)."""
    if not torch.is_tensor(getattr(state, "position", None)):
        return f"{type(path).__name__}'s states hold no position tensor"
    if any(path.device_step_form(betas[k - 1], betas[k]) is None for k in range(1, len(betas))):
        return f"{type(path).__name__} with {path.kernel!r} has no device-β step"
    return None


class CudaGraphs:
    """Captures blocks of annealing steps as CUDA graphs sharing one memory pool, each with the run's generators
    registered (``generators``: the torch generators the steps draw from; the device's default one needs none)."""

    def __init__(self, generators: Sequence[torch.Generator], device: torch.device) -> None:
        self.generators, self.device = list(generators), device
        self.pool = None
        self.graphs: list[torch.cuda.CUDAGraph] = []

    def capture(self, run_block: Callable[[], None], warm_up: Callable[[], None]) -> Callable[[], None]:
        """A graph of ``run_block`` (which reads and writes static tensors only) → its replay. Before each capture
        ``warm_up`` (the block's step on copies, with generators of its own) runs on a side stream, so that whatever its
        operations make lazily (handles, workspaces, cached constants such as the series' 1/6, 1/24, …) is made and
        filled eagerly: made during a capture, it would hold nothing until the first replay."""
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            warm_up()
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        for generator in self.generators:
            graph.register_generator_state(generator)
        with torch.cuda.graph(graph, pool=self.pool):
            run_block()
        self.pool = graph.pool()
        self.graphs.append(graph)
        return graph.replay


def run_generators(generator: Generator) -> list[torch.Generator]:
    """The torch generators a run draws from: a :class:`~pfzoo.sampling.ChainStreams`' blocks', or the one given."""
    if isinstance(generator, ChainStreams):
        return list(generator.generators)
    return [] if generator is None else [generator]


@torch.no_grad()
def anneal_on_device(
    path: AnnealingPath,
    betas: torch.Tensor,
    state: Any,
    *,
    generator: Generator = None,
    graphs: CudaGraphs | None = None,
    block_steps: int = GRAPH_BLOCK_STEPS,
    observe: Callable[[int, torch.Tensor, torch.Tensor], None] | None = None,
    row: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    rows_observed: Callable[[torch.Tensor], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[torch.Tensor, Any, str | None]:
    """AIS along ``betas`` (float64 ``[K + 1]``) from ``state`` with the path's device-β steps (module docstring) →
    ``(log_weights [N] float64, final state, note)``; the note says how many steps ran from graphs (``None`` without
    ``graphs``).

    ``graphs``: a :class:`CudaGraphs` (or any object with its ``capture``) to replay blocks of ``block_steps`` steps
    from; ``None`` runs every step eagerly. ``observe(k, increment, log_weights)`` is called after every eager step;
    for steps inside a replayed block, ``row(increment, log_weights)`` (a tensor per step, e.g. a step's diagnostics)
    is computed inside the graph and ``rows_observed(rows [block_steps, ...])`` gets the block's rows after each replay.
    ``progress(k)`` is called after every step, eager or replayed.
    """
    betas_list = betas.tolist()
    num_steps = len(betas_list) - 1
    device = state.position.device
    betas_device = betas.to(device=device, dtype=torch.float64)
    forms = [path.device_step_form(betas_list[k - 1], betas_list[k]) for k in range(1, num_steps + 1)]
    log_weights, replays = None, 0
    static = None  # the state's buffers once a graph may read them
    captured: dict[Hashable, Callable[[], None]] = {}
    staged = torch.empty(block_steps + 1, dtype=torch.float64, device=device)  # a block's β's, read by its graph
    rows: torch.Tensor | None = None

    def block_of(form: Hashable) -> Callable[[], None]:
        def run_block() -> None:
            for i in range(block_steps):
                increment, new_state, _ = path.device_advance(static, staged[i], staged[i + 1], form=form, generator=generator)
                log_weights.add_(increment)
                if rows is not None:
                    rows[i].copy_(row(increment, log_weights))
                _copy_into(static, new_state)

        def warm_up() -> None:
            path.device_advance(fresh_copy(static), staged[0], staged[1], form=form, generator=_stand_in(generator, device))

        return graphs.capture(run_block, warm_up)

    failure = None  # why a capture failed: the run then goes on eagerly
    k = 1
    while k <= num_steps:
        if k == num_steps:  # the transition after the last increment would not change the weights
            increment = path.device_increment(path.statistics(state), betas_device[k - 1], betas_device[k], form=forms[k - 1])
        else:
            run = _run_length(forms, k - 1, num_steps - 1)
            if graphs is not None and failure is None and static is not None and run >= block_steps:
                form = forms[k - 1]
                staged.copy_(betas_device[k - 1:k + block_steps])
                if form not in captured:
                    try:
                        captured[form] = block_of(form)
                    except RuntimeError as error:  # e.g. an operation CUDA cannot capture: the same steps eagerly
                        failure = f"capture failed at step {k} ({str(error).splitlines()[0]})"
                        continue
                captured[form]()
                replays += 1
                if rows is not None:
                    rows_observed(rows)
                for done in range(k, k + block_steps):
                    if progress is not None:
                        progress(done)
                k += block_steps
                continue
            increment, new_state, _ = path.device_advance(state, betas_device[k - 1], betas_device[k], form=forms[k - 1],
                                                          generator=generator)
            # the state lives in dense buffers, with or without graphs: a reduction over a transposed view of the same
            # values may sum in another order, and the eager twin must run the graphs' kernels on the graphs' layouts
            static = fresh_copy(new_state) if static is None else _copy_into(static, new_state)
            state = static
        log_weights = increment.clone() if log_weights is None else log_weights.add_(increment)
        if graphs is not None and rows is None and row is not None:
            rows = torch.empty((block_steps, *row(increment, log_weights).shape), dtype=torch.float64, device=device)
        if observe is not None:
            observe(k, increment, log_weights)
        if progress is not None:
            progress(k)
        k += 1
    note = None
    if graphs is not None:
        note = (f"cuda_graphs: {replays * block_steps} of {num_steps} steps replayed in blocks of {block_steps} from "
                f"{len(captured)} graph(s), {num_steps - replays * block_steps} eager" + (f"; {failure}" if failure else ""))
    return log_weights, state, note


def _run_length(forms: list, start: int, stop: int) -> int:
    """How many steps from index ``start`` (before ``stop``) share ``forms[start]``."""
    end = start
    while end < stop and forms[end] == forms[start]:
        end += 1
    return end - start


def _stand_in(generator: Generator, device: torch.device) -> Generator:
    """Generators of the same kind as ``generator``, seeded apart, for a warm-up step that must not draw from the run's."""
    if isinstance(generator, ChainStreams):
        return ChainStreams([torch.Generator(device).manual_seed(index) for index in range(len(generator))], generator.sizes)
    return torch.Generator(device).manual_seed(0)


def fresh_copy(tree: Any) -> Any:
    """``tree`` (a kernel state: tensors, nested (named) tuples, other leaves) with each tensor copied into a new dense
    one: no view, and no strides other than a dense tensor's."""
    if torch.is_tensor(tree):
        return tree.clone(memory_format=torch.contiguous_format)
    if isinstance(tree, tuple):
        items = [fresh_copy(item) for item in tree]
        return type(tree)(*items) if hasattr(tree, "_fields") else tuple(items)
    return tree


def _copy_into(static: Any, tree: Any) -> Any:
    """Copy ``tree``'s tensors into the same places of ``static`` (same structure and shapes) → ``static``."""
    if torch.is_tensor(static):
        static.copy_(tree)
    elif isinstance(static, tuple):
        for buffer, item in zip(static, tree):
            _copy_into(buffer, item)
    return static
