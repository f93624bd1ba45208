"""The Trainer's stopping rules (stop_tolerance, max_seconds) and per-epoch metrics (epoch_metrics)."""

import json
from functools import partial
from pathlib import Path

import pytest
import torch

from pfzoo.data import DataSplits, sample_spin_glass, spin_glass_model
from pfzoo.models import Ising
from pfzoo.studies.ising_recovery import coupling_error
from pfzoo.training import BitFlipMPF, Objective, Trainer
from pfzoo.training import trainer as trainer_module
from pfzoo.zoo import load_checkpoint


def read_metrics(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


class FakeClock:
    """Stands in for the ``time`` module in the trainer: ``perf_counter`` reads a clock that only ``advance`` moves."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


class ScriptedObjective(Objective):
    """Loss ``losses[call]`` (then the last value forever), with a zero gradient through every parameter; each call
    advances ``clock`` by one second."""

    def __init__(self, losses, clock=None):
        super().__init__()
        self.losses, self.calls, self.clock = list(losses), 0, clock

    def loss(self, model, batch, *, generator=None):
        value = self.losses[min(self.calls, len(self.losses) - 1)]
        self.calls += 1
        if self.clock is not None:
            self.clock.advance(1.0)
        return 0 * model.free_energy(batch).sum() + value


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(0)
    x = torch.bernoulli(torch.full((40, 6), 0.4, dtype=torch.float64), generator=g)
    return DataSplits("toy", train=x, test=x[:10])


def model():
    """A float64 model, so the scripted losses are exact."""
    return Ising(6, init_std=0.0).double()


def full_batch_trainer(run_dir, objective, **options):
    options.setdefault("epochs", 50)
    return Trainer(objective, partial(torch.optim.SGD, lr=0.0), run_dir=run_dir, batch_size=1000, progress=False, **options)


def test_stop_tolerance_stops_at_the_first_epoch_that_changed_the_loss_by_at_most_the_tolerance(tmp_path, data):
    losses = [50.0, 20.0, 10.0, 10.2, 10.205, 3.0]
    metrics = full_batch_trainer(tmp_path, ScriptedObjective(losses), stop_tolerance=1e-3).fit(model(), data)
    records = read_metrics(tmp_path)
    # |10.2 − 10.0| = 0.2 > 0.0102; |10.205 − 10.2| = 0.005 ≤ 0.0102: stop after epoch 5.
    assert [r["loss"] for r in records] == losses[:5]
    assert metrics["epoch"] == 5


def test_stop_tolerance_is_relative_to_at_least_one(tmp_path, data):
    # Near zero the rule is absolute: 1e-4 → 5e-5 changes by 5e-5 ≤ 1e-3 · max(1, 5e-5).
    losses = [1.0, 0.5, 1e-4, 5e-5, 0.0]
    full_batch_trainer(tmp_path, ScriptedObjective(losses), stop_tolerance=1e-3).fit(model(), data)
    assert [r["epoch"] for r in read_metrics(tmp_path)] == [1, 2, 3, 4]


def test_zero_tolerance_and_no_budget_run_every_epoch(tmp_path, data):
    full_batch_trainer(tmp_path, ScriptedObjective([1.0]), epochs=6).fit(model(), data)
    assert len(read_metrics(tmp_path)) == 6


def test_a_stopped_run_is_checkpointed_at_its_last_epoch_and_resuming_trains_no_further(tmp_path, data):
    losses = [5.0, 4.0, 4.0, 1.0]
    full_batch_trainer(tmp_path, ScriptedObjective(losses), stop_tolerance=1e-6).fit(model(), data)
    assert load_checkpoint(tmp_path / "checkpoint.pt")["trainer_state"]["epoch"] == 3
    objective = ScriptedObjective([0.5])
    metrics = full_batch_trainer(tmp_path, objective, stop_tolerance=1e-6, epochs=80).fit(model(), data, resume=True)
    assert objective.calls == 0 and metrics["epoch"] == 3 and len(read_metrics(tmp_path)) == 3


def test_max_seconds_stops_once_the_training_seconds_reach_the_budget(tmp_path, data, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(trainer_module, "time", clock)
    # One batch per epoch, one loss call per batch, one second per call: the budget of 2.5 s is reached after epoch 3.
    metrics = full_batch_trainer(tmp_path, ScriptedObjective([1.0], clock), max_seconds=2.5).fit(model(), data)
    records = read_metrics(tmp_path)
    assert [r["seconds"] for r in records] == [1.0, 1.0, 1.0] and metrics["epoch"] == 3


class CpuAndWallClock(FakeClock):
    """A FakeClock whose ``process_time`` moves a quarter as fast as ``perf_counter``: a process sharing its core."""

    def process_time(self):
        return self.now / 4


@pytest.mark.parametrize("clock, seconds", [("wall", [1.0, 1.0, 1.0]), ("cpu", [0.25] * 10)])
def test_clock_chooses_wall_or_cpu_seconds_for_the_records_and_the_budget(tmp_path, data, monkeypatch, clock, seconds):
    fake = CpuAndWallClock()
    monkeypatch.setattr(trainer_module, "time", fake)
    # one second of wall time per epoch, a quarter of CPU time: the 2.5 s budget lasts 3 wall epochs or 10 CPU ones
    full_batch_trainer(tmp_path, ScriptedObjective([1.0], fake), max_seconds=2.5, clock=clock).fit(model(), data)
    assert [r["seconds"] for r in read_metrics(tmp_path)] == seconds


def test_clock_refuses_an_unknown_name(tmp_path):
    with pytest.raises(ValueError, match="clock must be one of 'wall', 'cpu', got 'gpu'"):
        full_batch_trainer(tmp_path, ScriptedObjective([1.0]), clock="gpu")


def test_epoch_metrics_are_logged_every_epoch_outside_the_timed_region(tmp_path, data, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(trainer_module, "time", clock)
    seen = []

    def slow_metric(model):
        clock.advance(100.0)  # a costly metric must not count as training time
        seen.append(torch.is_grad_enabled())
        return float(len(seen))

    full_batch_trainer(tmp_path, ScriptedObjective([1.0], clock), epochs=3, epoch_metrics={"calls": slow_metric}).fit(
        model(), data
    )
    records = read_metrics(tmp_path)
    assert [r["calls"] for r in records] == [1.0, 2.0, 3.0]
    assert [r["seconds"] for r in records] == [1.0, 1.0, 1.0]
    assert [r["evaluation_seconds"] for r in records] == [100.0, 100.0, 100.0]  # logged apart: no time goes unreported
    assert seen == [False, False, False]


@pytest.mark.parametrize(
    "bad",
    [
        {"stop_tolerance": -1e-3},
        {"stop_tolerance": float("nan")},
        {"stop_tolerance": float("inf")},
        {"max_seconds": 0.0},
        {"max_seconds": -5.0},
        {"max_seconds": float("nan")},
        {"epoch_metrics": {"error": 3.0}},
        {"epoch_metrics": {1: len}},
    ],
)
def test_bad_stopping_options_raise_value_error_naming_them(tmp_path, bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        Trainer(ScriptedObjective([1.0]), run_dir=tmp_path, **bad)


def test_full_batch_lbfgs_with_stop_tolerance_takes_the_hand_loops_steps_and_stops_one_step_later(tmp_path):
    """The Trainer's L-BFGS epochs on MPF are the steps of a hand-written loop (same iterates up to summation order),
    and its tolerance rule, which sees each epoch's loss before the step, stops one step after the loop's rule
    (which evaluates the loss after each step)."""
    truth = spin_glass_model(side=3, coupling_std=1.0, seed=0)
    train = sample_spin_glass(truth, 2000, burn_in=50, thin=2, generator=torch.Generator().manual_seed(1)).double()
    tolerance = 1e-8

    def start():
        model = Ising(9, init_std=0.0).double()
        model.init_from_data(train)
        return model

    def optimizer(params):
        return torch.optim.LBFGS(params, lr=1.0, max_iter=3, history_size=20, line_search_fn="strong_wolfe")

    model, objective = start(), BitFlipMPF()
    lbfgs = optimizer(model.parameters())

    def closure():
        lbfgs.zero_grad()
        loss = objective.loss(model, train)
        loss.backward()
        return loss

    hand_errors, previous = [], None
    for _ in range(200):
        lbfgs.step(closure)
        with torch.no_grad():
            loss = objective.loss(model, train).item()
        hand_errors.append(coupling_error(model, truth))
        if previous is not None and abs(previous - loss) <= tolerance * max(1.0, abs(loss)):
            break
        previous = loss
    assert 10 <= len(hand_errors) < 200  # a well-conditioned problem: 32 steps

    trainer = Trainer(BitFlipMPF(), optimizer, run_dir=tmp_path, epochs=200, batch_size=10**6, progress=False,
                      stop_tolerance=tolerance, epoch_metrics={"coupling_error": partial(coupling_error, truth=truth)})
    trained = start()
    trainer.fit(trained, DataSplits("spin_glass", train=train, test=train))
    errors = [r["coupling_error"] for r in read_metrics(tmp_path)]
    assert len(errors) == len(hand_errors) + 1
    assert errors[:-1] == pytest.approx(hand_errors, rel=1e-6, abs=1e-12)


def test_resume_refuses_a_changed_config_in_one_line(tmp_path):
    """Only the epochs (and where the run lives) may change on resume; a new learning rate is named, not ignored."""
    from pfzoo.training.checkpoints import config_differences
    from pfzoo.training.metrics_log import format_record

    stored = {"trainer": {"epochs": 3, "optimizer": {"lr": 0.05}}, "seed": 0, "run_dir": "a"}
    assert config_differences(stored, {"trainer": {"epochs": 9, "optimizer": {"lr": 0.05}}, "seed": 0, "run_dir": "b"}) == []
    assert config_differences(stored, {"trainer": {"epochs": 3, "optimizer": {"lr": 0.1}}, "seed": 1, "run_dir": "a"}) == [
        "seed: 0 → 1", "trainer.optimizer.lr: 0.05 → 0.1"]
    # a setting added since the run started, at its off value (null, false, 0), is no difference; at any other value it is
    newer = {"trainer": {"epochs": 3, "optimizer": {"lr": 0.05}, "clip_grad_norm": None}, "seed": 0, "run_dir": "a"}
    assert config_differences(stored, newer) == [] and config_differences(newer, stored) == []
    newer["trainer"]["compile"] = False  # a switch added since, off
    assert config_differences(stored, newer) == [] and config_differences(newer, stored) == []
    newer["trainer"]["passes"] = 0  # a count added since, at 0
    assert config_differences(stored, newer) == [] and config_differences(newer, stored) == []
    newer["trainer"]["passes"] = 0.5
    assert config_differences(stored, newer) == ["trainer.passes: '<absent>' → 0.5"]
    del newer["trainer"]["passes"]
    newer["trainer"]["compile"] = True
    assert config_differences(stored, newer) == ["trainer.compile: '<absent>' → True"]
    del newer["trainer"]["compile"]
    newer["trainer"]["clip_grad_norm"] = 100
    assert config_differences(stored, newer) == ["trainer.clip_grad_norm: '<absent>' → 100"]
    # how many rows the per-epoch diagnostics read touches no number of the training
    assert config_differences(stored, {**stored, "trainer": {**stored["trainer"], "metrics_rows": 2000}}) == []
    assert config_differences({"model": {"sizes": [1, 2]}}, {"model": {"sizes": [1, 3]}}) == ["model.sizes: [1, 2] → [1, 3]"]
    # which clock the timings read touches no number of the training: a run started before trainer.clock existed resumes
    assert config_differences(stored, {**stored, "trainer": {**stored["trainer"], "clock": "cpu"}}) == []
    # the estimator reads the model and never trains it: more steps, or a setting added since at any value, resume
    measured = {**stored, "estimator": {"_target_": "pfzoo.estimators.AIS", "num_steps": 1000}}
    assert config_differences(measured, {**stored, "estimator": {"_target_": "pfzoo.estimators.AIS", "num_steps": 10000,
                                                                  "marginalize": "hidden"}}) == []
    assert format_record({"epoch": 2, "loss": -0.0476243411, "seconds": 1.23456}) == "loss -0.04762  seconds 1.235"
