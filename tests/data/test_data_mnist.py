import importlib
import pathlib
import struct

import numpy as np
import pytest
import torch
import torchvision

from pfzoo.data import mnist

mnist_module = importlib.import_module("pfzoo.data.mnist")  # the attribute pfzoo.data.mnist is the function


def _write_idx(path: pathlib.Path, array: np.ndarray) -> None:
    """Write a uint8 array in the IDX format (magic 0x08 = uint8, then the dimensions, big-endian)."""
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def fake_root(tmp_path) -> pathlib.Path:
    """A data root with a tiny MNIST: 30 train and 10 test images of 28x28 uint8."""
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 30), ("t10k", 10)):
        images = rng.integers(0, 256, size=(n, 28, 28))
        images[:, 0, 0], images[:, 0, 1] = 127, 128  # straddle the 0.5 threshold
        _write_idx(raw / f"{prefix}-images-idx3-ubyte", images)
        _write_idx(raw / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, size=n))
    return tmp_path


def _raw_train(root: pathlib.Path) -> torch.Tensor:
    data = np.fromfile(root / "MNIST" / "raw" / "train-images-idx3-ubyte", dtype=np.uint8, offset=16)
    return torch.from_numpy(data.reshape(-1, 784).astype(np.float32) / 255)


def test_none_keeps_scaled_intensities(fake_root):
    data = mnist(fake_root, binarize="none")
    assert data.name == "mnist" and data.image_shape == (28, 28) and data.valid is None
    assert data.train.shape == (30, 784) and data.test.shape == (10, 784)
    assert data.train.dtype == torch.float32
    assert torch.allclose(data.train, _raw_train(fake_root))
    assert 0 <= data.train.min() and data.train.max() <= 1


def test_threshold_binarisation(fake_root):
    data = mnist(fake_root, binarize="threshold", threshold=0.5)
    assert ((data.train == 0) | (data.train == 1)).all()
    assert (data.train[:, 0] == 0).all() and (data.train[:, 1] == 1).all()  # 127/255 < 0.5 < 128/255
    assert torch.equal(data.train, (_raw_train(fake_root) > 0.5).float())
    assert mnist(fake_root, threshold=0.9).train.sum() < data.train.sum()


def test_stochastic_binarisation_reproducible_per_seed(fake_root):
    torch.manual_seed(123)
    a = mnist(fake_root, binarize="stochastic", binarize_seed=7)
    torch.manual_seed(456)
    b = mnist(fake_root, binarize="stochastic", binarize_seed=7)
    c = mnist(fake_root, binarize="stochastic", binarize_seed=8)
    assert ((a.train == 0) | (a.train == 1)).all()
    assert torch.equal(a.train, b.train) and torch.equal(a.test, b.test)
    assert not torch.equal(a.train, c.train)
    # Bernoulli(intensity): the fraction of ones matches the mean intensity (n = 23520, sd < 0.004)
    assert abs(a.train.mean().item() - _raw_train(fake_root).mean().item()) < 0.02


def test_valid_split_is_last_training_images(fake_root):
    full = mnist(fake_root, binarize="none")
    split = mnist(fake_root, binarize="none", valid_size=12)
    assert split.train.shape == (18, 784) and split.valid.shape == (12, 784)
    assert torch.equal(split.train, full.train[:18]) and torch.equal(split.valid, full.train[18:])
    assert torch.equal(split.test, full.test)


def test_root_from_env(monkeypatch, fake_root):
    monkeypatch.setenv("PFZOO_DATA", str(fake_root))
    assert mnist(None, download=False).train.shape == (30, 784)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(binarize="bernoulli"), r"binarize must be one of 'none', 'threshold', 'stochastic', got 'bernoulli'"),
        (dict(threshold=1.5), "threshold must lie in"),
        (dict(valid_size=-1), "valid_size"),
        (dict(valid_size=60000), "valid_size"),
    ],
)
def test_rejects_bad_arguments(fake_root, kwargs, match):
    with pytest.raises(ValueError, match=match):
        mnist(fake_root, **kwargs)


def test_missing_files_error_names_root_and_how_to_fix(tmp_path):
    root = tmp_path / "empty"
    with pytest.raises(FileNotFoundError) as info:
        mnist(root, download=False)
    message = str(info.value)
    assert str(root) in message
    assert "MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte" in message
    assert "data.root=" in message and "PFZOO_DATA" in message


def test_failed_download_becomes_file_not_found(monkeypatch, tmp_path):
    def offline(self):
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz: no network")

    monkeypatch.setattr(torchvision.datasets.MNIST, "download", offline)
    with pytest.raises(FileNotFoundError, match="download failed") as info:
        mnist(tmp_path, download=True)
    assert str(tmp_path) in str(info.value)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_download_used_when_files_missing(monkeypatch, tmp_path, fake_root):
    target = tmp_path / "fresh"

    def fake_download(self):  # stands in for torchvision's download: copies the fake files into place
        raw = pathlib.Path(self.raw_folder)
        raw.mkdir(parents=True, exist_ok=True)
        for f in mnist_module.RAW_FILES:
            (raw / f).write_bytes((fake_root / "MNIST" / "raw" / f).read_bytes())

    monkeypatch.setattr(torchvision.datasets.MNIST, "download", fake_download)
    assert mnist(target, download=True).test.shape == (10, 784)


@pytest.fixture(scope="module")
def real_mnist(shared_data_root):
    return mnist(shared_data_root, download=False, valid_size=10000)


@pytest.mark.data
def test_real_mnist(real_mnist):
    assert real_mnist.train.shape == (50000, 784)
    assert real_mnist.valid.shape == (10000, 784)
    assert real_mnist.test.shape == (10000, 784)
    for x in (real_mnist.train, real_mnist.valid, real_mnist.test):
        assert ((x == 0) | (x == 1)).all()
        assert 0.1 < x.mean().item() < 0.16  # about 13% of thresholded MNIST pixels are on


@pytest.mark.data
def test_real_mnist_binarisations_agree(shared_data_root, real_mnist):
    grey = mnist(shared_data_root, binarize="none", download=False)
    assert grey.train.shape == (60000, 784) and grey.valid is None
    assert torch.equal(real_mnist.test, (grey.test > 0.5).float())
    assert torch.equal(real_mnist.valid, (grey.train[-10000:] > 0.5).float())
    a = mnist(shared_data_root, binarize="stochastic", download=False, binarize_seed=3)
    b = mnist(shared_data_root, binarize="stochastic", download=False, binarize_seed=3)
    assert torch.equal(a.test, b.test) and torch.equal(a.train, b.train)
    assert abs(a.test.mean().item() - grey.test.mean().item()) < 0.002  # n = 7.84e6 Bernoulli draws


def test_labels_follow_their_images(fake_root):
    raw = fake_root / "MNIST" / "raw"
    train_labels = torch.from_numpy(np.fromfile(raw / "train-labels-idx1-ubyte", dtype=np.uint8, offset=8).astype(np.int64))
    split = mnist(fake_root, binarize="none", valid_size=12)
    assert split.labelled and split.train_labels.dtype == torch.int64
    assert torch.equal(split.train_labels, train_labels[:18]) and torch.equal(split.valid_labels, train_labels[18:])
    assert split.test_labels.shape == (10,)
