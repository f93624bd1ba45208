"""``evaluate(cfg)``: what a ``conf/evaluate.yaml`` config measures (a checkpoint, a named zoo model or the zoo's model
of the configured model config and data set), the estimate with its diagnostics, and exact values where affordable."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import torch
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from pfzoo import distributed, zoo
from pfzoo.app.comparison import compare_with_versus
from pfzoo.app.result_file import evaluation_headline, headline_text, result_record, write_result
from pfzoo.app.config import dataset_settings_chosen, dataset_was_chosen, estimator_was_chosen, model_was_chosen, resolve_device, measured_split, measured_subset, MEASURED_SPLITS
from pfzoo.app.run_pictures import draws_images, evaluation_pictures
from pfzoo.data.subsets import SUBSET_ORDERS
from pfzoo.estimators.base import BoundKind, LikelihoodEstimate
from pfzoo.models.capabilities import Capability

logger = logging.getLogger(__name__)


def _zoo_dir(cfg: DictConfig) -> Path:
    return Path(cfg.zoo_dir) if cfg.zoo_dir else zoo.default_zoo_dir()


def pretrained_name(cfg: DictConfig) -> str:
    """The zoo entry a bare ``evaluate`` means: the one composed from the same model config (not just the same class)
    and trained on the configured data set; several → the one named ``<model>-<dataset>``, else ask for ``pretrained=``."""
    zoo_dir = _zoo_dir(cfg)
    name = cfg.model_config_name
    if name is None:
        raise ValueError("the config records no model_config_name (compose it with pfzoo.cli.compose, which records the "
                         "conf/model option); or pass checkpoint=PATH or pretrained=NAME")
    target = cfg.dataset._target_
    dataset = target.rsplit(".", 1)[-1]
    found = zoo.find_pretrained(name, target, zoo_dir=zoo_dir)
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


def card_figure(headline: dict[str, Any]) -> dict[str, Any]:
    """A zoo card's headline test log-likelihood (its ``log_likelihood`` field) as an evaluation reports it beside its own
    estimate: value, stderr, estimator, the card's label of how it was measured (K, start, chains) and its test examples."""
    return {key: headline.get(key) for key in ("value", "stderr", "estimator", "label", "num_test")}


def check_model_choice(cfg: DictConfig, model, card: dict[str, Any] | None, source: str) -> None:
    """Refuse in one line when the user asked for ``model=X`` but the checkpoint holds another model."""
    if not model_was_chosen(cfg):
        return
    chosen = cfg.model_config_name
    if card is not None:
        if card.get("model_config_name") == chosen:
            return
        holds = f"model={card.get('model_config_name')}"
    else:
        if get_class(cfg.model._target_).registry_name == model.registry_name:
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
    dataset = pretrained_dataset(card, cfg)
    if pretrained and dataset._target_ != cfg.dataset._target_ and dataset_was_chosen(cfg):
        raise ValueError(f"dataset={cfg.dataset._target_.rsplit('.', 1)[-1]} does not match pretrained={name}, which is measured "
                         f"on the data set it was trained on, dataset={card['dataset']}; drop dataset= or pass "
                         f"checkpoint=PATH (the zoo model's file) to measure it on another data set")
    for key in dataset_settings_chosen(cfg):
        if key.split(".")[0] in dataset and OmegaConf.select(dataset, key) == OmegaConf.select(cfg.dataset, key):
            continue
        trained = f"{key}={OmegaConf.select(dataset, key)}" if key.split(".")[0] in dataset else f"no {key} setting"
        raise ValueError(f"dataset.{key}={OmegaConf.select(cfg.dataset, key)} does not apply to {name}, which is measured on the data "
                         f"it was trained on ({card['dataset']} with {trained}); drop dataset.{key}= or pass checkpoint=PATH "
                         f"(the zoo model's file) to measure it on other data")
    return zoo.pretrained_path(name, zoo_dir=zoo_dir), dataset, card


