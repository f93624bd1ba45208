"""The application: ``train(cfg)`` and ``evaluate(cfg)``, called by the thin Hydra scripts.

Both take a composed config (``conf/train.yaml`` / ``conf/evaluate.yaml``) and return a plain
dict of results, so they are testable without Hydra's command line; the scripts print them.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from pfzoo import distributed, pictures, schema, zoo  # noqa: F401 (schema registers the typed configs)
from pfzoo.estimators.base import BoundKind, LikelihoodEstimate
from pfzoo.models.capabilities import Capability

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


def train(cfg: DictConfig) -> dict[str, Any]:
    """Train ``cfg.model`` on ``cfg.dataset`` with ``cfg.trainer``, then measure its test log-likelihood; returns the
    checkpoint path, the last epoch's metrics, the final estimate (:func:`final_log_likelihood`) and the wall time.
    Under a process group (``torchrun``) every rank calls it alike: the Trainer shards the minibatches, the estimators
    their chains, and rank 0 alone writes files (pictures included)."""
    started = time.perf_counter()
    device = resolve_device(cfg.device)
    if cfg.final_num_test < 1:
        raise ValueError(f"final_num_test must be a positive number of test examples, got {cfg.final_num_test}")
    data = instantiate(cfg.dataset)
    init_generator = torch.Generator().manual_seed(cfg.seed)
    model = instantiate(cfg.model, num_visible=data.num_features, generator=init_generator).to(device)
    if cfg.init_from_data:
        model.init_from_data(data.train.to(device, model.dtype))
    estimator = instantiate(cfg.estimator) if cfg.trainer.evaluate_every > 0 else None
    trainer = instantiate(cfg.trainer, run_dir=cfg.run_dir, estimator=estimator)
    logger.info("training %s on %s (%d examples) in %s", type(model).__name__, data.name, data.train.shape[0], cfg.run_dir)
    metrics = trainer.fit(model, data, resume=cfg.resume, config=OmegaConf.to_container(cfg, resolve=True))
    final = final_log_likelihood(model, data, cfg, device)
    leader = distributed.rank() == 0  # under torchrun every rank trained the same model; one draws it
    pictures = training_pictures(model, data, trainer.metrics_path, Path(cfg.run_dir), seed=cfg.seed) if cfg.pictures and leader else []
    return {"checkpoint": str(trainer.checkpoint_path), "metrics_file": str(trainer.metrics_path), "metrics": metrics,
            "test_log_likelihood": final, "seconds": time.perf_counter() - started, "pictures": [str(p) for p in pictures]}


PICTURE_SAMPLES = 64


def training_pictures(model, data, metrics_file: Path, run_dir: Path, *, seed: int) -> list[Path]:
    """``curves.png`` (loss and log-likelihoods by epoch) and, for image data, ``samples.png`` (64 samples of the
    trained model, its own sampler) and ``filters.png`` (its first-layer filters, each on its own contrast)."""
    written = [pictures.save_training_curves(metrics_file, run_dir / "curves.png")]
    return [path for path in written if path is not None] + model_pictures(model, data, run_dir, seed=seed)


def model_pictures(model, data, run_dir: Path, *, seed: int) -> list[Path]:
    """For image data (a 2-d ``data.image_shape``): ``samples.png`` (64 samples of the model, its own sampler) and
    ``filters.png`` (its first-layer filters, each on its own contrast, when it has filters); nothing otherwise."""
    if data.image_shape is None or len(data.image_shape) != 2:
        return []
    with torch.no_grad():
        samples = model.sample(PICTURE_SAMPLES, generator=torch.Generator(model.device).manual_seed(seed))
    written = [pictures.save_image_grid(samples, data.image_shape, run_dir / "samples.png")]
    filters = model.visible_filters()
    if filters is not None:
        written.append(pictures.save_image_grid(filters[:100], data.image_shape, run_dir / "filters.png", per_image_contrast=True))
    return written


def evaluation_pictures(result: dict[str, Any], model, data, cfg: DictConfig) -> list[Path]:
    """``diagnostics.png`` (increment variance and ESS along β; ``diagnostics_upper.png`` for a bracket's upper
    estimate) when the estimator ran with ``diagnostics=true``, and :func:`model_pictures` with ``samples=true``."""
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for fields, name in ((result, "diagnostics.png"), (result.get("upper") or {}, "diagnostics_upper.png")):
        if "path_diagnostics" in fields:
            written.append(pictures.save_path_diagnostics(fields["path_diagnostics"], run_dir / name))
    if cfg.samples:
        written += model_pictures(model, data, run_dir, seed=cfg.seed)
    return written


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


def config_dir() -> Path:
    """The Hydra config folder (as :func:`pfzoo.cli.config_dir`, which sits above the app): ``pfzoo/conf`` in an
    installed wheel, the checkout's top-level ``conf/`` otherwise."""
    spec = importlib.util.find_spec("pfzoo.conf")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(location) / "train.yaml").is_file():
            return Path(location)
    return Path(__file__).resolve().parents[1] / "conf"


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


