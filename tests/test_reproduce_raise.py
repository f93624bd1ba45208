"""scripts/reproduce_raise.py --paper-scale: the settings are RAISE Table 1's, and the code path they take runs.

The real run needs a GPU for hours, so the test shrinks :data:`PAPER_SCALE` and runs it on a 784×5 RBM and a few
random binary "digits" written as .amat files.
"""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from pfzoo import zoo
from pfzoo.models import RBM

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "reproduce_raise.py"
TINY = {"steps": 5, "long_steps": 0, "ais_chains": 4, "raise_chains": 2, "raise_examples": 3}


@pytest.fixture
def script():
    spec = importlib.util.spec_from_file_location("pfzoo_reproduce_raise_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_mnist(root: Path) -> Path:
    """``root/binarized_mnist/binarized_mnist_{train,valid,test}.amat`` with 20 / 10 / 10 random binary rows."""
    folder = root / "binarized_mnist"
    folder.mkdir(parents=True)
    g = torch.Generator().manual_seed(0)
    for split, rows in (("train", 20), ("valid", 10), ("test", 10)):
        pixels = (torch.rand(rows, 784, generator=g) < 0.2).int().tolist()
        (folder / f"binarized_mnist_{split}.amat").write_text("".join(" ".join(map(str, row)) + "\n" for row in pixels))
    return root


def test_paper_scale_settings_are_raise_table_1s(script):
    assert script.PAPER_SCALE == {"steps": 100_000, "long_steps": 0, "ais_chains": 5000, "raise_chains": 50, "raise_examples": 100}
    with pytest.raises(SystemExit):  # one scale at a time
        script.main(["--quick", "--paper-scale"])


def test_paper_scale_path_measures_every_cell_and_times_each_row(script, tmp_path, monkeypatch):
    zoo_dir = tmp_path / "zoo"
    checkpoint = script.zoo_folder("cd1-20", zoo_dir) / zoo.CHECKPOINT_FILE
    checkpoint.parent.mkdir(parents=True)
    zoo.save(checkpoint, RBM(784, 5, generator=torch.Generator().manual_seed(0)))
    monkeypatch.setattr(script, "PAPER_SCALE", TINY)

    script.main(["--paper-scale", "--device", "cpu", "--from-zoo", str(zoo_dir), "--models", "cd1-20", "--data-root", str(fake_mnist(tmp_path)),
                 "--output", str(tmp_path / "out"), "--csl-samples", "10", "--csl-burn-in", "2"])

    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["settings"] == {**script.SETTINGS, "csl_samples": 10, "csl_burn_in": 2, **TINY}
    assert results["gpu"] is None
    estimates = results["models"]["cd1-20"]["estimates"]
    assert set(estimates) == {"exact", "csl", "raise_uniform", "raise_base_rate", "ais_uniform", "ais_base_rate"}  # no second K
    assert all(row["seconds"] >= 0 for row in estimates.values())
    table = (tmp_path / "out" / "table.md").read_text()
    header, _, row = table.splitlines()[2:5]
    assert header.endswith("| wall time |") and row.startswith("| CD1(5), K = 5 |") and row.rstrip(" |").endswith(" s")
    assert "also run at K" not in table and "at the long K" not in table
    assert "AIS: 4 chains" in table and "2 reverse chains for each of 3 random test digits" in table
