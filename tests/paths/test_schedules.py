import pytest
import torch

from pfzoo.paths import GeometricSchedule, LinearSchedule, OptimalSchedule, SigmoidSchedule, make_betas


@pytest.mark.parametrize("schedule", ["linear", "sigmoid", "geometric", LinearSchedule(), SigmoidSchedule(scale=8.0), GeometricSchedule(0.1),
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


def test_explicit_schedule():
    betas = make_betas([0.0, 0.5, 0.5, 1.0], None)
    assert betas.tolist() == [0.0, 0.5, 0.5, 1.0]
    assert make_betas(torch.tensor([0.0, 1.0]), 1).tolist() == [0.0, 1.0]


@pytest.mark.parametrize(
    "schedule, num_steps, message",
    [
        ("cosine", 10, "unknown schedule"),
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
    schedule = OptimalSchedule([0.0, 0.5, 0.75, 1.0], [16.0, 4.0, 0.0])  # √J = 4, 2, 0
    counts = schedule.allocation(63)
    assert counts.tolist() == [41, 21, 1]  # one step each up front, the 60 spare split 2:1:0
    betas = schedule.betas(63)
    assert betas.shape == (64,) and betas[0] == 0.0 and betas[-1] == 1.0 and (betas.diff() > 0).all()
    torch.testing.assert_close(betas[1:42].diff(), torch.full((40,), 0.5 / 41, dtype=torch.float64))
    assert betas[41].item() == pytest.approx(0.5) and betas[62].item() == pytest.approx(0.75)


def test_optimal_schedule_minimises_the_first_order_cost():
    """Σ_j J_j / (2 K_j) at the allocation is no larger than at any other allocation tried (perturbations by ±1)."""
    divergences = torch.tensor([9.0, 1.0, 0.25, 4.0], dtype=torch.float64)
    schedule = OptimalSchedule(torch.linspace(0, 1, 5, dtype=torch.float64), divergences)
    counts = schedule.allocation(200)

    def cost(allocation):
        return (divergences / (2 * allocation)).sum().item()

    for i in range(4):
        for j in range(4):
            if i != j and counts[j] > 1:
                moved = counts.clone().double()
                moved[i] += 1
                moved[j] -= 1
                assert cost(counts.double()) <= cost(moved) + 1e-12


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
        (lambda: OptimalSchedule([0.0, 0.5], [1.0]), "knots"),
        (lambda: OptimalSchedule([0.0, 0.5, 0.5, 1.0], [1.0, 1.0, 1.0]), "knots"),
        (lambda: OptimalSchedule([0.0, 1.0], [1.0, 2.0]), "one entry per segment"),
        (lambda: OptimalSchedule([0.0, 1.0], [float("nan")]), "finite"),
        (lambda: OptimalSchedule([0.0, 0.5, 1.0], [1.0, 1.0]).betas(1), "at least the number of segments"),
        (lambda: OptimalSchedule.for_path(object()), "symmetric_divergences"),
    ],
)
def test_bad_schedule_objects_raise(make, message):
    with pytest.raises(ValueError, match=message):
        make()
