"""Checkpoints: round trips, the on-disk layout, atomic writes and clear errors."""

from functools import partial

import pytest
import torch
from factories import random_rbm

from pfzoo import zoo
from pfzoo.models import RBM

trained_rbm = partial(random_rbm, 12, 5, dtype=torch.float32, bias_scale=1.0, draw_dtype=None)  # N(0, 1) weights and biases; seed=, dtype=


def binary(rows=20, width=12):
    return torch.bernoulli(torch.full((rows, width), 0.5), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_round_trip_gives_identical_free_energies_and_keeps_dtype(tmp_path, dtype):
    model = trained_rbm(dtype=dtype)
    zoo.save(model, tmp_path / "rbm.pt")
    loaded = zoo.load(tmp_path / "rbm.pt")
    assert type(loaded) is RBM and loaded.config() == model.config()
    assert loaded.dtype == dtype
    v = binary().to(dtype)
    assert torch.equal(loaded.free_energy(v), model.free_energy(v))


def test_checkpoint_layout_is_plain_and_loads_with_weights_only(tmp_path):
    model = trained_rbm()
    config = {"model": {"_target_": "pfzoo.models.RBM", "num_hidden": 5}, "seed": 0, "tags": ["a", 1, None]}
    state = {"epoch": 3, "generators": {"shuffle": torch.Generator().get_state()}}
    path = zoo.save(model, tmp_path / "sub" / "ckpt.pt", config=config, trainer_state=state)
    raw = torch.load(path, weights_only=True)
    assert set(raw) == {"format", "model", "model_config", "state_dict", "config", "trainer_state"}
    assert raw["format"] == "pfzoo-checkpoint-1" and raw["model"] == "rbm"
    assert raw["model_config"] == model.config() and raw["config"] == config
    assert raw["trainer_state"]["epoch"] == 3
    assert set(raw["state_dict"]) == {"weight", "visible_bias", "hidden_bias"}
    assert zoo.load_checkpoint(path)["config"] == config


def test_interrupted_write_leaves_the_previous_checkpoint_intact(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    zoo.save(trained_rbm(seed=0), path)
    real_save = torch.save

    def crash_mid_write(obj, file, *args, **kwargs):
        real_save(obj, file, *args, **kwargs)
        file.seek(0)
        file.truncate(100)
        raise KeyboardInterrupt("simulated crash while writing")

    monkeypatch.setattr(torch, "save", crash_mid_write)
    with pytest.raises(KeyboardInterrupt):
        zoo.save(trained_rbm(seed=1), path)
    assert torch.equal(zoo.load(path).weight, trained_rbm(seed=0).weight)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]  # no temporary file left behind


def test_missing_file_raises_file_not_found_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.pt"):
        zoo.load(tmp_path / "nowhere.pt")


def test_wrong_format_raises_value_error(tmp_path):
    torch.save({"format": "something-else"}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="pfzoo-checkpoint-1"):
        zoo.load(tmp_path / "other.pt")
    torch.save(trained_rbm().state_dict(), tmp_path / "bare.pt")
    with pytest.raises(ValueError, match="format"):
        zoo.load_checkpoint(tmp_path / "bare.pt")
    (tmp_path / "garbage.pt").write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match="not a readable"):
        zoo.load(tmp_path / "garbage.pt")


def test_pickled_objects_are_refused(tmp_path):
    torch.save({"format": "pfzoo-checkpoint-1", "model": trained_rbm()}, tmp_path / "pickled.pt")
    with pytest.raises(ValueError, match="not a readable"):
        zoo.load_checkpoint(tmp_path / "pickled.pt")


def test_save_rejects_unregistered_models_and_non_plain_configs(tmp_path):
    class Unregistered(RBM):
        pass

    with pytest.raises(ValueError, match="registered model class"):
        zoo.save(Unregistered(3, 2), tmp_path / "x.pt")
    with pytest.raises(ValueError, match=r"config.model must hold only"):
        zoo.save(trained_rbm(), tmp_path / "x.pt", config={"model": object()})
    with pytest.raises(ValueError, match="config must be a plain dict"):
        zoo.save(trained_rbm(), tmp_path / "x.pt", config=["not", "a", "dict"])
    assert not list(tmp_path.iterdir())


def test_every_truncation_of_a_checkpoint_is_refused_naming_the_file(tmp_path):
    path = zoo.save(trained_rbm(), tmp_path / "whole.pt")
    data = path.read_bytes()
    for cut in range(len(data)):  # every byte: torch.load fails differently at each
        truncated = tmp_path / f"cut{cut}.pt"
        truncated.write_bytes(data[:cut])
        with pytest.raises(ValueError, match=f"cut{cut}.pt.*(truncated or not a checkpoint|damaged)"):
            zoo.load(truncated)
    (tmp_path / "text.pt").write_text("epoch 1 loss 0.5\n" * 20)
    with pytest.raises(ValueError, match="text.pt is not a readable"):
        zoo.load(tmp_path / "text.pt")


def test_a_checkpoint_without_its_model_fields_is_refused_naming_them(tmp_path):
    torch.save({"format": "pfzoo-checkpoint-1", "state_dict": {}}, tmp_path / "partial.pt")
    with pytest.raises(ValueError, match="partial.pt is a damaged .* lacks model, model_config"):
        zoo.load(tmp_path / "partial.pt")


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_weights_are_refused_at_load(tmp_path, bad):
    model = trained_rbm()
    with torch.no_grad():
        model.weight[0, 0] = bad
    path = zoo.save(model, tmp_path / "diverged.pt")
    with pytest.raises(ValueError, match=r"diverged.pt: weight has 1 non-finite value"):
        zoo.load(path)


def test_load_returns_the_model_in_eval_mode(tmp_path):
    path = zoo.save(trained_rbm().train(), tmp_path / "rbm.pt")
    assert not zoo.load(path).training


def test_save_takes_torch_saves_order_and_refuses_the_reverse_in_one_line_naming_both_arguments(tmp_path):
    model = trained_rbm(seed=3)
    assert zoo.save(model, tmp_path / "new.pt") == tmp_path / "new.pt"
    with pytest.raises(ValueError, match=r"^save\(model, path\) takes the model first.*model=str and path=RBM; call pfzoo.zoo.save\(model, path\)$"):
        zoo.save(str(tmp_path / "old.pt"), model)
    assert not (tmp_path / "old.pt").exists()


def test_save_refuses_a_plain_module_or_two_paths_in_one_line_naming_both_arguments(tmp_path):
    for first, second in ((torch.nn.Linear(3, 2), tmp_path / "x.pt"), (tmp_path / "x.pt", torch.nn.Linear(3, 2)),
                          (tmp_path / "x.pt", tmp_path / "y.pt"), (trained_rbm(), trained_rbm())):
        with pytest.raises(ValueError, match=r"^save\(model, path\) takes an instance of a registered model class .*model=\w+ and path=\w+[^\n]*$"):
            zoo.save(first, second)
    assert not list(tmp_path.iterdir())
