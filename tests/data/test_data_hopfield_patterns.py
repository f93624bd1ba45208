import pathlib

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from pfzoo.data import DataSplits, corrupt, hopfield_patterns, noisy_copies, random_patterns

CONF = pathlib.Path(__file__).resolve().parents[2] / "conf" / "dataset"


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_random_patterns_are_fair_bits():
    patterns = random_patterns(400, 64, generator=_gen(0))
    assert patterns.shape == (400, 64) and patterns.dtype == torch.float32
    assert ((patterns == 0) | (patterns == 1)).all()
    n = patterns.numel()
    assert abs(patterns.mean().item() - 0.5) < 5 * 0.5 / n**0.5  # fair, within 5 standard errors
    assert torch.equal(patterns, random_patterns(400, 64, generator=_gen(0)))
    assert not torch.equal(patterns, random_patterns(400, 64, generator=_gen(1)))


@pytest.mark.parametrize("num_flips", [0, 1, 7, 64])
def test_corrupt_flips_exactly_k_distinct_units(num_flips):
    patterns = random_patterns(200, 64, generator=_gen(2))
    original = patterns.clone()
    noisy = corrupt(patterns, num_flips, generator=_gen(3))
    assert torch.equal(patterns, original)  # the input is left alone
    assert noisy.shape == patterns.shape and noisy.dtype == patterns.dtype
    assert ((noisy == 0) | (noisy == 1)).all()
    assert torch.all((noisy != patterns).sum(1) == num_flips)  # exactly k distinct units differ per row


def test_corrupt_chooses_units_uniformly_and_follows_the_generator():
    patterns = torch.zeros(20000, 8)
    noisy = corrupt(patterns, 3, generator=_gen(4))
    frequency = noisy.mean(0)  # each unit is flipped with probability 3/8
    se = (3 / 8 * 5 / 8 / 20000) ** 0.5
    assert torch.all((frequency - 3 / 8).abs() < 5 * se), frequency
    assert torch.equal(noisy, corrupt(patterns, 3, generator=_gen(4)))
    assert not torch.equal(noisy, corrupt(patterns, 3, generator=_gen(5)))
    assert torch.equal(corrupt(torch.ones(4, 8), 8), torch.zeros(4, 8))


@pytest.mark.parametrize(
    "patterns, num_flips, match",
    [
        (torch.zeros(3, 5), -1, "num_flips"),
        (torch.zeros(3, 5), 6, "num_flips"),
        (torch.zeros(3, 5), 1.0, "num_flips"),
        (torch.full((3, 5), 0.5), 1, "patterns"),
        (torch.zeros(5), 1, "patterns"),
        (torch.zeros(3, 5, dtype=torch.int64), 1, "patterns"),
    ],
)
def test_corrupt_rejects_bad_arguments(patterns, num_flips, match):
    with pytest.raises(ValueError, match=match):
        corrupt(patterns, num_flips)


def test_random_patterns_reject_bad_arguments():
    with pytest.raises(ValueError, match="num_patterns"):
        random_patterns(0, 4)
    with pytest.raises(ValueError, match="num_units"):
        random_patterns(4, -2)
    with pytest.raises(ValueError, match="generator"):
        random_patterns(4, 4, generator=0)


def test_dataset_train_and_test_are_the_patterns():
    data = hopfield_patterns()
    assert isinstance(data, DataSplits) and data.name == "hopfield_patterns" and data.image_shape is None
    assert data.train.shape == (64, 64) and torch.equal(data.train, data.test)
    assert data.train.data_ptr() != data.test.data_ptr()  # separate storage
    assert torch.equal(data.train, random_patterns(64, 64, generator=_gen(0)))
    torch.manual_seed(5)
    assert torch.equal(hopfield_patterns(num_patterns=90, seed=3).train, hopfield_patterns(num_patterns=90, seed=3).train)
    assert hopfield_patterns(num_patterns=90, num_units=32).train.shape == (90, 32)
    assert not torch.equal(hopfield_patterns(seed=1).train, data.train)
    with pytest.raises(ValueError, match="seed"):
        hopfield_patterns(seed="0")
    with pytest.raises(ValueError, match="num_patterns"):
        hopfield_patterns(num_patterns=0)


def test_config_composes_and_instantiates():
    cfg = OmegaConf.load(CONF / "hopfield_patterns.yaml")
    assert cfg._target_ == "pfzoo.data.hopfield_patterns"
    data = instantiate(cfg)
    assert data.name == "hopfield_patterns" and data.train.shape == (64, 64)


def test_noisy_copies_are_pattern_major_and_flip_each_bit_with_the_given_probability():
    patterns = random_patterns(4, 500, generator=_gen(8)).double()
    noisy = noisy_copies(patterns, 50, 0.1, generator=_gen(9))
    assert noisy.shape == (200, 500) and noisy.dtype == torch.float64 and ((noisy == 0) | (noisy == 1)).all()
    flipped = noisy != patterns.repeat_interleave(50, dim=0)  # row p·50 + c is copy c of pattern p
    rate, draws = flipped.double().mean().item(), flipped.numel()
    assert abs(rate - 0.1) < 4 * (0.1 * 0.9 / draws) ** 0.5  # 100,000 independent flips at p = 0.1
    per_copy = flipped.double().mean(1)
    assert per_copy.min() > 0.03 and per_copy.max() < 0.2  # every copy corrupted, none wholly
    assert torch.equal(noisy, noisy_copies(patterns, 50, 0.1, generator=_gen(9)))


def test_noisy_copies_at_probability_zero_and_one_are_exact_and_draw_alike():
    patterns = random_patterns(3, 16, generator=_gen(10))
    g0, g1 = _gen(11), _gen(11)
    assert torch.equal(noisy_copies(patterns, 2, 0.0, generator=g0), patterns.repeat_interleave(2, dim=0))
    assert torch.equal(noisy_copies(patterns, 2, 1.0, generator=g1), 1 - patterns.repeat_interleave(2, dim=0))
    assert torch.equal(torch.rand(3, generator=g0), torch.rand(3, generator=g1))  # the same draws whatever the level


@pytest.mark.parametrize("copies, probability, match", [(0, 0.1, "copies"), (2, -0.1, "flip_probability"), (2, 1.5, "flip_probability")])
def test_noisy_copies_reject_bad_arguments(copies, probability, match):
    with pytest.raises(ValueError, match=match):
        noisy_copies(torch.zeros(3, 5), copies, probability)
