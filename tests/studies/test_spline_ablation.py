"""pfzoo.studies.spline_ablation on a tiny RBM: the rows' builds are the builder's, the per-knot diagnostics read the
same run as anneal_path, and the report renders (the measured rows live in reports/paths/spline_ablation.json)."""

import json

import torch
from factories import random_rbm

from pfzoo import paths
from pfzoo.estimators.path_ais import anneal_path
from pfzoo.paths import rbm_moments
from pfzoo.studies.spline_ablation import (
    SplineSetting, ablation_markdown, ablation_row, anneal_with_knots, build_spline, changed_fields, MomentCache, weighted_moments,
)

V, H = 8, 3
SMALL = dict(moment_chains=100, moment_burn_in=10, moment_sweeps=5, fit_chains=100, iterations=10)


def model_and_data():
    model = random_rbm(V, H, scale=1.0, seed=2, dtype=torch.float32)
    data = torch.bernoulli(torch.full((200, V), 0.3), generator=torch.Generator().manual_seed(0))
    return model, data


def test_a_row_with_the_default_moment_chains_builds_the_builders_spline():
    model, data = model_and_data()
    path, _, build = build_spline(model, SplineSetting("d", **SMALL), data, MomentCache())
    direct, _ = paths.build(model, kind="moment_averaged", base="uniform", num_chains=100, burn_in=10, moment_sweeps=5, iterations=10)
    assert torch.equal(path.weights, direct.weights) and torch.equal(path.hidden_biases, direct.hidden_biases)
    assert set(build) == {"moment_seconds", "fit_seconds"}


def test_knot_diagnostics_read_the_run_of_anneal_path():
    model, data = model_and_data()
    path, _, _ = build_spline(model, SplineSetting("d", **SMALL), data, MomentCache())
    run = anneal_with_knots(path, 60, 50, seed=1)
    plain = anneal_path(path, "linear", 60, 50, generator=torch.Generator().manual_seed(1))
    assert run["log_z"] == plain.log_z and abs(run["knots"][-1]["running_log_z"] - plain.log_z) < 1e-9
    assert [k["step_beta"] for k in run["knots"]] == [10 / 60, 20 / 60, 30 / 60, 40 / 60, 50 / 60, 1.0]
    assert sum(s["steps"] for s in run["segments"]) == 60


def test_equal_weights_give_the_plain_moments():
    model, _ = model_and_data()
    v = torch.bernoulli(torch.full((30, V), 0.5), generator=torch.Generator().manual_seed(3))
    for a, b in zip(weighted_moments(model, v, torch.zeros(30)), rbm_moments(model, v)):
        assert torch.allclose(a, b, atol=1e-6)


def test_rows_render_with_the_cause_named_from_the_moved_rows():
    model, data = model_and_data()
    cache, checks = MomentCache(), {"chains": 50, "burn_in": 5, "sweeps": 5, "reference_steps": 20, "reference_chains": 20}
    default = ablation_row(model, SplineSetting("default", **SMALL), data, cache, steps=[30], chains=20, checks=checks)
    other = ablation_row(model, SplineSetting("data", "moments from data", moment_start="data", **SMALL), data, cache, steps=[30, 60],
                         chains=20, checks={**checks, "from_data_too": False, "reference_steps": 0}, compare_geometric=True)
    assert changed_fields(other["setting"], default["setting"]) == ["moment_start"] and changed_fields(default["setting"], default["setting"]) == []
    assert {"reference", "noise_vs_data"} <= set(default["knot_checks"][0]) and "reference" not in other["knot_checks"][0]
    ablation = json.loads(json.dumps({"rows": [default, other], "chains": 20, "seed": 0, "reference": {}}))  # JSON-ready
    text = ablation_markdown(ablation)
    assert "## Why the spline falls short from a uniform base: ablation" in text and "### The cause" in text
    assert "| default |" in text and "| data | moments from data |" in text
    moved = json.loads(json.dumps(ablation))
    moved["rows"][1]["runs"][0]["log_z"] = moved["rows"][0]["runs"][0]["log_z"] + 10.0
    moved["rows"][1]["geometric_runs"] = None
    assert "Measured cause: where the target-moment chains start" in ablation_markdown(moved)
    moved["rows"][1]["runs"][0]["log_z"] -= 20.0
    text = ablation_markdown(moved)
    assert "No tested setting raised log Ẑ" in text and "data -10.00" in text
