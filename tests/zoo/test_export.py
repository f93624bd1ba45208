"""pfzoo.zoo.export, model cards and folder names; the RAISE reproduction's recipes (conf/experiment/raise_*.yaml)
compose, instantiate, and are the recipes of the zoo's binarized-MNIST checkpoints."""

import json
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from pfzoo import zoo
from pfzoo.cli import compose
from pfzoo.models import RBM, EnergyModel

REPO = Path(__file__).resolve().parents[2]
RECIPES = sorted(path.stem for path in (REPO / "conf" / "experiment").glob("raise_*.yaml"))
ZOO_RECIPES = {  # zoo folder → recipe that trained it
    "rbm-binarized_mnist-cd1-20": "raise_rbm_cd1_20", "rbm-binarized_mnist-pcd-20": "raise_rbm_pcd_20",
    "rbm-binarized_mnist-cd1-500": "raise_rbm_cd1_500", "rbm-binarized_mnist-pcd-500": "raise_rbm_pcd_500",
    "rbm-binarized_mnist-cd25-500": "zoo_rbm_cd25_500", "dbm-binarized_mnist": "zoo_dbm_500_1000_from_rbm_sampled_momentum05_averaged",
    "dbn-binarized_mnist": "zoo_dbn_500_2000_fresh_chains1000",
}


def trained_rbm(seed=0):
    g = torch.Generator().manual_seed(seed)
    return RBM.from_tensors(torch.randn(12, 5, generator=g), torch.randn(12, generator=g), torch.randn(5, generator=g))


def test_export_keeps_the_model_and_config_but_not_the_trainer_state(tmp_path):
    model, config = trained_rbm(), {"seed": 0, "model": {"num_hidden": 5}}
    run = zoo.save(model, tmp_path / "run" / "checkpoint.pt", config=config, trainer_state={"epoch": 7})
    target = zoo.export(run, tmp_path / "zoo" / "rbm-digits", card="# card\n")
    assert target == tmp_path / "zoo" / "rbm-digits" / "checkpoint.pt"
    raw = zoo.load_checkpoint(target)
    assert raw["trainer_state"] is None and raw["config"] == config
    assert torch.equal(zoo.load(target).weight, model.weight)
    assert (target.parent / "README.md").read_text() == "# card\n"


def test_exporting_a_zoo_checkpoint_onto_itself_leaves_its_bytes_alone(tmp_path):
    folder = tmp_path / "rbm-digits"
    target = zoo.export(zoo.save(trained_rbm(), tmp_path / "run.pt", trainer_state={"epoch": 1}), folder)
    before = target.read_bytes()
    assert not (folder / "README.md").exists()  # no card given: none written
    zoo.export(target, folder, card=zoo.ModelCard(title="t"))
    assert target.read_bytes() == before and (folder / "README.md").read_text() == "# t\n"


def test_export_refuses_a_missing_checkpoint_and_a_card_of_the_wrong_type(tmp_path):
    with pytest.raises(FileNotFoundError):
        zoo.export(tmp_path / "absent.pt", tmp_path / "zoo")
    run = zoo.save(trained_rbm(), tmp_path / "run.pt")
    with pytest.raises(ValueError, match="card"):
        zoo.export(run, tmp_path / "zoo", card={"title": "t"})


def test_model_card_renders_title_summary_facts_and_sections():
    card = zoo.ModelCard(title="rbm-digits (PCD)", summary="Trained by x.", facts=[("data", "`dataset=digits`"), ("file", "`checkpoint.pt`")],
                         sections=[("Measured", "| a | b |\n|---|---|\n| 1 | 2 |\n\nnotes"), ("More", "text\n")])
    assert card.render() == (
        "# rbm-digits (PCD)\n\nTrained by x.\n\n| | |\n|---|---|\n| data | `dataset=digits` |\n| file | `checkpoint.pt` |\n\n"
        "## Measured\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nnotes\n\n## More\n\ntext\n"
    )
    assert zoo.ModelCard(title="t", sections=[("S", "x")]).render() == "# t\n\n## S\n\nx\n"


def test_folder_names():
    assert zoo.folder_name("rbm", "digits") == "rbm-digits"
    assert zoo.folder_name("rbm", "binarized_mnist", "cd1-20") == "rbm-binarized_mnist-cd1-20"
    for bad in ("", "a/b", " rbm"):
        with pytest.raises(ValueError, match="family"):
            zoo.folder_name(bad, "digits")


def test_the_raise_recipes_exist():
    assert RECIPES  # the glob found the recipes
    for recipe in ZOO_RECIPES.values():
        assert (REPO / "conf" / "experiment" / f"{recipe}.yaml").is_file(), recipe


@pytest.mark.parametrize("recipe", sorted(set(RECIPES) | set(ZOO_RECIPES.values())))
def test_raise_recipe_composes_and_instantiates_its_model(recipe):
    cfg = compose("train", [f"+experiment={recipe}", "run_dir=somewhere", "data.root=/nowhere"])
    assert cfg.dataset._target_ == "pfzoo.data.binarized_mnist" and cfg.seed == 0
    model = instantiate(cfg.model, num_visible=784, generator=torch.Generator().manual_seed(0))
    assert isinstance(model, EnergyModel) and model.num_visible == 784
    instantiate(cfg.trainer, run_dir="somewhere", estimator=None)


