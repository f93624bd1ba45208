"""pfzoo.studies.ga_ablation on tiny enumerable RBMs: every path and base lands on the exact log Z within its stderr, a
run that falls short is measured as short, RAISE's check reads the implied log-likelihoods right, the cause is the
variant with the largest significant move, and the report renders from JSON (the measured numbers live in
reports/paths/ga_ablation.json)."""

import json
from dataclasses import replace

import pytest
import torch
from factories import random_rbm

from pfzoo.studies.ga_ablation import SPLINE, cause, parameter_summary, path_runs, raise_check, shortfalls
from pfzoo.studies.ga_ablation_report import markdown

V, H = 8, 3
SMALL = replace(SPLINE, moment_chains=100, moment_burn_in=10, moment_sweeps=5, fit_chains=100, iterations=10)


def model_and_data():
    model = random_rbm(V, H, scale=1.0, seed=2, dtype=torch.float32)
    data = torch.bernoulli(torch.full((200, V), 0.3), generator=torch.Generator().manual_seed(0))
    return model, data


def test_every_path_and_base_lands_on_the_exact_log_z():
    model, data = model_and_data()
    exact = model.log_partition().item()
    rows = path_runs(model, data, [200], 300, spline=SMALL, name="tiny")
    assert {(r["path"], r["base"]) for r in rows} == {(p, b) for p in ("GA", "MAS") for b in ("uniform", "base_rate")}
    for r in rows:
        assert abs(r["log_z"] - exact) < 4 * r["stderr"] + 0.02, r
        assert r["mean_log_weight"] <= r["log_z"] + 1e-9  # Jensen: the mean log weight is below log of the mean weight
    assert all("build_seconds" in r for r in rows)


def test_a_run_that_falls_short_is_measured_short():
    # A strongly coupled RBM: one annealing step from uniform is plain importance sampling with few chains, far below log Z.
    model = random_rbm(24, 6, scale=3.0, seed=0, dtype=torch.float32)
    exact = model.log_partition().item()
    rows = path_runs(model, None, [1, 2000], 100, kinds=("GA",), bases=("uniform",))
    found = shortfalls(rows)
    assert found["reference"]["steps"] == 2000 and abs(found["reference"]["log_z"] - exact) < 4 * found["reference"]["stderr"] + 0.05
    short = found["runs"]["GA uniform 1"]
    assert short["shortfall"] > 3 * short["stderr"] and short["shortfall"] > 1.0
    assert found["runs"]["GA uniform 2000"]["shortfall"] == 0.0


def test_the_raise_check_reads_implied_log_likelihoods():
    model, data = model_and_data()
    test = data[:50]
    rows = [{"path": "GA", "base": "uniform", "steps": 10, "log_z": model.log_partition().item() - 2.0}]
    check = raise_check(model, data, test, rows, steps=200, chains=5, digits=10)
    exact = model.log_prob(test).mean().item()
    assert abs(check["implied_test_log_likelihood"]["GA uniform 10"] - (exact + 2.0)) < 1e-4
    r = check["raise_base_rate"]
    assert r["mean"] < exact + 4 * r["stderr"] + 0.1  # a stochastic lower bound (p_ann is close to the RBM at this K)


def _entry(shortfall, stderr=0.1):
    return {"shortfalls": {"runs": {"GA uniform 1000": {"shortfall": shortfall, "stderr": stderr}, "GA uniform 10": {"shortfall": 50.0, "stderr": 1.0}}}}


def test_the_cause_is_the_largest_significant_move():
    found = cause({"centre": _entry(0.2), "momentum 0.5": _entry(0.5), "visible biases 0": _entry(18.0), "no weight decay": _entry(6.0, stderr=3.0)})
    assert found["cause"] == "visible biases 0" and found["centre"]["steps"] == 1000
    assert not found["moves"]["momentum 0.5"]["significant"] and not found["moves"]["no weight decay"]["significant"]
    assert abs(found["moves"]["visible biases 0"]["move"] - 17.8) < 1e-9
    assert cause({"centre": _entry(0.2), "momentum 0.5": _entry(0.3)})["cause"] is None
    with pytest.raises(ValueError, match="centre"):
        cause({"momentum 0.5": _entry(0.3)})


