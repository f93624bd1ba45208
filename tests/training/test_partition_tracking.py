"""Tracking log Z during training (Desjardins, Courville & Bengio 2011): the tracked value against the exact log Z of
enumerable models, the filter and the estimates it combines, checkpoint/resume, the Trainer's callbacks, refusals."""

import json
import math
from functools import partial
from pathlib import Path

import pytest
import torch
from factories import all_binary_states, random_dbm, random_gbrbm, random_hopfield, random_ising, random_linear_generative, random_rbm
from host_reads import DEVICES
from hydra.utils import instantiate
from omegaconf import OmegaConf

from pfzoo.data import DataSplits
from pfzoo.logmath import summarize_log_weights
from pfzoo.models import RBM, MissingCapability
from pfzoo.training import PCD, Objective, PartitionTracker, Trainer, TrainingCallback
from pfzoo.training.partition_tracking import LogPartitionFilter, log_mean_and_covariance, tracker_from_settings

CONF = Path(__file__).resolve().parents[2] / "conf" / "trainer"
TIMING = ("seconds", "evaluation_seconds", "callback_seconds")


def teacher_data(num_visible=12, rows=700, seed=0):
    """Exact draws of a 12-visible teacher RBM (4 hidden, weights of scale 1.5), 500 train and 200 test rows."""
    teacher = random_rbm(num_visible, 4, scale=1.5, seed=7)
    states = all_binary_states(num_visible)
    probs = torch.softmax(-teacher.free_energy(states), 0)
    rows_drawn = states[torch.multinomial(probs, rows, replacement=True, generator=torch.Generator().manual_seed(seed))]
    return DataSplits("teacher", train=rows_drawn[:500], test=rows_drawn[500:])


def student(seed=0, data=None):
    """The 12 × 6 RBM the tests train (float64, base-rate visible biases when ``data`` is given)."""
    model = RBM(12, 6, init_std=0.1, generator=torch.Generator().manual_seed(seed)).double()
    if data is not None:
        model.init_from_data(data.train)
    return model


def pcd_trainer(run_dir, epochs, tracker=None, **settings):
    """PCD-1 (50 chains) with SGD(0.05, momentum 0.5), 50 rows per batch: 10 updates per epoch of the teacher's data."""
    return Trainer(PCD(k=1, num_chains=50), partial(torch.optim.SGD, lr=0.05, momentum=0.5), run_dir=run_dir, epochs=epochs,
                   batch_size=50, progress=False, callbacks=[] if tracker is None else [tracker], **settings)