def _zoo_dir(cfg: DictConfig) -> Path:
    return Path(cfg.zoo_dir) if cfg.zoo_dir else zoo.default_zoo_dir()


def pretrained_name(cfg: DictConfig) -> str:
    """The zoo entry a bare ``evaluate`` means: the one composed from the same model config (not just the same class)
    and trained on the configured data set; several → the one named ``<model>-<dataset>``, else ask for ``pretrained=``."""
    zoo_dir = _zoo_dir(cfg)
    name = model_config_name(cfg)
    target = cfg.dataset._target_
    dataset = target.rsplit(".", 1)[-1]
    found = zoo.find_pretrained(name, target, zoo_dir=zoo_dir) if name is not None else []
    if not found:
        available = zoo.list_pretrained(zoo_dir=zoo_dir)
        raise FileNotFoundError(
            f"no pretrained model={name} for dataset={dataset} in {zoo_dir}; pass checkpoint=PATH or pretrained=NAME "
            f"(pretrained models: {', '.join(available) or 'none'})"
        )
    if len(found) > 1:
        preferred = f"{name}-{dataset}"
        if preferred in found:
            return preferred
        raise ValueError(f"{len(found)} pretrained model={name} models for dataset={dataset}: pass pretrained=NAME, one of {', '.join(found)}")
    return found[0]


def pretrained_dataset(card: dict[str, Any], cfg: DictConfig) -> DictConfig:
    """The data set a zoo model was trained and measured on (its card's ``dataset_config``), reading files, if any, from
    this run's ``data.root``."""
    dataset = OmegaConf.create(card["dataset_config"])
    if "root" in dataset:
        dataset.root = cfg.data.root
    return dataset


def check_model_choice(cfg: DictConfig, model, card: dict[str, Any] | None, source: str) -> None:
    """Refuse in one line when the user asked for ``model=X`` but the checkpoint holds another model."""
    if not model_was_chosen(cfg):
        return
    chosen = model_config_name(cfg)
    if card is not None:
        if card.get("model_config_name") == chosen:
            return
        holds = f"model={card.get('model_config_name')}"
    else:
        family = getattr(get_class(cfg.model._target_), "registry_name", None)
        if family == model.registry_name:
            return
        holds = f"a {type(model).__name__} ({model.registry_name})"
    instead = "pretrained=NAME of a" if card is not None else "checkpoint=PATH of a"
    raise ValueError(f"model={chosen} does not match {source}, which holds {holds}; drop model= (the checkpoint says what it "
                     f"is) or pass {instead} {chosen} model")


def evaluation_source(cfg: DictConfig) -> tuple[Path, DictConfig, dict[str, Any] | None]:
    """What ``evaluate`` measures: ``(checkpoint file, dataset config, zoo card or None)``. ``checkpoint=PATH`` is
    measured on the configured data set; ``pretrained=NAME`` and the bare command (the zoo entry of the configured model
    config and data set) on the data set their card names, after checking the file's sha256 against the card."""
    pretrained = cfg.get("pretrained")
    if cfg.checkpoint and pretrained:
        raise ValueError(f"pass checkpoint=PATH or pretrained=NAME, not both (got checkpoint={cfg.checkpoint} pretrained={pretrained})")
    if cfg.checkpoint:
        return Path(cfg.checkpoint), cfg.dataset, None
    zoo_dir = _zoo_dir(cfg)
    name = pretrained or pretrained_name(cfg)
    card = zoo.pretrained_card(name, zoo_dir=zoo_dir)
    return zoo.pretrained_path(name, zoo_dir=zoo_dir), pretrained_dataset(card, cfg), card


