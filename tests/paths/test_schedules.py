import math

import pytest
import torch

from pfzoo.paths import (
    EnergyScaleSchedule, GeometricSchedule, LinearSchedule, OptimalSchedule, PowerSchedule, SigmoidSchedule, make_betas, registry,
)
from pfzoo.models import RBM


@pytest.mark.parametrize("schedule", ["linear", "sigmoid", "geometric", "power", "energy", "energy:5000", PowerSchedule(5.0),
                                      LinearSchedule(), SigmoidSchedule(scale=8.0), GeometricSchedule(0.1),
                                      OptimalSchedule([0.0, 0.3, 1.0], [4.0, 1.0])])
def test_named_schedules_run_from_zero_to_one(schedule):
    betas = make_betas(schedule, 100)
    assert betas.dtype == torch.float64 and betas.shape == (101,)
    assert betas[0] == 0.0 and betas[-1] == 1.0
    assert (betas.diff() >= 0).all()


def test_sigmoid_schedule_is_denser_at_both_ends():
    steps = make_betas("sigmoid", 100).diff()
    assert steps[0] < steps[50] and steps[-1] < steps[50]
    assert torch.allclose(steps, steps.flip(0))


def test_power_schedule_steps_shrink_towards_the_target():
    torch.testing.assert_close(PowerSchedule(1.0).betas(7), LinearSchedule().betas(7))
    torch.testing.assert_close(PowerSchedule(2.0).betas(4), torch.tensor([0.0, 7 / 16, 3 / 4, 15 / 16, 1.0], dtype=torch.float64))
    steps = PowerSchedule(5.0).betas(1000).diff()
    assert (steps.diff() <= 0).all()
    assert steps[-1] < 1e-12 < steps[0] / 1e6  # the last step is (1/K)^p, the first ≈ p/K


def test_schedule_names_take_one_argument_after_a_colon():
    torch.testing.assert_close(make_betas("power:5", 10), PowerSchedule(5.0).betas(10))
    torch.testing.assert_close(make_betas("sigmoid:8", 10), SigmoidSchedule(8.0).betas(10))
    torch.testing.assert_close(make_betas("geometric:1e-4", 10), GeometricSchedule(1e-4).betas(10))


@pytest.mark.parametrize("scale", [0.0, 0.3, 1.0])
def test_energy_schedule_is_linear_for_energies_that_vary_by_at_most_a_nat(scale):
    torch.testing.assert_close(EnergyScaleSchedule(scale).betas(50), LinearSchedule().betas(50))
    torch.testing.assert_close(make_betas("energy", 50), LinearSchedule().betas(50))  # not yet fitted to a path


def test_energy_schedule_spaces_steps_by_thermodynamic_length():
    """σ_0 = 1e4, share ½: β_k solves ½ β + ½ ℓ(β)/ℓ(1) = k/K with ℓ linear to β* = 1e-4 and logarithmic beyond."""
    betas = EnergyScaleSchedule(1e4, share=0.5).betas(1000)
    total = 1.0 + math.log(1e4)
    position = 0.5 * betas + 0.5 * torch.where(betas <= 1e-4, betas * 1e4, 1.0 + torch.log(betas.clamp(min=1e-4) * 1e4)) / total
    torch.testing.assert_close(position, torch.linspace(0.0, 1.0, 1001, dtype=torch.float64), atol=1e-12, rtol=0.0)
    assert (betas.diff() > 0).all()
    assert (betas <= 1e-4).sum() == 50 and (LinearSchedule().betas(1000) <= 1e-4).sum() == 1  # K·share/ℓ(1) steps below β*, linear: β_0
    assert betas.diff()[-1] < 1.0 / 1000 / 0.5 + 1e-12  # no stretch gets fewer than `1 − share` of linear's steps


def test_energy_schedule_is_fitted_to_the_path_from_base_samples():
    g = torch.Generator().manual_seed(0)
    model = RBM.from_tensors(torch.randn(12, 8, generator=g) * 100, torch.randn(12, generator=g) * 100, torch.zeros(8))
    path, _ = registry.build(model)
    fitted = EnergyScaleSchedule().fitted_to(path, generator=torch.Generator().manual_seed(1))
    again = EnergyScaleSchedule().fitted_to(path, generator=torch.Generator().manual_seed(1))
    assert fitted.energy_scale == again.energy_scale and 100 < fitted.energy_scale < 1000  # same seed, same schedule
    assert EnergyScaleSchedule(7.0).fitted_to(path).energy_scale == 7.0  # a given σ_0 is kept


def test_explicit_schedule():
    betas = make_betas([0.0, 0.5, 0.5, 1.0], None)
    assert betas.tolist() == [0.0, 0.5, 0.5, 1.0]
    assert make_betas(torch.tensor([0.0, 1.0]), 1).tolist() == [0.0, 1.0]


