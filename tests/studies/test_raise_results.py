"""raise_results: every results.json entry records the checkpoint it was measured on, and the table refuses an entry
whose checkpoint is no longer the file its model loads (issue 52, item 4); a sweep point made in sittings (parts of its AIS
chains) is the row a sweep makes in one go, its sittings run in turn or side by side."""

import json
from pathlib import Path

import pytest
import torch
from factories import biased_binary_data, random_dbm

from pfzoo import zoo
from pfzoo.data import DataSplits
from pfzoo.models import RBM
from pfzoo.studies import raise_results
from pfzoo.studies.raise_results import RaiseRun, check_checkpoints, checkpoint_record, parts_file, write_table
from pfzoo.studies.raise_table import OLDER, sweep_measured

REPO = Path(__file__).resolve().parents[2]
STORED = json.loads((REPO / "estimators" / "raise" / "results.json").read_text())


def one_model(tmp_path: Path, seed: int = 0) -> tuple[dict, Path]:
    """The stored results cut to the CD1(20) row and its schedule pilot, both recording a checkpoint saved in ``tmp_path``."""
    checkpoint = tmp_path / "zoo" / "checkpoint.pt"
    zoo.save(RBM(784, 20, generator=torch.Generator().manual_seed(seed)), checkpoint)
    record = checkpoint_record(checkpoint, tmp_path)
    results = {**STORED, "models": {"cd1-20": {**STORED["models"]["cd1-20"], **record}}, "sweeps": {}, "heating": {},
               "schedule_pilots": {"cd1-20": {**STORED["schedule_pilots"]["cd1-20"], **record}}}
    return results, checkpoint


def test_a_row_measured_on_the_checkpoint_its_model_loads_renders(tmp_path):
    results, checkpoint = one_model(tmp_path)
    assert results["models"]["cd1-20"]["checkpoint"] == "zoo/checkpoint.pt"  # relative to the checkout, as results.json stores it
    assert results["models"]["cd1-20"]["checkpoint_sha256"] == zoo.file_sha256(checkpoint)
    table = write_table(results, tmp_path / "out", repo=tmp_path).read_text()
    assert "| CD1(20), K = 10,000 |" in table and "measured on an older checkpoint" not in table


def test_a_row_whose_checkpoint_changed_since_is_refused_naming_the_row_and_both_hashes(tmp_path):
    results, checkpoint = one_model(tmp_path)
    recorded = zoo.file_sha256(checkpoint)
    zoo.save(RBM(784, 20, generator=torch.Generator().manual_seed(1)), checkpoint)  # retrained: another model in the same file
    with pytest.raises(ValueError, match="cd1-20") as refused:
        write_table(results, tmp_path / "out", repo=tmp_path)
    message = str(refused.value)
    assert "\n" not in message and recorded in message and zoo.file_sha256(checkpoint) in message
    assert not (tmp_path / "out" / "table.md").exists()
    checkpoint.unlink()
    with pytest.raises(ValueError, match="missing"):
        check_checkpoints(results, tmp_path)


def test_a_row_without_a_hash_is_refused_unless_marked_as_measured_on_an_older_checkpoint(tmp_path):
    results, _ = one_model(tmp_path)
    pilot = {key: value for key, value in results["schedule_pilots"]["cd1-20"].items() if key != "checkpoint_sha256"}
    results["schedule_pilots"]["cd1-20"] = pilot
    with pytest.raises(ValueError, match="schedule_pilots row 'cd1-20' records no checkpoint sha256"):
        check_checkpoints(results, tmp_path)
    results["schedule_pilots"]["cd1-20"] = {**pilot, OLDER: "the 3-epoch model of commit abc1234"}
    results["models"]["cd1-20"][OLDER] = "the 3-epoch model of commit abc1234"
    table = write_table(results, tmp_path / "out", repo=tmp_path).read_text()
    assert "| CD1(20), K = 10,000 † |" in table and "| CD1(20) † | β = 1 − (1 − k/K)^5 |" in table
    assert "† CD1(20): measured on an older checkpoint than the one its model now loads: the 3-epoch model of commit abc1234" in table
    assert "† CD1(20)'s pilot: measured on an older checkpoint than the one its model now loads: the 3-epoch model of commit abc1234" in table


def test_every_stored_entry_was_measured_on_the_checkpoint_the_zoo_now_holds():
    """A retrained zoo model fails this until its rows are measured again (or marked as measured on the older one)."""
    check_checkpoints(STORED, REPO)
    shown = [entry for section in ("models", "sweeps", "heating") for entry in STORED[section].values()]
    assert all(entry.get("checkpoint_sha256") for entry in shown)


