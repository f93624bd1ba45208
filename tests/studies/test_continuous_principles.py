"""The continuous inductive-principles study: its cells, refusals as n/a, the estimators against exact answers, the
rendering, and one tiny real cell end to end through the script."""

import json
import math
import sys
from pathlib import Path

import torch
from factories import random_gbrbm, random_poe
from script_modules import load_script

from pfzoo.data import DataSplits
from pfzoo.models import MissingCapability
from pfzoo.studies import continuous_principles as study

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "reproduce_continuous_principles.py"


def _script():
    script = load_script(SCRIPT)
    return script


def test_every_model_and_principle_names_a_config_and_the_cells_are_unique():
    assert all((REPO / "conf" / "model" / f"{spec.config}.yaml").exists() for spec in study.MODELS)
    assert all((REPO / "conf" / "trainer" / f"{p.trainer}.yaml").exists() for p in study.PRINCIPLES)
    assert len({spec.name for spec in study.MODELS}) == len(study.MODELS) == 7
    assert len({study.slug(spec.name) for spec in study.MODELS}) == len(study.MODELS)
    assert {p.trainer for p in study.PRINCIPLES} == {"ml", "score_matching", "denoising_score_matching",
                                                       "sliced_score_matching", "nce", "mpf_adam", "cd"}
    assert all(dict(spec.natural_gradient)["metric"] in ("relative", "energy") for spec in study.MODELS)
    assert len(SCRIPT.read_text().splitlines()) <= 200


def _refusing(overrides, data):
    raise MissingCapability("CD needs a Gibbs chain; ICA is an energy over real vectors — use trainer=nce\nsecond line")


def _diverging(overrides, data):
    raise FloatingPointError("loss is nan")


def test_a_refusal_becomes_an_n_a_cell_with_its_one_line_reason_and_divergence_a_failed_one():
    data = DataSplits("d", torch.zeros(4, 2), torch.zeros(2, 2))
    cell, model = study.run_cell("ICA", "CD-1", True, _refusing, [["lr=1"], ["lr=2"]], data, data, lambda m: 0.0, lambda m: {})
    assert (cell.status, model) == ("n/a", None) and cell.reason.endswith("use trainer=nce")
    assert "| ICA | CD-1 | on | n/a | CD needs a Gibbs chain" in study.table([cell])[-1]
    cell, _ = study.run_cell("ICA", "NCE", False, _diverging, [["lr=1"], ["lr=2"]], data, data, lambda m: 0.0, lambda m: {})
    assert cell.status == "failed" and "non-finite at every setting tried (lr=1, lr=2)" in cell.reason
    cell, _ = study.run_cell("ICA", "NCE", False, _diverging, [["lr=1"]], data, data, lambda m: 0.0, lambda m: {})
    assert cell.status == "failed"


def test_the_search_picks_the_best_validation_score_and_the_cell_keeps_nce_c():
    data = DataSplits("d", torch.zeros(4, 2), torch.zeros(2, 2))
    scores = {"a": -3.0, "b": -1.0, "c": math.nan}

    def train(overrides, split):
        return overrides[0], 2.0, {"nce_c": -7.5, "epoch": 3}

    cell, model = study.run_cell("ICA", "NCE", False, train, [["a"], ["b"], ["c"]], data, data, lambda m: scores[m],
                                 lambda m: {"test_log_likelihood": -1.5, "stderr": 0.0, "estimate": "exact"})
    assert model == "b" and cell.overrides == ["b"] and cell.nce_c == -7.5 and cell.epochs == 3 and cell.train_seconds == 2.0
    assert [r["validation_log_likelihood"] for r in cell.search] == [-3.0, -1.0, -math.inf]


def test_complete_models_are_exact_and_the_others_get_hais_or_a_bracket():
    evaluation = study.Evaluation(chains=4, steps=10)
    assert study.estimator_for(random_poe(3, expert="student_t"), evaluation)[1] == "exact"
    assert study.estimator_for(random_poe(3, 6, expert="student_t"), evaluation)[1] == "HAIS"
    assert study.estimator_for(random_gbrbm(3, 40), evaluation)[1] == "AIS/RAISE bracket"


