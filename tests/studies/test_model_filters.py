"""HAIS report Fig. 1's mapping of filters and bases back to pixel patches (pfzoo.studies.model_comparison.filters)."""

import math

import pytest
import torch

from pfzoo.data.patches import fit_patch_transform
from pfzoo.studies.model_comparison.filters import bases_to_pixels, filters_figure, filters_to_pixels, grouping

P, M = 16, 5


def transform_and_patches():
    raw = torch.rand(400, P, generator=torch.Generator().manual_seed(0), dtype=torch.float64) + 0.05
    raw[:, :4] *= 3  # unequal variances, so a wrong scaling shows
    return fit_patch_transform(raw, M), raw


def test_a_pixel_filter_gives_the_component_filter_response():
    """w·z(x) = w_pix·(log(x + offset) − mean) for every patch x: the filter on the log pixels is the same filter."""
    transform, raw = transform_and_patches()
    w = torch.randn(3, M, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    log_centred = torch.log(raw + transform.offset) - transform.mean
    torch.testing.assert_close(transform.apply(raw) @ w.T, log_centred @ filters_to_pixels(w, transform).T)


def test_a_pixel_basis_vector_whitens_back_to_itself():
    """Adding the pixel basis vector to a patch's log pixels moves its components by exactly φ."""
    transform, _ = transform_and_patches()
    phi = torch.randn(3, M, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    torch.testing.assert_close((bases_to_pixels(phi, transform) @ transform.components.T) * transform.scales, phi)


def test_grouping_orders_by_magnitude_and_the_figure_draws_every_panel():
    plt = pytest.importorskip("matplotlib.pyplot")
    order, contrast = grouping(torch.tensor([0.1, -0.8, 0.4, 0.0]), 3)
    assert order.tolist() == [1, 2, 0] and torch.allclose(contrast, torch.tensor([1.0, 0.5, 0.125]))
    patches = torch.randn(7, 36, generator=torch.Generator().manual_seed(3))
    figure = filters_figure([{"title": "a", "patches": patches}, {"title": "b", "patches": patches[:3], "contrast": contrast}], columns=4)
    image = figure.axes[0].images[0].get_array()
    plt.close(figure)
    assert image.shape == (2 * 7 + 1, 4 * 7 + 1) and math.isclose(float(image.max()), 1.0)
