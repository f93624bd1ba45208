"""Checkpoints: save and load models as registry name + constructor config + ``state_dict``, never a pickled module.

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
from pathlib import Path
from typing import Any

import torch

from pfzoo.models.base import EnergyModel
from pfzoo.models.registry import model_class

FORMAT = "pfzoo-checkpoint-1"
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
