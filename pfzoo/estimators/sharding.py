"""Estimators' chains (or examples) run in blocks across ``torch.distributed`` ranks and gathered once (:mod:`pfzoo.distributed`)."""

from __future__ import annotations

from typing import Any, Callable

import torch

from pfzoo import distributed
from pfzoo.estimators.annealing import AnnealingDiagnostics, AnnealingResult, anneal
from pfzoo.estimators.base import ProgressCallback
from pfzoo.paths.base import AnnealingPath

BlockRunner = Callable[[range, torch.Generator, ProgressCallback | None], Any]
"""``run(items, generator, progress)``: one block's work on ``items`` (global indices) with the block's own generator,
returning a picklable payload whose tensors are on the CPU."""


def run_blocks(
    num_items: int,
    run: BlockRunner,
    *,
    generator: torch.Generator | None,
    device: torch.device,
    progress: ProgressCallback | None = None,
) -> list[Any]:
    """Run this rank's blocks of ``range(num_items)`` (:func:`pfzoo.distributed.blocks`) and gather every block's
    payload on every rank, in block order.

    One number is drawn from ``generator`` (every rank draws the same); each block's generator derives from it and the
    block's index, so the payloads do not depend on the number of ranks. ``progress`` counts this rank's blocks.
    """
    all_blocks = distributed.blocks(num_items)
    mine = distributed.owned_blocks(len(all_blocks))
    seed = distributed.stream_seed(generator, device)
    payloads = []
    for position, index in enumerate(mine):
        block_progress = None if progress is None else offset_progress(progress, position, len(mine))
        payloads.append(run(all_blocks[index], distributed.block_generator(seed, index, device), block_progress))
    return distributed.gather_blocks(payloads)


def sharded_anneal(
    path: AnnealingPath,
    betas: torch.Tensor,
    num_chains: int,
    *,
    generator: torch.Generator | None,
    device: torch.device,
    progress: ProgressCallback | None = None,
    diagnostics: bool = False,
) -> AnnealingResult:
    """:func:`~pfzoo.estimators.annealing.anneal` of ``num_chains`` chains from the path's base, sharded across ranks.

    Every rank returns the same float64 log weights ``[num_chains]`` (on ``device``, in global chain order), the
    kernel's acceptance per stretch of steps averaged over all chains and, with ``diagnostics``, the blocks'
    :class:`~pfzoo.estimators.annealing.AnnealingDiagnostics` pooled over all chains; ``state`` is ``None`` (the
    chains' final states stay on their ranks). Blocks are combined in block order, so every number of ranks adds the
    same terms in the same order.
    """

    def run(chains: range, block_generator: torch.Generator, block_progress: ProgressCallback | None) -> tuple:
        initial = path.sample_base(len(chains), generator=block_generator)
        result = anneal(path, betas, initial, generator=block_generator, progress=block_progress, diagnostics=diagnostics)
        acceptance = None if result.acceptance is None else result.acceptance * len(chains)
        return result.log_weights.cpu(), acceptance, result.segment_betas, result.diagnostics

    payloads = run_blocks(num_chains, run, generator=generator, device=device, progress=progress)
    log_weights = torch.cat([payload[0] for payload in payloads]).to(device)
    acceptance = segment_betas = None
    if payloads[0][1] is not None:
        acceptance = torch.stack([payload[1] for payload in payloads]).sum(0) / num_chains
        segment_betas = payloads[0][2]
    pooled = pool_chain_diagnostics([(payload[3], payload[0].numel()) for payload in payloads]) if diagnostics else None
    return AnnealingResult(log_weights, None, pooled, acceptance, segment_betas)


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
