"""The application end to end on the embedded digits data: train, resume, evaluate, and the scripts' CLI."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from pfzoo import app, cli, zoo
from pfzoo.models import RBM, Hopfield, Ising
from pfzoo.models.rbm import base_rate_visible_bias

REPO = Path(__file__).resolve().parents[1]


def composed(config_name, overrides):
    """As the scripts compose it (the chosen conf/model option recorded), so a bare evaluate finds its zoo model."""
    return cli.compose(config_name, overrides)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("train")
    cfg = composed("train", [f"run_dir={run_dir}", "trainer.epochs=3", "trainer.progress=false", "model.num_hidden=12"])
    return run_dir, app.train(cfg)


def test_train_writes_checkpoint_with_config_and_metrics(trained_run):
    run_dir, result = trained_run
    assert Path(result["checkpoint"]) == run_dir / "checkpoint.pt"
    model = zoo.load(result["checkpoint"])
    assert isinstance(model, RBM) and (model.num_visible, model.num_hidden) == (64, 12)
    checkpoint = zoo.load_checkpoint(result["checkpoint"])
    assert checkpoint["config"]["model"]["num_hidden"] == 12
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2, 3]


def test_resume_continues_to_more_epochs(trained_run, tmp_path):
    run_dir, _ = trained_run
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("checkpoint.pt", "metrics.jsonl"):
        (copy / name).write_bytes((run_dir / name).read_bytes())
    cfg = composed("train", [f"run_dir={copy}", "trainer.epochs=5", "trainer.progress=false", "model.num_hidden=12", "resume=true"])
    app.train(cfg)
    epochs = [json.loads(line)["epoch"] for line in (copy / "metrics.jsonl").read_text().splitlines()]
    assert epochs == [1, 2, 3, 4, 5]


def test_a_run_that_averages_its_parameters_closes_on_the_averaged_model(trained_run, tmp_path):
    """Averaging may start when a run resumes; the closing figure and result.json are the averaged model's, the
    checkpoint keeps the parameters training uses."""
    run_dir, _ = trained_run
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("checkpoint.pt", "metrics.jsonl"):
        (copy / name).write_bytes((run_dir / name).read_bytes())
    result = app.train(composed("train", [f"run_dir={copy}", "trainer.epochs=5", "trainer.progress=false", "model.num_hidden=12",
                                          "resume=true", "+trainer.average_parameters.from_epoch=4"]))
    averaged, trained = zoo.load(copy / "averaged.pt"), zoo.load(result["checkpoint"])
    assert not torch.equal(averaged.weight, trained.weight)
    data = zoo.load_checkpoint(copy / "averaged.pt")["config"]["dataset"]
    assert data == zoo.load_checkpoint(result["checkpoint"])["config"]["dataset"]
    test = instantiate(composed("train", []).dataset).test.to(averaged.dtype)
    assert result["test_log_likelihood"]["mean"] == pytest.approx(averaged.log_prob(test).mean().item(), abs=1e-9)
    assert json.loads((copy / "result.json").read_text())["files"]["averaged_model"] == str(copy / "averaged.pt")


def test_evaluate_reports_estimate_beside_exact_values(trained_run, tmp_path):
    _, result = trained_run
    cfg = composed(
        "evaluate",
        [f"checkpoint={result['checkpoint']}", f"run_dir={tmp_path}", "progress=false",
         "estimator.num_chains=200", "estimator.num_steps=2000"],
    )
    report = app.evaluate(cfg)
    assert report["num_test"] == 360 and report["dataset"] == "digits"
    assert abs(report["log_z"] - report["exact_log_z"]) <= 3 * report["log_z_stderr"]
    assert abs(report["test_log_likelihood"] - report["exact_test_log_likelihood"]) <= 3 * report["test_log_likelihood_stderr"]
    text = app.format_evaluation(report)
    assert "exact" in text and "± " in text


def test_evaluate_versus_a_second_model_reports_the_better_one(trained_run, tmp_path):
    """``versus=`` compares the checkpoint (A) with a second model (B) through log Z_A − log Z_B alone; on the digits
    RBMs both Z's are exact, so the reported difference is checked against the enumerated one."""
    _, result = trained_run
    cfg = composed("evaluate", [f"checkpoint={result['checkpoint']}", "versus=rbm-digits", f"run_dir={tmp_path}", "progress=false",
                                "versus_samples=3000"])
    report = app.evaluate(cfg)
    a, b = zoo.load(result["checkpoint"]), zoo.pretrained("rbm-digits")
    test = instantiate(cfg.dataset).test.to(a.dtype)
    with torch.no_grad():
        exact = (a.log_prob(test) - b.log_prob(test)).mean().item()
    comparison = report["comparison"]
    assert abs(comparison["difference"] - exact) <= 3 * comparison["stderr"] + 1e-6
    assert comparison["better"] == ("A" if exact > 0 else "B")
    text = app.format_evaluation(report)
    assert "fits the test set better than" in text and "log Z_A − log Z_B" in text
    with pytest.raises(ValueError, match="versus must be a checkpoint file or a pretrained model name"):
        app.evaluate(composed("evaluate", [f"checkpoint={result['checkpoint']}", "versus=no-such-model", f"run_dir={tmp_path}"]))


