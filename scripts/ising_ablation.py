"""Thesis Table 3.1 on our 10×10 spin glass, one setting difference at a time: reports/ising/ablation/.

    nice -n 10 python scripts/ising_ablation.py --threads 1              # every row of pfzoo.studies.ising_ablation.ROWS
    python scripts/ising_ablation.py --rows baseline lattice_fit          # some rows (the others kept from results.json)
    python scripts/ising_ablation.py --report-only                        # re-render README.md from results.json

Each row changes one setting of the σ² = 10 run of scripts/reproduce_ising.py (reports/ising/sigma10: Swendsen–Wang
sample of 20,000 states, fully connected fit from J = 0 and base-rate biases, float64 L-BFGS to a relative loss change of
1e-10) and reports MPF's and pseudo-likelihood's ε_J beside the thesis's; rows derived from the baseline read its fit in
another error convention or at another stopping point (no training). The run resumes: rows already in results.json are
kept, and results.json is rewritten after every row. Runs (checkpoints, metrics) go to --runs (default runs/ising/ablation/, git-ignored).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

from pfzoo.cli import compose
from pfzoo.studies.ising_ablation import ROWS, Ablation, costs, run_rows
from pfzoo.studies.ising_ablation_report import render
from pfzoo.studies.reporting import run_header, settings_record

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", nargs="*", default=None, choices=[row.key for row in ROWS], help="rows to run (default: all)")
    parser.add_argument("--redo", action="store_true", help="refit the --rows even when results.json has them")
    parser.add_argument("--side", type=int, default=10)
    parser.add_argument("--num-samples", type=int, default=20000)
    parser.add_argument("--burn-in", type=int, default=1000)
    parser.add_argument("--thin", type=int, default=10)
    parser.add_argument("--max-lbfgs-steps", type=int, default=400)
    parser.add_argument("--cd-seconds", type=float, default=120.0, help="time budget of the SGD learners (CD-1, PT-SML)")
    parser.add_argument("--cd-learning-rate", type=float, default=0.02)
    parser.add_argument("--linear-epochs", type=int, default=30, help="epochs of CD-1 with the thesis's linear schedule")
    parser.add_argument("--model-samples", type=int, default=20000, help="samples from each learned model for ε_corr")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "ising" / "ablation")
    parser.add_argument("--runs", type=Path, default=REPO / "runs" / "ising" / "ablation", help="checkpoints and metrics (git-ignored)")
    parser.add_argument("--merge", type=Path, nargs="*", default=(),
                        help="results.json files of runs of other rows (e.g. in parallel processes): their rows join this record")
    parser.add_argument("--costs", type=Path, nargs="*", default=None,
                        help="time one evaluation of MPF's and PL's loss and read each row's L-BFGS evaluations from the "
                             "checkpoints under --runs and these folders (the runs of merged rows)")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "results.json"
    record = json.loads(path.read_text()) if path.exists() else {"rows": {}, "truth": {}}
    for other in map(lambda path: json.loads(path.read_text()), args.merge):
        record["rows"] |= other["rows"]
        record["truth"] |= other["truth"]
        record.setdefault("merged", []).append({key: other[key] for key in ("command", "date", "machine", "threads", "load_average")}
                                              | {"rows": list(other["rows"])})
    if args.merge:
        path.write_text(json.dumps(record, indent=1))
    if not args.report_only:
        torch.set_num_threads(args.threads)
        settings = settings_record(vars(args), leave_out=("out", "runs", "report_only", "rows", "redo", "merge", "costs"))
        ablation = Ablation(settings, lambda overrides: compose("train", overrides), args.runs)
        selected = [row for row in ROWS if args.rows is None or row.key in args.rows]
        done = {key: value for key, value in record["rows"].items() if not (args.redo and key in (args.rows or ()))}

        def save(key: str, row: dict) -> None:
            if any("trace" in result for result in row["learners"].values()):  # a refit, not a re-reading: its command heads the record
                record.update(run_header(sys.argv, args.threads), settings=settings)
            record["rows"][key] = row
            for std in {row["coupling_std"] for row in record["rows"].values()} - {float(s) for s in record["truth"]}:
                record["truth"][repr(std)] = ablation.truth_record(std)
            path.write_text(json.dumps(record, indent=1))
            print(f"{key}: " + ", ".join(f"{name} ε_J {result['coupling_errors']['pairs']:.4f} ({result['seconds']:.0f} s)"
                                         for name, result in row["learners"].items()), flush=True)

        run_rows(ablation, [row for row in selected if args.costs is None], done, on_row=save)
        if args.costs is not None:
            record["costs"] = costs(ablation, record["rows"], [args.runs, *args.costs]) | run_header(sys.argv, args.threads)
            path.write_text(json.dumps(record, indent=1))
    (args.out / "README.md").write_text(render(record, math.sqrt(10)))
    print(f"wrote {args.out}/README.md")


if __name__ == "__main__":
    main()
