"""result.json (issue 50): every train and evaluate run folder ends with the headline, estimator, settings, seed, timings
and machine; the same numbers in the run's log and metrics files; a run the divergence guard stopped records what happened
(issue 51); curves.png is titled and labelled."""

import csv
import importlib.util
import json
import logging
import math

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from pfzoo import cli, pictures, zoo
from pfzoo.app.result_file import RESULT_FILE, RESULT_FORMAT, evaluation_headline, headline_text
from pfzoo.training.metrics_log import MetricsLog, read_records

TINY = ["trainer.epochs=2", "trainer.progress=false", "model.num_hidden=3", "pictures=false"]


def result_of(run_dir):
    return json.loads((run_dir / RESULT_FILE).read_text())


def headline_logged(caplog, headline):
    """The log line that carries ``headline`` (its mean to 4 decimals), from the app's logger."""
    return [r.getMessage() for r in caplog.records if r.name.startswith("pfzoo.app") and f"{headline['mean']:.4f}" in r.getMessage()]


def test_a_training_run_ends_with_its_result_in_result_json_the_log_and_the_metrics(tmp_path, capsys, caplog):
    cfg = cli.compose("train", [f"run_dir={tmp_path}", *TINY, "seed=3"])
    with caplog.at_level(logging.INFO, logger="pfzoo"):
        assert cli.execute("train", cfg) == 0
    printed = capsys.readouterr().out
    result = result_of(tmp_path)
    assert result["format"] == RESULT_FORMAT and result["task"] == "train" and result["status"] == "completed"
    headline = result["headline"]
    assert headline["kind"] == "exact" and headline["estimator"] == "exact" and headline["examples"] == "all 360"
    assert f"test log-likelihood  = {headline['mean']:.4f}" in printed  # the report and the file agree
    assert result["estimator"] == {"name": "exact", "config": None}
    assert result["seed"] == 3 and result["settings"] == OmegaConf.to_container(cfg, resolve=True)
    records = read_records(tmp_path / "metrics.jsonl")
    assert math.isclose(result["timings"]["training"], sum(r["seconds"] for r in records))
    assert result["timings"]["total"] >= result["timings"]["training"] + result["timings"]["closing_estimate"]
    assert result["machine"]["description"].endswith(f"Python {__import__('platform').python_version()}")
    assert result["machine"]["device"] == "cpu" and result["divergence"] is None
    assert result["files"]["checkpoint"] == str(tmp_path / "checkpoint.pt")
    # the same numbers in the log (train.log under the command line), metrics.jsonl and metrics.csv
    assert headline_logged(caplog, headline) == [f"test log-likelihood = {headline['mean']:.4f} (exact, on all 360 test examples, "
                                                 f"± {headline['data_stderr']:.4f} test-set sampling)"]
    model = zoo.load(tmp_path / "checkpoint.pt")
    per_example = model.log_prob(instantiate(cfg.dataset).test.to(model.dtype)).double()
    assert headline["data_stderr"] == pytest.approx(per_example.std().item() / math.sqrt(360), rel=1e-9)
    last = records[-1]
    assert last["epoch"] == 2 and last["closing_test_log_likelihood"] == headline["mean"] and last["closing_kind"] == "exact"
    assert result["last_epoch"] == last
    with (tmp_path / "metrics.csv").open() as table:
        rows = list(csv.DictReader(table))
    assert float(rows[-1]["closing_test_log_likelihood"]) == headline["mean"] and rows[0]["closing_test_log_likelihood"] == ""


def test_an_estimated_headline_states_estimator_stderr_kind_and_subset(tmp_path, capsys):
    overrides = [f"run_dir={tmp_path}", "trainer.epochs=1", "trainer.progress=false", "model.num_hidden=30", "pictures=false",
                 "final_num_test=20", "estimator.num_steps=20", "estimator.num_chains=8"]
    assert cli.execute("train", cli.compose("train", overrides)) == 0
    result = result_of(tmp_path)
    headline = result["headline"]
    assert headline["estimator"] == "AIS" and headline["kind"].startswith("unbiased Z") and headline["stderr"] > 0
    assert headline["num_test"] == 20 and headline["of"] == 360 and headline["examples"] == "20 of 360 (drawn at random, seed 0)"
    assert result["estimator"]["name"] == "AIS" and result["estimator"]["config"]["num_steps"] == 20
    assert headline["data_stderr"] > headline["stderr"]  # 20 examples: which ones were drawn moves the mean more than the chains do
    assert f"± {headline['stderr']:.4f}" in (printed := capsys.readouterr().out) and f"± {headline['data_stderr']:.4f} test-set sampling" in printed


