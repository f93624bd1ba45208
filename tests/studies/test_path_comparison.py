"""path_comparison: the stored path report re-renders from its results alone, and K's growth with d is read off the rows."""

import json
from pathlib import Path

import pytest

from pfzoo.studies.path_comparison import (
    PATHS, SCHEDULES, gaussians_markdown, growth_summary, rbms_markdown, report_markdown, samples_markdown, two_gaussians_figure,
)
from pfzoo.studies.spline_ablation import ablation_markdown

RESULTS = Path(__file__).resolve().parents[2] / "reports" / "paths"


def test_the_stored_readme_re_renders_from_its_results_json():
    results = json.loads((RESULTS / "results.json").read_text())
    text = gaussians_markdown(results) + rbms_markdown(results["rbms"], results["rbm_settings"])
    text += rbms_markdown(results["rbms_uniform"], results["rbm_uniform_settings"], uniform=True)
    if results.get("spline_ablation"):
        text += ablation_markdown(results["spline_ablation"], results["rbms_uniform"])
    if results.get("path_samples"):
        text += samples_markdown(results["path_samples"])
    assert text == report_markdown(results) == (RESULTS / "README.md").read_text()


def test_growth_is_fitted_over_the_largest_half_of_the_distances_above_one():
    distances = [1, 2, 4, 8, 16, 32]
    rows = [{"distance": d, "path": p, "schedule": s, "steps": d**2 if p == "GA" else 5 * d} for d in distances for p in PATHS for s in SCHEDULES]
    summary = growth_summary(rows)
    assert set(summary) == {f"{p} {s}" for p in PATHS for s in SCHEDULES}
    assert summary["GA linear"]["distances"] == [8, 16, 32]  # d = 1 dropped, then the larger half of the rest
    assert summary["GA optimal"]["slope_log_k_vs_log_d"] == pytest.approx(2.0)
    assert summary["MA linear"]["slope_log_k_vs_log_d"] == pytest.approx(1.0)


def test_the_two_gaussians_figure_draws_both_paths_ellipses(tmp_path):
    figure = two_gaussians_figure(betas=(0.0, 0.5, 1.0))
    assert [len(axis.lines) for axis in figure.axes] == [6, 6]  # an ellipse and a centre per β, on the GA and the MA panel
    figure.savefig(tmp_path / "two.png")
    assert (tmp_path / "two.png").read_bytes()[:4] == b"\x89PNG"
