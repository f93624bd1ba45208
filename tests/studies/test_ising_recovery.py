"""ε_J and ε_corr (thesis Table 3.1) against hand computations, and their input checks."""

import itertools
import json
import math
import sys
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from script_modules import load_script

from pfzoo.cli import compose
from pfzoo.data import sample_spin_glass, spin_glass_model
from pfzoo.models import RBM, Ising
from pfzoo.studies.ising_recovery import (
    CorrelationTrace,
    correlation_error,
    coupling_error,
    nearly_constant_units,
    pair_moments,
    recipe_overrides,
    upper_pairs,
)

REPO = Path(__file__).resolve().parents[2]


def test_upper_pairs_lists_the_entries_above_the_diagonal_row_by_row():
    matrix = torch.arange(16.0).reshape(4, 4)
    assert upper_pairs(matrix).tolist() == [1.0, 2.0, 3.0, 6.0, 7.0, 11.0]


def test_coupling_error_of_the_zero_start_is_the_mean_square_true_coupling_over_all_pairs():
    truth = spin_glass_model(side=4, coupling_std=1.0, seed=3)
    coupling = truth.symmetric_coupling.detach()
    by_hand = sum(coupling[i, j].item() ** 2 for i, j in itertools.combinations(range(16), 2)) / (16 * 15 / 2)
    assert coupling_error(Ising(16, init_std=0.0), truth) == pytest.approx(by_hand, rel=1e-6)
    assert coupling_error(truth, truth) == 0.0


def test_coupling_error_reads_the_symmetric_couplings_of_float64_models():
    g = torch.Generator().manual_seed(0)
    model = Ising(5, init_std=1.0, generator=g).double()
    truth = Ising(5, init_std=1.0, generator=g)
    learned, true = model.symmetric_coupling.detach(), truth.symmetric_coupling.detach().double()
    by_hand = sum((learned[i, j] - true[i, j]).item() ** 2 for i, j in itertools.combinations(range(5), 2)) / 10
    assert coupling_error(model, truth) == pytest.approx(by_hand, rel=1e-12)


def test_coupling_error_excluding_units_averages_only_the_pairs_that_touch_none_of_them():
    g = torch.Generator().manual_seed(4)
    model, truth = Ising(5, init_std=1.0, generator=g).double(), Ising(5, init_std=1.0, generator=g).double()
    learned, true = model.symmetric_coupling.detach(), truth.symmetric_coupling.detach()
    pairs = [(i, j) for i, j in itertools.combinations(range(5), 2) if 1 not in (i, j) and 3 not in (i, j)]
    by_hand = sum((learned[i, j] - true[i, j]).item() ** 2 for i, j in pairs) / len(pairs)
    assert coupling_error(model, truth, excluding=[1, 3]) == pytest.approx(by_hand, rel=1e-12)
    with pytest.raises(ValueError, match="excluding"):
        coupling_error(model, truth, excluding=[5])
    with pytest.raises(ValueError, match="excluding"):
        coupling_error(model, truth, excluding=[0, 1, 2, 3])


def test_nearly_constant_units_are_those_whose_rarer_value_is_within_the_fraction():
    samples = torch.zeros(1000, 4)
    samples[:, 1] = 1.0
    samples[:1, 1] = 0.0  # unit 1: one zero in 1000 rows
    samples[:2, 2] = 1.0  # unit 2: two ones
    samples[:500, 3] = 1.0
    assert nearly_constant_units(samples, fraction=1e-3) == [0, 1]
    assert nearly_constant_units(samples, fraction=2e-3) == [0, 1, 2]


def test_pair_moments_and_correlation_error_match_loops():
    g = torch.Generator().manual_seed(1)
    samples = torch.bernoulli(torch.full((50, 4), 0.3), generator=g)
    reference = torch.bernoulli(torch.full((70, 4), 0.6), generator=g)
    moments = [(samples[:, i] * samples[:, j]).mean().item() for i, j in itertools.combinations(range(4), 2)]
    assert pair_moments(samples).tolist() == pytest.approx(moments)
    reference_moments = [(reference[:, i] * reference[:, j]).mean().item() for i, j in itertools.combinations(range(4), 2)]
    by_hand = sum((a - b) ** 2 for a, b in zip(moments, reference_moments)) / 6
    assert correlation_error(samples, reference) == pytest.approx(by_hand, rel=1e-6)
    assert correlation_error(samples, samples) == 0.0


def test_bad_inputs_raise_value_error():
    with pytest.raises(ValueError, match="model"):
        coupling_error(RBM(4, 3), Ising(4))
    with pytest.raises(ValueError, match="same number of units"):
        coupling_error(Ising(4), Ising(5))
    with pytest.raises(ValueError, match="square"):
        upper_pairs(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="samples"):
        pair_moments(torch.zeros(0, 3))
    with pytest.raises(ValueError, match="width"):
        correlation_error(torch.zeros(3, 3), torch.zeros(3, 4))


