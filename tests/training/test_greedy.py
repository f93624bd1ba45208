"""Greedy layer-wise DBN training: it learns (exact log-likelihood), is deterministic, resumes, and fits the app's configs."""

import json
from functools import partial
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from torch.utils.data import DataLoader, TensorDataset

from pfzoo import zoo
from pfzoo.data import DataSplits, digits
from pfzoo.estimators import AIS
from pfzoo.models import DBN, RBM
from pfzoo.training import CD, PCD, GreedyTrainer, Trainer, train_greedy
from pfzoo.training.greedy import start_from_layer_below
from pfzoo.models import MissingCapability

CONF = Path(__file__).resolve().parents[2] / "conf"


@pytest.fixture(scope="module")
def digit_data():
    return digits()


@pytest.fixture
def small_data(digit_data):
    """400 training and 100 test digits: enough for the determinism and bookkeeping tests."""
    return DataSplits("digits-small", train=digit_data.train[:400], test=digit_data.test[:100])


def parameters(model):
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def same_parameters(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)


def test_greedy_training_beats_the_untrained_and_the_factorised_model(digit_data):
    """Exact test log-likelihoods (top RBM 16×8: log Z over 2^8 states; free energy over 2^16 states of h¹)."""
    data = DataSplits("digits", train=digit_data.train, test=digit_data.test[:200])
    sizes = [64, 16, 8]
    untrained = DBN(sizes, generator=torch.Generator().manual_seed(0))
    factorised = DBN(sizes, init_std=0.0)  # W = 0, visible biases at the base rates: the best independent-pixel model
    factorised.init_from_data(data.train)
    trained = train_greedy(
        sizes, data, epochs_per_layer=5, batch_size=20, optimizer=partial(torch.optim.SGD, lr=0.1, momentum=0.5), seed=0
    )
    with torch.no_grad():
        log_likelihood = {name: model.log_prob(data.test).mean().item() for name, model in
                          (("untrained", untrained), ("factorised", factorised), ("trained", trained))}
    assert log_likelihood["trained"] > log_likelihood["untrained"] + 10, log_likelihood
    assert log_likelihood["trained"] > log_likelihood["factorised"] + 1.5, log_likelihood


def test_same_seed_gives_identical_parameters_and_another_seed_does_not(small_data):
    runs = [parameters(train_greedy([64, 8, 4], small_data, epochs_per_layer=1, batch_size=50, seed=seed)) for seed in (3, 3, 4)]
    assert same_parameters(runs[0], runs[1])
    assert not same_parameters(runs[0], runs[2])


def test_every_layer_gets_its_own_objective_copy_and_mapped_binary_input(small_data):
    """PCD's persistent chains have the width of the layer's input, so a shared objective would fail at layer 1."""
    seen = []

    class RecordingPCD(PCD):
        def loss(self, model, batch, *, generator=None):
            seen.append((self, model.num_visible, bool(((batch == 0) | (batch == 1)).all())))
            return super().loss(model, batch, generator=generator)

    progress = []
    dbn = DBN([64, 8, 4, 3], generator=torch.Generator().manual_seed(0))
    returned = train_greedy(
        dbn, small_data.train, objective_factory=lambda: RecordingPCD(k=1, num_chains=10), epochs_per_layer=1,
        batch_size=100, progress=lambda done, total: progress.append((done, total)),
    )
    assert returned is dbn
    assert progress == [(1, 3), (2, 3), (3, 3)]
    assert [width for _, width, _ in seen] == [64] * 4 + [8] * 4 + [4] * 4
    assert len({id(objective) for objective, _, _ in seen}) == 3  # objects kept alive by `seen`, so ids are distinct
    assert all(binary for _, _, binary in seen)


