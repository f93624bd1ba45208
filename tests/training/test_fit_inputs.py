"""Trainer.fit on plain rows (issue 50): a tensor, a Dataset, a DataLoader (and DataSplits), held-out data optional; each
trains exactly as the same rows in a DataSplits do and writes a checkpoint; other inputs are refused in one line."""

import json

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset

from pfzoo import zoo
from pfzoo.data import DataSplits
from pfzoo.estimators import Exact
from pfzoo.models import RBM
from pfzoo.training import CD, GeneralizedPseudoLikelihood, Trainer
from pfzoo.training.fit_data import training_data


def rows(n=120, v=16, seed=0):
    """Binary rows with unequal pixel rates, ``[n, v]`` float32."""
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, v, generator=g) < torch.linspace(0.1, 0.9, v)).float()


def model():
    return RBM(16, 5, init_std=0.1, generator=torch.Generator().manual_seed(0))


def fit(tmp_path, name, data, **kwargs):
    """A fresh RBM trained 2 epochs of CD-1 on ``data``; its parameters, metrics and the trainer."""
    trainer = Trainer(CD(), run_dir=tmp_path / name, epochs=2, batch_size=20, progress=False, **kwargs.pop("settings", {}))
    trained = model()
    trainer.fit(trained, data, **kwargs)
    metrics = [json.loads(line) for line in trainer.metrics_path.read_text().splitlines()]
    return trained.state_dict(), metrics, trainer


class Pairs(Dataset):
    """A map-style dataset of ``(x [V], label)`` pairs, as torchvision's are."""

    def __init__(self, x):
        self.x = x

    def __len__(self):
        return self.x.shape[0]

    def __getitem__(self, index):
        return self.x[index], index % 10


class Stream(IterableDataset):
    def __init__(self, x):
        self.x = x

    def __iter__(self):
        return iter(self.x)


def test_tensor_dataset_and_loader_train_as_the_same_rows_in_data_splits(tmp_path):
    train, test = rows(), rows(40, seed=1)
    reference, reference_metrics, _ = fit(tmp_path, "splits", DataSplits("rows", train=train, test=test))
    sources = {
        "tensor": train,
        "tensor_dataset": TensorDataset(train, torch.arange(train.shape[0])),
        "pairs": Pairs(train),
        "iterable": Stream(train),
        "loader": DataLoader(TensorDataset(train, torch.zeros(train.shape[0])), batch_size=32, shuffle=False),
        "loader_of_tensors": DataLoader(train, batch_size=7),
    }
    for name, source in sources.items():
        state, metrics, trainer = fit(tmp_path, name, source)
        assert all(torch.equal(state[key], value) for key, value in reference.items()), name  # the same updates, bit for bit
        saved = zoo.load_checkpoint(trainer.checkpoint_path)
        assert saved["trainer_state"]["epoch"] == 2 and torch.equal(saved["state_dict"]["weight"], state["weight"]), name
        assert [record["loss"] for record in metrics] == [record["loss"] for record in reference_metrics], name
        assert "train_pseudo_log_likelihood" in metrics[-1] and not any(key.startswith(("test_", "valid_")) for key in metrics[-1])


def test_held_out_data_is_optional_and_named_valid_or_test(tmp_path):
    train, held = rows(), rows(40, seed=1)
    _, with_valid, _ = fit(tmp_path, "valid", train, valid=DataLoader(held, batch_size=8))
    _, as_test, _ = fit(tmp_path, "test", train, valid=held, settings={"held_out": "test"})
    _, splits, _ = fit(tmp_path, "splits", DataSplits("rows", train=train, test=rows(5, seed=2), valid=held))
    assert with_valid[-1]["valid_pseudo_log_likelihood"] == as_test[-1]["test_pseudo_log_likelihood"] == splits[-1]["valid_pseudo_log_likelihood"]
    # without held-out data the estimator judges the model on its training rows, and says so in the metric's name
    _, alone, _ = fit(tmp_path, "alone", train, settings={"evaluate_every": 1, "estimator": Exact()})
    assert "train_log_likelihood" in alone[-1] and "test_log_likelihood" not in alone[-1]
    assert alone[0]["train_log_likelihood"] != alone[1]["train_log_likelihood"]


def test_images_are_flattened_and_keep_their_shape_for_patch_objectives(tmp_path):
    images = rows(60, v=16).reshape(60, 1, 4, 4)  # torchvision's [N, C=1, H, W]
    data = training_data(DataLoader(TensorDataset(images, torch.zeros(60)), batch_size=25))
    assert data.train.shape == (60, 16) and data.image_shape == (4, 4) and data.held_out is None
    assert torch.equal(data.train, images.reshape(60, 16))
    trainer = Trainer(GeneralizedPseudoLikelihood(sets="patches", size=2), run_dir=tmp_path, epochs=1, batch_size=20, progress=False)
    trainer.fit(model(), images)  # the patches come from the rows' image shape
    assert trainer.checkpoint_path.is_file()


@pytest.mark.parametrize("data, valid, message", [
    (np.zeros((5, 16)), None, r"^data must be a pfzoo.data.DataSplits, a torch.Tensor \[N, V\], .* got ndarray; torch.as_tensor"),
    ([[0.0] * 16], None, r"^data must be a pfzoo.data.DataSplits, .* got list$"),
    (torch.zeros(16), None, r"^data must be a tensor \[N, V\] with one example per row, got shape \(16,\)$"),
    (torch.zeros(0, 16), None, r"^data must hold at least one example, got none$"),
    (DataLoader([{"x": torch.zeros(16)}] * 4, batch_size=2), None, r"^data yields dict batches; expected tensors \[B, V\] or \(x, y\)"),
    (DataLoader(torch.zeros(4, 16), batch_size=None), None, r"^data yields batches of shape \(16,\); expected batches \[B, V\]"),
    (TensorDataset(torch.arange(4.0)), None, r"^data holds batches of shape \(4,\); expected batches \[B, V\]"),
    (rows(), torch.zeros(3, 8), r"^valid must have 16 features per row like data, got rows of 8$"),
    (DataSplits("rows", train=rows(), test=rows(4)), rows(4), r"^valid must be None when data is a DataSplits"),
])
def test_other_inputs_are_refused_in_one_line_naming_the_argument(tmp_path, data, valid, message):
    with pytest.raises(ValueError, match=message) as refused:
        Trainer(CD(), run_dir=tmp_path, epochs=1, progress=False).fit(model(), data, valid=valid)
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "checkpoint.pt").exists()


def test_rows_that_do_not_suit_the_model_are_refused_naming_data(tmp_path):
    with pytest.raises(ValueError, match=r"^data must .*16"):
        Trainer(CD(), run_dir=tmp_path, epochs=1, progress=False).fit(model(), rows(v=9))
    with pytest.raises(ValueError, match=r"^valid must be binary"):
        Trainer(CD(), run_dir=tmp_path, epochs=1, progress=False).fit(model(), rows(), valid=rows(5) * 0.5)
