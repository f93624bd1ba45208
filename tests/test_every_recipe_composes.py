"""Every recipe in conf/experiment composes with the app's own config (what ``python scripts/train.py +experiment=NAME``
reads first), so a recipe that no test trains (the long zoo runs: deep DBMs, the PCD DBN) cannot rot silently."""

from pathlib import Path

import pytest

from pfzoo.cli import compose

EXPERIMENTS = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "conf" / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_recipe_composes(name, tmp_path):
    cfg = compose("train", [f"+experiment={name}", f"run_dir={tmp_path}"])
    assert cfg.model._target_ and cfg.trainer._target_ and cfg.dataset._target_


def test_the_three_layer_dbm_recipe_is_the_papers_architecture():
    cfg = compose("train", ["+experiment=zoo_dbm_500_500_1000_deep"])
    assert list(cfg.model.hidden_sizes) == [500, 500, 1000] and cfg.dataset._target_ == "pfzoo.data.binarized_mnist"
