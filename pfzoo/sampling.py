"""Elementary exact samplers shared by models, kernels and paths, and the chains' per-block random streams they draw from."""

from __future__ import annotations

import functools
import math
from typing import Callable, Sequence

import numpy as np
import torch

UNIFORM_BITS = 24
"""Resolution of the uniforms behind :func:`bernoulli_logits`: a float32 uniform's spacing, ``2⁻²⁴``."""

BULK_DRAWS = 1 << 15
"""Fewest draws for which :func:`bernoulli_logits` takes its uniforms from :func:`uniform_integers` on the CPU: seeding
a numpy generator costs about 15 µs, more than torch spends on a few thousand uniforms."""


def eager_only(reason: str) -> Callable[[Callable], Callable]:
    """``torch.compiler.disable(fn, reason=reason)`` applied when ``fn`` is reached under ``torch.compile``: a draw that a
    compiled graph cannot hold runs eagerly there, and called eagerly ``fn`` runs as is. Decorating with
    ``torch.compiler.disable`` itself would import ``torch._dynamo`` with this module, about 2 s of every process's
    ``import pfzoo``, which eager work never needs."""

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def run(*args, **kwargs):
            if torch.compiler.is_compiling():  # a flag read: no import in eager mode
                return torch.compiler.disable(fn, reason=reason)(*args, **kwargs)
            return fn(*args, **kwargs)

        return run

    return decorate


