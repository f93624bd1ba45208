"""The pictures a run writes into its folder: training curves, samples and filters, the annealing path's diagnostics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from pfzoo import pictures

PICTURE_SAMPLES = 64
PICTURE_FILTERS = 100
DEFAULT_SAMPLER_STEPS = 1000
"""The steps every family's MCMC ``sample`` takes by default (Gibbs sweeps of the Boltzmann machines and Ising
models, HMC steps of the continuous ones): what the samples' caption states (tests/test_pictures.py holds them to it)."""


def training_pictures(model, data, metrics_file: Path, run_dir: Path, *, seed: int, title: str | None = None,
                      loss_label: str = "loss") -> list[Path]:
    """``curves.png`` (loss and log-likelihoods by epoch, the closing estimate at the last; headed by ``title``, its
    loss axis named ``loss_label``) and, for image data, ``samples.png`` (64 samples of the trained model, its own
    sampler) and ``filters.png`` (its first-layer filters, each on its own contrast)."""
    written = [pictures.save_training_curves(metrics_file, run_dir / "curves.png", title=title, loss_label=loss_label)]
    return [path for path in written if path is not None] + model_pictures(model, data, run_dir, seed=seed)


def model_pictures(model, data, run_dir: Path, *, seed: int) -> list[Path]:
    """For image data (a 2-d ``data.image_shape``): ``samples.png`` (64 samples of the model, its own sampler) and
    ``filters.png`` (its first-layer filters, each on its own contrast, when it has filters); nothing otherwise. Each
    grid is captioned with the model, its sizes, the data set and how the samples were drawn (:func:`caption`)."""
    if not draws_images(data):
        return []
    with torch.no_grad():
        samples = model.sample(PICTURE_SAMPLES, generator=torch.Generator(model.device).manual_seed(seed))
    drawn = "exact draws" if model.samples_exactly else f"{DEFAULT_SAMPLER_STEPS} sweeps of its MCMC sampler"
    written = [pictures.save_image_grid(samples, data.image_shape, run_dir / "samples.png",
                                        caption=caption(model, data, f"{PICTURE_SAMPLES} samples, {drawn}"))]
    filters = model.visible_filters()
    if filters is not None:
        shown = f"first-layer filters ({min(PICTURE_FILTERS, filters.shape[0])} of {filters.shape[0]}), each on its own contrast"
        written.append(pictures.save_image_grid(filters[:PICTURE_FILTERS], data.image_shape, run_dir / "filters.png",
                                                per_image_contrast=True, caption=caption(model, data, shown)))
    return written


def caption(model, data, shown: str) -> str:
    """``"<family> (<its config>) on <data set>: <shown>"``, e.g. ``rbm (num_visible=64, num_hidden=20) on digits: 64
    samples, ..."``: the sizes are the config's numbers (and lists of them)."""
    sizes = ", ".join(f"{key}={value}" for key, value in model.config().items()
                      if key != "max_enumeration_units" and isinstance(value, (int, list)) and not isinstance(value, bool))
    return f"{model.registry_name} ({sizes}) on {data.name}: {shown}"


def draws_images(data) -> bool:
    """Whether ``data``'s rows fold into 2-d images (``data.image_shape``), so samples and filters can be drawn."""
    return data.image_shape is not None and len(data.image_shape) == 2


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
