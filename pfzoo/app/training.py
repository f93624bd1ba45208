"""``train(cfg)``: build the data set, model and trainer a ``conf/train.yaml`` config names, train, and measure the
trained model's test log-likelihood."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from pfzoo import distributed
from pfzoo.app.config import resolve_device
from pfzoo.app.run_pictures import training_pictures
from pfzoo.estimators.base import BoundKind
from pfzoo.models.capabilities import Capability
from pfzoo.training.divergence import TrainingDiverged
from pfzoo.training.metrics_log import check_tensorboard

logger = logging.getLogger(__name__)


def train(cfg: DictConfig) -> dict[str, Any]:
    """Train ``cfg.model`` on ``cfg.dataset`` with ``cfg.trainer``, then measure its test log-likelihood; returns the
    checkpoint path, the last epoch's metrics, the final estimate (:func:`final_log_likelihood`) and the wall time.
    Under a process group (``torchrun``) every rank calls it alike: the Trainer shards the minibatches, the estimators
    their chains, and rank 0 alone writes files (pictures included).

    A run the divergence guard stops (:class:`~pfzoo.training.TrainingDiverged`: the model and the checkpoint hold the
    last good parameters) re-raises it with :attr:`~pfzoo.training.TrainingDiverged.result` holding this result for
    the restored model (``diverged``: the guard's line; ``metrics``: its details), so the command line reports both and
    exits :data:`pfzoo.cli.EXIT_DIVERGED`."""
    started = time.perf_counter()
    device = resolve_device(cfg.device)
    if cfg.final_num_test < 1:
        raise ValueError(f"final_num_test must be a positive number of test examples, got {cfg.final_num_test}")
    check_tensorboard(cfg.tensorboard)  # before the data load, which can take minutes
    data = instantiate(cfg.dataset)
    init_generator = torch.Generator().manual_seed(cfg.seed)
    model = instantiate(cfg.model, num_visible=data.num_features, generator=init_generator).to(device)
    if cfg.init_from_data:
        model.init_from_data(data.train.to(device, model.dtype))
    estimator = instantiate(cfg.estimator) if cfg.trainer.evaluate_every > 0 else None
    trainer = instantiate(cfg.trainer, run_dir=cfg.run_dir, estimator=estimator, csv=cfg.metrics_csv, tensorboard=cfg.tensorboard)
    logger.info("training %s on %s (%d examples) in %s", type(model).__name__, data.name, data.train.shape[0], cfg.run_dir)
    try:
        metrics = trainer.fit(model, data, resume=cfg.resume, config=OmegaConf.to_container(cfg, resolve=True))
    except TrainingDiverged as diverged:
        diverged.result = {"checkpoint": str(trainer.checkpoint_path), "metrics_file": str(trainer.metrics_path), "metrics": diverged.record,
                           "test_log_likelihood": final_log_likelihood(model, data, cfg, device), "diverged": str(diverged),
                           "seconds": time.perf_counter() - started, "pictures": []}
        raise
    final = final_log_likelihood(model, data, cfg, device)
    leader = distributed.rank() == 0  # under torchrun every rank trained the same model; one draws it
    pictures = training_pictures(model, data, trainer.metrics_path, Path(cfg.run_dir), seed=cfg.seed) if cfg.pictures and leader else []
    return {"checkpoint": str(trainer.checkpoint_path), "metrics_file": str(trainer.metrics_path), "metrics": metrics,
            "test_log_likelihood": final, "seconds": time.perf_counter() - started, "pictures": [str(p) for p in pictures],
            "warnings": trainer.warnings}


def final_log_likelihood(model, data, cfg: DictConfig, device: torch.device) -> dict[str, Any] | None:
    """The trained model's mean test log-likelihood: exact where the model offers an exact log Z and free energy at
    its size, else the configured estimator (``estimator=...``, fitted to the training set) where it applies; ``None``
    (with the reason logged) when neither does. ``log_z`` is the log Z it used (``None`` for estimators without one)."""
    test, train = data.test.to(device=device, dtype=model.dtype), data.train.to(device=device, dtype=model.dtype)
    offered = model.capabilities
    with torch.no_grad():
        if Capability.EXACT_LOG_Z in offered and Capability.EXACT_FREE_ENERGY in offered:
            log_z = model.log_partition()
            return {"mean": model.log_prob(test, log_z=log_z).mean().item(), "stderr": 0.0, "kind": BoundKind.EXACT.value,
                    "estimator": "exact", "log_z": log_z.item()}
    estimator = instantiate(cfg.estimator).to(device)
    if not estimator.applies_to(model):
        logger.warning("no final test log-likelihood: %s", estimator.refusal(estimator.missing(model), model))
        return None
    generator = torch.Generator(device).manual_seed(cfg.seed)
    subset = test[closing_subset(test.shape[0], cfg.final_num_test, cfg.seed).to(test.device)]
    estimate = estimator.log_likelihood(model, subset, base_data=train, generator=generator)
    for warning in estimate.warnings:
        logger.warning("%s", warning)
    return {"mean": estimate.mean, "stderr": estimate.stderr, "kind": estimate.kind.value, "estimator": type(estimator).__name__,
            "num_test": subset.shape[0], "of": test.shape[0], "warnings": list(estimate.warnings),
            "log_z": None if estimate.partition is None else estimate.partition.log_z}


def closing_subset(num_test: int, size: int, seed: int) -> torch.Tensor:
    """Row indices of the closing estimate's test examples: ``size`` of ``num_test`` drawn at random (seeded ``seed``,
    the same on every rank), ascending; all of them when ``size ≥ num_test``. Per-example estimators cost chains ×
    steps per example, so the closing check is bounded; a prefix would not do, as test files may be sorted (binarized
    MNIST's is sorted by class, so its first 200 rows are all zeros)."""
    if size >= num_test:
        return torch.arange(num_test)
    return torch.randperm(num_test, generator=torch.Generator().manual_seed(seed))[:size].sort().values
