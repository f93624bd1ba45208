"""The application: ``train(cfg)`` and ``evaluate(cfg)``, called by the thin Hydra scripts.

Both take a composed config (``conf/train.yaml`` / ``conf/evaluate.yaml``) and return a plain
dict of results, so they are testable without Hydra's command line; the scripts print them.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import time
from pathlib import Path
from typing import Any

import torch
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from pfzoo import pictures, schema, zoo  # noqa: F401 (schema registers the typed configs)
from pfzoo.estimators.base import BoundKind, LikelihoodEstimate
from pfzoo.models.capabilities import Capability
from pfzoo.training import GreedyTrainer

logger = logging.getLogger(__name__)

PRETRAINED_FILE = "checkpoint.pt"


def default_zoo_dir() -> Path:
    """The pretrained zoo: ``pfzoo/pretrained`` in an installed wheel, the checkout's top-level ``models/`` in an
    editable install (setup.cfg maps the package ``pfzoo.pretrained`` onto it)."""
    spec = importlib.util.find_spec("pfzoo.pretrained")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        if Path(location).is_dir():
            return Path(location)
    return Path(__file__).resolve().parents[1] / "models"


def resolve_device(name: str) -> torch.device:
    """``torch.device(name)``, with a clear error when CUDA is asked for but absent."""
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {name!r}") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={name!r} was requested but CUDA is not available on this machine; use device=cpu")
    return device


def train(cfg: DictConfig) -> dict[str, Any]:
    """Train ``cfg.model`` on ``cfg.dataset`` with ``cfg.trainer``, then measure its test log-likelihood; returns the
    checkpoint path, the last epoch's metrics, the final estimate (:func:`final_log_likelihood`) and the wall time."""
    started = time.perf_counter()
    device = resolve_device(cfg.device)
    if cfg.final_num_test < 1:
        raise ValueError(f"final_num_test must be a positive number of test examples, got {cfg.final_num_test}")
    data = instantiate(cfg.dataset)
    init_generator = torch.Generator().manual_seed(cfg.seed)
    model = instantiate(cfg.model, num_visible=data.num_features, generator=init_generator).to(device)
    if cfg.init_from_data:
        model.init_from_data(data.train.to(device))
    estimator = instantiate(cfg.estimator) if cfg.trainer.evaluate_every > 0 else None
    trainer = instantiate(cfg.trainer, run_dir=cfg.run_dir, estimator=estimator)
    if Capability.LAYERWISE in model.capabilities and not isinstance(trainer, GreedyTrainer):
        trainer = GreedyTrainer.from_trainer(trainer)  # DBNs train layer by layer; trainer.epochs counts per layer
    logger.info("training %s on %s (%d examples) in %s", type(model).__name__, data.name, data.train.shape[0], cfg.run_dir)
    metrics = trainer.fit(model, data, resume=cfg.resume, config=OmegaConf.to_container(cfg, resolve=True))
    final = final_log_likelihood(model, data, cfg, device)
    pictures = training_pictures(model, data, trainer.metrics_path, Path(cfg.run_dir), seed=cfg.seed) if cfg.pictures else []
    return {"checkpoint": str(trainer.checkpoint_path), "metrics_file": str(trainer.metrics_path), "metrics": metrics,
            "test_log_likelihood": final, "seconds": time.perf_counter() - started, "pictures": [str(p) for p in pictures]}


PICTURE_SAMPLES = 64


def training_pictures(model, data, metrics_file: Path, run_dir: Path, *, seed: int) -> list[Path]:
    """``curves.png`` (loss and log-likelihoods by epoch) and, for image data, ``samples.png`` (64 samples of the
    trained model, its own sampler) and ``filters.png`` (its first-layer filters, each on its own contrast)."""
    written = [pictures.save_training_curves(metrics_file, run_dir / "curves.png")]
    if data.image_shape is not None and len(data.image_shape) == 2:
        with torch.no_grad():
            samples = model.sample(PICTURE_SAMPLES, generator=torch.Generator(model.device).manual_seed(seed))
        written.append(pictures.save_image_grid(samples, data.image_shape, run_dir / "samples.png"))
        filters = model.visible_filters()
        if filters is not None:
            written.append(pictures.save_image_grid(filters[:100], data.image_shape, run_dir / "filters.png", per_image_contrast=True))
    return [path for path in written if path is not None]