def more_accuracy(estimator: dict[str, Any], num_test: int, prefix: str = "estimator") -> list[str]:
    """Overrides that ask ``estimator`` (its resolved config) for more accuracy at more cost: 10× the annealing steps,
    bridge burn-in, importance samples and draws per chain, 4× the chains, and 4× RAISE's examples (``null``, every one
    of the ``num_test``, when that is more)."""
    overrides = []
    for key, value in estimator.items():
        if isinstance(value, dict):
            overrides += more_accuracy(value, num_test, f"{prefix}.{key}")
        elif isinstance(value, int) and not isinstance(value, bool):
            factor = {"num_steps": 10, "samples_per_chain": 10, "num_chains": 4, "num_examples": 4, "num_samples": 10, "burn_in": 10}.get(key)
            if key == "num_examples" and value < num_test:
                overrides.append(f"{prefix}.{key}={value * factor}" if value * factor < num_test else f"{prefix}.{key}=null")
            elif factor and key != "num_examples":
                overrides.append(f"{prefix}.{key}={value * factor}")
    return overrides


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """Estimate ``log Z`` and the mean test log-likelihood of a checkpoint (``checkpoint=``), a named zoo model
    (``pretrained=``) or the zoo's model for the configured model config and data set; exact values too when the
    model is small. The run folder ends with ``result.json`` (:mod:`pfzoo.app.result_file`; its headline also in the
    log, ``evaluate.log`` under the command line)."""
    began = time.perf_counter()
    device = resolve_device(cfg.device)
    if cfg.num_test is not None and cfg.num_test < 1:
        raise ValueError(f"num_test must be a positive number of test examples or null (all of them), got {cfg.num_test}")
    if cfg.test_rows not in SUBSET_ORDERS:
        raise ValueError(f"test_rows must be one of {', '.join(SUBSET_ORDERS)} (how num_test picks its rows), got {cfg.test_rows!r}")
    if cfg.split not in MEASURED_SPLITS:
        raise ValueError(f"split must be one of {', '.join(MEASURED_SPLITS)} (the split measured), got {cfg.split!r}")
    if not 0.0 < cfg.confidence < 1.0:
        raise ValueError(f"confidence must be a probability strictly between 0 and 1 (the Markov bounds' level), got {cfg.confidence}")
    if cfg.exact_max_units < 0:
        raise ValueError(f"exact_max_units must be a number of units ≥ 0 (0: never compute exact values), got {cfg.exact_max_units}")
    checkpoint, dataset, card = evaluation_source(cfg)
    model = zoo.load(checkpoint, map_location=device)
    check_model_choice(cfg, model, card, f"pretrained={card['name']}" if card else f"checkpoint={checkpoint}")
    if cfg.versus:
        if cfg.samples:  # the comparison draws no pictures
            raise ValueError(f"samples=true draws one model's samples, but versus={cfg.versus} compares two; drop samples=true "
                             f"(or evaluate each model with samples=true on its own)")
        if estimator_was_chosen(cfg):  # the comparison estimates log Z_A − log Z_B by bridge sampling, never estimator=
            raise ValueError(f"versus={cfg.versus} compares the two models by bridge sampling alone (its settings: versus_samples, "
                             f"versus_steps), so estimator settings do not apply; drop estimator=... (or evaluate each model "
                             f"with its estimator on its own)")
        return recorded(cfg, device, compare_with_versus(cfg, model, checkpoint, dataset, device), began)
    estimator = instantiate(cfg.estimator).to(device)
    estimator.check(model)  # refuse in one line before any work (the data set can take seconds to build)
    data = instantiate(dataset)
    if cfg.samples and not draws_images(data):
        raise ValueError(f"samples=true draws samples as images, but dataset {data.name!r} is not image data (no 2-d "
                         f"image_shape); drop samples=true")
    if model.num_visible != data.num_features:
        raise ValueError(
            f"the checkpoint's model has {model.num_visible} visible units but dataset {data.name!r} has "
            f"{data.num_features} features; pick the dataset it was trained on"
        )
    test, rows = measured_subset(measured_split(data, cfg), cfg)
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
        "test_rows": rows,
        "split": cfg.split,  # with split=valid the test_* fields hold the validation split's numbers
        "estimator": OmegaConf.to_container(cfg.estimator, resolve=True),
        "seconds": time.perf_counter() - started,
    }
    upper = getattr(estimate, "upper", None)  # a bracket reports its upper estimate and the gap beside the lower one
    if upper is not None:
        result.update(likelihood_fields(estimate.lower, cfg.confidence, test.shape[0]))
        result["upper"] = likelihood_fields(upper, cfg.confidence, test.shape[0])
        result.update(gap=estimate.gap, gap_stderr=estimate.gap_stderr)
    else:
        result.update(likelihood_fields(estimate, cfg.confidence, test.shape[0]))
    result["warnings"] = list(estimate.warnings) + ([rows["warning"]] if "warning" in rows else [])
    if result["kind"] != BoundKind.EXACT.value:
        result["more_accuracy"] = more_accuracy(result["estimator"], result["num_test"])
    if card is not None and card.get("log_likelihood") and cfg.split == "test":
        result["card_log_likelihood"] = card_figure(card["log_likelihood"])
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
    return recorded(cfg, device, result, began)


