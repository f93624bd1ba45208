"""raise_results: every results.json entry records the checkpoint it was measured on, and the table refuses an entry
whose checkpoint is no longer the file its model loads (issue 52, item 4)."""

import json
from pathlib import Path

import pytest
import torch

from pfzoo import zoo
from pfzoo.models import RBM
from pfzoo.studies.raise_results import RaiseRun, check_checkpoints, checkpoint_record, write_table
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
