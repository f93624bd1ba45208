"""raise_table: the stored RAISE table re-renders from its results alone, and the cells and labels say what was measured."""

import json
from pathlib import Path

import pytest

from pfzoo import zoo
from pfzoo.models import RBM
from pfzoo.studies.raise_table import (
    MODELS, card_fields, cell, describe_schedule, label, render_table, sweep_key, sweep_model, zoo_folder,
)
from pfzoo.studies.training_time import duration, training_fact, training_record

RESULTS = Path(__file__).resolve().parents[2] / "estimators" / "raise"


def test_the_stored_table_re_renders_from_its_results_json():
    results = json.loads((RESULTS / "results.json").read_text())
    assert render_table(results) == (RESULTS / "table.md").read_text()


def test_a_uniform_sweep_is_stored_beside_the_base_rate_one_and_says_so():
    assert sweep_key("cd1-500", "base_rate") == "cd1-500" and sweep_model("cd1-500") == ("cd1-500", "base_rate")
    assert sweep_key("cd1-500", "uniform") == "cd1-500@uniform" and sweep_model("cd1-500@uniform") == ("cd1-500", "uniform")
    results = json.loads((RESULTS / "results.json").read_text())
    sweep = next(iter(results["sweeps"].values()))
    results["sweeps"] = {"pcd-20": sweep, "pcd-20@uniform": sweep}
    table = render_table(results)
    assert "## PCD(20): AIS and RAISE against K (base-rate initialisation)" in table and "(figures/pcd-20-against-K.png)" in table
    assert "## PCD(20): AIS and RAISE against K (uniform initialisation)" in table and "(figures/pcd-20@uniform-against-K.png)" in table


def test_the_tables_wall_times_name_the_machines_their_rows_were_measured_on_not_the_last_runs():
    from pfzoo.studies.raise_table import measured_where
    results = {"machine": "machine C", "gpu": None, "models": {"a": {"trained_on": "2026-01-03, machine B"}, "b": {"trained_on": "2026-01-01, machine A"},
                                                               "c": {"trained_on": "2026-01-02, machine B"}, "d": {}}}
    assert measured_where(results) == "machine A (measured 2026-01-01); machine B (measured 2026-01-02, 2026-01-03)"
    assert measured_where({"machine": "machine C", "gpu": None, "models": {"d": {}}}) == "machine C"


def test_a_label_names_the_sizes_the_model_was_measured_with():
    results = {"models": {"cd1-500": {"config": {"num_hidden": 10}}, "dbm-500-1000": {"config": {"layer_sizes": [784, 10, 10]}}}}
    assert label("cd1-500", results) == "CD1(10)" and label("dbm-500-1000", results) == "DBM (10–10)"
    assert label("pcd-20", results) == "PCD(20)"  # not measured: the recipe's own label


def test_a_deeper_models_label_and_zoo_folder_name_all_its_layers(monkeypatch):
    monkeypatch.setitem(MODELS, "dbm-500-500-1000", ("DBM (500–500–1000)", "zoo_dbm_500_500_1000_from_rbm_sampled"))
    assert label("dbm-500-500-1000", {"models": {"dbm-500-500-1000": {"config": {"layer_sizes": [784, 10, 11, 12]}}}}) == "DBM (10–11–12)"
    assert zoo_folder("dbm-500-500-1000", Path("zoo")) == Path("zoo/dbm-binarized_mnist-500-500-1000")
    assert zoo_folder("dbm-500-1000", Path("zoo")) == Path("zoo/dbm-binarized_mnist")  # the app's pretrained lookup finds it
    assert zoo_folder("dbn-500-2000", Path("zoo")) == Path("zoo/dbn-binarized_mnist")
    assert zoo_folder("cd1-20", Path("zoo")) == Path("zoo/rbm-binarized_mnist-cd1-20")


def test_a_cell_shows_the_error_bar_other_chain_counts_and_impossible_values():
    settings = {"ais_chains": 100}
    assert cell({"mean": -150.123, "stderr": 0.456}, settings, "ais_uniform") == "-150.12 ± 0.46"
    assert cell({"mean": -150.0, "stderr": 0.0}, settings, "exact") == "-150.00"
    assert cell({"mean": -85.0, "stderr": 1.0, "chains": 1000}, settings, "ais_base_rate") == "-85.00 ± 1.00 (1,000 chains)"
    assert cell({"mean": 3.0, "stderr": 1.0}, settings, "ais_uniform").endswith(" ‡")
    assert cell({"mean": -85.0, "stderr": 1.0, "warnings": ["ESS 3.0 of 100 chains: ..."]}, settings, "ais_uniform") == "-85.00 ± 1.00 ⚠"
    assert cell({"mean": -85.0, "stderr": 1.0, "warnings": []}, settings, "ais_uniform") == "-85.00 ± 1.00"


