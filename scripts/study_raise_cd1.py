"""How far RAISE's annealing model lands above the exact log-likelihood of CD-1 MNIST RBMs with 20 hidden units.

    python scripts/study_raise_cd1.py [--data-root DIR] [--recipes zoo decay ...] [--digits 300] [--steps 10000] [--schedules linear power:5]
    python scripts/study_raise_cd1.py --quick                             # smoke run → reports/raise_cd1/quick/
    python scripts/study_raise_cd1.py --render reports/raise_cd1/results.json

RAISE Table 1 (Burda, Grosse & Salakhutdinov 2015) finds RAISE within a fraction of a nat of the exact
test log-likelihood of its CD1(20) RBM at K = 10⁴. RAISE bounds the *annealing model* p_ann (the
distribution of forward AIS's final state), not the RBM, and on test digits p_ann can beat the RBM.
This study trains CD-1 RBMs with 20 hidden units by several recipes (``conf/experiment/<recipe>.yaml`` of
:data:`RECIPES`; the zoo's CD1(20), ``raise_rbm_cd1_20``, is the first), computes each one's exact
log-likelihood of the same random test digits (2^20 hidden states enumerated) and RAISE's estimate with
each schedule, and reports the mean excess RAISE − exact per digit with its standard error over digits.
Writes ``<output>/README.md`` and ``<output>/results.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from pfzoo import app, zoo
from pfzoo.cli import compose
from pfzoo.data import binarized_mnist
from pfzoo.data.root import resolve_data_root
from pfzoo.studies.raise_cd1 import QUICK, RECIPES, excess, readme
from pfzoo.studies.raise_table import schedule_name
from pfzoo.studies.reporting import machine_description

REPO = Path(__file__).resolve().parents[1]


def train(name: str, runs_dir: Path, data_root: Path, quick: bool) -> Path:
    """Train (or reuse) recipe ``name`` in ``<runs_dir>/<name>``; quick: one epoch. Returns its checkpoint."""
    cfg = compose("train", [f"+experiment={RECIPES[name][0]}", "trainer.progress=false", f"run_dir={runs_dir / name}",
                            f"data.root={data_root}", "resume=true"])
    if quick:
        OmegaConf.update(cfg, "trainer.epochs", 1)
    return Path(app.train(cfg)["checkpoint"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=None, help="folder holding binarized_mnist/ (default $PFZOO_DATA or ../shared/data)")
    parser.add_argument("--runs-dir", type=Path, default=None, help="training runs (default runs/study_raise_cd1[/quick])")
    parser.add_argument("--output", type=Path, default=None, help="README.md and results.json (default reports/raise_cd1[/quick])")
    parser.add_argument("--recipes", nargs="+", choices=list(RECIPES), default=list(RECIPES))
    parser.add_argument("--digits", type=int, default=300, help="random test digits RAISE runs on")
    parser.add_argument("--steps", type=int, default=10_000, help="K, intermediate distributions")
    parser.add_argument("--chains", type=int, default=10, help="reverse chains per digit")
    parser.add_argument("--schedules", type=schedule_name, nargs="+", default=["linear", "power:5"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help=f"one training epoch, {QUICK['digits']} digits, K = {QUICK['steps']}: a smoke run")
    parser.add_argument("--render", type=Path, default=None, metavar="RESULTS_JSON", help="measure nothing: rewrite README.md from results.json")
    args = parser.parse_args(argv)
    if args.render is not None:
        output = args.output or args.render.parent
        output.mkdir(parents=True, exist_ok=True)
        (output / "README.md").write_text(readme(json.loads(args.render.read_text())))
        print(f"rewrote {output / 'README.md'} from {args.render}")
        return
    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    data_root = args.data_root or resolve_data_root(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")
    if not (data_root / "binarized_mnist").is_dir():
        parser.error(f"{data_root}/binarized_mnist is missing; pass --data-root or set PFZOO_DATA")
    if args.quick:
        args.digits, args.steps, args.chains = QUICK["digits"], QUICK["steps"], QUICK["chains"]
    output = args.output or REPO / "reports" / "raise_cd1" / ("quick" if args.quick else "")
    runs_dir = args.runs_dir or REPO / "runs" / "study_raise_cd1" / ("quick" if args.quick else "")
    data = binarized_mnist(data_root)
    digits = data.test[torch.randperm(data.test.shape[0], generator=torch.Generator().manual_seed(args.seed + 7))[: args.digits]]
    settings = {"digits": args.digits, "steps": args.steps, "chains": args.chains, "schedules": args.schedules, "seed": args.seed}
    results = {"settings": settings, "measured_on": f"{datetime.date.today().isoformat()}, {machine_description()}", "recipes": {}}
    output.mkdir(parents=True, exist_ok=True)
    for name in args.recipes:
        print(f"{name}: training (or reusing) in {runs_dir / name}", flush=True)
        model = zoo.load(train(name, runs_dir, data_root, args.quick)).requires_grad_(False)
        with torch.no_grad():
            entry = {"recipe": RECIPES[name][0], "exact_test": model.log_prob(data.test).mean().item(), "schedules": {}}
        for schedule in args.schedules:
            began = time.perf_counter()
            row = excess(model, digits, data.train, schedule, args.steps, args.chains, args.seed + 1)
            row["seconds"] = round(time.perf_counter() - began, 1)
            entry["schedules"][schedule] = row
            print(f"  {schedule:<8} RAISE − exact {row['excess']:+.2f} ± {row['excess_stderr']:.2f} (median {row['median']:+.2f}) "
                  f"({row['seconds']} s)", flush=True)
        results["recipes"][name] = entry
        (output / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        (output / "README.md").write_text(readme(results))
    print(f"results written to {output}")


if __name__ == "__main__":
    main()
