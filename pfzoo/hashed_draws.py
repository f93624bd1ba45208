"""Bernoulli draws from a counter hash: random numbers that a compiled graph holds, so a compiled Gibbs sweep fuses its
σ, its uniforms and its comparisons into one pass over the chains.

A draw of :mod:`pfzoo.sampling` takes a ``torch.Generator`` (or numpy's bulk integers), neither of which
``torch.compile`` can trace: a compiled step breaks its graph at every draw and loses the fusion it was compiled for.
Here the generator is read once per step and per layer, outside the graph, for one 32-bit *key* per chain
(:func:`draw_keys`); inside the graph element ``j`` of chain ``n``'s row gets the 24-bit integer

    I[n, j] = mix(key[n] XOR (j · 0x9E3779B9 mod 2³²)) >> 8,

where ``mix`` is a two-round multiply–xorshift bijection of 32-bit words (shifts 16, 15, 15; multipliers 0x21f0aaad and
0x735a2d97: the best two-round constants found by Wellons' hash prospector, avalanche bias about 0.11) and ``0x9E3779B9``
(⌊2³²/φ⌋) spreads consecutive columns over the word. Draws are ``1[I < p 2²⁴]``, the law of
:func:`pfzoo.sampling.bernoulli_logits` (probability ``⌈p 2²⁴⌉ 2⁻²⁴``). The keys are fresh uniform words of the run's
generator at every step, so rows and steps never share a sequence; two rows can agree at single, scattered elements
(when two keys differ by ``c_j XOR c_j'`` for some columns), as independent uniforms agree by chance.

The words are held in int32 lanes (a word ``w ≥ 2³¹`` as ``w − 2³²``): a product's low 32 bits, all the hash keeps, are
what a 32-bit multiply gives whatever the signs, and right shifts are masked to their logical result. On CPUs without
64-bit vector multiplies (AVX2) this halves the hash's cost against int64 words (AMD EPYC, one thread, 1,000 × 1,784
draws: 4.8 ms against 8.2 ms; σ and the comparison alone 2.5 ms). It relies on int32 multiplication wrapping modulo 2³²,
as the hardware multiplies of every torch backend do (C++ leaves signed overflow undefined; ``tests/test_hashed_draws.py``
checks eager and compiled results, vector lanes and scalar tails, against the exact int64 arithmetic).
"""

from __future__ import annotations

import torch

from pfzoo.sampling import UNIFORM_BITS, Generator, randint

KEY_BITS = 32
"""Width of a chain's key (and of the hash's words)."""

_WORD_MASK = (1 << KEY_BITS) - 1
_SHIFTS = (16, 15, 15)


def _int32(word: int) -> int:
    """The int32 whose bits are the 32-bit ``word``'s."""
    return word - (1 << KEY_BITS) if word >= 1 << (KEY_BITS - 1) else word


_COLUMN_SPREAD = _int32(0x9E3779B9)  # ⌊2³²/φ⌋: consecutive columns land far apart in the word
_MULTIPLIERS = (_int32(0x21F0AAAD), _int32(0x735A2D97))


def draw_keys(num_chains: int, num_layers: int, *, generator: Generator = None, device: torch.device | str | None = None) -> torch.Tensor:
    """One key per chain and layer for one step: int64 ``[num_layers, N]``, uniform on ``[0, 2³²)``, from ``generator``
    (a :class:`~pfzoo.sampling.ChainStreams` draws each block's rows from its own generator)."""
    return randint(1 << KEY_BITS, (num_chains, num_layers), generator=generator, device=device).T


def _logical_shift(x: torch.Tensor, shift: int) -> torch.Tensor:
    """``x >> shift`` of int32 words as unsigned: the arithmetic shift with the sign's copies masked off."""
    return (x >> shift) & ((1 << (KEY_BITS - shift)) - 1)


def _mix_words(x: torch.Tensor) -> torch.Tensor:
    """:func:`mix` on int32 words (their bits the 32-bit words), int32 out."""
    x = x ^ _logical_shift(x, _SHIFTS[0])
    x = x * _MULTIPLIERS[0]
    x = x ^ _logical_shift(x, _SHIFTS[1])
    x = x * _MULTIPLIERS[1]
    return x ^ _logical_shift(x, _SHIFTS[2])


def mix(words: torch.Tensor) -> torch.Tensor:
    """The 32-bit bijection of the module docstring on int64 words in ``[0, 2³²)``, elementwise: int64 in ``[0, 2³²)``,
    same shape."""
    return _mix_words(words.to(torch.int32)).to(torch.int64) & _WORD_MASK


def hashed_integers(keys: torch.Tensor, width: int) -> torch.Tensor:
    """Integers uniform on ``[0, 2²⁴)`` for rows with ``keys [N]`` (int64 in ``[0, 2³²)``) and ``width`` columns: int32
    ``[N, width]``."""
    columns = torch.arange(width, dtype=torch.int32, device=keys.device) * _COLUMN_SPREAD
    return _logical_shift(_mix_words(keys.to(torch.int32)[:, None] ^ columns), KEY_BITS - UNIFORM_BITS)


def hashed_bernoulli(probs: torch.Tensor, keys: torch.Tensor, *, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Draws ``1[I < p 2²⁴]`` for probabilities ``probs [N, M]`` (compared in float32, where ``p 2²⁴`` is exact: float64
    probabilities are rounded first) with ``I`` from :func:`hashed_integers` of the rows' ``keys [N]``: ``[N, M]`` in
    ``dtype`` (default the probabilities')."""
    scaled = probs.to(torch.float32) * float(1 << UNIFORM_BITS)
    return (hashed_integers(keys, probs.shape[-1]) < scaled).to(probs.dtype if dtype is None else dtype)
