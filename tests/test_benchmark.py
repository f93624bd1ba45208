"""scripts/benchmark.py runs every case at its --quick sizes and writes the JSON its readers expect.

Timings are never asserted (DESIGN: timing is measured in the benchmark, not in unit tests); this only keeps the
script from breaking silently, since its full run needs a GPU and minutes.
"""

import json
import math
from pathlib import Path

import torch
from script_modules import load_script

from pfzoo.data.binarized_mnist import find_files
from pfzoo.data.root import resolve_data_root

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "benchmark.py"
MNIST_FOUND = find_files(resolve_data_root()) is not None
POSITIVE = ("seconds", "_per_second", "fraction_of_matmul_bound", "matmul_gflops")  # key endings that hold rates and times


def numbers(tree, path=""):
    """(dotted key, value) for every int or float in a JSON tree (bools excluded)."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from numbers(value, f"{path}.{key}" if path else key)
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            yield from numbers(value, f"{path}[{index}]")
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        yield path, tree


def test_every_case_runs_at_quick_sizes_and_reports_finite_positive_rates(tmp_path):
    benchmark = load_script(SCRIPT)
    output = tmp_path / "benchmark.json"
    benchmark.main(["--quick", "--device", "cpu", "--output", str(output)])
    results = json.loads(output.read_text())

    machine = results["machine"]
    assert machine["device"] == "cpu" and machine["device_name"] and machine["sizes"] == "quick"
    assert machine["torch"] == torch.__version__ and machine["threads"] >= 1
    assert [case["name"] for case in results["benchmarks"]] == list(benchmark.BENCHMARKS)
    assert set(benchmark.QUICK_SIZES) == set(benchmark.BENCHMARKS)  # no case runs at full size in the test
    assert set(benchmark.CPU_SIZES) <= set(benchmark.BENCHMARKS)

    for case in results["benchmarks"]:
        if "skipped" in case:  # only a case that needs the data, and only when the data root lacks it
            assert case["name"] == "rbm_ais_mnist20" and not MNIST_FOUND, case
            continue
        values = dict(numbers(case))
        assert all(math.isfinite(value) for value in values.values()), case["name"]
        rates = {key: value for key, value in values.items() if key.split(".")[-1].endswith(POSITIVE) and not key.startswith("shape")}
        assert rates, f"{case['name']} reports no time or rate"
        assert all(value > 0 for value in rates.values()), (case["name"], rates)

    cases = {case["name"]: case for case in results["benchmarks"]}
    assert [run["num_chains"] for run in cases["rbm_ais"]["runs"]] == cases["rbm_ais"]["shape"]["num_chains"] == [10, 100]
    assert all(run["fraction_of_matmul_bound"] > 0 for run in cases["rbm_ais"]["runs"])
    assert cases["dbm_ais"]["chain_steps_per_second"] > 0 and cases["dbm_ais"]["shape"]["layer_sizes"] == [784, 500, 1000]
    assert cases["poe_hais"]["particle_steps_per_second"] > 0
    assert cases["rbm_raise"]["examples_per_second"] > 0
    assert cases["rbm_pcd"]["steps_per_second"] > 0 and cases["rbm_pcd"]["examples_per_second"] > 0
    if MNIST_FOUND:
        mnist20 = cases["rbm_ais_mnist20"]["models"]["rbm-binarized_mnist-pcd-20"]
        assert mnist20["exact_log_z"] > 0 and set(mnist20) >= {"pfzoo_defaults", "pfzoo_linear", "rbms"}
    assert cases["distributed_ais"]["identical_estimates"] and cases["distributed_ais"]["two_ranks"]["world_size"] == 2
