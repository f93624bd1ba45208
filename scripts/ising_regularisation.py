"""Thesis Table 3.1: the fully connected MPF and pseudo-likelihood fits stopped early or L2-regularised by held-out states.

    python scripts/ising_regularisation.py --run reports/ising/sigma20_trace --threads 1
        # reports/ising/sigma20_trace/regularisation/{README.md,results.json}
    python scripts/ising_regularisation.py --run reports/ising/sigma20_trace --report-only   # re-render the README

The run folder's results.json (scripts/reproduce_ising.py) gives the glass, the training states and every setting
(the same seed, sampler, L-BFGS cap and tolerance, clock and ε_corr sampler); its learners' rows are the baseline the
README sets these fits beside (:mod:`pfzoo.studies.ising_regularisation` says what each row changes).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from pfzoo.cli import compose
from pfzoo.studies.ising_regularisation import GRID, measure, render, repeated_draws
from pfzoo.studies.reporting import run_header

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, default=REPO / "reports" / "ising" / "sigma20_trace", help="a reproduce_ising.py output folder")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default <run>/regularisation)")
    parser.add_argument("--learners", nargs="+", choices=("MPF", "pseudo-likelihood"), default=["MPF", "pseudo-likelihood"])
    parser.add_argument("--grid", nargs="+", type=float, default=list(GRID), help="λ of the L2 penalty λ Σ_{i<j} J_ij²")
    parser.add_argument("--held-out-fraction", type=float, default=0.1, help="training states held out for the stopping rule and λ")
    parser.add_argument("--patience", type=int, default=40, help="L-BFGS steps without a better held-out objective before stopping")
    parser.add_argument("--runs", type=Path, default=None, help="checkpoints and metrics (default runs/ising/<run>_regularisation)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--draws", type=int, default=3, help="draws of the refitted models' samples to resolve the order (0: none)")
    parser.add_argument("--draws-only", action="store_true", help="add --draws to the output folder's results.json without refitting")
    parser.add_argument("--report-only", action="store_true", help="rewrite README.md from the output folder's results.json")
    args = parser.parse_args()
    out = args.out or args.run / "regularisation"
    out.mkdir(parents=True, exist_ok=True)
    run = json.loads((args.run / "results.json").read_text())
    runs = args.runs or REPO / "runs" / "ising" / f"{args.run.name}_regularisation"  # git-ignored checkpoints and metrics
    torch.set_num_threads(args.threads)
    train = lambda overrides: compose("train", overrides)  # noqa: E731
    if not (args.report_only or args.draws_only):
        measured = measure(run, train, runs, learners=args.learners, grid=args.grid, held_out_fraction=args.held_out_fraction,
                           patience=args.patience, on_progress=lambda line: print(line, flush=True))
        (out / "results.json").write_text(json.dumps({**run_header(sys.argv, args.threads), "run": str(args.run), **measured}, indent=1))
    if args.draws and not args.report_only:
        record = json.loads((out / "results.json").read_text())
        record["draws"] = {"repeats": args.draws, "command": run_header(sys.argv, args.threads)["command"],
                           "learners": repeated_draws(run, list(record["learners"]), train, runs, repeats=args.draws)}
        (out / "results.json").write_text(json.dumps(record, indent=1))
    (out / "README.md").write_text(render(json.loads((out / "results.json").read_text()), run))
    print(f"wrote {out}/README.md")


if __name__ == "__main__":
    main()
