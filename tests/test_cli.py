"""The command line as a user meets it: one run folder per job, resume under the same config only, a readable report."""

import csv
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from pfzoo import app, cli, zoo

REPO = Path(__file__).resolve().parents[1]
TINY = ["trainer.epochs=1", "trainer.progress=false", "model.num_hidden=3", "estimator.num_steps=20"]


def test_resume_with_a_changed_learning_rate_exits_2_naming_the_difference(tmp_path, capsys):
    assert cli.execute("train", cli.compose("train", [f"run_dir={tmp_path}", *TINY])) == 0
    capsys.readouterr()
    changed = cli.compose("train", [f"run_dir={tmp_path}", *TINY, "trainer.epochs=2", "resume=true", "trainer.optimizer.lr=0.1"])
    assert cli.execute("train", changed) == cli.EXIT_USAGE
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "trainer.optimizer.lr: 0.05 → 0.1" in error[0]
    more_epochs = cli.compose("train", [f"run_dir={tmp_path}", *TINY, "trainer.epochs=2", "resume=true"])
    assert cli.execute("train", more_epochs) == 0


def test_training_report_ends_with_the_test_log_likelihood(tmp_path, capsys):
    assert cli.execute("train", cli.compose("train", [f"run_dir={tmp_path}", *TINY])) == 0
    report = capsys.readouterr().out.strip().splitlines()
    assert report[-1].startswith("test log-likelihood  = ") and "exact" in report[-1] and " s in all" in report[-1]


@pytest.mark.slow
def test_a_sweep_leaves_one_complete_run_per_job(tmp_path):
    run_dir = tmp_path / "sweep"
    command = [sys.executable, str(REPO / "scripts" / "train.py"), "-m", f"run_dir={run_dir}", "model.num_hidden=2,3", *TINY[:2]]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    for job in ("0", "1"):
        assert (run_dir / job / "checkpoint.pt").is_file() and (run_dir / job / "metrics.jsonl").read_text().count("\n") == 1