def test_evaluate_states_the_markov_bound_of_a_stochastic_lower_bound(trained_run, tmp_path):
    _, result = trained_run
    cfg = composed("evaluate", [f"checkpoint={result['checkpoint']}", f"run_dir={tmp_path}", "progress=false", "estimator=raise",
                                "estimator.num_steps=200", "estimator.num_examples=20", "confidence=0.99"])
    report = app.evaluate(cfg)
    bound = report["markov_bound"]
    # RAISE's examples have their own chains: the slack log(100) is shared by the 20 examples, 0.23 nats each (the
    # reported mean uses control variates, so it sits near, not at, the raw mean the bound starts from)
    # the bound is about the 20 examples the chains ran on, not the headline's 360, and says so (issue 50, item 4)
    assert bound["relation"] == "≥" and "with probability ≥ 0.99 (Markov's inequality), about the 20 examples the chains ran on" in bound["statement"]
    assert "not the headline's 360: no bound on the headline" in bound["statement"]
    assert report["test_log_likelihood"] - 1.0 < bound["value"] < report["test_log_likelihood"]
    assert "guaranteed: mean log-likelihood ≥" in app.format_evaluation(report)
    whole = app.evaluate(composed("evaluate", [f"checkpoint={result['checkpoint']}", f"run_dir={tmp_path}", "progress=false",
                                               "estimator=raise", "estimator.num_steps=50", "num_test=30"]))
    assert whole["markov_bound"]["statement"].endswith("over the same 30 examples as the headline")
    assert whole["markov_bound"]["value"] < whole["test_log_likelihood"]  # no control variates: the bound sits below its own mean
    with pytest.raises(ValueError, match="confidence must be a probability strictly between 0 and 1"):
        app.evaluate(composed("evaluate", [f"checkpoint={result['checkpoint']}", f"run_dir={tmp_path}", "confidence=1.5"]))


def test_evaluate_brackets_the_exact_likelihood_with_ais_and_raise(trained_run, tmp_path):
    _, result = trained_run
    cfg = composed(
        "evaluate",
        [f"checkpoint={result['checkpoint']}", f"run_dir={tmp_path}", "progress=false", "estimator=bracket", "num_test=60",
         "estimator.upper.num_steps=2000", "estimator.lower.num_steps=2000"],
    )
    report = app.evaluate(cfg)
    upper, lower, exact = report["upper"]["test_log_likelihood"], report["test_log_likelihood"], report["exact_test_log_likelihood"]
    assert report["kind"] == "stochastic lower bound on the log-likelihood"
    assert abs(upper - exact) <= 3 * report["upper"]["test_log_likelihood_stderr"] + 0.02
    assert abs(lower - exact) <= 3 * report["test_log_likelihood_stderr"] + 0.02
    assert report["gap"] == pytest.approx(upper - lower) and report["warnings"] == []
    text = app.format_evaluation(report)
    assert "upper estimate" in text and "lower estimate" in text and "WARNING" not in text