def more_accuracy(estimator: dict[str, Any], num_test: int, prefix: str = "estimator") -> list[str]:
    """Overrides that ask ``estimator`` (its resolved config) for more accuracy at more cost: 10× the annealing steps
    and CSL samples, 4× the chains, and 4× RAISE's examples (``null``, every one of the ``num_test``, when that is more)."""
    overrides = []
    for key, value in estimator.items():
        if isinstance(value, dict):
            overrides += more_accuracy(value, num_test, f"{prefix}.{key}")
        elif isinstance(value, int) and not isinstance(value, bool):
            factor = {"num_steps": 10, "samples_per_chain": 10, "num_chains": 4, "num_examples": 4}.get(key)
            if key == "num_examples" and value < num_test:
                overrides.append(f"{prefix}.{key}={value * factor}" if value * factor < num_test else f"{prefix}.{key}=null")
            elif factor and key != "num_examples":
                overrides.append(f"{prefix}.{key}={value * factor}")
    return overrides


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """Estimate ``log Z`` and the mean test log-likelihood of a checkpoint (``checkpoint=``), a named zoo model
    (``pretrained=``) or the zoo's model for the configured model config and data set; exact values too when the
    model is small."""
    device = resolve_device(cfg.device)
    if cfg.num_test is not None and cfg.num_test < 1:
        raise ValueError(f"num_test must be a positive number of test examples or null (all of them), got {cfg.num_test}")
    if cfg.exact_max_units < 0:
        raise ValueError(f"exact_max_units must be a number of units ≥ 0 (0: never compute exact values), got {cfg.exact_max_units}")
    checkpoint, dataset, card = evaluation_source(cfg)
    model = zoo.load(checkpoint, map_location=device)
    check_model_choice(cfg, model, card, f"pretrained={card['name']}" if card else f"checkpoint={checkpoint}")
    estimator = instantiate(cfg.estimator).to(device)
    estimator.check(model)  # refuse in one line before any work (the data set can take seconds to build)
    data = instantiate(dataset)
    if model.num_visible != data.num_features:
        raise ValueError(
            f"the checkpoint's model has {model.num_visible} visible units but dataset {data.name!r} has "
            f"{data.num_features} features; pick the dataset it was trained on"
        )
    test = data.test if cfg.num_test is None else data.test[: cfg.num_test]
    generator = torch.Generator(device).manual_seed(cfg.seed)
    started = time.perf_counter()
    # redirected to a file, a bar writes a line per refresh; under torchrun rank 0's bar stands for all
    bar_shown = cfg.progress and sys.stderr.isatty() and distributed.rank() == 0
    with logging_redirect_tqdm(), tqdm(desc=type(estimator).__name__, unit="step", disable=not bar_shown) as bar:

        def report(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        estimate = estimator.log_likelihood(
            model, test.to(device, model.dtype), base_data=data.train.to(device, model.dtype), generator=generator, progress=report
        )
    result: dict[str, Any] = {
        "checkpoint": str(checkpoint),
        "pretrained": card["name"] if card else None,
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
    if result["kind"] != BoundKind.EXACT.value:
        result["more_accuracy"] = more_accuracy(result["estimator"], result["num_test"])
    for warning in estimate.warnings:
        logger.warning("%s", warning)
    size = model.log_partition_cost
    offered = model.capabilities
    if (Capability.EXACT_LOG_Z in offered and Capability.EXACT_FREE_ENERGY in offered and size is not None
            and size <= cfg.exact_max_units and (model.free_energy_cost or 0) <= cfg.exact_max_units):
        with torch.no_grad():
            exact_log_z = model.log_partition()
            result["exact_log_z"] = exact_log_z.item()
            result["exact_test_log_likelihood"] = model.log_prob(test.to(device, model.dtype), log_z=exact_log_z).mean().item()
    result["pictures"] = [str(path) for path in evaluation_pictures(result, model, data, cfg)] if distributed.rank() == 0 else []
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
    source = f"pretrained={result['pretrained']} ({result['checkpoint']})" if result.get("pretrained") else result["checkpoint"]
    lines = [f"model {result['model']} {result['model_config']} from {source}"]
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
    if result.get("more_accuracy"):
        lines.append("more accuracy (slower): " + " ".join(result["more_accuracy"]))
    if result.get("pictures"):
        lines.append("pictures: " + ", ".join(result["pictures"]))
    lines.extend(f"WARNING: {warning}" for warning in result.get("warnings", []))
    return "\n".join(lines)
