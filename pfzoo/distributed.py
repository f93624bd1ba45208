"""Chains (or examples) sharded across ``torch.distributed`` ranks: who runs what, with which random stream, and the one gather.

Estimators cut their items (chains, or examples for per-example estimators) into contiguous blocks whose size depends
only on the number of items, and each block draws from its own generator seeded by (one number drawn from the caller's
generator, the block's index). While a process group is initialised (``torchrun``; world size 1 included) the blocks
are dealt to ranks in contiguous runs and every rank must call the estimators alike (:func:`unsharded` opts out);
without one, the process owns every block, so a plain run is the one-rank run. A chain's random stream therefore
depends only on the seed and its global index, never on the launcher or the number of ranks, and once the blocks are
gathered in block order every rank holds the same weights, bit for bit, as a plain run or a run on any other number
of ranks.

The Trainer's collectives live here too: the per-step sum of the ranks' weighted gradients
(:func:`all_reduce_gradients`), the start-of-run copy of rank 0's model (:func:`broadcast_module_state`) and the
agreements every rank must share (:func:`max_over_ranks`).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

import torch
from torch import distributed as dist
from torch import nn

MIN_BLOCK_SIZE = 32
"""Fewest items per block (unless there are fewer items), and the multiple of which every block but the last is made.

Fewer would spend a loop that runs a rank's blocks one after another on per-step overhead. The multiple matters where
a rank advances its blocks as one batch: torch's CPU kernels treat a tensor's elements 2 × SIMD-width at a time
(32 float32s with AVX-512) and the tail one by one, and vectorised and scalar ``exp``/``log1p`` differ in the last bit,
so a chain's numbers are those it gets in any other batch only if every batch starts at a multiple of 32 chains."""

MAX_BLOCKS = 16
"""Most blocks per run. A rank advances its blocks as one batch (:class:`pfzoo.sampling.ChainStreams`), but each block
costs every draw one more call of the generator; more ranks than blocks leave some idle."""

_MASK_64 = (1 << 64) - 1
_unsharded: ContextVar[bool] = ContextVar("pfzoo_unsharded", default=False)


def is_active() -> bool:
    """Whether a ``torch.distributed`` process group is initialised in this process."""
    return dist.is_available() and dist.is_initialized()


def shards() -> bool:
    """Whether estimators shard their chains now: a process group is initialised and no :func:`unsharded` is open."""
    return is_active() and not _unsharded.get()


@contextmanager
def unsharded() -> Iterator[None]:
    """Within this context estimators run every chain in this process, as without a process group: for an estimate made
    on one rank only (e.g. rank 0 of a DistributedDataParallel job), where sharding would wait forever for the others."""
    token = _unsharded.set(True)
    try:
        yield
    finally:
        _unsharded.reset(token)


def rank() -> int:
    """This process's rank in the process group; 0 without one."""
    return dist.get_rank() if is_active() else 0


def world_size() -> int:
    """The number of ranks in the process group; 1 without one."""
    return dist.get_world_size() if is_active() else 1


