"""scripts/reproduce_hopfield.py on a 12-unit network: every experiment runs, the report has every section and plot,
and --render joins the sections of runs split by --experiments."""

import json
import sys
from pathlib import Path

import pytest
import torch
from script_modules import load_script

from pfzoo.studies import hopfield_capacity
from pfzoo.studies.hopfield_report import pool_noisy

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "reproduce_hopfield.py"
TINY = ("--num-units 12 --pattern-counts 2 12 --trials 1 --recall-patterns 3 --recall-flips 0 2 --recall-trials 1 "
        "--noisy-copies 3 --noisy-patterns 2 --noisy-flip-probabilities 0 0.1 --noisy-pattern-counts 2 3 --mpf-iterations 20 "
        "--local-epochs 5 --noisy-local-epochs 2 --perceptron-epochs 20 --noisy-perceptron-epochs 5 --convergence-patterns 4 "
        "--threads 1").split()


@pytest.fixture
def script(monkeypatch):
    module = load_script(SCRIPT)
    monkeypatch.setattr(hopfield_capacity, "LBFGS_BUDGETS", [1, 5])
    monkeypatch.setattr(hopfield_capacity, "EPOCH_BUDGETS", [1, 3])
    return module


def run(script, monkeypatch, *args):
    monkeypatch.setattr(sys, "argv", ["reproduce_hopfield.py", *TINY, *args])
    script.main()


@pytest.mark.slow  # about 10 s of fits and plots on a loaded 2-core machine, plus the imports
def test_split_runs_render_into_one_report_with_every_section(script, monkeypatch, tmp_path):
    run(script, monkeypatch, "--experiments", "capacity", "recall", "convergence", "--out", str(tmp_path / "a"))
    run(script, monkeypatch, "--experiments", "noisy", "--out", str(tmp_path / "b"))
    first = json.loads((tmp_path / "a" / "results.json").read_text())
    assert {"capacity", "recall", "convergence"} <= set(first) and "noisy" not in first
    assert set(first["capacity"]["fractions"]) == {"MPF (L-BFGS)", "MPF local rule", "outer product", "perceptron"}
    assert first["capacity"]["fractions"]["MPF (L-BFGS)"]["2"] == 1.0  # two patterns in twelve units: stored
    monkeypatch.setattr(sys, "argv", ["reproduce_hopfield.py", "--render", str(tmp_path / "a" / "results.json"), str(tmp_path / "b" / "results.json"),
                                      "--note", "Split into two runs."])
    script.main()
    joined = json.loads((tmp_path / "a" / "results.json").read_text())
    assert joined["noisy"]["conditions"] == [[2, 0.0], [2, 0.1], [3, 0.1]] and "noisy" in joined["section_commands"]
    readme = (tmp_path / "a" / "README.md").read_text()
    assert "Split into two runs." in readme and joined["note"] == "Split into two runs."
    for heading in ("## Capacity", "## Recall", "## Storage from corrupted samples", "## Convergence", "## The thesis's claims beside ours"):
        assert heading in readme
    for plot in ("capacity", "fit_time", "recall", "noisy_corruption", "noisy_patterns", "convergence"):
        assert (tmp_path / "a" / f"{plot}.png").stat().st_size > 1000


def test_pooled_corrupted_sample_trials_are_the_trial_weighted_means():
    first = {"conditions": [[2, 0.1]], "trials_done": 3, "stored": {"r": [1.0]}, "cleaned": {"r": [0.5]},
             "stored_in_every_trial": {"r": [True]}, "seconds_total": {"r": 2.0}}
    second = {"conditions": [[2, 0.1]], "trials_done": 1, "stored": {"r": [0.6]}, "cleaned": {"r": [0.1]},
              "stored_in_every_trial": {"r": [False]}, "seconds_total": {"r": 1.0}}
    pooled = pool_noisy(first, second)
    assert pooled["trials_done"] == 4 and pooled["stored"]["r"] == [pytest.approx(0.9)] and pooled["cleaned"]["r"] == [pytest.approx(0.4)]
    assert pooled["stored_in_every_trial"]["r"] == [False] and pooled["seconds_total"]["r"] == 3.0
    with pytest.raises(ValueError, match="conditions"):
        pool_noisy(first, {**second, "conditions": [[3, 0.1]]})


FIGURES_SCRIPT = SCRIPT.parent / "hopfield_figures.py"
TINY_FIGURES = {
    "fig36_images": "count=4 side=8 train_flips=19 cue_flips=26 steps=4 copies_per_step=2 cues_per_image=2 trace_every=2",
    "fig38_training_time": "num_units=12 pattern_counts=2,8 trials=2",
    "fig39_recall_by_load": "num_units=12 loads=2,4 flips=0,2 trials=2",
    "fig310_corrupted": "num_units=12 pattern_counts=1,3 flips=4 copies=5 trials=2",
}


@pytest.mark.slow  # about 15 s of tiny fits, plots and imports
def test_the_figures_merge_into_the_report_and_render_again_byte_for_byte(script, monkeypatch, tmp_path):
    from PIL import Image

    (tmp_path / "natural_images").mkdir()
    pixels = torch.exp(torch.randn(16, 24, generator=torch.Generator().manual_seed(0))) * 1000
    Image.fromarray(pixels.numpy().astype("uint16")).save(tmp_path / "natural_images" / "vanhateren_tvlearn_ecml2022.tiff")
    run(script, monkeypatch, "--experiments", "capacity", "recall", "noisy", "convergence", "--out", str(tmp_path / "a"))
    figures = load_script(FIGURES_SCRIPT)
    results = tmp_path / "a" / "results.json"
    runs = [(name, settings.split(), []) for name, settings in TINY_FIGURES.items()]
    runs.append(("fig310_corrupted", "num_units=12 pattern_counts=1 flips=4 copies=5 trials=1 independent=true".split(), ["--ablation", "independent flips"]))
    runs.append(("fig38_training_time", "num_units=12 pattern_counts=2 trials=1 online_perceptron=true".split(), ["--ablation", "PER per pattern"]))
    for name, settings, extra in runs:
        monkeypatch.setattr(sys, "argv", ["hopfield_figures.py", name, "--set", *settings, *extra, "--results", str(results),
                                          "--data-root", str(tmp_path), "--threads", "1"])
        figures.main()
    record = json.loads(results.read_text())
    assert record["fig36_images"]["num_units"] == 64 and len(record["fig36_images"]["panels"]["cue"]) == 2
    assert [a["change"] for a in record["fig310_corrupted_ablations"]] == ["independent flips"]
    assert set(record["fig38_training_time"]["rules"]) == {"MPF", "PER", "OPR"} and "capacity" in record
    readme = (tmp_path / "a" / "README.md").read_text()
    for heading in ("## Storing 80 images", "## Training time at n = 12", "## Recall at four loads", "## Storage from 33%-corrupted copies",
                    "## The thesis's claims beside ours", "## Capacity"):
        assert heading in readme
    assert "PER per pattern" in readme and "independent flips" in readme
    for plot in ("images", "training_time", "recall_by_load", "corrupted_training"):
        assert (tmp_path / "a" / f"{plot}.png").stat().st_size > 1000
    monkeypatch.setattr(sys, "argv", ["reproduce_hopfield.py", "--render", str(results)])
    script.main()
    assert (tmp_path / "a" / "README.md").read_text() == readme
    assert json.loads(results.read_text()) == record
