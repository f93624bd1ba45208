import importlib
import pathlib

import numpy as np
import pytest
import torch

from pfzoo.data import binarized_mnist
from pfzoo.data.binarized_mnist import read_amat


def _write_amat(path: pathlib.Path, rows: np.ndarray, newline: str = "\n") -> None:
    path.write_text("".join(" ".join(map(str, r)) + newline for r in rows))


def _fake_files(folder: pathlib.Path, seed: int = 0) -> dict[str, np.ndarray]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    rows = {s: rng.integers(0, 2, size=(n, 784)) for s, n in (("train", 5), ("valid", 3), ("test", 4))}
    for split, r in rows.items():
        _write_amat(folder / f"binarized_mnist_{split}.amat", r)
    return rows


@pytest.mark.parametrize("subfolder", ["binarized_mnist", ""])
def test_reads_all_splits_in_order(tmp_path, subfolder):
    rows = _fake_files(tmp_path / subfolder if subfolder else tmp_path)
    data = binarized_mnist(tmp_path)
    assert data.name == "binarized_mnist" and data.image_shape == (28, 28)
    for split, expected in rows.items():
        x = getattr(data, split)
        assert x.dtype == torch.float32 and x.shape == expected.shape
        assert torch.equal(x, torch.from_numpy(expected).float())


def test_tolerates_crlf_and_missing_final_newline(tmp_path):
    rows = np.random.default_rng(1).integers(0, 2, size=(3, 784))
    path = tmp_path / "crlf.amat"
    _write_amat(path, rows, newline="\r\n")
    assert np.array_equal(read_amat(path), rows)
    path.write_text("\n".join(" ".join(map(str, r)) for r in rows))  # no trailing newline
    assert np.array_equal(read_amat(path), rows)


@pytest.mark.parametrize(
    "line, match",
    [
        ("0 " * 782 + "0", "every line must hold 784 values, line 2 has 783"),
        ("0 " * 784 + "1", "every line must hold 784 values, line 2 has 785"),
        ("0 " * 783 + "2", "line 2 has a token other than a single 0 or 1"),
        ("0 " * 783 + "0.5", "line 2 has a token other than a single 0 or 1"),
        ("0 " * 782 + "10", "line 2 has a token other than a single 0 or 1"),
        ("", "every line must hold 784 values, line 2 has 0"),
    ],
)
def test_malformed_file_raises_naming_it(tmp_path, line, match):
    path = tmp_path / "bad.amat"
    good = " ".join(["1"] * 784)
    path.write_text(f"{good}\n{line}\n{good}\n")
    with pytest.raises(ValueError, match=match) as info:
        read_amat(path)
    assert str(path) in str(info.value)


def test_malformed_split_file_raises_from_loader(tmp_path):
    _fake_files(tmp_path)
    (tmp_path / "binarized_mnist_valid.amat").write_text("0 1 0\n")
    with pytest.raises(ValueError, match="binarized_mnist_valid.amat"):
        binarized_mnist(tmp_path)