def test_the_table_lists_each_warned_cells_lines_under_it():
    results = json.loads((RESULTS / "results.json").read_text())
    for entry in results["models"].values():  # every cell silent, then one warned
        for estimate in entry.get("estimates", {}).values():
            estimate["warnings"] = []
    assert "⚠ The estimator warned" not in render_table(results)
    warned = results["models"]["dbm-500-1000"]["estimates"]["ais_uniform"]
    warned["warnings"] = ["log weights are heavy-tailed (Pareto k̂ = 0.91 > 0.7): ..."]
    text = render_table(results)
    assert f"{warned['mean']:.2f} ± {warned['stderr']:.2f} ⚠" in text
    assert "- DBM (500–1000), AIS uniform: log weights are heavy-tailed (Pareto k̂ = 0.91 > 0.7): ..." in text


def test_schedules_and_durations_read_as_in_the_table():
    assert describe_schedule("linear") == "linear" and describe_schedule("power:5") == "β = 1 − (1 − k/K)^5"
    assert duration(42.0) == "42.0 s" and duration(750.0) == "12.5 min" and duration(11520.0) == "3.20 h"


def test_a_runs_training_time_is_the_sum_of_its_epochs_times(tmp_path):
    lines = [{"epoch": 1, "seconds": 10.0, "evaluation_seconds": 2.0}, {"epoch": 2, "seconds": 11.5}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert training_record(tmp_path, "a machine") == {"epochs": 2, "seconds": 23.5, "machine": "a machine"}
    assert training_record(tmp_path / "elsewhere", "a machine") is None


def test_a_greedy_runs_training_time_sums_its_layers_and_names_the_layers_it_took_trained(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"layer": 0, "pretrained": "rbm-binarized_mnist-cd25-500"}) + "\n"
                                            + json.dumps({"layer": 1, "epoch": 3, "seconds": 1.0}) + "\n")  # the final epoch, again
    for layer, epochs in ((1, [4.0, 5.0, 6.0]), (2, [1.5])):
        (tmp_path / f"layer{layer}").mkdir()
        (tmp_path / f"layer{layer}" / "metrics.jsonl").write_text("".join(json.dumps({"epoch": e + 1, "seconds": s}) + "\n" for e, s in enumerate(epochs)))
    record = training_record(tmp_path, "a machine")
    assert record == {"epochs": 3, "seconds": 16.5, "machine": "a machine", "pretrained": ["rbm-binarized_mnist-cd25-500"]}
    assert training_fact(record) == ("3 epochs, 16.5 s (sum of the epochs' times in metrics.jsonl) on a machine; the bottom layer is "
                                     "`rbm-binarized_mnist-cd25-500`, trained by its own recipe (its card gives its time)")


def test_a_dbm_started_from_a_trained_rbm_names_it_beside_its_training_time(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"epoch": 1, "seconds": 4.0}) + "\n")
    config = {"trainer": {"objective": {"pretrain": {"_target_": "pfzoo.training.start_dbm_from_rbm", "rbm": "rbm-binarized_mnist-cd25-500"}}}}
    assert training_record(tmp_path, "m", config)["pretrained"] == ["rbm-binarized_mnist-cd25-500"]
    greedy = {"trainer": {"objective": {"pretrain": {"_target_": "pfzoo.training.pretrain_dbm", "rbm": None}}}}
    assert "pretrained" not in training_record(tmp_path, "m", greedy) and "pretrained" not in training_record(tmp_path, "m", {"trainer": {}})