class ChainStreams:
    """The random streams of a batch of chains cut into contiguous blocks of rows, one generator per block.

    Block ``b`` owns rows ``[Σ_{a<b} sizes[a], Σ_{a≤b} sizes[a])`` of every draw and draws them from ``generators[b]``:
    every helper of this module accepts a ``ChainStreams`` wherever it takes a ``generator`` and returns the same
    numbers as drawing each block's rows by itself from its generator and concatenating them. A batch of several blocks
    thus advances as one tensor while each chain's randomness depends only on its block's generator, not on which other
    blocks share the batch (:mod:`pfzoo.estimators.sharding` seeds the blocks by the seed and their global index, so a
    plain run, one ``torchrun`` rank and each of several ranks draw the same numbers for the same chain). Every draw's
    first dimension must be the ``num_rows`` chains.

    On the CPU :func:`bernoulli_logits` compares with 24-bit integers from each block's own SFC64 stream, seeded by one
    62-bit draw of the block's generator at the block's first such draw and then read on (not reseeded per draw, as
    :func:`uniform_integers` does from a plain generator): bulk speed whatever the blocks' sizes, about 0.9 ns per draw
    against 2.7 ns for torch's uniforms. "As drawn alone" therefore means: as drawn with a ``ChainStreams`` of that one
    block.

    Args:
        generators: one generator per block, all on one device.
        sizes: the number of rows of each block (positive).
    """

    def __init__(self, generators: Sequence[torch.Generator], sizes: Sequence[int]) -> None:
        if len(generators) == 0 or len(generators) != len(sizes):
            raise ValueError(f"generators and sizes must be non-empty and of one length, got {len(generators)} and {len(sizes)}")
        if any(isinstance(size, bool) or not isinstance(size, int) or size < 1 for size in sizes):
            raise ValueError(f"sizes must be positive integers, got {list(sizes)}")
        devices = {torch.device(generator.device) for generator in generators}
        if len(devices) != 1:
            raise ValueError(f"generators must all be on one device, got {sorted(map(str, devices))}")
        self.generators = tuple(generators)
        self.sizes = tuple(sizes)
        self.num_rows = sum(self.sizes)
        self.device = devices.pop()
        self.starts = tuple(np.cumsum((0, *self.sizes[:-1])).tolist())
        """The first row of each block."""
        self._bit_generators: list[np.random.SFC64 | None] = [None] * len(self.sizes)

    def __len__(self) -> int:
        """The number of blocks."""
        return len(self.sizes)

    def words(self, block: int, count: int) -> np.ndarray:
        """The next ``count`` raw 32-bit words of block ``block``'s SFC64 stream, int32 ``[count]``."""
        return self._bit_generator(block).random_raw((count + 1) // 2).view(np.int32)[:count]  # uint64: two 32-bit words each

    def _bit_generator(self, block: int) -> np.random.SFC64:
        """Block ``block``'s SFC64 stream, seeded by one 62-bit draw of its generator when first read."""
        bit_generator = self._bit_generators[block]
        if bit_generator is None:
            seed = int(torch.randint(1 << 62, (1,), generator=self.generators[block]).item())
            bit_generator = self._bit_generators[block] = np.random.SFC64(seed)
        return bit_generator

    @eager_only("numpy's SFC64 streams run on the host, outside a compiled graph")
    def fill_integers(self, *outs: torch.Tensor) -> None:
        """Fill int32 CPU tensors ``outs`` (each ``[N, ...]``, dense, any layout) with integers uniform on ``[0, 2²⁴)``: the
        numbers :meth:`integers` would give for each of them called in turn, with one read of each block's stream for all
        of them (a Gibbs sweep's two layers in one call, into buffers reused across steps)."""
        memories = []
        for out in outs:
            self.check_rows(out.shape, "out")
            order = sorted(range(out.dim()), key=lambda dim: out.stride(dim), reverse=True)  # memory order, outermost first
            memories.append((out.permute(order).numpy(), order.index(0)))  # a C-contiguous view of out's memory
        for block, (start, size) in enumerate(zip(self.starts, self.sizes)):
            parts = [memory[(slice(None),) * axis + (slice(start, start + size),)] for memory, axis in memories]
            counts = [(part.size + 1) // 2 for part in parts]  # uint64 words per part, as words() reads them one part at a time
            raw = self._bit_generator(block).random_raw(sum(counts))
            for part, first, count in zip(parts, np.cumsum([0, *counts[:-1]]).tolist(), counts):
                words = raw[first:first + count].view(np.int32)[:part.size].reshape(part.shape)
                np.bitwise_and(words, (1 << UNIFORM_BITS) - 1, out=part)

    @eager_only("numpy's SFC64 streams run on the host, outside a compiled graph")
    def integers(self, like: torch.Tensor) -> torch.Tensor:
        """Integers uniform on ``[0, 2²⁴)``, int32 CPU of the shape and memory layout of ``like [N, ...]`` (dense): each
        block's rows hold the next words of its SFC64 stream in the rows' memory order, as ``like``'s rows of that block
        alone would."""
        self.check_rows(like.shape, "like")
        order = sorted(range(like.dim()), key=lambda dim: like.stride(dim), reverse=True)  # memory order, outermost first
        rows_axis = order.index(0)
        memory = np.empty([like.shape[dim] for dim in order], dtype=np.int32)  # like's elements in memory order
        for block, (start, size) in enumerate(zip(self.starts, self.sizes)):
            part = memory[(slice(None),) * rows_axis + (slice(start, start + size),)]
            part[...] = self.words(block, part.size).reshape(part.shape)
        integers = torch.from_numpy(memory).permute([order.index(dim) for dim in range(like.dim())])
        return integers.bitwise_and_((1 << UNIFORM_BITS) - 1)

    def check_rows(self, shape: torch.Size | tuple[int, ...], name: str = "shape") -> None:
        """Refuse a draw whose first dimension is not the streams' ``num_rows`` chains."""
        if len(shape) == 0 or shape[0] != self.num_rows:
            raise ValueError(f"{name} must have the streams' {self.num_rows} chains as its first dimension, got {tuple(shape)}")

    @eager_only("one generator per block: a loop of draws outside a compiled graph")
    def concatenated(self, shape: torch.Size | tuple[int, ...], draw: Callable[[torch.Tensor, torch.Generator], torch.Tensor], *,
                     dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> torch.Tensor:
        """``draw(out, generator)`` filling each block's rows of one ``shape`` tensor (``out`` is the block's row slice,
        contiguous since the rows are the outermost dimension) from that block's generator: no concatenation copy."""
        self.check_rows(shape)
        result = torch.empty(shape, dtype=dtype, device=device)
        for start, size, generator in zip(self.starts, self.sizes, self.generators):
            draw(result[start:start + size], generator)
        return result


Generator = torch.Generator | ChainStreams | None
"""What every draw helper takes as ``generator``: a torch generator (or ``None`` for the default one), or the
:class:`ChainStreams` of a batch of chains."""


def normal(shape: torch.Size | tuple[int, ...], *, generator: Generator = None, device: torch.device | str | None = None,
           dtype: torch.dtype | None = None) -> torch.Tensor:
    """Independent standard normal draws of ``shape``: every Gaussian draw of the kernels and paths comes from here."""
    if isinstance(generator, ChainStreams):
        return generator.concatenated(shape, lambda out, stream: out.normal_(generator=stream), dtype=dtype, device=device)
    return torch.randn(shape, generator=generator, device=device, dtype=dtype)


def uniform(shape: torch.Size | tuple[int, ...], *, generator: Generator = None, device: torch.device | str | None = None,
            dtype: torch.dtype | None = None) -> torch.Tensor:
    """Independent draws uniform on ``[0, 1)`` of ``shape``: every accept/reject uniform of the kernels comes from here."""
    if isinstance(generator, ChainStreams):
        return generator.concatenated(shape, lambda out, stream: out.uniform_(generator=stream), dtype=dtype, device=device)
    return torch.rand(shape, generator=generator, device=device, dtype=dtype)


def randint(high: int, shape: torch.Size | tuple[int, ...], *, generator: Generator = None,
            device: torch.device | str | None = None) -> torch.Tensor:
    """Independent integers uniform on ``[0, high)``, int64 ``shape``."""
    if isinstance(generator, ChainStreams):
        return generator.concatenated(shape, lambda out, stream: out.random_(0, high, generator=stream), dtype=torch.int64, device=device)
    return torch.randint(high, shape, generator=generator, device=device)


def bernoulli(probs: torch.Tensor, *, generator: Generator = None) -> torch.Tensor:
    """Independent draws ``x ~ Bernoulli(probs)`` as ``1[U < p]`` with ``U ~ Uniform[0, 1)``, same shape and dtype.

    Equivalent in distribution to ``torch.bernoulli`` and several times faster on CPU. A draw has no gradient, so the
    result never requires grad (an in-place comparison with ``probs`` that requires grad would otherwise mark it).
    """
    uniforms = uniform(probs.shape, generator=generator, device=probs.device, dtype=probs.dtype)
    return uniforms.lt_(probs.detach())  # in place: the comparison's 0./1. overwrite the uniforms


def bernoulli_logits(
    logits: torch.Tensor, *, dtype: torch.dtype | None = None, generator: Generator = None
) -> torch.Tensor:
    """Independent draws ``x ~ Bernoulli(σ(logits))`` as ``1[U < σ(x)]`` with ``U ~ Uniform[0, 1)``: ``logits [...]`` →
    draws of the same shape in ``dtype`` (default: the logits' dtype).

    For float64 logits, ``σ`` and ``U`` are float32 (otherwise the logits' own dtype): a float64 uniform costs two 32-bit
    draws of the generator and float64 ``σ`` half the vector width, and the two took well over half of a float64 RBM
    Gibbs step at 20 hidden units. Each draw's probability is then ``σ(x)`` to within ``2⁻²⁴ ≈ 6e-8`` (the float32
    uniforms' spacing), as for float32 models: ``P(U < p) = ⌈p 2²⁴⌉ 2⁻²⁴``, so a probability below ``2⁻²⁴`` draws 1 with
    probability ``2⁻²⁴``. On the CPU the uniforms are 24-bit integers ``I`` from :func:`uniform_integers` compared with
    ``p 2²⁴`` (exact in float32) when there are at least :data:`BULK_DRAWS` draws: the same law, at under half the cost
    of torch's float uniforms there. Gradients never flow through a draw.

    With :class:`ChainStreams` each block's rows are drawn as with a ``ChainStreams`` of that block alone (on the CPU
    always from the 24-bit integers of the block's own SFC64 stream), in the logits' memory layout.
    """
    out_dtype = logits.dtype if dtype is None else dtype
    if isinstance(generator, ChainStreams):
        return _blockwise_bernoulli_logits(logits, out_dtype, generator)
    if logits.device.type == "cpu" and logits.numel() >= BULK_DRAWS:
        scaled = torch.sigmoid(logits.detach().to(torch.float32)).mul_(float(1 << UNIFORM_BITS))  # dense, in the logits' layout
        # integers and draws in that same layout (e.g. a transposed product's): a comparison across layouts is twice as slow
        integers = uniform_integers((scaled.numel(),), generator=generator).as_strided(scaled.shape, scaled.stride())
        return _below(integers, scaled, out_dtype)
    draw_dtype = torch.float32 if logits.dtype == torch.float64 else logits.dtype
    probs = torch.sigmoid(logits.detach().to(draw_dtype))
    # the uniforms in the logits' memory layout (e.g. a transposed product's): an in-place comparison across layouts is slow
    uniforms = _uniform_like(probs, generator)
    draws = uniforms.lt_(probs)  # in place: the comparison's 0./1. overwrite the uniforms
    return draws.to(out_dtype)


def bernoulli_probs_(probs: torch.Tensor, *, dtype: torch.dtype, generator: Generator = None, integers: torch.Tensor | None = None,
                     out: torch.Tensor | None = None) -> torch.Tensor:
    """Draws ``1[U < p]`` from float32 CPU probabilities ``probs [N, ...]`` (overwritten: scaled by ``2²⁴`` in place), in
    ``dtype``, into ``out`` when given (of ``probs``' shape and layout): the numbers :func:`bernoulli_logits` draws from
    logits whose float32 σ are ``probs``, for the same generator. ``integers`` (int32, ``probs``' shape and layout) are the
    24-bit integers that a :class:`ChainStreams` would draw for them, filled beforehand (:meth:`ChainStreams.fill_integers`:
    a sweep's layers in one call); without them they are drawn here as :func:`bernoulli_logits` does."""
    if out is None:
        out = torch.empty_like(probs, dtype=dtype)
    if integers is None and not isinstance(generator, ChainStreams) and probs.numel() < BULK_DRAWS:
        return torch.lt(_uniform_like(probs, generator), probs, out=out)  # torch's uniforms, as bernoulli_logits below bulk sizes
    scaled = probs.mul_(float(1 << UNIFORM_BITS))
    if integers is None:
        integers = generator.integers(scaled) if isinstance(generator, ChainStreams) else \
            uniform_integers((scaled.numel(),), generator=generator).as_strided(scaled.shape, scaled.stride())
    return torch.lt(integers, scaled, out=out)


def _below(integers: torch.Tensor, scaled: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """``1[I < p 2²⁴]`` in ``out_dtype``, in ``scaled``'s layout: written straight into an output of that layout in eager
    mode; under ``torch.compile`` (which refuses a non-contiguous ``out=``) the comparison converted, the same values."""
    if torch.compiler.is_compiling():
        return torch.lt(integers, scaled).to(out_dtype)
    return torch.lt(integers, scaled, out=torch.empty_like(scaled, dtype=out_dtype))


@eager_only("a draw from an explicit torch.Generator, which torch.compile cannot trace")
def _uniform_like(like: torch.Tensor, generator: Generator) -> torch.Tensor:
    """Uniforms on ``[0, 1)`` of ``like``'s shape, dtype and memory layout, from ``generator``."""
    return torch.empty_like(like).uniform_(generator=generator)


def _blockwise_bernoulli_logits(logits: torch.Tensor, out_dtype: torch.dtype, streams: ChainStreams) -> torch.Tensor:
    """:func:`bernoulli_logits` of each block of rows of ``logits [N, ...]`` from its own stream, into one tensor in the
    logits' layout. On the CPU ``1[I < p 2²⁴]`` with each block's next integers ``I`` laid out in its rows' memory
    order (:meth:`ChainStreams.integers`), one σ and one comparison for the batch; elsewhere each block's torch uniforms."""
    streams.check_rows(logits.shape, "logits")
    if logits.device.type != "cpu":
        if len(streams) == 1:
            return bernoulli_logits(logits, dtype=out_dtype, generator=streams.generators[0])
        draws = torch.empty_like(logits, dtype=out_dtype)
        for start, size, stream in zip(streams.starts, streams.sizes, streams.generators):
            draws[start:start + size] = bernoulli_logits(logits[start:start + size], dtype=out_dtype, generator=stream)
        return draws
    scaled = torch.sigmoid(logits.detach().to(torch.float32)).mul_(float(1 << UNIFORM_BITS))  # dense, in the logits' layout
    return _below(streams.integers(scaled), scaled, out_dtype)


@eager_only("numpy's SFC64 stream runs on the host, outside a compiled graph")
def uniform_integers(shape: torch.Size | tuple[int, ...], *, generator: Generator = None) -> torch.Tensor:
    """Independent integers uniform on ``[0, 2²⁴)``, int32 CPU ``shape``, from a stream seeded by one draw of ``generator``.

    torch's CPU generator (a Mersenne Twister) makes about 2.7 ns per 32 bits on a 2-core EPYC; numpy's SFC64, a small
    chaotic counter generator that passes BigCrush and PractRand, about 0.9 ns in bulk. Seeding it from one 62-bit draw of
    ``generator`` keeps the torch generator as the only source of randomness: the same generator state gives the same
    integers. With :class:`ChainStreams` each block's rows are the next integers of its own SFC64 stream
    (:meth:`ChainStreams.integers`).
    """
    if isinstance(generator, ChainStreams):
        return generator.integers(torch.empty(shape, dtype=torch.int32))
    count = math.prod(shape)
    seed = int(torch.randint(1 << 62, (1,), generator=generator).item())
    words = np.random.SFC64(seed).random_raw((count + 1) // 2)  # uint64: two 32-bit integers each
    integers = torch.from_numpy(words.view(np.int32)[:count].reshape(shape))
    return integers.bitwise_and_((1 << UNIFORM_BITS) - 1)
