"""Iterate averaging: the average is the mean (or moving average) of the iterates it claims, training is untouched,
the average survives a resume bit for bit, a run may start averaging when it resumes, and the average of a jittering
PCD run is a better model than its last iterate."""

import json

import pytest
import torch
from factories import random_dbm, random_rbm

from pfzoo import zoo
from pfzoo.data import DataSplits
from pfzoo.training import CD, PCD, DBMPersistentMeanField, ParameterAveraging, Trainer, TrainingCallback
from pfzoo.training.metrics import reconstruction_error
from pfzoo.training.parameter_averaging import AVERAGED_FILE


def _data(seed=0):
    generator = torch.Generator().manual_seed(seed)
    probs = torch.tensor([0.1, 0.8, 0.3, 0.6, 0.5, 0.9])
    return DataSplits("d", torch.bernoulli(probs.repeat(200, 1), generator=generator).double(),
                      torch.bernoulli(probs.repeat(100, 1), generator=generator).double())


class Iterates(TrainingCallback):
    """Every update's parameters, with the epoch it belongs to."""

    def __init__(self):
        self.seen, self.epoch = [], 0

    def start_epoch(self, epoch):
        self.epoch = epoch

    def on_step(self, model):
        self.seen.append((self.epoch, {name: p.detach().clone() for name, p in model.named_parameters()}))


def _trainer(tmp_path, epochs, **kwargs):
    return Trainer(CD(k=1), lambda p: torch.optim.SGD(p, lr=0.2), run_dir=tmp_path, epochs=epochs, batch_size=20, progress=False, **kwargs)


def test_the_average_is_the_mean_of_the_iterates_from_its_first_epoch_on_and_training_is_untouched(tmp_path):
    iterates, plain = Iterates(), random_rbm(6, 3, seed=1)
    _trainer(tmp_path / "plain", 4, callbacks=[iterates]).fit(plain, _data())
    model = random_rbm(6, 3, seed=1)
    trainer = _trainer(tmp_path / "averaged", 4, average_parameters={"from_epoch": 3})
    record = trainer.fit(model, _data())
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), plain.state_dict().values()))
    averaged_steps = [params for epoch, params in iterates.seen if epoch >= 3]
    assert trainer.averaging.updates == len(averaged_steps) == 20 and record["averaged_updates"] == 20.0
    averaged = trainer.averaging.averaged_model(model)
    for name, parameter in averaged.named_parameters():
        expected = torch.stack([params[name] for params in averaged_steps]).mean(0)
        torch.testing.assert_close(parameter, expected, rtol=0, atol=1e-12)
    stored = zoo.load(tmp_path / "averaged" / AVERAGED_FILE)
    assert all(torch.equal(a, b) for a, b in zip(stored.state_dict().values(), averaged.state_dict().values()))


def test_a_moving_average_forgets_old_iterates_at_its_decay(tmp_path):
    iterates, model = Iterates(), random_rbm(6, 3, seed=2)
    trainer = _trainer(tmp_path, 2, callbacks=[iterates], average_parameters={"decay": 0.8})
    trainer.fit(model, _data())
    steps = [params for _, params in iterates.seen]
    for name, parameter in trainer.averaging.averaged_model(model).named_parameters():
        expected = steps[0][name].double()
        for params in steps[1:]:
            expected = 0.8 * expected + 0.2 * params[name].double()
        torch.testing.assert_close(parameter, expected.to(parameter.dtype), rtol=0, atol=1e-12)


def test_a_resumed_run_continues_the_average_bit_for_bit(tmp_path):
    whole = _trainer(tmp_path / "whole", 4, average_parameters={"from_epoch": 2})
    model = random_rbm(6, 3, seed=1)
    whole.fit(model, _data())
    _trainer(tmp_path / "halves", 2, average_parameters={"from_epoch": 2}).fit(random_rbm(6, 3, seed=1), _data())
    resumed = _trainer(tmp_path / "halves", 4, average_parameters={"from_epoch": 2})
    again = random_rbm(6, 3, seed=1)
    resumed.fit(again, _data(), resume=True)
    assert resumed.averaging.updates == whole.averaging.updates == 30
    for (name, a), b in zip(whole.averaging.averaged_model(model).named_parameters(), resumed.averaging.averaged_model(again).parameters()):
        assert torch.equal(a, b), name


