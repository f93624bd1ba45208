"""HAIS report Figure 1 (thesis Figure 5.1): the bases and filters each model of Table 1 learned, as image patches.

The models see whitened principal components ``z = s ⊙ (U (log x − μ))`` (:class:`pfzoo.data.patches.PatchTransform`:
``U [M, P]`` orthonormal rows, ``s [M]`` the inverse standard deviations). A filter ``w [M]`` acts on z, so on the log
pixels it is ``Uᵀ (s ⊙ w)`` (:func:`filters_to_pixels`); a basis vector ``φ [M]`` generates z, so in log-pixel space
it is ``Uᵀ (φ / s)`` (:func:`bases_to_pixels`). Both give ``[N, P]`` patches, drawn by :func:`filters_figure`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from pfzoo.data.patches import PatchTransform
from pfzoo.pictures import tile_images

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def filters_to_pixels(filters: torch.Tensor, transform: PatchTransform) -> torch.Tensor:
    """Filters ``[N, M]`` on the whitened components → the same filters on the log pixels, ``[N, P]`` float64."""
    return (filters.double() * transform.scales) @ transform.components


def bases_to_pixels(bases: torch.Tensor, transform: PatchTransform) -> torch.Tensor:
    """Basis vectors ``[N, M]`` (one per row) in the whitened components → the patches they add, ``[N, P]`` float64."""
    return (bases.double() / transform.scales) @ transform.components


def grouping(weights: torch.Tensor, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``count`` largest entries of one non-negative-or-signed weight column ``[K]`` by magnitude → (indices, each
    |weight| / the largest), the order and contrast of the paper's grouping panels (Fig. 1 f, i)."""
    magnitude = weights.abs()
    order = magnitude.argsort(descending=True)[:count]
    return order, magnitude[order] / magnitude[order[0]]


def _tile_grid(patches: torch.Tensor, contrast: torch.Tensor | None, columns: int) -> torch.Tensor:
    """``patches [N, P]`` (P a square) as one grey image: each tile scaled by its own largest |value| (times its
    ``contrast`` when given), 0 → mid-grey, a one-pixel white border."""
    side = math.isqrt(patches.shape[1])
    scaled = patches / patches.abs().amax(1, keepdim=True).clamp_min(1e-12)
    if contrast is not None:
        scaled = scaled * contrast[:, None].double()
    return tile_images(0.5 + 0.5 * scaled.reshape(-1, side, side), columns)


def filters_figure(panels: list[dict], columns: int = 12) -> Figure:
    """One panel per entry of ``panels`` (``{"title", "patches": [N, P], "contrast": [N] or None}``), stacked; the
    caller saves and closes it."""
    from matplotlib import pyplot as plt

    grids = [_tile_grid(p["patches"], p.get("contrast"), columns) for p in panels]
    heights = [g.shape[0] for g in grids]
    # panels share the width (6.5 in of tiles), so the height follows the tiles' aspect, plus a title line each
    figure, axes = plt.subplots(len(panels), 1, figsize=(7, 6.5 * sum(heights) / grids[0].shape[1] + 0.3 * len(panels)),
                                gridspec_kw={"height_ratios": heights})
    for ax, grid, panel in zip(axes, grids, panels):
        ax.imshow(grid.numpy(), cmap="gray", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(panel["title"], fontsize=8, loc="left")
        ax.axis("off")
    figure.tight_layout()
    return figure