@pytest.mark.parametrize(
    "schedule, num_steps, message",
    [
        ("cosine", 10, "unknown schedule"),
        ("power:five", 10, "must be a number"),
        ("power:0.5", 10, "power must be a finite number of at least 1"),
        ("linear:2", 10, "takes no argument"),
        ("energy:-1", 10, "energy_scale"),
        ("energy:nan", 10, "energy_scale"),
        ("linear", 0, "num_steps"),
        ([0.0, 0.6, 0.4, 1.0], None, "non-decreasing"),
        ([0.1, 1.0], None, "start at 0"),
        ([0.0, 0.9], None, "end at 1"),
        ([0.0, 0.5, 1.0], 5, "disagrees"),
        ([1.0], None, "at least two"),
    ],
)
def test_bad_schedules_raise(schedule, num_steps, message):
    with pytest.raises(ValueError, match=message):
        make_betas(schedule, num_steps)


def test_geometric_schedule_is_log_spaced_after_zero():
    betas = GeometricSchedule(start=1e-4).betas(5)
    torch.testing.assert_close(betas, torch.tensor([0.0, 1e-4, 1e-3, 1e-2, 1e-1, 1.0], dtype=torch.float64))
    assert GeometricSchedule().betas(1).tolist() == [0.0, 1.0]


def test_optimal_schedule_allocates_steps_in_proportion_to_root_divergence():
    schedule = OptimalSchedule([0.0, 0.5, 0.75, 1.0], [16.0, 4.0, 0.0])  # √J = 4, 2, 0: lengths 4 + 2 + 0
    betas = schedule.betas(60)
    assert betas.shape == (61,) and betas[0] == 0.0 and betas[-1] == 1.0 and (betas.diff() > 0).all()
    torch.testing.assert_close(betas[:41], torch.linspace(0, 0.5, 41, dtype=torch.float64))  # 40 steps in the first segment
    torch.testing.assert_close(betas[40:60], torch.linspace(0.5, 0.75, 21, dtype=torch.float64)[:-1])  # 20 in the second
    assert betas[59].item() == pytest.approx(0.7375)  # and the divergence-free last segment is stepped over
    # fewer steps than segments is fine
    assert OptimalSchedule(torch.linspace(0, 1, 11, dtype=torch.float64), torch.ones(10)).betas(2).tolist() == [0.0, 0.5, 1.0]


def test_optimal_schedule_beats_other_schedules_on_the_first_order_cost():
    """Σ_k J(β_{k−1}, β_k) / 2 with J the piecewise-constant-speed divergence is smallest for the optimal schedule."""
    knots = torch.linspace(0, 1, 5, dtype=torch.float64)
    divergences = torch.tensor([9.0, 1.0, 0.25, 4.0], dtype=torch.float64)
    schedule = OptimalSchedule(knots, divergences)
    speed = (divergences.sqrt() / knots.diff())  # √J per unit β inside each segment

    def cost(betas):
        fine = torch.linspace(0, 1, 100_001, dtype=torch.float64)[:-1] + 0.5e-5  # midpoints of a fine grid
        step_of = torch.searchsorted(betas, fine, right=True) - 1
        widths = betas.diff()[step_of]
        local = speed[(fine * 4).long().clamp(max=3)]
        return (local.square() * widths * 1e-5).sum().item() / 2  # Σ_k (∫ speed)² / 2 ≈ Σ_k J_k / 2

    optimal = cost(schedule.betas(50))
    for other in ("linear", "sigmoid", "geometric"):
        assert optimal < cost(make_betas(other, 50))
    assert optimal == pytest.approx((divergences.sqrt().sum().item()) ** 2 / (2 * 50), rel=0.02)


def test_optimal_schedule_from_diagnostics_uses_pilot_betas_and_estimates():
    class Pilot:
        betas = torch.tensor([0.25, 0.5, 0.5, 1.0], dtype=torch.float64)
        symmetric_kl = torch.tensor([1.0, 1.0, 0.0, -0.5], dtype=torch.float64)

    schedule = OptimalSchedule.from_diagnostics(Pilot())
    assert schedule.knots.tolist() == [0.0, 0.25, 0.5, 1.0]  # the repeated β is merged
    assert schedule.divergences.tolist() == [1.0, 1.0, 0.0]  # the negative estimate clamped


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: GeometricSchedule(start=0.0), "start"),
        (lambda: PowerSchedule(power=0.5), "power must be a finite number of at least 1"),
        (lambda: PowerSchedule(power=float("inf")), "power must be a finite number"),
        (lambda: OptimalSchedule([0.0, 0.5], [1.0]), "knots"),
        (lambda: OptimalSchedule([0.0, 0.5, 0.5, 1.0], [1.0, 1.0, 1.0]), "knots"),
        (lambda: OptimalSchedule([0.0, 1.0], [1.0, 2.0]), "one entry per segment"),
        (lambda: OptimalSchedule([0.0, 1.0], [float("nan")]), "finite"),
        (lambda: OptimalSchedule.for_path(object()), "symmetric_divergences"),
    ],
)
def test_bad_schedule_objects_raise(make, message):
    with pytest.raises(ValueError, match=message):
        make()
