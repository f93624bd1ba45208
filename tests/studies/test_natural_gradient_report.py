"""scripts/reproduce_natural_gradient.py renders its README table and picture from results.json, and the committed
report holds the race it claims (natural gradient in fewer steps than plain, each at its best rate)."""

import json
from pathlib import Path
from script_modules import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "reproduce_natural_gradient.py"
REPORT = Path(__file__).resolve().parents[2] / "reports" / "natural_gradient"


def test_committed_report_shows_natural_gradient_winning_the_race():
    results = json.loads((REPORT / "results.json").read_text())
    figure, ica = results["figure_4_1"], results["ica"]
    assert figure["natural"]["best_steps"] < figure["steepest"]["best_steps"]
    assert max(ica["relative"]["best_steps"], ica["model_fisher"]["best_steps"]) < ica["gradient"]["best_steps"]
    assert max(results["fisher_z"].values()) < 5


def test_report_renders_from_results(tmp_path):
    script = load_script(SCRIPT)
    results = json.loads((REPORT / "results.json").read_text())
    script.plot(results, tmp_path / "paths.png")
    text = script.readme(results)
    assert (tmp_path / "paths.png").stat().st_size > 10_000
    steps = results["ica"]["gradient"]["best_steps"]
    assert f"| gradient | {results['ica']['gradient']['best_lr']} | {steps} |" in text
    assert text == (REPORT / "README.md").read_text()  # the committed README is this rendering
