"""The named zoo: every entry's card matches its checkpoint and has a typed listing entry, list_pretrained / pretrained
(hash-checked, clear errors), evaluate's pretrained=NAME and the bare command's choice of entry (by model config, not just
by class)."""

import contextlib
import dataclasses
import io
import json
import math
import shutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from pfzoo import app, cli, zoo
from pfzoo.models import registered_models
from pfzoo.studies.raise_table import MODELS as RAISE_TABLE_MODELS

REPO = Path(__file__).resolve().parents[2]
ZOO = REPO / "models"
NAMES = zoo.list_pretrained(zoo_dir=ZOO)
MODEL_CONFIGS = sorted(path.stem for path in (REPO / "conf" / "model").glob("*.yaml"))
NOT_BETTER_THAN_INIT = {"gaussian", "gaussian_rbm"}  # whitened patches: N(0, I) is already (nearly) the optimum; see their cards
RAISE_TABLE_RECIPES = {recipe for _, recipe in RAISE_TABLE_MODELS.values()}  # their cards are rendered by scripts/reproduce_raise.py


def card(name):
    return json.loads((ZOO / name / zoo.CARD_DATA_FILE).read_text())


def run(task, overrides):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.execute(task, cli.compose(task, overrides))
    return code, out.getvalue(), err.getvalue()


def test_every_zoo_folder_has_a_card_and_is_listed():
    folders = sorted(p.name for p in ZOO.iterdir() if (p / zoo.CHECKPOINT_FILE).is_file())
    assert NAMES == folders and len(NAMES) >= 20


@pytest.mark.parametrize("name", NAMES)
def test_card_matches_its_checkpoint(name):
    data = card(name)
    assert data["format"] == zoo.CARD_FORMAT and data["name"] == name
    assert set(zoo.CARD_FIELDS) <= set(data), set(zoo.CARD_FIELDS) - set(data)
    path = ZOO / name / zoo.CHECKPOINT_FILE
    assert data["checkpoint"] == {"file": "checkpoint.pt", "sha256": zoo.file_sha256(path), "bytes": path.stat().st_size}
    raw = zoo.load_checkpoint(path)
    assert raw["model"] == data["family"] and raw["model_config"] == data["model_config"]
    assert (REPO / "conf" / "model" / f"{data['model_config_name']}.yaml").is_file()
    assert (REPO / "conf" / "experiment" / f"{data['recipe']['experiment']}.yaml").is_file()
    assert "run_dir" not in data["recipe"]["config"] and data["dataset_config"].get("root") is None
    measured = data["log_likelihood"]
    assert measured["value"] < 0 and measured["kind"] and measured["estimator"]


@pytest.mark.parametrize("name", [n for n in NAMES if card(n)["recipe"]["experiment"].startswith("zoo_")
                                  and card(n)["recipe"]["experiment"] not in RAISE_TABLE_RECIPES])
def test_zoo_recipe_cards_render_their_readme_and_were_trained(name):
    data = card(name)
    assert (ZOO / name / zoo.CARD_FILE).read_text() == zoo.render_card(data).render()
    if data["model_config_name"] not in NOT_BETTER_THAN_INIT:
        assert data["log_likelihood"]["value"] > data["log_likelihood_at_init"]["value"] + 1.0
    if data["model_config_name"] != "rbm":  # models/rbm-digits predates export: the training run's own checkpoint
        assert zoo.load_checkpoint(ZOO / name / zoo.CHECKPOINT_FILE)["trainer_state"] is None
        assert (ZOO / name / zoo.CHECKPOINT_FILE).stat().st_size < 1_000_000


@pytest.mark.parametrize("model", MODEL_CONFIGS)
def test_every_model_config_has_a_zoo_model_on_its_default_data_set(model):
    target = cli.compose("evaluate", [f"model={model}"]).dataset._target_
    assert zoo.find_pretrained(model, target, zoo_dir=ZOO), f"no zoo model of model={model} on {target}"


