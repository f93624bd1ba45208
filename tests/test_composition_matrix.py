"""The composition matrix: every model config × every estimator config (evaluate) and × every trainer config (train).

The command line's promise, checked in-process through :func:`pfzoo.cli.compose` and :func:`pfzoo.cli.execute`
(what ``scripts/evaluate.py`` and ``scripts/train.py`` run): a pair either succeeds (exit 0 and a report) or is
refused with exit 2 and exactly one line ``error: ...`` on stderr that names the model or the estimator/trainer
involved — never a traceback. The pairs are read from ``conf/model``, ``conf/estimator`` and ``conf/trainer`` at
collection time, so a new config file is in the matrix without editing this file; its natural data set and trainer
(:data:`NATURAL`) are looked up by config name, then by model class, and a model with neither fails loudly.

Every run is shrunk by overrides of keys its config actually has (:func:`tiny_overrides`): one epoch, a few
annealing steps and chains, five test examples. The numbers are meaningless; only the contract is checked.
A few subprocess runs of the real scripts check what reaches the terminal.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf

from pfzoo import cli, zoo

CONF = cli.config_dir()
REPO = CONF.parent


def config_names(group: str) -> list[str]:
    """The option names of a config group: the ``*.yaml`` stems in ``conf/<group>``, sorted."""
    return sorted(path.stem for path in (CONF / group).glob("*.yaml"))


MODELS = config_names("model")
ESTIMATORS = config_names("estimator")
TRAINERS = config_names("trainer")

# Each family's natural embedded data set, made small (and fast to build).
DIGITS = ("dataset=digits",)
PATCHES = ("dataset=patches", "dataset.source=embedded", "dataset.num_train=500", "dataset.num_test=100",
           "dataset.patch_size=4", "dataset.num_components=8")
SPIN_GLASS = ("dataset=spin_glass", "dataset.side=3", "dataset.num_train=200", "dataset.num_test=50",
              "dataset.num_chains=20", "dataset.burn_in=20", "dataset.thin=2")
HOPFIELD_PATTERNS = ("dataset=hopfield_patterns", "dataset.num_units=16", "dataset.num_patterns=4")


@dataclass(frozen=True)
class Natural:
    """How a model config is trained for the evaluate matrix: its data set, small sizes and the trainer its docs name."""

    dataset: tuple[str, ...]
    trainer: str
    sizes: tuple[str, ...] = ()  # model.* overrides; only keys the model config has are applied


# Keyed by model config name, or by the class name of its _target_ (so a new config of a known class is covered).
NATURAL: dict[str, Natural] = {
    "rbm": Natural(DIGITS, "pcd", ("num_hidden=8",)),
    "dbm": Natural(DIGITS, "dbm_pcd", ("hidden_sizes=[8,4]",)),
    "dbn": Natural(DIGITS, "cd", ("hidden_sizes=[8,4]",)),
    "ising": Natural(SPIN_GLASS, "mpf"),
    "hopfield": Natural(HOPFIELD_PATTERNS, "mpf"),
    "gaussian_rbm": Natural(PATCHES, "cd", ("num_hidden=8",)),
    "ica": Natural(PATCHES, "ml"),
    "gaussian": Natural(PATCHES, "ml"),
    "ProductOfExperts": Natural(PATCHES, "mpf", ("num_experts=12",)),
    "mcrbm": Natural(PATCHES, "mpf_adam", ("num_factors=8", "num_covariance_hidden=4", "num_mean_hidden=4")),
    "linear_generative": Natural(PATCHES, "em_hmc"),
    "bilinear": Natural(PATCHES, "em_hmc", ("num_style=2",)),
}

# Leaf keys shrunk wherever they occur in an estimator or trainer config (only downwards, only where present).
ESTIMATOR_TINY = {"num_steps": 20, "num_chains": 4, "posterior_samples": 4, "num_examples": 3,
                  "control_variate_samples": 2, "samples_per_chain": 5, "burn_in": 2, "num_runs": 4, "num_levels": 4}
TRAINER_TINY = {"epochs": 1, "epochs_per_layer": 1, "num_chains": 20, "k": 1, "mean_field_iterations": 2,
                "num_hmc_steps": 1, "num_leapfrog": 2, "batch_hmc_steps": 1, "max_iter": 3}
NUM_TEST = 5
# the estimator conf/train.yaml takes to the closing log-likelihood
TRAIN_ESTIMATOR = next(entry["estimator"] for entry in OmegaConf.load(CONF / "train.yaml")["defaults"] if "estimator" in entry)


def load_config(group: str, name: str) -> dict:
    return OmegaConf.to_container(OmegaConf.load(CONF / group / f"{name}.yaml"), resolve=False)


def leaves(node, prefix: str = ""):
    """``(dotted.key, value)`` of every leaf of a nested config container."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, f"{prefix}{key}" if not prefix else f"{prefix}.{key}")
    elif prefix:
        yield prefix, node


