"""The bilinear diagnosis's measurements on models with a known log-likelihood, and its report."""

import math

import torch

from pfzoo.models import BilinearGenerative
from pfzoo.studies.bilinear_diagnosis import bidirectional, convergence_in_n, second_moments
from pfzoo.studies.bilinear_diagnosis_report import convergence_verdict, readme
from pfzoo.studies.step_size_pilot import HAISSetting

SETTING = HAISSetting(0.5, 10.0, "geometric")


def noise_only_model() -> BilinearGenerative:
    """Θ = 0, so a = 0 and p(x) = N(x; 0, σ_n² I) exactly, whatever the latents."""
    gen = torch.Generator().manual_seed(0)
    basis, style = torch.randn(4, 4, generator=gen), torch.rand(4, 2, generator=gen)
    return BilinearGenerative.from_tensors(basis, torch.zeros(4, 4), style, noise_std=0.5).requires_grad_(False)


def exact_log_likelihood(x: torch.Tensor, noise_std: float) -> torch.Tensor:
    return (-0.5 * x.double().square().sum(-1) / noise_std**2 - x.shape[1] * (math.log(noise_std) + 0.5 * math.log(2 * math.pi)))


def test_convergence_in_n_recovers_the_exact_value_and_keeps_the_patches():
    model = noise_only_model()
    x = model.sample(6, generator=torch.Generator().manual_seed(1))
    rows = convergence_in_n(model, x, SETTING, [50, 200], 10, seed=0)
    exact = exact_log_likelihood(x, 0.5).mean().item()
    assert [r["num_steps"] for r in rows] == [50, 200]
    for r in rows:  # a = 0: every importance weight equals p(x), so the estimate is exact
        assert abs(r["mean"] - exact) < 1e-4
        assert len(r["per_example"]) == 6


def test_bidirectional_bounds_bracket_a_known_value():
    gen = torch.Generator().manual_seed(2)
    model = BilinearGenerative(3, num_style=1, noise_std=0.5, init_std=0.4, generator=gen).requires_grad_(False)
    rows = bidirectional(model, 4, SETTING, [20, 400], 8, seed=3)
    assert rows[1]["gap"] < rows[0]["gap"]  # more distributions close the sandwich
    for r in rows:
        assert r["lower"] <= r["upper"] + 3 * r["gap_stderr"]


def test_second_moments_sees_a_gaussian_as_gaussian():
    model = noise_only_model()
    data = 0.5 * torch.randn(5000, 4, generator=torch.Generator().manual_seed(4))
    m = second_moments(model, data, 20000, seed=5)
    assert abs(m["model_excess_kurtosis"]) < 0.15 and abs(m["data_excess_kurtosis"]) < 0.2
    assert all(abs(v - 0.25) < 0.03 for v in m["model_covariance_eigenvalues"])
    assert abs(m["data_gaussian_on_model_samples"] - m["data_gaussian_on_data"]) < 0.1


def test_convergence_verdict_and_readme():
    sweep = [{"num_steps": n, "mean": v, "stderr": 0.01, "acceptance_last_10pct": 0.8, "seconds": 1.0}
             for n, v in ((1000, -70.0), (30000, -66.2), (100000, -65.9))]
    assert convergence_verdict(sweep) == (True, sweep[-1]["mean"] - sweep[-2]["mean"])
    assert not convergence_verdict(sweep[:2])[0]
    text = readme({"ablation": {"ica-50": {"training": {"start": "ica", "epochs": 50, "overrides": [], "final_loss": 90.0, "wall_seconds": 60.0},
                                           "estimate": {"num_steps": 10000, "mean": -50.0, "stderr": 0.1}}}})
    assert "| ica-50 | ica | 50 | — | 90.00 | 10,000 | -50.00 ± 0.10 | 60 |" in text


def test_readme_renders_every_measured_section():
    sweep = [{"num_steps": n, "mean": v, "stderr": 0.01, "acceptance_last_10pct": 0.8, "seconds": 1.0} for n, v in ((30000, -66.2), (100000, -65.9))]
    bdmc = [{"num_steps": 30000, "lower": -40.0, "upper": -39.5, "gap": 0.5, "lower_stderr": 0.1, "upper_stderr": 0.1, "gap_stderr": 0.1, "seconds": 2.0}]
    moments = {"model_covariance_eigenvalues": [0.5, 1.0, 2.0], "data_covariance_eigenvalues": [1.0, 1.0, 1.0], "model_excess_kurtosis": 3.0,
               "data_excess_kurtosis": 1.0, "data_gaussian_on_model_samples": -60.0, "data_gaussian_on_data": -51.0}
    data = {"vanhateren": {"excess_kurtosis": 1.0, "comparison": {"gaussian": -51.6, "ica": -49.9, "bilinear": -66.8}}}
    measure = {"model": "baseline", "sha256": "ab" * 32, "date": "2026-11-28", "machine": "cpu", "threads": 1, "command": "python x",
               "setting": {"step_size": 1.0, "stiffness": 300.0, "schedule": "geometric"}, "particles": 100, "patches": 20,
               "sweep": sweep, "bdmc": bdmc, "moments": moments}
    references = {"gaussian": {"label": "Gaussian", "kind": "exact", "mean": -52.8}}
    text = readme({"measure": {"baseline": measure}, "data": data, "references": references})
    assert "converged within 0.5 nat" in text and "| 100,000 | -65.90 ± 0.01 (0.80) |" in text
    assert "between -40.00 and -39.50" in text and "25.9 nats less" in text and "Gaussian -52.80 (exact)" in text
    assert "| one van Hateren image | 1.00 | -51.60 | -49.90 (+1.7) | — | — | — | -66.80 (-15.2) |" in text
