"""Pictures the app writes beside its numbers: image grids of samples and filters, training curves, annealing diagnostics.

Each function writes one PNG and returns its path; nothing is shown on screen (matplotlib's Agg backend), so they
run on machines without a display.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import Sequence

import torch
from PIL import Image, ImageDraw, ImageFont


GRID_SIDE = 640
"""Image grids are enlarged (by a whole factor, nearest neighbour) to at least this many pixels across."""
CAPTION_FONT_SIZE = 16


def save_image_grid(
    rows: torch.Tensor, image_shape: Sequence[int], path: str | Path, *, per_image_contrast: bool = False, caption: str | None = None,
) -> Path:
    """Fold ``rows [N, D]`` into ``image_shape`` (``prod = D``) images and save them as one grid, √N per row, enlarged
    to at least :data:`GRID_SIDE` pixels across, with ``caption`` (what is shown: model, data set, how it was drawn)
    in a white band above it, wrapped to the grid's width.

    ``per_image_contrast`` rescales every image to its own range (filters: their sign and scale vary), else one
    range for the whole grid (samples of binary data: 0 is black, 1 white).
    """
    height, width = image_shape
    images = rows.detach().float().cpu().reshape(-1, 1, height, width)
    nrow = max(1, int(math.ceil(math.sqrt(images.shape[0]))))
    grid = _make_grid(images, nrow=nrow, padding=1, normalize=True, scale_each=per_image_contrast, pad_value=0.5)
    upscale = max(1, math.ceil(GRID_SIDE / grid.shape[-1]))  # small images (8×8 digits) are enlarged to be seen
    grid = torch.nn.functional.interpolate(grid[None], scale_factor=upscale, mode="nearest")[0]
    picture = Image.fromarray(grid.clamp(0, 1).mul(255).to(torch.uint8).permute(1, 2, 0).cpu().numpy())
    if caption:
        picture = with_caption(picture, caption)
    path = Path(path)
    picture.save(path)
    return path


def tile_images(images: torch.Tensor, columns: int, *, padding: int = 1, pad_value: float = 1.0) -> torch.Tensor:
    """``images [N, H, W]`` as one ``[rows · (H + padding) + padding, columns · (W + padding) + padding]`` image, row by
    row, ``columns`` per row, ``padding`` pixels of ``pad_value`` between and around them (values as given: no rescaling),
    for a panel that matplotlib draws with its own axes and labels."""
    return _make_grid(images.detach().float().cpu()[:, None], nrow=columns, padding=padding, pad_value=pad_value)[0]


def with_caption(picture: Image.Image, caption: str) -> Image.Image:
    """``picture`` below a white band holding ``caption`` in black, wrapped to the picture's width."""
    font = ImageFont.load_default(size=CAPTION_FONT_SIZE)
    per_line = max(20, int(picture.width / (0.55 * CAPTION_FONT_SIZE)))  # about the characters of the font that fit
    lines = textwrap.wrap(caption, per_line)
    line_height = CAPTION_FONT_SIZE + 4
    band = line_height * len(lines) + 8
    framed = Image.new("RGB", (picture.width, picture.height + band), "white")
    framed.paste(picture.convert("RGB"), (0, band))
    draw = ImageDraw.Draw(framed)
    for index, line in enumerate(lines):
        draw.text((4, 4 + index * line_height), line, fill="black", font=font)
    return framed


