"""scripts/feature_card.py: a linear classifier on a zoo model's hidden features, written into a copy of its card."""

import json
import runpy
import shutil
from pathlib import Path

import pytest

from pfzoo import zoo

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def feature_card():
    return runpy.run_path(str(REPO / "scripts" / "feature_card.py"), run_name="feature_card")


def test_writes_the_accuracy_into_the_card_and_its_readme(tmp_path, feature_card, capsys):
    for name in ("rbm-digits", "dbn-digits"):
        shutil.copytree(REPO / "models" / name, tmp_path / name)
    arguments = ["--models", "rbm-digits", "dbn-digits", "--zoo", str(tmp_path), "--num-train", "600", "--max-iter", "300"]
    feature_card["main"](arguments + ["--write"])
    feature_card["main"](arguments + ["--write"])  # a second run replaces the measurement
    out = capsys.readouterr().out
    assert out.count("rbm-digits: hidden features") == 2 and "dbn-digits: hidden features" in out
    for name in ("rbm-digits", "dbn-digits"):
        card = json.loads((tmp_path / name / zoo.CARD_DATA_FILE).read_text())
        entries = [m for m in card["measurements"] if m.get("metric") == "test accuracy"]
        assert len(entries) == 1 and entries[0]["label"] == "linear classifier on hidden features: test accuracy"
        entry = entries[0]
        assert entry["num_train"] == 600 and entry["num_test"] == 360 and entry["value"] > 0.8 and entry["chance"] < 0.15
        readme = (tmp_path / name / zoo.CARD_FILE).read_text()
        assert readme == zoo.render_card(card).render()
        assert "## Linear classifier on hidden features" in readme and f"| {entry['value']:.4f} | {entry['pixels']:.4f} |" in readme
        log_likelihood_table = readme.split("## Measured log-likelihood")[1].split("##")[0]
        assert "test accuracy" not in log_likelihood_table  # an accuracy is not a log-likelihood row
        assert card["checkpoint"] == zoo.pretrained_card(name)["checkpoint"]  # the checkpoint is untouched
    feature_card["main"](["--models", "dbn-digits", "--zoo", str(tmp_path), "--num-train", "600", "--layer", "-1", "--write"])
    card = json.loads((tmp_path / "dbn-digits" / zoo.CARD_DATA_FILE).read_text())
    top, every = [m for m in card["measurements"] if m.get("metric") == "test accuracy"][::-1]
    assert top["label"].endswith("(hidden layer -1)") and (top["num_features"], every["num_features"]) == (16, 32)
    readme = (tmp_path / "dbn-digits" / zoo.CARD_FILE).read_text()
    assert "| the top hidden layer's means (16) |" in readme and "| every hidden layer's means (32) |" in readme


def test_a_model_without_hidden_means_is_skipped_in_one_line(tmp_path, feature_card, capsys):
    shutil.copytree(REPO / "models" / "ising-spin_glass", tmp_path / "ising-spin_glass")
    before = (tmp_path / "ising-spin_glass" / zoo.CARD_DATA_FILE).read_text()
    feature_card["main"](["--models", "ising-spin_glass", "--zoo", str(tmp_path), "--write"])
    assert capsys.readouterr().out == "ising-spin_glass: skipped, Ising has no hidden means\n"
    assert (tmp_path / "ising-spin_glass" / zoo.CARD_DATA_FILE).read_text() == before


def test_a_readme_from_another_renderer_keeps_its_text_and_gets_the_section_once():
    entry = {"label": "linear classifier on hidden features: test accuracy", "metric": "test accuracy", "value": 0.9, "pixels": 0.8,
             "chance": 0.1, "num_features": 20, "num_train": 100, "num_test": 50, "data": "Digits.", "settings": {"C": 1.0}}
    readme = "# model\n\nIntro.\n\n## Measured\n\n| a | b |\n\n## Notes\n\n- a note\n"
    once = zoo.cards.with_accuracy_section(readme, {"measurements": [entry]})
    assert once.startswith("# model\n\nIntro.\n\n## Measured\n\n| a | b |\n\n## Linear classifier on hidden features\n\n")
    assert once.endswith("\n\n## Notes\n\n- a note\n") and "| 0.9000 | 0.8000 | 0.1000 | 100 / 50 |" in once
    again = zoo.cards.with_accuracy_section(once, {"measurements": [{**entry, "value": 0.95}]})
    assert again.count("## Linear classifier") == 1 and "| 0.9500 |" in again and "| 0.9000 |" not in again
    assert zoo.cards.with_accuracy_section(again, {"measurements": []}) == readme
    assert zoo.cards.with_accuracy_section("# model\n\nIntro.\n", {"measurements": [entry]}).startswith("# model\n\nIntro.\n\n## Linear")