def tiny_overrides(group: str, name: str) -> list[str]:
    """Overrides that shrink ``conf/<group>/<name>.yaml`` to a run of a second or so: only keys the config has.

    ``group`` is ``"estimator"`` or ``"trainer"``; e.g. ``tiny_overrides("estimator", "bracket")`` gives
    ``estimator.upper.num_steps=20``, ``estimator.lower.num_examples=3``, ...
    """
    tiny = {"estimator": ESTIMATOR_TINY, "trainer": TRAINER_TINY}[group]
    overrides = []
    for key, value in leaves(load_config(group, name)):
        leaf = key.rsplit(".", 1)[-1]
        if leaf in tiny and isinstance(value, int) and not isinstance(value, bool) and value > tiny[leaf]:
            overrides.append(f"{group}.{key}={tiny[leaf]}")
    if group == "trainer":
        overrides.append("trainer.progress=false")
    return overrides


def model_class_name(model: str) -> str:
    return load_config("model", model)["_target_"].rsplit(".", 1)[-1]


def natural(model: str) -> Natural:
    found = NATURAL.get(model) or NATURAL.get(model_class_name(model))
    if found is None:
        pytest.fail(f"conf/model/{model}.yaml has no natural data set and trainer here: add a row to NATURAL "
                    f"(keyed by {model!r} or {model_class_name(model)!r}) in {Path(__file__).name}")
    return found


def model_overrides(model: str) -> list[str]:
    """``model=<model>``, its natural data set, and its small sizes (only keys the model config has)."""
    spec = natural(model)
    keys = load_config("model", model)
    sizes = [f"model.{size}" for size in spec.sizes if size.split("=", 1)[0] in keys]
    return [f"model={model}", *sizes, *spec.dataset]


def train_overrides(model: str, trainer: str, run_dir: Path) -> list[str]:
    """The tiny run, its closing log-likelihood included: models without an exact one take the train config's estimator
    (AIS) to it, shrunk like the evaluate matrix's, on ``NUM_TEST`` test examples."""
    return [*model_overrides(model), f"trainer={trainer}", *tiny_overrides("trainer", trainer), f"run_dir={run_dir}",
            *tiny_overrides("estimator", TRAIN_ESTIMATOR), f"final_num_test={NUM_TEST}"]


def evaluate_overrides(model: str, estimator: str, checkpoint: Path, run_dir: Path) -> list[str]:
    return [*model_overrides(model), f"estimator={estimator}", *tiny_overrides("estimator", estimator),
            f"checkpoint={checkpoint}", f"run_dir={run_dir}", f"num_test={NUM_TEST}", "progress=false"]


def run(task: str, overrides: list[str]) -> tuple[int, str, str]:
    """``cli.execute(task, cli.compose(task, overrides))`` with its stdout and stderr; exceptions propagate (bugs)."""
    cfg = cli.compose(task, overrides)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.execute(task, cfg)
    return code, out.getvalue(), err.getvalue()


# -- what a refusal must name ------------------------------------------------------------------------------------------


