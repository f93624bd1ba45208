"""The command line: compose a config, run the app, report, and turn every user error into one line and exit 2.

``pfzoo-train`` / ``pfzoo-evaluate``, ``python -m pfzoo {train,evaluate}`` and the thin ``scripts/train.py`` /
``scripts/evaluate.py`` all run :func:`run`; tests call :func:`compose` and :func:`execute` in-process. What counts as a user error: anything the app raises
as ``ValueError`` (bad values, a model lacking what an estimator or trainer needs), ``FloatingPointError``
(training diverged under the given settings), ``FileNotFoundError`` (a missing checkpoint or data file),
``NotImplementedError`` (a method a model family does not have), and Hydra's composition and
instantiation errors (a ``-m`` sweep's included). All of them reach :func:`report_error` as :func:`one_line` of the
error, exit :data:`EXIT_USAGE`; a training run the divergence guard stopped (:class:`~pfzoo.training.TrainingDiverged`,
the checkpoint holding the last good parameters) prints its report and the guard's line and exits
:data:`EXIT_DIVERGED`. Anything else is a bug and keeps its traceback. Under ``torchrun`` the
workers mark the error for the torchrun process (:mod:`pfzoo.torchrun`), which then exits with their code (2, or 3
for a divergence) and the one line alone;
``pfzoo-torchrun`` (``python -m pfzoo torchrun``, :func:`torchrun_main`) does the same without the installed entry point. ``python -m pfzoo
--help`` lists the commands (:data:`COMMANDS`), ``--version`` names the version; a ``-m`` sweep ends with a table of its
jobs (:mod:`pfzoo.app.sweep`), printed and written as ``summary.csv`` in the sweep's folder.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Iterator, NoReturn, Sequence

import hydra
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra._internal.utils import get_args_parser
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, ValueType
from hydra.errors import HydraException, OverrideParseException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from pfzoo import app, cli_hints, distributed
from pfzoo import torchrun as torchrun_promise
from pfzoo import zoo
from pfzoo.app import config_dir, sweep
from pfzoo.app.zoo_listing import zoo_listing
from pfzoo.training.divergence import TrainingDiverged

TASKS = ("train", "evaluate", "sample")
COMMANDS = {  # pfzoo's (= python -m pfzoo's) commands, one line each; pfzoo-train and pfzoo-evaluate are the same commands
    "train": "train an energy-based model with one of pfzoo's trainers (a run folder with checkpoint, metrics, log, pictures)",
    "evaluate": "measure a model's test log-likelihood (log Z estimated or exact) from a checkpoint or the zoo",
    "sample": "draw samples from a zoo model or a checkpoint with a seed: samples.pt and a samples.png grid",
    "zoo": "list the pretrained zoo: name, family, data, test log-likelihood, parameters, file size (alias: list)",
    "torchrun": "torchrun with the one-line error promise kept: python -m pfzoo torchrun [options] scripts/train.py ...",
}
ALIASES = {"list": "zoo"}
USER_ERRORS = (ValueError, FileNotFoundError, NotImplementedError, FloatingPointError, HydraException, OmegaConfBaseException)
EXIT_USAGE = torchrun_promise.EXIT_USAGE  # what a user error exits with, under torchrun too
EXIT_DIVERGED = torchrun_promise.EXIT_DIVERGED  # training diverged and was stopped: the checkpoint holds the last good parameters

logger = logging.getLogger("pfzoo")


def one_line(error: BaseException) -> str:
    """``error`` as one line: the message of the outermost exception that is not Hydra's wrapper of a user error (Hydra
    wraps a constructor's ``ValueError`` and an override's OmegaConf error in lines of context). pfzoo's own message
    wins over the causes it was raised from: it names the file or argument, where an OS or torch error beneath it
    does not; so does Hydra's where its cause is no user error (a ``TypeError`` in a sweep's ``range(...)``)."""
    while isinstance(error, HydraException) and isinstance(error.__cause__, USER_ERRORS):
        error = error.__cause__
    text = str(error).split("Config search path")[0]  # Hydra appends every search path: noise on one line
    text = " ".join(text.split())
    return text or type(error).__name__


def compose(task: str, overrides: Sequence[str] = ()) -> DictConfig:
    """The composed config of ``task`` (one of :data:`TASKS`) with command-line ``overrides``, recording Hydra's choice
    of ``conf/model`` option in ``model_config_name``; raises on bad overrides, with a "did you mean" for a misspelt key
    or config option (:func:`pfzoo.cli_hints.suggest`)."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}")
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        try:
            cfg = hydra_compose(config_name=task, overrides=list(overrides), return_hydra_config=True)
        except USER_ERRORS as error:
            hint = hint_for(task, overrides)
            if hint is None:
                raise
            raise ValueError(f"{one_line(error)}; {hint}") from error
    choice = cfg.hydra.runtime.choices.get("model")
    with open_dict(cfg):
        del cfg["hydra"]  # Hydra's own settings: what hydra_compose leaves out without return_hydra_config
    cfg.model_config_name = choice
    check_booleans(cfg, overrides)
    return cfg


