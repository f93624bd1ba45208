"""Bad input typed at the command line: exit code 2 and one line naming what was wrong, never a traceback.

Each row runs the app in-process as ``scripts/train.py`` / ``scripts/evaluate.py`` would (compose, then execute),
with small settings so that a value refused only after some work still ends fast.
"""

import logging
import os

import pytest
import torch
from hydra.errors import ConfigCompositionException, InstantiationException

from pfzoo import cli

TRAIN_SMALL = ["trainer.epochs=1", "trainer.progress=false", "model.num_hidden=4", "pictures=false"]
EVALUATE_SMALL = ["estimator.num_steps=20", "num_test=20", "progress=false"]

ROWS = [
    # (task, overrides, words the one line must contain)
    ("train", ["seed=abc"], "seed"),
    ("train", ["resume=maybe"], "resume"),
    ("train", ["pictures=2"], "pictures"),
    ("train", ["final_num_test=-5"], "final_num_test"),
    ("train", ["final_num_test=abc"], "final_num_test"),
    ("train", ["device=meta"], "device"),
    ("train", ["device=gpu"], "device"),
    ("train", ["device=cuda:7"], "device"),
    ("train", ["init_from_data=perhaps"], "init_from_data"),
    ("train", ["model=nonexistent"], "model/nonexistent"),
    ("train", ["trainer=nonexistent"], "trainer/nonexistent"),
    ("train", ["dataset=nonexistent"], "dataset/nonexistent"),
    ("train", ["trainer.epochs=0"], "epochs"),
    ("train", ["trainer.epochs=-3"], "epochs"),
    ("train", ["trainer.batch_size=0"], "batch_size"),
    ("train", ["trainer.optimizer.lr=-1"], "lr"),
    ("train", ["trainer.optimizer.lr=nan"], "optimizer.lr"),
    ("train", ["trainer.optimizer.lr=inf"], "optimizer.lr"),
    ("train", ["trainer.optimizer.momentum=nan"], "optimizer.momentum"),
    ("train", ["trainer.weight_decay=nan"], "weight_decay"),
    ("train", ["trainer.weight_decay=-0.1"], "weight_decay"),
    ("train", ["trainer.learning_rate_decay=-1"], "learning_rate_decay"),
    ("train", ["trainer.checkpoint_every=0"], "checkpoint_every"),
    ("train", ["trainer.evaluate_every=-1"], "evaluate_every"),
    ("train", ["trainer.objective.k=0"], "k"),
    ("train", ["trainer.objective.num_chains=0"], "num_chains"),
    ("train", ["model.num_hidden=0"], "num_hidden"),
    ("train", ["model.init_std=nan"], "init_std"),
    ("train", ["model.init_std=-1"], "init_std"),
    ("train", ["model=ica", "trainer=cd"], "ICA"),
    ("train", ["model=gaussian_rbm", "trainer=pseudolikelihood"], "GaussianBernoulliRBM"),
    ("train", ["dataset=binarized_mnist", "dataset.root=/nonexistent"], "/nonexistent"),
    ("train", ["dataset.num_train=abc"], "num_train"),
    ("train", ["dataset=array"], "dataset.path"),
    ("train", ["dataset=array", "dataset.path=/nonexistent.npy"], "/nonexistent.npy"),
    ("train", ["trainer.max_seconds=-1"], "max_seconds"),
    ("train", ["trainer.stop_tolerance=nan"], "stop_tolerance"),
    ("evaluate", ["dataset=array", "checkpoint=models/rbm-digits/checkpoint.pt"], "dataset.path"),
    ("evaluate", ["seed=abc"], "seed"),
    ("evaluate", ["num_test=0"], "num_test"),
    ("evaluate", ["num_test=-1"], "num_test"),
    ("evaluate", ["num_test=abc"], "num_test"),
    ("evaluate", ["exact_max_units=abc"], "exact_max_units"),
    ("evaluate", ["exact_max_units=-1"], "exact_max_units"),
    ("evaluate", ["progress=maybe"], "progress"),
    ("evaluate", ["samples=maybe"], "samples"),
    ("evaluate", ["device=meta"], "device"),
    ("evaluate", ["estimator=nonexistent"], "estimator/nonexistent"),
    ("evaluate", ["estimator.num_chains=1"], "num_chains"),
    ("evaluate", ["estimator.num_chains=abc"], "num_chains"),
    ("evaluate", ["estimator.num_steps=0"], "num_steps"),
    ("evaluate", ["estimator.schedule=bogus"], "schedule"),
    ("evaluate", ["estimator.base=gaussian"], "base"),
    ("evaluate", ["estimator.path=straight"], "path"),
    ("evaluate", ["estimator.diagnostics=maybe"], "diagnostics"),
    ("evaluate", ["estimator=raise", "estimator.num_examples=0"], "num_examples"),
    ("evaluate", ["estimator=hais"], "HAIS"),
    ("evaluate", ["estimator=csl", "model=ica"], "CSL"),
    ("evaluate", ["pretrained=nope"], "nope"),
    ("evaluate", ["checkpoint=/nonexistent.pt"], "/nonexistent.pt"),
    ("evaluate", ["model=ica", "checkpoint=models/rbm-digits/checkpoint.pt"], "model=ica"),
    ("evaluate", ["model=rbm", "dataset=patches"], "dataset=patches"),
    ("evaluate", ["checkpoint=models/rbm-digits/checkpoint.pt", "dataset=spin_glass", "dataset.side=3"], "visible units"),
    ("evaluate", ["zoo_dir=/nonexistent"], "/nonexistent"),
    ("evaluate", ["pretrained=rbm-digits", "dataset=binarized_mnist"], "dataset=binarized_mnist"),
    ("evaluate", ["pretrained=rbm-digits", "dataset=spin_glass"], "pretrained=rbm-digits"),
    ("evaluate", ["pretrained=hopfield-hopfield_patterns", "samples=true"], "samples=true"),
    ("evaluate", ["model=ica", "samples=true"], "samples=true"),
    ("evaluate", ["versus=rbm-digits", "samples=true"], "versus=rbm-digits"),
    ("evaluate", ["versus=rbm-digits", "estimator=raise"], "versus=rbm-digits"),
    ("evaluate", ["versus=rbm-digits", "estimator.num_steps=10"], "versus=rbm-digits"),
]


