"""The recipes of scripts/reproduce_hais.py and scripts/reproduce_models.py compose, and their models and trainers instantiate."""

from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate

from pfzoo.cli import compose
from pfzoo.models import EnergyModel
from pfzoo.training import Trainer

RECIPES = ["hais_poe_laplace", "hais_poe_student", "models_sparse_coding", "models_bilinear", "models_mcrbm", "models_poe_laplace_mpf_lbfgs",
           "models_poe_student_mpf_lbfgs"]
EXPERIMENTS = Path(__file__).resolve().parents[1] / "conf" / "experiment"


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_composes_and_instantiates(name, tmp_path):
    assert (EXPERIMENTS / f"{name}.yaml").is_file()
    cfg = compose("train", [f"+experiment={name}", "seed=3"])
    assert cfg.dataset._target_ == "pfzoo.data.patches" and cfg.dataset.seed == 3 and cfg.dataset.num_components == 36
    model = instantiate(cfg.model, num_visible=36, generator=torch.Generator().manual_seed(0))
    assert isinstance(model, EnergyModel) and model.num_visible == 36
    trainer = instantiate(cfg.trainer, run_dir=tmp_path, estimator=None)
    assert isinstance(trainer, Trainer) and trainer.settings.seed == 3


@pytest.mark.parametrize("name", ["hais_poe_laplace", "hais_poe_student"])
def test_oracle_recipes_fit_complete_models_by_full_batch_lbfgs(name, tmp_path):
    cfg = compose("train", [f"+experiment={name}"])
    model = instantiate(cfg.model, num_visible=36)
    assert model.is_complete and model.log_partition_cost == 0
    assert getattr(model, "shape_above_half", False) == (name == "hais_poe_student")  # λ > ½ during line searches
    optimizer = instantiate(cfg.trainer.optimizer)(model.parameters())
    assert isinstance(optimizer, torch.optim.LBFGS) and cfg.trainer.batch_size >= cfg.dataset.num_train
