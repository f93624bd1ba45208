"""The divergence guard (pfzoo.training.divergence): a run ruined by a learning rate 10⁴–10⁸ times the recipe's stops
with one line, keeping parameters whose exact test log-likelihood is within 1 nat of the best any update reached; normal
training never trips it; warn/off; gradient clipping; the app's exit code."""

import copy
import json
import logging
from functools import partial
from pathlib import Path

import pytest
import torch
from factories import random_gaussian, random_ica, random_poe, random_rbm

from pfzoo import cli, zoo
from pfzoo.data import DataSplits
from pfzoo.models import RBM
from pfzoo.training import (
    CD, FPCD, MPF, NCE, PCD, PT, DenoisingScoreMatching, ExactMaximumLikelihood, PseudoLikelihood, RatioMatching, ScoreMatching,
    Trainer, TrainingCallback, TrainingDiverged,
)
from pfzoo.training.divergence import SCORE_ROWS, check_schedule, score_rows

RECIPE_LR = 0.05  # conf/trainer's SGD rate


class ExactTrace(TrainingCallback):
    """The exact mean test log-likelihood before the first update and after every update (-inf where log Z is infinite)."""

    def __init__(self, test):
        self.test, self.values = test, []

    def start(self, model, train, *, seed, state=None):
        self.on_step(model)

    def on_step(self, model):
        try:
            self.values.append(model.log_prob(self.test).mean().item())
        except ValueError:  # a product of experts made improper by the blow-up
            self.values.append(float("-inf"))


def binary_data():
    teacher = random_rbm(6, 4, scale=1.5, seed=1)
    g = torch.Generator().manual_seed(0)
    return DataSplits("teacher", teacher.sample(500, generator=g), teacher.sample(500, generator=g))


