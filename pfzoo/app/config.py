"""What a composed config means beyond its groups: where the configs live, the device, and whether the user chose the
``conf/model`` option it records in ``model_config_name`` (:func:`pfzoo.cli.compose` and the scripts record Hydra's
choice there; ``evaluate`` needs it to pick a zoo model and to check a checkpoint against ``model=...``)."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from pfzoo import schema  # noqa: F401 (schema registers the typed configs)
from pfzoo.data.subsets import describe_subset, subset_rows

logger = logging.getLogger(__name__)


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


def _default_choice(task: str, group: str) -> str | None:
    defaults = OmegaConf.to_container(OmegaConf.load(config_dir() / f"{task}.yaml")).get("defaults", [])
    return next((entry[group] for entry in defaults if isinstance(entry, dict) and group in entry), None)


def model_was_chosen(cfg: DictConfig) -> bool:
    """Whether the user picked ``model=...``: Hydra's overrides under ``hydra.main``; without them (a composed config),
    whether ``cfg.model_config_name`` differs from ``evaluate.yaml``'s default (so an explicit ``model=rbm`` reads as the
    default). False when the config does not record its model config (composed without :func:`pfzoo.cli.compose`)."""
    chosen = cfg.model_config_name
    if chosen is None:
        return False
    if HydraConfig.initialized() and HydraConfig.get().runtime.choices.get("model") == chosen:
        return any(override.split("=", 1)[0].lstrip("+~") == "model" for override in HydraConfig.get().overrides.task)
    return chosen != _default_choice("evaluate", "model")


def _model_default(cfg: DictConfig, group: str) -> str | None:
    """The option of ``group`` an evaluation gets without the user's choice: the override of ``/<group>`` in the
    ``conf/model`` file the config records, else ``evaluate.yaml``'s default."""
    default = _default_choice("evaluate", group)
    model_file = config_dir() / "model" / f"{cfg.model_config_name}.yaml"
    if cfg.model_config_name is not None and model_file.is_file():
        for entry in OmegaConf.to_container(OmegaConf.load(model_file)).get("defaults", []):
            if isinstance(entry, dict):
                default = next((value for key, value in entry.items() if key.startswith(f"override /{group}")), default)
    return default


def dataset_settings_chosen(cfg: DictConfig) -> list[str]:
    """The ``dataset.*`` keys the user set, ``root`` aside (where files live is no setting of the data): Hydra's
    overrides under ``hydra.main``; without them (a composed config), the keys whose values differ from the default data
    set of the model config it records, when ``cfg.dataset`` builds that data set."""
    if HydraConfig.initialized():
        keys = [override.split("=", 1)[0].lstrip("+~") for override in HydraConfig.get().overrides.task]
        return [key.split(".", 1)[1] for key in keys if key.startswith("dataset.") and key != "dataset.root"]
    default = OmegaConf.to_container(OmegaConf.load(config_dir() / "dataset" / f"{_model_default(cfg, 'dataset')}.yaml"))
    chosen = OmegaConf.to_container(cfg.dataset)
    if chosen.get("_target_") != default.get("_target_"):
        return []
    return [key for key in chosen if key != "root" and chosen[key] != default.get(key)]


def estimator_was_chosen(cfg: DictConfig) -> bool:
    """Whether the user set ``estimator=...`` or any ``estimator.*`` key: Hydra's overrides under ``hydra.main``; without
    them (a composed config), whether ``cfg.estimator`` differs from the default of the model config it records (its
    ``conf/model`` file's override of ``/estimator``, else ``evaluate.yaml``'s)."""
    if HydraConfig.initialized():
        return any(override.split("=", 1)[0].lstrip("+~").split(".")[0] == "estimator" for override in HydraConfig.get().overrides.task)
    composed = OmegaConf.load(config_dir() / "estimator" / f"{_model_default(cfg, 'estimator')}.yaml")
    return OmegaConf.to_container(cfg.estimator) != OmegaConf.to_container(composed)


def dataset_was_chosen(cfg: DictConfig) -> bool:
    """Whether the user picked ``dataset=...``: Hydra's overrides under ``hydra.main``; without them (a composed config),
    whether ``cfg.dataset`` builds another data set than the default of the model config it records (its
    ``conf/model`` file's override of ``/dataset``, else ``evaluate.yaml``'s)."""
    if HydraConfig.initialized() and HydraConfig.get().runtime.choices.get("model") == cfg.model_config_name:
        return any(override.split("=", 1)[0].lstrip("+~") == "dataset" for override in HydraConfig.get().overrides.task)
    return cfg.dataset._target_ != OmegaConf.load(config_dir() / "dataset" / f"{_model_default(cfg, 'dataset')}.yaml")._target_


MEASURED_SPLITS = ("test", "valid")
"""What ``split=`` may name: the data set's test split (the default), or its validation split."""


def measured_split(data, cfg: DictConfig) -> torch.Tensor:
    """The rows ``[N, D]`` of the split ``cfg.split`` names (:data:`MEASURED_SPLITS`) of the data set ``data``; refused in
    one line when the data set has no such split."""
    if cfg.split not in MEASURED_SPLITS:
        raise ValueError(f"split must be one of {', '.join(MEASURED_SPLITS)} (the split measured), got {cfg.split!r}")
    if cfg.split == "valid" and data.valid is None:
        raise ValueError(f"split=valid but data set {data.name!r} has no validation split; measure split=test, or a data set "
                         f"with one (binarized_mnist, mnist)")
    return data.test if cfg.split == "test" else data.valid


def measured_subset(test: torch.Tensor, cfg: DictConfig) -> tuple[torch.Tensor, dict[str, Any]]:
    """The test rows an evaluation measures, ``[n, D]``, and how they were chosen (``num``, ``of``, ``order``, ``seed``,
    ``description``): ``num_test`` rows drawn at random with ``seed`` (:func:`pfzoo.data.subset_rows`), or the first
    ``num_test`` with ``test_rows=first``, which is logged as a warning (a sorted file's prefix is no sample of it)."""
    rows = subset_rows(test.shape[0], cfg.num_test, seed=cfg.seed, order=cfg.test_rows)
    chosen = {"num": rows.numel(), "of": test.shape[0], "order": cfg.test_rows, "seed": cfg.seed,
              "description": describe_subset(rows.numel(), test.shape[0], seed=cfg.seed, order=cfg.test_rows)}
    if cfg.test_rows == "first" and rows.numel() < test.shape[0]:
        chosen["warning"] = (f"test_rows=first measures the first {rows.numel()} of {test.shape[0]} test rows in file order; a file "
                             f"sorted by class (binarized MNIST's test file) makes that figure unrepresentative: drop test_rows=first "
                             f"for a random subset")
        logger.warning("%s", chosen["warning"])
    return test[rows.to(test.device)], chosen