def words(name: str) -> list[str]:
    """``"GaussianBernoulliRBM"`` → Gaussian, Bernoulli, RBM; ``"poe_laplace"`` → poe, laplace."""
    return re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+", name)


def mentions(message: str, names) -> bool:
    """Whether ``message`` names one of ``names`` as a word, spelled with or without separators between its parts
    (``MeanCovarianceRBM`` matches "mean-covariance RBM"; ``AIS`` matches "AIS" but not "HAIS"; a plural s is fine)."""
    for name in names:
        parts = words(name)
        if parts:
            pattern = r"(?<![A-Za-z0-9])" + r"[\s_\-–]*".join(map(re.escape, parts)) + r"s?(?![A-Za-z0-9])"
            if re.search(pattern, message, re.IGNORECASE):
                return True
    return False


def targets(node) -> list[str]:
    """The class (or function) names of every ``_target_`` in a config container."""
    return [str(value).rsplit(".", 1)[-1] for key, value in leaves(node) if key.rsplit(".", 1)[-1] == "_target_"]


def model_names(model: str) -> set[str]:
    target = load_config("model", model)["_target_"]
    return {model, target.rsplit(".", 1)[-1], getattr(get_class(target), "registry_name", model)}


def estimator_names(estimator: str) -> set[str]:
    return {estimator, *targets(load_config("estimator", estimator))}


GENERIC_TARGETS = {"Trainer"}  # the driver, not the trainer config's own objective


def trainer_names(trainer: str) -> set[str]:
    config = load_config("trainer", trainer)
    config.pop("optimizer", None)
    return {trainer, *(name for name in targets(config) if name not in GENERIC_TARGETS)}


def check_contract(code: int, out: str, err: str, *, success: str, names: set[str], pair: str) -> None:
    """Exit 0 with ``success`` in the report, or exit 2 with exactly one ``error: ...`` line naming one of ``names``."""
    if code == 0:
        assert success in out, f"{pair}: exit 0 but no {success!r} in the report:\n{out}"
        return
    assert code == cli.EXIT_USAGE, f"{pair}: exit {code}, expected 0 or {cli.EXIT_USAGE}; stderr:\n{err}"
    lines = err.splitlines()
    assert len(lines) == 1, f"{pair}: a refusal must be exactly one line on stderr, got {len(lines)}:\n{err}"
    line = lines[0]
    assert line.startswith("error: ") and line[len("error: "):].strip(), f"{pair}: not an 'error: <reason>' line: {line!r}"
    assert mentions(line, names), f"{pair}: the refusal names none of {sorted(names)}: {line!r}"


# -- the trained checkpoints ------------------------------------------------------------------------------------------


@dataclass
class Trained:
    checkpoint: Path | None  # None when not even the untrained model could be built
    outcome: str  # "ok", or why the natural training did not give a checkpoint (then `checkpoint` is untrained)


def untrained_checkpoint(model: str, run_dir: Path) -> Path:
    """The model as the app would build it before training (sizes from the data, data-dependent init), saved."""
    cfg = cli.compose("train", train_overrides(model, natural(model).trainer, run_dir))
    data = instantiate(cfg.dataset)
    module = instantiate(cfg.model, num_visible=data.num_features, generator=torch.Generator().manual_seed(0))
    if cfg.init_from_data:
        module.init_from_data(data.train)
    return zoo.save(module, run_dir / "untrained.pt", config=OmegaConf.to_container(cfg, resolve=True))


