"""Speed measurements, written as JSON (never asserted in unit tests).

    python scripts/benchmark.py --device cuda        # the issue's sizes → benchmark_results/benchmark-cuda.json
    python scripts/benchmark.py [--device cpu]       # smaller step and chain counts (CPU_SIZES), a few minutes on 2 cores
    python scripts/benchmark.py --quick              # every case at toy sizes in seconds → benchmark_results/quick/
    python scripts/benchmark.py --only rbm_ais dbm_ais [--output FILE] [--threads N]   # merged: each result keeps its machine block
    python scripts/benchmark.py --only rbm_ais_mnist20 --data-root DIR   # a case on real data (default root: $PFZOO_DATA)

The cases, what each measures and the sizes they run at are in :mod:`pfzoo.studies.benchmark`; this script picks the
sizes, runs the cases, prints a line per case and writes their results under a ``machine`` block
(:mod:`pfzoo.studies.benchmark.results`).
"""

from __future__ import annotations

import argparse
import inspect
import json
from pathlib import Path

import torch

from pfzoo.studies.benchmark.results import machine_block, merged
from pfzoo.studies.benchmark.suite import BENCHMARKS, CPU_SIZES, QUICK_SIZES
from pfzoo.studies.reporting import load_average


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=None,
                        help="default benchmark_results/benchmark-<device type>.json (--quick: benchmark_results/quick/...)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="run only these benchmarks (merged into an existing --output)")
    parser.add_argument("--quick", action="store_true", help="every case at the toy sizes of QUICK_SIZES (seconds): a smoke run")
    parser.add_argument("--data-root", default=None,
                        help="where the cases on real data find it (default: $PFZOO_DATA); without it they report 'skipped'")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    output = args.output or Path("benchmark_results", *(["quick"] if args.quick else []), f"benchmark-{device.type}.json")
    sizes = QUICK_SIZES if args.quick else CPU_SIZES if device.type == "cpu" else {}
    results = {"machine": machine_block(device, "quick" if args.quick else "cpu" if device.type == "cpu" else "full"), "benchmarks": []}
    for name, (run, summary) in BENCHMARKS.items():
        if args.only and name not in args.only:
            continue
        data = {"data_root": args.data_root} if "data_root" in inspect.signature(run).parameters else {}
        result = run(device, **sizes.get(name, {}), **data)
        results["benchmarks"].append(result)
        print(summary(result), flush=True)
    results["machine"]["load_average"] = load_average()  # at the end: the 1- and 5-minute averages span the run
    if args.only and output.is_file():  # keep the other benchmarks' last results, each with the machine it ran on
        results = merged(results, json.loads(output.read_text()))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results written to {output}")


if __name__ == "__main__":
    main()