def hint_for(task: str, overrides: Sequence[str]) -> str | None:
    """A "did you mean" for ``overrides`` that do not compose, from the config they would change (the group choices
    alone composed; none when those fail too and no group option is close)."""
    directory = config_dir()
    choices = cli_hints.group_choices(overrides, directory)
    hint = cli_hints.suggest(OmegaConf.create(), directory, choices)  # a misspelt group option first: model=rbmm
    if hint is not None:
        return hint
    with contextlib.suppress(*USER_ERRORS):
        return cli_hints.suggest(hydra_compose(config_name=task, overrides=choices), directory, overrides)
    return None


def check_booleans(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """Refuse ``key=2`` for a boolean setting (the typed schema would turn any integer into True) naming the key."""
    for override in overrides:
        key, separator, value = override.lstrip("+~").partition("=")
        if not separator or key.startswith("hydra."):
            continue
        node = OmegaConf.select(cfg, key, default=None, throw_on_missing=False)
        if isinstance(node, bool) and value.strip().lower() not in ("true", "false"):
            raise ValueError(f"{key} must be true or false, got {value!r}")


def execute(task: str, cfg: DictConfig, summary: list[dict] | None = None) -> int:
    """Run ``task`` on a composed config, print its report; 0 on success, :data:`EXIT_USAGE` with one line on a user
    error. Under a ``-m`` sweep, ``summary`` gets the job's row (:mod:`pfzoo.app.sweep`): its number, overrides and
    headline numbers, or its error."""
    row: dict = {}
    if HydraConfig.initialized():  # under hydra.main: the job's own folder (a sweep's jobs each get one) and model choice
        with open_dict(cfg):
            cfg.run_dir = HydraConfig.get().runtime.output_dir
            cfg.model_config_name = HydraConfig.get().runtime.choices.get("model")
        if summary is not None:  # a sweep's job (a single run has no job number)
            row = {"job": HydraConfig.get().job.num, "overrides": list(HydraConfig.get().overrides.task)}
    try:
        result = {"train": app.train, "evaluate": app.evaluate, "sample": app.sample}[task](cfg)
    except TrainingDiverged as diverged:
        message = one_line(diverged)
        if diverged.result is not None and distributed.rank() == 0:
            print(app.format_training(diverged.result))
        report_error(message)
        if summary is not None:
            summary.append({**row, "error": message})
        return EXIT_DIVERGED
    except USER_ERRORS as error:
        message = one_line(error)
        if HydraConfig.initialized() and distributed.rank() == 0:  # Hydra made the folder and wrote its files before the job
            remove_empty_run(Path(cfg.run_dir), task)
        report_error(message)
        if summary is not None:
            summary.append({**row, "error": message})
        return EXIT_USAGE
    if summary is not None:
        summary.append({**row, **sweep.headline(task, result)})
    if distributed.rank() != 0:  # under torchrun every rank holds the gathered result; one reports it
        return 0
    if task == "train":
        print(app.format_training(result))
    elif task == "sample":
        print(app.format_sampling(result))
    else:
        output = Path(cfg.run_dir) / cfg.output
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, indent=2) + "\n")
        print(app.format_evaluation(result))
        print(f"results written to {output}")
    return 0