def save_labelled_grids(grids: dict[str, torch.Tensor], image_shape: Sequence[int], path: str | Path) -> Path:
    """One panel per entry of ``grids`` (``name -> rows [N, D]``, folded into ``image_shape`` images, √N per row, 0 black
    and 1 white), titled by its name, side by side in one PNG: e.g. samples of one model per training principle."""
    height, width = image_shape
    columns = min(4, len(grids))
    rows_of_panels = math.ceil(len(grids) / columns)
    plt = _pyplot()
    figure, axes = plt.subplots(rows_of_panels, columns, figsize=(3.2 * columns, 3.4 * rows_of_panels), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, (name, rows) in zip(axes.flat, grids.items()):
        images = rows.detach().float().cpu().reshape(-1, 1, height, width)
        grid = _make_grid(images, nrow=max(1, int(math.ceil(math.sqrt(images.shape[0])))), padding=1, pad_value=0.5)
        ax.imshow(grid[0].numpy(), cmap="gray", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(name, fontsize=10)
    figure.tight_layout()
    return _save(figure, path)


CLOSING = "closing_test_log_likelihood"
"""The key of a run's closing estimate in its last metrics record (:meth:`pfzoo.training.Trainer.record_result`)."""


def save_training_curves(metrics_file: str | Path, path: str | Path, *, title: str | None = None,
                         loss_label: str = "loss") -> Path | None:
    """Loss and every log-likelihood-like metric of ``metrics.jsonl`` against the epoch (an estimator's
    ``test_log_likelihood``, a :class:`~pfzoo.training.PartitionTracker`'s ``{train,test}_tracked_log_likelihood``, ...),
    each with a ±2 stderr band where its ``<name>_stderr`` is logged, and the run's closing estimate (:data:`CLOSING`)
    as a point with ±2 stderr bars at the last epoch; ``None`` with no records. ``title`` (what was trained on what, by
    which objective) heads the figure; ``loss_label`` names the loss panel's quantity (the objective's own units)."""
    records = [json.loads(line) for line in Path(metrics_file).read_text().splitlines() if line.strip()]
    if not records:
        return None
    epochs = [record["epoch"] for record in records]
    likelihoods = sorted({key for record in records for key in record if key.endswith("log_likelihood") and key != CLOSING})
    panels = [["loss"], likelihoods or ([CLOSING] if any(CLOSING in record for record in records) else [])]
    panels = [keys for keys in panels if keys]
    plt = _pyplot()
    figure, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for axis, keys in zip(axes[0], panels):
        for key in keys:
            points = [(epoch, record[key]) for epoch, record in zip(epochs, records) if isinstance(record.get(key), (int, float))]
            if points and key != CLOSING:
                line, = axis.plot(*zip(*points), marker="." if len(points) < 30 else None, label=key.replace("_", " "))
                band = [(epoch, record[key], record[f"{key}_stderr"]) for epoch, record in zip(epochs, records)
                        if isinstance(record.get(key), (int, float)) and isinstance(record.get(f"{key}_stderr"), (int, float))]
                if band:
                    x, y, stderr = zip(*band)
                    axis.fill_between(x, [a - 2 * b for a, b in zip(y, stderr)], [a + 2 * b for a, b in zip(y, stderr)],
                                      color=line.get_color(), alpha=0.2, linewidth=0)
        if keys != ["loss"]:
            _closing_point(axis, records)
        axis.set_xlabel("epoch")
        axis.xaxis.get_major_locator().set_params(integer=True)
        axis.set_ylabel(loss_label if keys == ["loss"] else "nats per example")
        axis.set_title("training loss (minimised)" if keys == ["loss"] else "log-likelihoods (higher is better)", fontsize=10)
        if keys != ["loss"]:
            axis.legend(fontsize=8)
        axis.grid(alpha=0.3)
    if title:
        figure.suptitle("\n".join(textwrap.wrap(title, 60 * len(panels))), fontsize=10)
    return _save(figure, path)


def _closing_point(axis, records: list[dict]) -> None:
    """The closing estimate of the last record (:data:`CLOSING`, its stderr, estimator and kind) as a point with ±2
    stderr bars, labelled with what measured it."""
    last = records[-1]
    value = last.get(CLOSING)
    if not isinstance(value, (int, float)):
        return
    stderr = last.get(f"{CLOSING}_stderr") or 0.0
    estimator, kind = last.get("closing_estimator", "?"), str(last.get("closing_kind", "?")).split(":")[0]
    label = f"closing test log-likelihood ({estimator if estimator == kind else f'{estimator}, {kind}'})"
    axis.errorbar([last["epoch"]], [value], yerr=[2 * stderr], fmt="D", color="black", capsize=3, label=label)


def save_path_diagnostics(diagnostics: dict, path: str | Path) -> Path:
    """Increment variance (≈ the symmetric KL between neighbouring distributions) and ESS along β, from the
    ``path_diagnostics`` an estimator with ``diagnostics=true`` reports."""
    plt = _pyplot()
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(6, 5), sharex=True)
    top.semilogy(diagnostics["betas"], diagnostics["increment_var"])
    top.set_ylabel("Var Δ log w (≈ J_k)")
    top.set_title(f"½ Σ J_k = {diagnostics['cost_functional']:.3g} nats")
    bottom.plot(diagnostics["betas"], diagnostics["ess"])
    bottom.set_ylabel("ESS")
    bottom.set_xlabel("β")
    for axis in (top, bottom):
        axis.grid(alpha=0.3)
    return _save(figure, path)


def _pyplot():
    """matplotlib's pyplot on the Agg backend, imported on first use: it and torchvision take seconds to import, and
    every ``python -m pfzoo`` command (``--help`` included) imports this module."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _make_grid(images: torch.Tensor, **options) -> torch.Tensor:
    """torchvision's ``make_grid``, imported on first use (see ``_pyplot``)."""
    from torchvision.utils import make_grid

    return make_grid(images, **options)


def _save(figure, path: str | Path) -> Path:
    """Lay out, write and close ``figure``."""
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=100)
    _pyplot().close(figure)
    return path
