"""ProductOfExperts(shape_above_half=True): Student-t shapes λ = ½ + softplus(ρ), the same density, Z finite throughout."""

import math

import pytest
import torch

from pfzoo import zoo
from pfzoo.models import ProductOfExperts
from pfzoo.training import ExactMaximumLikelihood


def filters_and_shapes(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(4, 4, generator=g, dtype=torch.float64), 0.6 + 2 * torch.rand(4, generator=g, dtype=torch.float64)


def test_same_density_as_the_log_shape_parametrization():
    filters, shapes = filters_and_shapes()
    plain = ProductOfExperts.from_tensors(filters, shapes, expert="student_t")
    bounded = ProductOfExperts.from_tensors(filters, shapes, expert="student_t", shape_above_half=True)
    x = torch.randn(7, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert not hasattr(bounded, "log_shape") and bounded.shape_excess.shape == (4,)
    assert torch.allclose(bounded.shape, shapes, atol=1e-12)
    assert torch.allclose(bounded.energy(x), plain.energy(x), atol=1e-12)
    assert torch.allclose(bounded.energy_grad(x), plain.energy_grad(x), atol=1e-12)
    assert bounded.log_partition().item() == pytest.approx(plain.log_partition().item(), abs=1e-10)


def test_default_shapes_start_at_one_and_a_half():
    model = ProductOfExperts(3, 3, "student_t", shape_above_half=True)
    assert torch.allclose(model.shape, torch.full((3,), 1.5), atol=1e-6)


def test_every_raw_value_gives_a_shape_above_half_and_a_finite_log_z():
    model = ProductOfExperts.from_tensors(torch.eye(3, dtype=torch.float64), expert="student_t", shape_above_half=True)
    with torch.no_grad():
        model.shape_excess.copy_(torch.tensor([-5.0, 0.0, 30.0], dtype=torch.float64))  # a line search's far trial points
    assert (model.shape > 0.5).all() and math.isfinite(model.log_partition().item())
    plain = ProductOfExperts.from_tensors(torch.eye(3, dtype=torch.float64), torch.tensor([0.4, 1.0, 2.0], dtype=torch.float64),
                                          expert="student_t")
    with pytest.raises(ValueError, match="exceed 1/2"):
        plain.log_partition()  # what the option avoids


def test_maximum_likelihood_gradient_reaches_the_raw_shapes():
    filters, shapes = filters_and_shapes(2)
    model = ProductOfExperts.from_tensors(filters, shapes, expert="student_t", shape_above_half=True)
    x = torch.randn(50, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    ExactMaximumLikelihood().loss(model, x).backward()
    assert model.shape_excess.grad is not None and torch.isfinite(model.shape_excess.grad).all()
    assert model.shape_excess.grad.abs().sum() > 0


def test_checkpoint_round_trip_keeps_the_parametrization(tmp_path):
    filters, shapes = filters_and_shapes(3)
    model = ProductOfExperts.from_tensors(filters, shapes, expert="student_t", shape_above_half=True)
    assert model.config()["shape_above_half"] is True
    assert "shape_above_half" not in ProductOfExperts(4, 4, "student_t").config()  # old checkpoints' configs unchanged
    zoo.save(model, tmp_path / "poe.pt")
    loaded = zoo.load(tmp_path / "poe.pt")
    assert loaded.shape_above_half and torch.allclose(loaded.shape.double(), shapes, atol=1e-6)


def test_from_tensors_refuses_shapes_at_or_below_half():
    filters, _ = filters_and_shapes()
    with pytest.raises(ValueError, match="exceed 1/2"):
        ProductOfExperts.from_tensors(filters, torch.full((4,), 0.5, dtype=torch.float64), expert="student_t", shape_above_half=True)
