"""The Trainer: learning, metrics file, checkpoints, exact resume, weight decay, errors; and the metrics it logs."""

import dataclasses
import json
import sys
import math
from collections import Counter
from functools import partial
from pathlib import Path

import pytest
import torch
from factories import random_ising, random_rbm
from hydra.utils import instantiate
from omegaconf import OmegaConf
from torch.nn import functional as F

from pfzoo import zoo
from pfzoo.data import DataSplits, digits
from pfzoo.estimators import AIS, Exact
from pfzoo.models import ICA, RBM, MissingCapability
from pfzoo.training import (
    CD, FPCD, NCE, PCD, GeneralizedPseudoLikelihood, GeneralizedScoreMatching, NaiveMCMC, Objective, PseudoLikelihood, RatioMatching,
    SelfContrastive, Trainer, pseudo_log_likelihood, reconstruction_error,
)
from pfzoo.training.distributed_strategy import DistributedStrategy
from pfzoo.training.metrics import random_rows
from pfzoo.training.trainer import _EVALUATION_SEED_OFFSET as EVALUATION_SEED_OFFSET
from pfzoo.training.trainer import decayed_weights
from pfzoo.training.trainer_settings import TrainerSettings

CONF = Path(__file__).resolve().parents[2] / "conf" / "trainer"


def rbm(num_visible=16, num_hidden=8, seed=0):
    return RBM(num_visible, num_hidden, init_std=0.1, generator=torch.Generator().manual_seed(seed))


@pytest.fixture
def data():
    """Random binary data with unequal pixel rates: train [200, 16], test [50, 16]."""
    g = torch.Generator().manual_seed(0)
    rates = torch.linspace(0.1, 0.9, 16)
    return DataSplits("toy", train=torch.bernoulli(rates.expand(200, 16), generator=g), test=torch.bernoulli(rates.expand(50, 16), generator=g))


