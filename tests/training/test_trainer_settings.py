"""TrainerSettings: validation naming the field, and the rules the settings imply."""

import dataclasses

import pytest

from pfzoo.training.trainer_settings import LOGGED_EPOCHS, TrainerSettings, check_optimizer_factory


def logged(settings):
    return [epoch for epoch in range(1, settings.epochs + 1) if settings.logs(epoch)]


def test_by_default_about_logged_epochs_epochs_log_a_line():
    assert logged(TrainerSettings(epochs=3)) == [1, 2, 3]
    assert logged(TrainerSettings(epochs=LOGGED_EPOCHS * 7)) == [1, *range(7, LOGGED_EPOCHS * 7 + 1, 7)]
    assert logged(TrainerSettings(epochs=100, log_every=30)) == [1, 30, 60, 90, 100]


def test_build_replaces_fields_and_validates_the_whole_again():
    """The Trainer's keyword arguments: the default interval between log lines follows the new epochs (it was once
    resolved on construction and kept by a copy with other epochs); an unknown name is refused in one line."""
    base = TrainerSettings.build(epochs=LOGGED_EPOCHS, seed=3)
    longer = TrainerSettings.build(base, epochs=LOGGED_EPOCHS * 2)
    assert (longer.seed, longer.epochs, base.epochs) == (3, LOGGED_EPOCHS * 2, LOGGED_EPOCHS)
    assert logged(longer)[:3] == [1, 2, 4]
    assert TrainerSettings.build() == TrainerSettings()
    with pytest.raises(ValueError, match=r"^unknown trainer setting epoch, seeds: expected TrainerSettings fields \(epochs, "):
        TrainerSettings.build(epoch=3, seeds=1)
    with pytest.raises(ValueError, match="batch_size"):
        TrainerSettings.build(base, batch_size=0)
    with pytest.raises(ValueError, match="settings must be a TrainerSettings or None, got dict"):
        TrainerSettings.build({"epochs": 3})


def test_settings_are_frozen_and_normalised():
    settings = TrainerSettings(weight_decay=1, stop_tolerance=0, max_seconds=2)
    assert settings.weight_decay == 1.0 and isinstance(settings.weight_decay, float)
    assert isinstance(settings.stop_tolerance, float) and isinstance(settings.max_seconds, float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.epochs = 3


@pytest.mark.parametrize(("field", "value"), [
    ("epochs", 0), ("epochs", 2.0), ("batch_size", True), ("checkpoint_every", -1), ("evaluate_every", -1),
    ("evaluate_every", False), ("weight_decay", -0.1), ("weight_decay", float("nan")), ("learning_rate_decay", -1.0),
    ("progress", "yes"), ("seed", 1.5), ("stop_tolerance", float("inf")), ("stop_tolerance", -1e-3),
    ("max_seconds", 0), ("log_every", 0), ("csv", "no"), ("tensorboard", 1),
])
def test_a_bad_setting_is_refused_naming_it(field, value):
    with pytest.raises(ValueError, match=field):
        TrainerSettings(**{field: value})


def test_optimizer_factory_must_be_callable_with_finite_config_numbers():
    from functools import partial

    import torch

    assert check_optimizer_factory(torch.optim.SGD) is torch.optim.SGD
    with pytest.raises(ValueError, match="optimizer"):
        check_optimizer_factory("sgd")
    with pytest.raises(ValueError, match="optimizer.lr"):
        check_optimizer_factory(partial(torch.optim.SGD, lr=float("nan")))


def test_learning_rate_schedule_and_the_epochs_that_log_evaluate_and_checkpoint():
    settings = TrainerSettings(epochs=10, learning_rate_decay=0.5, evaluate_every=4, checkpoint_every=3, log_every=5)
    assert [settings.learning_rate(0.2, epoch) for epoch in (1, 2, 3)] == [0.2, 0.2 / 1.5, 0.2 / 2.0]
    assert [epoch for epoch in range(1, 11) if settings.logs(epoch)] == [1, 5, 10]
    assert [epoch for epoch in range(1, 11) if settings.evaluates(epoch)] == [4, 8, 10]
    assert [epoch for epoch in range(1, 11) if settings.checkpoints(epoch, stopping=False)] == [3, 6, 9, 10]
    assert settings.checkpoints(4, stopping=True)
    assert not any(TrainerSettings(epochs=10).evaluates(epoch) for epoch in range(1, 11))  # evaluate_every=0: never


def test_the_schedule_sets_each_epochs_rate_and_momentum_from_the_optimizers_initial_ones():
    import torch

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.2, momentum=0.5)
    settings = TrainerSettings(learning_rate_decay=0.5, final_momentum=0.9, momentum_ramp_epochs=4)
    for epoch in (1, 3):
        settings.apply_schedule(optimizer, epoch)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.1) and optimizer.param_groups[0]["momentum"] == pytest.approx(0.7)
    with pytest.raises(ValueError, match="final_momentum needs an optimizer with a momentum setting"):
        settings.apply_schedule(torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))]), 1)


def test_stop_reason_by_relative_loss_change_and_by_time_budget():
    records = [{"epoch": 1, "loss": 10.0, "seconds": 1.0}, {"epoch": 2, "loss": 9.99, "seconds": 1.5}]
    assert TrainerSettings().stop_reason(records) is None
    assert "epoch 2 changed the loss by 0.01" in TrainerSettings(stop_tolerance=2e-3).stop_reason(records)  # 0.01 ≤ 2e-3 · 9.99
    assert TrainerSettings(stop_tolerance=1e-3).stop_reason(records) is None  # 0.01 > 1e-3 · 9.99
    assert TrainerSettings(stop_tolerance=1e-3).stop_reason(records[:1]) is None  # one epoch is no change
    assert "2.5 training seconds" in TrainerSettings(max_seconds=2.5).stop_reason(records)
    assert TrainerSettings(max_seconds=2.6).stop_reason(records) is None