def test_every_card_has_a_typed_listing_entry_with_family_data_set_and_headline_number():
    entries = zoo.list_pretrained_weights(zoo_dir=ZOO)
    assert [entry.name for entry in entries] == NAMES
    for entry in entries:
        data = card(entry.name)
        assert (entry.family, entry.model_config_name, entry.dataset) == (data["family"], data["model_config_name"], data["dataset"])
        assert entry.family in registered_models() and entry.dataset_target == data["dataset_config"]["_target_"]
        assert entry.log_likelihood == data["log_likelihood"]["value"] and math.isfinite(entry.log_likelihood)
        assert entry.log_likelihood_stderr >= 0 and entry.kind == data["log_likelihood"]["kind"] and entry.estimator
        assert (REPO / "conf" / "experiment" / f"{entry.recipe}.yaml").is_file() and entry.folder == ZOO / entry.name
        assert entry.sha256 == zoo.file_sha256(ZOO / entry.name / zoo.CHECKPOINT_FILE)
        assert zoo.pretrained_weights(entry.name, zoo_dir=ZOO) == entry
    with pytest.raises(dataclasses.FrozenInstanceError):
        entries[0].log_likelihood = 0.0
    rbm = zoo.pretrained_weights("rbm-digits", zoo_dir=ZOO)
    assert rbm.kind == "exact" and rbm.log_likelihood_stderr == 0.0 and rbm.dataset == "digits"
    assert rbm.load().config() == zoo.pretrained("rbm-digits", zoo_dir=ZOO).config()


def test_a_card_lacking_its_headline_number_is_refused_naming_the_key(tmp_path):
    shutil.copytree(ZOO / "rbm-digits", tmp_path / "rbm-digits")
    path = tmp_path / "rbm-digits" / zoo.CARD_DATA_FILE
    data = json.loads(path.read_text())
    del data["log_likelihood"]["value"]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"card\.json lacks log_likelihood\.value"):
        zoo.list_pretrained_weights(zoo_dir=tmp_path)


def test_pretrained_loads_every_listed_name_with_its_card_config():
    for name in NAMES:
        model = zoo.pretrained(name, map_location="cpu", zoo_dir=ZOO)
        assert model.registry_name == card(name)["family"] and model.config() == card(name)["model_config"]


def test_default_zoo_dir_is_the_checkout_models_folder():
    assert zoo.default_zoo_dir() == ZOO and zoo.list_pretrained() == NAMES


def test_unknown_name_raises_value_error_listing_the_names():
    with pytest.raises(ValueError, match="unknown pretrained model 'nope'.*rbm-digits"):
        zoo.pretrained("nope")


def test_a_changed_checkpoint_fails_its_hash_check_naming_the_file(tmp_path):
    shutil.copytree(ZOO / "rbm-digits", tmp_path / "rbm-digits")
    assert zoo.list_pretrained(zoo_dir=tmp_path) == ["rbm-digits"]
    zoo.pretrained("rbm-digits", zoo_dir=tmp_path)
    path = tmp_path / "rbm-digits" / "checkpoint.pt"
    path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(ValueError, match=r"rbm-digits/checkpoint\.pt does not match its card"):
        zoo.pretrained("rbm-digits", zoo_dir=tmp_path)


def test_portable_config_drops_machine_paths(tmp_path):
    config = {"run_dir": "/abs/run", "data": {"root": "/data"}, "dataset": {"root": "/data", "path": str(tmp_path / "x.npy")},
              "other": "/elsewhere/file", "seed": 0, "list": ["/abs", 1]}
    assert zoo.portable_config(config, base=tmp_path) == {
        "data": {"root": None}, "dataset": {"root": None, "path": "x.npy"}, "other": None, "seed": 0, "list": [None, 1]}


def test_pretrained_name_evaluates_on_its_own_data_set(tmp_path):
    # another data set beside a pretrained name is refused, not silently replaced (issue 31)
    code, _, err = run("evaluate", ["pretrained=rbm-digits", "model=rbm", "dataset=patches", f"run_dir={tmp_path}"])
    assert code == 2 and err.strip().count("\n") == 0 and "dataset=patches does not match pretrained=rbm-digits" in err
    code, _, err = run("evaluate", ["pretrained=rbm-digits", "dataset.threshold=4", f"run_dir={tmp_path}"])
    assert code == 2 and err.strip().count("\n") == 0 and "dataset.threshold=4 does not apply to rbm-digits" in err
    code, out, err = run("evaluate", ["pretrained=rbm-digits", "model=rbm", f"run_dir={tmp_path}",
                                      "progress=false", "estimator.num_steps=50", "num_test=20"])
    assert code == 0, err
    assert "from pretrained=rbm-digits" in out and "more accuracy (slower): estimator.num_chains=400 estimator.num_steps=500" in out
    report = json.loads((tmp_path / "evaluation.json").read_text())
    assert report["pretrained"] == "rbm-digits" and report["dataset"] == "digits" and report["num_test"] == 20