def test_bracket_warns_when_the_estimates_disagree(trained_run, tmp_path):
    _, result = trained_run
    cfg = composed(
        "evaluate",
        [f"checkpoint={result['checkpoint']}", f"run_dir={tmp_path}", "progress=false", "estimator=bracket", "num_test=20",
         "estimator.upper.num_steps=2000", "estimator.lower.num_steps=2000", "estimator.gap_threshold=1e-9"],
    )
    report = app.evaluate(cfg)
    assert any("exceeds" in warning for warning in report["warnings"]) and "WARNING" in app.format_evaluation(report)


def test_evaluate_without_checkpoint_uses_the_pretrained_zoo_model(tmp_path):
    cfg = composed("evaluate", [f"run_dir={tmp_path}", "progress=false", "estimator.num_steps=100", "num_test=50"])
    report = app.evaluate(cfg)
    assert Path(report["checkpoint"]) == REPO / "models" / "rbm-digits" / "checkpoint.pt"
    assert report["num_test"] == 50


def test_evaluating_a_zoo_model_reports_its_cards_figure_beside_the_estimate(tmp_path):
    """A pretrained model's report names its card's headline (value and how it was measured) to read the run against;
    a checkpoint file has no card, so none is reported."""
    card = zoo.pretrained_card("rbm-digits")["log_likelihood"]
    report = app.evaluate(composed("evaluate", ["pretrained=rbm-digits", f"run_dir={tmp_path / 'a'}", "progress=false",
                                                "estimator.num_steps=100", "num_test=50"]))
    assert report["card_log_likelihood"]["value"] == card["value"] and report["card_log_likelihood"]["num_test"] == card["num_test"]
    assert f"the model card's figure: {card['value']:.4f} (exact on {card['num_test']} test examples)" in app.format_evaluation(report)
    checkpoint = REPO / "models" / "rbm-digits" / "checkpoint.pt"
    plain = app.evaluate(composed("evaluate", [f"checkpoint={checkpoint}", "dataset=digits", f"run_dir={tmp_path / 'b'}", "progress=false",
                                               "estimator.num_steps=100", "num_test=50"]))
    assert "card_log_likelihood" not in plain and "model card" not in app.format_evaluation(plain)


def test_evaluate_measures_the_validation_split_when_asked(tmp_path):
    """``split=valid`` measures the data set's validation rows (exactly here: the digits RBM is enumerable), names the
    split in the report and the headline, and is refused in one line for a data set without one."""
    from pfzoo.data import digits

    data = digits()
    path = tmp_path / "splits.npz"
    numpy.savez(path, train=data.train.numpy(), test=data.test[:100].numpy(), valid=data.test[100:].numpy())
    checkpoint = REPO / "models" / "rbm-digits" / "checkpoint.pt"
    cfg = composed("evaluate", [f"checkpoint={checkpoint}", "dataset=array", f"dataset.path={path}", "split=valid",
                                f"run_dir={tmp_path / 'run'}", "progress=false", "estimator=exact"])
    report = app.evaluate(cfg)
    model = zoo.pretrained("rbm-digits")
    with torch.no_grad():
        exact = model.log_prob(data.test[100:].to(model.dtype)).mean().item()
    assert report["split"] == "valid" and report["num_test"] == 260
    assert report["test_log_likelihood"] == pytest.approx(exact, abs=1e-6)
    assert "valid log-likelihood" in app.format_evaluation(report) and "valid examples" in app.format_evaluation(report)
    with pytest.raises(ValueError, match="split=valid but data set 'digits' has no validation split"):
        app.evaluate(composed("evaluate", ["pretrained=rbm-digits", "split=valid", f"run_dir={tmp_path / 'b'}", "progress=false"]))
    with pytest.raises(ValueError, match="split must be one of test, valid"):
        app.evaluate(composed("evaluate", ["pretrained=rbm-digits", "split=train", f"run_dir={tmp_path / 'c'}"]))


def test_evaluate_errors_are_clear(tmp_path):
    cfg = composed("evaluate", [f"run_dir={tmp_path}", f"zoo_dir={tmp_path}"])
    with pytest.raises(FileNotFoundError, match="pass checkpoint=PATH"):
        app.evaluate(cfg)
    with pytest.raises(FileNotFoundError, match="nowhere.pt"):
        app.evaluate(composed("evaluate", [f"run_dir={tmp_path}", f"checkpoint={tmp_path / 'nowhere.pt'}"]))


