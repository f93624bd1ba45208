"""Steps for a given perfect-transition bias, and the end-dense partition of the optimal schedule."""

import math

import pytest
import torch

from pfzoo.models import Gaussian
from pfzoo.paths import GaussianGeometricPath, GaussianMomentAveragedPath, OptimalSchedule, make_betas
from pfzoo.paths.step_count import end_dense_knots, growth_exponents, steps_for_bias


def gaussians(distance):
    unit = torch.eye(1, dtype=torch.float64)
    return Gaussian.from_tensors(unit, torch.tensor([distance], dtype=torch.float64)), Gaussian.from_tensors(unit)


def test_end_dense_knots_are_log_spaced_towards_both_ends_and_mirrored():
    knots = end_dense_knots(5)
    assert knots.dtype == torch.float64 and knots.numel() == 11
    assert knots[0] == 0 and knots[5] == 0.5 and knots[-1] == 1 and (knots.diff() > 0).all()
    assert knots[1].item() == pytest.approx(1e-9)
    assert torch.allclose(knots[1:5], 1 - knots[6:10].flip(0))
    ratios = knots[2:5] / knots[1:4]
    assert torch.allclose(ratios, ratios[0].expand(3))  # geometric spacing


def test_geometric_path_between_unit_gaussians_needs_the_closed_form_number_of_steps():
    """GA between N(0, 1) and N(d, 1) with a linear schedule: each of K steps moves the mean by d/K, so the bias is
    K · (d/K)²/2 = d²/(2K) and the smallest K with bias ≤ a is ceil(d²/(2a))."""
    target, base = gaussians(8.0)
    path = GaussianGeometricPath(target, base)
    steps, bias = steps_for_bias(path, "linear", 0.15)  # d²/(2a) = 213.3 (no tie with an integer K)
    assert steps == math.ceil(64 / 0.3) == 214 and bias == pytest.approx(64 / (2 * steps)) and bias <= 0.15
    assert path.kl_sum(make_betas("linear", steps - 1)).item() > 0.15


def test_the_optimal_schedule_needs_far_fewer_steps_on_the_moment_averaged_path():
    target, base = gaussians(64.0)
    path = GaussianMomentAveragedPath(target, base)
    linear, _ = steps_for_bias(path, "linear", 0.1)
    optimal, bias = steps_for_bias(path, OptimalSchedule.for_path(path, end_dense_knots(100)), 0.1)
    assert bias <= 0.1 and optimal < linear / 10


def test_steps_for_bias_refuses_bad_inputs():
    target, base = gaussians(2.0)
    path = GaussianGeometricPath(target, base)
    with pytest.raises(ValueError, match="accuracy"):
        steps_for_bias(path, "linear", 0.0)
    with pytest.raises(ValueError, match="kl_sum"):
        steps_for_bias(object(), "linear", 0.1)
    with pytest.raises(RuntimeError, match="steps needed"):
        steps_for_bias(path, "linear", 1e-6, max_steps=64)
    with pytest.raises(ValueError, match="num_per_side"):
        end_dense_knots(1)


def test_growth_exponents_recover_power_and_log_squared_laws():
    distances = [2.0, 4.0, 16.0, 256.0]
    by_d, _ = growth_exponents(distances, [3 * d**2 for d in distances])
    assert by_d == pytest.approx(2.0)
    _, by_log_d = growth_exponents(distances, [7 * math.log(d) ** 2 for d in distances])
    assert by_log_d == pytest.approx(1.0)
    with pytest.raises(ValueError, match="distances > 1"):
        growth_exponents([1.0, 2.0], [1, 2])
