"""The depth diagnostic: a DBM against itself without its top layer, measured alike, and written onto its card."""

import json
import runpy
import shutil
from pathlib import Path

import pytest
import torch
from factories import all_binary_states, random_dbm

from pfzoo import zoo
from pfzoo.estimators import Exact
from pfzoo.studies.dbm_depth import depth_diagnostic

REPO = Path(__file__).resolve().parents[2]


def test_the_diagnostic_is_the_exact_difference_of_the_two_models_mean_log_likelihoods():
    model = random_dbm([6, 4, 3], scale=2.0, seed=1)
    states = all_binary_states(6, msb_first=True)
    test = states[torch.randperm(64, generator=torch.Generator().manual_seed(0))[:20]]
    depth = depth_diagnostic(model, test, states, Exact())
    exact_loss = (model.log_prob(test) - model.without_top_layer(test).log_prob(test)).mean().item()
    assert depth["loss"] == pytest.approx(exact_loss, abs=1e-9)
    assert depth["model"]["value"] == pytest.approx(model.log_prob(test).mean().item(), abs=1e-9)
    assert depth["num_test"] == 20 and depth["top_layer_share"] == pytest.approx(model.top_layer_share(test))


def test_the_script_writes_the_depth_onto_a_copy_of_a_zoo_dbm_and_its_readme_once(tmp_path, capsys):
    shutil.copytree(REPO / "models" / "dbm-digits", tmp_path / "dbm-digits")
    script = runpy.run_path(str(REPO / "scripts" / "dbm_depth.py"), run_name="dbm_depth")
    arguments = ["--name", "dbm-digits", "--zoo", str(tmp_path), "--num-steps", "20", "--num-chains", "10", "--posterior-samples", "5"]
    script["main"](arguments)
    script["main"](arguments)  # a second run replaces the section
    card = json.loads((tmp_path / "dbm-digits" / zoo.CARD_DATA_FILE).read_text())
    depth = card["depth"]
    assert depth["settings"]["num_steps"] == 20 and depth["num_test"] == 360
    assert depth["command"] == "python scripts/dbm_depth.py --name dbm-digits --num-steps 20 --num-chains 10 --posterior-samples 5"  # not this machine's --zoo
    assert depth["loss"] == pytest.approx(depth["model"]["value"] - depth["without_top"]["value"])
    readme = (tmp_path / "dbm-digits" / zoo.CARD_FILE).read_text()
    assert readme.count("## Depth: what the top layer contributes") == 1 and f"{depth['loss']:+.2f}" in readme
    assert "## Depth: what the top layer contributes" in zoo.render_card(card).render()  # the card's own renderer shows it too
    assert "dbm-digits: DBM" in capsys.readouterr().out
