"""Random binary patterns for Hopfield-network storage and recall (thesis ch. 3: n = 64 units).

:func:`random_patterns` draws independent fair bits, :func:`corrupt` flips a fixed number of bits per
pattern (the recall cue), :func:`noisy_copies` makes corrupted training samples (each bit flipped independently,
thesis Figs. 3.6/3.10: storage from corrupted samples), and :func:`hopfield_patterns` is the data set: the patterns to store are
both the train and the test split, since the task is to memorise exactly them.
"""

from __future__ import annotations

import logging

import torch
from torch import Tensor

from pfzoo.data.splits import DataSplits
from pfzoo.sampling import bernoulli
from pfzoo.validation import check_binary, check_finite_number, check_generator, check_positive_int

logger = logging.getLogger(__name__)


def random_patterns(num_patterns: int, num_units: int, *, generator: torch.Generator | None = None) -> Tensor:
    """``[num_patterns, num_units]`` float32 patterns of independent fair bits (each 0 or 1 with probability ½)."""
    check_positive_int(num_patterns, "num_patterns")
    check_positive_int(num_units, "num_units")
    check_generator(generator, torch.device("cpu"))
    return bernoulli(torch.full((num_patterns, num_units), 0.5), generator=generator)


def corrupt(patterns: Tensor, num_flips: int, *, generator: torch.Generator | None = None) -> Tensor:
    """A copy of binary ``patterns [m, n]`` with exactly ``num_flips`` distinct, uniformly chosen units flipped per row.

    The units of each row are those with the ``num_flips`` smallest of n independent uniforms (a
    uniformly random subset), chosen for all rows at once by one ``argsort``. ``0 <= num_flips <= n``;
    the result has the dtype and device of ``patterns``, and ``generator`` must live on that device.
    """
    check_binary(patterns, "patterns")
    num_units = patterns.shape[1]
    if isinstance(num_flips, bool) or not isinstance(num_flips, int) or not 0 <= num_flips <= num_units:
        raise ValueError(f"num_flips must be an integer in [0, {num_units}] (the number of units), got {num_flips!r}")
    check_generator(generator, patterns.device)
    uniforms = torch.rand(patterns.shape, generator=generator, device=patterns.device)
    chosen = uniforms.argsort(dim=1)[:, :num_flips]
    flip = torch.zeros(patterns.shape, dtype=torch.bool, device=patterns.device).scatter_(1, chosen, True)
    return torch.where(flip, 1 - patterns, patterns)


def noisy_copies(patterns: Tensor, copies: int, flip_probability: float, *, generator: torch.Generator | None = None) -> Tensor:
    """``copies`` corrupted copies of each row of binary ``patterns [m, n]``: ``[m · copies, n]``, pattern-major.

    Row ``p · copies + c`` is copy c of pattern p, every bit of it flipped independently with probability
    ``flip_probability`` ∈ [0, 1] (one Bernoulli draw of the whole ``[m · copies, n]`` block from ``generator``, also at
    probability 0, so the stream advances the same way whatever the level). Dtype and device of ``patterns``.
    """
    check_binary(patterns, "patterns")
    check_positive_int(copies, "copies")
    flip_probability = check_finite_number(flip_probability, "flip_probability", minimum=0.0, maximum=1.0)
    check_generator(generator, patterns.device)
    clean = patterns.repeat_interleave(copies, dim=0)
    flips = bernoulli(torch.full(clean.shape, flip_probability, dtype=clean.dtype, device=clean.device), generator=generator)
    return (clean - flips).abs()  # |x - f| flips x where f = 1


def hopfield_patterns(num_patterns: int = 64, num_units: int = 64, seed: int = 0) -> DataSplits:
    """``num_patterns`` random patterns of ``num_units`` bits as both train and test ``[num_patterns, num_units]``.

    The patterns are :func:`random_patterns` drawn from a ``torch.Generator`` seeded with ``seed``;
    ``test`` is a copy of ``train``. ``name`` is ``"hopfield_patterns"``, ``image_shape`` None.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    patterns = random_patterns(num_patterns, num_units, generator=torch.Generator().manual_seed(seed))
    splits = DataSplits(name="hopfield_patterns", train=patterns, test=patterns.clone())
    logger.info("built %r (seed %d)", splits, seed)
    return splits
