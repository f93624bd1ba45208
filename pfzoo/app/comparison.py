"""``evaluate`` with ``versus=``: which of two models fits the test set better, from the ratio of their partition
functions alone (:func:`pfzoo.estimators.comparison.compare`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

from pfzoo import zoo
from pfzoo.app.config import measured_split, measured_subset
from pfzoo.estimators.comparison import compare
from pfzoo.models.base import EnergyModel


def versus_source(cfg: DictConfig) -> Path:
    """The second model's file: ``versus`` names a checkpoint file or, failing that, a zoo model (sha256-checked)."""
    if Path(cfg.versus).is_file():
        return Path(cfg.versus)
    zoo_dir = Path(cfg.zoo_dir) if cfg.zoo_dir else zoo.default_zoo_dir()
    if cfg.versus not in zoo.list_pretrained(zoo_dir=zoo_dir):
        raise ValueError(f"versus must be a checkpoint file or a pretrained model name, got {cfg.versus!r} "
                         f"(pretrained models: {', '.join(zoo.list_pretrained(zoo_dir=zoo_dir)) or 'none'})")
    return zoo.pretrained_path(cfg.versus, zoo_dir=zoo_dir)


def compare_with_versus(cfg: DictConfig, model: EnergyModel, checkpoint: Path, dataset: DictConfig, device: torch.device) -> dict[str, Any]:
    """Compare ``model`` (A, from ``checkpoint``) with ``cfg.versus`` (B) on the test set of ``dataset``."""
    if cfg.versus_samples < 2:
        raise ValueError(f"versus_samples must be a number of draws per model ≥ 2, got {cfg.versus_samples}")
    if cfg.versus_steps < 1:
        raise ValueError(f"versus_steps must be a number of annealing steps ≥ 1 (1: a direct bridge), got {cfg.versus_steps}")
    other_path = versus_source(cfg)
    other = zoo.load(other_path, map_location=device)
    data = instantiate(dataset)
    for name, candidate in (("the checkpoint's model", model), (f"versus={cfg.versus}", other)):
        if candidate.num_visible != data.num_features:
            raise ValueError(f"{name} has {candidate.num_visible} visible units but dataset {data.name!r} has {data.num_features} features")
    test, rows = measured_subset(measured_split(data, cfg), cfg)
    generator = torch.Generator(device).manual_seed(cfg.seed)
    started = time.perf_counter()
    comparison = compare(model, other, test.to(device, model.dtype), num_samples=cfg.versus_samples, num_steps=cfg.versus_steps,
                         generator=generator)
    return {
        "checkpoint": str(checkpoint),
        "versus": str(other_path),
        "model": model.registry_name,
        "versus_model": other.registry_name,
        "dataset": data.name,
        "num_test": comparison.num_test,
        "test_rows": rows,
        "split": cfg.split,
        "comparison": {
            "difference": comparison.difference, "stderr": comparison.stderr, "data_stderr": comparison.data_stderr,
            "log_z_difference": comparison.log_z_difference, "log_z_difference_stderr": comparison.log_z_difference_stderr,
            "log_z_difference_bracket": list(comparison.log_z_difference_bracket),
            "mean_free_energy_difference": comparison.mean_free_energy_difference, "better": comparison.better,
            "significant": comparison.significant, **comparison.info,
        },
        "seconds": time.perf_counter() - started,
        "warnings": list(comparison.warnings) + ([rows["warning"]] if "warning" in rows else []),
    }