def recorded(cfg: DictConfig, device: torch.device, result: dict[str, Any], began: float) -> dict[str, Any]:
    """``result`` after its headline is logged and, on the leader, ``result.json`` written (:mod:`pfzoo.app.result_file`;
    its path in ``result["result_file"]``); ``began`` is when the evaluation started (``time.perf_counter``)."""
    headline = evaluation_headline(result)
    if distributed.rank() != 0:
        return result
    logger.info("%s", headline_text(headline))
    if "comparison" in result:
        estimator = {"name": "bridge sampling", "config": {"versus_samples": cfg.versus_samples, "versus_steps": cfg.versus_steps}}
    else:
        estimator = {"name": headline["estimator"], "config": result["estimator"]}
    timings = {"total": time.perf_counter() - began, "estimate": result["seconds"]}
    files = {"checkpoint": result["checkpoint"], "versus": result.get("versus"), "pictures": result.get("pictures", [])}
    record = result_record("evaluate", cfg, device, headline=headline, estimator=estimator, timings=timings, files=files,
                           warnings=result.get("warnings"))
    result["result_file"] = str(write_result(cfg.run_dir, record))
    return result


def markov_statement(estimate: LikelihoodEstimate, bound, num_test: int) -> str:
    """What ``bound`` (:meth:`~pfzoo.estimators.LikelihoodEstimate.markov_bound`) is about, in words that cannot be read
    as a bound on the headline when the two cover different examples: RAISE with control variates runs its chains on a
    random subset (``info["subset"]``), and Markov's inequality bounds that subset's mean log-likelihood, starting from
    the subset's own mean, while the headline is the control-variate estimate over every example (it can lie below the
    bound: the subset need not be typical)."""
    ran_on = estimate.per_example.numel()
    if "subset" not in estimate.info:
        return f"{bound} over the same {ran_on} examples as the headline"
    own = estimate.per_example.double().mean().item()
    return (f"{bound}, about the {ran_on} examples the chains ran on (a random subset, whose own estimate is {own:.4f}), not "
            f"the headline's {num_test}: no bound on the headline")


def likelihood_fields(estimate: LikelihoodEstimate, confidence: float, num_test: int) -> dict[str, Any]:
    """The JSON-ready numbers of one :class:`~pfzoo.estimators.LikelihoodEstimate` over ``num_test`` test examples, with
    what Markov's inequality guarantees at ``confidence`` (:meth:`~pfzoo.estimators.LikelihoodEstimate.markov_bound`)
    where it guarantees anything, saying which examples it is about (:func:`markov_statement`)."""
    fields: dict[str, Any] = {
        "kind": estimate.kind.value,
        "test_log_likelihood": estimate.mean,
        "test_log_likelihood_stderr": estimate.stderr,
        "test_log_likelihood_data_stderr": estimate.data_stderr,
    }
    bound = estimate.markov_bound(confidence)
    if bound is not None:
        fields["markov_bound"] = {"relation": bound.relation, "value": bound.value, "confidence": confidence,
                                  "statement": markov_statement(estimate, bound, num_test)}
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
