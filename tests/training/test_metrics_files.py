"""A run's metrics files beside metrics.jsonl: metrics.csv (always the same records) and optional TensorBoard events."""

import csv
import importlib.util
import json

import pytest
import torch
from factories import random_rbm

from pfzoo.data import DataSplits
from pfzoo.estimators import Exact
from pfzoo.training import CD, Trainer
from pfzoo.training.metrics_log import MetricsLog


def read_table(path):
    with path.open(newline="") as file:
        return list(csv.reader(file))


def as_records(table):
    """The CSV's rows as records: empty cells dropped, numbers parsed back."""
    header, *rows = table
    return [{key: json.loads(value) for key, value in zip(header, row) if value != ""} for row in rows]


def test_the_table_holds_the_same_records_under_the_union_of_their_keys(tmp_path):
    log = MetricsLog(tmp_path)
    records = [{"epoch": 1, "loss": 0.1 + 0.2, "seconds": 1e-7}, {"epoch": 2, "loss": -1.5, "seconds": 2.0, "log_z": 12.25},
               {"epoch": 3, "loss": 3.0, "seconds": 1.0, "log_z": None}]
    for record in records:
        log.append(record)
    table = read_table(tmp_path / "metrics.csv")
    assert table[0] == ["epoch", "loss", "seconds", "log_z"]
    assert table[1][3] == "" and table[3][3] == ""  # absent, and None
    assert as_records(table) == [{k: v for k, v in r.items() if v is not None} for r in records]  # floats exactly


def test_a_resume_cuts_the_table_back_to_the_checkpoint_like_the_json_lines(tmp_path):
    log = MetricsLog(tmp_path)
    for epoch in (1, 2, 3):
        log.append({"epoch": epoch, "loss": float(epoch), **({"extra": 1.0} if epoch == 3 else {})})
    MetricsLog(tmp_path).rewrite_through(2)  # the checkpoint after epoch 2: epoch 3 was written before a kill
    table = read_table(tmp_path / "metrics.csv")
    assert table == [["epoch", "loss"], ["1", "1.0"], ["2", "2.0"]]  # the column only epoch 3 had is gone too
    resumed = MetricsLog(tmp_path)
    resumed.append({"epoch": 3, "loss": 9.0})
    assert read_table(tmp_path / "metrics.csv")[-1] == ["3", "9.0"] and len(read_table(tmp_path / "metrics.csv")) == 4


def test_a_training_run_writes_the_table_of_its_metrics_file(tmp_path):
    g = torch.Generator().manual_seed(0)
    data = DataSplits("toy", train=torch.bernoulli(torch.full((60, 6), 0.3), generator=g), test=torch.bernoulli(torch.full((20, 6), 0.3), generator=g))
    Trainer(CD(), run_dir=tmp_path, epochs=3, batch_size=20, evaluate_every=2, estimator=Exact(), progress=False).fit(random_rbm(6, 3, seed=0), data)
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert as_records(read_table(tmp_path / "metrics.csv")) == [{k: v for k, v in r.items() if v is not None} for r in records]
    assert "test_log_likelihood" in read_table(tmp_path / "metrics.csv")[0]  # first met at epoch 2


def test_csv_false_writes_no_table(tmp_path):
    log = MetricsLog(tmp_path, csv=False)
    log.append({"epoch": 1, "loss": 1.0})
    assert not (tmp_path / "metrics.csv").exists() and (tmp_path / "metrics.jsonl").is_file()


def test_tensorboard_without_its_package_is_refused_in_one_line_naming_it(tmp_path, monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None if name == "tensorboard" else find_spec(name, *args))
    with pytest.raises(ValueError, match=r"tensorboard=true needs the tensorboard package \(pip install tensorboard\)") as refused:
        Trainer(CD(), run_dir=tmp_path, tensorboard=True)
    assert "\n" not in str(refused.value)


def test_tensorboard_scalars_follow_the_records_and_a_resume_drops_the_later_ones(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = MetricsLog(tmp_path, tensorboard=True)
    for epoch in (1, 2, 3):
        log.append({"epoch": epoch, "loss": float(epoch), "note": "text"})
    log.close()
    resumed = MetricsLog(tmp_path, tensorboard=True)
    resumed.rewrite_through(2)
    resumed.append({"epoch": 3, "loss": 30.0})
    resumed.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert events.Tags()["scalars"] == ["loss"]
    assert [(e.step, e.value) for e in events.Scalars("loss")] == [(1, 1.0), (2, 2.0), (3, 30.0)]