@pytest.mark.slow
def test_a_sweep_without_run_dir_leaves_one_complete_run_per_job(tmp_path):
    """The default run_dir (runs/train/<time>) is the sweep's folder: the jobs land in its 0/ and 1/, however fast."""
    command = [sys.executable, str(REPO / "scripts" / "train.py"), "-m", "model.num_hidden=2,3", *TINY[:2], "pictures=false"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    (sweep,) = (tmp_path / "runs" / "train").iterdir()
    for job, hidden in (("0", 2), ("1", 3)):
        assert (sweep / job / "metrics.jsonl").read_text().count("\n") == 1
        assert (sweep / job / ".hydra" / "overrides.yaml").is_file()
        assert zoo.load(sweep / job / "checkpoint.pt").num_hidden == hidden


@pytest.mark.slow
@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGINT"])
def test_a_killed_training_run_resumes_to_the_parameters_of_an_uninterrupted_one(tmp_path, signal_name):
    """Kill ``train.py`` at whatever point it has reached once two epochs are logged (mid-epoch, mid-write: the moment
    is not chosen), resume it, and compare every parameter with a run that was never interrupted."""
    settings = ["trainer.epochs=12", "trainer.progress=false", "model.num_hidden=12", "pictures=false", "seed=3"]
    assert cli.execute("train", cli.compose("train", [f"run_dir={tmp_path / 'whole'}", *settings])) == 0

    killed = tmp_path / "killed"
    command = [sys.executable, str(REPO / "scripts" / "train.py"), f"run_dir={killed}", *settings]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        metrics = killed / "metrics.jsonl"
        if metrics.is_file() and metrics.read_text().count("\n") >= 2:
            break
        time.sleep(0.01)
    assert process.poll() is None, "the run ended before it could be killed; give it more epochs"
    process.send_signal(getattr(signal, signal_name))
    process.wait(timeout=60)
    resumed = subprocess.run([*command, "resume=true"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]

    whole, again = zoo.load_checkpoint(tmp_path / "whole" / "checkpoint.pt"), zoo.load_checkpoint(killed / "checkpoint.pt")
    for name, value in whole["state_dict"].items():
        assert torch.equal(value, again["state_dict"][name]), name
    lines = [line for line in (killed / "metrics.jsonl").read_text().splitlines() if line.strip()]
    assert len(lines) == 12 and not list(killed.glob(".checkpoint.pt.*.tmp"))


def test_evaluate_draws_no_progress_bar_when_stderr_is_not_a_terminal(tmp_path, capsys):
    cfg = cli.compose("evaluate", [f"run_dir={tmp_path}", "estimator.num_steps=50", "num_test=10"])
    assert cfg.progress and cli.execute("evaluate", cfg) == 0
    assert "step/s" not in capsys.readouterr().err


def test_resume_past_the_requested_epochs_is_refused_and_at_them_warned(tmp_path, capsys, caplog):
    """A run at epoch 2 resumed with trainer.epochs=1 would train nothing and exit 0: refused, naming both numbers;
    resumed with trainer.epochs=2 it trains nothing either, and says so."""
    assert cli.execute("train", cli.compose("train", [f"run_dir={tmp_path}", *TINY, "trainer.epochs=2", "pictures=false"])) == 0
    capsys.readouterr()
    before = (tmp_path / "checkpoint.pt").read_bytes()
    fewer = cli.compose("train", [f"run_dir={tmp_path}", *TINY, "trainer.epochs=1", "resume=true", "pictures=false"])
    assert cli.execute("train", fewer) == cli.EXIT_USAGE
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "is at epoch 2" in error[0] and "trainer.epochs > 2" in error[0], error
    assert (tmp_path / "checkpoint.pt").read_bytes() == before
    with caplog.at_level("WARNING"):
        same = cli.compose("train", [f"run_dir={tmp_path}", *TINY, "trainer.epochs=2", "resume=true", "pictures=false"])
        assert cli.execute("train", same) == 0
    assert any("already at epoch 2" in record.getMessage() for record in caplog.records), caplog.text


def test_resume_without_the_earlier_metrics_says_which_epochs_are_lost(tmp_path, capsys, caplog):
    settings = [f"run_dir={tmp_path}", *TINY, "pictures=false"]
    assert cli.execute("train", cli.compose("train", [*settings, "trainer.epochs=3"])) == 0
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    (tmp_path / "metrics.jsonl").write_text(lines[0] + "\n")  # epochs 2 and 3 deleted by hand
    with caplog.at_level("WARNING"):
        assert cli.execute("train", cli.compose("train", [*settings, "trainer.epochs=4", "resume=true"])) == 0
    warnings = [record.getMessage() for record in caplog.records if "metrics.jsonl" in record.getMessage()]
    assert len(warnings) == 1 and "2 of the checkpoint's 3 epochs (epochs 2-3)" in warnings[0], warnings
    assert [json.loads(line)["epoch"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1, 4]


def test_a_pretrained_model_is_measured_on_its_own_data_set_unless_another_is_asked_for(tmp_path):
    """pretrained=NAME brings its card's data set; dataset=... naming another is refused (naming both), not ignored."""
    def source(*overrides):
        return app.evaluation_source(cli.compose("evaluate", [f"run_dir={tmp_path}", *overrides]))

    _, dataset, card = source("pretrained=ica-patches")  # the default dataset (digits) was not asked for
    assert dataset._target_ == "pfzoo.data.patches" and card["name"] == "ica-patches"
    _, dataset, _ = source("pretrained=rbm-digits", "dataset=digits")  # asked for, and the same
    assert dataset._target_ == "pfzoo.data.digits"
    with pytest.raises(ValueError, match="dataset=binarized_mnist does not match pretrained=rbm-digits.*dataset=digits"):
        source("pretrained=rbm-digits", "dataset=binarized_mnist")
    with pytest.raises(ValueError, match="dataset=digits does not match pretrained=ica-patches.*dataset=patches"):
        source("model=ica", "pretrained=ica-patches", "dataset=digits")  # model=ica's default is patches: digits was asked for
    # a setting of the data (not where its files live) is the card's, or refused: it would be ignored
    _, dataset, _ = source("pretrained=rbm-digits", "dataset.threshold=8.0")
    assert dataset.threshold == 8.0
    with pytest.raises(ValueError, match=r"dataset.threshold=0.5 does not apply to rbm-digits.*digits with threshold=8.0"):
        source("pretrained=rbm-digits", "dataset.threshold=0.5")
    with pytest.raises(ValueError, match=r"dataset.num_test=50 does not apply to ica-patches"):
        source("model=ica", "dataset.num_test=50")  # the bare command measures the zoo's model on its card's data too


def test_evaluate_refuses_samples_for_data_that_are_not_images(tmp_path, capsys):
    cfg = cli.compose("evaluate", [f"run_dir={tmp_path}", "pretrained=hopfield-hopfield_patterns", "samples=true", "progress=false"])
    assert cli.execute("evaluate", cfg) == cli.EXIT_USAGE
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "samples=true" in error[0] and "hopfield_patterns" in error[0], error
    assert not (tmp_path / "samples.png").exists()


TORCHRUN = importlib.util.find_spec("torch.distributed.run") is not None and torch.distributed.is_available()


@pytest.mark.slow
@pytest.mark.skipif(not TORCHRUN, reason="torch.distributed (torchrun) is not available")
@pytest.mark.parametrize("launcher", [["-m", "torch.distributed.run"], ["-m", "pfzoo", "torchrun"]], ids=["torchrun", "pfzoo-torchrun"])
def test_a_user_error_under_torchrun_is_one_line_and_exit_2_from_every_rank(launcher, tmp_path):
    """Every rank meets the error, rank 0 prints it, all exit 2 together, and the torchrun process exits 2 with that
    line alone: plain torchrun through pfzoo's ``torchrun.handlers`` entry point, ``pfzoo-torchrun`` by itself."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("HYDRA_FULL_ERROR", None)
    train = [str(REPO / "scripts" / "train.py"), f"run_dir={tmp_path / 'run'}", "trainer.epochs=0"]
    result = subprocess.run([sys.executable, *launcher, "--standalone", "--nproc_per_node=2", *train], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == cli.EXIT_USAGE, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == ["error: epochs must be a positive integer, got 0"], result.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.skipif(not TORCHRUN, reason="torch.distributed (torchrun) is not available")
def test_a_diverged_training_run_under_torchrun_exits_3_with_one_line(tmp_path):
    """The divergence guard's stop exits 3 under torchrun as in one process (issue 51): the workers' code, their line
    alone on stderr, no ChildFailedError."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("HYDRA_FULL_ERROR", None)
    train = [str(REPO / "scripts" / "train.py"), f"run_dir={tmp_path / 'run'}", "model.num_hidden=4", "trainer=cd",
             "trainer.optimizer.lr=1e8", "trainer.epochs=2", "pictures=false", "trainer.progress=false"]
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *train],
                            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == cli.EXIT_DIVERGED, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: training diverged at epoch 1"), result.stderr[-2000:]
    recorded = json.loads((tmp_path / "run" / "result.json").read_text())  # rank 0's record of it
    assert recorded["status"] == "diverged" and recorded["divergence"]["message"] == lines[0].removeprefix("error: ")


@pytest.mark.slow
@pytest.mark.skipif(not TORCHRUN, reason="torch.distributed (torchrun) is not available")
def test_a_failure_that_is_no_user_error_keeps_torchruns_report(tmp_path):
    """A worker that exits 2 without pfzoo's mark (another program's usage error) keeps torchrun's own report."""
    script = tmp_path / "other.py"
    script.write_text("import sys\nprint('usage: other.py', file=sys.stderr)\nsys.exit(2)\n")
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", str(script)],
                            capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=120)
    assert result.returncode == 1 and "ChildFailedError" in result.stderr and "exitcode  : 2" in result.stderr, result.stderr[-2000:]


def command(*args: str) -> subprocess.CompletedProcess:
    """``python <args>`` from the checkout, as a user's shell runs it."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO, timeout=120)


@pytest.mark.parametrize("script", ["train.py", "evaluate.py"])
def test_hydra_shell_completion_prints_a_completion_script(script):
    result = command(str(REPO / "scripts" / script), "-sc", "install=bash")
    assert result.returncode == 0, result.stderr
    assert "hydra_bash_completion" in result.stdout and "complete " in result.stdout


@pytest.mark.parametrize("task", ["train", "evaluate"])
def test_a_command_help_starts_with_its_description_then_hydra_groups(task):
    result = command("-m", "pfzoo", task, "--help")
    assert result.returncode == 0, result.stderr
    first, *rest = result.stdout.splitlines()
    assert first.startswith(f"pfzoo-{task}: ") and "powered by Hydra" not in result.stdout
    assert "== Configuration groups ==" in rest


def test_python_m_pfzoo_help_lists_each_command_on_one_line_and_version_prints_the_version():
    from pfzoo import __version__

    result = command("-m", "pfzoo", "--help")
    assert result.returncode == 0 and result.stderr == ""
    for name in cli.COMMANDS:
        assert sum(line.strip().startswith(name + " ") for line in result.stdout.splitlines()) == 1
    for args in (["-m", "pfzoo", "--version"], [str(REPO / "scripts" / "train.py"), "--version"]):
        result = command(*args)
        assert result.returncode == 0 and result.stdout.startswith(f"pfzoo {__version__} ")


def test_an_unknown_command_is_one_error_line_and_exit_2():
    result = command("-m", "pfzoo", "nosuch")
    assert result.returncode == cli.EXIT_USAGE and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "error: unknown command 'nosuch' (commands: train, evaluate, sample, zoo, torchrun, list; python -m pfzoo --help describes them)"]


def test_a_run_logs_to_a_file_named_after_its_command(tmp_path):
    result = command(str(REPO / "scripts" / "train.py"), f"run_dir={tmp_path}", *TINY, "pictures=false")
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "train.log").is_file() and not (tmp_path / "cli.log").exists()
    log = (tmp_path / "train.log").read_text()
    assert "epoch 1/1" in log
    headline = json.loads((tmp_path / "result.json").read_text())["headline"]  # the closing estimate, in the log too
    assert f"test log-likelihood = {headline['mean']:.4f} (exact, on all 360 test examples, ± {headline['data_stderr']:.4f} test-set sampling)" in log


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is not None, reason="the tensorboard package is installed")
def test_tensorboard_true_without_the_package_is_one_error_line(tmp_path, capsys):
    assert cli.execute("train", cli.compose("train", [f"run_dir={tmp_path}", *TINY, "tensorboard=true"])) == cli.EXIT_USAGE
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("error: tensorboard=true needs the tensorboard package")
    # asked before the data are loaded: a data set that cannot load is not reached
    missing_data = cli.compose("train", [f"run_dir={tmp_path / 'b'}", "dataset=binarized_mnist", f"data.root={tmp_path / 'nowhere'}", "tensorboard=true"])
    assert cli.execute("train", missing_data) == cli.EXIT_USAGE
    assert capsys.readouterr().err.strip().startswith("error: tensorboard=true needs the tensorboard package")


def test_a_run_writes_metrics_csv_and_may_resume_with_it_turned_off(tmp_path):
    assert cli.execute("train", cli.compose("train", [f"run_dir={tmp_path}", *TINY, "pictures=false"])) == 0
    assert (tmp_path / "metrics.csv").read_text().startswith("epoch,loss,seconds,evaluation_seconds,")
    more = cli.compose("train", [f"run_dir={tmp_path}", *TINY, "pictures=false", "trainer.epochs=2", "resume=true", "metrics_csv=false"])
    assert cli.execute("train", more) == 0


def test_a_two_job_sweep_ends_with_a_table_of_both_jobs_and_summary_csv(tmp_path):
    """A failing job has its row too, with its error; the columns are those of the jobs that ran."""
    run_dir = tmp_path / "sweep"
    result = command(str(REPO / "scripts" / "train.py"), "-m", f"run_dir={run_dir}", "trainer.optimizer.lr=0.05,-1", *TINY[:2],
                     "model.num_hidden=2", "pictures=false")
    assert result.returncode == cli.EXIT_USAGE, result.stderr[-2000:]
    table = result.stdout[result.stdout.index("sweep summary (2 jobs):"):].splitlines()
    assert table[1].split()[:3] == ["job", "overrides", "test_log_likelihood"]
    assert table[2].split()[:2] == ["0", "trainer.optimizer.lr=0.05"] and "exact" in table[2]
    assert table[3].split()[:2] == ["1", "trainer.optimizer.lr=-1"] and "optimizer.lr" in table[3]
    with (run_dir / "summary.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert [row["job"] for row in rows] == ["0", "1"] and rows[1]["test_log_likelihood"] == ""
    assert rows[0]["kind"] == "exact" and float(rows[0]["test_log_likelihood"]) < 0 and rows[0]["error"] == ""
    assert rows[1]["error"] in result.stderr and "optimizer.lr" in rows[1]["error"]
    assert table[-1] == f"summary written to {run_dir / 'summary.csv'}"


def test_an_evaluate_sweep_ends_with_a_table_of_its_estimates(tmp_path):
    run_dir = tmp_path / "sweep"
    result = command(str(REPO / "scripts" / "evaluate.py"), "-m", f"run_dir={run_dir}", "estimator=exact,importance", "num_test=10",
                     "progress=false")
    assert result.returncode == 0, result.stderr[-2000:]
    with (run_dir / "summary.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert [(row["job"], row["overrides"]) for row in rows] == [("0", "estimator=exact"), ("1", "estimator=importance")]
    assert rows[0]["kind"] == "exact" and all(float(row["log_z"]) > 0 for row in rows)
    assert result.stdout.count("sweep summary (2 jobs):") == 1
