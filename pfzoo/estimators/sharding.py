"""Estimators' chains (or examples) run in blocks across ``torch.distributed`` ranks and gathered once (:mod:`pfzoo.distributed`)."""

from __future__ import annotations

from typing import Any, Callable

import torch

from pfzoo import distributed
from pfzoo.estimators.annealing import AnnealingResult, anneal
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
) -> AnnealingResult:
    """:func:`~pfzoo.estimators.annealing.anneal` of ``num_chains`` chains from the path's base, sharded across ranks.

    Every rank returns the same float64 log weights ``[num_chains]`` (on ``device``, in global chain order) and the
    kernel's acceptance per stretch of steps averaged over all chains; ``state`` is ``None`` (the chains' final states
    stay on their ranks) and per-step diagnostics are not collected.
    """

    def run(chains: range, block_generator: torch.Generator, block_progress: ProgressCallback | None) -> tuple:
        initial = path.sample_base(len(chains), generator=block_generator)
        result = anneal(path, betas, initial, generator=block_generator, progress=block_progress)
        acceptance = None if result.acceptance is None else result.acceptance * len(chains)
        return result.log_weights.cpu(), acceptance, result.segment_betas

    payloads = run_blocks(num_chains, run, generator=generator, device=device, progress=progress)
    log_weights = torch.cat([weights for weights, _, _ in payloads]).to(device)
    acceptance = segment_betas = None
    if payloads[0][1] is not None:
        # summed in block order, so every number of ranks adds the same terms in the same order
        acceptance = torch.stack([summed for _, summed, _ in payloads]).sum(0) / num_chains
        segment_betas = payloads[0][2]
    return AnnealingResult(log_weights, None, None, acceptance, segment_betas)


def offset_progress(progress: ProgressCallback, index: int, count: int) -> ProgressCallback:
    """Report part ``index`` of ``count`` equal parts' progress as overall progress over all parts."""

    def report(done: int, total: int) -> None:
        progress(index * total + done, count * total)

    return report
