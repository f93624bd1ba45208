"""``init_from=``: a training run that starts from a trained model's parameters (a checkpoint path or a zoo name) instead
of the data-dependent initialisation or the objective's pretraining, and the library function behind it."""

import pytest
import torch
from factories import random_dbm, random_rbm

from pfzoo import cli, zoo
from pfzoo.models import DBM, RBM

TINY = ["trainer.progress=false", "model.num_hidden=3", "estimator.num_steps=20", "pictures=false"]


def parameters(path):
    return zoo.load_checkpoint(path)["state_dict"]


def test_load_parameters_into_copies_every_tensor_and_refuses_another_model(tmp_path):
    trained = random_dbm([6, 5, 4], 1.0, 0)
    zoo.save(trained, tmp_path / "dbm.pt")
    model = DBM([6, 5, 4], generator=torch.Generator().manual_seed(1))
    zoo.load_parameters_into(model, tmp_path / "dbm.pt")
    assert all(torch.equal(value, trained.state_dict()[key]) for key, value in model.state_dict().items())
    for other in (DBM([6, 5, 3]), RBM(6, 5)):
        with pytest.raises(ValueError, match=r"source='.*dbm.pt' is a DBM with config .* but the model to start is a") as error:
            zoo.load_parameters_into(other, tmp_path / "dbm.pt")
        assert len(str(error.value).splitlines()) == 1
    with pytest.raises(ValueError, match="init_from='nowhere' is neither a checkpoint file nor a zoo model"):
        zoo.load_parameters_into(model, "nowhere", name="init_from")


def test_load_parameters_into_casts_to_the_models_dtype(tmp_path):
    trained = random_rbm(6, 4, 1.0, 0).double()
    zoo.save(trained, tmp_path / "rbm.pt")
    model = RBM(6, 4)
    zoo.load_parameters_into(model, tmp_path / "rbm.pt")
    assert model.weight.dtype == torch.float32 and torch.allclose(model.weight.double(), trained.weight)


def test_a_run_from_init_from_starts_at_the_trained_parameters_and_says_so(tmp_path, caplog):
    """A first run trains 2 epochs; a second starts from its checkpoint with a negligible learning rate, so it must end
    where the first did (not at a fresh initialisation, nor at the data's base rates, which init_from replaces)."""
    first = tmp_path / "first"
    assert cli.execute("train", cli.compose("train", [f"run_dir={first}", *TINY, "trainer.epochs=2"])) == 0
    second = tmp_path / "second"
    overrides = [f"run_dir={second}", *TINY, "trainer.epochs=1", "trainer.optimizer.lr=1e-12", f"init_from={first / 'checkpoint.pt'}"]
    with caplog.at_level("INFO", logger="pfzoo.app.training"):
        assert cli.execute("train", cli.compose("train", overrides)) == 0
    assert f"starting from the parameters of {first / 'checkpoint.pt'} (init_from)" in caplog.text
    start, end = parameters(first / "checkpoint.pt"), parameters(second / "checkpoint.pt")
    assert all(torch.allclose(end[key], value, atol=1e-6) for key, value in start.items())
    fresh = tmp_path / "fresh"
    assert cli.execute("train", cli.compose("train", [f"run_dir={fresh}", *TINY, "trainer.epochs=1", "trainer.optimizer.lr=1e-12"])) == 0
    assert not torch.allclose(parameters(fresh / "checkpoint.pt")["weight"], start["weight"], atol=1e-3)


def test_init_from_beside_a_pretraining_objective_is_one_line_and_exit_2(tmp_path, capsys):
    source = tmp_path / "dbm.pt"
    zoo.save(random_dbm([64, 20, 10], 0.1, 0), source)
    overrides = [f"run_dir={tmp_path / 'run'}", "model=dbm", "trainer=dbm_pcd", "trainer.epochs=1", "trainer.progress=false",
                 "pictures=false", f"init_from={source}"]
    assert cli.execute("train", cli.compose("train", overrides)) == cli.EXIT_USAGE
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "init_from=" in error[0] and "pass trainer.objective.pretrain=null" in error[0], error
    assert cli.execute("train", cli.compose("train", [*overrides, "trainer.objective.pretrain=null"])) == 0
