"""Checkpoints: save and load models as registry name + constructor config + ``state_dict``, never a pickled module;
export a trained model into a zoo folder with its model card.

A checkpoint is a ``torch.save``d dict of tensors and plain Python values, so it loads with
``torch.load(..., weights_only=True)`` and loading one never runs arbitrary code::

    {
        "format": "pfzoo-checkpoint-1",
        "model": str,               # registry name, e.g. "rbm"
        "model_config": dict,       # model.config(): constructor keyword arguments
        "state_dict": dict,         # model.state_dict()
        "config": dict | None,      # resolved Hydra config of the run, as plain containers
        "trainer_state": dict | None,  # what the Trainer needs to resume (see pfzoo.training.Trainer)
    }
"""

from __future__ import annotations

import os
import pickle
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pfzoo.models.base import EnergyModel
from pfzoo.models.registry import model_class

FORMAT = "pfzoo-checkpoint-1"
CHECKPOINT_FILE = "checkpoint.pt"
CARD_FILE = "README.md"
_PLAIN_SCALARS = (str, int, float, bool, type(None))


def save(
    path: str | os.PathLike,
    model: EnergyModel,
    *,
    config: dict | None = None,
    trainer_state: dict | None = None,
) -> Path:
    """Write a checkpoint of ``model`` to ``path`` atomically; returns the path.

    The file is written to a temporary file in the same directory and moved over ``path`` with
    ``os.replace``, so an interrupted save leaves the previous checkpoint intact.
    ``config`` must consist of dicts, lists and scalars (``OmegaConf.to_container(cfg, resolve=True)``).
    """
    name = getattr(type(model), "registry_name", None)
    if name is None or model_class(name) is not type(model):
        raise ValueError(f"model must be an instance of a registered model class (see register_model), got {type(model).__name__}")
    if config is not None:
        if not isinstance(config, dict):
            raise ValueError(f"config must be a plain dict or None (OmegaConf.to_container(cfg, resolve=True)), got {type(config).__name__}")
        _check_plain(config, "config")
    checkpoint = {
        "format": FORMAT,
        "model": name,
        "model_config": model.config(),
        "state_dict": model.state_dict(),
        "config": config,
        "trainer_state": trainer_state,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as file:
            torch.save(checkpoint, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | os.PathLike, *, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The raw checkpoint dict at ``path`` (layout in the module docstring), tensors on ``map_location``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint file at {path}")
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as error:
        raise ValueError(f"{path} is not a readable {FORMAT} file: {error}") from error
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        found = checkpoint.get("format") if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise ValueError(f"{path} must be a checkpoint with format {FORMAT!r}, found {found!r}")
    return checkpoint


def load(path: str | os.PathLike, *, map_location: str | torch.device = "cpu") -> EnergyModel:
    """Rebuild the model saved at ``path``: ``model_class(name)(**model_config)``, then its ``state_dict``.

    Parameters keep their saved dtype and are placed on ``map_location``.
    """
    checkpoint = load_checkpoint(path, map_location=map_location)
    model = model_class(checkpoint["model"])(**checkpoint["model_config"])
    model.load_state_dict(checkpoint["state_dict"], assign=True)
    return model


def folder_name(family: str, dataset: str, variant: str | None = None) -> str:
    """A zoo folder's name: ``<family>-<dataset>``, or ``<family>-<dataset>-<variant>`` for one of several models of a
    family on a data set (e.g. ``rbm-binarized_mnist-cd1-20``). The app's pretrained lookup uses ``<family>-<dataset>``."""
    for name, value in (("family", family), ("dataset", dataset), ("variant", variant)):
        if value is not None and (not isinstance(value, str) or not value or "/" in value or value != value.strip()):
            raise ValueError(f"{name} must be a non-empty name without '/' or surrounding spaces, got {value!r}")
    return f"{family}-{dataset}" if variant is None else f"{family}-{dataset}-{variant}"


@dataclass(frozen=True)
class ModelCard:
    """A zoo folder's ``README.md``: what the model is, how it was made, what was measured.

    title: the heading (without ``#``). summary: a paragraph under it. facts: ``(name, value)`` rows of a two-column
    table (architecture, data, training command, file, ...). sections: ``(heading, markdown body)`` pairs, each
    rendered as a ``##`` section. Values are markdown and written as given.
    """

    title: str
    summary: str = ""
    facts: Sequence[tuple[str, str]] = ()
    sections: Sequence[tuple[str, str]] = ()

    def render(self) -> str:
        """The card as markdown: blocks separated by blank lines, ending in one newline."""
        blocks = [f"# {self.title}"]
        if self.summary:
            blocks.append(self.summary)
        if self.facts:
            blocks.append("\n".join(["| | |", "|---|---|", *(f"| {name} | {value} |" for name, value in self.facts)]))
        blocks += [f"## {heading}\n\n{body.strip()}" for heading, body in self.sections]
        return "\n\n".join(block.strip("\n") for block in blocks) + "\n"


def export(checkpoint: str | os.PathLike, folder: str | os.PathLike, *, card: ModelCard | str | None = None) -> Path:
    """Put the model of ``checkpoint`` into the zoo folder ``folder``; returns ``<folder>/checkpoint.pt``.

    The zoo's copy holds the model and the run's config but no trainer state (no optimiser state or persistent
    chains): what users load, not what resumes training. When ``checkpoint`` already is ``<folder>/checkpoint.pt``
    it is left untouched, so a card can be rewritten without rewriting the weights. ``card`` (a
    :class:`ModelCard` or markdown text) is written to ``<folder>/README.md``; ``None`` leaves any card there as is.
    """
    source, folder = Path(checkpoint), Path(folder)
    target = folder / CHECKPOINT_FILE
    if not (target.is_file() and source.resolve() == target.resolve()):
        save(target, load(source), config=load_checkpoint(source)["config"])
    if card is not None:
        if not isinstance(card, (ModelCard, str)):
            raise ValueError(f"card must be a ModelCard, markdown text or None, got {type(card).__name__}")
        (folder / CARD_FILE).write_text(card.render() if isinstance(card, ModelCard) else card)
    return target


def _check_plain(value: Any, name: str) -> None:
    """Require nested dicts (string keys), lists/tuples and str/int/float/bool/None scalars."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{name} keys must be strings, got {key!r}")
            _check_plain(item, f"{name}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_plain(item, f"{name}[{index}]")
    elif not isinstance(value, _PLAIN_SCALARS):
        raise ValueError(
            f"{name} must hold only dicts, lists and plain scalars (use OmegaConf.to_container(cfg, resolve=True)), "
            f"got {type(value).__name__}"
        )
