"""pfzoo.sampling's ChainStreams: a batch of blocks draws, per block, the numbers the block draws alone."""

import pytest
import torch

from pfzoo.sampling import (
    BULK_DRAWS, ChainStreams, bernoulli, bernoulli_logits, normal, randint, uniform, uniform_integers,
)

SIZES = [33, 33, 34]


def streams(sizes=SIZES) -> ChainStreams:
    return ChainStreams([torch.Generator().manual_seed(100 + block) for block in range(len(sizes))], sizes)


def blocks_alone(draw, sizes=SIZES) -> torch.Tensor:
    """``draw(start, size, generator)`` of each block by itself, from a fresh copy of its generator, concatenated."""
    parts, start = [], 0
    for block, size in enumerate(sizes):
        parts.append(draw(start, size, torch.Generator().manual_seed(100 + block)))
        start += size
    return torch.cat(parts)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_shaped_draws_are_the_blocks_draws(dtype):
    assert torch.equal(normal((100, 7), generator=streams(), dtype=dtype),
                       blocks_alone(lambda _, n, g: torch.randn(n, 7, generator=g, dtype=dtype)))
    assert torch.equal(uniform((100, 3, 2), generator=streams(), dtype=dtype),
                       blocks_alone(lambda _, n, g: torch.rand(n, 3, 2, generator=g, dtype=dtype)))
    assert torch.equal(randint(9, (100,), generator=streams()), blocks_alone(lambda _, n, g: torch.randint(9, (n,), generator=g)))
    assert torch.equal(uniform_integers((100, 5), generator=streams()), blocks_alone(lambda _, n, g: uniform_integers((n, 5), generator=g)))
    probs = torch.rand(100, 6, dtype=dtype)
    assert torch.equal(bernoulli(probs, generator=streams()), blocks_alone(lambda s, n, g: bernoulli(probs[s:s + n], generator=g)))


@pytest.mark.parametrize("width", [20, 1000])  # 33 rows × 1000 ≥ BULK_DRAWS: each block's integers from its own SFC64 stream
@pytest.mark.parametrize("transposed", [False, True])  # a transposed product's layout, as the RBM path's hidden logits
def test_bernoulli_logits_draws_each_block_as_alone(width, transposed):
    assert (33 * width >= BULK_DRAWS) == (width == 1000)
    logits = torch.randn(width, 100, dtype=torch.float64).T if transposed else torch.randn(100, width, dtype=torch.float64)

    def alone(start, size, generator):
        rows = logits[start:start + size]
        rows = rows.T.contiguous().T if transposed else rows.contiguous()  # the layout the block's own product would have
        return bernoulli_logits(rows, dtype=torch.float32, generator=generator)

    draws = bernoulli_logits(logits, dtype=torch.float32, generator=streams())
    assert torch.equal(draws, blocks_alone(alone)) and draws.dtype == torch.float32
    assert draws.stride() == logits.stride()  # in the logits' layout
    assert 0.45 < draws.mean().item() < 0.55


def test_one_block_draws_as_its_generator():
    one = ChainStreams([torch.Generator().manual_seed(5)], [100])
    logits = torch.randn(100, 8)
    assert torch.equal(bernoulli_logits(logits, generator=one), bernoulli_logits(logits, generator=torch.Generator().manual_seed(5)))


def test_draws_without_the_chains_as_first_dimension_are_refused():
    with pytest.raises(ValueError, match="streams' 100 chains as its first dimension"):
        normal((99, 2), generator=streams())
    with pytest.raises(ValueError, match="logits must have"):
        bernoulli_logits(torch.zeros(3, 100), generator=streams())
    with pytest.raises(ValueError, match="sizes must be positive"):
        ChainStreams([torch.Generator()], [0])
    with pytest.raises(ValueError, match="of one length"):
        ChainStreams([torch.Generator()], [1, 2])
