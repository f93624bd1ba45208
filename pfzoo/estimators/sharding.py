"""Estimators' chains (or examples) in blocks, each block drawing from its own stream, run on this process's share of
the ``torch.distributed`` ranks and gathered once (:mod:`pfzoo.distributed`).

A run without a process group is the one-rank run: it owns every block, so the same seed gives the same numbers
whether the run is plain, one ``torchrun`` rank or several.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from pfzoo import distributed
from pfzoo.estimators.annealing import AnnealingDiagnostics, AnnealingResult, anneal
from pfzoo.estimators.base import ProgressCallback
from pfzoo.paths.base import AnnealingPath
from pfzoo.sampling import ChainStreams

BlockRunner = Callable[[range, torch.Generator, ProgressCallback | None], Any]
"""``run(items, generator, progress)``: one block's work on ``items`` (global indices) with the block's own generator,
returning a picklable payload whose tensors are on the CPU."""

def batches_blocks(path: AnnealingPath) -> bool:
    """Whether :func:`sharded_anneal` advances a rank's blocks of chains as one batch: the path draws per chain through
    :mod:`pfzoo.sampling` (``path.batches_chain_streams``).

    A batch gives each block the numbers it gets alone only if every per-chain result is the same whatever the other
    rows of the batch: true of elementwise maps, row reductions and matrix products with the chains as rows (measured,
    MKL on x86, float32 and float64), and of float32 products with the chains as columns; MKL's float64 products with
    the chains as columns sum a chain's terms in an order that depends on the batch's size, so the paths keep chains as
    rows in float64 (:class:`~pfzoo.paths.geometric.RBMPathConditionals`).
    """
    return path.batches_chain_streams


def own_blocks(num_items: int, *, generator: torch.Generator | None, device: torch.device,
               part: tuple[int, int] | None = None) -> list[tuple[range, torch.Generator]]:
    """This process's blocks of ``range(num_items)`` (:func:`pfzoo.distributed.blocks`; every block without sharding)
    and each block's generator; with ``part = (i, n)``, only part i of the blocks cut into n contiguous parts as n
    ranks would share them (:func:`part_blocks`), in a process without sharding.

    One number is drawn from ``generator`` (every rank draws the same); each block's generator derives from it and the
    block's global index, so a block's stream does not depend on the number of ranks or parts.
    """
    all_blocks = distributed.blocks(num_items)
    seed = distributed.stream_seed(generator, device)
    owned = distributed.owned_blocks(len(all_blocks)) if part is None else part_blocks(len(all_blocks), part)
    return [(all_blocks[index], distributed.block_generator(seed, index, device)) for index in owned]


def check_part(part, num_chains: int) -> tuple[int, int] | None:
    """``part`` as ``(i, n)`` (any pair of ints, e.g. a list from a config) or ``None``; refused in one line unless
    ``0 ≤ i < n`` and ``n`` is at most the number of blocks ``num_chains`` chains run in."""
    if part is None:
        return None
    pair = None if isinstance(part, (str, bytes)) else _pair(part)
    if pair is None or not all(isinstance(value, int) and not isinstance(value, bool) for value in pair) or not 0 <= pair[0] < pair[1]:
        raise ValueError(f"part must be (i, n) with integers 0 ≤ i < n (part i of n of the chains), or None for every chain; got {part!r}")
    num_blocks = len(distributed.blocks(num_chains))
    if pair[1] > num_blocks:
        raise ValueError(f"part={list(pair)} cuts the chains into {pair[1]} parts but {num_chains} chains run in {num_blocks} block(s) "
                         f"(pfzoo.distributed.blocks): ask for at most {num_blocks} parts, or more chains")
    return pair


def _pair(values) -> tuple | None:
    """``values`` as a tuple when it is an iterable of exactly two items, else ``None``."""
    try:
        pair = tuple(values)
    except TypeError:
        return None
    return pair if len(pair) == 2 else None


def part_chains(num_chains: int, part: tuple[int, int]) -> range:
    """The global indices of the chains of part ``part = (i, n)`` of a run of ``num_chains`` (:func:`part_blocks`)."""
    all_blocks = distributed.blocks(num_chains)
    owned = part_blocks(len(all_blocks), part)
    return range(all_blocks[owned.start].start, all_blocks[owned.stop - 1].stop)


def part_blocks(num_blocks: int, part: tuple[int, int]) -> range:
    """The indices of part ``i`` of ``num_blocks`` blocks cut into ``n`` contiguous parts, ``part = (i, n)``, dealt as
    :func:`pfzoo.distributed.owned_blocks` deals them to n ranks. Refused in one line where it cannot hold: under
    ``torch.distributed`` sharding (which splits the blocks itself), or with more parts than blocks (a part would be
    empty)."""
    index, count = part
    if distributed.shards():
        raise ValueError(f"part={list(part)} runs a share of the chains in one process; under torch.distributed sharding the ranks "
                         f"share them already: run the parts without torchrun, or every chain with it")
    if not 0 <= index < count <= num_blocks:
        raise ValueError(f"part={list(part)} must be (i, n) with 0 ≤ i < n ≤ {num_blocks}, the number of blocks the chains run in")
    return range(index * num_blocks // count, (index + 1) * num_blocks // count)


def gather(payloads: list[Any]) -> list[Any]:
    """Every block's payload in block order, from this process's ``payloads`` (one per owned block, in block order):
    gathered from every rank when sharding, else these."""
    return distributed.gather_blocks(payloads) if distributed.shards() else payloads


def run_blocks(
    num_items: int,
    run: BlockRunner,
    *,
    generator: torch.Generator | None,
    device: torch.device,
    progress: ProgressCallback | None = None,
    part: tuple[int, int] | None = None,
) -> list[Any]:
    """Run this process's blocks of ``range(num_items)`` one after another (:func:`own_blocks`) and return every
    block's payload, in block order (gathered from every rank when sharding; only part ``part`` of them with
    ``part``). ``progress`` counts this process's blocks.
    """
    mine = own_blocks(num_items, generator=generator, device=device, part=part)
    payloads = []
    for position, (items, block_generator) in enumerate(mine):
        block_progress = None if progress is None else offset_progress(progress, position, len(mine))
        payloads.append(run(items, block_generator, block_progress))
    return gather(payloads)


def sharded_chains(
    path: AnnealingPath,
    num_chains: int,
    run: Callable[[int, Any, ProgressCallback | None], tuple[torch.Tensor, ...]],
    *,
    generator: torch.Generator | None,
    device: torch.device,
    progress: ProgressCallback | None = None,
) -> list[tuple[torch.Tensor, ...]]:
    """``run(num_rows, generator, progress)`` over this process's blocks of ``num_chains`` chains, each block with its own
    stream: as one batch drawing from a :class:`~pfzoo.sampling.ChainStreams` where :func:`batches_blocks`, else block by
    block. ``run`` returns tensors whose first dimension is the rows (chains); the result is every block's tuple of them
    (on the CPU), in global block order, gathered from every rank when sharding. For estimators other than the annealing
    loop (bridge sampling, linked importance sampling) that run many chains along a path.
    """
    mine = own_blocks(num_chains, generator=generator, device=device)
    if not mine:  # more ranks than blocks
        return gather([])
    if batches_blocks(path):
        streams = ChainStreams([block_generator for _, block_generator in mine], [len(chains) for chains, _ in mine])
        parts = [output.cpu().split(streams.sizes) for output in run(streams.num_rows, streams, progress)]
        return gather([tuple(part[block] for part in parts) for block in range(len(mine))])
    payloads = []
    for position, (chains, block_generator) in enumerate(mine):
        block_progress = None if progress is None else offset_progress(progress, position, len(mine))
        payloads.append(tuple(output.cpu() for output in run(len(chains), block_generator, block_progress)))
    return gather(payloads)


def sharded_anneal(
    path: AnnealingPath,
    betas: torch.Tensor,
    num_chains: int,
    *,
    generator: torch.Generator | None,
    device: torch.device,
    progress: ProgressCallback | None = None,
    diagnostics: bool = False,
    compile: bool = False,
    cuda_graphs: bool = False,
    part: tuple[int, int] | None = None,
) -> AnnealingResult:
    """:func:`~pfzoo.estimators.annealing.anneal` of ``num_chains`` chains from the path's base, in blocks with their own
    streams, on this process's share of the ranks (all of them without a process group); with ``part = (i, n)`` only
    the chains of part i of n (:func:`part_blocks`), each with the numbers it gets in the whole run.

    The process's blocks advance as one batch with their :class:`~pfzoo.sampling.ChainStreams` where
    :func:`batches_blocks`, else one after another. Every rank returns the same float64 log
    weights ``[num_chains]`` (on ``device``, in global chain order), the kernel's acceptance per stretch of steps
    averaged over all chains and, with ``diagnostics``, the blocks'
    :class:`~pfzoo.estimators.annealing.AnnealingDiagnostics` pooled over all chains; ``state`` is ``None`` (the
    chains' final states stay on their ranks). Per-chain reductions are made per block and combined in block order, so
    a plain run and every number of ranks add the same terms in the same order. ``graph_note`` is this process's first
    run's (``cuda_graphs``: :func:`~pfzoo.estimators.annealing.anneal`).
    """
    notes: list[str | None] = []
    if batches_blocks(path):
        payloads = gather(_anneal_as_one_batch(path, betas, own_blocks(num_chains, generator=generator, device=device, part=part),
                                               progress=progress, diagnostics=diagnostics, compile=compile, cuda_graphs=cuda_graphs,
                                               notes=notes))
    else:

        def run(chains: range, block_generator: torch.Generator, block_progress: ProgressCallback | None) -> tuple:
            initial = _base_draws(path, len(chains), block_generator)
            result = anneal(path, betas, initial, generator=block_generator, progress=block_progress, diagnostics=diagnostics,
                            compile=compile, cuda_graphs=cuda_graphs)
            notes.append(result.graph_note)
            return result.log_weights.cpu(), *_block_reductions(result, slice(None))

        payloads = run_blocks(num_chains, run, generator=generator, device=device, progress=progress, part=part)
    log_weights = torch.cat([payload[0] for payload in payloads]).to(device)
    acceptance = segment_betas = None
    if payloads[0][1] is not None:
        acceptance = torch.stack([payload[1] * payload[0].numel() for payload in payloads]).sum(0) / log_weights.numel()
        segment_betas = payloads[0][2]
    pooled = pool_chain_diagnostics([(payload[3], payload[0].numel()) for payload in payloads]) if diagnostics else None
    return AnnealingResult(log_weights, None, pooled, acceptance, segment_betas, graph_note=notes[0] if notes else None)


@torch.no_grad()
def _base_draws(path, num_chains: int, generator) -> Any:
    """The chains' starting states, drawn from the path's base without autograd, as every later state is (statistics
    that tracked gradients would need graphs of their own under ``torch.compile``)."""
    return path.sample_base(num_chains, generator=generator)


def _anneal_as_one_batch(
    path: AnnealingPath, betas: torch.Tensor, blocks: list[tuple[range, torch.Generator]], *, progress: ProgressCallback | None,
    diagnostics: bool, compile: bool = False, cuda_graphs: bool = False, notes: list | None = None,
) -> list[tuple]:
    """One annealing run of all ``blocks`` of chains as one batch, split back into one payload per block (its
    ``graph_note`` appended to ``notes``)."""
    if not blocks:  # more ranks than blocks
        return []
    streams = ChainStreams([block_generator for _, block_generator in blocks], [len(chains) for chains, _ in blocks])
    initial = _base_draws(path, streams.num_rows, streams)
    result = anneal(path, betas, initial, generator=streams, progress=progress, diagnostics=diagnostics, compile=compile,
                    cuda_graphs=cuda_graphs)
    if notes is not None:
        notes.append(result.graph_note)
    log_weights = result.log_weights.cpu().split(streams.sizes)
    return [(log_weights[block], *_block_reductions(result, block)) for block in range(len(streams))]


def _block_reductions(result: AnnealingResult, block: int | slice) -> tuple:
    """(mean acceptance per stretch, the stretches' β, diagnostics) of one block of ``result``, on the CPU: column
    ``block`` of the per-block reductions of a :class:`~pfzoo.sampling.ChainStreams` run, or all of a one-block run
    (``slice(None)``)."""
    acceptance = None if result.acceptance is None else result.acceptance[..., block]
    summary = result.diagnostics
    if summary is not None:
        summary = AnnealingDiagnostics(summary.betas, *(column[..., block] for column in summary[1:]))
    return acceptance, result.segment_betas, summary


def pool_chain_diagnostics(parts: list[tuple[AnnealingDiagnostics, int]]) -> AnnealingDiagnostics:
    """The diagnostics of all chains from those of blocks of ``n`` chains each, ``parts = [(diagnostics, n), ...]``.

    Increment means and (unbiased) variances pool exactly; the ESS of the union is ``(Σ_b S_b)² / Σ_b S_b² / ESS_b``
    with ``S_b = Σ w`` over block b (``Σ w² = S_b² / ESS_b``), in log space.
    """
    counts = torch.tensor([count for _, count in parts], dtype=torch.float64)[:, None]
    means = torch.stack([part.increment_mean for part, _ in parts])
    second = torch.stack([part.increment_var * (n - 1) / n + part.increment_mean.square() for part, n in parts])
    total = counts.sum()
    mean = (counts * means).sum(0) / total
    variance = ((counts * second).sum(0) / total - mean.square()) * total / (total - 1)
    log_sums = torch.stack([part.log_weight_sums for part, _ in parts])
    log_sum = torch.logsumexp(log_sums, 0)
    ess = torch.exp(2 * log_sum - torch.logsumexp(2 * log_sums - torch.stack([part.ess for part, _ in parts]).log(), 0))
    return AnnealingDiagnostics(parts[0][0].betas, mean, variance, ess, log_sum)


def offset_progress(progress: ProgressCallback, index: int, count: int) -> ProgressCallback:
    """Report part ``index`` of ``count`` equal parts' progress as overall progress over all parts."""

    def report(done: int, total: int) -> None:
        progress(index * total + done, count * total)

    return report
