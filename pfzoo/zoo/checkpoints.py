"""Checkpoint files: save and load a model as registry name + constructor config + ``state_dict``, never a pickled
module (layout in :mod:`pfzoo.zoo`); the run config made portable; a file's SHA-256."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from pfzoo.models.base import EnergyModel
from pfzoo.models.registry import is_registered_model, model_class
from pfzoo.validation import MODEL_DTYPES, all_finite

FORMAT = "pfzoo-checkpoint-1"
CHECKPOINT_FILE = "checkpoint.pt"
_PLAIN_SCALARS = (str, int, float, bool, type(None))


def save(
    model: EnergyModel,
    path: str | os.PathLike,
    *,
    config: dict | None = None,
    trainer_state: dict | None = None,
) -> Path:
    """Write a checkpoint of ``model`` to ``path`` atomically, in ``torch.save(obj, f)``'s order; returns the path.

    The file is written to a temporary file in the same directory and moved over ``path`` with
    ``os.replace``, so an interrupted save leaves the previous checkpoint intact.
    ``config`` must consist of dicts, lists and scalars (``OmegaConf.to_container(cfg, resolve=True)``).
    The reverse order, ``save(path, model)``, and any other pair are refused in one line naming both arguments.
    """
    if isinstance(model, (str, os.PathLike)) and is_registered_model(path):
        raise ValueError(f"save(model, path) takes the model first, as torch.save(obj, f) does: got model={type(model).__name__} "
                         f"and path={type(path).__name__}; call pfzoo.zoo.save(model, path)")
    if not is_registered_model(model) or not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"save(model, path) takes an instance of a registered model class (see register_model) and then a file "
                         f"path, got model={type(model).__name__} and path={type(path).__name__} (a plain nn.Module is no pfzoo "
                         f"model: torch.save its state_dict instead)")
    if config is not None:
        if not isinstance(config, dict):
            raise ValueError(f"config must be a plain dict or None (OmegaConf.to_container(cfg, resolve=True)), got {type(config).__name__}")
        check_plain(config, "config")
    checkpoint = {
        "format": FORMAT,
        "model": type(model).registry_name,
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
    except Exception as error:  # noqa: BLE001  torch.load fails on a damaged file with a dozen types (OSError, KeyError,
        # IndexError, RuntimeError, ...), none naming the file
        # torch's first sentence only: what follows is advice about torch.load (weights_only=False) that does not apply
        detail = str(error).split(". ")[0].splitlines()[0] if str(error).strip() else "no detail"
        raise ValueError(f"{path} is not a readable {FORMAT} file (corrupt, truncated or not a checkpoint): "
                         f"{type(error).__name__}: {detail}") from error
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        found = checkpoint.get("format") if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise ValueError(f"{path} must be a checkpoint with format {FORMAT!r}, found {found!r}")
    missing = [key for key in ("model", "model_config", "state_dict") if not isinstance(checkpoint.get(key), (str, dict))]
    if missing:
        raise ValueError(f"{path} is a damaged {FORMAT} file: it lacks {', '.join(missing)}")
    return checkpoint


def load(path: str | os.PathLike, *, map_location: str | torch.device = "cpu") -> EnergyModel:
    """Rebuild the model saved at ``path``: ``model_class(name)(**model_config)``, then its ``state_dict``.

    Parameters keep their saved dtype and are placed on ``map_location``. The model comes back in eval mode (it is
    for use, not for more training; call ``.train()`` to train on). A parameter or buffer with a NaN or infinite
    value is refused: every estimate from it would be NaN.
    """
    checkpoint = load_checkpoint(path, map_location=map_location)
    state = checkpoint["state_dict"]
    for name, value in state.items():
        if torch.is_tensor(value) and value.is_floating_point() and value.device.type != "meta" and not all_finite(value):
            count = int((~torch.isfinite(value)).sum())
            raise ValueError(f"{path}: {name} has {count} non-finite value(s) (NaN or inf); the model diverged or the file is corrupt")
    try:
        cls = model_class(checkpoint["model"])
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from error
    try:
        model = cls(**checkpoint["model_config"])
    except (TypeError, ValueError) as error:  # a config the class does not take (another pfzoo version, an edited file)
        raise ValueError(f"{path}: its model_config {checkpoint['model_config']} does not build a {cls.__name__}: {error}") from error
    check_state_dict(path, model, state)
    model.load_state_dict(state, assign=True)
    return model.eval()


def check_state_dict(path: str | os.PathLike, model: EnergyModel, state: Mapping[str, Any]) -> None:
    """Refuse, in one line naming the file and the entry, a ``state`` that ``model`` (built from the file's
    ``model_config``) cannot load: a missing or unexpected entry, a shape other than the config's, or a floating-point
    parameter outside float32/float64. What ``load_state_dict`` would report in several lines of its own."""
    expected = model.state_dict()
    missing = [name for name in expected if name not in state]
    unexpected = [name for name in state if name not in expected]
    if missing or unexpected:
        raise ValueError(f"{path}: its state_dict does not match its model_config (missing: {missing or 'none'}; "
                         f"unexpected: {unexpected or 'none'})")
    for name, tensor in expected.items():
        saved = state[name]
        if not torch.is_tensor(saved):
            raise ValueError(f"{path}: state_dict entry {name} must be a tensor, got {type(saved).__name__}")
        if saved.shape != tensor.shape:
            raise ValueError(f"{path}: parameter {name} has shape {tuple(saved.shape)} in the file but its model_config "
                             f"builds {tuple(tensor.shape)}; the config and the tensors disagree")
        if tensor.is_floating_point() and saved.dtype not in MODEL_DTYPES:
            raise ValueError(f"{path}: parameter {name} has dtype {saved.dtype}; pfzoo models compute in torch.float32 or torch.float64")


def portable_config(config: Mapping[str, Any], *, base: str | os.PathLike | None = None) -> dict[str, Any]:
    """``config`` without what only made sense on the machine that trained it: no ``run_dir``, every ``root`` (data
    roots) null, and any other absolute path made relative to ``base`` (default: the current directory) when it lies
    under it, else null. Returns a new plain dict."""
    base_path = Path(base).resolve() if base is not None else Path.cwd().resolve()

    def clean(value: Any, key: str | None) -> Any:
        if isinstance(value, Mapping):
            return {k: clean(v, k) for k, v in value.items() if k != "run_dir"}
        if isinstance(value, (list, tuple)):
            return [clean(v, None) for v in value]
        if key == "root":
            return None
        if isinstance(value, str) and os.path.isabs(value):
            try:
                return Path(value).resolve().relative_to(base_path).as_posix()
            except ValueError:
                return None
        return value

    return clean(config, None)


def file_sha256(path: str | os.PathLike) -> str:
    """The hex SHA-256 of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_plain(value: Any, name: str) -> None:
    """Require nested dicts (string keys), lists/tuples and str/int/float/bool/None scalars."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{name} keys must be strings, got {key!r}")
            check_plain(item, f"{name}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_plain(item, f"{name}[{index}]")
    elif not isinstance(value, _PLAIN_SCALARS):
        raise ValueError(
            f"{name} must hold only dicts, lists and plain scalars (use OmegaConf.to_container(cfg, resolve=True)), "
            f"got {type(value).__name__}"
        )