def test_a_config_composed_without_the_cli_names_no_model_config(tmp_path):
    """Hydra's compose alone does not record the conf/model choice: a bare evaluate then asks for a checkpoint or a name."""
    with initialize_config_dir(config_dir=str(app.config_dir()), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=[f"run_dir={tmp_path}"])
    assert cfg.model_config_name is None
    with pytest.raises(ValueError, match="records no model_config_name.*pass checkpoint=PATH or pretrained=NAME"):
        app.evaluate(cfg)


def test_cuda_request_without_cuda_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="CUDA is not available"):
        app.resolve_device("cuda")
    with pytest.raises(ValueError, match="device must be"):
        app.resolve_device("gpu-please")


def run_script(script, *overrides):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(REPO / "scripts" / script), *overrides], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)


@pytest.mark.slow
def test_scripts_train_then_evaluate(tmp_path):
    trained = run_script("train.py", f"run_dir={tmp_path / 'run'}", "trainer.epochs=1", "trainer.progress=false")
    assert trained.returncode == 0, trained.stderr
    assert f"checkpoint written to {tmp_path / 'run' / 'checkpoint.pt'}" in trained.stdout
    evaluated = run_script(
        "evaluate.py", f"checkpoint={tmp_path / 'run' / 'checkpoint.pt'}", f"run_dir={tmp_path / 'eval'}",
        "progress=false", "estimator.num_steps=200",
    )
    assert evaluated.returncode == 0, evaluated.stderr
    assert "log Z" in evaluated.stdout and "exact" in evaluated.stdout
    assert json.loads((tmp_path / "eval" / "evaluation.json").read_text())["num_test"] == 360


@pytest.mark.slow
def test_script_reports_bad_config_value_and_exits_nonzero(tmp_path):
    bad = run_script("train.py", f"run_dir={tmp_path}", "trainer.epochs=0")
    assert bad.returncode != 0
    assert "epochs must be a positive integer" in bad.stderr + bad.stdout


@pytest.mark.slow
def test_continuous_model_trains_by_maximum_likelihood_and_evaluates_with_hais(tmp_path):
    run_dir = tmp_path / "ica"
    cfg = composed(
        "train",
        [f"run_dir={run_dir}", "model=ica", "dataset=patches", "dataset.num_train=5000", "dataset.num_test=1000",
         "trainer=ml", "trainer.epochs=2", "trainer.progress=false"],
    )
    result = app.train(cfg)
    cfg = composed(
        "evaluate",
        [f"checkpoint={result['checkpoint']}", f"run_dir={tmp_path / 'eval'}", "model=ica", "dataset=patches",
         "dataset.num_train=5000", "dataset.num_test=1000", "estimator=hais", "estimator.num_steps=3000", "progress=false"],
    )
    report = app.evaluate(cfg)
    assert report["model"] == "ica" and report["num_test"] == 1000
    assert abs(report["log_z"] - report["exact_log_z"]) <= 3 * report["log_z_stderr"]
    assert report["exact_test_log_likelihood"] > -36 * 1.5  # better than a unit Gaussian on whitened data (≈ −51)


@pytest.mark.slow
@pytest.mark.parametrize("family, trainer", [("dbm", "dbm_pcd"), ("dbn", "cd")])
def test_deep_models_train_and_evaluate_against_exact_values(tmp_path, family, trainer):
    overrides = [f"run_dir={tmp_path}", f"model={family}", "model.hidden_sizes=[10,6]", f"trainer={trainer}",
                 "trainer.epochs=2", "trainer.progress=false"]
    if family == "dbm":
        overrides.append("trainer.objective.pretrain.epochs_per_layer=2")
    result = app.train(composed("train", overrides))
    model = zoo.load(result["checkpoint"])
    assert model.registry_name == family and model.layer_sizes == [64, 10, 6]
    for estimator in ("ais", "raise"):
        cfg = composed("evaluate", [f"checkpoint={result['checkpoint']}", f"run_dir={tmp_path}", "progress=false",
                                    f"estimator={estimator}", "estimator.num_steps=2000", "num_test=100"])
        report = app.evaluate(cfg)
        exact = report["exact_test_log_likelihood"]
        assert abs(report["test_log_likelihood"] - exact) <= 3 * report["test_log_likelihood_stderr"] + 0.05, (estimator, report)