def read_metrics(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


def assert_stopped_at_the_last_good(trainer, model, data, trace, error):
    """One line; the model and the checkpoint hold parameters within 1 nat of the best any update reached; the metrics
    and the checkpoint record the event, and a resume is refused."""
    message = str(error)
    assert "\n" not in message and "lower the learning rate" in message and "trainer.clip_grad_norm" in message
    best = max(value for value in trace.values if value == value)
    with torch.no_grad():
        kept = model.log_prob(trace.test).mean().item()
    assert kept >= best - 1.0, (kept, best)
    saved = zoo.load_checkpoint(trainer.checkpoint_path)
    assert saved["trainer_state"]["diverged"] == message
    assert all(torch.equal(saved["state_dict"][name], value) for name, value in model.state_dict().items())
    assert read_metrics(trainer.run_dir)[-1]["diverged"] == message
    with pytest.raises(ValueError, match="holds the last good parameters of a run that diverged"):
        trainer.fit(copy.deepcopy(model), data, resume=True)


BINARY_OBJECTIVES = {"cd": CD, "pcd": partial(PCD, num_chains=50), "nce": NCE, "ratio_matching": RatioMatching, "pt": PT,
                     "fpcd": FPCD, "mpf": MPF, "pseudolikelihood": PseudoLikelihood}


@pytest.mark.parametrize("factor", [1e4, 1e8])
@pytest.mark.parametrize("name", list(BINARY_OBJECTIVES))
def test_a_ruinous_learning_rate_stops_binary_training_at_the_last_good_model(tmp_path, name, factor):
    data = binary_data()
    model = RBM(6, 4, generator=torch.Generator().manual_seed(0)).double()
    trace = ExactTrace(data.test)
    trainer = Trainer(BINARY_OBJECTIVES[name](), partial(torch.optim.SGD, lr=RECIPE_LR * factor), run_dir=tmp_path, epochs=5,
                      batch_size=50, progress=False, callbacks=[trace])
    with pytest.raises(TrainingDiverged) as caught:
        trainer.fit(model, data)
    assert min(trace.values) < max(trace.values) - 10  # it did blow up before the guard stopped it
    assert_stopped_at_the_last_good(trainer, model, data, trace, caught.value)


CONTINUOUS = {"gaussian": lambda: random_gaussian(4, seed=1), "poe_student_t": lambda: random_poe(4, expert="student_t", seed=1),
              "ica": lambda: random_ica(4, seed=1)}
CONTINUOUS_OBJECTIVES = {"score_matching": ScoreMatching, "denoising_score_matching": DenoisingScoreMatching, "nce": NCE,
                         "ml": ExactMaximumLikelihood}


@pytest.mark.parametrize("objective", list(CONTINUOUS_OBJECTIVES))
@pytest.mark.parametrize("family", list(CONTINUOUS))
def test_a_ruinous_learning_rate_stops_continuous_training_at_the_last_good_model(tmp_path, family, objective):
    teacher = CONTINUOUS[family]()
    g = torch.Generator().manual_seed(0)
    data = DataSplits("teacher", teacher.sample(500, generator=g).detach(), teacher.sample(500, generator=g).detach())
    model = copy.deepcopy(teacher)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(0.7)
    trace = ExactTrace(data.test)
    trainer = Trainer(CONTINUOUS_OBJECTIVES[objective](), partial(torch.optim.SGD, lr=1e-2 * 1e4), run_dir=tmp_path, epochs=5,
                      batch_size=50, progress=False, callbacks=[trace])
    with pytest.raises(TrainingDiverged) as caught:
        trainer.fit(model, data)
    assert_stopped_at_the_last_good(trainer, model, data, trace, caught.value)


def test_a_blow_up_mid_run_restores_a_later_good_state_than_the_start(tmp_path):
    """CD that trains well for 40 updates (4 epochs of 10) and then takes one step 10¹⁰ times too long: the guard keeps
    the parameters of an epoch's end before the blow-up (the best held-out score), which learned something, not the
    starting ones."""

    class LateBlowUp(CD):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def loss(self, model, batch, *, generator=None):
            self.calls += 1
            loss = super().loss(model, batch, generator=generator)
            return loss * 1e10 if self.calls == 41 else loss

    data = binary_data()
    model = RBM(6, 4, generator=torch.Generator().manual_seed(0)).double()
    trace = ExactTrace(data.test)
    trainer = Trainer(LateBlowUp(), partial(torch.optim.SGD, lr=0.5), run_dir=tmp_path, epochs=20, batch_size=50, progress=False,
                      callbacks=[trace])
    with pytest.raises(TrainingDiverged, match="update 48: the parameter norm grew") as caught:
        trainer.fit(model, data)
    restored = caught.value.record["restored_update"]
    assert restored in (10, 20, 30, 40)
    assert trace.values[restored] > trace.values[0] + 1  # the kept state learned something
    assert_stopped_at_the_last_good(trainer, model, data, trace, caught.value)


def test_the_checks_come_early_then_every_sixteen_updates():
    assert [update for update in range(1, 50) if check_schedule(update)] == [1, 2, 4, 8, 16, 32, 48]


def test_the_guard_scores_a_random_subset_of_a_large_held_out_split():
    """Sorted test files (binarized MNIST's is sorted by class) must not be scored by a prefix."""
    held_out = torch.arange(3 * SCORE_ROWS, dtype=torch.float64)[:, None]
    rows = score_rows(held_out, seed=2)[:, 0]
    assert rows.numel() == SCORE_ROWS and torch.equal(rows, rows.sort().values) and rows.max() > 2 * SCORE_ROWS
    assert torch.equal(score_rows(held_out, seed=2), score_rows(held_out, seed=2))
    assert torch.equal(score_rows(held_out[:10], seed=2), held_out[:10])  # small splits: every row


@pytest.mark.parametrize("name", list(BINARY_OBJECTIVES))
def test_recipe_training_never_trips_the_guard(tmp_path, name, caplog):
    data = binary_data()
    model = RBM(6, 4, generator=torch.Generator().manual_seed(0)).double()
    with caplog.at_level(logging.WARNING):
        Trainer(BINARY_OBJECTIVES[name](), partial(torch.optim.SGD, lr=RECIPE_LR, momentum=0.5), run_dir=tmp_path, epochs=20,
                batch_size=50, progress=False, divergence="warn").fit(model, data)
    assert not any("diverged" in record for record in read_metrics(tmp_path))
    assert not any("diverge" in record.message for record in caplog.records)


def test_warn_logs_once_and_trains_on_and_off_watches_nothing(tmp_path, caplog):
    data = binary_data()
    make = partial(Trainer, CD(), partial(torch.optim.SGD, lr=500.0), epochs=3, batch_size=50, progress=False)
    with caplog.at_level(logging.WARNING):
        make(run_dir=tmp_path / "warn", divergence="warn").fit(RBM(6, 4).double(), data)
    warnings = [record.message for record in caplog.records if "diverged" in record.message]
    assert len(warnings) == 1 and "trainer.divergence=warn trains on" in warnings[0]
    records = read_metrics(tmp_path / "warn")
    assert len(records) == 3 and "divergence_warning" in records[0]
    make(run_dir=tmp_path / "off", divergence="off").fit(RBM(6, 4).double(), data)
    assert len(read_metrics(tmp_path / "off")) == 3


def test_an_error_of_the_objective_with_sound_parameters_goes_up_unchanged(tmp_path):
    class Broken(CD):
        def loss(self, model, batch, *, generator=None):
            raise RuntimeError("a bug in the objective")

    with pytest.raises(RuntimeError, match="^a bug in the objective$"):
        Trainer(Broken(), run_dir=tmp_path, epochs=1, batch_size=50, progress=False).fit(RBM(6, 4).double(), binary_data())


def test_clip_grad_norm_bounds_every_update(tmp_path):
    data = binary_data()
    model = RBM(6, 4, generator=torch.Generator().manual_seed(0)).double()
    before = torch.cat([parameter.detach().flatten() for parameter in model.parameters()])
    Trainer(CD(), partial(torch.optim.SGD, lr=1.0), run_dir=tmp_path, epochs=1, batch_size=500, progress=False,
            clip_grad_norm=1e-3).fit(model, data)
    after = torch.cat([parameter.detach().flatten() for parameter in model.parameters()])
    assert (after - before).norm() == pytest.approx(1e-3, rel=1e-6)  # CD's gradient here is far longer than 1e-3
    with pytest.raises(ValueError, match="clip_grad_norm must be greater than 0"):
        Trainer(CD(), run_dir=tmp_path, clip_grad_norm=0.0)
    with pytest.raises(ValueError, match="divergence must be one of 'stop', 'warn', 'off'"):
        Trainer(CD(), run_dir=tmp_path, divergence="halt")
    with pytest.raises(ValueError, match="clip_grad_norm needs an optimizer .* not LBFGS"):
        Trainer(CD(), torch.optim.LBFGS, run_dir=tmp_path / "lbfgs", clip_grad_norm=1.0).fit(model, data)


def test_the_app_exits_3_with_the_line_and_the_report(tmp_path, capsys):
    cfg = cli.compose("train", ["model.num_hidden=4", "trainer=cd", "trainer.optimizer.lr=1e8", "trainer.epochs=2",
                                f"run_dir={tmp_path}", "pictures=false"])
    assert cli.execute("train", cfg) == cli.EXIT_DIVERGED == 3
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: training diverged at epoch 1, update 1")
    assert "stopped by the divergence guard" in out and "test log-likelihood" in out
    assert "diverged" in read_metrics(tmp_path)[-1]


def test_score_matching_warns_about_kinks_and_denoising_about_its_noise(tmp_path, caplog):
    """Laplace experts are not twice differentiable at 0: score matching through the smoothed Laplacian warns; a
    smooth (Student-t) model does not; DSM always names its noise level."""
    laplace, student = random_poe(3, expert="laplace", seed=1), random_poe(3, expert="student_t", seed=1)
    g = torch.Generator().manual_seed(0)
    data = DataSplits("teacher", laplace.sample(200, generator=g).detach(), laplace.sample(100, generator=g).detach())
    assert ScoreMatching().caveats(student) == ()
    with caplog.at_level(logging.WARNING):
        trainer = Trainer(ScoreMatching(kink_bandwidth=0.02), partial(torch.optim.SGD, lr=1e-3), run_dir=tmp_path / "sm", epochs=1,
                          batch_size=100, progress=False)
        trainer.fit(copy.deepcopy(laplace), data)
    assert len(trainer.warnings) == 1
    assert "twice-differentiable" in trainer.warnings[0] and "kink_bandwidth=0.02" in trainer.warnings[0]
    assert trainer.warnings[0] in caplog.text
    noisy = Trainer(DenoisingScoreMatching(sigma=[0.1, 0.3]), partial(torch.optim.SGD, lr=1e-3), run_dir=tmp_path / "dsm", epochs=1,
                    batch_size=100, progress=False)
    noisy.fit(copy.deepcopy(student), data)
    assert len(noisy.warnings) == 1 and "σ = 0.1, 0.3" in noisy.warnings[0] and "biased" in noisy.warnings[0]


def test_a_prepare_that_rewrites_the_parameters_becomes_the_guards_start():
    """A DBM's greedy pretraining runs in the first epoch's prepare, after the guard took its start: without a rebase a
    blow-up at the first update would restore the random initialisation instead of the pretrained model."""
    from pfzoo.training.divergence import DivergenceGuard, Score

    weight = torch.nn.Parameter(torch.zeros(3))
    calls = []

    def score():
        calls.append(weight.detach().clone())
        return Score("held-out score", -float(weight.detach().sub(1).square().sum()), 1.0)

    guard = DivergenceGuard([weight], score, num_visible=3)
    assert not guard.after_prepare() and len(calls) == 1  # unchanged parameters: nothing read, nothing rescored
    with torch.no_grad():
        weight.fill_(1.0)  # "pretraining"
    assert guard.after_prepare() and guard.start_score.value == 0.0
    with torch.no_grad():
        weight.fill_(1e9)  # the blow-up
    update, restored = guard.restore()
    assert torch.equal(weight.detach(), torch.ones(3)) and restored.value == 0.0 and update == 0