def final_log_likelihood(model, data, cfg: DictConfig, device: torch.device) -> dict[str, Any] | None:
    """The trained model's mean test log-likelihood: exact where the model offers an exact log Z and free energy at
    its size, else the configured estimator (``estimator=...``, fitted to the training set) where it applies; ``None``
    (with the reason logged) when neither does."""
    test, train = data.test.to(device=device, dtype=model.dtype), data.train.to(device=device, dtype=model.dtype)
    offered = model.capabilities
    with torch.no_grad():
        if Capability.EXACT_LOG_Z in offered and Capability.EXACT_FREE_ENERGY in offered:
            return {"mean": model.log_prob(test).mean().item(), "stderr": 0.0, "kind": BoundKind.EXACT.value, "estimator": "exact"}
    estimator = instantiate(cfg.estimator).to(device)
    if not estimator.applies_to(model):
        logger.warning("no final test log-likelihood: %s", estimator.refusal(estimator.missing(model), model))
        return None
    generator = torch.Generator(device).manual_seed(cfg.seed)
    subset = test[: cfg.final_num_test]  # per-example estimators cost chains × steps per example: a bounded closing check
    estimate = estimator.log_likelihood(model, subset, base_data=train, generator=generator)
    for warning in estimate.warnings:
        logger.warning("%s", warning)
    return {"mean": estimate.mean, "stderr": estimate.stderr, "kind": estimate.kind.value, "estimator": type(estimator).__name__,
            "num_test": subset.shape[0], "of": test.shape[0], "warnings": list(estimate.warnings)}


