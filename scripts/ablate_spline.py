"""Why the moment-averaged spline falls short from a uniform base on the CD1(500) RBM: an ablation, one setting at a time.

    python scripts/ablate_spline.py --data-root ../shared/data           # every row of pfzoo.studies.spline_ablation.ROWS
    python scripts/ablate_spline.py --rows default "10 knots"            # some rows (merged into the stored ones)
    python scripts/ablate_spline.py --render                             # re-render the markdown from the stored JSON

Writes reports/paths/spline_ablation.json (rows merged by name as they finish), reports/paths/spline_ablation.md (the
section), and stores the same dict under the key ``spline_ablation`` of reports/paths/results.json (other keys untouched),
from which ``scripts/reproduce_paths.py --render reports/paths/results.json`` puts the section into reports/paths/README.md.
Each row: the spline from a uniform base built with one setting changed from the builder's defaults, AIS at K = 10³ (and
10⁴ for the --long rows), linear schedule, 100 chains; its target moments against importance-weighted moments of
geometric AIS; its knots' residual moment mismatch; for the default row also an independent log Z at every knot.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
from pathlib import Path

import torch

import pfzoo
from pfzoo import zoo
from pfzoo.data import binarized_mnist
from pfzoo.data.root import resolve_data_root
from pfzoo.studies.path_comparison import RBM_MODELS
from pfzoo.studies.reporting import load_average, machine_description
from pfzoo.studies.spline_ablation import DEFAULT, REFERENCE_AIS, ROWS, MomentCache, ablation_markdown, ablation_row, reference_summary

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "reports" / "paths"
CHECKS = {"chains": 300, "burn_in": 200, "sweeps": 50, "from_data_too": False, "reference_steps": 0}
DEFAULT_CHECKS = {"chains": 300, "burn_in": 200, "sweeps": 50, "from_data_too": True, "reference_steps": 2000, "reference_chains": 100}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS), help="rows to (re)measure")
    parser.add_argument("--long-rows", nargs="*", default=["moments from data", "moments by AIS"], help="rows also run at --long-steps")
    parser.add_argument("--steps", type=int, default=1000, help="AIS steps K of every row")
    parser.add_argument("--long-steps", type=int, default=10_000, help="AIS steps K of the --long-rows as well")
    parser.add_argument("--chains", type=int, default=100, help="AIS chains")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data-root", type=Path, default=None, help="folder holding binarized_mnist/")
    parser.add_argument("--out-dir", type=Path, default=OUT, help="folder of spline_ablation.json/.md and results.json")
    parser.add_argument("--render", action="store_true", help="only re-render the markdown from the stored JSON")
    args = parser.parse_args(argv)
    store = args.out_dir / "spline_ablation.json"
    ablation = json.loads(store.read_text()) if store.is_file() else {}
    if not args.render:
        torch.set_num_threads(args.threads)
        logging.basicConfig(format="%(message)s", level=logging.INFO)
        data_root = resolve_data_root(args.data_root or os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")
        if not (data_root / "binarized_mnist").is_dir():
            parser.error(f"needs {data_root}/binarized_mnist; pass --data-root or set PFZOO_DATA")
        train, cache, models = binarized_mnist(data_root).train, MomentCache(), {}
        ablation.update(date=datetime.date.today().isoformat(), pfzoo=pfzoo.__version__, torch=torch.__version__,
                        machine=machine_description(), threads=args.threads, base="uniform", chains=args.chains, seed=args.seed,
                        default_model=DEFAULT.model, reference_ais=REFERENCE_AIS, checks=CHECKS, default_checks=DEFAULT_CHECKS)
        rows = {row["setting"]["name"]: row for row in ablation.get("rows", [])}
        for name in args.rows:
            setting = ROWS[name]
            if setting.model not in models:
                models[setting.model] = zoo.load(REPO / "models" / RBM_MODELS[setting.model] / "checkpoint.pt")
            steps = [args.steps] + ([args.long_steps] if name in args.long_rows else [])
            rows[name] = ablation_row(models[setting.model], setting, train, cache, steps=steps, chains=args.chains, seed=args.seed,
                                      checks=DEFAULT_CHECKS if setting == DEFAULT else CHECKS,
                                      compare_geometric=setting.model != DEFAULT.model)
            logging.info("%s: %s", name, ", ".join(f"K = {r['steps']:,} log Ẑ {r['log_z']:.2f} ± {r['stderr']:.2f} (ESS {r['ess']:.0f})"
                                                    for r in rows[name]["runs"]))
            ablation["rows"] = [rows[key] for key in ROWS if key in rows]
            ablation["reference"] = {**ablation.get("reference", {}), **reference_summary(cache)}
            ablation["load_average"] = load_average()
            write(ablation, args.out_dir)
    write(ablation, args.out_dir)
    print(f"written to {args.out_dir}")


def write(ablation: dict, out: Path) -> None:
    """spline_ablation.json and .md in ``out``, and the ``spline_ablation`` key of its results.json (others untouched)."""
    out.mkdir(parents=True, exist_ok=True)
    results_file = out / "results.json"
    results = json.loads(results_file.read_text()) if results_file.is_file() else {}
    for row in ablation.get("rows", []):  # the row's name at its top, for the seed index's [name=...] pointers
        row.setdefault("name", row["setting"]["name"])
    (out / "spline_ablation.json").write_text(json.dumps(ablation, indent=1) + "\n")
    (out / "spline_ablation.md").write_text(ablation_markdown(ablation, results.get("rbms_uniform")))
    results["spline_ablation"] = ablation
    results_file.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