def test_a_run_may_start_averaging_when_it_resumes_but_not_after_the_epochs_it_would_leave_out(tmp_path):
    _trainer(tmp_path, 2).fit(random_rbm(6, 3, seed=1), _data())
    with pytest.raises(ValueError, match=r"from_epoch=2 but this run resumes at epoch 3 .* epochs 2…2 would be missing .* from_epoch ≥ 3"):
        _trainer(tmp_path, 3, average_parameters={"from_epoch": 2}).fit(random_rbm(6, 3, seed=1), _data(), resume=True)
    trainer = _trainer(tmp_path, 3, average_parameters={"from_epoch": 3})
    trainer.fit(random_rbm(6, 3, seed=1), _data(), resume=True)
    assert trainer.averaging.updates == 10


def test_other_average_settings_than_the_checkpoints_are_refused_on_resume(tmp_path):
    _trainer(tmp_path, 2, average_parameters=True).fit(random_rbm(6, 3, seed=1), _data())
    with pytest.raises(ValueError, match=r"average_parameters \{'from_epoch': 1, 'decay': 0.9\} differ from the checkpoint's"):
        _trainer(tmp_path, 3, average_parameters={"decay": 0.9}).fit(random_rbm(6, 3, seed=1), _data(), resume=True)


@pytest.mark.parametrize("settings, message", [
    ({"decay": 1.0}, r"decay must be in \(0, 1\)"),
    ({"from_epoch": 0}, "from_epoch"),
    ({"start": 3}, r"unknown keys \['start'\]"),
    (3, "average_parameters must be None, true or a mapping"),
])
def test_bad_settings_are_refused_in_one_line(tmp_path, settings, message):
    with pytest.raises(ValueError, match=message):
        _trainer(tmp_path, 1, average_parameters=settings)


def test_before_any_averaged_update_there_is_no_average_to_take(tmp_path):
    averaging = ParameterAveraging(from_epoch=5)
    with pytest.raises(ValueError, match="averaging starts with epoch 5"):
        averaging.averaged_model(random_rbm(6, 3, seed=0))


def test_the_average_of_a_jittering_pcd_run_fits_better_than_its_last_iterate(tmp_path):
    """PCD at a learning rate that keeps the parameters jittering: over the last epochs the average's exact
    log-likelihood of the training rows beats the last iterate's on each of several seeds."""
    data = _data(seed=3)
    for seed in range(3):
        model = random_rbm(6, 4, seed=seed)
        trainer = Trainer(PCD(k=1, num_chains=20), lambda p: torch.optim.SGD(p, lr=1.0), run_dir=tmp_path / str(seed), epochs=30,
                          batch_size=10, progress=False, seed=seed, average_parameters={"from_epoch": 21})
        trainer.fit(model, data)
        averaged = trainer.averaging.averaged_model(model)
        assert averaged.log_prob(data.train).mean() > model.log_prob(data.train).mean() + 0.01


def test_each_averaged_epoch_records_the_averages_own_diagnostics_beside_the_iterates(tmp_path):
    """The epoch records read the parameters training uses; from the first averaged epoch on they also hold the
    average's reconstruction error and family diagnostics (a DBM's top-layer share), computed on the same rows."""
    data = _data(seed=4)
    trainer = _trainer(tmp_path, 3, average_parameters={"from_epoch": 2})
    model = random_rbm(6, 3, seed=1)
    trainer.fit(model, data)
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert not any(key.startswith("averaged_") and key != "averaged_updates" for key in records[0])
    averaged = trainer.averaging.averaged_model(model)
    for split, rows in (("train", data.train), ("test", data.test)):
        assert records[-1][f"averaged_{split}_reconstruction_error"] == pytest.approx(reconstruction_error(averaged, rows), abs=1e-12)
        assert records[-1][f"averaged_{split}_reconstruction_error"] != records[-1][f"{split}_reconstruction_error"]

    dbm = random_dbm([6, 4, 3], seed=2)
    Trainer(DBMPersistentMeanField(k=1, num_chains=10), run_dir=tmp_path / "dbm", epochs=2, batch_size=20, progress=False,
            average_parameters=True).fit(dbm, data)
    last = json.loads((tmp_path / "dbm" / "metrics.jsonl").read_text().splitlines()[-1])
    assert {"averaged_test_top_layer_share", "averaged_test_dead_units_h2", "averaged_train_reconstruction_error"} <= set(last)