def remove_empty_run(run_dir: Path, task: str) -> None:
    """Remove the folder of a run that failed before producing anything: one holding only what Hydra writes before the
    job starts (``.hydra/`` and ``<task>.log``), so that failed commands leave no run folders with a log alone (the
    error itself is on stderr). A folder with anything else in it (a resumed run's checkpoint, the user's files) is
    left as it is."""
    if not run_dir.is_dir() or any(path.name not in (".hydra", f"{task}.log") for path in run_dir.iterdir()):
        return
    with contextlib.suppress(OSError):
        shutil.rmtree(run_dir)


def report_error(message: str) -> None:
    """Print ``error: message`` once: under torchrun every rank meets the same error, rank 0 prints it, and all wait
    until it has (torchrun stops the other ranks as soon as one exits with an error)."""
    if distributed.rank() == 0:
        print(f"error: {message}", file=sys.stderr)
    torchrun_promise.mark_user_error(message)
    distributed.synchronize()


def check_overrides(task: str, argv: Sequence[str]) -> argparse.Namespace:
    """Hydra's reading of ``argv`` (its flags and overrides); raise a user error (:data:`USER_ERRORS`) when ``argv`` does not compose, before any work: Hydra's flags out of
    order, malformed overrides, unknown keys or group options, values of the wrong type. Each value of a ``-m`` sweep is
    checked alone (``model=rbm,nosuch`` fails before ``rbm`` trains); combinations that fail only together are caught
    as Hydra composes their job (:func:`run`). Overrides of Hydra's own settings (``hydra.*``) and another config
    (``--config-name``) are left to Hydra."""
    parser = get_args_parser()
    parser.error = refuse_flags  # argparse would print its usage (a dozen lines) and exit 2 itself
    args = parser.parse_args(list(argv))
    if args.config_name or args.config_path or args.config_dir or args.shell_completion:
        return args  # -sc's "overrides" are Hydra's completion commands (install=bash, query=...), not config keys
    parsed = [override for override in map(parse_override, args.overrides) if not override.is_hydra_override()]
    fixed = [override.input_line for override in parsed if not override.is_sweep_override()]
    if not args.multirun:
        cfg = compose(task, [override.input_line for override in parsed])
        OmegaConf.to_container(cfg, resolve=True)
        if not distributed.is_active():  # under torchrun rank 0 checks the run directory for all (rank_overrides)
            check_run_dir(cfg.run_dir)
        return args
    cfg = compose(task, fixed)
    OmegaConf.to_container(cfg, resolve=True)
    if not distributed.is_active():
        check_run_dir(cfg.run_dir)
    for override in parsed:
        if override.is_choice_sweep() and override.value_type != ValueType.GLOB_CHOICE_SWEEP:
            values = list(override.sweep_string_iterator())
        elif override.is_range_sweep():
            values = list(itertools.islice(override.sweep_string_iterator(), 1))  # numbers of one kind: the first stands for all
        else:
            continue  # a glob or an interval: only a sweeper plugin enumerates it
        for value in values:
            OmegaConf.to_container(compose(task, [*fixed, f"{override.get_key_element()}={value}"]), resolve=True)
    return args


def check_run_dir(run_dir: str) -> None:
    """Refuse, naming it, a ``run_dir`` that cannot be made a folder (a file on its path, no permission) before Hydra
    makes it with a traceback; the folders made to find out are removed again (``--cfg`` and a refused run leave none)."""
    path = Path(run_dir)
    missing = [folder for folder in (path, *path.parents) if not folder.exists()]  # the deepest first
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"run_dir={run_dir} cannot be made a folder: {error.strerror or error}") from error
    finally:
        for folder in missing:
            with contextlib.suppress(OSError):
                folder.rmdir()


def parse_override(text: str) -> Override:
    """``text`` (``key=value``) parsed by Hydra's override grammar; a user error naming it when it does not parse
    (Hydra's own message quotes only the offending token)."""
    try:
        return OverridesParser.create().parse_overrides([text])[0]
    except OverrideParseException as error:
        raise ValueError(f"cannot parse the override {text!r}: {one_line(error)}") from error


