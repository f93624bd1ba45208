import pathlib

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from omegaconf.errors import MissingMandatoryValue

from pfzoo.data import DataSplits, array

CONF = pathlib.Path(__file__).resolve().parents[2] / "conf" / "dataset"


def _rows(x) -> set[bytes]:
    return {row.tobytes() for row in np.asarray(x, dtype=np.float32)}


def test_npy_round_trip_with_random_split(tmp_path):
    values = np.arange(50 * 3, dtype=np.int64).reshape(50, 3)  # distinct rows, integer dtype
    np.save(tmp_path / "counts.npy", values)
    data = array(tmp_path / "counts.npy")
    assert isinstance(data, DataSplits) and data.name == "counts" and data.image_shape is None and data.valid is None
    assert data.train.dtype == torch.float32 and data.test.dtype == torch.float32
    assert data.train.shape == (40, 3) and data.test.shape == (10, 3)  # test gets ceil(0.2 * 50)
    assert _rows(data.train) | _rows(data.test) == _rows(values)  # every row once, in one split
    assert not _rows(data.train) & _rows(data.test)
    assert not torch.equal(data.test, torch.from_numpy(values[:10]).float())  # shuffled, not the first rows


def test_split_depends_only_on_split_seed(tmp_path):
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(30, 4)))
    torch.manual_seed(1)
    a = array(str(tmp_path / "x.npy"), split_seed=3)
    torch.manual_seed(2)
    b = array(str(tmp_path / "x.npy"), split_seed=3)
    c = array(str(tmp_path / "x.npy"), split_seed=4)
    assert torch.equal(a.train, b.train) and torch.equal(a.test, b.test)
    assert not torch.equal(a.test, c.test)
    half = array(tmp_path / "x.npy", test_fraction=0.5)
    assert half.train.shape == (15, 4) and half.test.shape == (15, 4)


def test_npz_with_train_and_test_keeps_the_splits(tmp_path):
    rng = np.random.default_rng(1)
    train, test, valid = rng.normal(size=(7, 5)), rng.normal(size=(3, 5)), rng.normal(size=(2, 5))
    np.savez(tmp_path / "given.npz", train=train, test=test)
    data = array(tmp_path / "given.npz", test_fraction=0.9)  # test_fraction plays no part
    assert data.name == "given" and data.valid is None
    assert torch.equal(data.train, torch.from_numpy(train).float())
    assert torch.equal(data.test, torch.from_numpy(test).float())
    np.savez_compressed(tmp_path / "with_valid.npz", train=train, test=test, valid=valid, extra=np.zeros(3))
    data = array(tmp_path / "with_valid.npz")
    assert torch.equal(data.valid, torch.from_numpy(valid).float())


def test_npz_single_array_and_key(tmp_path):
    a, b = np.ones((10, 2)), np.zeros((20, 6))
    np.savez(tmp_path / "one.npz", spins=b)
    assert array(tmp_path / "one.npz").train.shape == (16, 6)
    np.savez(tmp_path / "two.npz", a=a, b=b, train=a, test=a)
    data = array(tmp_path / "two.npz", key="b", test_fraction=0.25)  # key wins over train/test
    assert data.name == "two" and data.train.shape == (15, 6) and data.test.shape == (5, 6)
    assert (data.train == 0).all()


def test_binarize_threshold_and_image_shape(tmp_path):
    values = np.linspace(0, 1, 10 * 4).reshape(10, 4)
    np.save(tmp_path / "grey.npy", values)
    data = array(tmp_path / "grey.npy", binarize_threshold=0.5, image_shape=[2, 2])
    assert data.image_shape == (2, 2)
    merged = torch.cat([data.train, data.test])
    assert ((merged == 0) | (merged == 1)).all()
    assert int(merged.sum()) == int((values > 0.5).sum())
    with pytest.raises(ValueError, match="image_shape"):
        array(tmp_path / "grey.npy", image_shape=(3, 3))


def test_bool_arrays_load(tmp_path):
    np.save(tmp_path / "bits.npy", np.eye(6, dtype=bool))
    data = array(tmp_path / "bits.npy")
    assert data.train.dtype == torch.float32 and float(data.train.sum() + data.test.sum()) == 6.0


def test_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "nowhere.npy"
    with pytest.raises(FileNotFoundError, match="nowhere.npy"):
        array(missing)
    with pytest.raises(FileNotFoundError, match="path"):
        array(tmp_path)  # a folder is not a file


