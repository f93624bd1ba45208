"""What sets the scale of ε_corr against thesis Table 3.1's column (issue 52): one reading, sampler or setting at a time.

    python scripts/ising_correlation_scale.py --run reports/ising/sigma10_trace --threads 1 \
        --case lattice_fit 3.1622776601683795 runs/ising/ablation2/lattice_fit "lattice-only fit (MPF, PL)" \
        --case strong_lattice_fit 6.324555320336759 runs/ising/ablation4/thesis_protocol \
            "σ² = 10 read as the variance of the thesis's J' (σ = 2√10) and a lattice-only fit (MPF, PL)" \
        --stored strong_glass reports/ising/sigma10/xtjx_units/results.json \
            "σ² = 10 read as the variance of the thesis's J' (σ = 2√10), fully connected fits"

reads the run's settings from ``<run>/results.json`` (a scripts/reproduce_ising.py run), redraws its glass and training
states, loads its learners' checkpoints (runs/ising/<run's folder name>/<recipe>/checkpoint.pt) and measures
:func:`pfzoo.studies.ising_correlation_scale.correlation_scale_study`: every learner's ε_corr under each reading of the
same samples, each sampler change, and each ``--case`` (KEY, σ of its glass, a folder of lattice-fit checkpoints
``<recipe>/checkpoint.pt`` from scripts/ising_ablation.py, the change in words). ``--stored`` adds a row read from
another run's results.json (its ε_corr and its floor, as that run measured them). Stores the record as results.json's
``correlation_scale`` and re-renders the run's README (section "What sets the scale of ε_corr against the thesis's").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from pfzoo.cli import compose
from pfzoo.studies.ising_correlation_scale import TRUTH, correlation_scale_study
from pfzoo.studies.ising_recovery import LEARNERS
from pfzoo.studies.ising_report import report
from pfzoo.studies.reporting import run_header


def recipe_checkpoints(folder: Path) -> dict[str, Path]:
    """``{learner: folder/<recipe>/checkpoint.pt}`` for every learner of :data:`LEARNERS` whose checkpoint is there."""
    return {name: folder / recipe / "checkpoint.pt" for name, (recipe, _, _) in LEARNERS.items() if (folder / recipe / "checkpoint.pt").is_file()}


def stored_row(key: str, path: Path, change: str) -> dict:
    """A row of another scripts/reproduce_ising.py run's own ε_corr (its results.json), with its true glass's floor."""
    record = json.loads(path.read_text())
    values = {name: result["correlation_error"] for name, result in record["results"].items() if "correlation_error" in result}
    return {"key": key, "change": change, "group": "another run", "source": f"{path}, {record['date'][:10]}",
            "values": values | {TRUTH: record["truth_correlation_error"]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a scripts/reproduce_ising.py output folder (its results.json)")
    parser.add_argument("--case", nargs=4, action="append", default=[], metavar=("KEY", "SIGMA", "FOLDER", "CHANGE"),
                        help="another setting: lattice-fit checkpoints FOLDER/<recipe>/checkpoint.pt on the glass of σ = SIGMA")
    parser.add_argument("--stored", nargs=3, action="append", default=[], metavar=("KEY", "RESULTS", "CHANGE"),
                        help="a row read from another run's results.json")
    parser.add_argument("--reference-samples", type=int, default=200000, help="samples of the true glass for its long-run moments")
    parser.add_argument("--few-samples", type=int, default=2000, help="the sampler row's smaller number of samples per model")
    parser.add_argument("--short-burn-in", type=int, default=10, help="the sampler row's burn-in (sweeps)")
    parser.add_argument("--seed", type=int, default=2000, help="seed of this study's own draws (apart from the run's)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    record = json.loads((args.run / "results.json").read_text())
    checkpoints = {name: path for name, path in recipe_checkpoints(Path("runs") / "ising" / args.run.name).items()  # from the root
                   if "coupling_error" in record["results"].get(name, {})}
    cases = []
    for key, sigma, folder, change in args.case:
        found = recipe_checkpoints(Path(folder))
        if not found:
            parser.error(f"--case {key}: no <recipe>/checkpoint.pt of a learner under {folder}")
        cases.append({"key": key, "change": change, "coupling_std": float(sigma), "checkpoints": found, "swendsen_wang": True})
    study = correlation_scale_study(record["settings"], lambda overrides: compose("train", overrides), checkpoints, cases=cases,
                                    reference_samples=args.reference_samples, few_samples=args.few_samples,
                                    short_burn_in=args.short_burn_in, seed=args.seed,
                                    on_row=lambda key: print(f"measured {key}", flush=True))
    study["rows"] += [stored_row(key, Path(path), change) for key, path, change in args.stored]
    header = run_header(sys.argv, args.threads)
    record["correlation_scale"] = {key: header[key] for key in ("command", "date", "load_average")} | study
    (args.run / "results.json").write_text(json.dumps(record, indent=1))
    (args.run / "README.md").write_text(report(record, args.run))
    print(f"wrote {args.run}/results.json (correlation_scale), README.md")


if __name__ == "__main__":
    main()
