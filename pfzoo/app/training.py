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

from pfzoo import distributed, zoo
from pfzoo.app.config import resolve_device
from pfzoo.app.result_file import divergence_record, headline_text, result_record, training_headline, write_result
from pfzoo.app.run_pictures import caption, training_pictures
from pfzoo.data.subsets import describe_subset
from pfzoo.estimators.base import BoundKind, sample_stderr
from pfzoo.models.capabilities import Capability
from pfzoo.training.divergence import TrainingDiverged
from pfzoo.training.metrics_log import check_tensorboard, read_records

logger = logging.getLogger(__name__)


def train(cfg: DictConfig) -> dict[str, Any]:
    """Train ``cfg.model`` on ``cfg.dataset`` with ``cfg.trainer``, then measure its test log-likelihood; returns the
    checkpoint path, the last epoch's metrics, the final estimate (:func:`final_log_likelihood`) and the wall time.
    Under a process group (``torchrun``) every rank calls it alike: the Trainer shards the minibatches, the estimators
    their chains, and rank 0 alone writes files (pictures included).

    With ``trainer.average_parameters`` the closing estimate and the pictures are those of the averaged parameters
    (``averaged.pt``, :class:`~pfzoo.training.ParameterAveraging`), the checkpoint keeps those training uses.

    The run folder ends with ``result.json`` (:mod:`pfzoo.app.result_file`); the closing estimate also goes to the log
    (``train.log`` under the command line) and into the last record of the metrics files (CSV and TensorBoard
    included), and titles ``curves.png``.

    A run the divergence guard stops (:class:`~pfzoo.training.TrainingDiverged`: the model and the checkpoint hold the
    last good parameters) re-raises it with :attr:`~pfzoo.training.TrainingDiverged.result` holding this result for
    the restored model (``diverged``: the guard's line; ``metrics``: its details), so the command line reports both and
    exits :data:`pfzoo.cli.EXIT_DIVERGED`; its ``result.json`` has ``status: "diverged"`` and says what was restored."""
    started = time.perf_counter()
    device = resolve_device(cfg.device)
    if cfg.final_num_test < 1:
        raise ValueError(f"final_num_test must be a positive number of test examples, got {cfg.final_num_test}")
    check_tensorboard(cfg.tensorboard)  # before the data load, which can take minutes
    data = instantiate(cfg.dataset)
    init_generator = torch.Generator().manual_seed(cfg.seed)
    model = instantiate(cfg.model, num_visible=data.num_features, generator=init_generator).to(device)
    if cfg.init_from is not None:
        if OmegaConf.select(cfg, "trainer.objective.pretrain") is not None:
            raise ValueError(f"init_from={cfg.init_from} and trainer.objective.pretrain both set the starting parameters; "
                             f"pass trainer.objective.pretrain=null to start from init_from")
        zoo.load_parameters_into(model, cfg.init_from, name="init_from")
        logger.info("starting from the parameters of %s (init_from)", cfg.init_from)
    elif cfg.init_from_data:
        model.init_from_data(data.train.to(device, model.dtype))
    estimator = instantiate(cfg.estimator) if cfg.trainer.evaluate_every > 0 else None
    trainer = instantiate(cfg.trainer, run_dir=cfg.run_dir, estimator=estimator, csv=cfg.metrics_csv, tensorboard=cfg.tensorboard)
    logger.info("training %s on %s (%d examples) in %s", type(model).__name__, data.name, data.train.shape[0], cfg.run_dir)
    leader = distributed.rank() == 0  # under torchrun every rank trained the same model; one writes its files
    files = {"checkpoint": str(trainer.checkpoint_path), "metrics_file": str(trainer.metrics_path)}
    try:
        metrics = trainer.fit(model, data, resume=cfg.resume, config=OmegaConf.to_container(cfg, resolve=True))
    except TrainingDiverged as diverged:
        if leader:
            logger.error("%s", diverged)
        closing = closing_estimate(model, data, cfg, device, trainer)
        diverged.result = {**files, "metrics": diverged.record, "test_log_likelihood": closing["final"], "diverged": str(diverged),
                           "seconds": time.perf_counter() - started, "pictures": []}
        if leader:
            record = divergence_record(str(diverged), diverged.record, files["checkpoint"])
            diverged.result["result_file"] = str(finish(cfg, device, diverged.result, closing, divergence=record))
        raise
    averaging = getattr(trainer, "averaging", None)
    if averaging is not None and averaging.updates:  # the run's product is the average: the closing estimate measures it
        model = averaging.averaged_model(model)
        files["averaged_model"] = str(averaging.path)
        if leader:
            logger.info("the closing estimate measures the parameters averaged over %d updates (%s)", averaging.updates, averaging.path)
    closing = closing_estimate(model, data, cfg, device, trainer)
    result = {**files, "metrics": metrics, "test_log_likelihood": closing["final"], "warnings": trainer.warnings, "pictures": []}
    if leader and cfg.pictures:
        objective = type(trainer.objective).__name__
        title = f"{caption(model, data, 'trained by ' + objective)}; closing {headline_text(training_headline(closing['final']))}"
        result["pictures"] = [str(path) for path in training_pictures(
            model, data, trainer.metrics_path, Path(cfg.run_dir), seed=cfg.seed, title=title,
            loss_label=f"{objective} loss per example (the objective's own units)")]
    result["seconds"] = time.perf_counter() - started
    if leader:
        result["result_file"] = str(finish(cfg, device, result, closing))
    return result


