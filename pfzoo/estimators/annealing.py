"""The annealing loop shared by AIS, Hamiltonian AIS and RAISE."""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import torch

from pfzoo.estimators.base import ProgressCallback
from pfzoo.estimators.cuda_graphs import CudaGraphs, anneal_on_device, device_steps_unavailable, fresh_copy, run_generators
from pfzoo.paths.base import AnnealingPath
from pfzoo.sampling import ChainStreams, Generator

_PROGRESS_UPDATES = 100
ACCEPTANCE_SEGMENTS = 10


class AnnealingDiagnostics(NamedTuple):
    """Where a path spends its distributions: per-step statistics of one annealing run, float64 CPU ``[K]``.

    With ``Δ_k(x) = log f_{β_k}(x) − log f_{β_{k−1}}(x)`` evaluated at the chains ``x_{k−1}`` (which
    stand in for ``p_{k−1}``):

    betas: ``β_k``, the distribution each step moves to.
    increment_mean: ``mean Δ_k``; their sum is the mean final log weight.
    increment_var: ``var Δ_k`` over chains. To second order in the step it is the symmetric
        divergence ``J_k = KL(p_{k−1}‖p_k) + KL(p_k‖p_{k−1})`` (for a geometric path
        ``(β_k − β_{k−1})² Var_{p_{k−1}}[log f_1 − log f_0]``, the Fisher metric along the path;
        Grosse, Maddison & Salakhutdinov 2013, §3), provided the chains are near equilibrium.
    ess: effective sample size ``(Σ w)² / Σ w²`` of the log weights accumulated up to step k
        (with ``group_size``: per group of that many consecutive chains, averaged over the groups —
        RAISE's chains of one example).
    log_weight_sums: ``log Σ w`` over all chains of the weights accumulated up to step k (``None`` with
        ``group_size``): with ``ess`` it pools the ESS of chains annealed apart (on several ranks).
    """

    betas: torch.Tensor
    increment_mean: torch.Tensor
    increment_var: torch.Tensor
    ess: torch.Tensor
    log_weight_sums: torch.Tensor | None = None

    @property
    def symmetric_kl(self) -> torch.Tensor:
        """Per-step estimates of ``J_k`` ``[K]`` (the increment variances; see the class docstring)."""
        return self.increment_var

    @property
    def cost_functional(self) -> float:
        """``½ Σ_k J_k ≈ Σ_k KL(p_{k−1}‖p_k)``: with perfect transitions the bias of ``E[log w]`` (Grosse et al. 2013, eq. 4)."""
        return 0.5 * self.increment_var.sum().item()


class AnnealingResult(NamedTuple):
    """log_weights: float64 ``[N]``; state: the chains after the last transition; diagnostics: when asked for.

    acceptance: the kernel's mean acceptance probability in each of up to :data:`ACCEPTANCE_SEGMENTS` equal
    stretches of the steps (float64 CPU ``[S]``), ``None`` for paths whose moves always accept (exact Gibbs,
    perfect transitions). segment_betas: the β at the end of each stretch ``[S]``. graph_note: with ``cuda_graphs``,
    how many steps were replayed from CUDA graphs, or why none were (:func:`anneal`).

    A run with :class:`~pfzoo.sampling.ChainStreams` reduces over each block's chains apart, so that blocks run in
    any batch give the same numbers: ``acceptance`` is then ``[S, b]`` and the diagnostics' columns ``[K, b]``, one
    column per block (:func:`pfzoo.estimators.sharding.pool_chain_diagnostics` pools them).
    """

    log_weights: torch.Tensor
    state: Any
    diagnostics: AnnealingDiagnostics | None = None
    acceptance: torch.Tensor | None = None
    segment_betas: torch.Tensor | None = None
    graph_note: str | None = None


