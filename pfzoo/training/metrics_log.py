"""A run's ``metrics.jsonl``: one JSON object per epoch, appended as the run goes, cut back to a checkpoint on resume."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Mapping

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"


class MetricsLog:
    """The JSON-lines file ``<run_dir>/metrics.jsonl``: each line one epoch's record ``{"epoch": int, name: value, ...}``
    (``json.dumps`` of the record, so full precision and the record's key order)."""

    def __init__(self, run_dir: str | os.PathLike) -> None:
        self.path = Path(run_dir) / METRICS_FILE

    def append(self, record: Mapping[str, Any]) -> None:
        """Add one epoch's record as the file's last line."""
        with self.path.open("a") as file:
            file.write(json.dumps(record) + "\n")

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
        return records


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
