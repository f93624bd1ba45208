"""``pfzoo zoo`` (``python -m pfzoo zoo``, alias ``list``): the pretrained weights as a table (name, family, data, headline log-likelihood, estimator, parameters,
file size), filtered by family or data set; ``--names`` prints the names alone, one a line (for scripts and shell
completion)."""

from __future__ import annotations

import argparse
import difflib
from typing import Sequence

from pfzoo import zoo
from pfzoo.zoo import PretrainedWeights


def headline(entry: PretrainedWeights) -> str:
    """``−94.19 ± 0.35`` (nats; no ± for an exact value; three decimals when the stderr is under 0.01), a true minus sign."""
    stderr = entry.log_likelihood_stderr
    digits = 3 if 0 < stderr < 0.01 else 2  # as the cards print them: a small stderr keeps a significant digit
    value = f"{entry.log_likelihood:.{digits}f}" + (f" ± {stderr:.{digits}f}" if stderr else "")
    return value.replace("-", "−")


def file_size(size: int) -> str:
    """``51 kB``, ``1.6 MB``: a file size in decimal units."""
    return f"{size / 1e3:.0f} kB" if size < 1e6 else f"{size / 1e6:.1f} MB"


def format_zoo(entries: Sequence[PretrainedWeights], defaults: set[str]) -> str:
    """A plain-text table of ``entries``; the names in ``defaults`` (their families' ``DEFAULT``) are starred."""
    header = ("name", "family", "data", "test log-likelihood (nats)", "estimator", "examples", "parameters", "file")
    rows = [(f"{entry.name}{' *' if entry.name in defaults else ''}", entry.family, entry.dataset, headline(entry), entry.estimator,
             "—" if entry.num_test is None else str(entry.num_test), f"{entry.num_parameters:,}", file_size(entry.file_size))
            for entry in entries]
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    right = {3, 5, 6, 7}  # numbers line up on the right
    lines = ["  ".join(cell.rjust(width) if column in right else cell.ljust(width) for column, (cell, width) in enumerate(zip(row, widths))).rstrip()
             for row in [header, *rows]]
    return "\n".join([*lines, "", "* the family's DEFAULT weights (Family.from_pretrained(\"DEFAULT\")). Load one with "
                      "pfzoo.zoo.pretrained(NAME); measure it with pfzoo evaluate pretrained=NAME; draw from it with "
                      "pfzoo sample pretrained=NAME."])


def zoo_listing(argv: Sequence[str]) -> str:
    """What ``pfzoo zoo [--family F] [--data D] [--names] [--zoo-dir DIR]`` prints: the table, or the names one a
    line; a user error (``ValueError``) for a family or data set that has no weights, naming those that do."""
    parser = argparse.ArgumentParser(prog="pfzoo zoo", description="list the pretrained zoo: name, family, data, test log-likelihood, size")
    parser.add_argument("--family", help="keep one model family (a registry name such as rbm, dbm, poe)")
    parser.add_argument("--data", help="keep one data set (digits, binarized_mnist, patches, ...)")
    parser.add_argument("--names", action="store_true", help="print the names alone, one a line")
    parser.add_argument("--zoo-dir", default=None, help="the zoo folder (default: the installed zoo)")
    parser.error = _refuse  # one line, exit 2 through pfzoo.cli, instead of argparse's usage block
    args = parser.parse_args(list(argv))
    entries = zoo.list_pretrained_weights(zoo_dir=args.zoo_dir)
    for key, value in (("family", args.family), ("dataset", args.data)):
        if value is not None:
            known = sorted({getattr(entry, key) for entry in entries})
            if value not in known:
                nearest = difflib.get_close_matches(value, known, n=1)
                hint = f"did you mean {nearest[0]}? " if nearest else ""
                raise ValueError(f"--{'data' if key == 'dataset' else key}={value} has no weights in the zoo; {hint}choose one of {', '.join(known)}")
            entries = [entry for entry in entries if getattr(entry, key) == value]
    if args.names:
        return "\n".join(entry.name for entry in entries)
    families = {entry.family for entry in entries}
    return format_zoo(entries, {zoo.default_weights(family, zoo_dir=args.zoo_dir).name for family in families})


def _refuse(message: str) -> None:
    raise ValueError(f"pfzoo zoo: {message} (pfzoo zoo --help lists its options)")
