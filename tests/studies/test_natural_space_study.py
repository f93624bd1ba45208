"""The natural-parameter-space study (pfzoo/studies/natural_space.py): its Fig. 4.1 counts follow the thesis's argument,
its autoencoder race runs and scores each method, and the committed report holds what its text claims."""

import json
from pathlib import Path

from pfzoo.studies.natural_space import autoencoder_race, figure_4_1_lbfgs, report_lines

REPORT = Path(__file__).resolve().parents[2] / "reports" / "natural_gradient"


def test_figure_4_1_counts_follow_the_whitening_argument():
    results = figure_4_1_lbfgs(start=(-2.0, 10.0), max_iter=50)["methods"]
    assert results["φ, steepest descent, lr 1"]["precise"]["iterations"] == 1
    assert results["φ, L-BFGS (strong Wolfe)"]["precise"]["iterations"] == 2
    assert results["θ, L-BFGS (strong Wolfe)"]["precise"]["iterations"] > 5
    assert results["φ, L-BFGS (strong Wolfe)"]["final_kl"] < 1e-24


def test_autoencoder_race_scores_every_method():
    race = autoencoder_race(max_steps=3, checkpoints=(1, 3))
    assert race["parameters"] == 16 * 4 + 4 + 4 * 16 + 16
    for name, run in race["methods"].items():
        assert len(run["losses"]) == 4 and run["losses"][3] is not None, name
        assert run["losses"][3] < run["losses"][0], name  # every method descends from the same start
    assert min(run["steps_to_1_percent"] or 99 for run in race["methods"].values()) <= 3


def test_committed_report_holds_its_claims():
    results = json.loads((REPORT / "results.json").read_text())["natural_space"]
    for start in ("thesis_start", "report_start"):
        methods = results["figure_4_1"][start]["methods"]
        assert methods["φ, L-BFGS (strong Wolfe)"]["precise"]["iterations"] < methods["θ, L-BFGS (strong Wolfe)"]["precise"]["iterations"]
    ica = results["ica"]["methods"]
    assert ica["φ, data_fisher, G fixed at θ₀"]["steps"] < ica["θ"]["steps"]
    assert results["eq_4_41_z"]["correct"] < 5 < 10 < results["eq_4_41_z"]["doubled"]
    text = (REPORT / "README.md").read_text()
    assert "\n".join(report_lines(results)) in text
