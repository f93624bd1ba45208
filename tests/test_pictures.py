"""The pictures the app writes: image grids of samples and filters, training curves, annealing diagnostics."""

import json

import numpy

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
    assert samples.size[0] >= pictures.GRID_SIDE and samples.size[1] > samples.size[0]  # 8 × 8 digits, enlarged, under a caption


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


def test_grids_are_large_and_captioned_with_model_data_and_sweeps(tmp_path):
    from pfzoo.app.run_pictures import caption, model_pictures

    data = digits()
    model = RBM(64, 12, init_std=0.1)
    names = [path.name for path in model_pictures(model, data, tmp_path, seed=0)]
    assert names == ["samples.png", "filters.png"]
    for name in names:
        picture = Image.open(tmp_path / name).convert("L")
        assert picture.width >= pictures.GRID_SIDE
        band = torch.from_numpy(numpy.asarray(picture)[:30].copy())
        assert (band < 128).any() and (band > 250).float().mean() > 0.5  # dark text on a white band above the grid
    text = caption(model, data, "64 samples, 1000 MCMC sweeps")
    assert text == "rbm (num_visible=64, num_hidden=12) on digits: 64 samples, 1000 MCMC sweeps"
    uncaptioned = Image.open(pictures.save_image_grid(torch.rand(4, 64), (8, 8), tmp_path / "plain.png"))
    assert uncaptioned.size[0] == uncaptioned.size[1] >= pictures.GRID_SIDE  # no band without a caption


def test_the_caption_states_every_mcmc_sampler_default_number_of_steps():
    """The samples' caption says DEFAULT_SAMPLER_STEPS sweeps: every family's sampler must default to that many."""
    import inspect

    from pfzoo.app.run_pictures import DEFAULT_SAMPLER_STEPS
    from pfzoo.models.registry import model_class, registered_models

    for family in map(model_class, registered_models()):
        parameters = inspect.signature(family.sample).parameters
        if "num_steps" in parameters:
            assert parameters["num_steps"].default == DEFAULT_SAMPLER_STEPS, family.__name__


def test_tile_images_lays_tiles_row_by_row_between_padding():
    images = torch.arange(5 * 2 * 3, dtype=torch.float32).reshape(5, 2, 3)
    grid = pictures.tile_images(images, 3, padding=1, pad_value=-1.0)
    assert grid.shape == (2 * 3 + 1, 3 * 4 + 1)
    assert torch.equal(grid[1:3, 5:8], images[1]) and torch.equal(grid[4:6, 1:4], images[3])
    assert (grid[0] == -1).all() and (grid[:, 0] == -1).all() and (grid[4:6, 9:12] == -1).all()  # frames, and the empty sixth cell