def test_correlation_trace_measures_at_log_spaced_epochs_with_the_same_draws_each_time():
    truth = spin_glass_model(kind="fully_connected", num_units=6, coupling_std=1.0, bias_std=0.5, seed=2)
    reference = sample_spin_glass(truth, 400, burn_in=50, generator=torch.Generator().manual_seed(0))
    trace = CorrelationTrace(reference, num_samples=300, num_chains=100, burn_in=20, thin=2, seed=7)
    values = [trace(truth) for _ in range(30)]
    measured = [epoch for epoch, value in enumerate(values, start=1) if not math.isnan(value)]
    assert measured == [1, 2, 3, 4, 5, 7, 8, 10, 13, 16, 20, 25]
    expected = correlation_error(sample_spin_glass(truth, 300, num_chains=100, burn_in=20, thin=2,
                                                   generator=torch.Generator().manual_seed(7)), reference)
    assert {values[epoch - 1] for epoch in measured} == {expected}  # the model did not change, nor did the draws
    with pytest.raises(ValueError, match="growth"):
        CorrelationTrace(reference, num_samples=10, num_chains=10, burn_in=1, thin=1, seed=0, growth=1.0)


def _reproduce_ising(monkeypatch, *args):
    script = load_script(REPO / "scripts" / "reproduce_ising.py")
    monkeypatch.setattr(sys, "argv", ["reproduce_ising.py", *args])
    script.main()


def test_reproduce_ising_fits_a_fully_connected_glass_with_correlation_traces(tmp_path, monkeypatch):
    """A tiny Figure 3.2 run: every learner ends with a result, MPF's ε_corr curve has its log-spaced points, and the
    report renders both pictures and the figure's section from results.json."""
    monkeypatch.chdir(tmp_path)
    _reproduce_ising(monkeypatch, "--kind", "fully_connected", "--num-units", "6", "--coupling-std", "1.0", "--bias-std", "0.5",
                     "--num-samples", "400", "--burn-in", "20", "--cd-seconds", "0.3", "--max-lbfgs-steps", "6",
                     "--model-samples", "200", "--correlation-trace", "--trace-samples", "100", "--threads", "1",
                     "--out", str(tmp_path / "fc"))
    record = json.loads((tmp_path / "fc" / "results.json").read_text())
    assert set(record["results"]) == {"MPF", "pseudo-likelihood", "CD-1", "CD-10", "ratio matching", "GSM", "NCE", "PT-SML",
                                      "MFT+TAP", "nMF"}
    mpf_points = record["correlation_traces"]["MPF"]
    assert len(mpf_points) == len([e for e in (1, 2, 3, 4, 5, 7, 8) if e <= record["results"]["MPF"]["iterations_or_epochs"]])
    assert all(seconds > 0 and error >= 0 for seconds, error in mpf_points)
    readme = (tmp_path / "fc" / "README.md").read_text()
    assert "6-unit fully connected spin glass" in readme and "(thesis Figure 3.2)" in readme
    assert "![ε_corr against training time](correlation.png)" in readme and "The figure's claim" in readme
    assert (tmp_path / "fc" / "correlation.png").stat().st_size > 0 and (tmp_path / "fc" / "convergence.png").stat().st_size > 0


def test_reproduce_ising_fits_only_the_learners_asked_for_and_times_them_in_cpu_seconds(tmp_path, monkeypatch):
    """``--learners`` leaves the others out; ``--clock cpu`` reaches the trainer, whose CD budget then counts CPU seconds."""
    monkeypatch.chdir(tmp_path)
    _reproduce_ising(monkeypatch, "--side", "3", "--num-samples", "200", "--burn-in", "10", "--cd-seconds", "0.2",
                     "--max-lbfgs-steps", "3", "--model-samples", "100", "--threads", "1", "--clock", "cpu",
                     "--learners", "MPF", "CD-1", "MFT+TAP", "--out", str(tmp_path / "some"))
    record = json.loads((tmp_path / "some" / "results.json").read_text())
    assert list(record["results"]) == ["MPF", "CD-1", "MFT+TAP"] and record["settings"]["clock"] == "cpu"
    assert record["results"]["CD-1"]["seconds"] >= 0.2
    cfg = compose("train", ["+experiment=ising_cd1", *recipe_overrides(record["settings"])])
    assert instantiate(cfg.trainer, run_dir=tmp_path / "cd1").settings.clock == "cpu"


@pytest.mark.parametrize("folder", ["sigma10", "sigma10_trace", "sigma20_trace", "fully_connected40", "fully_connected40/weight_decay"])
def test_committed_ising_reports_rerender_from_their_results(folder, tmp_path, monkeypatch):
    committed = REPO / "reports" / "ising" / folder
    if not (committed / "results.json").exists():
        pytest.skip(f"reports/ising/{folder} has no results.json")
    (tmp_path / folder).mkdir(parents=True)
    (tmp_path / folder / "results.json").write_text((committed / "results.json").read_text())
    _reproduce_ising(monkeypatch, "--report-only", "--out", str(tmp_path / folder))
    assert (tmp_path / folder / "README.md").read_text() == (committed / "README.md").read_text()
    # --report-only adds to results.json the numbers the README derives (with_derived_numbers): the committed file has them
    assert (tmp_path / folder / "results.json").read_text() == (committed / "results.json").read_text()
