"""RAISE Figure 5 and the mass diagnosis (Burda, Grosse & Salakhutdinov 2015, §5.1) on the zoo's CD-1 RBMs and ablations.

    python scripts/diagnose_raise_mass.py [--data-root DIR] [--models cd1-20 cd1-500 cd1-500-5-epochs ...]
    python scripts/diagnose_raise_mass.py --quick                     # smoke run → reports/raise_mass/quick/
    python scripts/diagnose_raise_mass.py --render reports/raise_mass/results.json

Per model (the zoo's checkpoints, or recipes of :data:`pfzoo.studies.raise_mass_report.ABLATIONS` trained here in
``runs/raise_mass/<name>``): the probability mass on the RBM's most probable hidden configuration and the entropy of p(h)
(by enumeration for 20 hidden units, else from the importance-weighted end states of base-rate AIS), AIS from uniform
against base rates, RAISE from uniform, and samples of p_ann beside the RBM's (Figure 5) as
``<output>/figures/<model>-samples.png`` (:mod:`pfzoo.studies.raise_mass_report`). Each model's entry is stored in
``<output>/results.json`` as soon as it is measured, with its checkpoint's SHA-256; a rerun skips the models already
stored for the same checkpoint (``--fresh`` measures them again). ``README.md`` is rendered from results.json alone.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
from pathlib import Path

import torch

from pfzoo import app, pictures, zoo
from pfzoo.cli import compose
from pfzoo.data import binarized_mnist
from pfzoo.data.root import resolve_data_root
from pfzoo.studies.raise_mass_report import ABLATIONS, QUICK, SETTINGS, ZOO, measure, mode_images, readme, search_modes
from pfzoo.studies.raise_results import checkpoint_record
from pfzoo.studies.reporting import machine_description

REPO = Path(__file__).resolve().parents[1]


def checkpoint_of(name: str, runs_dir: Path, data_root: Path, quick: bool) -> Path:
    """The zoo checkpoint of ``name``, or an ablation recipe trained (or resumed) in ``<runs_dir>/<name>``."""
    if name in ZOO:
        return REPO / "models" / ZOO[name] / zoo.CHECKPOINT_FILE
    recipe, overrides, _ = ABLATIONS[name]
    cfg = compose("train", [f"+experiment={recipe}", *overrides, "trainer.progress=false", f"run_dir={runs_dir / name}",
                            f"data.root={data_root}", "resume=true", *(["trainer.epochs=1"] if quick else [])])
    return Path(app.train(cfg)["checkpoint"])


def raise_table_entries() -> tuple[dict | None, dict | None]:
    """The zoo CD1(500)'s uniform sweep in estimators/raise/results.json and its paper-scale entry, where committed."""
    table, paper = (REPO / "estimators" / "raise" / folder / "results.json" for folder in ("", "paper_scale"))
    sweep = json.loads(table.read_text())["sweeps"].get("cd1-500@uniform") if table.is_file() else None
    return sweep, json.loads(paper.read_text())["models"].get("cd1-500") if paper.is_file() else None


def today() -> str:
    return f"{datetime.date.today().isoformat()}, {machine_description()}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=None, help="folder holding binarized_mnist/ (default $PFZOO_DATA or ../shared/data)")
    parser.add_argument("--output", type=Path, default=None, help="README.md, results.json, figures/ (default reports/raise_mass[/quick])")
    parser.add_argument("--runs-dir", type=Path, default=None, help="ablation trainings (default runs/raise_mass[/quick])")
    parser.add_argument("--models", nargs="+", choices=[*ZOO, *ABLATIONS], default=[*ZOO, *ABLATIONS])
    for key, default in SETTINGS.items():
        parser.add_argument("--" + key.replace("_", "-"), type=int, default=default)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fresh", action="store_true", help="measure the models again even where results.json holds them")
    parser.add_argument("--quick", action="store_true", help="one training epoch and tiny annealings: a smoke run")
    parser.add_argument("--render", type=Path, metavar="RESULTS_JSON", help="measure nothing: rewrite README.md from results.json")
    args = parser.parse_args(argv)
    if args.render is not None:
        (args.render.parent / "README.md").write_text(readme(json.loads(args.render.read_text()), *raise_table_entries()))
        return print(f"rewrote {args.render.parent / 'README.md'}")
    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    data_root = args.data_root or resolve_data_root(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")
    if not (data_root / "binarized_mnist").is_dir():
        parser.error(f"{data_root}/binarized_mnist is missing; pass --data-root or set PFZOO_DATA")
    output = args.output or REPO / "reports" / "raise_mass" / ("quick" if args.quick else "")
    runs_dir = args.runs_dir or REPO / "runs" / "raise_mass" / ("quick" if args.quick else "")
    settings = {key: getattr(args, key) for key in SETTINGS} | (QUICK if args.quick else {})
    results_file = output / "results.json"
    stored = json.loads(results_file.read_text()) if results_file.is_file() and not (args.fresh or args.quick) else {}
    results = {"settings": settings, "seed": args.seed, "models": stored.get("models", {}) if stored.get("settings") == settings else {}}
    data = binarized_mnist(data_root)
    (output / "figures").mkdir(parents=True, exist_ok=True)
    for name in args.models:
        checkpoint = checkpoint_of(name, runs_dir, data_root, args.quick)
        record = checkpoint_record(checkpoint, REPO)  # an ablation's run folder is not committed: its hash says which model it was
        stored_entry = results["models"].get(name, {})
        model = zoo.load(checkpoint).requires_grad_(False)
        if stored_entry.get("checkpoint_sha256") == record["checkpoint_sha256"]:
            if "blank_log10_mass" in stored_entry.get("mode_search", {}):  # every field the current search records
                print(f"{name}: stored for this checkpoint, skipped (--fresh measures it again)", flush=True)
                continue
            print(f"{name}: stored; adding the mode search", flush=True)  # entries stored before the search existed
            stored_entry["mode_search"] = search_modes(model, data, stored_entry) | {"measured_on": today()}
        else:
            print(f"{name}: measuring {checkpoint}", flush=True)
            entry, grids = measure(model, data, settings, args.seed)
            pictures.save_labelled_grids(grids, data.image_shape, output / "figures" / f"{name}-samples.png")
            results["models"][name] = {**record, **entry, "measured_on": today(), "threads": args.threads}
        pictures.save_labelled_grids(mode_images(model, results["models"][name]), data.image_shape, output / "figures" / f"{name}-modes.png")
        results_file.write_text(json.dumps(results, indent=2) + "\n")
        (output / "README.md").write_text(readme(results, *raise_table_entries()))
    print(f"results written to {output}")


if __name__ == "__main__":
    main()