def read_metrics(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


def without_timing(records):
    return [{key: value for key, value in record.items() if key not in TIMING} for record in records]


def exact_log_z(model):
    return model.log_partition().item()


# ---- the tracked value against the exact one ------------------------------------------------------


@pytest.mark.parametrize("settings", [{}, {"anchor_every": 10**6}], ids=["filtered", "temporal_only"])
def test_tracked_log_z_stays_with_the_exact_one_through_pcd_training(tmp_path, settings):
    """300 PCD updates move the exact log Z by more than ten times the tolerance's floor; at every epoch the tracked value is within 4 of its
    stderr or 0.02 nat (0.1% of log Z ≈ 20) of it, and so is the tracked test log-likelihood of the exact one. With
    ``anchor_every`` beyond the run, only the first observation anchors it: the importance-sampling changes alone follow."""
    data = teacher_data()
    model = student(data=data)
    pcd_trainer(tmp_path, 30, PartitionTracker(num_chains=50, num_temperatures=8, **settings),
                epoch_metrics={"log_z_exact": exact_log_z}).fit(model, data)
    records = read_metrics(tmp_path)
    exact = [record["log_z_exact"] for record in records]
    assert max(exact) - min(exact) > 0.2
    for record in records:
        tolerance = max(4 * record["log_z_tracked_stderr"], 0.02)
        assert abs(record["log_z_tracked"] - record["log_z_exact"]) <= tolerance, record
    last = records[-1]
    exact_test = (-model.free_energy(data.test)).mean().item() - last["log_z_exact"]
    assert abs(last["test_tracked_log_likelihood"] - exact_test) <= max(4 * last["test_tracked_log_likelihood_stderr"], 0.02)
    assert last["test_tracked_log_likelihood_stderr"] == last["log_z_tracked_stderr"] > 0


def perturbed(model, step, seed):
    """``model`` with every parameter moved by ``N(0, step²)`` noise (drawn on the CPU), then projected onto its constraints."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(step * torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype).to(parameter.device))
        model.project_parameters()


FAMILIES = {
    "rbm": lambda: random_rbm(8, 5, seed=3),
    "ising": lambda: random_ising(8),
    "hopfield": lambda: random_hopfield(8),
    "gaussian_rbm": lambda: random_gbrbm(4, 3),
    "dbm": lambda: random_dbm([6, 4, 3]),
}


@pytest.mark.parametrize("family, device", [*((family, "cpu") for family in sorted(FAMILIES)),
                                            pytest.param("rbm", "cuda", marks=DEVICES[1].marks)])
def test_every_family_with_a_path_is_tracked_through_parameter_changes(family, device):
    """From the first observation (bridge sampling along the ladder) through 30 random parameter steps (importance sampling
    and observations): within 4 stderr of the exact log Z at the start and at the end; on a GPU too (RBM)."""
    model = FAMILIES[family]().to(device)
    train = model.sample(200, generator=torch.Generator(device).manual_seed(0)).to(model.dtype)
    tracker = PartitionTracker(num_chains=100, num_temperatures=5, burn_in=50)
    tracker.start(model, train, seed=0)
    for step in range(31):
        estimate, stderr = tracker.log_partition()
        if step in (0, 30):
            assert abs(estimate - exact_log_z(model)) <= 4 * stderr, (step, estimate, stderr, exact_log_z(model))
        perturbed(model, 0.01, seed=step)
        tracker.on_step(model)


# ---- the estimates and the filter -----------------------------------------------------------------


def test_log_mean_and_covariance_is_the_delta_method_of_summarize_log_weights():
    log_ratios = torch.randn(3, 400, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    log_ratios[1] = 0.5 * log_ratios[0] + 0.2 * log_ratios[1]  # a row correlated with the first
    log_means, covariance = log_mean_and_covariance(log_ratios)
    summary = summarize_log_weights(log_ratios)
    torch.testing.assert_close(log_means, summary.log_mean)
    torch.testing.assert_close(covariance.diagonal().sqrt(), summary.stderr)
    assert covariance[0, 1] > 0.5 * covariance.diagonal()[:2].min() and torch.allclose(covariance, covariance.T)


def test_the_filter_weighs_observations_by_their_inverse_variances_and_adds_predicted_changes():
    """One level: a first observation sets the state; a second combines with it by inverse-variance weights; a prediction
    shifts the mean and adds its variance; with ``log Z_0`` known, observations are differences from it."""
    log_z0 = torch.tensor(2.0, dtype=torch.float64)
    kalman = LogPartitionFilter(log_z0)
    kalman.observe(torch.tensor([1.0], dtype=torch.float64), torch.tensor([[0.04]], dtype=torch.float64))
    assert kalman.mean.tolist() == [3.0] and kalman.covariance.item() == pytest.approx(0.04)
    kalman.observe(torch.tensor([2.0], dtype=torch.float64), torch.tensor([[0.01]], dtype=torch.float64))
    assert kalman.mean.item() == pytest.approx((3 / 0.04 + 4 / 0.01) / (1 / 0.04 + 1 / 0.01))
    assert kalman.covariance.item() == pytest.approx(1 / (1 / 0.04 + 1 / 0.01))
    before = kalman.covariance.item()
    kalman.predict(torch.tensor([0.5], dtype=torch.float64), torch.tensor([[0.02]], dtype=torch.float64))
    assert kalman.covariance.item() == pytest.approx(before + 0.02)


def test_the_first_observation_chains_the_differences_from_the_base():
    """Two levels: ζ = (log Z_0 + y_1, log Z_0 + y_1 + y_2), Cov = H⁻¹ R H⁻ᵀ."""
    kalman = LogPartitionFilter(torch.tensor(1.0, dtype=torch.float64))
    noise = torch.tensor([[0.01, 0.002], [0.002, 0.03]], dtype=torch.float64)
    kalman.observe(torch.tensor([0.5, 0.25], dtype=torch.float64), noise)
    assert kalman.mean.tolist() == [1.5, 1.75]
    lower = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    torch.testing.assert_close(kalman.covariance, lower @ noise @ lower.T)


# ---- the Trainer: resume, independence, configs, refusals -----------------------------------------


def test_a_resumed_tracked_run_continues_bit_for_bit(tmp_path):
    data = teacher_data()
    tracker = lambda: PartitionTracker(num_chains=20, num_temperatures=4, burn_in=20)  # noqa: E731
    one_go = student(data=data)
    pcd_trainer(tmp_path / "one_go", 4, tracker()).fit(one_go, data)
    pcd_trainer(tmp_path / "resumed", 2, tracker()).fit(student(data=data), data)
    resumed = student(seed=1)  # everything must come from the checkpoint
    second = tracker()
    pcd_trainer(tmp_path / "resumed", 4, second).fit(resumed, data, resume=True)
    assert without_timing(read_metrics(tmp_path / "resumed")) == without_timing(read_metrics(tmp_path / "one_go"))
    assert "log_z_tracked" in read_metrics(tmp_path / "one_go")[-1]
    assert torch.equal(one_go.weight, resumed.weight)


def test_tracking_leaves_the_training_unchanged(tmp_path):
    data = teacher_data()
    plain, tracked = student(data=data), student(data=data)
    pcd_trainer(tmp_path / "plain", 2).fit(plain, data)
    trainer = pcd_trainer(tmp_path / "tracked", 2, track_partition={"num_chains": 10, "num_temperatures": 3, "burn_in": 5})
    trainer.fit(tracked, data)
    for name, parameter in plain.named_parameters():
        assert torch.equal(parameter, dict(tracked.named_parameters())[name]), name
    plain_records, tracked_records = read_metrics(tmp_path / "plain"), read_metrics(tmp_path / "tracked")
    for before, after in zip(plain_records, tracked_records):
        assert {key: value for key, value in after.items() if key in before and key not in TIMING} == \
               {key: value for key, value in before.items() if key not in TIMING}
        assert after["callback_seconds"] > 0 and "log_z_tracked" in after and "log_z_tracked" not in before


def test_the_pcd_config_turns_tracking_on(tmp_path):
    data = teacher_data()
    cfg = OmegaConf.create({"seed": 3, "trainer": OmegaConf.load(CONF / "pcd.yaml")})
    assert cfg.trainer.track_partition is None and not instantiate(cfg.trainer, run_dir=str(tmp_path), estimator=None).callbacks
    cfg.trainer.track_partition = {"num_chains": 10, "num_temperatures": 3, "sweeps": 2, "burn_in": 5}
    trainer = instantiate(cfg.trainer, run_dir=str(tmp_path), estimator=None, epochs=1, progress=False)
    [tracker] = trainer.callbacks
    assert isinstance(tracker, PartitionTracker) and tracker.sweeps == 2 and tracker.betas == (0.0, 1 / 3, 2 / 3, 1.0)
    assert math.isfinite(trainer.fit(student(data=data), data)["test_tracked_log_likelihood"])


def test_tracker_settings_are_validated_in_one_line():
    assert tracker_from_settings(None) is None and tracker_from_settings(False) is None
    assert isinstance(tracker_from_settings(True), PartitionTracker)
    assert tracker_from_settings({"betas": [0.5, 1.0]}).betas == (0.0, 0.5, 1.0)
    assert PartitionTracker(num_temperatures=1).betas == (0.0, 1.0)
    for bad, match in [({"chains": 5}, "unknown settings chains"), ("yes", "null, true or a mapping"),
                       ({"num_chains": 1}, "num_chains must be at least 2"), ({"betas": [0.5, 0.9]}, "end at exactly 1"),
                       ({"anchor_every": 0}, "anchor_every"), ({"burn_in": -1}, "burn_in")]:
        with pytest.raises(ValueError, match=match):
            tracker_from_settings(bad)
    with pytest.raises(ValueError, match="TrainingCallback"):
        Trainer(PCD(), run_dir="unused", callbacks=[object()])


class NullObjective(Objective):
    """Zero loss through every parameter: applies to every model."""

    def loss(self, model, batch, *, generator=None):
        return 0 * model.free_energy(batch).sum()


def test_a_model_without_an_exact_free_energy_or_path_is_refused_in_one_line(tmp_path):
    model = random_linear_generative()
    with pytest.raises(MissingCapability, match="PartitionTracker needs") as refused:
        PartitionTracker().check(model)
    assert "\n" not in str(refused.value) and "estimator" in str(refused.value)
    data = DataSplits("noise", train=torch.randn(20, model.num_visible, dtype=model.dtype), test=torch.randn(5, model.num_visible, dtype=model.dtype))
    with pytest.raises(MissingCapability, match="PartitionTracker needs"):
        Trainer(NullObjective(), run_dir=tmp_path / "run", track_partition=True, progress=False).fit(model, data)
    assert not (tmp_path / "run").exists()  # refused before anything ran


def test_a_resume_under_another_ladder_is_refused(tmp_path):
    data = teacher_data()
    pcd_trainer(tmp_path, 1, PartitionTracker(num_chains=10, num_temperatures=3, burn_in=5)).fit(student(data=data), data)
    with pytest.raises(ValueError, match="tracker state has betas"):
        pcd_trainer(tmp_path, 2, PartitionTracker(num_chains=10, num_temperatures=4)).fit(student(data=data), data, resume=True)


def test_callbacks_see_every_update_and_report_every_epoch(tmp_path):
    """The general hook: ``start`` once, ``on_step`` after each of the 10 updates per epoch, ``on_epoch_end`` merged
    into the record, ``state_dict`` into the checkpoint."""

    class Counter(TrainingCallback):
        def __init__(self):
            self.steps, self.started = 0, []

        def start(self, model, train, *, seed, state=None):
            self.started.append((seed, state))
            self.steps = 0 if state is None else state["steps"]

        def on_step(self, model):
            assert not torch.is_grad_enabled()
            self.steps += 1

        def on_epoch_end(self, model, epoch, splits):
            return {"updates_seen": float(self.steps)}

        def state_dict(self):
            return {"steps": self.steps}

    data, counter = teacher_data(), Counter()
    pcd_trainer(tmp_path, 2, counter, seed=5).fit(student(data=data), data)
    assert counter.started == [(8, None)]
    assert [record["updates_seen"] for record in read_metrics(tmp_path)] == [10.0, 20.0]
    again = Counter()
    pcd_trainer(tmp_path, 3, again, seed=5).fit(student(data=data), data, resume=True)
    assert again.started == [(8, {"steps": 20})] and read_metrics(tmp_path)[-1]["updates_seen"] == 30.0


@pytest.mark.slow
def test_a_tracker_that_lags_the_training_says_so(tmp_path, caplog):
    """One sweep per update on the digits RBM under PCD (lr 0.05): the bridge observations keep pulling log Ẑ up by
    more than its stderr, epoch after epoch, and the tracker warns; it does not warn on the first epochs' small moves."""
    from pfzoo import app, cli

    cfg = cli.compose("train", [f"run_dir={tmp_path}", "trainer.epochs=40", "trainer.progress=false", "trainer.track_partition=true"])
    with caplog.at_level("WARNING", logger="pfzoo.training.partition_tracking"):
        app.train(cfg)
    lags = [record for record in caplog.records if "lags the training" in record.getMessage()]
    assert lags and "raise track_partition.sweeps" in lags[0].getMessage()
    first_warned = min(json.loads(line)["epoch"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
                       if abs(json.loads(line)["log_z_tracking_correction"]) > 0.1)
    assert first_warned > 3


def test_a_ladder_too_coarse_for_the_model_says_so(tmp_path, caplog):
    """A sharp teacher-sized RBM bridged from its base in one level: the levels barely exchange and the tracker warns
    that its ladder is too coarse; twenty levels on the same model exchange freely and it stays quiet."""
    data = teacher_data()

    def warnings_with(betas, run_dir):
        model = student(data=data)
        with torch.no_grad():
            model.weight.copy_(random_rbm(12, 6, scale=3.0, seed=1).weight)
        tracker = PartitionTracker(num_chains=20, betas=betas, burn_in=5)
        caplog.clear()
        with caplog.at_level("WARNING", logger="pfzoo.training.partition_tracking"):
            pcd_trainer(run_dir, 1, tracker, seed=0).fit(model, data)
        acceptance = read_metrics(run_dir)[-1]["tracking_swap_acceptance_min"]
        return acceptance, [r.getMessage() for r in caplog.records if "too coarse" in r.getMessage()]

    coarse, coarse_warnings = warnings_with([1.0], tmp_path / "coarse")
    fine, fine_warnings = warnings_with([k / 20 for k in range(1, 21)], tmp_path / "fine")
    assert coarse < 0.1 <= fine
    assert len(coarse_warnings) == 1 and "track_partition.num_temperatures" in coarse_warnings[0] and not fine_warnings
