"""pfzoo.sampling's ChainStreams: a batch of blocks draws, per block, the numbers the block draws alone (from its
generator, or for the bulk integers from a ChainStreams of that one block)."""

import pytest
import torch

from pfzoo.sampling import (
    ChainStreams, bernoulli, bernoulli_logits, normal, randint, uniform, uniform_integers,
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
    assert torch.equal(uniform_integers((100, 5), generator=streams()),
                       blocks_alone(lambda _, n, g: uniform_integers((n, 5), generator=ChainStreams([g], [n]))))
    probs = torch.rand(100, 6, dtype=dtype)
    assert torch.equal(bernoulli(probs, generator=streams()), blocks_alone(lambda s, n, g: bernoulli(probs[s:s + n], generator=g)))


@pytest.mark.parametrize("width", [20, 1000])
@pytest.mark.parametrize("transposed", [False, True])  # a transposed product's layout, as the RBM path's hidden logits
def test_bernoulli_logits_draws_each_block_as_alone(width, transposed):
    logits = torch.randn(width, 100, dtype=torch.float64).T if transposed else torch.randn(100, width, dtype=torch.float64)
    batch = streams()

    def alone(start, size, generator):
        rows = logits[start:start + size]
        rows = rows.T.contiguous().T if transposed else rows.contiguous()  # the layout the block's own product would have
        block = ChainStreams([generator], [size])
        return torch.cat([bernoulli_logits(rows, dtype=torch.float32, generator=block) for _ in range(2)], 1)

    # twice: the second draw reads each block's SFC64 stream on from where the first left it
    draws = torch.cat([bernoulli_logits(logits, dtype=torch.float32, generator=batch) for _ in range(2)], 1)
    assert torch.equal(draws, blocks_alone(alone)) and draws.dtype == torch.float32
    assert bernoulli_logits(logits, generator=batch).stride() == logits.stride()  # in the logits' layout
    assert 0.45 < draws.mean().item() < 0.55


def test_bernoulli_logits_follows_the_probabilities():
    """The block integers' law: P(1) = σ(x) within the 2⁻²⁴ of the uniforms, here within 5 binomial standard errors."""
    probabilities = torch.tensor([0.01, 0.2, 0.5, 0.9])
    logits = torch.logit(probabilities).repeat(20_000, 1)
    one = ChainStreams([torch.Generator().manual_seed(block) for block in range(4)], [5000] * 4)
    frequencies = bernoulli_logits(logits, generator=one).mean(0)
    assert ((frequencies - probabilities).abs() < 5 * (probabilities * (1 - probabilities) / 20_000).sqrt()).all()


def test_one_block_draws_as_its_generator():
    one = ChainStreams([torch.Generator().manual_seed(5)], [100])
    probs = torch.rand(100, 8)
    assert torch.equal(bernoulli(probs, generator=one), bernoulli(probs, generator=torch.Generator().manual_seed(5)))


def test_draws_without_the_chains_as_first_dimension_are_refused():
    with pytest.raises(ValueError, match="streams' 100 chains as its first dimension"):
        normal((99, 2), generator=streams())
    with pytest.raises(ValueError, match="logits must have"):
        bernoulli_logits(torch.zeros(3, 100), generator=streams())
    with pytest.raises(ValueError, match="sizes must be positive"):
        ChainStreams([torch.Generator()], [0])
    with pytest.raises(ValueError, match="of one length"):
        ChainStreams([torch.Generator()], [1, 2])