def test_a_move_is_measured_from_the_variant_it_changes():
    entries = {"centre": _entry(0.2), "60 epochs": _entry(10.0), "60 epochs, visible biases 0": _entry(12.0)}
    found = cause(entries, relative_to={"60 epochs, visible biases 0": "60 epochs"})
    assert found["moves"]["60 epochs, visible biases 0"]["relative_to"] == "60 epochs"
    assert abs(found["moves"]["60 epochs, visible biases 0"]["move"] - 2.0) < 1e-9 and found["cause"] == "60 epochs"


def test_the_parameter_summary_reads_the_never_on_pixels():
    model, data = model_and_data()
    data[:, 0] = 0.0
    with torch.no_grad():
        model.visible_bias[0] = -7.0
        model.weight[0] = 0.25
    found = parameter_summary(model, data)
    assert found["never_on_pixels"] == 1 and found["visible_bias_never_on"] == -7.0 and abs(found["weight_never_on"] - 0.25) < 1e-7
    assert abs(found["visible_bias_others"] - model.visible_bias[1:].double().mean().item()) < 1e-9


def test_the_report_renders_from_json():
    model, data = model_and_data()
    rows = path_runs(model, data, [50], 50, spline=SMALL, name="tiny")
    stage = {"settings": {"kinds": ["GA", "MAS"], "steps": [50], "chains": 50}, "rows": rows, "shortfalls": shortfalls(rows),
             "measured_on": "2026-11-28, test"}
    check = raise_check(model, data, data[:20], rows, steps=20, chains=2, digits=5)
    results = json.loads(json.dumps({"variants": {
        "centre": {"changed": "none", "training": None, "screen": stage, "raise": check,
                   "full": {**stage, "rows": [r for r in rows if r["path"] == "GA"]}, "mas": {**stage, "rows": [r for r in rows if r["path"] == "MAS"]}},
        "momentum 0.5": {"changed": "momentum 0.5, not 0.9", "training": {"closing_test_log_likelihood": {"mean": -150.0}}, "screen": stage}}}))
    text = markdown(results)
    mas = next(r for r in rows if r["path"] == "MAS" and r["base"] == "uniform")
    assert f"{mas['log_z']:.2f} ± {mas['stderr']:.2f}" in text  # the mas stage's rows join the full stage's
    for needle in ("## Screen", "## Geometric path against the moment-averaged spline", "### RAISE", "## The cause", "momentum 0.5, not 0.9",
                   "-150.00", "2026-11-28, test"):
        assert needle in text, needle


def _row(path, base, steps, log_z, stderr=0.5, ess=50.0):
    return {"path": path, "base": base, "steps": steps, "log_z": log_z, "stderr": stderr, "ess": ess}


def test_the_full_length_section_reads_the_shortfall_at_every_k():
    def results(uniform_10k):
        rows = [_row("GA", "uniform", 1000, 270.0, ess=1.0), _row("GA", "uniform", 10000, uniform_10k, ess=1.0),
                _row("GA", "base_rate", 1000, 300.0), _row("GA", "base_rate", 10000, 300.0)]
        mas = [_row("MAS", "uniform", 10000, 299.5)]
        entry = {"changed": "visible biases start at 0", "training": None, "full": {"rows": rows}, "mas": {"rows": mas}}
        return {"variants": {"60 epochs, visible biases 0": entry}}

    text = markdown(results(285.0))
    assert "## At the zoo's full length: 60 epochs, visible biases 0" in text
    assert "K = 1,000: 270.00 ± 0.50 (ESS 1), 30.00 short; K = 10,000: 285.00 ± 0.50 (ESS 1), 15.00 short" in text
    assert "still rises with K" in text and "ESS near 1" in text and "0.50 ± 0.71 short: it closes the gap" in text
    assert "by 15.0 ± 0.7 nats at K = 10,000, 0.8 times the slides' figure: the slides' order of magnitude" in text
    assert "levels off with K" in markdown(results(270.5))
    assert "At the zoo's full length" not in markdown({"variants": {}})
