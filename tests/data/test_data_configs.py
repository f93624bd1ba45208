import pathlib
import struct

import numpy as np
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from pfzoo.data import DataSplits

CONF = pathlib.Path(__file__).resolve().parents[2] / "conf" / "dataset"


def _instantiate(name: str, root) -> DataSplits:
    cfg = OmegaConf.create({"data": {"root": None if root is None else str(root)}})
    cfg.dataset = OmegaConf.load(CONF / f"{name}.yaml")
    return instantiate(cfg.dataset)


def test_every_dataset_config_has_a_qualified_target():
    names = sorted(p.stem for p in CONF.glob("*.yaml"))
    assert {"digits", "mnist", "binarized_mnist"} <= set(names)
    for name in names:
        assert OmegaConf.load(CONF / f"{name}.yaml")._target_.startswith("pfzoo.data.")


def test_digits_config():
    data = _instantiate("digits", None)
    assert data.name == "digits" and data.train.shape == (1437, 64)


def test_binarized_mnist_config_uses_data_root(tmp_path):
    for split in ("train", "valid", "test"):
        np.savetxt(tmp_path / f"binarized_mnist_{split}.amat", np.ones((2, 784)), fmt="%d")
    data = _instantiate("binarized_mnist", tmp_path)
    assert data.valid.shape == (2, 784)


def test_mnist_config_uses_data_root(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, n in (("train", 4), ("t10k", 3)):  # tiny IDX files: magic 0x0803 / 0x0801 then sizes
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(struct.pack(">4I", 0x0803, n, 28, 28) + bytes(n * 784))
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">2I", 0x0801, n) + bytes(n))
    data = _instantiate("mnist", tmp_path)
    assert data.name == "mnist" and data.train.shape == (4, 784) and data.test.shape == (3, 784)


@pytest.mark.data
def test_mnist_config_on_real_data(shared_data_root):
    data = _instantiate("mnist", shared_data_root)
    assert data.name == "mnist" and data.train.shape == (60000, 784)
