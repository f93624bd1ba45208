"""hais_comparison: the stored HAIS report re-renders from its results alone, and convergence is read off the runs."""

import json
from pathlib import Path

import pytest

from pfzoo.studies.hais_comparison import CONVERGED_NATS, converged_from, readme

RESULTS = Path(__file__).resolve().parents[2] / "estimators" / "hais"


@pytest.mark.parametrize("folder", [RESULTS, RESULTS / "vanhateren"])
def test_the_stored_readme_re_renders_from_its_results_json(folder):
    payload = json.loads((folder / "results.json").read_text())
    meta = {**payload["meta"], "plot": (folder / "loglik_vs_steps.png").is_file()}  # what --rerender sets
    assert readme(meta, payload["models"], payload["runs"]) == (folder / "README.md").read_text()


def test_converged_from_is_the_first_n_after_which_every_run_is_close_and_within_three_stderr():
    def run(n, error, stderr=0.01):
        return {"num_steps": n, "error": error, "stderr": stderr}

    assert converged_from([run(100, 1.0), run(1000, 0.02), run(10_000, 0.01)]) == 1000
    assert converged_from([run(100, 0.02), run(1000, 2 * CONVERGED_NATS), run(10_000, 0.01)]) == 10_000  # a later miss restarts
    assert converged_from([run(100, 0.05, stderr=0.001)]) is None  # close, but 50 stderr off
    assert converged_from([run(1000, 1.0)]) is None
