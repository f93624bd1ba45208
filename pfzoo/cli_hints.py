"""Hints for the command line: "did you mean ...?" for a misspelt key, config option or command (:mod:`difflib`), and
the shell completion of zoo names after ``pretrained=`` and ``versus=``, which Hydra's completion cannot offer (it
completes a plain key's value with the value it has, ``null``)."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig

ZOO_KEYS = {"evaluate": ("pretrained", "versus"), "sample": ("pretrained",)}
"""Each command's keys whose values are zoo names, completed from the zoo (``train`` has none)."""


def close(word: str, choices: Sequence[str]) -> str | None:
    """The choice nearest ``word`` by :func:`difflib.get_close_matches` (ratio ≥ 0.6), or ``None``."""
    found = difflib.get_close_matches(word, list(choices), n=1)
    return found[0] if found else None


def group_options(config_dir: Path, group: str) -> list[str]:
    """The options of the config group ``group`` (the ``.yaml`` files in ``<config_dir>/<group>``), sorted."""
    return sorted(path.stem for path in (config_dir / group).glob("*.yaml"))


def suggest(base: DictConfig, config_dir: Path, overrides: Sequence[str]) -> str | None:
    """``did you mean KEY=VALUE?`` for the first of ``overrides`` that names no key of ``base`` (the composed config
    without the dotted overrides) or no option of its config group, when a close one exists; else ``None``."""
    for override in overrides:
        key, separator, value = override.lstrip("+~").partition("=")
        if not separator or key.startswith("hydra."):
            continue
        if "." not in key and (config_dir / key).is_dir():  # a group choice: model=rbmm, +experiment=zoo_rmb
            options = group_options(config_dir, key)
            nearest = None if value in options else close(value, options)
            if nearest is not None:
                return f"did you mean {override.split('=', 1)[0]}={nearest}?"
            continue
        node, path = base, []
        for part in key.split("."):
            if not isinstance(node, DictConfig) or part in node:
                node = node[part] if isinstance(node, DictConfig) else None
                path.append(part)
                continue
            nearest = close(part, [str(name) for name in node.keys()])
            if "." not in key and nearest is not None and (config_dir / nearest).is_dir():
                # a key close to a config group's name (pretrained=rbm-digits → trainer): a hint only when the value is one of its options
                nearest = nearest if value in group_options(config_dir, nearest) else None
            if nearest is not None:
                fixed = ".".join([*path, nearest, *key.split(".")[len(path) + 1:]])
                return f"did you mean {fixed}={value}?"
            break
    return None


def group_choices(overrides: Sequence[str], config_dir: Path) -> list[str]:
    """The config-group choices among ``overrides`` (``model=dbm``, ``+experiment=zoo_rbm``): what the base config of
    :func:`suggest` composes with, so that ``model.num_hiden`` is looked up in the chosen model's config."""
    return [override for override in overrides
            if "=" in override and "." not in (key := override.split("=", 1)[0].lstrip("+~")) and (config_dir / key).is_dir()]


def completion_query(task: str, argv: Sequence[str]) -> str | None:
    """The word being completed when ``argv`` is Hydra's completion query (``-sc query=bash`` with ``COMP_LINE`` set)
    for ``task`` and that word is one of its :data:`ZOO_KEYS` (``pretrained=...``, ``versus=...``); else ``None``
    (Hydra answers the query itself)."""
    flags = list(argv)
    asked = any(flag in ("-sc", "--shell-completion") for flag in flags) and any(flag.startswith("query=") for flag in flags)
    line = os.environ.get("COMP_LINE")
    if not asked or line is None or line.endswith(" "):
        return None
    word = line.split()[-1]
    return word if word.partition("=")[0] in ZOO_KEYS.get(task, ()) else None


def complete_zoo_names(word: str, names: Sequence[str]) -> str:
    """Hydra's answer format (space-separated words) for ``word`` = ``key=prefix``: every ``key=NAME`` that starts so."""
    key, _, prefix = word.partition("=")
    return " ".join(f"{key}={name}" for name in names if name.startswith(prefix))


def unknown_command(command: str, commands: Sequence[str]) -> str:
    """The one line for a command pfzoo does not have, with the nearest one where there is one."""
    nearest = close(command, commands)
    hint = f"; did you mean {nearest}?" if nearest else ""
    return f"unknown command {command!r}{hint} (commands: {', '.join(commands)}; python -m pfzoo --help describes them)"