def test_missing_files_error_names_root_and_paths(tmp_path, monkeypatch):
    (tmp_path / "binarized_mnist").mkdir()
    _write_amat(tmp_path / "binarized_mnist" / "binarized_mnist_train.amat", np.zeros((1, 784), dtype=int))
    monkeypatch.setenv("PFZOO_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError) as info:
        binarized_mnist()  # root from the environment
    message = str(info.value)
    assert str(tmp_path) in message
    assert str(tmp_path / "binarized_mnist" / "binarized_mnist_{train,valid,test}.amat") in message
    assert "data.root=" in message and "PFZOO_DATA" in message


@pytest.mark.data
def test_real_binarized_mnist(shared_data_root):
    data = binarized_mnist(shared_data_root)
    assert data.train.shape == (50000, 784)
    assert data.valid.shape == (10000, 784)
    assert data.test.shape == (10000, 784)
    for x in (data.train, data.valid, data.test):
        assert ((x == 0) | (x == 1)).all()
        assert 0.1 < x.mean().item() < 0.16
    folder = shared_data_root / "binarized_mnist"
    with open(folder / "binarized_mnist_test.amat") as f:  # compare the first lines with a plain parse
        head = np.array([[int(t) for t in next(f).split()] for _ in range(50)], dtype=np.float32)
    assert torch.equal(data.test[:50], torch.from_numpy(head))


@pytest.mark.data
def test_real_binarized_mnist_is_not_in_mnist_order(shared_data_root):
    """Why the loader attaches no labels (module docstring): row i agrees with MNIST's image i no better than with image
    i + 1, while a likelihood match finds the test file to be MNIST's test set sorted by class."""
    from pfzoo.data import mnist

    if not (shared_data_root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte").is_file():
        pytest.skip(f"no MNIST IDX files under {shared_data_root}")
    binary, official = binarized_mnist(shared_data_root), mnist(shared_data_root, binarize="none", download=False)
    thresholded = (official.test > 0.5).float()
    aligned = (binary.test == thresholded).float().mean().item()
    shifted = (binary.test == thresholded.roll(1, 0)).float().mean().item()
    assert 0.8 < aligned < 0.86 and abs(aligned - shifted) < 0.005, (aligned, shifted)  # measured: 0.828, 0.828
    rows = torch.randperm(10000, generator=torch.Generator().manual_seed(0))[:500].sort().values
    intensity = official.test.clamp(1e-3, 1 - 1e-3)
    log_likelihood = binary.test[rows] @ intensity.log().T + (1 - binary.test[rows]) @ (-intensity).log1p().T  # [500, 10000]
    labels = official.test_labels[log_likelihood.argmax(1)]
    assert (labels[1:] >= labels[:-1]).all() and labels.unique().numel() == 10


def test_missing_files_name_what_to_do_since_no_package_ships_them(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no package on the Python package index ships these files.*pass download=True .* or source=URL or folder"):
        binarized_mnist(tmp_path)


def test_fetch_refuses_files_whose_hash_differs_and_keeps_nothing(tmp_path):
    _fake_files(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match=r"binarized_mnist_train.amat from source=.* has sha256 [0-9a-f]{64}, not Larochelle"):
        binarized_mnist(tmp_path / "root", source=tmp_path / "elsewhere")
    assert not list((tmp_path / "root" / "binarized_mnist").iterdir())
    with pytest.raises(FileNotFoundError, match=r"cannot fetch binarized_mnist_train.amat from source=file://"):
        binarized_mnist(tmp_path / "root", source=(tmp_path / "nowhere").as_uri())


def test_download_fetches_from_larochelles_folder_unless_a_source_is_named(tmp_path, monkeypatch):
    module = importlib.import_module("pfzoo.data.binarized_mnist")  # the package exports a function of the same name

    _fake_files(tmp_path / "published")
    monkeypatch.setattr(module, "KNOWN_SOURCE", (tmp_path / "published").as_uri())  # stands in for Larochelle's URL
    with pytest.raises(ValueError, match=r"binarized_mnist_train.amat from source=file://.*published has sha256"):
        binarized_mnist(tmp_path / "root", download=True)
    with pytest.raises(FileNotFoundError, match=r"cannot fetch binarized_mnist_train.amat from source=file://.*nowhere"):
        binarized_mnist(tmp_path / "root", source=(tmp_path / "nowhere").as_uri(), download=True)
    with pytest.raises(ValueError, match=r"download must be True or False, got 'yes'"):
        binarized_mnist(tmp_path / "root", download="yes")


@pytest.mark.data
def test_fetch_from_a_url_checks_the_hashes_and_reads_the_files(shared_data_root, tmp_path):
    source = (shared_data_root / "binarized_mnist").as_uri()  # file:// goes through urllib as http(s):// would
    data = binarized_mnist(tmp_path, source=source)
    assert sorted(p.name for p in (tmp_path / "binarized_mnist").iterdir()) == [f"binarized_mnist_{s}.amat" for s in ("test", "train", "valid")]
    assert data.test.shape == (10000, 784) and torch.equal(data.test, binarized_mnist(shared_data_root).test)