@pytest.mark.parametrize("model", ["poe_laplace", "poe_student"])
def test_bare_evaluate_picks_the_entry_of_the_model_config_not_just_the_class(model):
    # data.root=null: the card records no root, and $PFZOO_DATA (set on a developer's machine) would fill it in
    checkpoint, dataset, chosen = app.evaluation_source(cli.compose("evaluate", [f"model={model}", "run_dir=x", "data.root=null"]))
    assert chosen["name"] == f"{model}-patches" and checkpoint == ZOO / f"{model}-patches" / "checkpoint.pt"
    assert OmegaConf.to_container(dataset) == card(f"{model}-patches")["dataset_config"]


def test_model_config_name_tells_configs_of_one_class_apart():
    for model in MODEL_CONFIGS:
        assert cli.compose("evaluate", [f"model={model}"]).model_config_name == model
        assert cli.compose("train", [f"model={model}"]).model_config_name == model
    assert cli.compose("evaluate", ["model=poe_student", "model.num_experts=12"]).model_config_name == "poe_student"
    assert cli.compose("train", ["+experiment=zoo_dbn"]).model_config_name == "dbn"


def test_model_of_another_family_than_the_checkpoint_is_refused_in_one_line(tmp_path):
    for source in ("pretrained=rbm-digits", f"checkpoint={ZOO / 'rbm-digits' / 'checkpoint.pt'}"):
        code, out, err = run("evaluate", ["model=dbm", source, f"run_dir={tmp_path}", "progress=false"])
        assert code == cli.EXIT_USAGE and len(err.splitlines()) == 1 and "model=dbm does not match" in err, err
    code, _, err = run("evaluate", ["pretrained=rbm-digits", f"checkpoint={ZOO / 'rbm-digits' / 'checkpoint.pt'}", f"run_dir={tmp_path}"])
    assert code == cli.EXIT_USAGE and "not both" in err


def test_several_entries_for_one_model_config_ask_for_a_name(tmp_path):
    cfg = cli.compose("evaluate", ["dataset=binarized_mnist", "run_dir=x", "data.root=/nowhere"])
    with pytest.raises(ValueError, match="pass pretrained=NAME, one of rbm-binarized_mnist-cd1-20"):
        app.evaluation_source(cfg)
    _, dataset, chosen = app.evaluation_source(cli.compose("evaluate", ["model=dbm", "dataset=binarized_mnist", "run_dir=x", "data.root=/d"]))
    assert chosen["name"] == "dbm-binarized_mnist" and dataset.root == "/d"


@pytest.mark.slow
def test_the_headline_command_runs_as_a_script(tmp_path):
    """``python scripts/evaluate.py model=dbm estimator=raise`` (shrunk): Hydra's own choice of model config finds dbm-digits."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, str(REPO / "scripts" / "evaluate.py"), "model=dbm", "estimator=raise",
                             "estimator.num_steps=100", "num_test=20", f"run_dir={tmp_path}", "progress=false"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "from pretrained=dbm-digits" in result.stdout and "more accuracy" in result.stdout
    assert json.loads((tmp_path / "evaluation.json").read_text())["num_test"] == 20


def _strings(value, where=""):
    """``(where, text)`` for every string inside nested dicts and lists."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{where}[{index}]")
    elif isinstance(value, str):
        yield where, value


@pytest.mark.parametrize("name", NAMES)
def test_stored_configs_and_cards_hold_no_machine_paths(name):
    """A zoo entry travels to other machines: neither the checkpoint's config nor the card names a path of the one
    that trained it (data roots, run folders, home directories)."""
    stored = zoo.load_checkpoint(ZOO / name / zoo.CHECKPOINT_FILE)["config"] or {}
    card = json.loads((ZOO / name / "card.json").read_text())
    absolute = [(where, text) for source in (stored, card) for where, text in _strings(source)
                if text.startswith(("/", "~")) or "/work/" in text or "/home/" in text or ":\\" in text]
    assert absolute == []


def test_import_pfzoo_is_enough_to_reach_the_zoo():
    import subprocess
    import sys

    code = f"import pfzoo; print(type(pfzoo.zoo.pretrained({NAMES[0]!r}, zoo_dir={str(ZOO)!r})).__name__)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip(), result.stderr[-1000:]
