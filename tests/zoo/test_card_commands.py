"""Every command a zoo card gives runs where its reader is (issue 50): the installed entry points (``pfzoo train``,
``pfzoo-evaluate``, ...) for what the package installs, composing with the packaged configs; a checkout's
``python scripts/...`` only for scripts that exist and have no installed command, and said to need a checkout."""

import configparser
import json
import re
import shlex
from pathlib import Path

import pytest

from pfzoo import cli
from pfzoo.zoo.cards import CHECKOUT_NOTE, command_markdown

REPO = Path(__file__).resolve().parents[2]
CARDS = sorted(folder for folder in (REPO / "models").iterdir() if (folder / "card.json").is_file())
INSTALLED_TASKS = {"pfzoo-train": "train", "pfzoo-evaluate": "evaluate"}


def console_scripts() -> set[str]:
    """The console scripts setup.cfg installs (``pfzoo``, ``pfzoo-train``, ...)."""
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    lines = config["options.entry_points"]["console_scripts"].strip().splitlines()
    return {line.split("=")[0].strip() for line in lines}


def readme_commands(text: str) -> list[tuple[str, str]]:
    """``(command, what follows it)`` for every backticked shell command of a README (``pfzoo.zoo...`` is Python)."""
    found = []
    for match in re.finditer(r"`([^`]+)`", text):
        command = match.group(1)
        if re.match(r"(pfzoo[ -]|pfzoo$|python )", command):
            found.append((command, text[match.end():match.end() + len(CHECKOUT_NOTE) + 3]))
    return found


def card_json_commands(value) -> list[str]:
    """Every ``"command"`` string anywhere in a card.json."""
    if isinstance(value, dict):
        return [c for key, item in value.items() for c in ([item] if key == "command" and isinstance(item, str) else card_json_commands(item))]
    if isinstance(value, list):
        return [c for item in value for c in card_json_commands(item)]
    return []


def check_command(command: str, scripts: set[str]) -> None:
    """``command`` names an installed entry point (and composes, for the app's tasks) or an existing checkout script."""
    words = shlex.split(command)
    if words[0] == "python":
        assert words[1].startswith("scripts/") and (REPO / words[1]).is_file(), f"{command}: no such script"
        return
    assert words[0] in scripts, f"{command}: {words[0]} is no installed entry point ({sorted(scripts)})"
    if words[0] == "pfzoo":
        task = cli.ALIASES.get(words[1], words[1])
        assert task in cli.COMMANDS, f"{command}: pfzoo has no command {words[1]}"
        arguments = words[2:]
    else:
        task, arguments = INSTALLED_TASKS.get(words[0]), words[1:]
    if task in cli.TASKS:
        cli.compose(task, arguments)  # the packaged configs take its overrides (raises otherwise)


@pytest.mark.parametrize("folder", CARDS, ids=[folder.name for folder in CARDS])
def test_every_command_of_a_card_names_an_installed_entry_point_or_a_checkout_script(folder):
    scripts = console_scripts()
    readme = readme_commands((folder / "README.md").read_text())
    assert readme, f"{folder.name}: its README gives no command"
    for command, after in readme:
        check_command(command, scripts)
        if command.startswith("python "):
            # train.py and evaluate.py have installed commands; any other script is marked as needing a checkout
            assert not command.startswith(("python scripts/train.py", "python scripts/evaluate.py")), f"{folder.name}: {command}"
            assert after.startswith(f" ({CHECKOUT_NOTE})"), f"{folder.name}: {command} is not said to need a checkout"
    assert any(command.startswith("pfzoo train ") for command, _ in readme), f"{folder.name}: no installed training command"
    for command in card_json_commands(json.loads((folder / "card.json").read_text())):
        check_command(command, scripts)


def test_a_card_shows_the_installed_form_of_a_checkout_command():
    assert command_markdown("python scripts/train.py +experiment=zoo_rbm") == "`pfzoo train +experiment=zoo_rbm`"
    assert command_markdown("python scripts/evaluate.py pretrained=rbm-digits") == "`pfzoo evaluate pretrained=rbm-digits`"
    assert command_markdown("python scripts/dbm_depth.py") == f"`python scripts/dbm_depth.py` ({CHECKOUT_NOTE})"
    assert command_markdown("pfzoo zoo") == "`pfzoo zoo`"


def test_the_check_fails_on_a_missing_script_entry_point_or_override():
    scripts = console_scripts()
    for command in ("python scripts/nosuch.py", "pfzoo-nosuch x=1", "pfzoo nosuch", "pfzoo train +experiment=nosuch"):
        with pytest.raises(Exception):
            check_command(command, scripts)