def closing_estimate(model, data, cfg: DictConfig, device: torch.device, trainer) -> dict[str, Any]:
    """:func:`final_log_likelihood`, timed (``{"final": ..., "seconds": ...}``); on the leader logged as the run's
    headline and merged into the last record of the metrics files (:meth:`~pfzoo.training.Trainer.record_result`)."""
    began = time.perf_counter()
    final = final_log_likelihood(model, data, cfg, device)
    seconds = time.perf_counter() - began
    if distributed.rank() == 0:
        logger.info("%s", headline_text(training_headline(final)))
        if final is not None:
            trainer.record_result({"closing_test_log_likelihood": final["mean"], "closing_test_log_likelihood_stderr": final["stderr"],
                                   "closing_kind": final["kind"], "closing_estimator": final["estimator"]})
    return {"final": final, "seconds": seconds}


def finish(cfg: DictConfig, device: torch.device, result: dict[str, Any], closing: dict[str, Any], *,
           divergence: dict[str, Any] | None = None) -> Path:
    """``result.json`` of a training run (:mod:`pfzoo.app.result_file`), written on the leader; returns its path."""
    final = closing["final"]
    records = read_records(Path(result["metrics_file"]))
    timings = {"total": result["seconds"], "training": sum(record.get("seconds", 0.0) for record in records),
               "evaluation": sum(record.get("evaluation_seconds", 0.0) for record in records), "closing_estimate": closing["seconds"]}
    used = None if final is None else final["estimator"]
    estimator = {"name": used, "config": None if used in (None, "exact") else OmegaConf.to_container(cfg.estimator, resolve=True)}
    files = {"checkpoint": result["checkpoint"], "metrics": result["metrics_file"], "pictures": result["pictures"],
             **({"averaged_model": result["averaged_model"]} if "averaged_model" in result else {})}
    record = result_record("train", cfg, device, headline=training_headline(final), estimator=estimator, timings=timings,
                           files=files, divergence=divergence, last_epoch=records[-1] if records else None,
                           warnings=[*result.get("warnings", []), *((final or {}).get("warnings") or [])])
    return write_result(cfg.run_dir, record)


def final_log_likelihood(model, data, cfg: DictConfig, device: torch.device) -> dict[str, Any] | None:
    """The trained model's mean test log-likelihood: exact where the model offers an exact log Z and free energy at
    its size, else the configured estimator (``estimator=...``, fitted to the training set) where it applies; ``None``
    (with the reason logged) when neither does. ``log_z`` is the log Z it used (``None`` for estimators without one)."""
    test, train = data.test.to(device=device, dtype=model.dtype), data.train.to(device=device, dtype=model.dtype)
    offered = model.capabilities
    with torch.no_grad():
        if Capability.EXACT_LOG_Z in offered and Capability.EXACT_FREE_ENERGY in offered:
            log_z = model.log_partition()
            per_example = model.log_prob(test, log_z=log_z).double()
            return {"mean": per_example.mean().item(), "stderr": 0.0, "data_stderr": sample_stderr(per_example), "kind": BoundKind.EXACT.value,
                    "estimator": "exact", "num_test": test.shape[0], "of": test.shape[0], "examples": f"all {test.shape[0]}",
                    "log_z": log_z.item()}
    estimator = instantiate(cfg.estimator).to(device)
    if not estimator.applies_to(model):
        logger.warning("no final test log-likelihood: %s", estimator.refusal(estimator.missing(model), model))
        return None
    generator = torch.Generator(device).manual_seed(cfg.seed)
    subset = test[closing_subset(test.shape[0], cfg.final_num_test, cfg.seed).to(test.device)]
    estimate = estimator.log_likelihood(model, subset, base_data=train, generator=generator)
    for warning in estimate.warnings:
        logger.warning("%s", warning)
    return {"mean": estimate.mean, "stderr": estimate.stderr, "data_stderr": estimate.data_stderr, "kind": estimate.kind.value,
            "estimator": type(estimator).__name__,
            "num_test": subset.shape[0], "of": test.shape[0], "warnings": list(estimate.warnings),
            "examples": describe_subset(subset.shape[0], test.shape[0], seed=cfg.seed),
            "log_z": None if estimate.partition is None else estimate.partition.log_z}


def closing_subset(num_test: int, size: int, seed: int) -> torch.Tensor:
    """Row indices of the closing estimate's test examples: ``size`` of ``num_test`` drawn at random (seeded ``seed``,
    the same on every rank), ascending; all of them when ``size ≥ num_test``. Per-example estimators cost chains ×
    steps per example, so the closing check is bounded; a prefix would not do, as test files may be sorted (binarized
    MNIST's is sorted by class, so its first 200 rows are all zeros)."""
    if size >= num_test:
        return torch.arange(num_test)
    return torch.randperm(num_test, generator=torch.Generator().manual_seed(seed))[:size].sort().values