def test_rejects_wrong_extension(tmp_path):
    (tmp_path / "data.csv").write_text("1,2\n3,4\n")
    with pytest.raises(ValueError, match=r"\.npy or \.npz"):
        array(tmp_path / "data.csv")


@pytest.mark.parametrize(
    "values, match",
    [
        (np.zeros(10), "2-D"),
        (np.zeros((4, 3, 2)), "2-D"),
        (np.array([[1.0, np.nan], [0.0, 1.0], [1.0, 1.0]]), "NaN or infinite"),
        (np.array([[1.0, np.inf], [0.0, 1.0], [1.0, 1.0]]), "NaN or infinite"),
        (np.array([[1e39, 0.0], [0.0, 1.0], [1.0, 1.0]]), "NaN or infinite"),  # overflows float32
        (np.zeros((3, 2), dtype=np.complex64), "real numbers"),
        (np.array([["a", "b"], ["c", "d"]]), "real numbers"),
    ],
)
def test_rejects_bad_arrays(tmp_path, values, match):
    np.save(tmp_path / "bad.npy", values)
    with pytest.raises(ValueError, match=match):
        array(tmp_path / "bad.npy")
    np.savez(tmp_path / "bad.npz", train=values, test=values)
    with pytest.raises(ValueError, match=match):
        array(tmp_path / "bad.npz")


def test_rejects_missing_key_listing_the_keys(tmp_path):
    np.savez(tmp_path / "many.npz", first=np.ones((4, 2)), second=np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"key 'third'.*\['first', 'second'\]"):
        array(tmp_path / "many.npz", key="third")
    with pytest.raises(ValueError, match=r"key.*\['first', 'second'\]"):
        array(tmp_path / "many.npz")  # ambiguous without key
    np.savez(tmp_path / "only_train.npz", train=np.ones((4, 2)), other=np.ones((4, 2)))
    with pytest.raises(ValueError, match="key"):
        array(tmp_path / "only_train.npz")
    np.save(tmp_path / "single.npy", np.ones((4, 2)))
    with pytest.raises(ValueError, match="key"):
        array(tmp_path / "single.npy", key="train")


def test_rejects_empty_npz_and_mismatched_widths(tmp_path):
    np.savez(tmp_path / "empty.npz")
    with pytest.raises(ValueError, match="no arrays"):
        array(tmp_path / "empty.npz")
    np.savez(tmp_path / "widths.npz", train=np.ones((4, 2)), test=np.ones((4, 3)))
    with pytest.raises(ValueError, match="test must have 2 columns"):
        array(tmp_path / "widths.npz")


def test_rejects_object_arrays_without_unpickling(tmp_path):
    np.save(tmp_path / "objects.npy", np.array([[1, None], [2, 3]], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="allow_pickle"):
        array(tmp_path / "objects.npy")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(test_fraction=0.0), "test_fraction"),
        (dict(test_fraction=1.0), "test_fraction"),
        (dict(test_fraction=0.99), "test_fraction"),  # ceil(0.99 * 5) leaves no training row
        (dict(split_seed=0.5), "split_seed"),
        (dict(binarize_threshold=float("nan")), "binarize_threshold"),
    ],
)
def test_rejects_bad_arguments(tmp_path, kwargs, match):
    np.save(tmp_path / "x.npy", np.ones((5, 2)))
    with pytest.raises(ValueError, match=match):
        array(tmp_path / "x.npy", **kwargs)


def test_a_single_row_cannot_be_split(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((1, 2)))
    with pytest.raises(ValueError, match="too few"):
        array(tmp_path / "x.npy")


def test_config_needs_a_path_and_instantiates(tmp_path):
    cfg = OmegaConf.load(CONF / "array.yaml")
    assert cfg._target_ == "pfzoo.data.array" and OmegaConf.is_missing(cfg, "path")
    with pytest.raises(MissingMandatoryValue):
        instantiate(cfg)
    np.savez(tmp_path / "mine.npz", train=np.zeros((6, 4)), test=np.ones((2, 4)))
    cfg.path = str(tmp_path / "mine.npz")
    cfg.image_shape = [2, 2]
    data = instantiate(cfg)
    assert data.name == "mine" and data.train.shape == (6, 4) and data.image_shape == (2, 2)
