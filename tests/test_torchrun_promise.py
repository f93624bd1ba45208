"""pfzoo.torchrun: the worker's mark, torchrun's reading of it, the held agent notes, and the entry point's backend."""

import logging
from importlib.metadata import entry_points

import pytest

from pfzoo import cli
from pfzoo import torchrun as promise

errors = pytest.importorskip("torch.distributed.elastic.multiprocessing.errors")


def failure(tmp_path, exitcode: int, marked: bool | None):
    """torchrun's ChildFailedError for one worker that exited ``exitcode``, its error file written by
    :func:`promise.mark_user_error` (``marked``), by someone else (``False``) or absent (``None``)."""
    error_file = tmp_path / "error.json"
    if marked:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TORCHELASTIC_ERROR_FILE", str(error_file))
            promise.mark_user_error("epochs must be a positive integer, got 0")
    elif marked is False:
        error_file.write_text('{"message": {"message": "ValueError: something else", "extraInfo": {"timestamp": "1"}}}')
    worker = errors.ProcessFailure(local_rank=0, pid=1, exitcode=exitcode, error_file=str(error_file))
    return errors.ChildFailedError(name="train.py", failures={0: worker})


def test_a_marked_worker_that_exited_2_is_a_reported_user_error(tmp_path):
    assert promise.is_user_error(failure(tmp_path, 2, marked=True))
    assert "pfzoo user error: epochs must be a positive integer, got 0" in failure(tmp_path, 2, marked=True).format_msg()


@pytest.mark.parametrize("exitcode", [2, 3])
def test_torchrun_passes_on_the_reported_exit_code_a_user_error_2_a_divergence_3(tmp_path, exitcode):
    """A training run the divergence guard stopped exits 3 under torchrun as it does alone (issue 51), not torchrun's 1."""
    assert promise.reported_exit(failure(tmp_path, exitcode, marked=True)) == exitcode
    assert (promise.EXIT_USAGE, promise.EXIT_DIVERGED) == (cli.EXIT_USAGE, cli.EXIT_DIVERGED) == (2, 3)


@pytest.mark.parametrize("exitcode, marked", [(2, None), (2, False), (3, None), (3, False), (1, True), (-15, None)])
def test_any_other_failure_is_not(tmp_path, exitcode, marked):
    assert not promise.is_user_error(failure(tmp_path, exitcode, marked))
    assert promise.reported_exit(failure(tmp_path, exitcode, marked)) is None
    assert not promise.is_user_error(ValueError("not torchrun's"))


def test_outside_torchrun_the_mark_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE", raising=False)
    monkeypatch.chdir(tmp_path)
    promise.mark_user_error("anything")
    assert list(tmp_path.iterdir()) == []


def test_agent_notes_hold_only_the_notes_on_failed_workers_until_dropped_or_released(caplog):
    agent = logging.getLogger("torch.distributed.elastic.multiprocessing.api")
    notes = promise.AgentNotes()
    try:
        with caplog.at_level(logging.WARNING, logger=agent.name):
            agent.error("failed (exitcode: %s) local_rank: %s", 2, 0)
            agent.warning("Sending process %s closing signal SIGTERM", 7)
            agent.warning("something else")
            assert [r.getMessage() for r in caplog.records] == ["something else"]
            notes.release()
            assert [r.getMessage() for r in caplog.records] == ["something else", "failed (exitcode: 2) local_rank: 0", "Sending process 7 closing signal SIGTERM"]
            agent.error("failed (exitcode: %s) local_rank: %s", 2, 1)  # released notes no longer filter
            assert len(caplog.records) == 4
    finally:
        notes.detach()
    dropped = promise.AgentNotes()
    with caplog.at_level(logging.WARNING, logger=agent.name):
        agent.error("failed (exitcode: %s) local_rank: %s", 2, 0)
        dropped.drop()
        dropped.release()
    assert len(caplog.records) == 4


def test_the_entry_point_is_declared_and_its_backend_refuses_with_one_line():
    assert "pfzoo.torchrun:rendezvous_plugin" in [e.value for e in entry_points(group="torchrun.handlers")], "pip install -e . to register it"
    with pytest.raises(ValueError, match=r"^rdzv_backend 'pfzoo' is no rendezvous backend: .*use c10d"):
        promise.refuse_rendezvous(None)
