"""The bridging estimators' card: importance sampling, AIS, bridge sampling and linked importance sampling at equal
wall time on the same models, error against the exact (or best available) log Z beside each estimate's own stderr.

    python scripts/bridging_card.py [--budget 10] [--repeats 5] [--problems rbm-784x20 poe-36 rbm-784x500] [--threads 1]

Writes estimators/bridging.md and estimators/bridging.json. Each estimator's cost knob (IS samples, AIS steps, bridge
burn-in and draws, LIS levels) is scaled from two pilot runs so that one estimate takes about ``--budget`` seconds (×3
for the 784×500 RBM); each is then repeated with independent seeds. Needs binarized MNIST under $PFZOO_DATA.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch

from pfzoo import zoo
from pfzoo.studies.bridging_card import ESTIMATORS, PROBLEMS, machine_record, measure_estimator, problem_data, reference, render_card

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=float, default=10.0, help="seconds per estimate (×3 for the 784×500 RBM)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS), choices=list(ESTIMATORS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "estimators")
    parser.add_argument("--render", action="store_true", help="rewrite bridging.md from the folder's bridging.json")
    args = parser.parse_args()
    if args.render:
        saved = json.loads((args.out / "bridging.json").read_text())
        card = render_card(saved["rows"], saved["machine"], budget=saved["budget"], repeats=saved["repeats"], threads=saved["machine"]["threads"])
        (args.out / "bridging.md").write_text(card)
        return
    torch.set_num_threads(args.threads)
    rows = []
    load_start = os.getloadavg()
    for name in args.problems:
        model_name, factor = PROBLEMS[name]
        model = zoo.pretrained(model_name)
        data = problem_data(model_name, os.environ.get("PFZOO_DATA")).to(model.dtype)
        known = reference(name, model)
        budget = args.budget * factor
        print(f"{name}: {model_name}, reference log Z {known[0]:.4f} ± {known[1]:.4f} ({known[2]}); budget {budget:g} s", flush=True)
        for estimator_name in args.estimators:
            row = measure_estimator(name, model, data, estimator_name, known, budget=budget, repeats=args.repeats)
            rows.append(row)
            print(f"  {estimator_name:10s} size {row['size']:7d}: mean error {row['mean_error']:+.3f}, RMSE {row['rmse']:.3f}, "
                  f"mean stderr {row['mean_stderr']:.3f}, {row['mean_seconds']:.1f} s, warned {row['warned']}/{args.repeats}", flush=True)
    machine = machine_record(args.threads, load_start)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bridging.json").write_text(json.dumps({"machine": machine, "budget": args.budget, "repeats": args.repeats, "rows": rows}, indent=1) + "\n")
    (args.out / "bridging.md").write_text(render_card(rows, machine, budget=args.budget, repeats=args.repeats, threads=args.threads))
    print(f"written {args.out / 'bridging.md'} and bridging.json")


if __name__ == "__main__":
    main()