def test_a_sweep_that_adds_a_k_keeps_each_sittings_day_and_the_stored_rows_evidence(tmp_path):
    results = {"machine": "m", "gpu": None, "settings": {"steps": 1}, "models": {}, "sweeps": {}, "schedule_pilots": {}, "heating": {}}
    run = RaiseRun(tmp_path / "results.json", results, 0, "day 2, machine B", False, tmp_path)
    row = {"ais": -1.0, "raise": -1.0, "seconds": 60.0}
    first = {"settings": {"k": 1}, "rows": [{"steps": 10, **row}], "measured_on": "day 1, machine A", "checkpoint_sha256": "h",
             "checkpoint_evidence": "e"}
    run.store("sweeps", "cd1-20", first)
    assert sweep_measured(run.results["sweeps"]["cd1-20"]) == " Measured day 1, machine A, 1.0 min in all."
    run.store("sweeps", "cd1-20", {**first, "rows": [{"steps": 100, **row}], "measured_on": "day 2, machine B"} | {"checkpoint_evidence": "x"})
    stored = json.loads((tmp_path / "results.json").read_text())["sweeps"]["cd1-20"]
    assert [(r["steps"], r["measured_on"]) for r in stored["rows"]] == [(10, "day 1, machine A"), (100, "day 2, machine B")]
    assert stored["checkpoint_evidence"] == "e"
    assert sweep_measured(stored) == " Measured day 1, machine A, 1.0 min (K = 10); day 2, machine B, 1.0 min (K = 100)."


def test_a_store_keeps_what_another_run_re_measured_after_this_run_read_the_file(tmp_path):
    file = tmp_path / "results.json"
    stale = {"machine": "m", "gpu": None, "settings": {"steps": 1}, "models": {"dbn": {"value": "old"}}, "sweeps": {}, "schedule_pilots": {},
             "heating": {}}
    file.write_text(json.dumps(stale))
    run = RaiseRun.start(tmp_path, {"steps": 1}, seed=0, device=torch.device("cpu"), fresh=False, repo=tmp_path)  # reads "old"
    file.write_text(json.dumps({**stale, "models": {"dbn": {"value": "new"}}}))  # another run re-measures the DBN meanwhile
    run.store("sweeps", "cd25-500@uniform", {"settings": {}, "rows": []})
    stored = json.loads(file.read_text())
    assert stored["models"] == {"dbn": {"value": "new"}} and stored["sweeps"] == {"cd25-500@uniform": {"settings": {}, "rows": []}}


def sweep_run(folder: Path) -> RaiseRun:
    results = {"machine": "m", "gpu": None, "settings": {"raise_chains": 2, "posterior_samples": 4}, "models": {}, "sweeps": {},
               "schedule_pilots": {}, "heating": {}}
    folder.mkdir(parents=True, exist_ok=True)
    return RaiseRun(folder / "results.json", results, 0, f"a sitting in {folder.name}", False, folder.parent)


def small_dbm(tmp_path: Path):
    model = random_dbm([10, 6, 4], seed=3)
    checkpoint = zoo.save(model, tmp_path / "dbm.pt")
    data = DataSplits("bits", train=biased_binary_data(10, seed=4), test=biased_binary_data(10, seed=5, num_examples=30))
    return model, checkpoint, data


def test_a_sweep_point_made_in_sittings_is_the_row_a_sweep_makes_in_one_go(tmp_path):
    model, checkpoint, data = small_dbm(tmp_path)
    whole = sweep_run(tmp_path / "whole")
    whole.measure_sweep("dbm-500-1000", model, checkpoint, data, [25], base="base_rate", ais_chains=128, raise_examples=6)
    parts = sweep_run(tmp_path / "parts")
    waiting = parts_file(tmp_path / "parts", "dbm-500-1000", "base_rate", 25)
    for index in (2, 0):
        assert parts.measure_sweep_part("dbm-500-1000", model, checkpoint, data, [25], base="base_rate", ais_chains=128, raise_examples=6,
                                        part=(index, 3)) == []
        assert waiting.is_file() and parts.results["sweeps"] == {}
    again = sweep_run(tmp_path / "parts")  # a later session, from the files alone
    assert again.measure_sweep_part("dbm-500-1000", model, checkpoint, data, [25], base="base_rate", ais_chains=128, raise_examples=6,
                                    part=(1, 3)) == [25]
    assert not waiting.exists()
    one_go, sittings = whole.results["sweeps"]["dbm-500-1000"], json.loads((tmp_path / "parts" / "results.json").read_text())["sweeps"]["dbm-500-1000"]
    assert sittings["settings"] == one_go["settings"]
    row = sittings["rows"][0]
    assert [part["index"] for part in row["parts"]] == [0, 1, 2]
    assert row["seconds"] == pytest.approx(sum(part["seconds"] for part in row["parts"]), abs=0.05)
    varying = {"seconds", "parts", "measured_on"}
    assert {key: value for key, value in row.items() if key not in varying} == {
        key: value for key, value in one_go["rows"][0].items() if key not in varying}


SWEEP = {"base": "base_rate", "ais_chains": 128, "raise_examples": 6}


