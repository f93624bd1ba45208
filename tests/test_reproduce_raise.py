"""scripts/reproduce_raise.py --paper-scale: the settings are RAISE Table 1's, and the code path they take runs.

The real run needs a GPU for hours, so the test shrinks :data:`PAPER_SCALE` and runs it on a 784×5 RBM and a few
random binary "digits" written as .amat files.
"""

import json
from pathlib import Path

import pytest
import torch
from script_modules import load_script

from pfzoo import zoo
from pfzoo.models import RBM

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "reproduce_raise.py"
TINY = {"steps": 5, "long_steps": 0, "ais_chains": 4, "raise_chains": 2, "raise_examples": 3}


@pytest.fixture
def script():
    module = load_script(SCRIPT)
    return module


def fake_mnist(root: Path) -> Path:
    """``root/binarized_mnist/binarized_mnist_{train,valid,test}.amat`` with 20 / 10 / 10 random binary rows."""
    folder = root / "binarized_mnist"
    folder.mkdir(parents=True)
    g = torch.Generator().manual_seed(0)
    for split, rows in (("train", 20), ("valid", 10), ("test", 10)):
        pixels = (torch.rand(rows, 784, generator=g) < 0.2).int().tolist()
        (folder / f"binarized_mnist_{split}.amat").write_text("".join(" ".join(map(str, row)) + "\n" for row in pixels))
    return root


def test_paper_scale_settings_are_raise_table_1s(script):
    assert script.PAPER_SCALE == {"steps": 100_000, "long_steps": 0, "ais_chains": 5000, "raise_chains": 50, "raise_examples": 100}
    with pytest.raises(SystemExit):  # one scale at a time
        script.main(["--quick", "--paper-scale"])


def test_paper_scale_path_measures_every_cell_and_times_each_row(script, tmp_path, monkeypatch):
    zoo_dir = tmp_path / "zoo"
    checkpoint = script.zoo_folder("cd1-20", zoo_dir) / zoo.CHECKPOINT_FILE
    checkpoint.parent.mkdir(parents=True)
    zoo.save(RBM(784, 5, generator=torch.Generator().manual_seed(0)), checkpoint)
    monkeypatch.setattr(script, "PAPER_SCALE", TINY)

    script.main(["--paper-scale", "--device", "cpu", "--from-zoo", str(zoo_dir), "--models", "cd1-20", "--data-root", str(fake_mnist(tmp_path)),
                 "--output", str(tmp_path / "out"), "--csl-samples", "10", "--csl-burn-in", "2"])

    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["settings"] == {**script.SETTINGS, "csl_samples": 10, "csl_burn_in": 2, **TINY}
    assert results["gpu"] is None
    estimates = results["models"]["cd1-20"]["estimates"]
    assert set(estimates) == {"exact", "csl", "raise_uniform", "raise_base_rate", "ais_uniform", "ais_base_rate"}  # no second K
    assert all(row["seconds"] >= 0 for row in estimates.values())
    assert results["models"]["cd1-20"]["checkpoint_sha256"] == zoo.file_sha256(checkpoint)  # the file the row was measured on
    table = (tmp_path / "out" / "table.md").read_text()
    header, _, row = table.splitlines()[2:5]
    assert header.endswith("| wall time |") and row.startswith("| CD1(5), K = 5 |") and row.rstrip(" |").endswith(" s")
    assert "also run at K" not in table and "at the long K" not in table
    assert "AIS: 4 chains" in table and "2 reverse chains for each of 3 random test digits" in table


