"""Measure AIS on reference problems with known log Z and write its estimator card.

    python scripts/estimator_card.py                # full card: estimators/ais.md + estimators/ais.json
    python scripts/estimator_card.py --quick        # fast subset: estimators/quick/ais.{md,json} (git-ignored)
    python scripts/estimator_card.py --render estimators/ais.json   # re-render the card beside its json

Reference problems are binary RBMs small enough that ``model.log_partition()`` enumerates the smaller layer exactly
(:mod:`pfzoo.studies.ais_card`): random RBMs of a few sizes and weight scales, and (when the reference data folder
is present) a 784×20 RBM trained by the recipe conf/experiment/card_mnist_cd1.yaml on a fixed random 10,000 of the
binarised-MNIST training digits. Every problem is estimated with AIS from the uniform and the data base-rate base
distributions, along linear and sigmoid schedules, at several numbers of intermediate distributions K, each repeated
over seeds so that the reported standard error can be compared with the actual error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import sys
import time
from pathlib import Path

import torch

import pfzoo
from pfzoo.cli import compose
from pfzoo.data.root import resolve_data_root
from pfzoo.estimators import AIS
from pfzoo.models import RBM
from pfzoo.studies import reporting
from pfzoo.studies.ais_card import BASES, RANDOM_SPECS, SCHEDULES, SEED_STRIDE, mnist_problem, random_problem, render_card, row_summary, run_row
from pfzoo.studies.reporting import load_average, machine_description

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fast subset: K in {100, 1000}, 2 seeds, written to estimators/quick/")
    parser.add_argument("--data-root", type=Path, default=None, help="reference data folder (default: $PFZOO_DATA or <repo>/../shared/data)")
    parser.add_argument("--no-mnist", action="store_true", help="skip the MNIST-trained reference model")
    parser.add_argument("--out-dir", type=Path, default=None, help="where to write ais.{md,json} (default: <repo>/estimators[/quick])")
    parser.add_argument("--steps", type=int, nargs="+", default=None, help="numbers of intermediate distributions K (default 100 1000 10000)")
    parser.add_argument("--chains", type=int, default=100, help="AIS chains per estimate")
    parser.add_argument("--repeats", type=int, default=None, help="seeds per configuration of a random RBM (default 10; 2 with --quick)")
    parser.add_argument("--mnist-repeats", type=int, default=None, help="seeds per configuration of the MNIST RBM (default 4; 2 with --quick)")
    parser.add_argument("--threads", default="auto", help="torch threads, or 'auto': the faster of 1 and 2 (default)")
    parser.add_argument("--render", type=Path, default=None, help="re-render the card (.md) beside this card json")
    args = parser.parse_args(argv)
    if args.render:
        args.render.with_suffix(".md").write_text(render_card(json.loads(args.render.read_text())))
        print(f"wrote {args.render.with_suffix('.md')}")
        return

    step_counts = args.steps or ([100, 1000] if args.quick else [100, 1000, 10000])
    repeats = args.repeats or (2 if args.quick else 10)
    data_root = resolve_data_root(args.data_root or os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")
    out_dir = args.out_dir or REPO / "estimators" / ("quick" if args.quick else "")
    workload = RBM(784, 20, init_std=0.1, generator=torch.Generator().manual_seed(0))
    threads, thread_benchmark = reporting.pick_threads(args.threads, lambda steps: AIS(100, steps)(workload, generator=torch.Generator().manual_seed(0)))
    torch.set_num_threads(threads)
    print(f"torch threads: {threads} {thread_benchmark or ''}", flush=True)

    problems = [random_problem(*spec, repeats=repeats) for spec in RANDOM_SPECS[: 2 if args.quick else None]]
    mnist_skipped = None
    if args.no_mnist:
        mnist_skipped = "--no-mnist was given"
    elif not (data_root / "binarized_mnist").is_dir() and not (data_root / "binarized_mnist_train.amat").is_file():
        mnist_skipped = f"no binarised MNIST under {data_root}"
    else:
        began = time.perf_counter()
        cfg = compose("train", ["+experiment=card_mnist_cd1", f"data.root={data_root}"])
        problems.append(mnist_problem(cfg, data_root, args.mnist_repeats or (2 if args.quick else 4)))
        print(f"trained {problems[-1].name} in {time.perf_counter() - began:.1f} s", flush=True)
    if mnist_skipped:
        print(f"skipping MNIST: {mnist_skipped}", flush=True)

    load_at_start, runs, row_index, total_began = load_average(), [], 0, time.perf_counter()
    for problem in problems:
        problem.compute_exact()
        print(f"{problem.name}: exact log Z = {problem.exact_log_z:.4f} ({problem.exact_seconds:.1f} s)", flush=True)
        for base in BASES:
            for schedule in SCHEDULES:
                for num_steps in step_counts:
                    row = run_row(problem, base, schedule, num_steps, args.chains, SEED_STRIDE * row_index)
                    row_index += 1
                    runs += row
                    first, s = row[0], row_summary(row)
                    print(
                        f"  {problem.name:>20} {base:>9} {schedule:>7} K={num_steps:<6} est {first['log_z']:.4f} ± {first['stderr']:.4f} "
                        f"ESS {first['ess']:6.1f} err/se {first['error_over_stderr']:+6.2f} {first['seconds']:6.2f} s | "
                        f"RMSE {s['rmse']:.4f} mean se {s['mean_stderr']:.4f} max|z| {s['max_abs_z']:.2f}",
                        flush=True,
                    )

    meta = {
        "date": datetime.date.today().isoformat(),
        "command": "python scripts/estimator_card.py" + "".join(" " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)),
        "machine": machine_description(),
        "cpu_count": os.cpu_count(),
        "torch_threads": threads,
        "thread_benchmark": ", ".join(f"{k}: {v} s" for k, v in thread_benchmark.items()),
        "torch_version": torch.__version__,
        "pfzoo_version": pfzoo.__version__,
        "num_chains": args.chains,
        "num_steps": step_counts,
        "repeats": {p.name: p.repeats for p in problems},
        "mnist_skipped": mnist_skipped,
        "total_seconds": time.perf_counter() - total_began,
        "load_average": {"start": load_at_start, "end": load_average()},
        "json_name": "ais.json",
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {"meta": meta, "problems": [p.record() for p in problems], "runs": runs}
    (out_dir / "ais.json").write_text(json.dumps(payload, indent=1) + "\n")
    (out_dir / "ais.md").write_text(render_card(payload))
    print(f"wrote {out_dir}/ais.md and ais.json ({meta['total_seconds']:.0f} s of estimation)")


if __name__ == "__main__":
    main()