# ---- binary models trained by MPF, pseudo-likelihood and CD through the app -------------------------------

ISING_UNITS = 8
ISING_SAMPLES = 5000


@pytest.fixture(scope="module")
def ising_samples(tmp_path_factory):
    """A ``.npy`` of exact samples from a random 8-unit Ising model (all 256 states enumerated), and that model."""
    g = torch.Generator().manual_seed(1)
    upper = torch.triu(torch.randn(ISING_UNITS, ISING_UNITS, generator=g), 1)
    truth = Ising.from_tensors(upper + upper.T, 0.5 * torch.randn(ISING_UNITS, generator=g))
    states = ((torch.arange(2**ISING_UNITS).unsqueeze(1) >> torch.arange(ISING_UNITS)) & 1).float()
    with torch.no_grad():
        probabilities = torch.softmax(-truth.energy(states).double(), 0)
    rows = torch.multinomial(probabilities, ISING_SAMPLES, replacement=True, generator=g)
    path = tmp_path_factory.mktemp("ising") / "samples.npy"
    numpy.save(path, states[rows].numpy().astype(numpy.uint8))
    return path, truth


def coupling_errors(model, truth):
    """Mean squared off-diagonal coupling error of ``model`` and, for scale, of J = 0."""
    off_diagonal = ~torch.eye(truth.num_units, dtype=torch.bool)
    true_coupling = truth.symmetric_coupling.detach()
    error = (model.symmetric_coupling.detach() - true_coupling)[off_diagonal].pow(2).mean().item()
    return error, true_coupling[off_diagonal].pow(2).mean().item()


def ising_overrides(run_dir, path, trainer, *extra):
    return [f"run_dir={run_dir}", "model=ising", f"trainer={trainer}", "dataset=array", f"dataset.path={path}",
            "trainer.progress=false", *extra]


def test_ising_trained_by_mpf_recovers_couplings_and_evaluates_against_exact_values(ising_samples, tmp_path):
    path, truth = ising_samples
    result = app.train(composed("train", ising_overrides(tmp_path / "run", path, "mpf", "trainer.epochs=5")))
    model = zoo.load(result["checkpoint"])
    assert type(model) is Ising and model.num_units == ISING_UNITS
    error, zero_error = coupling_errors(model, truth)
    assert error < 0.25 * zero_error, (error, zero_error)
    cfg = composed("evaluate", [f"checkpoint={result['checkpoint']}", f"run_dir={tmp_path / 'eval'}", "progress=false",
                                "dataset=array", f"dataset.path={path}", "estimator=ais", "estimator.num_steps=1000"])
    report = app.evaluate(cfg)
    assert report["model"] == "ising" and report["num_test"] == ISING_SAMPLES // 5
    exact = report["exact_test_log_likelihood"]
    assert abs(report["test_log_likelihood"] - exact) <= 3 * report["test_log_likelihood_stderr"] + 0.05, report


@pytest.mark.parametrize("trainer, extra", [("pseudolikelihood", ["trainer.epochs=5"]), ("cd", ["trainer.epochs=20"])])
def test_ising_trains_by_pseudolikelihood_and_cd(ising_samples, tmp_path, trainer, extra):
    path, truth = ising_samples
    cfg = composed("train", ising_overrides(tmp_path, path, trainer, *extra))
    result = app.train(cfg)
    model = zoo.load(result["checkpoint"])
    assert type(model) is Ising
    error, zero_error = coupling_errors(model, truth)
    assert error < 0.5 * zero_error, (error, zero_error)
    # better than where training starts: the independent-units (base-rate) model
    data = instantiate(cfg.dataset)
    start = Ising.from_tensors(torch.zeros(ISING_UNITS, ISING_UNITS), base_rate_visible_bias(data.train))
    assert model.log_prob(data.test).mean() > start.log_prob(data.test).mean() + 0.1


