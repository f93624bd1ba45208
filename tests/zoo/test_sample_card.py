"""scripts/sample_card.py --checkpoint: a saved model (a run in training, say) measured on a zoo card's data as the zoo
model itself would be, printed as one JSON line, the card untouched; one-line refusals of what it cannot do."""

import json
import runpy
import shutil
from pathlib import Path

import pytest
import torch

from pfzoo import zoo
from pfzoo.data import digits
from pfzoo.studies.sample_recognition import sample_recognition

REPO = Path(__file__).resolve().parents[2]
SETTINGS = {"num_samples": 40, "num_steps": 30, "num_train": 500, "max_iter": 300, "threshold": 0.9}


@pytest.fixture
def sample_card(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "scripts"))  # the script imports its sibling feature_card
    return runpy.run_path(str(REPO / "scripts" / "sample_card.py"), run_name="sample_card")


def arguments(zoo_dir: Path) -> list[str]:
    return ["--models", "rbm-digits", "--zoo", str(zoo_dir), "--seed", "3"] + [
        argument for key, value in SETTINGS.items() for argument in (f"--{key.replace('_', '-')}", str(value))]


def test_a_checkpoint_reads_as_the_library_reads_that_model_on_the_cards_data_and_the_card_is_untouched(tmp_path, sample_card, capsys):
    shutil.copytree(REPO / "models" / "rbm-digits", tmp_path / "rbm-digits")
    model = zoo.pretrained("rbm-digits")
    with torch.no_grad():  # a model other than the card's, so that measuring the zoo's instead could not pass
        model.weight.mul_(0.5)
    checkpoint = zoo.save(model, tmp_path / "run.pt")
    before = {path.name: path.read_bytes() for path in (tmp_path / "rbm-digits").iterdir()}
    sample_card["main"](arguments(tmp_path) + ["--checkpoint", str(checkpoint)])
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    expected = sample_recognition(zoo.load(checkpoint), digits(), generator=torch.Generator().manual_seed(3), **SETTINGS).record()
    assert printed["checkpoint"] == str(checkpoint) and printed["card"] == "rbm-digits"
    assert printed.pop("curve") == expected.pop("curve")  # JSON keeps the shares' every digit
    assert {key: printed[key] for key in expected} == pytest.approx(expected)
    assert {path.name: path.read_bytes() for path in (tmp_path / "rbm-digits").iterdir()} == before


@pytest.mark.parametrize("extra, words", [(["--write"], "no --write"), (["--checkpoint", "missing.pt"], "no such file")])
def test_refusals_are_one_line_with_exit_status_2(tmp_path, sample_card, capsys, extra, words):
    given = ["--checkpoint", str(REPO / "models" / "rbm-digits" / "checkpoint.pt")] if "--write" in extra else []
    with pytest.raises(SystemExit) as exit_:
        sample_card["main"](arguments(REPO / "models") + given + extra)
    assert exit_.value.code == 2 and words in capsys.readouterr().err


def test_a_checkpoint_needs_exactly_one_card(sample_card, capsys):
    with pytest.raises(SystemExit) as exit_:
        sample_card["main"](["--checkpoint", str(REPO / "models" / "rbm-digits" / "checkpoint.pt")])
    assert exit_.value.code == 2 and "exactly one --models" in capsys.readouterr().err


def test_write_records_the_measurement_and_its_picture_in_the_card(tmp_path, sample_card):
    shutil.copytree(REPO / "models" / "rbm-digits", tmp_path / "rbm-digits")
    sample_card["main"](arguments(tmp_path) + ["--write"])
    card = json.loads((tmp_path / "rbm-digits" / "card.json").read_text())
    entry = next(m for m in card["measurements"] if m.get("metric") == "samples recognised")
    assert entry["picture"] == "samples.png" and (tmp_path / "rbm-digits" / "samples.png").is_file()
    assert "](samples.png)" in (tmp_path / "rbm-digits" / "README.md").read_text()
