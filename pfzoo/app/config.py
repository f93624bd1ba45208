"""What a composed config says beyond its groups: where the configs live, the device, and which ``conf/model`` option
the model was composed from (what the zoo's lookups and ``evaluate``'s model check need)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from pfzoo import schema  # noqa: F401 (schema registers the typed configs)


def resolve_device(name: str) -> torch.device:
    """``torch.device(name)`` for ``cpu``, ``cuda`` or ``cuda:N``, with a clear error when CUDA is asked for but absent."""
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {name!r}") from error
    if device.type not in ("cpu", "cuda"):  # meta holds no values; other backends are untested
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {name!r}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={name!r} was requested but CUDA is not available on this machine; use device=cpu")
    return device


def config_dir() -> Path:
    """The Hydra config folder: ``pfzoo/conf`` in an installed wheel, the checkout's top-level ``conf/`` in an editable
    install or a plain checkout (setup.cfg maps the package ``pfzoo.conf`` onto it)."""
    spec = importlib.util.find_spec("pfzoo.conf")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(location) / "train.yaml").is_file():
            return Path(location)
    return Path(__file__).resolve().parents[2] / "conf"


def _group_config(group: str, option: str) -> dict[str, Any]:
    path = config_dir() / group / f"{option}.yaml"
    if not path.is_file():
        return {}
    config = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    config.pop("defaults", None)
    return config


def model_config_name(cfg: DictConfig) -> str | None:
    """The ``conf/model`` option ``cfg.model`` was composed from (``poe_laplace`` and ``poe_student`` share a class).

    Under ``hydra.main`` (the scripts) Hydra records the choice (``${hydra:runtime.choices.model}``); a config
    composed without it (``pfzoo.cli.compose``, tests) is matched against the model configs of the same ``_target_``:
    the one that agrees with ``cfg.model`` on the most keys. None when no model config has that ``_target_``.
    """
    model = OmegaConf.to_container(cfg.model, resolve=True)
    target = model.get("_target_")
    if HydraConfig.initialized():
        choice = HydraConfig.get().runtime.choices.get("model")
        if choice is not None and _group_config("model", choice).get("_target_") == target:
            return choice
    best, best_score = None, -1
    for path in sorted((config_dir() / "model").glob("*.yaml")):
        config = _group_config("model", path.stem)
        if config.get("_target_") != target:
            continue
        score = sum(1 for key, value in config.items() if key in model and model[key] == value)
        if score > best_score:
            best, best_score = path.stem, score
    return best


def _default_choice(task: str, group: str) -> str | None:
    defaults = OmegaConf.to_container(OmegaConf.load(config_dir() / f"{task}.yaml")).get("defaults", [])
    return next((entry[group] for entry in defaults if isinstance(entry, dict) and group in entry), None)


def model_was_chosen(cfg: DictConfig) -> bool:
    """Whether the user picked ``model=...``: Hydra's overrides under ``hydra.main``; without them (a composed config),
    whether the model config differs from ``evaluate.yaml``'s default (so an explicit ``model=rbm`` reads as the default)."""
    if HydraConfig.initialized():
        overrides = HydraConfig.get().overrides.task
        if HydraConfig.get().runtime.choices.get("model") == model_config_name(cfg):
            return any(override.split("=", 1)[0].lstrip("+~") == "model" for override in overrides)
    return model_config_name(cfg) != _default_choice("evaluate", "model")
