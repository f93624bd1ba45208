import dataclasses

import pytest
import torch

from pfzoo.data import DataSplits


def test_fields_and_num_features():
    splits = DataSplits("toy", torch.zeros(5, 6), torch.ones(3, 6), valid=torch.zeros(2, 6), image_shape=[2, 3])
    assert splits.num_features == 6
    assert splits.image_shape == (2, 3)
    assert splits.valid.shape == (2, 6)
    assert "train=(5, 6)" in repr(splits)


def test_is_frozen():
    splits = DataSplits("toy", torch.zeros(5, 6), torch.zeros(3, 6))
    with pytest.raises(dataclasses.FrozenInstanceError):
        splits.train = torch.zeros(1, 6)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(train=torch.zeros(5, 6), test=torch.zeros(3, 7)), "test must have 6 columns"),
        (dict(train=torch.zeros(5, 6), test=torch.zeros(3, 6), valid=torch.zeros(2, 5)), "valid must have 6 columns"),
        (dict(train=torch.zeros(30), test=torch.zeros(3, 6)), r"train must have shape \[examples, features\]"),
        (dict(train=torch.zeros(5, 6), test=torch.zeros(3, 6, 1)), r"test must have shape"),
        (dict(train=torch.zeros(5, 6, dtype=torch.uint8), test=torch.zeros(3, 6)), "floating-point"),
        (dict(train=[[0.0] * 6], test=torch.zeros(3, 6)), "train must be a torch.Tensor"),
        (dict(train=torch.zeros(5, 6), test=torch.zeros(3, 6), image_shape=(2, 2)), "must have 6 pixels"),
    ],
)
def test_rejects_inconsistent_splits(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DataSplits("toy", **kwargs)