def refuse_flags(message: str) -> NoReturn:
    """argparse's complaint about the command line's flags as a user error: Hydra's flags (``-m``, ``--cfg``, ...) come
    before the ``key=value`` overrides."""
    raise ValueError(f"{message} (Hydra's flags such as -m/--multirun must come before the key=value overrides)")


def run(task: str, argv: Sequence[str]) -> NoReturn:
    """The command line of ``task``: Hydra's (``-m`` sweeps, ``--cfg``, overrides) over the packaged configs, with
    overrides checked first so that a typo exits 2 in one line; exits with the largest of the jobs' :func:`execute`
    codes. Every user error, Hydra's own included, is reported by :func:`report_error` in one line (exit
    :data:`EXIT_USAGE`); anything else is a bug and keeps its traceback. Started by ``torchrun``, both tasks join the
    process group (:func:`pfzoo.distributed.initialize`): evaluate's estimators shard their chains across the ranks,
    train's :class:`~pfzoo.training.Trainer` shards every minibatch; rank 0 alone reports."""
    if distributed.launched():
        distributed.initialize()
    codes: list[int] = []
    summary: list[dict] = []  # a -m sweep's rows, one per job (pfzoo.app.sweep)
    sweep_dir: list[str] = []
    try:
        if task not in TASKS:
            raise ValueError(cli_hints.unknown_command(task, [*COMMANDS, *ALIASES]))
        word = cli_hints.completion_query(task, argv)
        if word is not None:  # Hydra completes a plain key's value with its current one; zoo names come from the zoo
            print(cli_hints.complete_zoo_names(word, zoo.list_pretrained()))
            sys.exit(0)
        if "--version" in argv:  # Hydra's own --version names only Hydra's
            print(version())
            sys.exit(0)
        args = check_overrides(task, argv)
        if distributed.is_active():
            argv = [*argv, *rank_overrides(task, argv)]

        @hydra.main(version_base="1.3", config_path=str(config_dir()), config_name=task)
        def job(cfg: DictConfig) -> None:
            if args.multirun:
                sweep_dir[:] = [HydraConfig.get().sweep.dir]
            codes.append(execute(task, cfg, summary if args.multirun else None))  # a sweep runs every job in this process: exiting here would end it

        sys.argv = [sys.argv[0], *argv]
        with hydra_raises():
            job()
        if args.multirun and not codes and not any((args.cfg, args.help, args.hydra_help, args.info, args.shell_completion)):
            sweeps = [arg for arg in args.overrides if "(" in arg or "," in arg]
            raise ValueError(f"the -m sweep launched no job: {' '.join(sweeps) or 'its overrides'} enumerate no value")
        if summary and distributed.rank() == 0:
            print(sweep.format_summary(summary))
            print(f"summary written to {sweep.write_summary(sweep_dir[0], summary)}")
    except USER_ERRORS as error:
        report_error(one_line(error))
        codes.append(EXIT_USAGE)
    finally:
        distributed.shutdown()
    code = max(codes, default=0)
    if code and distributed.launched():
        # every rank passed report_error's barrier together: leave now, all alike, before the elastic agent sees the
        # first one gone and stops the others with SIGTERM while the interpreter winds down (seconds with torch loaded)
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


@contextlib.contextmanager
def hydra_raises() -> Iterator[None]:
    """Within this context Hydra raises its errors (a sweep's job that does not compose, an unknown ``--config-name``)
    instead of printing several lines and exiting 1 itself, so that :func:`run` reports them as it reports the others
    (``HYDRA_FULL_ERROR=1`` is Hydra's documented switch; the user's own setting comes back afterwards)."""
    before = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["HYDRA_FULL_ERROR"]
        else:
            os.environ["HYDRA_FULL_ERROR"] = before


