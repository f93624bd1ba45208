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


def test_labels_must_match_their_split():
    x = torch.zeros(4, 3)
    assert not DataSplits("d", x, x).labelled
    assert DataSplits("d", x, x, train_labels=torch.arange(4), test_labels=torch.zeros(4, dtype=torch.int64)).labelled
    with pytest.raises(ValueError, match="train_labels must be an int64 tensor with one label per row of train"):
        DataSplits("d", x, x, train_labels=torch.arange(3))
    with pytest.raises(ValueError, match="valid_labels must be an int64 tensor"):
        DataSplits("d", x, x, valid_labels=torch.arange(4))
    with pytest.raises(ValueError, match="test_labels must be an int64 tensor"):
        DataSplits("d", x, x, test_labels=torch.arange(4).float())


def test_held_out_is_the_validation_split_where_there_is_one():
    train, test, valid = torch.zeros(5, 3), torch.ones(4, 3), torch.full((2, 3), 0.5)
    with_valid, without = DataSplits("d", train, test, valid=valid), DataSplits("d", train, test)
    assert with_valid.held_out()[0] == "valid" and with_valid.held_out()[1] is valid
    assert with_valid.held_out("test")[0] == "test" and with_valid.held_out("test")[1] is test
    assert without.held_out()[0] == "test" and without.held_out("auto")[1] is test
    with pytest.raises(ValueError, match="held_out='valid' but data set 'd' has no valid split; use 'test' or 'auto'"):
        without.held_out("valid")
    with pytest.raises(ValueError, match="held_out must be one of auto, valid, test, got 'train'"):
        with_valid.held_out("train")
