"""The summary of a ``-m`` sweep: one row per job (its number, the overrides that set it apart, its headline numbers
or its error), printed as a table at the end of the sweep and written as ``summary.csv`` in the sweep's folder."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Mapping, Sequence

SUMMARY_FILE = "summary.csv"


def headline(task: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """The numbers a sweep compares, from :func:`~pfzoo.app.train`'s or :func:`~pfzoo.app.evaluate`'s ``result``:
    the test log-likelihood with its standard error and kind (exact, estimate, bound), for train the last epoch and
    its loss, for evaluate ``log Z`` (a ``versus=`` comparison: the difference of the two models), and the seconds."""
    if task == "train":
        final = result.get("test_log_likelihood") or {}
        return {"test_log_likelihood": final.get("mean"), "stderr": final.get("stderr"), "kind": short_kind(final.get("kind")),
                "epochs": result["metrics"].get("epoch"), "loss": result["metrics"].get("loss"), "seconds": result["seconds"]}
    if "comparison" in result:
        comparison = result["comparison"]
        return {"difference": comparison["difference"], "stderr": comparison["stderr"], "better": comparison["better"],
                "seconds": result["seconds"]}
    return {"test_log_likelihood": result.get("test_log_likelihood"), "stderr": result.get("test_log_likelihood_stderr"),
            "kind": short_kind(result.get("kind")), "log_z": result.get("log_z"), "log_z_stderr": result.get("log_z_stderr"),
            "seconds": result["seconds"]}


def short_kind(kind: str | None) -> str | None:
    """A likelihood's kind up to its explanation (``"unbiased Z: stochastic lower bound ..."`` → ``"unbiased Z"``)."""
    return None if kind is None else kind.split(":")[0]


def distinct_overrides(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each row's ``overrides`` (a list of ``key=value``) without those every job shares (e.g. ``run_dir``), joined by
    spaces: what tells the jobs apart."""
    shared = set.intersection(*(set(row["overrides"]) for row in rows)) if len(rows) > 1 else set()
    return [" ".join(override for override in row["overrides"] if override not in shared) for row in rows]


def summary_table(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The header and cells of the summary: ``job``, ``overrides``, then every other key of the rows in order of first
    appearance (numbers to 6 significant figures, missing ones empty)."""
    columns = ["job", "overrides"]
    for row in rows:
        columns += [key for key in row if key not in columns]
    cells = []
    for row, overrides in zip(rows, distinct_overrides(rows)):
        values = {**row, "overrides": overrides}
        cells.append([format_cell(values.get(column)) for column in columns])
    return columns, cells


def format_cell(value: Any) -> str:
    """A number to 6 significant figures, ``None`` empty, anything else as text."""
    if value is None:
        return ""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def format_summary(rows: Sequence[Mapping[str, Any]]) -> str:
    """The summary as an aligned text table, one line per job."""
    columns, cells = summary_table(rows)
    widths = [max(len(text) for text in [column, *(line[index] for line in cells)]) for index, column in enumerate(columns)]
    lines = ["  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip() for line in [columns, *cells]]
    return "\n".join([f"sweep summary ({len(rows)} jobs):", *lines])


def write_summary(folder: str | Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write the summary as ``<folder>/summary.csv``; returns its path."""
    path = Path(folder) / SUMMARY_FILE
    columns, cells = summary_table(rows)
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(columns)
        writer.writerows(cells)
    return path
