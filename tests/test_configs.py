"""Every config composes, and every option of every group instantiates."""

from pathlib import Path

import numpy
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf

from pfzoo.data import DataSplits
from pfzoo.estimators import Estimator
from pfzoo.models import EnergyModel
from pfzoo.training import Trainer

CONF = Path(__file__).resolve().parents[1] / "conf"
GROUPS = {group: sorted(p.stem for p in (CONF / group).glob("*.yaml")) for group in ("model", "dataset", "trainer", "estimator")}
NEEDS_DATA_ROOT = {"mnist", "binarized_mnist"}


def composed(config_name, overrides=()):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name=config_name, overrides=list(overrides))


def test_every_group_has_options():
    assert all(GROUPS.values()), GROUPS


@pytest.mark.parametrize("config_name", ["train", "evaluate"])
def test_top_level_configs_compose_and_resolve(config_name):
    cfg = composed(config_name, ["run_dir=somewhere"])
    assert cfg.device == "cpu" and cfg.seed == 0
    assert "_target_" in cfg.model and "_target_" in cfg.dataset and "_target_" in cfg.estimator


@pytest.mark.parametrize("option", GROUPS["model"])
def test_model_options_instantiate(option):
    cfg = composed("train", [f"model={option}"])
    model = instantiate(cfg.model, num_visible=12, generator=torch.Generator().manual_seed(0))
    assert isinstance(model, EnergyModel) and model.num_visible == 12


@pytest.mark.parametrize("option", GROUPS["estimator"])
def test_estimator_options_instantiate(option):
    assert isinstance(instantiate(composed("evaluate", [f"estimator={option}"]).estimator), Estimator)


@pytest.mark.parametrize("option", GROUPS["trainer"])
def test_trainer_options_instantiate(option, tmp_path):
    trainer = instantiate(composed("train", [f"trainer={option}"]).trainer, run_dir=tmp_path, estimator=None)
    assert isinstance(trainer, Trainer)


@pytest.mark.parametrize("option", GROUPS["dataset"])
def test_dataset_options_instantiate(option, request, tmp_path):
    overrides = [f"dataset={option}"]
    if option in NEEDS_DATA_ROOT:
        root = request.getfixturevalue("shared_data_root")
        overrides.append(f"data.root={root}")
    if option == "array":  # the one dataset whose file is the user's
        numpy.save(tmp_path / "samples.npy", numpy.ones((10, 4)))
        overrides.append(f"dataset.path={tmp_path / 'samples.npy'}")
    if option == "spin_glass":
        overrides += ["dataset.num_train=50", "dataset.num_test=10", "dataset.burn_in=5"]
    data = instantiate(composed("train", overrides).dataset)
    assert isinstance(data, DataSplits) and data.train.shape[1] == data.num_features


def test_data_root_defaults_to_environment(monkeypatch):
    monkeypatch.setenv("PFZOO_DATA", "/some/where")
    assert composed("train", ["dataset=mnist"]).dataset.root == "/some/where"


TRAINING = sorted(p.stem for p in (CONF / "training").glob("*.yaml"))


@pytest.mark.parametrize("trainer", GROUPS["trainer"])
@pytest.mark.parametrize("model", TRAINING)
def test_a_model_configs_own_training_driver_applies_to_every_trainer(model, trainer, tmp_path):
    """conf/training/<model>.yaml (e.g. dbn: greedy, layer by layer) is merged over whichever trainer=... is chosen."""
    assert model in GROUPS["model"], f"conf/training/{model}.yaml names no conf/model config"
    cfg = composed("train", [f"model={model}", f"trainer={trainer}"])
    driver = OmegaConf.load(CONF / "training" / f"{model}.yaml")["_target_"]
    assert cfg.trainer._target_ == driver and cfg.trainer.objective == composed("train", [f"trainer={trainer}"]).trainer.objective
    assert isinstance(instantiate(cfg.trainer, run_dir=tmp_path, estimator=None), get_class(driver))
