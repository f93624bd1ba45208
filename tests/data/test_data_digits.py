import collections

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from pfzoo.data import DataSplits, digits


def _labels_of(rows: torch.Tensor) -> list[int]:
    """Digit class of each binarised row (no two classes share a binarised image at threshold 8)."""
    bunch = load_digits()
    lookup = {x.tobytes(): int(y) for x, y in zip((bunch.data > 8).astype(np.float32), bunch.target)}
    return [lookup[r.tobytes()] for r in rows.numpy()]


def test_shapes_and_binary_values():
    data = digits()
    assert isinstance(data, DataSplits)
    assert data.name == "digits" and data.image_shape == (8, 8) and data.valid is None
    assert data.train.shape == (1437, 64) and data.test.shape == (360, 64)
    assert data.num_features == 64
    for x in (data.train, data.test):
        assert x.dtype == torch.float32
        assert ((x == 0) | (x == 1)).all()


def test_threshold_binarises_intensity():
    bunch = load_digits()
    data = digits(test_fraction=0.5)
    assert int(data.train.sum() + data.test.sum()) == int((bunch.data > 8).sum())
    low = digits(threshold=0.0)
    assert low.train.mean() > data.train.mean()  # a lower threshold turns more pixels on


def test_split_fixed_and_independent_of_global_seeds():
    torch.manual_seed(1)
    np.random.seed(1)
    first = digits()
    torch.manual_seed(2)
    np.random.seed(2)
    torch.rand(10)
    np.random.rand(10)
    second = digits()
    assert torch.equal(first.train, second.train) and torch.equal(first.test, second.test)


def test_split_seed_changes_partition_not_content():
    a, b = digits(split_seed=0), digits(split_seed=1)
    assert not torch.equal(a.test, b.test)
    all_a = torch.cat([a.train, a.test]).unique(dim=0, return_counts=True)
    all_b = torch.cat([b.train, b.test]).unique(dim=0, return_counts=True)
    assert torch.equal(all_a[0], all_b[0]) and torch.equal(all_a[1], all_b[1])


@pytest.mark.parametrize("fraction", [0.2, 0.5])
def test_split_is_stratified_and_covers_every_image(fraction):
    data = digits(test_fraction=fraction)
    assert len(data.train) + len(data.test) == 1797
    totals = collections.Counter(load_digits().target.tolist())
    test_counts = collections.Counter(_labels_of(data.test))
    train_counts = collections.Counter(_labels_of(data.train))
    for label, total in totals.items():
        assert train_counts[label] + test_counts[label] == total
        assert abs(test_counts[label] - fraction * total) <= 1, (label, test_counts[label], total)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(test_fraction=0.0), "test_fraction"),
        (dict(test_fraction=1.0), "test_fraction"),
        (dict(threshold=16.0), "threshold"),
        (dict(threshold=-1.0), "threshold"),
    ],
)
def test_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        digits(**kwargs)


def test_labels_are_the_digit_classes_of_their_images():
    bunch, split = load_digits(), digits()
    images = torch.from_numpy(bunch.data > 8.0).float()
    for rows, labels in ((split.train[:20], split.train_labels[:20]), (split.test[:20], split.test_labels[:20])):
        for row, label in zip(rows, labels):  # the label of an identical image (duplicates among binarised digits agree or are skipped)
            matches = torch.from_numpy(bunch.target)[(images == row).all(1)]
            assert int(label) in matches.tolist()