@torch.no_grad()
def anneal(
    path: AnnealingPath,
    betas: torch.Tensor,
    state: Any,
    *,
    generator: Generator = None,
    progress: ProgressCallback | None = None,
    diagnostics: bool = False,
    group_size: int | None = None,
    compile: bool = False,
    cuda_graphs: bool = False,
) -> AnnealingResult:
    """Run annealed importance sampling along ``betas`` (Neal 2001, eqs. 3–4).

    Starting from ``state`` (exact samples of ``f_{β_0}``), for k = 1..K:

        log w += log f_{β_k}(x) - log f_{β_{k-1}}(x);   x ← T_{β_k}(x)

    ``state`` is a kernel state of the path (``path.sample_base`` or ``path.init``); each transition is one step of
    ``path.kernel`` on ``path.target``, whose new state carries the statistics the next increment reads.
    The transition after the last increment would not change the weights and is skipped.
    ``betas`` (float64 ``[K + 1]``) may run in either direction: RAISE anneals from 1 down to 0.
    Log weights accumulate in float64. Observers watch every step without touching the chains or the random stream
    (:class:`AcceptanceBySegment`, always; :class:`StepDiagnostics` with ``diagnostics``; the ``progress`` callback):
    the kernels' acceptance probabilities are summed per stretch of steps on the device and reported once at the end
    (no host sync in the loop), and with ``diagnostics`` the result also carries :class:`AnnealingDiagnostics`.
    With :class:`~pfzoo.sampling.ChainStreams` for ``generator`` the chains are its blocks' rows and the
    acceptance and diagnostics are per block (:class:`AnnealingResult`); ``group_size`` is then refused.
    With ``compile`` the step's increment and transition run under ``torch.compile`` (:func:`compiled_step`; the last
    step's lone increment eagerly), the transition's draws made first by ``path.draw_noise``: where they are the
    kernel's own draws (HMC) the numbers are those of the eager loop to rounding (a compiled kernel may fuse and reorder
    floating-point operations); an RBM path's Gibbs sweep instead draws from a counter hash of per-chain keys
    (:mod:`pfzoo.hashed_draws`): the same law, other numbers.

    On a CUDA device, a path with device-β steps (an RBM, DBM or DBN path with the plain Gibbs kernel:
    :meth:`~pfzoo.paths.base.AnnealingPath.device_step_form`) runs them (:func:`~pfzoo.estimators.cuda_graphs.anneal_on_device`,
    unless ``compile``), and with ``cuda_graphs`` replays blocks of them from CUDA graphs: the same numbers as without,
    for the same seed. ``AnnealingResult.graph_note`` then says how many steps were replayed, or why none could be.
    """
    blocks = generator.sizes if isinstance(generator, ChainStreams) else None
    if blocks is not None and group_size is not None:
        raise ValueError("group_size must be None when generator is a ChainStreams (its blocks are the groups of chains)")
    betas_list = betas.tolist()
    num_steps = len(betas_list) - 1
    acceptance = AcceptanceBySegment(betas_list, blocks)
    step_diagnostics = StepDiagnostics(betas, blocks, group_size) if diagnostics else None
    report = progress and ProgressReport(progress, num_steps)
    observers = [observer for observer in (acceptance, step_diagnostics, report) if observer]
    on_device = device_run(path, betas_list, state, compile=compile)
    if on_device is None:
        graphs = CudaGraphs(run_generators(generator), state.position.device) if cuda_graphs else None

        def observe(k: int, increment: torch.Tensor, log_weights: torch.Tensor) -> None:
            for observer in (acceptance, step_diagnostics):
                if observer is not None:
                    observer.observe(k, increment, log_weights, None)  # device-β kernels always accept

        log_weights, state, note = anneal_on_device(
            path, betas, state, generator=generator, graphs=graphs, observe=observe,
            row=None if step_diagnostics is None else step_diagnostics.row,
            rows_observed=None if step_diagnostics is None else step_diagnostics.extend,
            progress=None if report is None else lambda k: report.observe(k, None, None, None))
        summary = None if step_diagnostics is None else step_diagnostics.result()
        return AnnealingResult(log_weights, state, summary, *acceptance.result(), graph_note=note)
    graph_note = f"cuda_graphs: none ({on_device})" if cuda_graphs else None
    compiled_advance = compiled_step() if compile else None
    if compile:  # the graph's steps return fresh dense tensors: a first state of views would get a graph of its own
        state = fresh_copy(state)
    workspace: dict = {}  # the path's buffers for this run (AnnealingPath.advance)
    log_weights = None
    for k in range(1, num_steps + 1):
        info = None
        if k == num_steps:  # the transition after the last increment would not change the weights
            increment = _increment(path, state, betas_list[k - 1], betas_list[k])  # eager: one op, not worth a graph
        elif compile:  # the kernel's draws made eagerly first where it can, so that the compiled step holds none
            noise = path.draw_noise(state, generator=generator)
            increment, state, info = compiled_advance(path, state, betas_list[k - 1], betas_list[k],
                                                      generator if noise is None else None, noise)
        else:
            increment, state, info = path.advance(state, betas_list[k - 1], betas_list[k], generator=generator, workspace=workspace)
        log_weights = increment.clone() if log_weights is None else log_weights.add_(increment)  # in place: no allocation a step
        for observer in observers:
            observer.observe(k, increment, log_weights, info)
    summary = None if step_diagnostics is None else step_diagnostics.result()
    return AnnealingResult(log_weights, state, summary, *acceptance.result(), graph_note=graph_note)


