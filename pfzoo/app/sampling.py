"""``sample(cfg)``: draw samples from a zoo model or a checkpoint with a seed, into ``samples.pt`` and, for models of
image data, a ``samples.png`` grid, with the run's ``result.json`` (``pfzoo sample``)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from pfzoo import pictures, zoo
from pfzoo.app.config import resolve_device
from pfzoo.app.result_file import result_record, write_result
from pfzoo.app.run_pictures import DEFAULT_SAMPLER_STEPS

logger = logging.getLogger(__name__)

IMAGE_SHAPES = {"pfzoo.data.digits": (8, 8), "pfzoo.data.binarized_mnist": (28, 28), "pfzoo.data.mnist": (28, 28)}
"""The data sets whose rows are pictures, by config ``_target_``: what a sample grid folds the rows into. Patches are
whitened components, not pixels; spin glasses and patterns are no pictures."""


def sample_source(cfg: DictConfig) -> tuple[Path, str | None, dict[str, Any] | None]:
    """``(checkpoint file, zoo name or None, the run's data config or None)`` of ``checkpoint=`` or ``pretrained=``."""
    if cfg.checkpoint and cfg.pretrained:
        raise ValueError(f"pass checkpoint=PATH or pretrained=NAME, not both (got checkpoint={cfg.checkpoint} pretrained={cfg.pretrained})")
    if cfg.checkpoint:
        config = zoo.load_checkpoint(cfg.checkpoint)["config"] or {}
        return Path(cfg.checkpoint), None, config.get("dataset")
    if not cfg.pretrained:
        names = zoo.list_pretrained(zoo_dir=cfg.zoo_dir)
        raise ValueError(f"pass pretrained=NAME (one of {', '.join(names) or 'none'}) or checkpoint=PATH")
    card = zoo.pretrained_card(cfg.pretrained, zoo_dir=cfg.zoo_dir)
    return zoo.pretrained_path(cfg.pretrained, zoo_dir=cfg.zoo_dir), cfg.pretrained, card["dataset_config"]


def sample(cfg: DictConfig) -> dict[str, Any]:
    """Draw ``cfg.num_samples`` visible samples ``[N, V]`` from the model by its own sampler (``model.sample``: exact
    draws where the family has them, else :data:`~pfzoo.app.run_pictures.DEFAULT_SAMPLER_STEPS` MCMC sweeps or steps)
    with a generator seeded ``cfg.seed``; writes ``samples.pt`` and, with ``picture=true`` for image data,
    ``samples.png`` into ``cfg.run_dir``, then ``result.json`` (:mod:`pfzoo.app.result_file`): its ``samples`` say
    what was drawn (``num_samples``, ``shape``, ``drawn`` in words, ``exact``, ``sampler_steps``) from which model
    (``model``, ``model_config``, ``pretrained`` name or ``None``, ``checkpoint`` and its ``checkpoint_sha256``), with the
    seed, the settings, the timings (``load``, ``sampling``, ``writing`` of the files, ``total``) and the machine. Returns what it
    wrote (``result_file`` included) and how the samples were drawn."""
    began = time.perf_counter()
    if cfg.num_samples < 1:
        raise ValueError(f"num_samples must be a positive number of samples, got {cfg.num_samples}")
    device = resolve_device(cfg.device)
    checkpoint, name, dataset = sample_source(cfg)
    model = zoo.load(checkpoint, map_location=device)
    started = time.perf_counter()
    with torch.no_grad():
        samples = model.sample(cfg.num_samples, generator=torch.Generator(device).manual_seed(cfg.seed))
    seconds = time.perf_counter() - started
    drawn = "exact draws" if model.samples_exactly else f"{DEFAULT_SAMPLER_STEPS} sweeps or steps of its MCMC sampler"
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    tensor_file = run_dir / "samples.pt"
    torch.save(samples.cpu(), tensor_file)
    shape = IMAGE_SHAPES.get((dataset or {}).get("_target_"))
    picture = None
    if cfg.picture and shape is not None:
        source = name or str(checkpoint)
        picture = pictures.save_image_grid(samples, shape, run_dir / "samples.png",
                                           caption=f"{source}: {cfg.num_samples} samples, {drawn}, seed {cfg.seed}")
    result = {"checkpoint": str(checkpoint), "pretrained": name, "model": model.registry_name, "num_samples": cfg.num_samples,
              "shape": list(samples.shape), "seed": cfg.seed, "drawn": drawn, "samples_file": str(tensor_file),
              "picture": None if picture is None else str(picture), "seconds": seconds,
              "no_picture": None if picture is not None or not cfg.picture else "the model's data are not images"}
    # what was drawn and from what, so a samples.pt can be traced to its model file even after the zoo changes
    drew = {key: result[key] for key in ("model", "pretrained", "checkpoint", "num_samples", "shape", "drawn")}
    drew.update(model_config=model.config(), checkpoint_sha256=zoo.file_sha256(checkpoint), exact=model.samples_exactly,
                sampler_steps=None if model.samples_exactly else DEFAULT_SAMPLER_STEPS)
    ended = time.perf_counter()
    timings = {"total": ended - began, "load": started - began, "sampling": seconds, "writing": ended - started - seconds}
    files = {"checkpoint": str(checkpoint), "samples": str(tensor_file), "pictures": [] if picture is None else [str(picture)]}
    record = result_record("sample", cfg, device, headline=None, estimator=None, timings=timings, files=files, samples=drew)
    result["result_file"] = str(write_result(run_dir, record))
    logger.info("%d samples of %s from %s: %s, seed %d; %s", cfg.num_samples, model.registry_name, name or checkpoint, drawn,
                cfg.seed, result["result_file"])
    return result


def format_sampling(result: dict[str, Any]) -> str:
    """The report ``pfzoo sample`` prints."""
    source = f"pretrained={result['pretrained']}" if result["pretrained"] else result["checkpoint"]
    lines = [f"{result['num_samples']} samples of {result['model']} from {source}: {result['drawn']}, seed {result['seed']}, "
             f"{result['seconds']:.1f} s",
             f"samples written to {result['samples_file']} (a float tensor of shape {result['shape']}; torch.load reads it)"]
    if result["picture"]:
        lines.append(f"picture: {result['picture']}")
    elif result["no_picture"]:
        lines.append(f"no picture: {result['no_picture']}")
    lines.append(f"result written to {result['result_file']}")
    return "\n".join(lines)