def test_hais_and_the_bracket_agree_with_exact_answers(monkeypatch):
    # force the sampling estimators onto small models whose log Z is exact: within 0.15 nats (a few standard errors)
    data = torch.randn(40, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    poe, rbm = random_poe(2, expert="student_t", seed=1), random_gbrbm(2, 3, seed=2)
    with torch.no_grad():
        truths = {id(poe): float(poe.log_prob(data).mean()), id(rbm): float(rbm.log_prob(data).mean())}
    monkeypatch.setattr(study.Exact, "missing", lambda self, model: "forced off for the test")
    evaluation = study.Evaluation(num_test=40, chains=50, steps=300, step_size=0.2, raise_chains=10, raise_steps=300, bracket_num_test=40)
    hais = study.evaluate(poe, data, data, evaluation, seed=0)
    bracket = study.evaluate(rbm, data, data, evaluation, seed=0)
    assert hais["estimate"] == "HAIS" and abs(hais["test_log_likelihood"] - truths[id(poe)]) < 0.15
    assert bracket["estimate"] == "AIS/RAISE bracket"
    assert abs(bracket["test_log_likelihood"] - truths[id(rbm)]) < 0.15 and abs(bracket["lower"] - truths[id(rbm)]) < 0.15
    assert hais["chains"] == 50 and hais["num_test"] == 40 and hais["log_z"] is not None


def test_filters_become_pixel_pictures_on_their_own_contrast():
    class Transform:
        scales = torch.tensor([2.0, 1.0])
        components = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0]])

    panel = study.filter_panel(random_poe(2, seed=3), Transform())
    assert panel.shape == (2, 4) and panel.min(1).values.eq(0).all() and panel.max(1).values.eq(1).all()
    assert torch.allclose(panel[:, 1], panel[:, 2])  # the second component spreads equally on pixels 1 and 2


def _payload(cells):
    return {"cells": [c.row() for c in cells], "train": [100, 36], "test": [50, 36], "epochs": 5, "batch_size": 500,
            "learning_rates": [0.003], "evaluation": study.Evaluation().__dict__, "machine": "a machine", "threads": 1,
            "load_average": [1.0, 1.0, 1.0], "date": "2000-01-01", "seconds": 60.0, "quick": False}


def test_the_report_renders_every_cell_from_results(tmp_path):
    ok = study.Cell("POE Student-t, 2× overcomplete", "NCE", False, "ok", overrides=["trainer.optimizer.lr=0.003"],
                    test_log_likelihood=-30.5, stderr=0.2, estimate="HAIS", num_test=1000, chains=100, steps=5000, log_z=12.25,
                    log_z_stderr=0.1, ess=40.0, nce_c=-12.0, epochs=20, train_seconds=10.0, evaluation_seconds=5.0)
    na = study.Cell("ICA", "CD-1", True, "n/a", reason="CD needs a Gibbs chain")
    text = study.readme(_payload([ok, na]))
    assert "| POE Student-t, 2× overcomplete | NCE | off | -30.50 ± 0.20 | HAIS, 100 chains × 5000 steps, ESS 40.0, N = 1000 | -12.25 | -12.00 | 20 | 10.0 | 5.0 |" in text
    assert "| ICA | CD-1 | on | n/a | CD needs a Gibbs chain |" in text and "Smoke run" not in text
    (tmp_path / "results.json").write_text(json.dumps(_payload([ok, na])))
    monkey_argv = ["reproduce_continuous_principles.py", "--render", str(tmp_path / "results.json")]
    argv, sys.argv = sys.argv, monkey_argv
    try:
        _script().main()
    finally:
        sys.argv = argv
    assert (tmp_path / "README.md").read_text() == text


def test_one_tiny_real_cell_runs_end_to_end_through_the_script(tmp_path, monkeypatch):
    script = _script()
    monkeypatch.setattr(script, "REPO", tmp_path)  # runs/ under tmp_path
    monkeypatch.setattr(sys, "argv", ["x", "--quick", "--models", "ica", "--principles", "ml", "cd", "--out", str(tmp_path / "out")])
    script.main()
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    cells = {(c["principle"], c["natural_gradient"]): c for c in results["cells"]}
    assert set(cells) == {("exact ML", False), ("exact ML", True), ("CD-1", False), ("CD-1", True)}
    for natural in (False, True):
        ml = cells[("exact ML", natural)]
        assert ml["status"] == "ok" and ml["estimate"] == "exact" and -80 < ml["test_log_likelihood"] < -30
        assert cells[("CD-1", natural)]["status"] == "n/a" and "use trainer=" in cells[("CD-1", natural)]["reason"]
    assert (tmp_path / "out" / "filters_ica.png").stat().st_size > 1000
    assert "| ICA | exact ML | on |" in (tmp_path / "out" / "README.md").read_text()


def test_the_committed_report_is_the_rendering_of_its_results_and_holds_every_cell():
    report = REPO / "reports" / "principles" / "continuous"
    payload = json.loads((report / "results.json").read_text())
    assert (report / "README.md").read_text() == study.readme(payload)
    cells = {(c["model"], c["principle"], c["natural_gradient"]): c for c in payload["cells"]}
    assert len(cells) == len(study.MODELS) * len(study.PRINCIPLES) * 2 and not payload["quick"]
    assert all(c["status"] in ("ok", "n/a") for c in cells.values())
    assert cells[("ICA", "exact ML", True)]["estimate"] == "exact" and cells[("mcRBM", "NCE", False)]["nce_c"] is not None
    assert all((report / f"filters_{study.slug(spec.name)}.png").exists() for spec in study.MODELS)