def test_a_diverged_run_records_what_happened_and_what_was_restored(tmp_path, capsys):
    cfg = cli.compose("train", ["model.num_hidden=4", "trainer=cd", "trainer.optimizer.lr=1e8", "trainer.epochs=2",
                                f"run_dir={tmp_path}", "pictures=false", "trainer.progress=false"])
    assert cli.execute("train", cfg) == cli.EXIT_DIVERGED
    error = capsys.readouterr().err.strip().removeprefix("error: ")
    result = result_of(tmp_path)
    divergence = result["divergence"]
    assert result["status"] == "diverged" and divergence["message"] == error
    assert divergence["epoch"] == 1 and divergence["update"] >= 1 and divergence["signal"] in error
    assert divergence["restored"].startswith(f"the parameters after update {divergence['restored_update']} (held-out ")
    assert str(tmp_path / "checkpoint.pt") in divergence["restored"]
    # the headline measures the restored model: the start's exact log-likelihood, not the blow-up's -10^7
    assert result["headline"]["kind"] == "exact" and -40 < result["headline"]["mean"] < -15
    last = read_records(tmp_path / "metrics.jsonl")[-1]
    assert last["diverged"] == error and last["closing_test_log_likelihood"] == result["headline"]["mean"]


def test_an_evaluation_run_ends_with_its_result_in_result_json_and_the_log(tmp_path, capsys, caplog):
    assert cli.execute("train", cli.compose("train", [f"run_dir={tmp_path / 'trained'}", *TINY])) == 0
    overrides = [f"run_dir={tmp_path / 'eval'}", f"checkpoint={tmp_path / 'trained' / 'checkpoint.pt'}", "estimator.num_steps=20",
                 "num_test=50", "seed=4", "progress=false"]
    with caplog.at_level(logging.INFO, logger="pfzoo"):
        assert cli.execute("evaluate", cli.compose("evaluate", overrides)) == 0
    evaluation = json.loads((tmp_path / "eval" / "evaluation.json").read_text())
    result = result_of(tmp_path / "eval")
    assert result["task"] == "evaluate" and result["status"] == "completed" and result["seed"] == 4
    headline = result["headline"]
    assert (headline["mean"], headline["stderr"], headline["kind"]) == (
        evaluation["test_log_likelihood"], evaluation["test_log_likelihood_stderr"], evaluation["kind"])
    assert headline["estimator"] == "AIS" and headline["examples"] == "50 of 360 (drawn at random, seed 4)"
    assert result["estimator"] == {"name": "AIS", "config": evaluation["estimator"]}
    assert result["timings"]["estimate"] == evaluation["seconds"] and result["machine"]["torch"]
    assert len(headline_logged(caplog, headline)) == 1


