"""Every model family's ``repr`` names its sizes (``RBM(num_visible=784, num_hidden=500)``), not a bare ``RBM()``."""

import pytest
import torch
from factories import random_energy_function
from test_factories import CASES

# The size attributes a family may hold; each one a model has must appear as ``name=value`` in its repr.
SIZE_ATTRIBUTES = (
    "num_visible", "num_hidden", "layer_sizes", "num_units", "num_experts", "num_factors", "num_covariance_hidden",
    "num_mean_hidden", "num_latent", "num_components", "num_content", "num_style",
)

BUILDS = [build for _, _, build, _ in CASES] + [lambda seed, dtype: random_energy_function(3, seed=seed, dtype=dtype)]
IDS = [case_id for _, case_id, _, _ in CASES] + ["energy_function"]


@pytest.mark.parametrize("build", BUILDS, ids=IDS)
def test_repr_names_every_size(build):
    model = build(0, torch.float64)
    text = repr(model)
    sizes = {name: getattr(model, name) for name in SIZE_ATTRIBUTES if hasattr(model, name)}
    assert sizes, f"{type(model).__name__} holds none of {SIZE_ATTRIBUTES}"
    if "layer_sizes" in sizes or "num_units" in sizes:  # a stack's first layer size, an Ising model's D: the same number
        del sizes["num_visible"]
    if "num_content" in sizes:  # a bilinear model's latent width is num_content + num_style
        del sizes["num_latent"]
    assert not text.startswith(f"{type(model).__name__}()"), text
    for name, value in sizes.items():
        assert f"{name}={list(value) if name == 'layer_sizes' else value}" in text, (name, text)


def test_poe_repr_names_its_expert():
    model = next(build for _, case_id, build, _ in CASES if case_id == "poe_student_t")(0, torch.float64)
    assert "expert='student_t'" in repr(model)