def test_greedy_trainer_judges_every_layer_and_the_dbn_on_the_validation_split(small_data, tmp_path):
    valid = small_data.test[:40]
    data = DataSplits("digits-small", train=small_data.train, test=small_data.test[40:], valid=valid)
    dbn = DBN([64, 8, 4], generator=torch.Generator().manual_seed(0))
    trainer = GreedyTrainer(CD(k=1), run_dir=tmp_path, epochs=1, batch_size=50, progress=False, seed=5,
                            evaluate_every=1, estimator=AIS(num_chains=20, num_steps=50))
    result = trainer.fit(dbn, data)
    assert {"layer0_valid_pseudo_log_likelihood", "layer1_valid_reconstruction_error", "valid_log_likelihood"} <= set(result)
    assert not any("test_" in key for key in result)
    with torch.no_grad():
        exact = dbn.log_prob(valid).mean().item()
    assert abs(result["valid_log_likelihood"] - exact) < 3 * result["valid_log_likelihood_stderr"] + 1e-4


def test_greedy_trainer_writes_layer_runs_metrics_and_a_loadable_dbn(small_data, tmp_path):
    dbn = DBN([64, 8, 4], generator=torch.Generator().manual_seed(0))
    trainer = GreedyTrainer(CD(k=1), run_dir=tmp_path, epochs=2, batch_size=50, progress=False, seed=5,
                            evaluate_every=1, estimator=AIS(num_chains=20, num_steps=50))
    result = trainer.fit(dbn, small_data, config={"note": "test"})
    assert result["epoch"] == 2 and result["layers"] == 2
    assert {"layer0_loss", "layer1_loss", "layer0_test_pseudo_log_likelihood", "test_log_likelihood", "log_z"} <= set(result)
    for layer in (0, 1):
        layer_dir = tmp_path / f"layer{layer}"
        assert isinstance(zoo.load(layer_dir / "checkpoint.pt"), RBM)
        assert [json.loads(line)["epoch"] for line in (layer_dir / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert [json.loads(line)["layer"] for line in trainer.metrics_path.read_text().splitlines()] == [0, 1]
    loaded = zoo.load(trainer.checkpoint_path)
    assert isinstance(loaded, DBN) and same_parameters(parameters(loaded), parameters(dbn))
    assert zoo.load_checkpoint(trainer.checkpoint_path)["config"] == {"note": "test"}
    with torch.no_grad():
        exact = dbn.log_prob(small_data.test).mean().item()
    assert abs(result["test_log_likelihood"] - exact) < 3 * result["test_log_likelihood_stderr"] + 1e-4


def test_resume_after_an_interruption_between_layers_reproduces_the_uninterrupted_run(small_data, tmp_path):
    def fresh():
        return DBN([64, 8, 4, 3], generator=torch.Generator().manual_seed(0))

    def trainer(run_dir, on_layer_end=None):
        return GreedyTrainer(CD(k=1), run_dir=run_dir, epochs=2, batch_size=50, progress=False, seed=7, on_layer_end=on_layer_end)

    reference = fresh()
    trainer(tmp_path / "straight").fit(reference, small_data)

    def interrupt_after_layer_one(layer, metrics):
        if layer == 1:
            raise KeyboardInterrupt("simulated interruption")

    with pytest.raises(KeyboardInterrupt):
        trainer(tmp_path / "interrupted", interrupt_after_layer_one).fit(fresh(), small_data)
    assert not (tmp_path / "interrupted" / "layer2").exists()
    resumed = fresh()
    trainer(tmp_path / "interrupted").fit(resumed, small_data, resume=True)
    assert same_parameters(parameters(resumed), parameters(reference))


def test_a_bottom_layer_taken_from_a_trained_rbm_gives_the_run_that_trained_it(small_data, tmp_path):
    """pretrained_layers=[checkpoint of layer 0] skips layer 0's training and leaves every later layer bit-identical to a
    run that trained layer 0 itself (same seeds, same mapping up): the trained RBM is used exactly as a trained layer."""
    def fresh():
        return DBN([64, 8, 4, 3], generator=torch.Generator().manual_seed(0))

    reference = fresh()
    GreedyTrainer(CD(k=1), run_dir=tmp_path / "whole", epochs=2, batch_size=50, progress=False, seed=3).fit(reference, small_data)
    bottom = tmp_path / "bottom.pt"
    zoo.save(reference.rbms[0], bottom)
    stacked = fresh()
    trainer = GreedyTrainer(CD(k=1), run_dir=tmp_path / "stacked", epochs=2, batch_size=50, progress=False, seed=3,
                            pretrained_layers=[str(bottom)])
    trainer.fit(stacked, small_data)
    assert same_parameters(parameters(stacked), parameters(reference))
    assert not (tmp_path / "stacked" / "layer0").exists() and (tmp_path / "stacked" / "layer1" / "checkpoint.pt").is_file()
    lines = [json.loads(line) for line in trainer.metrics_path.read_text().splitlines()]
    assert lines[0] == {"layer": 0, "pretrained": str(bottom)} and [line["layer"] for line in lines] == [0, 1, 2]


def test_pretrained_layers_of_the_wrong_kind_are_refused_naming_the_entry(small_data, tmp_path):
    wrong_size = tmp_path / "rbm.pt"
    zoo.save(RBM(64, 5), wrong_size)
    trainer = GreedyTrainer(CD(), run_dir=tmp_path / "run", progress=False, pretrained_layers=[str(wrong_size)])
    wrong = r"pretrained_layers\[0\]: .*rbm.pt is RBM\(num_visible=64, num_hidden=5\), but layer 0 of this model is RBM\(num_visible=64, num_hidden=8\)"
    with pytest.raises(ValueError, match=wrong):
        trainer.fit(DBN([64, 8, 4]), small_data)
    too_many = GreedyTrainer(CD(), run_dir=tmp_path / "run", progress=False, pretrained_layers=[str(wrong_size)] * 3)
    with pytest.raises(ValueError, match="pretrained_layers has 3 entries but the model has 2 layers"):
        too_many.fit(DBN([64, 5, 4]), small_data)
    with pytest.raises(ValueError, match=r"pretrained_layers\[0\]='no-such-model' is neither a checkpoint file nor a zoo model"):
        GreedyTrainer(CD(), run_dir=tmp_path / "run", pretrained_layers=["no-such-model"])
    with pytest.raises(ValueError, match=r"pretrained_layers\[1\] must be a zoo name or a checkpoint path, got int 7"):
        GreedyTrainer(CD(), run_dir=tmp_path / "run", pretrained_layers=[str(wrong_size), 7])
    with pytest.raises(ValueError, match="pretrained_layers must be a list of zoo names or checkpoint paths"):
        GreedyTrainer(CD(), run_dir=tmp_path / "run", pretrained_layers="rbm-digits")


def test_a_zoo_name_is_a_pretrained_layer(small_data, tmp_path):
    trainer = GreedyTrainer(CD(), run_dir=tmp_path, epochs=1, batch_size=50, progress=False, pretrained_layers=["rbm-digits"])
    dbn = DBN([64, zoo.pretrained("rbm-digits").num_hidden, 4])
    trainer.fit(dbn, small_data)
    assert same_parameters(parameters(dbn.rbms[0]), parameters(zoo.pretrained("rbm-digits")))


def test_greedy_trainer_rejects_other_models(small_data, tmp_path):
    with pytest.raises(MissingCapability, match=r"needs a stack of RBMs trained one at a time, bottom first \(a DBN\); RBM has binary states"):
        GreedyTrainer(CD(), run_dir=tmp_path, progress=False).fit(RBM(64, 4), small_data)
    with pytest.raises(ValueError, match="data must be"):
        train_greedy([64, 4, 2], [[0.0] * 64])


@pytest.mark.parametrize("trainer", ["cd", "pcd"])
def test_the_dbn_config_makes_any_trainer_greedy(small_data, tmp_path, trainer):
    """What ``python scripts/train.py model=dbn trainer=...`` builds: conf/training/dbn.yaml turns the chosen trainer into
    a GreedyTrainer with its objective and settings (epochs per layer); other model configs keep a plain Trainer."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[
            "model=dbn", f"trainer={trainer}", "model.hidden_sizes=[8,4]", "trainer.epochs=1", "trainer.progress=false",
            f"run_dir={tmp_path}",
        ])
        plain = compose(config_name="train", overrides=["model=rbm", f"trainer={trainer}"])
    assert plain.trainer._target_ == "pfzoo.training.Trainer"
    model = instantiate(cfg.model, num_visible=small_data.num_features, generator=torch.Generator().manual_seed(cfg.seed))
    assert isinstance(model, DBN) and model.layer_sizes == [64, 8, 4]
    model.init_from_data(small_data.train)
    greedy = instantiate(cfg.trainer, run_dir=cfg.run_dir, estimator=None)
    assert type(greedy) is GreedyTrainer and greedy.settings.epochs == 1 and greedy.init_from_data
    assert type(greedy.objective).__name__ == trainer.upper() and greedy.layer_trainer(1).settings.batch_size == cfg.trainer.batch_size
    greedy.fit(model, small_data)
    assert zoo.load(greedy.checkpoint_path).config() == {"layer_sizes": [64, 8, 4], "max_enumeration_units": 25}
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 2


@pytest.mark.parametrize("settings", [{"centered": True}, {"natural_gradient": {"metric": "energy", "damping": 1.0}}])
def test_each_layer_trains_with_the_wrapped_objective_once(small_data, tmp_path, settings):
    """Centering and the natural gradient wrap the objective once, in the GreedyTrainer; each layer's Trainer gets a copy
    of that wrapped objective, not a second wrapping (which the wrappers refuse)."""
    trainer = GreedyTrainer(CD(k=1), run_dir=tmp_path, epochs=1, batch_size=50, progress=False, seed=3, **settings)
    wrapped = type(trainer.objective)
    assert wrapped is not CD
    layer = trainer.layer_trainer(0)
    assert type(layer.objective) is wrapped and type(layer.objective.objective) is CD
    trainer.fit(DBN([64, 8, 4], generator=torch.Generator().manual_seed(0)), small_data)


def test_an_rbm_started_from_the_layer_below_leaves_the_stacks_likelihood_exactly_as_it_was():
    """Hinton, Osindero & Teh (2006) §4: the top RBM started as the one below turned upside down gives the stack the
    lower stack's distribution (checked by enumeration), whatever the extra hidden units."""
    g = torch.Generator().manual_seed(0)
    below = RBM.from_tensors(torch.randn(6, 4, generator=g), torch.randn(6, generator=g), torch.randn(4, generator=g))
    dbn = DBN.from_rbms([below, RBM(4, 9, init_std=0.0)])
    start_from_layer_below(dbn.rbms[1], dbn.rbms[0])
    states = torch.tensor([[(i >> bit) & 1 for bit in range(6)] for i in range(64)], dtype=torch.float32)
    torch.testing.assert_close(dbn.log_prob(states), below.log_prob(states), atol=1e-5, rtol=0)
    assert abs(dbn.log_prob(states).exp().sum().item() - 1.0) < 1e-5
    with pytest.raises(ValueError, match=r"^rbm: an RBM\(4, 5\) cannot start as RBM\(6, 4\) upside down; it needs 4 visible and at least 6"):
        start_from_layer_below(RBM(4, 5), below)


def test_init_from_below_starts_each_upper_layer_from_the_trained_layer_below(small_data, tmp_path, monkeypatch):
    starts = {}
    original = Trainer.fit

    def recording_fit(self, model, data, **kwargs):
        starts[model.num_visible] = parameters(model)
        return original(self, model, data, **kwargs)

    monkeypatch.setattr(Trainer, "fit", recording_fit)
    dbn = DBN([64, 8, 70], generator=torch.Generator().manual_seed(0))
    GreedyTrainer(CD(k=1), run_dir=tmp_path, epochs=1, batch_size=50, progress=False, seed=3, init_from_below=True).fit(dbn, small_data)
    top, bottom = starts[8], dbn.rbms[0]
    extra = top["weight"][:, 64:]  # the initial random weights, a tenth as large: small, and no two units alike
    assert torch.equal(top["weight"][:, :64], bottom.weight.T) and 0 < extra.abs().max() < 0.01 and len({tuple(column) for column in extra.T.tolist()}) == 6
    assert torch.equal(top["visible_bias"], bottom.hidden_bias) and torch.equal(top["hidden_bias"][:64], bottom.visible_bias)
    with pytest.raises(ValueError, match=r"init_from_below \(layer 1\): an RBM\(8, 3\) cannot start"):
        GreedyTrainer(CD(k=1), run_dir=tmp_path / "small", epochs=1, batch_size=50, progress=False, init_from_below=True).fit(
            DBN([64, 8, 3]), small_data)
    starts.clear()
    via_function = train_greedy([64, 8, 70], small_data, epochs_per_layer=1, batch_size=50, seed=3, init_from_below=True)
    assert torch.equal(starts[8]["weight"][:, :64], via_function.rbms[0].weight.T)  # train_greedy passes it on


def test_greedy_trainer_takes_a_tensor_a_dataset_or_a_data_loader_as_trainer_fit_does(small_data, tmp_path):
    """Issue 50: GreedyTrainer.fit reads a tensor, a Dataset or a DataLoader (and optional held-out ``valid``) through
    Trainer.fit's own reader: each trains the DBN bit for bit as the same rows in a DataSplits do (the training rows are
    mapped up first, so they do not depend on the held-out rows) and writes a loadable checkpoint; without held-out rows
    every layer and the closing estimate are judged on the training rows (exact, by enumeration, for this tiny stack)."""
    train, held = small_data.train[:200], small_data.test[:50]

    def fit(name, data, **kwargs):
        dbn = DBN([64, 6, 3], generator=torch.Generator().manual_seed(0))
        trainer = GreedyTrainer(CD(k=1), run_dir=tmp_path / name, epochs=1, batch_size=50, progress=False, seed=5,
                                evaluate_every=1, estimator=AIS(num_chains=20, num_steps=50))
        return dbn, trainer, trainer.fit(dbn, data, **kwargs)

    reference, _, reference_result = fit("splits", DataSplits("rows", train=train, test=held))
    for name, data in {"tensor": train, "dataset": TensorDataset(train, torch.zeros(200)),
                       "loader": DataLoader(TensorDataset(train, torch.zeros(200)), batch_size=32)}.items():
        dbn, trainer, result = fit(name, data)
        assert same_parameters(parameters(dbn), parameters(reference)), name
        assert same_parameters(parameters(zoo.load(trainer.checkpoint_path)), parameters(reference)), name
        assert {"layer0_train_pseudo_log_likelihood", "layer1_train_reconstruction_error", "train_log_likelihood"} <= set(result), name
        assert not any(key.startswith(("test_", "valid_")) or "_test_" in key or "_valid_" in key for key in result), name
        with torch.no_grad():
            exact = dbn.log_prob(train).mean().item()
        assert abs(result["train_log_likelihood"] - exact) < 3 * result["train_log_likelihood_stderr"] + 1e-4, name
    dbn, _, result = fit("loader-valid", DataLoader(train, batch_size=64), valid=DataLoader(held, batch_size=64))
    assert same_parameters(parameters(dbn), parameters(reference))
    assert result["layer1_valid_reconstruction_error"] == reference_result["layer1_test_reconstruction_error"]
    assert result["valid_log_likelihood"] == reference_result["test_log_likelihood"]
    with pytest.raises(ValueError, match=r"^data must be a pfzoo.data.DataSplits, a torch.Tensor \[N, V\], .*got ndarray; torch.as_tensor"):
        GreedyTrainer(CD(), run_dir=tmp_path / "refused", progress=False).fit(DBN([64, 6, 3]), train.numpy())