def device_run(path: AnnealingPath, betas: list[float], state: Any, *, compile: bool) -> str | None:
    """``None`` when :func:`anneal` runs ``path``'s device-β steps (:mod:`pfzoo.estimators.cuda_graphs`), else why not
    (one clause): the chains are not on a CUDA device, ``compile`` asks for the compiled step, or the path has none."""
    position = getattr(state, "position", None)
    if not torch.is_tensor(position) or position.device.type != "cuda":
        return f"the chains are on {'the ' + position.device.type if torch.is_tensor(position) else 'no device'}, not CUDA"
    if compile:
        return "compile=True runs the compiled step instead"
    return device_steps_unavailable(path, betas, state)


class AcceptanceBySegment:
    """The kernel's mean acceptance probability in each of up to :data:`ACCEPTANCE_SEGMENTS` equal stretches of the
    transitions, summed on the device (one add a step) and read once by :meth:`result`; per block of chains under
    :class:`~pfzoo.sampling.ChainStreams` (``blocks``: the blocks' sizes)."""

    def __init__(self, betas: list[float], blocks: list[int] | None) -> None:
        self.betas, self.blocks = betas, blocks
        self.num_steps = len(betas) - 1
        self.num_segments = max(1, min(ACCEPTANCE_SEGMENTS, self.num_steps - 1))
        self.sums: torch.Tensor | None = None
        self.counts = [0] * self.num_segments

    def observe(self, k: int, increment: torch.Tensor, log_weights: torch.Tensor, info: Any) -> None:
        if info is None or info.accept_prob is None:
            return
        segment = min(self.num_segments - 1, (k - 1) * self.num_segments // max(1, self.num_steps - 1))
        if self.sums is None:
            # per chain under ChainStreams (reduced per block once at the end), else the mean
            shape = (self.num_segments,) if self.blocks is None else (self.num_segments, info.accept_prob.shape[0])
            self.sums = torch.zeros(shape, dtype=torch.float64, device=info.accept_prob.device)
        self.sums[segment] += info.accept_prob.double().mean() if self.blocks is None else info.accept_prob.double()
        self.counts[segment] += 1

    def result(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """``(acceptance [S] or [S, b], segment_betas [S])`` float64 CPU, or ``(None, None)`` for moves that always accept."""
        if self.sums is None:
            return None, None
        counts = torch.tensor(self.counts, dtype=torch.float64).clamp(min=1)
        sums = self.sums
        if self.blocks is not None:  # [S, N] per-chain sums → [S, B] per-block means
            sums = torch.stack([part.mean(-1) for part in sums.split(self.blocks, dim=-1)], -1)
        acceptance = sums.cpu() / (counts if self.blocks is None else counts[:, None])
        span = max(1, self.num_steps - 1)
        ends = [min(self.num_steps - 1, (s + 1) * span // self.num_segments) for s in range(self.num_segments)]
        return acceptance, torch.tensor([self.betas[max(1, end)] for end in ends], dtype=torch.float64)


class StepDiagnostics:
    """Collects :class:`AnnealingDiagnostics`: each step's ``[mean Δ, var Δ, ESS, log Σ w]`` over the chains, per block
    of chains under ``blocks`` (sizes) or with ESS per group of ``group_size`` consecutive chains (then no ``log Σ w``);
    kept on the device until :meth:`result`."""

    def __init__(self, betas: torch.Tensor, blocks: list[int] | None, group_size: int | None) -> None:
        self.betas, self.blocks, self.group_size = betas, blocks, group_size
        self.per_step: list[torch.Tensor] = []

    def observe(self, k: int, increment: torch.Tensor, log_weights: torch.Tensor, info: Any) -> None:
        self.per_step.append(self.row(increment, log_weights))

    def row(self, increment: torch.Tensor, log_weights: torch.Tensor) -> torch.Tensor:
        """One step's summary: ``[4]``, ``[4, b]`` per block, or ``[3]`` per group (on the device, nothing read back)."""
        if self.blocks is not None:
            return torch.stack([_chain_summary(part, weights) for part, weights in
                                zip(increment.split(self.blocks), log_weights.split(self.blocks))], -1)
        if self.group_size is None:
            return _chain_summary(increment, log_weights)
        ess = _effective_sample_size(log_weights.view(-1, self.group_size)).mean()
        return torch.stack([increment.mean(), increment.var(), ess])

    def extend(self, rows: torch.Tensor) -> None:
        """Add the rows of a block of steps replayed from a CUDA graph, ``rows [S, ...]`` (copied: the graph reuses them)."""
        self.per_step.extend(rows.clone().unbind(0))

    def result(self) -> AnnealingDiagnostics:
        columns = torch.stack(self.per_step).double().cpu()
        return AnnealingDiagnostics(self.betas.double().cpu()[1:], columns[:, 0], columns[:, 1], columns[:, 2],
                                    columns[:, 3] if self.group_size is None else None)


class ProgressReport:
    """Calls ``progress(k, K)`` about :data:`_PROGRESS_UPDATES` times over a run of K steps, and after the last."""

    def __init__(self, progress: ProgressCallback, num_steps: int) -> None:
        self.progress, self.num_steps = progress, num_steps
        self.every = max(1, num_steps // _PROGRESS_UPDATES)

    def observe(self, k: int, increment: torch.Tensor, log_weights: torch.Tensor, info: Any) -> None:
        if k % self.every == 0 or k == self.num_steps:
            self.progress(k, self.num_steps)


def _increment(path: AnnealingPath, state: Any, beta_from: float, beta_to: float) -> torch.Tensor:
    """``log f_{β_to}(x) − log f_{β_from}(x)`` per chain, float64 ``[N]``, from the statistics ``state`` carries."""
    return path.log_weight_increment(path.statistics(state), beta_from, beta_to)


def _transition(path: AnnealingPath, state: Any, beta: float, *, generator: Generator = None, noise: Any = None) -> tuple[Any, Any]:
    """One kernel step of ``path`` at β: ``(state, info)``, with the step's draws ``noise`` made beforehand if given."""
    return path.transition(state, beta, generator=generator, noise=noise)


def _advance(path: AnnealingPath, state: Any, beta_from: float, beta_to: float, generator: Generator, noise: Any) -> tuple:
    """:func:`_increment` from β to β' and :func:`_transition` at β': ``(increment, state, info)``, one function to compile."""
    increment = _increment(path, state, beta_from, beta_to)
    return (increment, *_transition(path, state, beta_to, generator=generator, noise=noise))


@functools.cache
def compiled_step() -> Callable:
    """The step under ``torch.compile``: ``advance(path, state, β, β', generator, noise)`` (:func:`_advance`: the increment
    and the transition in one graph), with β's as dynamic inputs, so that one graph serves every step of every schedule
    instead of one recompilation per β, and every later run reuses it (dynamo guards on the path's type and tensors, so
    each kind of path gets its own graph).

    A kernel that can make its draws first (:class:`~pfzoo.kernels.base.NoiseFirstKernel`: HMC) has them made eagerly
    before each step (:meth:`~pfzoo.paths.base.AnnealingPath.draw_noise`, in the order its step would make them, so the
    numbers are the eager loop's) and passed as ``noise``: the step is then one graph without a break. An RBM path with
    the plain Gibbs kernel draws one key per chain and layer first instead, and its sweep hashes them inside the graph
    (:meth:`~pfzoo.paths.RBMGeometricPath.draw_noise`): one graph too, whose σ, draws and weight increment fuse. Elsewhere
    the draws of :mod:`pfzoo.sampling` run eagerly between graphs, where they take an explicit ``torch.Generator`` or
    numpy's bulk integers (CPU), neither of which a graph can hold.

    The increment's :func:`~pfzoo.logmath.softplus_difference` picks its form (exact, or a series of order 2, 3 or 4) on
    the host from ``|β' − β|``: each form gets its own graph the first time a step takes it (at most four), never one per β.
    """
    return torch.compile(_advance, dynamic=True)


def _chain_summary(increment: torch.Tensor, log_weights: torch.Tensor) -> torch.Tensor:
    """One step's ``[mean Δ, var Δ, ESS, log Σ w]`` over chains, from increments and log weights ``[N]``."""
    log_sum = torch.logsumexp(log_weights, -1)
    ess = torch.exp(2 * log_sum - torch.logsumexp(2 * log_weights, -1))  # as _effective_sample_size
    return torch.stack([increment.mean(), increment.var(), ess, log_sum])


def _effective_sample_size(log_weights: torch.Tensor) -> torch.Tensor:
    """``(Σ w)² / Σ w²`` over the last dim of log weights ``[..., N]``, computed in log space."""
    return torch.exp(2 * torch.logsumexp(log_weights, -1) - torch.logsumexp(2 * log_weights, -1))