@pytest.mark.parametrize("name, headline", [("cd1-20", "exact"), ("cd25-500", "conservative")])
def test_card_fields_hold_every_stored_estimate_with_the_exact_or_the_conservative_headline(name, headline, tmp_path):
    results = json.loads((RESULTS / "results.json").read_text())
    results["models"][name]["training"] = {"epochs": 3, "seconds": 7.0, "machine": "m"}
    num_hidden = results["models"][name]["config"]["num_hidden"]
    config = {"dataset": {"_target_": "pfzoo.data.binarized_mnist", "root": "/somewhere/data"}, "run_dir": "/somewhere/run"}
    fields = card_fields(name, results, RBM(784, num_hidden), config, git_commit="abc", kept=[{"metric": "test accuracy", "value": 0.9}])
    if headline == "exact":
        assert fields["log_likelihood"]["label"] == "exact"
    sweeps = [sweep for key, sweep in results["sweeps"].items() if sweep_model(key)[0] == name]
    last = [max(sweep["rows"], key=lambda row: row["steps"]) for sweep in sweeps]  # each sweep's largest K: its card rows
    if headline == "exact":
        assert fields["log_likelihood"]["label"] == "exact"
    else:  # the lower of the lowest AIS and the highest RAISE at the largest K: the sweeps' K = 10⁵
        assert {row["steps"] for row in last} == {100_000}
        expected = min(min(row["ais"] for row in last), max(row["raise"] for row in last))
        rule = fields["log_likelihood"]["headline_rule"]
        assert fields["log_likelihood"]["value"] == expected and "lower of AIS's lowest start" in rule and "at K = 100,000" in rule
        assert "300 chains" in rule and "measured 2026-" in rule
    stored = [row["mean"] for row in results["models"][name]["estimates"].values()] + [row[key] for row in last for key in ("ais", "raise")]
    assert sorted(row["value"] for row in [fields["log_likelihood"], *fields["measurements"][:-1]]) == sorted(stored)
    assert fields["measurements"][-1] == {"metric": "test accuracy", "value": 0.9}
    assert fields["dataset_config"]["root"] is None and "/somewhere" not in json.dumps(fields)
    assert fields["training_seconds"] == 7.0 and fields["recipe"]["experiment"] == MODELS[name][1]
    zoo.save(RBM(784, num_hidden), tmp_path / "checkpoint.pt")
    zoo.write_card(tmp_path, fields, readme=False)  # a valid card.json
    assert json.loads((tmp_path / "card.json").read_text())["name"] == fields["name"]



def test_the_conservative_headline_takes_the_largest_k_with_both_estimators_and_refuses_without():
    from pfzoo.studies.raise_table import conservative_headline

    def row(estimator, base, steps, value):
        return {"estimator": estimator, "label": f"{estimator} {base}, K = {steps:,}", "value": value, "settings": {"num_steps": steps}}

    rows = [row("ais", "uniform", 1000, -80.0), row("raise", "uniform", 1000, -90.0), row("ais", "uniform", 10000, -85.0),
            row("ais", "base rate", 10000, -84.0), row("raise", "uniform", 10000, -86.0), row("raise", "base rate", 10000, -88.0),
            row("ais", "base rate", 100000, -84.5)]  # K = 10⁵ has no RAISE: not a candidate
    chosen = conservative_headline(rows)
    assert chosen["label"] == "raise uniform, K = 10,000" and "at K = 10,000" in chosen["headline_rule"]
    rows[4]["value"] = -84.9  # RAISE now above the lowest AIS: AIS's lowest start is the headline
    assert conservative_headline(rows)["label"] == "ais uniform, K = 10,000"
    with pytest.raises(ValueError, match="no K with both AIS and RAISE"):
        conservative_headline([row("ais", "uniform", 1000, -80.0)])


