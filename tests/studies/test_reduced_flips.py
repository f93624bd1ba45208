"""pfzoo.studies.reduced_flips: the ring energy and its exact samples, the autocovariance, and reduced flips against
standard ones (both sample the ring; reduced flips reverse less and decorrelate faster with persistent momentum)."""

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from script_modules import load_script

from pfzoo.studies.reduced_flips import (
    THESIS, RingEnergy, against_thesis, autocovariance, compare_flips, exact_ring_samples, half_per_unit_time, integrated_autocorrelation_time,
)

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "reports" / "reduced_flips"


def test_ring_gradient_is_the_energy_gradient():
    energy = RingEnergy(scale=30.0, dim=3)
    x = torch.randn(7, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).requires_grad_(True)
    value, grad = energy.energy_and_grad(x)
    (autograd,) = torch.autograd.grad(value.sum(), x)
    torch.testing.assert_close(grad, autograd)
    assert torch.allclose(value, 30.0 * torch.log(x.norm(dim=-1)) ** 2)


def test_exact_samples_have_the_ring_moments_and_a_uniform_angle():
    energy = RingEnergy(scale=100.0)
    samples = exact_ring_samples(energy, 100_000, generator=torch.Generator().manual_seed(0))
    log_radius = torch.log(samples.norm(dim=-1))
    mean, variance = energy.log_radius_moments()
    assert abs(log_radius.mean().item() - mean) < 4 * math.sqrt(variance / 100_000)
    assert abs(log_radius.var().item() / variance - 1) < 4 * math.sqrt(2 / 100_000)
    assert samples.mean(0).abs().max() < 4 * math.sqrt(0.5 / 100_000)  # E x = 0, Var of each coordinate ≈ 1/2


def test_autocovariance_of_an_ar1_series_is_its_geometric_decay():
    """x_t = ρ x_{t−1} + √(1−ρ²) n_t has C(τ)/C(0) = ρ^τ and τ_int = (1 + ρ)/(1 − ρ)."""
    rho, steps, chains = 0.8, 4000, 200
    g = torch.Generator().manual_seed(1)
    noise = torch.randn(steps, chains, 1, dtype=torch.float64, generator=g)
    x = torch.empty_like(noise)
    x[0] = noise[0]
    for t in range(1, steps):
        x[t] = rho * x[t - 1] + math.sqrt(1 - rho**2) * noise[t]
    curve = autocovariance(x, 20)
    torch.testing.assert_close(curve, rho ** torch.arange(21, dtype=torch.float64), atol=0.01, rtol=0)
    assert abs(integrated_autocorrelation_time(curve) - (1 + rho) / (1 - rho)) < 0.5  # truncated at C < 0.05: −2ρ^14/(1−ρ)
    with pytest.raises(ValueError, match="max_lag"):
        autocovariance(x, steps)
    assert math.isnan(integrated_autocorrelation_time(torch.ones(5)))


def test_reduced_flips_sample_the_ring_and_decorrelate_faster():
    results = compare_flips(num_chains=300, num_steps=1500, max_lag=300, seed=0)
    exact = results["exact"]
    for flip in ("standard", "reduced"):
        run = results[flip]
        # chains started at exact samples stay on the ring (correlated draws: a generous tolerance on the mean)
        assert abs(run["log_radius_mean"] - exact["log_radius_mean"]) < 0.01, (flip, run["log_radius_mean"])
        assert abs(run["log_radius_variance"] / exact["log_radius_variance"] - 1) < 0.1, (flip, run["log_radius_variance"])
        assert run["autocovariance"][0] == pytest.approx(1.0)
    standard, reduced = results["standard"], results["reduced"]
    assert standard["acceptance"] == pytest.approx(reduced["acceptance"], abs=0.02)  # the same forward proposals
    assert reduced["flip_rate"] < 0.5 * standard["flip_rate"]
    assert standard["gradient_evaluations"] == 1.0 and 1.0 < reduced["gradient_evaluations"] < 2.0
    assert reduced["iat_gradient_evaluations"] < 0.85 * standard["iat_gradient_evaluations"], (standard, reduced)


def test_quick_run_writes_the_report_and_renders_it_again(tmp_path):
    script = load_script("scripts/reproduce_reduced_flips.py")
    script.main(["--quick", "--out", str(tmp_path), "--step-sizes", "0.1"])
    written = (tmp_path / "README.md").read_text()
    assert "| 0.1 | 0.06697 | reduced |" in written and (tmp_path / "autocovariance.png").stat().st_size > 10_000  # the thesis's γ
    script.main(["--render", str(tmp_path / "results.json")])
    assert (tmp_path / "README.md").read_text() == written


def test_committed_report_renders_from_its_results_and_shows_the_claim(tmp_path):
    results = json.loads((REPORT / "results.json").read_text())
    shutil.copy(REPORT / "results.json", tmp_path / "results.json")
    load_script("scripts/reproduce_reduced_flips.py").main(["--render", str(tmp_path / "results.json")])
    assert (tmp_path / "README.md").read_text() == (REPORT / "README.md").read_text()
    # where rejections are neither rare nor the rule, reduced flips decorrelate in fewer gradient evaluations
    middling = [run for run in results["runs"] if 0.5 < run["standard"]["acceptance"] < 0.9]
    assert middling and all(run["reduced"]["iat_gradient_evaluations"] < run["standard"]["iat_gradient_evaluations"] for run in middling)


def test_the_defaults_are_the_theses_settings_and_the_report_names_what_differs():
    """Thesis §6.1.3: E = 100 log² r, ε = 0.1, one leapfrog step, half the momentum corrupted per unit time, 10⁵ steps."""
    assert THESIS == {"scale": 100.0, "step_size": 0.1, "num_leapfrog": 1, "num_steps": 100_000}
    assert half_per_unit_time(0.1) == pytest.approx(1 - 0.5**0.1) and (1 - half_per_unit_time(0.1)) ** 10 == pytest.approx(0.5)
    thesis = {"settings": {**THESIS, "momentum_refresh": half_per_unit_time(0.1), "refresh_rule": "half", "num_chains": 7}}
    text = against_thesis([thesis])
    assert "ε = 0.1" in text and "100,000 sampling steps" in text and "7 chains (the thesis does not state how many)" in text
    assert "unlike the thesis" not in text
    ours = {"settings": {**THESIS, "step_size": 0.2, "momentum_refresh": 0.05, "num_steps": 20_000, "num_chains": 7}}
    text = against_thesis([thesis, ours])
    assert "unlike the thesis, the step sizes 0.2 beside the thesis's 0.1" in text and "transitions per chain: 20,000 rather than 100,000" in text
    assert "a fixed refresh γ = 0.05 whatever ε" in text