class TrainedModels:
    """``trained[model]``: the model config trained one tiny epoch on its natural data set with its natural trainer.

    Trained on first use and kept for the module. If that training does not succeed (a bug that
    :func:`test_natural_trainer_trains` reports), the checkpoint is the untrained model instead, so that the evaluate
    pairs report evaluation bugs only.
    """

    def __init__(self, tmp_path_factory) -> None:
        self.tmp_path_factory = tmp_path_factory
        self.cache: dict[str, Trained] = {}

    def __getitem__(self, model: str) -> Trained:
        if model not in self.cache:
            self.cache[model] = self.train(model)
        return self.cache[model]

    def train(self, model: str) -> Trained:
        run_dir = self.tmp_path_factory.mktemp(f"train-{model}")
        try:
            code, out, err = run("train", train_overrides(model, natural(model).trainer, run_dir))
            outcome = "ok" if code == 0 else f"exit {code}: {err.strip()}"
        except Exception as error:  # noqa: BLE001 - reported by test_natural_trainer_trains
            code, outcome = None, f"{type(error).__name__}: {error}"
        checkpoint = run_dir / "checkpoint.pt"
        if code != 0 or not checkpoint.is_file():
            try:
                checkpoint = untrained_checkpoint(model, run_dir)
            except Exception as error:  # noqa: BLE001 - the evaluate pairs of this model then fail with this reason
                checkpoint, outcome = None, f"{outcome}; and building the untrained model failed: {type(error).__name__}: {error}"
        return Trained(checkpoint, outcome)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> TrainedModels:
    return TrainedModels(tmp_path_factory)


@pytest.mark.parametrize("model", MODELS)
def test_natural_trainer_trains(trained, model):
    """Each model config trains with the trainer its docs name, on its natural data set (the evaluate matrix's input)."""
    spec = natural(model)
    assert trained[model].outcome == "ok", f"model={model} trainer={spec.trainer}: {trained[model].outcome}"


# -- the matrices -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("model", MODELS)
def test_evaluate_matrix(trained, tmp_path, model, estimator):
    """``evaluate model=<model> estimator=<estimator> checkpoint=<trained>``: a log-likelihood, or one line naming why not."""
    natural(model)
    if trained[model].checkpoint is None:
        pytest.fail(f"no checkpoint of model={model} to evaluate: {trained[model].outcome}")
    code, out, err = run("evaluate", evaluate_overrides(model, estimator, trained[model].checkpoint, tmp_path))
    check_contract(code, out, err, success="log-likelihood", names=model_names(model) | estimator_names(estimator),
                   pair=f"model={model} estimator={estimator}")


@pytest.mark.parametrize("trainer", TRAINERS)
@pytest.mark.parametrize("model", MODELS)
def test_train_matrix(tmp_path, model, trainer):
    """``train model=<model> trainer=<trainer>`` on the model's natural data: a checkpoint, or one line naming why not."""
    code, out, err = run("train", train_overrides(model, trainer, tmp_path))
    check_contract(code, out, err, success="checkpoint written to", names=model_names(model) | trainer_names(trainer),
                   pair=f"model={model} trainer={trainer}")
    if code == 0:
        assert (tmp_path / "checkpoint.pt").is_file()


# -- the real scripts -------------------------------------------------------------------------------------------------


def script(name: str, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(REPO / "scripts" / name), *overrides], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)


def assert_one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == cli.EXIT_USAGE, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    return lines[0]


@pytest.mark.slow
def test_evaluate_script_prints_an_estimate(trained, tmp_path):
    result = script("evaluate.py", *evaluate_overrides("rbm", "ais", trained["rbm"].checkpoint, tmp_path))
    assert result.returncode == 0, result.stderr
    assert "log-likelihood" in result.stdout and "Traceback" not in result.stderr
    assert (tmp_path / "evaluation.json").is_file()


@pytest.mark.slow
def test_evaluate_script_refuses_in_one_line(trained, tmp_path):
    """An estimator for real vectors on a binary model: exit 2, one line naming one of them."""
    result = script("evaluate.py", *evaluate_overrides("rbm", "hais", trained["rbm"].checkpoint, tmp_path))
    line = assert_one_error_line(result)
    assert mentions(line, model_names("rbm") | estimator_names("hais")), line


@pytest.mark.slow
def test_evaluate_script_rejects_an_unknown_model_config(tmp_path):
    result = script("evaluate.py", "model=nonexistent", f"run_dir={tmp_path}", "progress=false")
    line = assert_one_error_line(result)
    assert "nonexistent" in line, line
