"""The held-out stopping rule and L2 grid of scripts/ising_regularisation.py on a tiny glass, and the committed report."""

import json
import sys
from pathlib import Path

import pytest
from script_modules import load_script

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "reports" / "ising" / "sigma20_trace"


def _script(monkeypatch, *args):
    script = load_script(REPO / "scripts" / "ising_regularisation.py")
    monkeypatch.setattr(sys, "argv", ["ising_regularisation.py", *args])
    script.main()


def test_the_stopped_and_penalised_fits_are_chosen_by_the_held_out_objective(tmp_path, monkeypatch):
    settings = json.loads((COMMITTED / "results.json").read_text())["settings"] | {
        "side": 3, "num_samples": 300, "model_samples": 100, "burn_in": 10, "max_lbfgs_steps": 12, "coupling_std": 2.0}
    baseline = {name: {"coupling_error": 1.0, "correlation_error": 0.01, "seconds": 1.0, "iterations_or_epochs": 12}
                for name in ("MPF", "pseudo-likelihood", "CD-1", "CD-10")}
    (tmp_path / "tiny").mkdir()
    floor = {"seed": 1000, "num_samples": 100, "learners": {name: {"correlation_error": 0.01, "correlation_error_stderr": 0.001, "field_error": 0.0,
                                                 "correlation_errors": [0.009, 0.011]} for name in baseline}}
    (tmp_path / "tiny" / "results.json").write_text(json.dumps({"settings": settings, "results": baseline, "correlation_floor": floor}))
    _script(monkeypatch, "--run", str(tmp_path / "tiny"), "--runs", str(tmp_path / "runs"), "--grid", "1e-4", "1e-1",
            "--patience", "2", "--learners", "MPF", "--draws", "2")
    record = json.loads((tmp_path / "tiny" / "regularisation" / "results.json").read_text())
    assert record["held_out"]["count"] == 30
    mpf = record["learners"]["MPF"]
    curve = dict(mpf["early_stopping"]["held_out_objective"])
    best = mpf["early_stopping"]["best_step"]
    assert curve[best] == min(curve.values()) and mpf["early_stopping"]["steps"] in (best + 2, 12)
    assert mpf["early_stopping_refit"]["steps"] <= max(best, 1)
    grid = {point["weight_decay"]: point["held_out_objective"] for point in mpf["l2_grid"]}
    assert list(grid) == [1e-4, 1e-1] and mpf["l2_refit"]["weight_decay"] == min(grid, key=grid.get)
    assert mpf["l2_grid"][1]["coupling_error"] != mpf["l2_grid"][0]["coupling_error"]
    draws = record["draws"]["learners"]["MPF"]["l2_refit"]
    assert len(draws["correlation_errors"]) == 2 and draws["coupling_error"] == pytest.approx(mpf["l2_refit"]["coupling_error"], rel=1e-5)
    readme = (tmp_path / "tiny" / "regularisation" / "README.md").read_text()
    assert "| MPF | `early_stopping` |" in readme and "## The order of the learners" in readme and "## The order over repeated draws" in readme


def test_the_committed_report_rerenders_from_its_results(tmp_path, monkeypatch):
    committed = COMMITTED / "regularisation"
    if not (committed / "results.json").exists():
        pytest.skip("reports/ising/sigma20_trace/regularisation has no results.json")
    (tmp_path / "sigma20_trace" / "regularisation").mkdir(parents=True)
    (tmp_path / "sigma20_trace" / "results.json").write_text((COMMITTED / "results.json").read_text())
    (tmp_path / "sigma20_trace" / "regularisation" / "results.json").write_text((committed / "results.json").read_text())
    _script(monkeypatch, "--run", str(tmp_path / "sigma20_trace"), "--report-only")
    assert (tmp_path / "sigma20_trace" / "regularisation" / "README.md").read_text() == (committed / "README.md").read_text()