def run_app(task: str, overrides: list[str], capsys) -> tuple[int, list[str]]:
    """What ``scripts/<task>.py <overrides>`` returns and prints to stderr (composition errors included)."""
    try:
        cfg = cli.compose(task, overrides)
    except cli.USER_ERRORS as error:
        return cli.EXIT_USAGE, [f"error: {cli.one_line(error)}"]
    code = cli.execute(task, cfg)
    return code, [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize("task, overrides, names", ROWS, ids=[f"{task}:{' '.join(o)}" for task, o, _ in ROWS])
def test_bad_command_line_value_exits_2_in_one_line_naming_it(task, overrides, names, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(cli.config_dir().parent)  # checkpoint=models/... is relative to the checkout, as in the README
    small = TRAIN_SMALL if task == "train" else EVALUATE_SMALL
    keys = {override.split("=", 1)[0] for override in overrides}  # a row's own keys and groups replace the small settings
    small = [setting for setting in small if setting.split("=", 1)[0] not in keys and setting.split(".", 1)[0] not in keys]
    code, errors = run_app(task, [f"run_dir={tmp_path}", *small, *overrides], capsys)
    assert code == cli.EXIT_USAGE
    assert len(errors) == 1 and "\n" not in errors[0]
    assert names in errors[0], errors[0]


# The whole command line, as `scripts/<task>.py ARGV` runs it (Hydra's flags, -m sweeps, Hydra's own composition).
ARGV_ROWS = [
    # (task, argv, words the one line must contain)
    ("train", ["seed=abc"], "seed"),
    ("train", ["seed=1,2"], "seed=1,2"),  # a sweep's syntax without -m
    ("train", ["a=b=c"], "a=b=c"),  # malformed override
    ("train", ["seed='1"], "seed='1"),
    ("train", ["model=nosuch"], "model/nosuch"),
    ("train", ["--cfg", "job", "seed=abc"], "seed"),
    ("train", ["trainer.epochs=1", "-m", "seed=1,2"], "-m"),  # a flag after the overrides: argparse's usage otherwise
    ("train", ["--config-name=nosuch"], "nosuch"),
    ("train", ["-m", "seed=abc"], "seed"),
    ("train", ["-m", "seed=1,abc"], "seed"),  # one bad value of a sweep
    ("train", ["-m", "foo=1,2"], "foo"),  # unknown key in a sweep
    ("train", ["-m", "model=rbm,nosuch"], "model/nosuch"),  # unknown config name in a sweep
    ("train", ["-m", "trainer=cd,nosuch"], "trainer/nosuch"),
    ("train", ["-m", "seed=range(1,x)"], "seed=range(1,x)"),  # a sweep that does not parse
    ("train", ["-m", "model=rbm,ica", "model.num_hidden=2"], "num_hidden"),  # a value that fails with one sweep value
    ("train", ["-m", "hydra.foo=1"], "hydra.foo"),  # Hydra's own settings: reported by Hydra as it composes
    ("evaluate", ["-m", "estimator=ais,nosuch"], "estimator/nosuch"),
    ("evaluate", ["-m", "num_test=10,abc"], "num_test"),
    ("evaluate", ["-m", "bogus=1,2"], "bogus"),
    ("evaluate", ["-m", "seed=glob(*)"], "launched no job"),  # a sweep of nothing: not a silent exit 0
    ("train", ["-m", "--cfg", "job", "seed=1,2"], "--cfg"),
    ("evaluate", ["checkpoint=/nonexistent.pt"], "/nonexistent.pt"),
    ("nope", ["seed=1"], "nope"),
    ("train", ["run_dir=FILE/x"], "run_dir=FILE/x"),  # a file on the run directory's path
    ("evaluate", ["run_dir=FILE"], "run_dir=FILE"),
    ("train", ["-m", "run_dir=FILE", "seed=1,2"], "run_dir=FILE"),  # python -m pfzoo nope
]


@pytest.fixture
def hydra_logging_undone():
    """Undo the logging set-up of a job Hydra starts in this process (its handlers hold this test's captured streams)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    disabled = {name: logger.disabled for name, logger in logging.Logger.manager.loggerDict.items() if isinstance(logger, logging.Logger)}
    yield
    for handler in root.handlers[:]:
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)
    for name, logger in logging.Logger.manager.loggerDict.items():
        if isinstance(logger, logging.Logger):
            logger.disabled = disabled.get(name, False)


@pytest.mark.parametrize("task, argv, names", ARGV_ROWS, ids=[f"{task}:{' '.join(a)}" for task, a, _ in ARGV_ROWS])
@pytest.mark.usefixtures("hydra_logging_undone")
def test_bad_command_line_exits_2_in_one_line_naming_it(task, argv, names, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    monkeypatch.setattr("sys.argv", [f"scripts/{task}.py"])
    (tmp_path / "file").write_text("")
    argv = [arg.replace("FILE", str(tmp_path / "file")) for arg in argv]
    run_dir = [] if any(arg.startswith("run_dir=") for arg in argv) else [f"run_dir={tmp_path / 'run'}"]
    with pytest.raises(SystemExit) as exit:
        cli.run(task, [*argv, *run_dir, "trainer.progress=false" if task == "train" else "progress=false"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit.value.code == cli.EXIT_USAGE
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert names.replace("FILE", str(tmp_path / "file")) in err[0], err[0]
    assert "HYDRA_FULL_ERROR" not in os.environ  # Hydra's switch is set only while the jobs run
    made = {path.name for path in (tmp_path / "run").rglob("*")}
    assert not made & {"checkpoint.pt", "metrics.jsonl", "evaluation.json"}, made  # refused before any work (a sweep's too)


def damaged_checkpoints(directory) -> dict[str, object]:
    """Files at a checkpoint's path that are none: cut at several lengths, random bytes, empty, text, another torch file."""
    good = (cli.config_dir().parent / "models" / "rbm-digits" / "checkpoint.pt").read_bytes()
    contents = {f"cut at {cut}": good[:cut] for cut in (10, 3000, 30000, len(good) - 1)}
    contents.update({"random bytes": torch.randint(256, (5000,), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
                     .numpy().tobytes(), "empty": b"", "text": b"not a checkpoint\n"})
    paths = {}
    for name, content in contents.items():
        paths[name] = directory / f"{name.replace(' ', '_')}.pt"
        paths[name].write_bytes(content)
    torch.save({"weights": torch.zeros(3)}, directory / "other.pt")
    paths["another torch file"] = directory / "other.pt"
    return paths


def test_a_damaged_checkpoint_is_named_in_one_line_by_evaluate_and_by_resume(tmp_path, capsys):
    """pfzoo's line names the file, not the OS or torch error beneath it ([Errno 22], "Weights only load failed")."""
    for name, path in damaged_checkpoints(tmp_path).items():
        code, errors = run_app("evaluate", [f"run_dir={tmp_path / 'evaluate'}", f"checkpoint={path}", *EVALUATE_SMALL], capsys)
        assert code == cli.EXIT_USAGE and len(errors) == 1, (name, errors)
        assert errors[0].startswith(f"error: {path} ") and "checkpoint" in errors[0], (name, errors[0])
        assert "weights_only" not in errors[0], errors[0]  # torch's advice to load it unsafely is not for this file

        run_dir = tmp_path / "train" / path.stem
        run_dir.mkdir(parents=True)
        (run_dir / "checkpoint.pt").write_bytes(path.read_bytes())
        code, errors = run_app("train", [f"run_dir={run_dir}", *TRAIN_SMALL, "resume=true"], capsys)
        assert code == cli.EXIT_USAGE and len(errors) == 1, (name, errors)
        assert errors[0].startswith(f"error: {run_dir / 'checkpoint.pt'} "), (name, errors[0])


def test_one_line_is_the_outermost_message_that_names_the_argument():
    def chained(outer: BaseException, inner: BaseException) -> BaseException:
        try:
            try:
                raise inner
            except BaseException as cause:
                raise outer from cause
        except BaseException as error:
            return error

    # pfzoo's message names the file; the OS error beneath it does not
    assert cli.one_line(chained(ValueError("x.pt is not a readable checkpoint"), OSError(22, "Invalid argument"))) == (
        "x.pt is not a readable checkpoint")
    # Hydra's wrapper of a constructor's ValueError gives way to it
    assert cli.one_line(chained(InstantiationException("Error in call to target 'RBM':\nValueError(...)"),
                                ValueError("num_hidden must be positive, got 0"))) == "num_hidden must be positive, got 0"
    # ... but not to a cause that is no user error, which would lose the override's name
    assert cli.one_line(chained(ConfigCompositionException("Error parsing override 'seed=range(1,x)'\nTypeError"),
                                TypeError("mismatch"))) == "Error parsing override 'seed=range(1,x)' TypeError"
