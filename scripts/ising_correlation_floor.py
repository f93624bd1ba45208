"""What sets ε_corr of a learned spin glass (issue 52): the sampling floor, ε_J in random directions, the learners' fields.

    python scripts/ising_correlation_floor.py --run reports/ising/sigma10_trace \
        --checkpoint PT-SML=runs/ising/ablation2/sgd_learners/ising_pt/checkpoint.pt --threads 1

reads the run's settings from ``<run>/results.json`` (a scripts/reproduce_ising.py run), redraws its glass and training
states, measures :func:`pfzoo.studies.ising_correlation_floor.correlation_floor_study` for the run's trained learners
(checkpoints under runs/ising/<run's folder name>/) and any ``--checkpoint NAME=PATH`` added, stores the record as
results.json's ``correlation_floor`` and re-renders the run's README (its section "What sets ε_corr").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from pfzoo.cli import compose
from pfzoo.studies.ising_correlation_floor import correlation_floor_study
from pfzoo.studies.ising_recovery import LEARNERS
from pfzoo.studies.ising_report import report
from pfzoo.studies.reporting import run_header


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a scripts/reproduce_ising.py output folder (its results.json)")
    parser.add_argument("--checkpoint", action="append", default=[], metavar="NAME=PATH", help="another learned model to measure")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 5000, 20000, 80000], help="sample sizes of the floor")
    parser.add_argument("--repeats", type=int, default=3, help="draws of the truth's samples at each size, and of each learned model's")
    parser.add_argument("--mean-squares", type=float, nargs="+", default=None,
                        help="ε of the random directions (default: 1e-6, the truth sampled as the dense learned models are, "
                             "by single-site sweeps, and the run's MPF and pseudo-likelihood ε_J)")
    parser.add_argument("--directions", type=int, default=3, help="random directions per ε and bias rule")
    parser.add_argument("--seed", type=int, default=1000, help="seed of this study's draws (apart from the run's)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    record = json.loads((args.run / "results.json").read_text())
    results = record["results"]
    checkpoints = {name: Path("runs") / "ising" / args.run.name / LEARNERS[name][0] / "checkpoint.pt"  # from the repository root
                   for name in results if name in LEARNERS and "coupling_error" in results[name]}
    for entry in args.checkpoint:
        name, _, path = entry.partition("=")
        if not path:
            parser.error(f"--checkpoint must be NAME=PATH, got {entry!r}")
        checkpoints[name] = Path(path)
    mean_squares = args.mean_squares or [1e-6, *(round(results[name]["coupling_error"], 4) for name in ("MPF", "pseudo-likelihood"))]
    study = correlation_floor_study(record["settings"], lambda overrides: compose("train", overrides), checkpoints,
                                    sizes=args.sizes, repeats=args.repeats, mean_squares=mean_squares,
                                    directions=args.directions, seed=args.seed)
    header = run_header(sys.argv, args.threads)
    record["correlation_floor"] = {key: header[key] for key in ("command", "date", "load_average")} | study
    (args.run / "results.json").write_text(json.dumps(record, indent=1))
    (args.run / "README.md").write_text(report(record, args.run))
    print(f"wrote {args.run}/results.json (correlation_floor), README.md")


if __name__ == "__main__":
    main()
