"""The pictures the app writes: image grids of samples and filters, training curves, annealing diagnostics."""

import json

import torch
from PIL import Image

from pfzoo import pictures
from pfzoo.app.run_pictures import training_pictures
from pfzoo.data import digits
from pfzoo.models import RBM, ICA


def test_training_pictures_for_image_data(tmp_path):
    data = digits()
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"epoch": e, "loss": 1.0 / e, "test_pseudo_log_likelihood": -20.0 - 1.0 / e}) + "\n" for e in (1, 2, 3)))
    written = training_pictures(RBM(64, 12, init_std=0.1), data, metrics, tmp_path, seed=0)
    assert [path.name for path in written] == ["curves.png", "samples.png", "filters.png"]
    samples = Image.open(tmp_path / "samples.png")
    assert min(samples.size) >= 64 and samples.size[0] == samples.size[1]  # 64 digits in an 8 × 8 grid, enlarged


def test_non_image_data_gets_only_curves_and_empty_metrics_none(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("")
    assert pictures.save_training_curves(metrics, tmp_path / "curves.png") is None
    grid = pictures.save_image_grid(ICA(4).visible_filters(), (2, 2), tmp_path / "filters.png", per_image_contrast=True)
    assert grid.is_file()


def test_path_diagnostics_plot(tmp_path):
    betas = torch.linspace(0.01, 1, 50).tolist()
    diagnostics = {"betas": betas, "increment_var": [1e-3] * 50, "ess": list(range(50, 0, -1)), "cost_functional": 0.025}
    assert pictures.save_path_diagnostics(diagnostics, tmp_path / "diagnostics.png").is_file()


def test_evaluate_writes_diagnostics_samples_and_filters_only_when_asked(tmp_path, capsys):
    from pfzoo import cli

    asked = ["estimator.num_steps=50", "estimator.diagnostics=true", "samples=true", "num_test=20", "progress=false"]
    assert cli.execute("evaluate", cli.compose("evaluate", [f"run_dir={tmp_path / 'asked'}", *asked])) == 0
    names = sorted(path.name for path in (tmp_path / "asked").glob("*.png"))
    assert names == ["diagnostics.png", "filters.png", "samples.png"]
    assert "pictures: " in capsys.readouterr().out
    assert Image.open(tmp_path / "asked" / "diagnostics.png").size[0] >= 300
    plain = ["estimator.num_steps=50", "num_test=20", "progress=false"]
    assert cli.execute("evaluate", cli.compose("evaluate", [f"run_dir={tmp_path / 'plain'}", *plain])) == 0
    assert not list((tmp_path / "plain").glob("*.png"))
