"""Reproduce the comparison of Sohl-Dickstein & Culpepper (2011), Figs. 2–4: estimated vs exact test log-likelihood.

    python scripts/reproduce_hais.py                       # full run: estimators/hais/{README.md,results.json,loglik_vs_steps.png}
    python scripts/reproduce_hais.py --quick               # smoke run: N ∈ {100, 1000}, less data, writes estimators/hais/quick/
    python scripts/reproduce_hais.py --source vanhateren   # the paper's images: writes estimators/hais/vanhateren/
    python scripts/reproduce_hais.py --rerender            # measure nothing: README.md and the plot from results.json

Data: whitened 36-D natural image patches (conf/dataset/patches.yaml). Models with a closed-form log Z: the ML Gaussian
and complete Laplace / Student-t products of experts fitted by exact maximum likelihood (conf/experiment/hais_poe_*.yaml,
trained by pfzoo.training.Trainer in float64). Estimators, annealing 200 particles from N(0, I) along the geometric
path at N = 10²…10⁵: HAIS (ε = 0.2), AIS with one leapfrog step and resampled momentum, AIS with random-walk Metropolis.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import math
import os
import shlex
import sys
import time
from pathlib import Path

import torch
from hydra.utils import instantiate

import pfzoo
from pfzoo.cli import compose
from pfzoo.data.root import resolve_data_root
from pfzoo.estimators import HAIS
from pfzoo.models import Gaussian, ProductOfExperts
from pfzoo.studies import reporting
from pfzoo.studies.hais_comparison import ITERS_PER_EPOCH, METROPOLIS_SCALE, STEP_SIZE, estimate_runs, figure, fit_poe, model_record, readme

REPO = Path(__file__).resolve().parents[1]


def plot(path: Path, models: list[dict], runs: list[dict], step_counts: list[int], meta: dict) -> None:
    import matplotlib.pyplot as plt

    fig = figure(models, runs, step_counts, meta)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: N in {100, 1000}, 5,000/1,000 patches, writes to <out-dir>/quick")
    parser.add_argument("--source", choices=("embedded", "vanhateren"), default="embedded", help="scikit-learn's photos or <data-root>/natural_images")
    parser.add_argument("--data-root", type=Path, default=resolve_data_root(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data"),
                        help="data folder for --source vanhateren (default: $PFZOO_DATA or <repo>/../shared/data)")
    parser.add_argument("--max-steps", type=lambda s: int(float(s)), default=100_000, help="largest N; N runs over the powers of ten from 100")
    parser.add_argument("--chains", type=int, default=200, help="annealing particles per estimate (default 200, as in the paper)")
    parser.add_argument("--num-train", type=int, default=None, help="training patches (default 20000; 5000 with --quick)")
    parser.add_argument("--num-test", type=int, default=None, help="test patches (default 5000; 1000 with --quick)")
    parser.add_argument("--train-iters", type=int, default=None, help="maximum L-BFGS iterations per POE (default 3000; 500 with --quick)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the patches, the initial filters and the estimators' generators")
    parser.add_argument("--threads", default="auto", help="torch threads, or 'auto': the faster of 1 and 2 (default)")
    parser.add_argument("--out-dir", type=Path, default=None, help="default: estimators/hais[/vanhateren][/quick]")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG (and the matplotlib requirement)")
    parser.add_argument("--rerender", action="store_true", help="measure nothing: rewrite README.md and the PNG from <out-dir>/results.json")
    args = parser.parse_args(argv)
    if args.max_steps < 100:
        parser.error(f"--max-steps must be at least 100, got {args.max_steps}")
    try:
        args.no_plot or __import__("matplotlib")
    except ImportError:
        sys.exit("reproduce_hais.py: matplotlib draws the plot but is not installed: `pip install matplotlib`, or pass --no-plot.")
    out_dir = args.out_dir or REPO / "estimators" / "hais" / ("" if args.source == "embedded" else args.source) / ("quick" if args.quick else "")
    if args.rerender:
        payload = json.loads((out_dir / "results.json").read_text())
        meta, models, runs = payload["meta"], payload["models"], payload["runs"]
        meta["plot"] = not args.no_plot
        if meta["plot"]:
            plot(out_dir / "loglik_vs_steps.png", models, runs, meta["num_steps"], meta)
        (out_dir / "README.md").write_text(readme(meta, models, runs))
        return print(f"rewrote {out_dir}/README.md" + ("" if args.no_plot else " and loglik_vs_steps.png") + " from results.json")

    logging.basicConfig(format="%(message)s")
    logging.getLogger("pfzoo.studies").setLevel(logging.INFO)  # each run as it finishes
    total_began, timers = time.perf_counter(), {}
    step_counts = [10**k for k in range(2, 7) if 10**k <= args.max_steps and (10**k <= 1000 or not args.quick)]
    num_train, num_test = args.num_train or (5000 if args.quick else 20000), args.num_test or (1000 if args.quick else 5000)
    train_iters = args.train_iters or (500 if args.quick else 3000)
    overrides = [f"seed={args.seed}", f"dataset.source={args.source}", f"data.root={args.data_root}", f"dataset.num_train={num_train}",
                 f"dataset.num_test={num_test}", f"trainer.epochs={math.ceil(train_iters / ITERS_PER_EPOCH)}"]
    probe = ProductOfExperts(36, 36, "laplace", generator=torch.Generator().manual_seed(0)).requires_grad_(False)
    threads, thread_benchmark = reporting.pick_threads(args.threads, lambda n: HAIS(200, n)(probe, generator=torch.Generator().manual_seed(0)))
    torch.set_num_threads(threads)
    load_at_start, began = reporting.load_average(), time.perf_counter()
    try:
        splits = instantiate(compose("train", ["+experiment=hais_poe_laplace", *overrides]).dataset)
    except FileNotFoundError as error:
        sys.exit(f"reproduce_hais.py: {error}\nPass --data-root <folder that holds natural_images/>.")
    train, test = splits.train, splits.test
    timers["data"], began = time.perf_counter() - began, time.perf_counter()
    images = "scikit-learn's two embedded photos (china.jpg, flower.jpg)" if args.source == "embedded" else f"the images in {args.data_root / 'natural_images'}"
    data_text = (f"`pfzoo.data.patches(source={args.source!r}, num_train={num_train}, num_test={num_test}, seed={args.seed})`: "
                 f"16×16 patches of {images}, log(x + 1), training pixel mean removed, projected on the top 36 principal components "
                 "of the training patches and whitened (train covariance = I); train and test patches come from disjoint image blocks.")
    fitted = [("gaussian", Gaussian.fit(train).requires_grad_(False), None, "`Gaussian.fit(train)`: exact ML mean and covariance (+1e-6·I). "
               "The data are whitened on the training set, so this is N(0, I) up to rounding: the same as the annealing base, a sanity check.")]
    for expert, name in (("laplace", "poe-laplace"), ("student_t", "poe-student-t")):
        recipe = "hais_poe_" + expert.split("_")[0]
        model, info = fit_poe(compose("train", [f"+experiment={recipe}", *overrides, "trainer.progress=false"]), recipe, splits)
        fitted.append((name, model, info, f"`ProductOfExperts(36, 36, expert={expert!r})`, Gaussian initial filters (seed {args.seed})"
                       + (", λ learned (initially 1.5; kept above ½ by the parametrisation λ = ½ + softplus(ρ), `shape_above_half=True`)"
                          if expert == "student_t" else "") + f"; {info['optimizer']}; loss {info['initial_loss']:.3f} → {info['final_loss']:.4f}."))
        print(f"trained {name}: loss {info['initial_loss']:.3f} -> {info['final_loss']:.4f} in {info['iterations']} iterations, {info['seconds']:.1f} s", flush=True)
    timers["training"], began = time.perf_counter() - began, time.perf_counter()
    models, runs = [], []
    for name, model, info, text in fitted:
        models.append(model_record(name, model, info, text, train, test))
        runs += estimate_runs(models[-1], model, train, test, step_counts, args.chains, args.seed, first_run=len(runs))
    timers["estimation"] = time.perf_counter() - began
    meta = {"date": datetime.date.today().isoformat(), "machine": reporting.machine_description(),
            "command": "python scripts/reproduce_hais.py" + "".join(" " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)),
            "torch_threads": threads, "thread_benchmark": ", ".join(f"{k}: {v} s" for k, v in thread_benchmark.items()),
            "torch_version": torch.__version__, "pfzoo_version": pfzoo.__version__, "source": args.source, "data": data_text,
            "num_train": num_train, "num_test": num_test, "num_chains": args.chains, "num_steps": step_counts, "seed": args.seed,
            "step_size": STEP_SIZE, "metropolis_scale": METROPOLIS_SCALE, **{f"{k}_seconds": v for k, v in timers.items()},
            "total_seconds": time.perf_counter() - total_began, "load_average": {"start": load_at_start, "end": reporting.load_average()},
            "plot": not args.no_plot}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps({"meta": meta, "models": models, "runs": runs}, indent=1) + "\n")
    if meta["plot"]:
        plot(out_dir / "loglik_vs_steps.png", models, runs, step_counts, meta)
    (out_dir / "README.md").write_text(readme(meta, models, runs))
    print(f"wrote {out_dir}/README.md, results.json" + ("" if args.no_plot else ", loglik_vs_steps.png") + f" ({meta['total_seconds']:.0f} s in all)")


if __name__ == "__main__":
    main()
