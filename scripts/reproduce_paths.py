"""Reproduce the path comparison of Grosse, Maddison & Salakhutdinov (2013), "Annealing between distributions by averaging moments".

    python scripts/reproduce_paths.py            # reports/paths/{README.md,results.json,gaussians.png,rbms.png}
    python scripts/reproduce_paths.py --quick    # smoke run: reports/paths/quick/
    python scripts/reproduce_paths.py --part b   # only the MNIST RBMs (needs binarized MNIST under the data root)
    python scripts/reproduce_paths.py --render reports/paths/results.json   # re-render README.md and plots beside it

(a) Two Gaussians N(0, 1) → N(d, 1): for the geometric-average (GA) and moment-averaged (MA) Gaussian paths and the
optimal path (OPT, the Fisher–Rao geodesic) under the linear and the optimal schedule (exact divergences on :func:`pfzoo.paths.step_count.end_dense_knots`), the smallest K
whose perfect-transition bias Σ_k KL(p_(k−1) ‖ p_k) is at most ``--accuracy`` (:func:`pfzoo.paths.step_count.steps_for_bias`;
the paper: K ~ d² for GA, ~ (log d)² for MA-optimal), each K then measured by AIS with perfect transitions
(:func:`pfzoo.estimators.path_ais.anneal_path`): log Ẑ − log Z and the E[log w] deficit against the closed-form bias.
(b) The zoo's MNIST RBMs PCD(20) (exact log Z) and CD1(500), the slides' two: log Ẑ by AIS from the data base rates against K along the
geometric path and the moment-averaged spline (:func:`pfzoo.paths.build`), the spline's fitting time as its cost.
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
from pfzoo.paths.step_count import end_dense_knots
from pfzoo.studies.path_comparison import (
    RBM_MODELS, gaussian_experiment, gaussians_figure, growth_summary, rbm_experiment, rbms_figure, report_markdown, two_gaussians_figure,
)
from pfzoo.studies.reporting import load_average, machine_description

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: few distances and chains, writes <out-dir>/quick")
    parser.add_argument("--accuracy", type=float, default=0.1, help="bias of E[log w] (nats) that K must reach")
    parser.add_argument("--distances", type=float, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])
    parser.add_argument("--chains", type=int, default=2000, help="AIS chains of the measured runs")
    parser.add_argument("--max-measured-steps", type=int, default=30_000, help="measure AIS only where K is at most this")
    parser.add_argument("--knots-per-side", type=int, default=200, help="optimal schedule: knots from 0 to ½ (mirrored)")
    parser.add_argument("--part", choices=("a", "b", "all"), default="all", help="a: two Gaussians; b: MNIST RBMs")
    parser.add_argument("--rbm-steps", type=int, nargs="+", default=[100, 1000, 10000], help="part (b): K values")
    parser.add_argument("--rbm-chains", type=int, default=100, help="part (b): AIS chains")
    parser.add_argument("--uniform", nargs="*", default=[], choices=sorted(RBM_MODELS), help="part (b): also from a uniform base")
    parser.add_argument("--data-root", type=Path, default=None, help="part (b): folder holding binarized_mnist/")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out-dir", type=Path, default=None, help="output folder (default reports/paths[/quick])")
    parser.add_argument("--render", type=Path, default=None, help="re-render README.md and the plots beside this results.json")
    args = parser.parse_args(argv)
    if args.render:
        return write_report(json.loads(args.render.read_text()), args.render.parent)
    torch.set_num_threads(args.threads)
    logging.basicConfig(format="%(message)s")
    logging.getLogger("pfzoo.studies").setLevel(logging.INFO)  # each row as it is measured
    if args.quick:
        args.distances, args.chains, args.max_measured_steps = [2, 8, 32], 200, 2000
    out = args.out_dir or (REPO / "reports" / "paths" / ("quick" if args.quick else ""))
    out.mkdir(parents=True, exist_ok=True)
    previous = json.loads((out / "results.json").read_text()) if (out / "results.json").is_file() else {}
    results = {**previous, "date": datetime.date.today().isoformat(), "pfzoo": pfzoo.__version__, "torch": torch.__version__,
               "machine": machine_description(), "load_average": load_average()}
    if args.part in ("a", "all"):
        knots = end_dense_knots(args.knots_per_side)
        rows = gaussian_experiment(args.distances, knots, accuracy=args.accuracy, max_measured_steps=args.max_measured_steps, chains=args.chains,
                                   seed=args.seed)
        results.update(settings={"accuracy": args.accuracy, "distances": args.distances, "chains": args.chains, "seed": args.seed,
                                 "max_measured_steps": args.max_measured_steps, "knots": knots.tolist()},
                       gaussians=rows, growth=growth_summary(rows))
    if args.part in ("b", "all"):
        data_root = resolve_data_root(args.data_root or os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")
        if not (data_root / "binarized_mnist").is_dir():
            parser.error(f"part (b) needs {data_root}/binarized_mnist; pass --data-root or set PFZOO_DATA")
        steps = [10, 100] if args.quick else args.rbm_steps
        models = {name: zoo.load(REPO / "models" / folder / "checkpoint.pt") for name, folder in RBM_MODELS.items()}
        settings, train = {"steps": steps, "chains": args.rbm_chains, "seed": args.seed}, binarized_mnist(data_root).train
        if args.uniform:  # runs from a uniform base join the results of (b) beside the base-rate ones
            results.update(rbms_uniform=rbm_experiment({name: models[name] for name in args.uniform}, train, steps, args.rbm_chains,
                                                       args.seed, base="uniform"), rbm_uniform_settings=settings)
        else:
            results.update(rbm_settings=settings, rbms=rbm_experiment(models, train, steps, args.rbm_chains, args.seed))
    if "gaussians" not in results:
        parser.error("no part (a) results to render: run with --part a (or all) first")
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    write_report(results, out)


def write_report(results: dict, out: Path) -> None:
    """``README.md``, ``gaussians.png`` and (with part (b)) ``rbms.png`` in ``out`` from ``results`` (what results.json holds)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figures = {"gaussians.png": gaussians_figure(results), "two_gaussians.png": two_gaussians_figure(),
               **({"rbms.png": rbms_figure(results["rbms"])} if results.get("rbms") else {})}
    for name, figure in figures.items():
        figure.savefig(out / name, dpi=120)
        plt.close(figure)
    (out / "README.md").write_text(report_markdown(results))  # with the spline ablation where scripts/ablate_spline.py stored it
    print(f"written to {out}")


if __name__ == "__main__":
    main()
