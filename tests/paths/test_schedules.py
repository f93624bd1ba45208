import pytest
import torch

from pfzoo.paths import LinearSchedule, SigmoidSchedule, make_betas


@pytest.mark.parametrize("schedule", ["linear", "sigmoid", LinearSchedule(), SigmoidSchedule(scale=8.0)])
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
