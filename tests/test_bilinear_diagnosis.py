"""The bilinear diagnosis's measurements on models with a known log-likelihood, and its report."""

import math

import torch
from scipy import stats

import pfzoo.kernels.hmc as hmc
from pfzoo.hamiltonian import leapfrog

from pfzoo.models import BilinearGenerative
from pfzoo.studies.bilinear_diagnosis import bidirectional, convergence_in_n, e_step_geweke, second_moments
from pfzoo.studies.bilinear_diagnosis_report import convergence_verdict, readme, size_curves
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
    assert "| ica-50 | ica | 50 | — | 8 | 90.00 | 10,000 | -50.00 ± 0.10 | 60 |" in text


def test_size_curves_group_one_training_over_its_sizes():
    def row(start, num_style, mean, overrides=()):
        training = {"start": start, "epochs": 200, "overrides": list(overrides), "final_loss": 1.0, "wall_seconds": 1.0}
        if num_style is not None:  # rows measured before the sweep carry no num_style: the recipe's 8
            training["num_style"] = num_style
        return {"training": training, "estimate": {"num_steps": 10000, "mean": mean, "stderr": 0.1}}

    lr = ("trainer.optimizer.lr=0.0003",)
    rows = {"baseline": row("random", None, -68.0), "random-200-style26": row("random", 26, -70.0), "random-200-style2": row("random", 2, -66.0),
            "ica-200-lr3e-4": row("ica", None, -51.9, lr), "ica-200-lr3e-4-style62": row("ica", 62, -51.5, lr),
            "ica-200": row("ica", None, -52.7), "ica-0": {**row("ica", None, -51.3), "training": {**row("ica", None, 0)["training"], "epochs": 0}}}
    curves = size_curves(rows)
    assert set(curves) == {("random", 200, ()), ("ica", 200, lr)}  # a training at one size is no curve; the untrained start is none
    assert [(latents, name) for latents, name, _ in curves[("random", 200, ())]] == [(38, "random-200-style2"), (44, "baseline"), (62, "random-200-style26")]
    references = {"student": {"label": "Student-t POE", "kind": "exact", "mean": -50.0}, "bilinear": {"label": "Bilinear generative", "kind": "x", "mean": -1.0}}
    text = readme({"ablation": rows, "references": references})
    assert "- random start, 200 epochs (the recipe's settings): 38 latents (random-200-style2) -66.00 ± 0.10; 44 latents (baseline)" in text
    assert "scores -51.50 at 98 latents; the best other model of the comparison on the same patches, Student-t POE, -50.00" in text


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


def small_bilinear() -> BilinearGenerative:
    return BilinearGenerative(3, 3, 3, 2, noise_std=0.5, init_std=0.6, generator=torch.Generator().manual_seed(5)).double().requires_grad_(False)


def test_e_step_geweke_passes_the_correct_sampler_and_catches_a_broken_one(monkeypatch):
    threshold = stats.norm.isf(1e-3 / (2 * 31))  # false-failure rate 1e-3, Bonferroni over the 31 statistics
    result = e_step_geweke(small_bilinear(), 20000, 10, seed=0)
    assert len(result["z_scores"]) == 31 and result["max_abs_z"] < threshold and 0.5 < result["acceptance"] < 1.0

    def wrong_sign_leapfrog(position, momentum, current, evaluate, *, step_size, num_steps=1, lower=None):
        x, p, evaluation = leapfrog(position, momentum, current, evaluate, step_size=step_size, num_steps=num_steps, lower=lower)
        return x, p + step_size * evaluation.grad, evaluation  # the last half kick of the wrong sign: not reversible

    monkeypatch.setattr(hmc, "leapfrog", wrong_sign_leapfrog)
    assert e_step_geweke(small_bilinear(), 20000, 10, seed=0)["max_abs_z"] > 2 * threshold  # measured 13.3


def test_cause_section_reads_the_estimator_sampler_and_training_rows():
    sweep = [{"num_steps": n, "mean": v, "stderr": 0.05, "acceptance_last_10pct": 0.8, "seconds": 1.0} for n, v in ((30000, -68.4), (100000, -68.6))]
    bdmc = [{"num_steps": 30000, "lower": -4.5, "upper": -4.2, "gap": 0.3, "lower_stderr": 0.05, "upper_stderr": 0.1, "gap_stderr": 0.1, "seconds": 1.0}]
    moments = {"model_covariance_eigenvalues": [0.04, 0.24], "data_covariance_eigenvalues": [1.0, 1.0], "model_excess_kurtosis": 3.0,
               "data_excess_kurtosis": 1.5, "data_gaussian_on_model_samples": -35.0, "data_gaussian_on_data": -51.0}
    measure = {"model": "baseline", "sha256": "0" * 64, "date": "d", "machine": "m", "threads": 1, "command": "c", "particles": 100, "patches": 20,
               "setting": {"step_size": 1.0, "stiffness": 300.0, "schedule": "geometric"}, "sweep": sweep, "bdmc": bdmc, "moments": moments}

    def row(mean):
        return {"training": {"start": "ica", "epochs": 50, "overrides": [], "final_loss": 1.0, "wall_seconds": 1.0},
                "estimate": {"num_steps": 10000, "mean": mean, "stderr": 0.05}}

    rows = {"baseline": row(-68.8), "ica-0": row(-51.3), "ica-50": row(-53.2), "ica-50-hmc10": row(-59.7), "ica-200": row(-52.7)}
    geweke = {"baseline": {"chains": 50000, "iterations": 20, "step_size": 0.069, "max_abs_z": 3.97, "num_statistics": 1744}}
    text = readme({"measure": {"baseline": measure}, "ablation": rows, "geweke": geweke})
    assert "moves by -0.20 nats" in text and "agree to 0.30 ± 0.10" in text
    assert "largest |z| 3.97 of 1,744 joint moments against 5.00" in text and "leaves p(z | x) invariant" in text
    assert "eigenvalues are 0.04–0.24" in text and "ends +16.1 nats higher" in text and "(-1.40 after 200 epochs)" in text
    assert "lower it further (-6.50 nats" in text
    assert "- `ica-0` → `ica-50`, 50 epochs of the recipe's EM-HMC from ICA's start: -1.90 ± 0.07 nats." in text
    geweke["baseline"]["max_abs_z"] = 7.0
    assert "**the sampler fails**" in readme({"measure": {"baseline": measure}, "ablation": rows, "geweke": geweke})
