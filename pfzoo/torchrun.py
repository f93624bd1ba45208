"""The one-line error promise under ``torchrun``: a user error prints ``error: ...`` once and every process exits 2
(a training run the divergence guard stopped: 3), as without torchrun.

The workers keep the promise themselves (rank 0 prints the line, all ranks exit :data:`EXIT_USAGE`, or
:data:`EXIT_DIVERGED`, together), but
the ``torchrun`` process turns any worker that exits non-zero into a ``ChildFailedError``: a traceback, a failure
table and exit 1. No worker can change that, so pfzoo reaches into the ``torchrun`` process through torch's own
extension point for it: torch loads every ``torchrun.handlers`` entry point (out-of-tree rendezvous backends) when it
imports its elastic launcher, and pfzoo's (:func:`rendezvous_plugin`, declared in setup.cfg) installs
:func:`keep_promise` there. It acts only on a failure whose first failed worker left pfzoo's mark in its torchelastic
error file (:func:`mark_user_error`): then the agent's notes about the stopped workers are dropped and ``torchrun``
exits with the workers' code (:data:`REPORTED_EXITS`) and their one line alone. Every other failure, and every program that is not pfzoo's, keeps
``torchrun``'s own report. ``pfzoo-torchrun`` (:func:`pfzoo.cli.torchrun_main`) does the same where the entry
point is not installed (a checkout run without ``pip install``).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import time

EXIT_USAGE = 2
EXIT_DIVERGED = 3
"""What a training run the divergence guard stopped exits with (its checkpoint holds the last good parameters)."""
REPORTED_EXITS = (EXIT_USAGE, EXIT_DIVERGED)
"""The exit codes of failures the workers report in one line themselves; torchrun passes them on unchanged."""
MARK = "pfzoo user error: "
"""How a worker's torchelastic error file says that the failure is a user error pfzoo has already reported."""
AGENT_NOTES = {  # logger → the starts of its messages about a failed worker, which a reported user error makes noise
    "torch.distributed.elastic.multiprocessing.api": ("failed (exitcode", "Sending process", "Closing process"),
    "torch.distributed.elastic.multiprocessing.errors.error_handler": ("no error file defined for parent", "dumped error file"),
}
RENDEZVOUS_NAME = "pfzoo"
_promise: AgentNotes | None = None  # this process's, once kept: the entry point and pfzoo-torchrun may both ask


def mark_user_error(message: str) -> None:
    """In a worker started by torchrun, write ``message`` with :data:`MARK` into this worker's torchelastic error file
    (``$TORCHELASTIC_ERROR_FILE``, which torchrun reads when the worker exits); elsewhere do nothing."""
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not error_file:
        return
    record = {"message": {"message": MARK + message, "extraInfo": {"timestamp": str(int(time.time()))}}}
    partial = f"{error_file}.{os.getpid()}.tmp"
    with open(partial, "w") as stream:
        json.dump(record, stream)
    os.replace(partial, error_file)  # torchrun must never read half a file


def reported_exit(failure: BaseException) -> int | None:
    """The exit code torchrun passes on when ``failure`` is its ``ChildFailedError`` for an error the workers have
    reported: its first failed worker exited one of :data:`REPORTED_EXITS` with :data:`MARK` in its error file
    (``None`` for any other failure)."""
    first = getattr(failure, "get_first_failure", None)
    if first is None:
        return None
    _, worker = first()
    message = worker.message.get("message", "") if isinstance(worker.message, dict) else worker.message  # the error file's record
    return worker.exitcode if worker.exitcode in REPORTED_EXITS and str(message).startswith(MARK) else None


def is_user_error(failure: BaseException) -> bool:
    """Whether ``failure`` is torchrun's ``ChildFailedError`` for an error the workers have reported (:func:`reported_exit`)."""
    return reported_exit(failure) is not None


class AgentNotes(logging.Filter):
    """Holds back the torchrun agent's log lines about failed and stopped workers (:data:`AGENT_NOTES`) until it is
    known whether the failure was a reported user error: :meth:`drop` forgets them, :meth:`release` logs them."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[tuple[logging.Logger, logging.LogRecord]] = []
        self.loggers = {name: logging.getLogger(name) for name in AGENT_NOTES}
        for log in self.loggers.values():
            log.addFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        starts = AGENT_NOTES.get(record.name, ())
        if isinstance(record.msg, str) and record.msg.startswith(starts):
            self.held.append((self.loggers[record.name], record))
            return False
        return True

    def detach(self) -> None:
        for log in self.loggers.values():
            log.removeFilter(self)

    def drop(self) -> None:
        self.detach()
        self.held.clear()

    def release(self) -> None:
        self.detach()
        held, self.held = self.held, []
        for log, record in held:
            log.handle(record)


def keep_promise() -> AgentNotes:
    """In the torchrun process: hold the agent's notes on failed workers, and end a run that failed with a reported
    error (:func:`reported_exit`) with the workers' exit code (2 for a user error, 3 for a diverged training run) and no
    traceback; any other end releases the notes as they were.
    Installed once per process; later calls return the same notes."""
    global _promise
    if _promise is not None:
        return _promise
    notes = _promise = AgentNotes()
    default_hook = sys.excepthook

    def hook(kind, error, traceback) -> None:
        code = reported_exit(error)
        if code is not None:
            notes.drop()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)  # an exception hook cannot set the exit status otherwise; the agent has stopped its workers
        notes.release()
        default_hook(kind, error, traceback)

    sys.excepthook = hook
    atexit.register(notes.release)  # a run that recovered (max_restarts) keeps every note
    return notes


def refuse_rendezvous(params):
    """What ``--rdzv-backend=pfzoo`` gets: pfzoo registers the name only to reach the torchrun process."""
    raise ValueError(f"rdzv_backend {RENDEZVOUS_NAME!r} is no rendezvous backend: pfzoo registers the name only to keep its one-line "
                     "error promise under torchrun; use c10d (the default with --standalone) or another backend")


def rendezvous_plugin():
    """The ``torchrun.handlers`` entry point: torch calls it once as its elastic launcher is imported, in the torchrun
    process and any other that imports the launcher; it installs :func:`keep_promise` there and returns the creator of
    the (refusing) rendezvous backend torch registers under the entry point's name."""
    keep_promise()
    return refuse_rendezvous