def read_metrics(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


def without_timing(records):
    return [{key: value for key, value in record.items() if not key.endswith("seconds")} for record in records]


class NullObjective(Objective):
    """Zero loss with a graph through every parameter: only the weight decay moves the model."""

    def loss(self, model, batch, *, generator=None):
        return 0 * model.free_energy(batch).sum()


class ExplodingCD(CD):
    """CD whose loss turns NaN on its ``explode_at``-th call."""

    def __init__(self, explode_at):
        super().__init__()
        self.calls, self.explode_at = 0, explode_at

    def loss(self, model, batch, *, generator=None):
        self.calls += 1
        loss = super().loss(model, batch, generator=generator)
        return loss * math.nan if self.calls == self.explode_at else loss


# ---- metrics --------------------------------------------------------------------------------------


def test_reconstruction_error_is_the_mean_squared_mean_field_reconstruction_error(data):
    model = rbm()
    v = data.test
    expected = ((v - torch.sigmoid(torch.sigmoid(v @ model.weight + model.hidden_bias) @ model.weight.T + model.visible_bias)) ** 2).mean()
    assert reconstruction_error(model, v) == pytest.approx(expected.item(), rel=1e-6)


def test_pseudo_log_likelihood_is_unbiased_for_the_exact_pseudo_likelihood():
    model = random_rbm(6, 4, seed=0, dtype=torch.float32, bias_scale=1.0)
    v = torch.tensor([[1.0, 0, 1, 1, 0, 0]])
    flipped = v.repeat(6, 1)
    flipped[range(6), range(6)] = 1 - flipped[range(6), range(6)]
    per_unit = 6 * F.logsigmoid(model.free_energy(flipped) - model.free_energy(v)).detach()  # V log p(v_i | v_-i)
    exact, num = per_unit.mean().item(), 20_000  # Σ_i log p(v_i | v_-i) = mean_i V log p(v_i | v_-i)
    estimate = pseudo_log_likelihood(model, v.repeat(num, 1), generator=torch.Generator().manual_seed(1))
    assert abs(estimate - exact) < 5 * per_unit.std(unbiased=False).item() / math.sqrt(num)


def test_metrics_validate_input():
    model = rbm()
    with pytest.raises(ValueError, match="v must be binary"):
        pseudo_log_likelihood(model, torch.full((3, 16), 0.5))
    with pytest.raises(ValueError, match="v must have 16 columns"):
        reconstruction_error(model, torch.zeros(3, 15))


# ---- learning -------------------------------------------------------------------------------------


def test_training_on_digits_raises_pseudo_likelihood_and_lowers_reconstruction_error(tmp_path):
    splits = digits()
    model = RBM(64, 24, generator=torch.Generator().manual_seed(0))
    before_pll = pseudo_log_likelihood(model, splits.test, generator=torch.Generator().manual_seed(2))
    before_error = reconstruction_error(model, splits.test)
    final = Trainer(CD(k=1), run_dir=tmp_path, epochs=5, batch_size=50, progress=False).fit(model, splits)
    assert final["epoch"] == 5
    assert final["test_pseudo_log_likelihood"] > before_pll + 10
    assert final["test_reconstruction_error"] < before_error - 0.05
    records = read_metrics(tmp_path)
    assert records[-1]["train_pseudo_log_likelihood"] > records[0]["train_pseudo_log_likelihood"]


def test_same_seed_same_run_and_the_seed_matters(tmp_path, data):
    def train(seed, name):
        model = rbm()
        Trainer(PCD(num_chains=20), run_dir=tmp_path / name, epochs=2, batch_size=32, progress=False, seed=seed).fit(model, data)
        return model.weight.detach()

    assert torch.equal(train(0, "a"), train(0, "b"))
    assert not torch.equal(train(0, "a"), train(1, "c"))


# ---- metrics file, checkpoints, resume ------------------------------------------------------------


def test_an_evaluation_that_warns_says_so_in_the_record_and_the_log(tmp_path, data, caplog):
    """AIS with two chains and two steps on a model with strong weights warns (its weights' ESS); the epoch record
    counts the warnings beside log Ẑ and its ESS, and each is logged, so the run's metrics never show a warned estimate as
    a clean number. An exact evaluation records none."""
    model = RBM.from_tensors(3.0 * torch.randn(16, 8, generator=torch.Generator().manual_seed(0)), torch.zeros(16), torch.zeros(8))
    with caplog.at_level("WARNING", logger="pfzoo.training.metrics"):
        record = Trainer(CD(), run_dir=tmp_path / "ais", epochs=1, batch_size=32, evaluate_every=1, estimator=AIS(num_chains=2, num_steps=2),
                         progress=False, optimizer=partial(torch.optim.SGD, lr=0.0)).fit(model, data)
    assert record["test_log_likelihood_warnings"] >= 1 and 0 < record["log_z_ess"] <= 2
    assert sum("test log-likelihood estimate may be wrong" in line for line in caplog.messages) == record["test_log_likelihood_warnings"]
    exact = Trainer(CD(), run_dir=tmp_path / "exact", epochs=1, batch_size=32, evaluate_every=1, estimator=Exact(), progress=False).fit(rbm(), data)
    assert exact["test_log_likelihood_warnings"] == 0 and "log_z_ess" not in exact


def test_metrics_file_has_one_json_object_per_epoch_with_estimates_at_evaluation_epochs(tmp_path, data):
    model = rbm()
    trainer = Trainer(CD(), run_dir=tmp_path, epochs=3, batch_size=32, evaluate_every=2, estimator=Exact(), progress=False)
    final = trainer.fit(model, data)
    records = read_metrics(tmp_path)
    assert [r["epoch"] for r in records] == [1, 2, 3]
    base_keys = {"epoch", "loss", "seconds", "evaluation_seconds"} | {f"{s}_{m}" for s in ("train", "test") for m in ("reconstruction_error", "pseudo_log_likelihood")}
    estimate_keys = {"test_log_likelihood", "test_log_likelihood_stderr", "log_z", "test_log_likelihood_warnings"}
    assert set(records[0]) == base_keys
    assert set(records[1]) == set(records[2]) == base_keys | estimate_keys
    assert records[2] == final
    log_z = model.log_partition().item()
    assert final["log_z"] == pytest.approx(log_z, rel=1e-12)
    assert final["test_log_likelihood"] == pytest.approx(model.log_prob(data.test).mean().item(), rel=1e-6)


def test_a_data_set_with_a_validation_split_is_judged_on_it_and_never_on_the_test_split(tmp_path, data):
    """Choosing epochs by the estimator's numbers must not select on the reported test split: with a valid split the
    diagnostics, the estimator and the callbacks read valid (keys named so); held_out='test' asks for test."""
    valid = data.test.flip(0)[:30]
    with_valid = DataSplits("toy", train=data.train, test=torch.full_like(data.test, float("nan")), valid=valid)
    model = rbm()
    trainer = Trainer(CD(), run_dir=tmp_path / "valid", epochs=2, batch_size=32, evaluate_every=1, estimator=Exact(),
                      progress=False, track_partition={"num_chains": 10, "num_temperatures": 4})
    final = trainer.fit(model, with_valid)  # a NaN test split would poison any number read from it
    assert not any(key.startswith("test_") for key in final)
    assert final["valid_log_likelihood"] == pytest.approx(model.log_prob(valid).mean().item(), rel=1e-6)
    assert final["valid_reconstruction_error"] == pytest.approx(reconstruction_error(model, valid), rel=1e-6)
    assert math.isfinite(final["valid_tracked_log_likelihood"]) and math.isfinite(final["valid_pseudo_log_likelihood"])

    asked = Trainer(CD(), run_dir=tmp_path / "test", epochs=1, evaluate_every=1, estimator=Exact(), progress=False, held_out="test")
    final = asked.fit(rbm(), DataSplits("toy", train=data.train, test=data.test, valid=valid))
    assert "test_log_likelihood" in final and not any(key.startswith("valid_") for key in final)
    with pytest.raises(ValueError, match="held_out='valid' but data set 'toy' has no valid split"):
        Trainer(CD(), run_dir=tmp_path / "none", epochs=1, progress=False, held_out="valid").fit(rbm(), data)
    with pytest.raises(ValueError, match="held_out must be one of auto, valid, test, got 'train'"):
        Trainer(CD(), run_dir=tmp_path / "bad", held_out="train")


def test_checkpoint_round_trips_through_zoo_load(tmp_path, data):
    model = rbm()
    config = {"model": {"num_hidden": 8}, "seed": 0}
    Trainer(PCD(num_chains=20), run_dir=tmp_path, epochs=3, batch_size=32, checkpoint_every=2, progress=False).fit(model, data, config=config)
    checkpoint = zoo.load_checkpoint(tmp_path / "checkpoint.pt")
    assert checkpoint["config"] == config
    assert checkpoint["trainer_state"]["epoch"] == 3  # the last epoch is always saved
    assert checkpoint["trainer_state"]["objective"]["chains"].shape == (20, 16)
    loaded = zoo.load(tmp_path / "checkpoint.pt")
    assert torch.equal(loaded.free_energy(data.test), model.free_energy(data.test))


def test_resumed_training_is_bit_identical_to_training_in_one_go(tmp_path, data):
    def trainer(run_dir, epochs):
        optimizer = partial(torch.optim.SGD, lr=0.05, momentum=0.9)
        return Trainer(PCD(k=2, num_chains=20), optimizer, run_dir=run_dir, epochs=epochs, batch_size=32, weight_decay=1e-3,
                       learning_rate_decay=0.5, progress=False)

    one_go = rbm()
    trainer(tmp_path / "one_go", 4).fit(one_go, data)

    trainer(tmp_path / "resumed", 2).fit(rbm(), data)
    with (tmp_path / "resumed" / "metrics.jsonl").open("a") as file:  # an epoch logged after the last checkpoint
        file.write(json.dumps({"epoch": 3, "loss": 0.0}) + "\n")
    resumed = rbm(seed=1)  # a different initialisation: everything must come from the checkpoint
    second = trainer(tmp_path / "resumed", 4)
    second.fit(resumed, data, resume=True)

    for name, parameter in one_go.named_parameters():
        assert torch.equal(parameter, dict(resumed.named_parameters())[name]), name
    assert without_timing(read_metrics(tmp_path / "resumed")) == without_timing(read_metrics(tmp_path / "one_go"))


def test_resume_without_checkpoint_starts_fresh_and_logs_it(tmp_path, data, caplog):
    fresh, resumed = rbm(), rbm()
    Trainer(CD(), run_dir=tmp_path / "a", epochs=2, batch_size=32, progress=False).fit(fresh, data)
    with caplog.at_level("WARNING", logger="pfzoo.training.trainer"):
        Trainer(CD(), run_dir=tmp_path / "b", epochs=2, batch_size=32, progress=False).fit(resumed, data, resume=True)
    assert "no checkpoint" in caplog.text
    assert torch.equal(fresh.weight, resumed.weight)


def test_resume_of_a_finished_run_returns_its_last_metrics(tmp_path, data):
    final = Trainer(CD(), run_dir=tmp_path, epochs=2, batch_size=32, progress=False).fit(rbm(), data)
    model = rbm(seed=5)
    assert Trainer(CD(), run_dir=tmp_path, epochs=2, progress=False).fit(model, data, resume=True) == final
    assert torch.equal(model.weight, zoo.load(tmp_path / "checkpoint.pt").weight)


def test_resume_refuses_a_checkpoint_of_another_model(tmp_path, data):
    Trainer(CD(), run_dir=tmp_path, epochs=1, progress=False).fit(rbm(num_hidden=8), data)
    with pytest.raises(ValueError, match="cannot resume"):
        Trainer(CD(), run_dir=tmp_path, epochs=2, progress=False).fit(rbm(num_hidden=9), data, resume=True)


def test_nan_loss_raises_and_keeps_the_last_good_checkpoint(tmp_path, data):
    # 4 batches per epoch; without the divergence guard (tests/training/test_divergence.py has it on)
    trainer = Trainer(ExplodingCD(explode_at=6), run_dir=tmp_path, epochs=3, batch_size=50, progress=False, divergence="off")
    with pytest.raises(FloatingPointError, match="epoch 2, batch 1"):
        trainer.fit(rbm(), data)
    checkpoint = zoo.load_checkpoint(tmp_path / "checkpoint.pt")
    assert checkpoint["trainer_state"]["epoch"] == 1
    assert all(torch.isfinite(t).all() for t in checkpoint["state_dict"].values())
    assert [r["epoch"] for r in read_metrics(tmp_path)] == [1]


def test_weight_decay_shrinks_couplings_as_documented_and_not_fields(tmp_path):
    """The Trainer's docstring once listed couplings among the parameters weight decay leaves alone, while
    decayed_weights (which the Trainer applies) decays them on purpose: the behaviour, and the docstring that says it."""
    model = random_ising(6)
    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    rows = torch.bernoulli(torch.full((40, 6), 0.5, dtype=torch.float64), generator=torch.Generator().manual_seed(0))
    sgd = partial(torch.optim.SGD, lr=0.1)
    Trainer(NullObjective(), sgd, run_dir=tmp_path, epochs=1, batch_size=20, weight_decay=0.5, progress=False).fit(model, DataSplits("spins", rows, rows[:5]))
    torch.testing.assert_close(model.coupling, initial["coupling"] * (1 - 0.1 * 0.5) ** 2)  # 2 steps of J -= lr λ J
    assert all(torch.equal(p, initial[name]) for name, p in model.named_parameters() if name != "coupling")
    assert "over :func:`decayed_weights`: the weight matrices and pair couplings, never biases" in " ".join(Trainer.__doc__.split())
    assert "couplings named ``coupling``" in decayed_weights.__doc__


def test_weight_decay_shrinks_weights_only(tmp_path, data):
    model = rbm()
    with torch.no_grad():
        model.visible_bias.normal_(generator=torch.Generator().manual_seed(1))
    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    sgd = partial(torch.optim.SGD, lr=0.1)
    Trainer(NullObjective(), sgd, run_dir=tmp_path, epochs=1, batch_size=50, weight_decay=0.5, progress=False).fit(model, data)
    torch.testing.assert_close(model.weight, initial["weight"] * (1 - 0.1 * 0.5) ** 4)  # 4 steps of W -= lr λ W
    assert torch.equal(model.visible_bias, initial["visible_bias"])
    assert torch.equal(model.hidden_bias, initial["hidden_bias"])


# ---- arguments, output, configs -------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        dict(epochs=0),
        dict(batch_size=0),
        dict(weight_decay=-1.0),
        dict(checkpoint_every=0),
        dict(evaluate_every=-1),
        dict(seed="0"),
        dict(estimator="ais"),
        dict(optimizer="sgd"),
        dict(csv="yes"),
        dict(centered="yes"),
        dict(epoch=3),  # no such setting: TrainerSettings has epochs
        dict(settings={"epochs": 3}),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(tmp_path, bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        Trainer(CD(), run_dir=tmp_path, **bad)


def test_bad_objective_and_bad_data_raise_value_error(tmp_path, data):
    with pytest.raises(ValueError, match="objective"):
        Trainer(object(), run_dir=tmp_path)
    trainer = Trainer(CD(), run_dir=tmp_path, epochs=1, progress=False)
    grey = DataSplits("grey", train=torch.full((10, 16), 0.5), test=data.test)
    with pytest.raises(ValueError, match="data.train must be binary"):
        trainer.fit(rbm(), grey)
    with pytest.raises(ValueError, match="data.train must have 16 columns"):
        trainer.fit(rbm(), DataSplits("wide", train=torch.zeros(10, 17), test=torch.zeros(10, 17)))


def test_trainer_prints_nothing_without_progress_and_shows_a_bar_only_on_a_terminal(tmp_path, data, capsys, monkeypatch):
    Trainer(CD(), run_dir=tmp_path / "quiet", epochs=1, progress=False).fit(rbm(), data)
    assert capsys.readouterr() == ("", "")
    Trainer(CD(), run_dir=tmp_path / "redirected", epochs=1, progress=True).fit(rbm(), data)
    assert capsys.readouterr() == ("", "")  # stderr is not a terminal here: a bar would write a line per refresh
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    Trainer(CD(), run_dir=tmp_path / "bar", epochs=1, progress=True).fit(rbm(), data)
    captured = capsys.readouterr()
    assert captured.out == "" and "epochs" in captured.err


@pytest.mark.parametrize("name, objective", [("cd", CD), ("pcd", PCD)])
def test_trainer_configs_instantiate_and_train(tmp_path, data, name, objective):
    cfg = OmegaConf.create({"seed": 7, "trainer": OmegaConf.load(CONF / f"{name}.yaml")})
    trainer = instantiate(cfg.trainer, run_dir=str(tmp_path), estimator=None)
    assert type(trainer.objective) is objective and trainer.objective.k == 1
    assert trainer.settings.seed == 7 and trainer.estimator is None and trainer.settings.evaluate_every == 0
    optimizer = trainer.make_optimizer(rbm().parameters())
    assert isinstance(optimizer, torch.optim.SGD)
    assert optimizer.defaults["lr"] == 0.05 and optimizer.defaults["momentum"] == 0.5
    trainer = instantiate(cfg.trainer, run_dir=str(tmp_path), estimator=AIS(num_chains=4, num_steps=5), epochs=1, evaluate_every=1, progress=False)
    assert trainer.fit(rbm(), data)["log_z"] is not None


def test_learning_rate_decays_per_epoch_from_the_initial_rate(tmp_path, data):
    seen = []

    class Spy(CD):
        def loss(self, model, batch, *, generator=None):
            seen.append(optimizer_holder[0].param_groups[0]["lr"])
            return super().loss(model, batch, generator=generator)

    optimizer_holder = []

    def make(params):
        optimizer_holder[:] = [torch.optim.SGD(params, lr=0.2)]
        return optimizer_holder[0]

    Trainer(Spy(), make, run_dir=tmp_path, epochs=3, batch_size=10**6, learning_rate_decay=0.5, progress=False).fit(rbm(), data)
    assert seen == pytest.approx([0.2, 0.2 / 1.5, 0.2 / 2.0])
    with pytest.raises(ValueError, match="learning_rate_decay"):
        Trainer(CD(), run_dir=tmp_path, learning_rate_decay=-1.0)


def test_resume_after_a_kill_mid_write_cleans_the_temporary_and_drops_the_torn_line(tmp_path, data, caplog):
    """What a SIGKILL during a checkpoint write and a metrics append leaves: a ``.checkpoint.pt.*.tmp`` file and a
    half-written last line. Resuming removes the one, drops the other with a warning, and still continues exactly."""
    def trainer(run_dir, epochs):
        return Trainer(PCD(k=1, num_chains=20), run_dir=run_dir, epochs=epochs, batch_size=32, progress=False)

    one_go = rbm()
    trainer(tmp_path / "one_go", 3).fit(one_go, data)
    trainer(tmp_path / "killed", 2).fit(rbm(), data)
    stale = tmp_path / "killed" / ".checkpoint.pt.k1ll3d.tmp"
    stale.write_bytes(b"PK\x03\x04 half a zip")
    with (tmp_path / "killed" / "metrics.jsonl").open("a") as file:
        file.write('{"epoch": 3, "lo')
    resumed = rbm(seed=1)
    with caplog.at_level("WARNING", logger="pfzoo.training.metrics_log"):
        trainer(tmp_path / "killed", 3).fit(resumed, data, resume=True)
    assert not stale.exists()
    assert "metrics.jsonl line 3 is not a metrics record" in caplog.text
    assert torch.equal(resumed.weight, one_go.weight)
    assert without_timing(read_metrics(tmp_path / "killed")) == without_timing(read_metrics(tmp_path / "one_go"))


def test_metrics_rows_limits_the_per_epoch_diagnostics_to_random_rows(tmp_path, data):
    """``metrics_rows`` rows of each split drawn at random once (``random_rows``, seeded by the run's seed), not a prefix:
    a split sorted by class would be judged by its first classes."""
    model = rbm()
    Trainer(CD(), run_dir=tmp_path, epochs=1, batch_size=20, progress=False, metrics_rows=7, seed=3).fit(model, data)
    record = read_metrics(tmp_path)[-1]
    train_rows, test_rows = random_rows(data.train, 7, seed=3 + EVALUATION_SEED_OFFSET), random_rows(data.test, 7, seed=3 + EVALUATION_SEED_OFFSET)
    assert train_rows.shape[0] == 7 and not torch.equal(train_rows, data.train[:7])
    assert record["train_reconstruction_error"] == pytest.approx(reconstruction_error(model, train_rows))
    assert record["test_reconstruction_error"] == pytest.approx(reconstruction_error(model, test_rows))
    assert torch.equal(random_rows(data.test, None, seed=0), data.test)
    assert torch.equal(random_rows(data.test, data.test.shape[0], seed=0), data.test)
    with pytest.raises(ValueError, match="metrics_rows"):
        Trainer(CD(), run_dir=tmp_path, metrics_rows=0)


def test_weight_decay_on_a_model_without_weights_is_refused_in_one_line(tmp_path):
    from factories import random_gaussian

    from pfzoo.training import ScoreMatching

    data = DataSplits("reals", torch.randn(40, 3, generator=torch.Generator().manual_seed(0)), torch.zeros(4, 3))
    with pytest.raises(ValueError, match="weight_decay must be 0 for Gaussian: it decays weight matrices"):
        Trainer(ScoreMatching(), run_dir=tmp_path, epochs=1, progress=False, weight_decay=0.1).fit(random_gaussian(3, dtype=torch.float32), data)
    assert not (tmp_path / "metrics.jsonl").exists()


def test_weight_decay_acts_on_every_weight_matrix_and_on_nothing_else():
    from factories import random_dbm, random_dbn, random_hopfield, random_ising, random_mcrbm

    from pfzoo.training.trainer import decayed_weights

    def names(model):
        chosen = {id(p) for p in decayed_weights(model)}
        return [name for name, p in model.named_parameters() if id(p) in chosen]

    assert names(rbm()) == ["weight"]
    assert names(random_dbm([4, 3, 2])) == ["weights.0", "weights.1"]
    assert names(random_dbn([4, 3, 2])) == ["rbms.0.weight", "rbms.1.weight"]
    assert names(random_mcrbm()) == ["mean_weight"]
    assert names(random_ising(4)) == ["coupling"]
    assert names(random_hopfield(4)) == ["coupling"]


# ---- one settings object, one call per phase, checks once -----------------------------------------


def test_the_trainer_holds_one_validated_settings_object_and_no_mirrors(tmp_path):
    settings = TrainerSettings(epochs=4, batch_size=20, seed=5)
    assert Trainer(CD(), run_dir=tmp_path, settings=settings).settings == settings
    keyworded = Trainer(CD(), run_dir=tmp_path, settings=settings, seed=6, csv=False)
    assert keyworded.settings == dataclasses.replace(settings, seed=6, csv=False)
    assert Trainer(CD(), run_dir=tmp_path, epochs=4).settings == TrainerSettings(epochs=4)
    assert not any(hasattr(keyworded, field.name) for field in dataclasses.fields(TrainerSettings))


class CountingCD(CD):
    """CD whose epoch metric counts the calls of ``epoch_metrics``."""

    def __init__(self):
        super().__init__()
        self.epoch_metric_calls = 0

    def epoch_metrics(self):
        self.epoch_metric_calls += 1
        return {"epoch_metric_calls": float(self.epoch_metric_calls)}


def test_the_objective_epoch_metrics_run_once_per_epoch(tmp_path, data):
    """They ran twice per epoch (the record kept the second call's values under the first call's keys)."""
    objective = CountingCD()
    Trainer(objective, run_dir=tmp_path, epochs=3, batch_size=50, progress=False).fit(rbm(), data)
    assert objective.epoch_metric_calls == 3
    assert [record["epoch_metric_calls"] for record in read_metrics(tmp_path)] == [1.0, 2.0, 3.0]


# objectives whose loss checks the model's capabilities (all but NCE and SelfContrastive did so on every minibatch)
PER_MINIBATCH_CHECKERS = [
    CD, PCD, FPCD, PseudoLikelihood, RatioMatching, GeneralizedScoreMatching, GeneralizedPseudoLikelihood, NCE,
    partial(NaiveMCMC, burn_in=2, num_chains=10), partial(SelfContrastive, num_chains=10),
]


@pytest.mark.parametrize("make", PER_MINIBATCH_CHECKERS, ids=lambda make: getattr(make, "func", make).__name__)
def test_the_capabilities_are_checked_once_per_fit_not_per_minibatch(tmp_path, data, make):
    objective = make()
    checks = []
    missing = objective.missing
    objective.missing = lambda model: checks.append(type(model).__name__) or missing(model)
    # 8 minibatches; the guard off, as generalized score matching runs off on these data (its loss is unbounded below)
    Trainer(objective, run_dir=tmp_path, epochs=2, batch_size=50, progress=False, divergence="off").fit(rbm(), data)
    assert checks == ["RBM"]


@pytest.mark.parametrize("make", [CD, PCD, FPCD, PseudoLikelihood, RatioMatching, GeneralizedScoreMatching], ids=lambda make: make.__name__)
def test_a_direct_loss_call_still_refuses_a_model_the_objective_does_not_apply_to(make):
    with pytest.raises(MissingCapability, match=rf"^{make.__name__} needs .*; ICA is"):
        make().loss(ICA(4), torch.zeros(2, 4))


def test_each_epoch_phase_makes_one_call_into_the_distributed_strategy(tmp_path, data, monkeypatch):
    """fit walked trainer → strategy → distributed several times per epoch (two timings, a loss weighting and a gradient
    sum per step); now: training (one agreement on the objective's change, per minibatch its shard and its loss),
    evaluation (one reduction of both times), recording (one gather of the ranks' states at a checkpoint)."""
    calls = Counter()
    for name, method in vars(DistributedStrategy).items():
        if callable(method) and not name.startswith("_"):
            def counted(self, *args, method=method, name=name, **kwargs):
                calls[name] += 1
                return method(self, *args, **kwargs)
            monkeypatch.setattr(DistributedStrategy, name, counted)
    Trainer(CD(), run_dir=tmp_path, epochs=2, batch_size=50, checkpoint_every=2, progress=False).fit(rbm(), data)  # 4 minibatches an epoch
    once_per_fit = {"sampling_generator": 1, "broadcast_model": 1, "from_leader": 1}
    per_epoch = {"agree_on_change": 1, "shard": 4, "minibatch_loss": 4, "slowest": 1}
    assert calls == Counter({**once_per_fit, **{name: 2 * count for name, count in per_epoch.items()}, "gather": 1})