def launched() -> bool:
    """Whether this process was started by ``torchrun`` (or another launcher that sets ``RANK`` and ``WORLD_SIZE``)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def initialize() -> None:
    """Join the process group ``torchrun`` describes in the environment: gloo for CPU tensors, and NCCL for CUDA tensors
    where CUDA and NCCL exist (each rank then uses the GPU numbered by ``LOCAL_RANK``)."""
    if dist.is_available() and torch.cuda.is_available() and dist.is_nccl_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group(backend="cpu:gloo,cuda:nccl")
    else:
        dist.init_process_group(backend="gloo")


def synchronize() -> None:
    """Wait until every rank gets here, if a process group is initialised."""
    if is_active():
        dist.barrier()


def shutdown() -> None:
    """Leave the process group, if one is initialised."""
    if is_active():
        dist.destroy_process_group()


def blocks(num_items: int) -> list[range]:
    """Contiguous blocks of item indices covering ``range(num_items)``: at most :data:`MAX_BLOCKS`, all of one size, a
    multiple of :data:`MIN_BLOCK_SIZE`, but the last (one block when there are fewer items), which takes the rest (at
    least :data:`MIN_BLOCK_SIZE` items, else it joins the block before). A function of ``num_items`` alone, so the same
    for any number of ranks."""
    count = min(MAX_BLOCKS, max(1, num_items // MIN_BLOCK_SIZE))
    size = MIN_BLOCK_SIZE * -(-num_items // (count * MIN_BLOCK_SIZE))  # ⌈items per block⌉ to a multiple of the minimum
    starts = list(range(0, num_items, size))
    if len(starts) > 1 and num_items - starts[-1] < MIN_BLOCK_SIZE:
        starts.pop()  # a short rest joins the last full block
    return [range(start, stop) for start, stop in zip(starts, [*starts[1:], num_items])]


def owned_share(count: int) -> range:
    """This rank's contiguous share of ``range(count)``, dealt in rank order (sizes differ by at most one; a rank gets
    none when ``count`` is below the world size); ``range(count)`` without a process group."""
    this, size = rank(), world_size()
    return range(this * count // size, (this + 1) * count // size)


def owned_blocks(num_blocks: int) -> range:
    """The indices of the blocks this process runs: a contiguous share of ``num_blocks``, dealt in rank order, while
    estimators shard (:func:`shards`); all of them otherwise (a plain run is the one-rank run)."""
    return owned_share(num_blocks) if shards() else range(num_blocks)


def stream_seed(generator: torch.Generator | None, device: torch.device) -> int:
    """One 62-bit integer drawn from ``generator`` (the device's default generator when ``None``): every rank seeded
    alike draws the same one, and the blocks' generators derive from it."""
    where = generator.device if generator is not None else device
    return int(torch.randint(1 << 62, (1,), generator=generator, device=where).item())


def block_generator(seed: int, block: int, device: torch.device) -> torch.Generator:
    """The generator of block ``block`` on ``device``, seeded by splitmix64 of (``seed``, ``block``): neighbouring
    blocks get unrelated seeds (consecutive seeds would give correlated Mersenne Twister streams at start)."""
    mixed = (seed + (block + 1) * 0x9E3779B97F4A7C15) & _MASK_64
    mixed = ((mixed ^ (mixed >> 30)) * 0xBF58476D1CE4E5B9) & _MASK_64
    mixed = ((mixed ^ (mixed >> 27)) * 0x94D049BB133111EB) & _MASK_64
    mixed ^= mixed >> 31
    return torch.Generator(device).manual_seed(mixed >> 1)  # manual_seed takes a non-negative 63-bit integer


def broadcast_from_first(values: list[Any]) -> None:
    """Replace the picklable items of ``values`` in place by rank 0's (e.g. a run directory only rank 0 may pick)."""
    dist.broadcast_object_list(values, src=0)


def all_gather(item: Any) -> list[Any]:
    """Every rank's picklable ``item`` (tensors on the CPU), in rank order, on every rank."""
    gathered: list[Any] = [None] * world_size()
    dist.all_gather_object(gathered, item)
    return gathered


def gather_rows(share: torch.Tensor) -> torch.Tensor:
    """Every rank's rows ``share [n_r, ...]`` concatenated in rank order ``[Σ n_r, ...]``, on ``share``'s device, on every
    rank: the whole of a tensor whose rows the ranks computed in :func:`owned_share` parts."""
    return torch.cat(all_gather(share.cpu())).to(share.device)


def gather_blocks(payloads: list[Any]) -> list[Any]:
    """Every rank's ``payloads`` (one picklable item per owned block, tensors on the CPU) concatenated in rank order,
    hence in block order, on every rank: the single collective of an estimate."""
    gathered: list[list[Any] | None] = [None] * world_size()
    dist.all_gather_object(gathered, payloads)
    return [payload for share in gathered for payload in share or ()]


def all_reduce_gradients(parameters: list[nn.Parameter], loss: torch.Tensor, *, structure_may_differ: bool) -> torch.Tensor:
    """Sum every rank's ``.grad`` of ``parameters`` and its ``loss`` (scalar), each already weighted by the rank's share
    of the minibatch, in one ``all_reduce`` of a flat buffer; writes the sums into ``.grad`` and returns the summed loss.

    A parameter without a gradient keeps ``grad = None`` (SGD with momentum would move it on a zero gradient). Ranks
    that computed a loss agree on which parameters have one, so this rank's own ``None``s decide without a host sync;
    only when ``structure_may_differ`` (some rank had no rows) the per-parameter flags summed with the buffer decide.
    """
    dtype = loss.dtype
    for parameter in parameters:
        dtype = torch.promote_types(dtype, parameter.dtype)
    pieces = [p.grad.reshape(-1).to(dtype) if p.grad is not None else torch.zeros(p.numel(), dtype=dtype, device=p.device) for p in parameters]
    flags = torch.tensor([float(p.grad is not None) for p in parameters], dtype=dtype, device=loss.device)
    buffer = torch.cat([*pieces, flags, loss.reshape(1).to(dtype)])
    dist.all_reduce(buffer)
    present = (buffer[-1 - len(parameters) : -1] > 0).tolist() if structure_may_differ else [p.grad is not None for p in parameters]
    offset = 0
    for parameter, has_gradient in zip(parameters, present):
        size = parameter.numel()
        parameter.grad = buffer[offset : offset + size].view_as(parameter).to(parameter.dtype) if has_gradient else None
        offset += size
    return buffer[-1].to(loss.dtype)


def max_over_ranks(value: float, device: torch.device) -> float:
    """The largest of every rank's ``value``."""
    tensor = torch.tensor([float(value)], dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return tensor.item()


def broadcast_module_state(model: nn.Module) -> None:
    """Overwrite every rank's parameters and buffers with rank 0's, in place."""
    for value in model.state_dict().values():
        if torch.is_tensor(value):
            dist.broadcast(value, src=0)