def test_export_writes_a_loadable_zoo_folder_with_card_json_and_the_runs_training_time(script, tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    run_dir = script.zoo_folder("cd1-20", runs)
    zoo.save(RBM(784, 5, generator=torch.Generator().manual_seed(0)), run_dir / zoo.CHECKPOINT_FILE,
             config={"dataset": {"_target_": "pfzoo.data.binarized_mnist", "root": "/data"}, "run_dir": str(run_dir)}, trainer_state={"epoch": 2})
    (run_dir / "metrics.jsonl").write_text('{"epoch": 1, "seconds": 3600.0}\n{"epoch": 2, "seconds": 1800.0, "evaluation_seconds": 36.0}\n')
    monkeypatch.setattr(script, "PAPER_SCALE", TINY)
    script.main(["--paper-scale", "--from-zoo", str(runs), "--export-zoo", str(tmp_path / "zoo"), "--models", "cd1-20", "--trained-on", "a test machine",
                 "--data-root", str(fake_mnist(tmp_path)), "--output", str(tmp_path / "out"), "--csl-samples", "10", "--csl-burn-in", "2"])
    folder = script.zoo_folder("cd1-20", tmp_path / "zoo")
    card = json.loads((folder / "card.json").read_text())
    assert card["training_seconds"] == 5436.0 and card["log_likelihood"]["estimator"] == "exact" and card["dataset_config"]["root"] is None
    assert "| training time | 2 epochs, 1.51 h (sum of the epochs' times in metrics.jsonl) on a test machine |" in (folder / "README.md").read_text()
    loaded = zoo.pretrained(folder.name, zoo_dir=tmp_path / "zoo")  # the card's sha256 is the exported file's
    assert torch.equal(loaded.weight, zoo.load(run_dir / zoo.CHECKPOINT_FILE).weight)
    assert zoo.load_checkpoint(folder / zoo.CHECKPOINT_FILE)["trainer_state"] is None
    entry = json.loads((tmp_path / "out" / "results.json").read_text())["models"]["cd1-20"]  # the row records the zoo's copy
    assert entry["checkpoint"] == str(folder / zoo.CHECKPOINT_FILE) and entry["checkpoint_sha256"] == zoo.file_sha256(folder / zoo.CHECKPOINT_FILE)
    (folder / "card.json").write_text(json.dumps({**card, "pfzoo_version": "0.0.1", "git_commit": "abc"}))  # as trained by an older checkout
    script.main(["--render", str(tmp_path / "out" / "results.json"), "--export-zoo", str(tmp_path / "zoo")])  # the card re-rendered, the model kept
    again = json.loads((folder / "card.json").read_text())
    assert (again["pfzoo_version"], again["git_commit"]) == ("0.0.1", "abc") and again["checkpoint"] == card["checkpoint"]
    # the same model exported again from another folder (a copy landed from zoo/landing) keeps what other scripts
    # measured on it, the depth diagnostic here; another model's export drops it
    part = {"value": -90.0, "stderr": 0.1, "log_z": 100.0, "warnings": []}
    depth = {"model": part, "without_top": part, "loss": 0.0, "loss_stderr": 0.1, "top_layer_share": 0.5, "num_test": 10, "estimator": "ais",
             "settings": {}, "seed": 0, "machine": "a test machine", "date": "2026-12-02", "seconds": 1.0, "command": "dbm_depth.py"}
    (folder / "card.json").write_text(json.dumps({**again, "depth": depth}))
    landing = script.zoo_folder("cd1-20", tmp_path / "landing")
    landing.mkdir(parents=True)
    for file in (zoo.CHECKPOINT_FILE, "metrics.jsonl"):
        (landing / file).write_bytes(((folder if file == zoo.CHECKPOINT_FILE else run_dir) / file).read_bytes())
    again = ["--paper-scale", "--export-zoo", str(tmp_path / "zoo"), "--models", "cd1-20", "--data-root", str(tmp_path),
             "--output", str(tmp_path / "out"), "--csl-samples", "10", "--csl-burn-in", "2"]
    script.main([*again, "--from-zoo", str(tmp_path / "landing"), "--only", "csl"])
    assert json.loads((folder / "card.json").read_text())["depth"] == depth
    (folder / "samples.png").write_bytes(b"the samples of the model measured")  # scripts/sample_card.py's picture
    zoo.save(RBM(784, 5, generator=torch.Generator().manual_seed(1)), run_dir / zoo.CHECKPOINT_FILE, config={"run_dir": str(run_dir)})
    script.main([*again, "--from-zoo", str(runs)])
    assert "depth" not in json.loads((folder / "card.json").read_text()) and not (folder / "samples.png").exists()


def test_sweeps_at_new_k_join_the_stored_ones_and_each_model_gets_its_figure(script, tmp_path, monkeypatch):
    zoo_dir = tmp_path / "zoo"
    checkpoint = script.zoo_folder("cd1-20", zoo_dir) / zoo.CHECKPOINT_FILE
    zoo.save(RBM(784, 5, generator=torch.Generator().manual_seed(0)), checkpoint)
    monkeypatch.setattr(script, "PAPER_SCALE", TINY)
    data_root = fake_mnist(tmp_path)
    for steps in (["4", "8"], ["8", "16"]):
        script.main(["--paper-scale", "--from-zoo", str(zoo_dir), "--models", "--sweep-steps", *steps, "--sweep-models", "cd1-20",
                     "--sweep-ais-chains", "4", "--sweep-raise-examples", "2", "--data-root", str(data_root), "--output", str(tmp_path / "out")])
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [row["steps"] for row in results["sweeps"]["cd1-20"]["rows"]] == [4, 8, 16]
    figure = tmp_path / "out" / "figures" / "cd1-20-against-K.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](figures/cd1-20-against-K.png)" in (tmp_path / "out" / "table.md").read_text()


def test_a_retrained_checkpoint_refuses_the_stored_rows_until_they_are_measured_again(script, tmp_path, monkeypatch):
    zoo_dir = tmp_path / "zoo"
    checkpoint = script.zoo_folder("cd1-20", zoo_dir) / zoo.CHECKPOINT_FILE
    zoo.save(RBM(784, 5, generator=torch.Generator().manual_seed(0)), checkpoint)
    monkeypatch.setattr(script, "PAPER_SCALE", TINY)
    sweep = ["--paper-scale", "--from-zoo", str(zoo_dir), "--models", "--sweep-models", "cd1-20", "--sweep-ais-chains", "4",
             "--sweep-raise-examples", "2", "--data-root", str(fake_mnist(tmp_path)), "--output", str(tmp_path / "out")]
    script.main([*sweep, "--sweep-steps", "4", "8"])
    zoo.save(RBM(784, 5, generator=torch.Generator().manual_seed(1)), checkpoint)  # retrained in place
    with pytest.raises(ValueError, match=r"sweeps row 'cd1-20' was measured on checkpoint sha256 [0-9a-f]{64}, but .* now has sha256"):
        script.main(["--render", str(tmp_path / "out" / "results.json")])
    script.main([*sweep, "--sweep-steps", "16"])  # the new model's rows replace the old one's rather than join them
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [row["steps"] for row in results["sweeps"]["cd1-20"]["rows"]] == [16]
    assert results["sweeps"]["cd1-20"]["checkpoint_sha256"] == zoo.file_sha256(checkpoint)
    script.main(["--render", str(tmp_path / "out" / "results.json")])


@pytest.mark.parametrize("arguments, words", [
    (["--sweep-part", "4/4", "--sweep-steps", "10"], "expected I/N with 0 ≤ I < N"),
    (["--sweep-part", "a/2", "--sweep-steps", "10"], "expected I/N"),
    (["--sweep-part", "0/2"], "give their K (--sweep-steps)"),
    (["--sweep-part", "0/20", "--sweep-steps", "10", "--sweep-ais-chains", "300"], "at most 5 parts"),
])
def test_a_sweep_part_that_cannot_be_exits_2_in_one_line(script, capsys, arguments, words):
    with pytest.raises(SystemExit) as exit_:
        script.main(["--models", *arguments])
    assert exit_.value.code == 2 and words in capsys.readouterr().err


def test_a_sweep_in_two_sittings_stores_its_row_when_the_second_part_comes(script, tmp_path, capsys):
    zoo_dir, root, output = tmp_path / "zoo", fake_mnist(tmp_path), tmp_path / "out"
    checkpoint = script.zoo_folder("cd1-20", zoo_dir) / zoo.CHECKPOINT_FILE
    checkpoint.parent.mkdir(parents=True)
    zoo.save(RBM(784, 5, generator=torch.Generator().manual_seed(0)), checkpoint)
    common = ["--models", "--from-zoo", str(zoo_dir), "--data-root", str(root), "--output", str(output), "--sweep-models", "cd1-20",
              "--sweep-steps", "6", "--sweep-ais-chains", "64", "--sweep-raise-examples", "3", "--raise-chains", "2", "--posterior-samples", "2"]
    script.main([*common, "--sweep-part", "1/2"])
    assert "part 1 of 2 stored in" in capsys.readouterr().out and (output / "sweep_parts" / "cd1-20-K6.json").is_file()
    assert not (output / "results.json").exists()  # nothing to store until the row is whole
    script.main([*common, "--sweep-part", "0/2"])
    assert "every part in: the row is stored" in capsys.readouterr().out
    row = json.loads((output / "results.json").read_text())["sweeps"]["cd1-20"]["rows"][0]
    assert row["steps"] == 6 and [part["index"] for part in row["parts"]] == [0, 1] and not (output / "sweep_parts" / "cd1-20-K6.json").exists()


def test_quick_trains_every_recipe_small_and_returns_the_averaged_parameters_where_a_recipe_averages(script, tmp_path):
    assert any(recipe.endswith("_averaged") for _, recipe in script.MODELS.values())  # the zoo's DBM is one
    root = fake_mnist(tmp_path)
    for name, (_, recipe) in script.MODELS.items():
        path = script.train(name, tmp_path / "runs", root, True, torch.device("cpu"))
        model = zoo.load(path)  # the DBMs that start from the zoo's 500-unit RBM start at random instead
        sizes = model.layer_sizes[1:] if hasattr(model, "layer_sizes") else [model.num_hidden]
        assert sizes == [10] * len(sizes), (recipe, sizes)
        assert path.name == ("averaged.pt" if recipe.endswith("_averaged") else zoo.CHECKPOINT_FILE), recipe
    three_layers = zoo.load(tmp_path / "runs" / "dbm-500-500-1000" / zoo.CHECKPOINT_FILE)
    assert three_layers.layer_sizes == [784, 10, 10, 10]