@pytest.mark.parametrize("folder", sorted(ZOO_RECIPES))
def test_each_zoo_checkpoint_was_trained_by_its_recipe(folder):
    """The training config stored in the zoo's checkpoint is what ``+experiment=<recipe>`` composes (run-specific keys aside)."""
    stored = zoo.load_checkpoint(REPO / "models" / folder / "checkpoint.pt")["config"]
    composed = OmegaConf.to_container(compose("train", [f"+experiment={ZOO_RECIPES[folder]}", "run_dir=x", "data.root=x"]), resolve=True)
    # Older checkpoints predate these trainer keys; their values here are the defaults, which change nothing.
    for key, default in (("learning_rate_decay", 0.0), ("stop_tolerance", 0.0), ("max_seconds", None), ("log_every", None),
                         ("final_momentum", None), ("momentum_ramp_epochs", 0), ("centered", False),
                         ("track_partition", None), ("pretrained_layers", None), ("init_from_below", False),
                         ("held_out", "auto"), ("clip_grad_norm", None), ("divergence", "stop"), ("clock", "wall"),
                         ("binarize", False)):
        if key in composed["trainer"]:
            stored["trainer"].setdefault(key, default)
    # ... binarized MNIST's fetching switches, off ...
    for key, default in (("download", False), ("source", None)):
        if key in composed["dataset"]:
            stored["dataset"].setdefault(key, default)
    # ... and these objective keys (PCD's kernel: null is its block Gibbs chain; a DBM's sparsity target: null is none;
    # its positive sweeps: 0 is the mean-field positive phase).
    for key, default in (("kernel", None), ("sparsity_target", None), ("sparsity_cost", None), ("sparsity_damping", None),
                         ("positive_sweeps", 0)):
        if key in composed["trainer"].get("objective", {}) and "objective" in stored["trainer"]:
            stored["trainer"]["objective"].setdefault(key, default)
    # The DBN checkpoints predate conf/training/dbn.yaml: the app itself then wrapped their Trainer in a GreedyTrainer with
    # init_from_data true, the driver that the recipe now composes.
    if stored["model"]["_target_"] == "pfzoo.models.DBN" and stored["trainer"]["_target_"] == "pfzoo.training.Trainer":
        stored["trainer"].update(_target_="pfzoo.training.GreedyTrainer", init_from_data=True)
    for config in (stored, composed):
        config["trainer"].pop("progress")
        config["dataset"].pop("root")
        config["trainer"].pop("metrics_rows", None)  # how many rows the per-epoch diagnostics read: no number of the training
    # device is where the run happened (the recipes run on either; the DBM's on an H200), not part of the recipe
    for key in ("model", "dataset", "trainer", "seed", "init_from_data"):
        assert stored[key] == composed[key], key


def minimal_card(name="rbm-digits"):
    measured = {"estimator": "exact", "kind": "exact", "value": -20.0, "stderr": 0.0, "data_stderr": 0.2, "num_test": 10}
    return {"name": name, "family": "rbm", "model_config_name": "rbm", "model_config": {"num_visible": 12, "num_hidden": 5},
            "dataset": "digits", "dataset_config": {"_target_": "pfzoo.data.digits"}, "data_licence": "CC BY 4.0",
            "recipe": {"experiment": "zoo_rbm", "command": "python scripts/train.py +experiment=zoo_rbm", "config": {"seed": 0}},
            "log_likelihood": measured, "log_likelihood_at_init": {**measured, "value": -30.0}, "date": "2026-01-01",
            "pfzoo_version": "0.1.0", "git_commit": None, "training_seconds": 1.5}


def test_export_with_card_data_writes_a_hashed_card_and_renders_the_readme_from_it(tmp_path):
    config = {"seed": 0, "run_dir": str(tmp_path / "run"), "data": {"root": "/machine/data"}, "dataset": {"root": "/machine/data"}}
    run = zoo.save(trained_rbm(), tmp_path / "run" / "checkpoint.pt", config=config, trainer_state={"epoch": 7})
    target = zoo.export(run, tmp_path / "zoo" / "rbm-digits", card_data=minimal_card())
    assert zoo.load_checkpoint(target)["config"] == {"seed": 0, "data": {"root": None}, "dataset": {"root": None}}
    card = json.loads((target.parent / "card.json").read_text())
    assert card["format"] == zoo.CARD_FORMAT and card["checkpoint"]["sha256"] == zoo.file_sha256(target)
    readme = (target.parent / "README.md").read_text()
    assert readme == zoo.render_card(card).render() and "| trained (exact) | -20.00 |" in readme and "-30.00" in readme
    assert zoo.list_pretrained(zoo_dir=tmp_path / "zoo") == ["rbm-digits"]
    assert torch.equal(zoo.pretrained("rbm-digits", zoo_dir=tmp_path / "zoo").weight, trained_rbm().weight)


def test_a_card_missing_fields_is_refused(tmp_path):
    run = zoo.save(trained_rbm(), tmp_path / "run.pt")
    card = minimal_card()
    del card["data_licence"]
    with pytest.raises(ValueError, match="data_licence"):
        zoo.export(run, tmp_path / "zoo", card_data=card)
