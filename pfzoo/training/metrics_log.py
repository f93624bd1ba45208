"""A run's metrics files: ``metrics.jsonl`` (one JSON object per epoch, the source of truth), its table
``metrics.csv`` and optionally TensorBoard event files, appended as the run goes, cut back to a checkpoint on resume."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"
CSV_FILE = "metrics.csv"
TENSORBOARD_DIR = "tensorboard"


def check_tensorboard(requested: bool) -> None:
    """Refuse ``tensorboard=true`` in one line when the tensorboard package is missing (the app asks before loading data)."""
    if requested and importlib.util.find_spec("tensorboard") is None:
        raise ValueError("tensorboard=true needs the tensorboard package (pip install tensorboard); "
                         "metrics.jsonl and metrics.csv need nothing")


class MetricsLog:
    """The JSON-lines file ``<run_dir>/metrics.jsonl``: each line one epoch's record ``{"epoch": int, name: value, ...}``
    (``json.dumps`` of the record, so full precision and the record's key order).

    With ``csv`` (default) the same records also go to ``<run_dir>/metrics.csv``: a header row naming the union of the
    records' keys in order of first appearance (a metric that appears later, e.g. ``test_log_likelihood`` at estimator
    epochs, rewrites the table from ``metrics.jsonl`` with the wider header), then one row per epoch, a record's
    missing keys and ``None`` values as empty cells, numbers at full precision (``repr``). With ``tensorboard``
    every numeric value is also a scalar at step ``epoch`` in ``<run_dir>/tensorboard/`` (needs the ``tensorboard``
    package: refused in one line naming it otherwise; a resume drops the events past the checkpoint's epoch).
    """

    def __init__(self, run_dir: str | os.PathLike, *, csv: bool = True, tensorboard: bool = False) -> None:
        self.path = Path(run_dir) / METRICS_FILE
        self.csv_path = Path(run_dir) / CSV_FILE if csv else None
        check_tensorboard(tensorboard)
        self.tensorboard_dir = Path(run_dir) / TENSORBOARD_DIR if tensorboard else None
        self._columns: list[str] | None = None  # the CSV's header, once read or written
        self._writer = None  # the TensorBoard SummaryWriter, opened at the first record
        self._purge_step: int | None = None  # a resumed run's first epoch: TensorBoard discards events from it on

    def append(self, record: Mapping[str, Any]) -> None:
        """Add one epoch's record as the file's last line (and row of the table, and TensorBoard scalars)."""
        with self.path.open("a") as file:
            file.write(json.dumps(record) + "\n")
        if self.csv_path is not None:
            self._append_row(record)
        if self.tensorboard_dir is not None:
            self._add_scalars(record)

    def close(self) -> None:
        """Flush and close the TensorBoard writer, if one is open (the text files are closed after each write)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _append_row(self, record: Mapping[str, Any]) -> None:
        """``record`` as the table's last row, or the whole table rewritten when it brings a new key."""
        if self._columns is None and self.csv_path.is_file():
            with self.csv_path.open(newline="") as file:
                self._columns = next(csv.reader(file), None)
        if self._columns is not None and set(record) <= set(self._columns):
            with self.csv_path.open("a", newline="") as file:
                file.write(table_rows([record], self._columns))
        else:
            self._write_table(read_records(self.path))

    def _write_table(self, records: list[dict[str, Any]]) -> None:
        """The whole table of ``records`` (header: the union of their keys)."""
        self._columns = union_of_keys(records)
        self.csv_path.write_text(table_rows(records, self._columns, header=True))

    def _add_scalars(self, record: Mapping[str, Any]) -> None:
        """Every number of ``record`` as a TensorBoard scalar at step ``record["epoch"]``."""
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter  # optional: only with the tensorboard package

            self._writer = SummaryWriter(str(self.tensorboard_dir), purge_step=self._purge_step)
            self._purge_step = None  # purged once: a writer reopened later (amend_last) must not purge this run's epochs
        for key, value in record.items():
            if key != "epoch" and isinstance(value, (int, float)) and not isinstance(value, bool):
                self._writer.add_scalar(key, value, global_step=record["epoch"])
        self._writer.flush()

    def amend_last(self, values: Mapping[str, Any]) -> dict[str, Any] | None:
        """Merge ``values`` into the last record (a run's closing numbers beside its last epoch's): ``metrics.jsonl``'s
        last line and the CSV table (rewritten with the new columns) and, with TensorBoard, the numbers as scalars at
        that epoch; returns the amended record (``None`` when there is none, nothing written)."""
        records = read_records(self.path)
        if not records:
            return None
        records[-1] = {**records[-1], **values}
        self.path.write_text("".join(json.dumps(record) + "\n" for record in records))
        if self.csv_path is not None:
            self._write_table(records)
        if self.tensorboard_dir is not None:
            self._add_scalars({"epoch": records[-1]["epoch"], **values})
        return records[-1]

    def rewrite_through(self, epoch: int) -> list[dict[str, Any]]:
        """Keep only the records of epochs ≤ ``epoch`` (later ones postdate the checkpoint); return them, oldest first.

        A line that is not a JSON record (the last line torn by a kill mid-write) is dropped with a warning."""
        records = []
        if self.path.is_file():
            with self.path.open() as file:
                for number, line in enumerate(file, 1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError:
                        record = None
                    if not isinstance(record, dict) or not isinstance(record.get("epoch"), int):
                        logger.warning("%s line %d is not a metrics record (torn by a kill?); dropped", self.path, number)
                    elif record["epoch"] <= epoch:
                        records.append(record)
        missing = sorted(set(range(1, epoch + 1)) - {record["epoch"] for record in records})
        if missing:  # deleted or cut by hand: the run goes on, but those epochs' metrics are gone
            logger.warning("%s lacks the records of %d of the checkpoint's %d epochs (%s); resuming without them",
                           self.path, len(missing), epoch, describe_epochs(missing))
        self.path.write_text("".join(json.dumps(record) + "\n" for record in records))
        if self.csv_path is not None:
            self._write_table(records)
        if epoch > 0:  # TensorBoard drops the events of later epochs (written before a kill) as its writer reopens
            self.close()
            self._purge_step = epoch + 1
        return records


def read_records(path: Path) -> list[dict[str, Any]]:
    """The JSON records of a metrics file, oldest first (lines that are not records skipped)."""
    records = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                records.append(record)
    return records


def union_of_keys(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every key of ``records`` once, in order of first appearance (``epoch`` first)."""
    columns: dict[str, None] = {"epoch": None}
    for record in records:
        columns.update(dict.fromkeys(record))
    return list(columns)


def table_rows(records: Iterable[Mapping[str, Any]], columns: list[str], *, header: bool = False) -> str:
    """CSV text of ``records`` under ``columns`` (missing keys and ``None`` empty, floats at full precision)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if header:
        writer.writerow(columns)
    for record in records:
        writer.writerow(["" if record.get(column) is None else cell(record[column]) for column in columns])
    return buffer.getvalue()


def cell(value: Any) -> str:
    """One CSV cell: floats by ``repr`` (round-trips exactly), anything else by ``str``."""
    return repr(value) if isinstance(value, float) else str(value)


def describe_epochs(epochs: list[int]) -> str:
    """Sorted epoch numbers as ranges, e.g. ``[1, 2, 3, 5]`` → ``"epochs 1-3, 5"``."""
    runs: list[list[int]] = []
    for epoch in epochs:
        if runs and epoch == runs[-1][-1] + 1:
            runs[-1].append(epoch)
        else:
            runs.append([epoch])
    return "epochs " + ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def format_record(record: Mapping[str, Any]) -> str:
    """One epoch's metrics on one line, about 4 significant figures (metrics.jsonl keeps full precision)."""
    parts = []
    for key, value in record.items():
        if key == "epoch":
            continue
        parts.append(f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}")
    return "  ".join(parts)
