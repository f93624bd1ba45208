"""Bad input typed at the command line: exit code 2 and one line naming what was wrong, never a traceback.

Each row runs the app in-process as ``scripts/train.py`` / ``scripts/evaluate.py`` would (compose, then execute),
with small settings so that a value refused only after some work still ends fast.
"""

import pytest

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