def rank_overrides(task: str, argv: Sequence[str]) -> list[str]:
    """Overrides that make torchrun's ranks one run: rank 0's run directory for all (``${now:...}`` could differ between
    ranks; refused on every rank when it cannot be made), and Hydra's config copies and log files from rank 0 only."""
    overrides = [arg for arg in argv if "=" in arg and not arg.startswith(("-", "hydra.")) and "," not in arg.split("=", 1)[1]]
    run_dir: list[str | None] = [None, None]  # [rank 0's run directory, why it cannot be made]
    if distributed.rank() == 0:  # one rank probes it: another's probe could remove the folders this one is making
        run_dir[0] = str(compose(task, overrides).run_dir)
        try:
            check_run_dir(run_dir[0])
        except ValueError as error:
            run_dir[1] = str(error)
    distributed.broadcast_from_first(run_dir)
    if run_dir[1] is not None:
        raise ValueError(run_dir[1])
    quiet = [] if distributed.rank() == 0 else ["hydra.output_subdir=null", "hydra/job_logging=disabled", "hydra/hydra_logging=disabled"]
    return [f"run_dir={run_dir[0]}", *quiet]


def torchrun_main(argv: Sequence[str] | None = None) -> NoReturn:
    """``pfzoo-torchrun [torchrun options] scripts/train.py [key=value ...]``: ``torchrun`` with the one-line promise
    kept where pfzoo's ``torchrun.handlers`` entry point is not installed (:mod:`pfzoo.torchrun`, which keeps it under
    plain ``torchrun`` otherwise): a run that failed with a user error the workers reported exits 2 without torchrun's
    traceback and without the agent's notes on the stopped workers; any other failure keeps torchrun's report."""
    from torch.distributed.run import parse_args
    from torch.distributed.run import run as torchrun

    torchrun_promise.keep_promise()  # its exception hook ends a failed run, as under plain torchrun
    torchrun(parse_args(list(sys.argv[1:] if argv is None else argv)))
    sys.exit(0)


def version() -> str:
    """``pfzoo <version> (Hydra <version>, torch <version>)``: what ``--version`` prints."""
    import torch

    from pfzoo import __version__

    return f"pfzoo {__version__} (Hydra {hydra.__version__}, torch {torch.__version__})"


def usage() -> str:
    """``python -m pfzoo --help``: the app in a sentence and its commands, one line each."""
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {text}" for name, text in COMMANDS.items()]
    return "\n".join([
        "pfzoo: energy-based models with intractable partition functions: train them, estimate their log Z and "
        "test log-likelihood.",
        "",
        "usage: pfzoo COMMAND [-m] [key=value ...]   (= python -m pfzoo COMMAND; pfzoo-train / pfzoo-evaluate / pfzoo-torchrun)",
        "",
        "commands:",
        *lines,
        "",
        "pfzoo COMMAND --help describes a command and its configuration; --version prints the version.",
        "Zoo names complete after pretrained= and versus= once Hydra's completion is installed: eval \"$(pfzoo-evaluate -sc install=bash)\".",
    ])


def main(argv: Sequence[str]) -> NoReturn:
    """``python -m pfzoo COMMAND ...``: ``--help`` / ``-h`` and ``--version`` before any command, else the command
    (an unknown one is a user error in one line like any other)."""
    if argv[:1] in (["--help"], ["-h"]):
        print(usage())
        sys.exit(0)
    if argv[:1] == ["--version"]:
        print(version())
        sys.exit(0)
    if argv[:1] == ["torchrun"]:
        torchrun_main(argv[1:])
    if argv and ALIASES.get(argv[0], argv[0]) == "zoo":
        try:
            print(zoo_listing(argv[1:]))
        except USER_ERRORS as error:
            report_error(one_line(error))
            sys.exit(EXIT_USAGE)
        sys.exit(0)
    if not argv:
        report_error(f"a command is needed: one of {', '.join(COMMANDS)} (python -m pfzoo --help describes them)")
        sys.exit(EXIT_USAGE)
    run(argv[0], argv[1:])


def console_main() -> None:
    """``pfzoo COMMAND ...`` (the ``pfzoo`` console script): :func:`main` on the command line."""
    main(sys.argv[1:])


def train_main() -> None:
    """``pfzoo-train [key=value ...]``."""
    run("train", sys.argv[1:])


def evaluate_main() -> None:
    """``pfzoo-evaluate [key=value ...]``."""
    run("evaluate", sys.argv[1:])