def test_curves_are_titled_labelled_and_show_the_closing_estimate(tmp_path, monkeypatch):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"epoch": e, "loss": 1.0 / e, "test_pseudo_log_likelihood": -20.0 - 1.0 / e}) + "\n" for e in (1, 2)))
    log = MetricsLog(tmp_path)
    log.amend_last({"closing_test_log_likelihood": -21.5, "closing_test_log_likelihood_stderr": 0.1, "closing_kind": "unbiased Z: x",
                    "closing_estimator": "AIS"})
    figures = []
    monkeypatch.setattr(pictures, "_save", lambda figure, path: figures.append(figure) or path)
    pictures.save_training_curves(metrics, tmp_path / "curves.png", title="rbm (num_hidden=3) on digits: trained by PCD",
                                  loss_label="PCD loss per example")
    (figure,) = figures
    loss, likelihood = figure.axes
    assert figure._suptitle.get_text() == "rbm (num_hidden=3) on digits: trained by PCD"
    assert (loss.get_xlabel(), loss.get_ylabel()) == ("epoch", "PCD loss per example") and loss.get_title()
    assert likelihood.get_ylabel() == "nats per example" and likelihood.get_title()
    labels = likelihood.get_legend_handles_labels()[1]
    assert labels == ["test pseudo log likelihood", "closing test log-likelihood (AIS, unbiased Z)"]


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None, reason="the tensorboard package is not installed")
def test_the_closing_numbers_reach_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = MetricsLog(tmp_path, tensorboard=True)
    log.append({"epoch": 1, "loss": 0.5})
    log.amend_last({"closing_test_log_likelihood": -21.5, "closing_kind": "exact"})
    log.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("closing_test_log_likelihood")] == [(1, -21.5)]
    assert [e.step for e in events.Scalars("loss")] == [1]


def test_a_comparison_headline_is_the_difference_of_the_two_models():
    result = {"num_test": 360, "test_rows": {"description": "all 360"},
              "comparison": {"difference": 1.25, "stderr": 0.5, "better": "A"}}
    headline = evaluation_headline(result)
    assert (headline["mean"], headline["stderr"], headline["estimator"]) == (1.25, 0.5, "bridge sampling")
    assert headline_text(headline) == ("log p_A − log p_B = 1.2500 ± 0.5000 (bridge sampling on all 360 test examples; "
                                       "difference of two models' estimates)")
    assert headline_text(None).startswith("test log-likelihood: not measured")


def test_a_sampling_run_ends_with_what_was_drawn_from_which_model_in_result_json(tmp_path, capsys, caplog):
    """``pfzoo sample``'s run folder: result.json names the model file (sha256 = the zoo card's), what was drawn and how
    (the RBM by its Gibbs chain, ICA by exact draws), the seed, the settings, the timings and the machine."""
    from pfzoo import zoo

    cfg = cli.compose("sample", [f"run_dir={tmp_path / 'rbm'}", "pretrained=rbm-digits", "num_samples=6", "seed=2"])
    with caplog.at_level(logging.INFO, logger="pfzoo"):
        assert cli.execute("sample", cfg) == 0
    assert f"result written to {tmp_path / 'rbm' / RESULT_FILE}" in capsys.readouterr().out
    result = result_of(tmp_path / "rbm")
    assert result["format"] == RESULT_FORMAT and result["task"] == "sample" and result["status"] == "completed"
    assert result["headline"] is None and result["estimator"] is None and result["seed"] == 2
    assert result["settings"] == OmegaConf.to_container(cfg, resolve=True) and result["machine"]["device"] == "cpu"
    drew = result["samples"]
    card = zoo.pretrained_card("rbm-digits")
    assert drew["checkpoint_sha256"] == card["checkpoint"]["sha256"] and drew["pretrained"] == "rbm-digits"
    assert drew["model"] == "rbm" and drew["model_config"] == zoo.pretrained("rbm-digits").config()
    assert (drew["num_samples"], drew["shape"], drew["exact"], drew["sampler_steps"]) == (6, [6, 64], False, 1000)
    samples = __import__("torch").load(result["files"]["samples"])
    assert list(samples.shape) == drew["shape"] and result["files"]["pictures"] == [str(tmp_path / "rbm" / "samples.png")]
    timings = result["timings"]
    assert timings["total"] >= timings["load"] + timings["sampling"] + timings["writing"] - 1e-6 and timings["sampling"] > 0
    assert any("6 samples of rbm from rbm-digits" in r.getMessage() for r in caplog.records if r.name.startswith("pfzoo.app"))
    assert cli.execute("sample", cli.compose("sample", [f"run_dir={tmp_path / 'ica'}", "pretrained=ica-patches", "num_samples=3"])) == 0
    drew = result_of(tmp_path / "ica")["samples"]
    assert (drew["exact"], drew["sampler_steps"], drew["shape"]) == (True, None, [3, 36])
    assert result_of(tmp_path / "ica")["files"]["pictures"] == []