def test_a_card_heads_with_the_conservative_k_1e5_figure_of_both_sweeps_and_shows_both():
    from pfzoo.studies.raise_table import SETTINGS, model_card

    def point(ais, log_z, raise_):
        return {"steps": 100_000, "ais": ais, "ais_stderr": 0.1, "ais_log_z": log_z, "ais_ess": 50.0, "raise": raise_, "raise_stderr": 0.2,
                "seconds": 60.0, "warnings": ["AIS: a", "RAISE: b"]}

    def sweep(sha, ais, log_z, raise_, **extra):
        settings = {**SETTINGS, "sweep_ais_chains": 300, "sweep_raise_examples": 20}
        return {"settings": settings, "rows": [{**point(ais + 3, log_z - 3, raise_ - 5), "steps": 1000}, point(ais, log_z, raise_)],
                "measured_on": "2026-01-02, machine B", "checkpoint_sha256": sha, **extra}

    estimate = {"mean": -90.0, "stderr": 0.1, "log_z": 500.0}  # K = 10⁴: the table's K, no longer the headline's
    results = {"settings": SETTINGS, "models": {"pcd-500": {
        "checkpoint_sha256": "aa", "config": {"num_hidden": 20}, "trained_on": "2026-01-01, machine A",
        "estimates": {key: estimate for key in ("raise_uniform", "raise_base_rate", "ais_uniform", "ais_base_rate")}}},
        "sweeps": {"pcd-500": sweep("aa", -94.5, 516.5, -95.0), "pcd-500@uniform": sweep("aa", -95.5, 517.5, -95.2)}}
    fields = card_fields("pcd-500", results, RBM(784, 20), None, git_commit=None)
    head = fields["log_likelihood"]  # AIS from the start with the higher log Ẑ (uniform) is below RAISE's highest (base rates)
    assert head["label"] == "ais uniform, K = 100,000, 300 chains" and head["value"] == -95.5 and head["log_z"] == 517.5
    assert head["settings"] == {"num_chains": 300, "num_steps": 100_000, "base": "uniform", "posterior_samples": 100}
    assert head["warnings"] == ["AIS: a"] and head["measured_on"] == "2026-01-02, machine B"
    assert head["headline_rule"] == ("the lower of AIS's lowest start (ais uniform, K = 100,000, 300 chains: -95.50, log Ẑ 517.50) and RAISE's "
                                     "highest (raise base rate, K = 100,000, 10 chains × 20 digits: -95.00) at K = 100,000, measured 2026-01-02, machine B")
    assert {row["label"] for row in fields["measurements"]} >= {"ais base rate, K = 100,000, 300 chains", "raise uniform, K = 100,000, 10 chains × 20 digits"}
    assert all(row["measured_on"] == "2026-01-01, machine A" for row in fields["measurements"] if "K = 10,000" in row["label"])
    card = model_card("pcd-500", results, RBM(784, 20), "models/rbm-binarized_mnist-pcd-500").render()
    assert "**-95.50 ± 0.10**, the lower of AIS's lowest start (ais uniform, K = 100,000, 300 chains" in card
    assert "## AIS and RAISE against K (base rates)" in card and "## AIS and RAISE against K (uniform start)" in card
    assert "| 100,000 | -95.50 ± 0.10 | -95.20 ± 0.20 | -0.30 |" in card and "Measured 2026-01-02, machine B, 2.0 min in all." in card
    results["sweeps"]["pcd-500@uniform"] = sweep("bb", -95.5, 517.5, -95.2)  # another checkpoint's sweep: not this card's
    results["sweeps"]["pcd-500"] = sweep("aa", -94.5, 516.5, -95.0, older_checkpoint="an older file")
    fields = card_fields("pcd-500", results, RBM(784, 20), None, git_commit=None)
    assert fields["log_likelihood"]["headline_rule"].endswith("at K = 10,000, measured 2026-01-01, machine A")
    assert not any("K = 100,000" in row["label"] for row in fields["measurements"])
    assert "against K" not in model_card("pcd-500", results, RBM(784, 20), "models/x").render()
    results["sweeps"]["pcd-500"] = sweep("aa", -94.5, 516.5, -95.0)  # one start at K = 10⁵: the rule says so
    rule = card_fields("pcd-500", results, RBM(784, 20), None, git_commit=None)["log_likelihood"]["headline_rule"]
    assert rule.endswith("at K = 100,000 (AIS from one start only at this K: base rate), measured 2026-01-02, machine B")


def test_a_wide_bracket_at_the_tables_k_warns_unless_the_longer_sweep_closes_it():
    from pfzoo.studies.raise_table import SETTINGS, model_card

    def results_with(sweep_rows):
        estimates = {"raise_uniform": {"mean": -86.0, "stderr": 0.2}, "raise_base_rate": {"mean": -86.5, "stderr": 0.3},
                     "ais_uniform": {"mean": -85.4, "stderr": 0.1}, "ais_base_rate": {"mean": -85.1, "stderr": 0.1}}  # K = 10⁴: 1.4 apart
        sweeps = {"pcd-500": {"settings": {**SETTINGS, "sweep_ais_chains": 1000, "sweep_raise_examples": 20}, "measured_on": "2026-01-02, machine B",
                              "checkpoint_sha256": "aa", "rows": sweep_rows}} if sweep_rows else {}
        return {"settings": SETTINGS, "sweeps": sweeps, "models": {"pcd-500": {"checkpoint_sha256": "aa", "config": {"num_hidden": 20}, "estimates": estimates,
                                                                         "trained_on": "2026-01-01, machine A"}}}

    def row(steps, ais, raise_):
        return {"steps": steps, "ais": ais, "ais_stderr": 0.02, "ais_log_z": 500.0, "ais_ess": 700.0, "raise": raise_, "raise_stderr": 0.4,
                "seconds": 60.0, "warnings": []}

    warning = "**Warning: with base-rate initialisation AIS is 1.4 nats above RAISE at K = 10,000"
    assert warning in model_card("pcd-500", results_with(None), RBM(784, 20), "models/x").render()
    closed = model_card("pcd-500", results_with([row(10_000, -85.2, -86.6), row(100_000, -85.19, -85.17)]), RBM(784, 20), "models/x").render()
    assert warning not in closed
    assert "AIS is 1.4 nats above RAISE at K = 10,000; at K = 100,000 the two are -0.02 apart (the sweep below), where the headline is measured." in closed
    still_open = model_card("pcd-500", results_with([row(100_000, -85.0, -86.5)]), RBM(784, 20), "models/x").render()
    assert warning in still_open
