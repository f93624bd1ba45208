"""raise_table: the stored RAISE table re-renders from its results alone, and the cells and labels say what was measured."""

import json
from pathlib import Path

from pfzoo.studies.raise_table import cell, describe_schedule, duration, label, render_table

RESULTS = Path(__file__).resolve().parents[2] / "estimators" / "raise"


def test_the_stored_table_re_renders_from_its_results_json():
    results = json.loads((RESULTS / "results.json").read_text())
    assert render_table(results) == (RESULTS / "table.md").read_text()


def test_a_label_names_the_sizes_the_model_was_measured_with():
    results = {"models": {"cd1-500": {"config": {"num_hidden": 10}}, "dbm-500-1000": {"config": {"layer_sizes": [784, 10, 10]}}}}
    assert label("cd1-500", results) == "CD1(10)" and label("dbm-500-1000", results) == "DBM (10–10)"
    assert label("pcd-20", results) == "PCD(20)"  # not measured: the recipe's own label


def test_a_cell_shows_the_error_bar_other_chain_counts_and_impossible_values():
    settings = {"ais_chains": 100}
    assert cell({"mean": -150.123, "stderr": 0.456}, settings, "ais_uniform") == "-150.12 ± 0.46"
    assert cell({"mean": -150.0, "stderr": 0.0}, settings, "exact") == "-150.00"
    assert cell({"mean": -85.0, "stderr": 1.0, "chains": 1000}, settings, "ais_base_rate") == "-85.00 ± 1.00 (1,000 chains)"
    assert cell({"mean": 3.0, "stderr": 1.0}, settings, "ais_uniform").endswith(" ‡")


def test_schedules_and_durations_read_as_in_the_table():
    assert describe_schedule("linear") == "linear" and describe_schedule("power:5") == "β = 1 − (1 − k/K)^5"
    assert duration(42.0) == "42.0 s" and duration(750.0) == "12.5 min" and duration(11520.0) == "3.20 h"