def finishing_beside(monkeypatch, folder: Path, arguments: tuple, outer: tuple[int, int], inner: tuple[int, int]) -> None:
    """Make the sitting of part ``outer`` find, once its chains have run, that a sitting beside it (in ``folder``)
    finished part ``inner`` meanwhile."""
    running_alone, beside = raise_results.sweep_point_in_parts, sweep_run(folder)

    def chains_while_the_sitting_beside_finishes(*args, part, **kwargs):
        if part == outer:
            assert beside.measure_sweep_part(*arguments, **SWEEP, part=inner) == []
        return running_alone(*args, part=part, **kwargs)

    monkeypatch.setattr(raise_results, "sweep_point_in_parts", chains_while_the_sitting_beside_finishes)


def test_sittings_side_by_side_keep_each_others_parts_and_the_last_to_finish_pools(tmp_path, monkeypatch):
    """Parts 0 and 1 start together; 1 finishes while 0's chains run (both must stay in the file); then part 2 starts
    beside nothing but finds, once its chains have run, that it completes the point, and pools it into the one-go row."""
    model, checkpoint, data = small_dbm(tmp_path)
    whole = sweep_run(tmp_path / "whole")
    whole.measure_sweep("dbm-500-1000", model, checkpoint, data, [25], **SWEEP)
    arguments = ("dbm-500-1000", model, checkpoint, data, [25])
    finishing_beside(monkeypatch, tmp_path / "parts", arguments, outer=(0, 3), inner=(1, 3))
    assert sweep_run(tmp_path / "parts").measure_sweep_part(*arguments, **SWEEP, part=(0, 3)) == []
    waiting = parts_file(tmp_path / "parts", "dbm-500-1000", "base_rate", 25)
    assert sorted(json.loads(waiting.read_text())["parts"]) == ["0", "1"]
    assert sweep_run(tmp_path / "parts").measure_sweep_part(*arguments, **SWEEP, part=(2, 3)) == [25]
    row = json.loads((tmp_path / "parts" / "results.json").read_text())["sweeps"]["dbm-500-1000"]["rows"][0]
    assert [part["index"] for part in row["parts"]] == [0, 1, 2] and not waiting.exists()
    varying = {"seconds", "parts", "measured_on"}
    assert {key: value for key, value in row.items() if key not in varying} == {
        key: value for key, value in whole.results["sweeps"]["dbm-500-1000"]["rows"][0].items() if key not in varying}


def test_the_sitting_whose_chains_end_last_pools_though_others_were_missing_when_it_started(tmp_path, monkeypatch):
    model, checkpoint, data = small_dbm(tmp_path)
    arguments = ("dbm-500-1000", model, checkpoint, data, [25])
    finishing_beside(monkeypatch, tmp_path / "parts", arguments, outer=(1, 2), inner=(0, 2))
    last = sweep_run(tmp_path / "parts")
    assert last.measure_sweep_part(*arguments, **SWEEP, part=(1, 2)) == [25]
    assert not parts_file(tmp_path / "parts", "dbm-500-1000", "base_rate", 25).exists()
    assert [part["index"] for part in last.results["sweeps"]["dbm-500-1000"]["rows"][0]["parts"]] == [0, 1]


def test_a_part_twice_or_a_part_of_another_run_is_refused_before_it_runs(tmp_path):
    model, checkpoint, data = small_dbm(tmp_path)
    run = sweep_run(tmp_path / "parts")
    arguments = ("dbm-500-1000", model, checkpoint, data, [25])
    run.measure_sweep_part(*arguments, base="base_rate", ais_chains=128, raise_examples=6, part=(0, 2))
    with pytest.raises(ValueError, match=r"holds part 0 of 2 already .* lacks: \[1\]"):
        run.measure_sweep_part(*arguments, base="base_rate", ais_chains=128, raise_examples=6, part=(0, 2))
    with pytest.raises(ValueError, match="parts of another run .*settings"):
        run.measure_sweep_part(*arguments, base="base_rate", ais_chains=160, raise_examples=6, part=(1, 2))
    with pytest.raises(ValueError, match="parts of another run .*count"):
        run.measure_sweep_part(*arguments, base="base_rate", ais_chains=128, raise_examples=6, part=(1, 4))


def test_a_run_with_other_settings_than_the_stored_rows_is_refused_rather_than_replacing_them(tmp_path):
    file = tmp_path / "results.json"
    stored = {"machine": "m", "gpu": None, "settings": {"steps": 1}, "models": {"dbn": {"value": "kept"}}, "sweeps": {}, "schedule_pilots": {},
              "heating": {}}
    file.write_text(json.dumps(stored))
    with pytest.raises(ValueError, match="other settings compile, steps than this run's: they would be lost .*--output"):
        RaiseRun.start(tmp_path, {"steps": 2, "compile": True}, seed=0, device=torch.device("cpu"), fresh=False, repo=tmp_path)
    assert json.loads(file.read_text()) == stored
    fresh = RaiseRun.start(tmp_path, {"steps": 2}, seed=0, device=torch.device("cpu"), fresh=True, repo=tmp_path)  # a smoke run's choice
    assert fresh.results["models"] == {}