def test_hopfield_trained_by_mpf_stores_every_pattern(tmp_path):
    cfg = composed("train", [f"run_dir={tmp_path}", "model=hopfield", "trainer=mpf", "dataset=hopfield_patterns",
                             "dataset.num_patterns=20", "dataset.num_units=32", "trainer.epochs=10", "trainer.progress=false"])
    result = app.train(cfg)  # the Trainer raises FloatingPointError on a non-finite loss
    losses = [json.loads(line)["loss"] for line in Path(result["metrics_file"]).read_text().splitlines()]
    assert all(map(math.isfinite, losses)) and losses[-1] < 1e-3 * losses[0], losses  # the flow K → 0
    model = zoo.load(result["checkpoint"])
    assert type(model) is Hopfield
    patterns = instantiate(cfg.dataset).train
    assert model.is_fixed_point(patterns).all()


def test_rbm_trains_by_minibatch_mpf(tmp_path):
    cfg = composed("train", [f"run_dir={tmp_path}", "model=rbm", "model.num_hidden=12", "trainer=mpf_sgd",
                             "trainer.progress=false"])
    assert cfg.trainer.batch_size == 100 and cfg.trainer.objective.binary.num_flips is not None
    result = app.train(cfg)
    losses = [json.loads(line)["loss"] for line in Path(result["metrics_file"]).read_text().splitlines()]
    assert len(losses) == cfg.trainer.epochs and losses[-1] < losses[0]
    model = zoo.load(result["checkpoint"])
    assert type(model) is RBM and model.num_hidden == 12
    data = instantiate(cfg.dataset)
    start = RBM.from_tensors(torch.zeros(64, 12), base_rate_visible_bias(data.train), torch.zeros(12))
    assert model.log_prob(data.test).mean() > start.log_prob(data.test).mean() + 0.5


def test_evaluate_reports_path_diagnostics_when_asked(tmp_path):
    cfg = composed("evaluate", [f"run_dir={tmp_path}", "progress=false", "estimator.num_steps=100", "estimator.diagnostics=true", "num_test=50"])
    report = app.evaluate(cfg)
    diagnostics = report["path_diagnostics"]
    assert len(diagnostics["increment_var"]) == len(diagnostics["ess"]) == len(diagnostics["betas"]) == 100
    assert diagnostics["cost_functional"] == pytest.approx(0.5 * sum(diagnostics["increment_var"]))
    assert json.loads(json.dumps(report))["path_diagnostics"]["betas"][-1] == 1.0  # JSON-ready, as evaluation.json needs
    assert "path cost" in app.format_evaluation(report)


def test_a_sweep_summary_sets_the_jobs_apart_by_their_own_overrides():
    from pfzoo.app import sweep

    rows = [{"job": 0, "overrides": ["run_dir=x", "model.num_hidden=2"], "test_log_likelihood": -24.123456789, "kind": "exact"},
            {"job": 1, "overrides": ["run_dir=x", "model.num_hidden=3"], "error": "model.num_hidden must be positive"}]
    columns, cells = sweep.summary_table(rows)
    assert columns == ["job", "overrides", "test_log_likelihood", "kind", "error"]
    assert cells == [["0", "model.num_hidden=2", "-24.1235", "exact", ""], ["1", "model.num_hidden=3", "", "", "model.num_hidden must be positive"]]
    text = sweep.format_summary(rows).splitlines()
    assert text[0] == "sweep summary (2 jobs):" and len(text) == 4 and text[2].startswith("0    model.num_hidden=2  -24.1235")
    assert sweep.short_kind("unbiased Z: stochastic lower bound on log Z") == "unbiased Z"


def test_the_closing_estimate_scores_a_seeded_random_subset_not_the_first_rows():
    """Test files may be sorted (binarized MNIST's by class): the first rows are not a sample of the test set."""
    from pfzoo.app.training import closing_subset

    chosen = closing_subset(10_000, 200, seed=0)
    assert torch.equal(chosen, closing_subset(10_000, 200, seed=0)) and not torch.equal(chosen, closing_subset(10_000, 200, seed=1))
    assert chosen.numel() == 200 and chosen.unique().numel() == 200 and torch.equal(chosen, chosen.sort().values)
    assert chosen.max() > 9_000 and chosen.min() < 1_000  # spread over the file, not a prefix
    assert torch.equal(closing_subset(50, 200, seed=0), torch.arange(50))
