"""Elementary exact samplers shared by models, kernels and paths."""

from __future__ import annotations

import math

import numpy as np
import torch

UNIFORM_BITS = 24
"""Resolution of the uniforms behind :func:`bernoulli_logits`: a float32 uniform's spacing, ``2⁻²⁴``."""

BULK_DRAWS = 1 << 15
"""Fewest draws for which :func:`bernoulli_logits` takes its uniforms from :func:`uniform_integers` on the CPU: seeding
a numpy generator costs about 15 µs, more than torch spends on a few thousand uniforms."""


def normal(shape: torch.Size | tuple[int, ...], *, generator: torch.Generator | None = None, device: torch.device | str | None = None,
           dtype: torch.dtype | None = None) -> torch.Tensor:
    """Independent standard normal draws of ``shape``: every Gaussian draw of the kernels and paths comes from here."""
    return torch.randn(shape, generator=generator, device=device, dtype=dtype)


def uniform(shape: torch.Size | tuple[int, ...], *, generator: torch.Generator | None = None, device: torch.device | str | None = None,
            dtype: torch.dtype | None = None) -> torch.Tensor:
    """Independent draws uniform on ``[0, 1)`` of ``shape``: every accept/reject uniform of the kernels comes from here."""
    return torch.rand(shape, generator=generator, device=device, dtype=dtype)


def randint(high: int, shape: torch.Size | tuple[int, ...], *, generator: torch.Generator | None = None,
            device: torch.device | str | None = None) -> torch.Tensor:
    """Independent integers uniform on ``[0, high)``, int64 ``shape``."""
    return torch.randint(high, shape, generator=generator, device=device)


def bernoulli(probs: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Independent draws ``x ~ Bernoulli(probs)`` as ``1[U < p]`` with ``U ~ Uniform[0, 1)``, same shape and dtype.

    Equivalent in distribution to ``torch.bernoulli`` and several times faster on CPU. A draw has no gradient, so the
    result never requires grad (an in-place comparison with ``probs`` that requires grad would otherwise mark it).
    """
    uniform = torch.rand(probs.shape, generator=generator, device=probs.device, dtype=probs.dtype)
    return uniform.lt_(probs.detach())  # in place: the comparison's 0./1. overwrite the uniforms


def bernoulli_logits(
    logits: torch.Tensor, *, dtype: torch.dtype | None = None, generator: torch.Generator | None = None
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
    """
    out_dtype = logits.dtype if dtype is None else dtype
    if logits.device.type == "cpu" and logits.numel() >= BULK_DRAWS:
        scaled = torch.sigmoid(logits.detach().to(torch.float32)).mul_(float(1 << UNIFORM_BITS))  # dense, in the logits' layout
        # integers and draws in that same layout (e.g. a transposed product's): a comparison across layouts is twice as slow
        integers = uniform_integers((scaled.numel(),), generator=generator).as_strided(scaled.shape, scaled.stride())
        return torch.lt(integers, scaled, out=torch.empty_like(scaled, dtype=out_dtype))
    draw_dtype = torch.float32 if logits.dtype == torch.float64 else logits.dtype
    probs = torch.sigmoid(logits.detach().to(draw_dtype))
    # the uniforms in the logits' memory layout (e.g. a transposed product's): an in-place comparison across layouts is slow
    uniform = torch.empty_like(probs).uniform_(generator=generator)
    draws = uniform.lt_(probs)  # in place: the comparison's 0./1. overwrite the uniforms
    return draws.to(out_dtype)


def uniform_integers(shape: torch.Size | tuple[int, ...], *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Independent integers uniform on ``[0, 2²⁴)``, int32 CPU ``shape``, from a stream seeded by one draw of ``generator``.

    torch's CPU generator (a Mersenne Twister) makes about 2.7 ns per 32 bits on a 2-core EPYC; numpy's SFC64, a small
    chaotic counter generator that passes BigCrush and PractRand, about 0.9 ns in bulk. Seeding it from one 62-bit draw of
    ``generator`` keeps the torch generator as the only source of randomness: the same generator state gives the same
    integers.
    """
    count = math.prod(shape)
    seed = int(torch.randint(1 << 62, (1,), generator=generator).item())
    words = np.random.SFC64(seed).random_raw((count + 1) // 2)  # uint64: two 32-bit integers each
    integers = torch.from_numpy(words.view(np.int32)[:count].reshape(shape))
    return integers.bitwise_and_((1 << UNIFORM_BITS) - 1)
