"""The AIS estimator card: exact sampling of the reference RBMs, the measured rows, and the card rendered from its json."""

import math

import pytest
import torch

from pfzoo.studies.ais_card import (
    BASES, SCHEDULES, UNDER_REPORT, exact_visible_samples, random_problem, random_rbm, render_card, row_summary, run_row,
)

CHI2_999 = {7: 24.32, 15: 37.70}  # χ² quantiles at 0.999: a correct sampler fails with probability 1e-3 at this seed


def exact_visible_probabilities(model):
    states = ((torch.arange(1 << model.num_visible)[:, None] >> torch.arange(model.num_visible)) & 1).double()
    log_p = -model.double().free_energy(states)
    return states, torch.softmax(log_p, 0)


@pytest.mark.parametrize("num_visible, num_hidden", [(3, 2), (4, 6)])  # enumerates the hidden, then the visible layer
def test_exact_visible_samples_follow_the_enumerated_marginal(num_visible, num_hidden):
    model = random_rbm(num_visible, num_hidden, 1.0, seed=4)
    samples = exact_visible_samples(model, 20000, generator=torch.Generator().manual_seed(0))
    assert samples.shape == (20000, num_visible) and samples.dtype == torch.float32
    states, probabilities = exact_visible_probabilities(model)
    index = (samples.long() * (1 << torch.arange(num_visible))).sum(1)
    counts = torch.bincount(index, minlength=1 << num_visible).double()
    expected = 20000 * probabilities
    chi2 = ((counts - expected) ** 2 / expected).sum().item()
    assert chi2 < CHI2_999[(1 << num_visible) - 1]


def test_random_problem_has_exact_samples_as_base_data_and_its_exact_log_z():
    problem = random_problem(10, 4, 0.5, 1, repeats=3)
    assert problem.name == "rbm-10x4-w0.5" and problem.repeats == 3
    assert problem.base_data.shape == (1000, 10) and set(problem.base_data.unique().tolist()) <= {0.0, 1.0}
    problem.compute_exact()
    assert problem.exact_log_z == pytest.approx(problem.model.log_partition().item()) and problem.exact_seconds >= 0
    assert problem.record()["num_hidden"] == 4


def test_run_row_repeats_over_consecutive_seeds_and_measures_the_error_in_stderr_units():
    problem = random_problem(8, 4, 0.5, 0, repeats=3)
    problem.compute_exact()
    runs = run_row(problem, "base_rate", "linear", 300, 50, first_seed=2000)
    assert [r["seed"] for r in runs] == [2000, 2001, 2002] and len({r["log_z"] for r in runs}) == 3
    for r in runs:
        assert r["error"] == pytest.approx(r["log_z"] - problem.exact_log_z)
        assert r["error_over_stderr"] == pytest.approx(r["error"] / r["stderr"])
        assert abs(r["error_over_stderr"]) < 5  # a small, easy model: AIS is accurate and its stderr honest


def test_row_summary():
    runs = [{"error": 0.3, "stderr": 0.1, "error_over_stderr": 3.0}, {"error": -0.4, "stderr": 0.2, "error_over_stderr": -2.0}]
    summary = row_summary(runs)
    assert summary["rmse"] == pytest.approx(math.sqrt((0.09 + 0.16) / 2))
    assert summary["mean_error"] == pytest.approx(-0.05) and summary["mean_stderr"] == pytest.approx(0.15)
    assert summary["max_abs_z"] == 3.0


def synthetic_payload(error_of):
    """A card payload for one problem, every base/schedule at K = 10, two seeds; ``error_of(base, schedule)`` sets the errors."""
    runs = []
    for base in BASES:
        for schedule in SCHEDULES:
            for seed, sign in enumerate((1, -1)):
                error = sign * error_of(base, schedule)
                runs.append({"problem": "toy", "base": base, "schedule": schedule, "num_steps": 10, "num_chains": 20, "seed": seed,
                             "exact_log_z": 5.0, "log_z": 5.0 + error, "stderr": 0.1, "ess": 12.0, "error": error,
                             "error_over_stderr": error / 0.1, "seconds": 0.01})
    meta = {"date": "2000-01-01", "command": "python scripts/estimator_card.py --quick", "machine": "a machine", "cpu_count": 2,
            "torch_threads": 1, "thread_benchmark": "", "torch_version": "x", "pfzoo_version": "y", "num_chains": 20,
            "num_steps": [10], "repeats": {"toy": 2}, "mnist_skipped": "--no-mnist was given", "total_seconds": 1.0,
            "load_average": {"start": [0.0, 0.0, 0.0], "end": [0.0, 0.0, 0.0]}, "json_name": "ais.json"}
    problems = [{"name": "toy", "description": "a toy RBM", "num_visible": 3, "num_hidden": 2, "exact_log_z": 5.0,
                 "exact_seconds": 0.0, "base_data": "nothing"}]
    return {"meta": meta, "problems": problems, "runs": runs}


def test_the_card_flags_exactly_the_rows_whose_error_exceeds_the_stderr():
    card = render_card(synthetic_payload(lambda base, schedule: 0.5 if (base, schedule) == ("uniform", "sigmoid") else 0.05))
    flagged = [line for line in card.splitlines() if "⚠" in line and line.startswith("|")]
    assert flagged == [line for line in card.splitlines() if line.startswith("| uniform | sigmoid | 10 ⚠")]
    assert f"exceeds {UNDER_REPORT}× the mean stderr: toy / uniform / sigmoid" in card
    assert "| 10 | uniform | 4 |" in card  # the calibration table pools the two schedules' runs
    assert "The MNIST problem was skipped: --no-mnist was given." in card and "on 2 cores" in card


def test_a_calibrated_card_says_so():
    card = render_card(synthetic_payload(lambda base, schedule: 0.1))  # every error exactly one stderr
    assert "RMS(error/stderr) = 1.00" in card and "roughly calibrated" in card and "No row's RMSE exceeds" in card
    assert not [line for line in card.splitlines() if line.startswith("|") and "⚠" in line]
