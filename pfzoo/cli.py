"""The command line: compose a config, run the app, report, and turn every user error into one line and exit 2.

``pfzoo-train`` / ``pfzoo-evaluate``, ``python -m pfzoo {train,evaluate}`` and the thin ``scripts/train.py`` /
``scripts/evaluate.py`` all run :func:`run`; tests call :func:`compose` and :func:`execute` in-process. What counts as a user error: anything the app raises
as ``ValueError`` (bad values, a model lacking what an estimator or trainer needs), ``FloatingPointError``
(training diverged under the given settings), ``FileNotFoundError`` (a missing checkpoint or data file),
``NotImplementedError`` (a method a model family does not have), and Hydra's composition and
instantiation errors. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Sequence

import hydra
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from pfzoo import app, distributed
from pfzoo.app import config_dir

TASKS = ("train", "evaluate")
USER_ERRORS = (ValueError, FileNotFoundError, NotImplementedError, FloatingPointError, HydraException, OmegaConfBaseException)
EXIT_USAGE = 2

logger = logging.getLogger("pfzoo")


def one_line(error: BaseException) -> str:
    """The innermost cause of ``error`` as one line (Hydra wraps constructor errors in several lines of context)."""
    while error.__cause__ is not None:
        error = error.__cause__
    text = str(error).split("Config search path")[0]  # Hydra appends every search path: noise on one line
    text = " ".join(text.split())
    return text or type(error).__name__


def compose(task: str, overrides: Sequence[str] = ()) -> DictConfig:
    """The composed config of ``task`` ("train" or "evaluate") with command-line ``overrides``, recording Hydra's choice
    of ``conf/model`` option in ``model_config_name``; raises on bad overrides."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}")
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = hydra_compose(config_name=task, overrides=list(overrides), return_hydra_config=True)
    choice = cfg.hydra.runtime.choices.get("model")
    with open_dict(cfg):
        del cfg["hydra"]  # Hydra's own settings: what hydra_compose leaves out without return_hydra_config
    cfg.model_config_name = choice
    check_booleans(cfg, overrides)
    return cfg


def check_booleans(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """Refuse ``key=2`` for a boolean setting (the typed schema would turn any integer into True) naming the key."""
    for override in overrides:
        key, separator, value = override.lstrip("+~").partition("=")
        if not separator or key.startswith("hydra."):
            continue
        node = OmegaConf.select(cfg, key, default=None, throw_on_missing=False)
        if isinstance(node, bool) and value.strip().lower() not in ("true", "false"):
            raise ValueError(f"{key} must be true or false, got {value!r}")


def execute(task: str, cfg: DictConfig) -> int:
    """Run ``task`` on a composed config, print its report; 0 on success, :data:`EXIT_USAGE` with one line on a user error."""
    if HydraConfig.initialized():  # under hydra.main: the job's own folder (a sweep's jobs each get one) and model choice
        with open_dict(cfg):
            cfg.run_dir = HydraConfig.get().runtime.output_dir
            cfg.model_config_name = HydraConfig.get().runtime.choices.get("model")
    try:
        if task == "train":
            result = app.train(cfg)
        else:
            result = app.evaluate(cfg)
    except USER_ERRORS as error:
        report_error(one_line(error))
        return EXIT_USAGE
    if distributed.rank() != 0:  # under torchrun every rank holds the gathered result; one reports it
        return 0
    if task == "train":
        print(app.format_training(result))
    else:
        output = Path(cfg.run_dir) / cfg.output
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, indent=2) + "\n")
        print(app.format_evaluation(result))
        print(f"results written to {output}")
    return 0


def report_error(message: str) -> None:
    """Print ``error: message`` once: under torchrun every rank meets the same error, rank 0 prints it, and all wait
    until it has (torchrun stops the other ranks as soon as one exits with an error)."""
    if distributed.rank() == 0:
        print(f"error: {message}", file=sys.stderr)
    distributed.synchronize()


def check_overrides(task: str, argv: Sequence[str]) -> None:
    """Exit with :data:`EXIT_USAGE` and one line when ``argv``'s overrides do not compose (unknown group option, bad syntax).

    Hydra's own flags (``-m``, ``--cfg``, ``hydra.*``) are left to Hydra.
    """
    overrides = [arg for arg in argv if not arg.startswith("-") and not arg.startswith("hydra.") and "=" in arg]
    if len(overrides) != len([arg for arg in argv if not arg.startswith("-")]):
        return  # something only Hydra understands (e.g. a multirun sweep's extra syntax); let it report
    try:
        cfg = compose(task, [arg for arg in overrides if "," not in arg.split("=", 1)[1]])
        OmegaConf.to_container(cfg, resolve=True)
    except USER_ERRORS as error:
        report_error(one_line(error))
        sys.exit(EXIT_USAGE)


def run(task: str, argv: Sequence[str]) -> None:
    """The command line of ``task``: Hydra's (``-m`` sweeps, ``--cfg``, overrides) over the packaged configs, with
    overrides checked first so that a typo exits 2 in one line; exits with :func:`execute`'s code. Started by ``torchrun``,
    both tasks join the process group (:func:`pfzoo.distributed.initialize`): evaluate's estimators shard their chains
    across the ranks, train's :class:`~pfzoo.training.Trainer` shards every minibatch; rank 0 alone reports."""
    if task not in TASKS:
        print(f"error: the task must be one of {list(TASKS)}, got {task!r}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    if distributed.launched():
        distributed.initialize()
    try:
        check_overrides(task, argv)
        if distributed.is_active():
            argv = [*argv, *rank_overrides(task, argv)]

        codes: list[int] = []

        @hydra.main(version_base="1.3", config_path=str(config_dir()), config_name=task)
        def job(cfg: DictConfig) -> None:
            codes.append(execute(task, cfg))  # a sweep runs every job in this process: exiting here would end it

        sys.argv = [sys.argv[0], *argv]
        job()
    finally:
        distributed.shutdown()
    sys.exit(max(codes, default=0))


def rank_overrides(task: str, argv: Sequence[str]) -> list[str]:
    """Overrides that make torchrun's ranks one run: rank 0's run directory for all (``${now:...}`` could differ between
    ranks), and Hydra's config copies and log files from rank 0 only."""
    overrides = [arg for arg in argv if "=" in arg and not arg.startswith(("-", "hydra.")) and "," not in arg.split("=", 1)[1]]
    run_dir = [str(compose(task, overrides).run_dir)] if distributed.rank() == 0 else [None]
    distributed.broadcast_from_first(run_dir)
    quiet = [] if distributed.rank() == 0 else ["hydra.output_subdir=null", "hydra/job_logging=disabled", "hydra/hydra_logging=disabled"]
    return [f"run_dir={run_dir[0]}", *quiet]


def train_main() -> None:
    """``pfzoo-train [key=value ...]``."""
    run("train", sys.argv[1:])


def evaluate_main() -> None:
    """``pfzoo-evaluate [key=value ...]``."""
    run("evaluate", sys.argv[1:])
