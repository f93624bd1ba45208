"""Thesis Figs. 3.6 and 3.8–3.10 (§3.4, Hillar, Sohl-Dickstein & Koepsell 2012) at their settings, merged into a
reports/hopfield results.json, whose README.md is then re-rendered (as ``reproduce_hopfield.py --render`` does).

    python scripts/hopfield_figures.py fig36_images          # 80 grass images in 4096 units (about 5 min on 2 cores)
    python scripts/hopfield_figures.py fig38_training_time  # n = 64, m = 1..120, t = 20: stored fraction and seconds
    python scripts/hopfield_figures.py fig39_recall_by_load # n = 128, four m, recovery against flipped bits
    python scripts/hopfield_figures.py fig310_corrupted     # n = 64, copies with 20 of 64 bits flipped, t = 13
    python scripts/hopfield_figures.py fig310_corrupted --set independent=true pattern_counts=1,2,4 --ablation "..."

``--set key=value`` changes a setting (lists comma-separated); ``--ablation TEXT`` files the run under the figure's
ablations with TEXT naming the one setting it changes, instead of replacing the figure's run. The studies are in
:mod:`pfzoo.studies.hopfield_figures` and :mod:`pfzoo.studies.hopfield_images`; the report in
:mod:`pfzoo.studies.hopfield_report`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

import torch

from pfzoo.data.images import read_image
from pfzoo.data.root import resolve_data_root
from pfzoo.studies.hopfield_figures import FIGURES, run_figure
from pfzoo.studies.hopfield_report import report
from pfzoo.studies.reporting import run_header

REPO = Path(__file__).resolve().parents[1]
IMAGE = "natural_images/vanhateren_tvlearn_ecml2022.tiff"


def parse_value(text: str, default):
    """``text`` read as the type of the setting's ``default`` (lists comma-separated)."""
    if isinstance(default, bool):
        return text.lower() in ("1", "true", "yes")
    if isinstance(default, list):
        return [type(default[0])(item) for item in text.split(",")]
    return type(default)(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("figure", choices=sorted(FIGURES))
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", help="settings to change (see FIGURES)")
    parser.add_argument("--ablation", default=None, help="file the run as an ablation changing the setting this names")
    parser.add_argument("--results", type=Path, default=REPO / "reports" / "hopfield" / "results.json")
    parser.add_argument("--data-root", default=None, help=f"folder holding {IMAGE} (default $PFZOO_DATA, else ../shared/data)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    settings = dict(FIGURES[args.figure])
    for item in args.set:
        key, _, value = item.partition("=")
        if key not in settings:
            parser.error(f"--set: {args.figure} has no setting {key!r}; it has {', '.join(settings)}")
        settings[key] = parse_value(value, settings[key])
    torch.set_num_threads(args.threads)
    root = args.data_root or (None if os.environ.get("PFZOO_DATA") else REPO.parent / "shared" / "data")

    def load_image():
        return read_image(resolve_data_root(root) / IMAGE)

    header = run_header(sys.argv, args.threads)
    results = run_figure(args.figure, settings, load_image=load_image,
                         on_progress=lambda line: print(f"{datetime.datetime.now():%H:%M:%S} {line}", flush=True))
    section = {**header, "settings": settings, **results}
    record = json.loads(args.results.read_text())
    if args.ablation:
        section["change"] = args.ablation
        ablations = [a for a in record.get(f"{args.figure}_ablations", []) if a["change"] != args.ablation]
        record[f"{args.figure}_ablations"] = ablations + [section]
    else:
        record[args.figure] = section
    args.results.write_text(json.dumps(record, indent=1))
    (args.results.parent / "README.md").write_text(report(record, args.results.parent))
    print(f"wrote {args.results} and {args.results.parent}/README.md")


if __name__ == "__main__":
    main()