def pretrained_checkpoint(cfg: DictConfig, dataset_name: str) -> Path:
    """The zoo's checkpoint for the configured model family and data set: ``<zoo_dir>/<model>-<dataset>/checkpoint.pt``."""
    zoo_dir = Path(cfg.zoo_dir) if cfg.zoo_dir else default_zoo_dir()
    family = get_class(cfg.model._target_).registry_name
    path = zoo_dir / f"{family}-{dataset_name}" / PRETRAINED_FILE
    if not path.is_file():
        available = sorted(p.parent.name for p in zoo_dir.glob(f"*/{PRETRAINED_FILE}")) if zoo_dir.is_dir() else []
        raise FileNotFoundError(
            f"no pretrained {family!r} model for dataset {dataset_name!r} at {path}; "
            f"pass checkpoint=PATH (pretrained models in {zoo_dir}: {available or 'none'})"
        )
    return path


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """Estimate ``log Z`` and the mean test log-likelihood of a checkpoint; exact values too when the model is small."""
    device = resolve_device(cfg.device)
    data = instantiate(cfg.dataset)
    checkpoint = Path(cfg.checkpoint) if cfg.checkpoint else pretrained_checkpoint(cfg, data.name)
    model = zoo.load(checkpoint, map_location=device)
    if model.num_visible != data.num_features:
        raise ValueError(
            f"the checkpoint's model has {model.num_visible} visible units but dataset {data.name!r} has "
            f"{data.num_features} features; pick the dataset it was trained on"
        )
    test = data.test if cfg.num_test is None else data.test[: cfg.num_test]
    estimator = instantiate(cfg.estimator).to(device)
    estimator.check(model)  # refuse in one line before any work
    generator = torch.Generator(device).manual_seed(cfg.seed)
    started = time.perf_counter()
    with tqdm(desc=type(estimator).__name__, unit="step", disable=not cfg.progress) as bar:

        def report(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        estimate = estimator.log_likelihood(
            model, test.to(device), base_data=data.train.to(device), generator=generator, progress=report
        )
    result: dict[str, Any] = {
        "checkpoint": str(checkpoint),
        "model": model.registry_name,
        "model_config": model.config(),
        "dataset": data.name,
        "num_test": test.shape[0],
        "estimator": OmegaConf.to_container(cfg.estimator, resolve=True),
        "seconds": time.perf_counter() - started,
    }
    upper = getattr(estimate, "upper", None)  # a bracket reports its upper estimate and the gap beside the lower one
    if upper is not None:
        result.update(likelihood_fields(estimate.lower))
        result["upper"] = likelihood_fields(upper)
        result.update(gap=estimate.gap, gap_stderr=estimate.gap_stderr)
    else:
        result.update(likelihood_fields(estimate))
    result["warnings"] = list(estimate.warnings)
    for warning in estimate.warnings:
        logger.warning("%s", warning)
    size = model.log_partition_cost
    offered = model.capabilities
    if (Capability.EXACT_LOG_Z in offered and Capability.EXACT_FREE_ENERGY in offered and size is not None
            and size <= cfg.exact_max_units and (model.free_energy_cost or 0) <= cfg.exact_max_units):
        with torch.no_grad():
            exact_log_z = model.log_partition()
            result["exact_log_z"] = exact_log_z.item()
            result["exact_test_log_likelihood"] = model.log_prob(test.to(device), log_z=exact_log_z).mean().item()
    return result


def likelihood_fields(estimate: LikelihoodEstimate) -> dict[str, Any]:
    """The JSON-ready numbers of one :class:`~pfzoo.estimators.LikelihoodEstimate`."""
    fields: dict[str, Any] = {
        "kind": estimate.kind.value,
        "test_log_likelihood": estimate.mean,
        "test_log_likelihood_stderr": estimate.stderr,
        "test_log_likelihood_data_stderr": estimate.data_stderr,
    }
    for key in ("acceptance", "ess"):
        if key in estimate.info:
            fields[key] = estimate.info[key]
    if estimate.partition is not None:
        partition = estimate.partition
        fields.update(log_z=partition.log_z, log_z_stderr=partition.stderr, ess=partition.ess)
        if "acceptance" in partition.info:
            fields["acceptance"] = partition.info["acceptance"]
        diagnostics = partition.info.get("diagnostics")
        if diagnostics is not None:  # the per-step arrays, for plotting where the path spends its distributions
            fields["path_diagnostics"] = {
                "cost_functional": diagnostics.cost_functional,
                "betas": diagnostics.betas.tolist(),
                "increment_mean": diagnostics.increment_mean.tolist(),
                "increment_var": diagnostics.increment_var.tolist(),
                "ess": diagnostics.ess.tolist(),
            }
    return fields


def format_training(result: dict[str, Any]) -> str:
    """A human-readable report of :func:`train`'s result, ending with the test log-likelihood."""
    metrics = ", ".join(f"{key} {value:.4g}" for key, value in result["metrics"].items() if isinstance(value, float))
    lines = [
        f"final epoch: {metrics}",
        f"metrics written to {result['metrics_file']}",
        f"checkpoint written to {result['checkpoint']}",
    ]
    if result.get("pictures"):
        lines.append("pictures: " + ", ".join(result["pictures"]))
    final = result.get("test_log_likelihood")
    if final is None:
        lines.append(f"test log-likelihood: not measured (see the warning above); {result['seconds']:.1f} s in all")
    else:
        error = "" if final["kind"] == BoundKind.EXACT.value else (
            f" ± {final['stderr']:.4f} ({final['estimator']} on {final['num_test']} of {final['of']} test examples)")
        lines.append(f"test log-likelihood  = {final['mean']:.4f}{error}; {final['kind']}; {result['seconds']:.1f} s in all")
    return "\n".join(lines)


def format_evaluation(result: dict[str, Any]) -> str:
    """A human-readable report of :func:`evaluate`'s result."""
    lines = [f"model {result['model']} {result['model_config']} from {result['checkpoint']}"]
    upper = result.get("upper", result)
    if "log_z" in upper:
        exact = f"   (exact {result['exact_log_z']:.4f})" if "exact_log_z" in result else ""
        ess = f"  (ESS {upper['ess']:.1f})" if upper["ess"] is not None else ""
        lines.append(f"log Z                = {upper['log_z']:.4f} ± {upper['log_z_stderr']:.4f}{ess}{exact}")
        if "path_diagnostics" in upper:
            lines.append(f"path cost ½ΣJ_k      = {upper['path_diagnostics']['cost_functional']:.4f} nats "
                         f"(≈ the bias of E[log w]; per-step increments and ESS in evaluation.json)")
    exact = f"   (exact {result['exact_test_log_likelihood']:.4f})" if "exact_test_log_likelihood" in result else ""
    if "upper" in result:
        lines.append(f"upper estimate       = {upper['test_log_likelihood']:.4f} ± {upper['test_log_likelihood_stderr']:.4f}  ({upper['kind']})")
        lines.append(f"gap upper − lower    = {result['gap']:.4f} ± {result['gap_stderr']:.4f}")
    label = "lower estimate      " if "upper" in result else "test log-likelihood "
    lines.append(f"{label} = {result['test_log_likelihood']:.4f} ± {result['test_log_likelihood_stderr']:.4f}{exact}")
    lines.append(
        f"  over {result['num_test']} {result['dataset']} test examples (± {result['test_log_likelihood_data_stderr']:.4f} "
        f"test-set sampling error); {result['kind']}; {result['seconds']:.1f} s"
    )
    if "acceptance" in upper:
        lines.append("  kernel acceptance along the schedule: " + " ".join(f"{a:.2f}" for a in upper["acceptance"]))
    if result["kind"] != BoundKind.EXACT.value:
        lines.append(f"  estimator: {json.dumps(result['estimator'])}")
    lines.extend(f"WARNING: {warning}" for warning in result.get("warnings", []))
    return "\n".join(lines)
