"""Reproduce the path comparison of Grosse, Maddison & Salakhutdinov (2013), "Annealing between distributions by averaging moments".

    python scripts/reproduce_paths.py            # reports/paths/{README.md,results.json,gaussians.png,rbms.png}
    python scripts/reproduce_paths.py --quick    # smoke run: reports/paths/quick/
    python scripts/reproduce_paths.py --part b   # only the MNIST RBMs (needs binarized MNIST under the data root)
    python scripts/reproduce_paths.py --render reports/paths/results.json   # re-render README.md and plots beside it

(a) Two Gaussians N(0, 1) → N(d, 1): for the geometric-average (GA) and moment-averaged (MA) Gaussian paths under the
linear and the optimal schedule (exact divergences on :func:`pfzoo.paths.step_count.end_dense_knots`), the smallest K
whose perfect-transition bias Σ_k KL(p_(k−1) ‖ p_k) is at most ``--accuracy`` (:func:`pfzoo.paths.step_count.steps_for_bias`;
the paper: K ~ d² for GA, ~ (log d)² for MA-optimal), each K then measured by AIS with perfect transitions
(:func:`pfzoo.estimators.path_ais.anneal_path`): log Ẑ − log Z and the E[log w] deficit against the closed-form bias.
(b) The zoo's MNIST RBMs CD1(20) (exact log Z) and CD25(500): log Ẑ by AIS from the data base rates against K along the
geometric path and the moment-averaged spline (:func:`pfzoo.paths.build`), the spline's fitting time as its cost.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time
from pathlib import Path

import torch

import pfzoo
from pfzoo import paths, zoo
from pfzoo.data import binarized_mnist
from pfzoo.data.root import resolve_data_root
from pfzoo.estimators.path_ais import anneal_path
from pfzoo.models import Gaussian
from pfzoo.paths import GaussianGeometricPath, GaussianMomentAveragedPath, OptimalSchedule
from pfzoo.paths.step_count import end_dense_knots, growth_exponents, steps_for_bias
from pfzoo.studies.reporting import load_average, machine_description

REPO = Path(__file__).resolve().parents[1]
PATHS = {"GA": GaussianGeometricPath, "MA": GaussianMomentAveragedPath}
SCHEDULES = ("linear", "optimal")
RBM_MODELS = {"cd1-20": "rbm-binarized_mnist-cd1-20", "cd25-500": "rbm-binarized_mnist-cd25-500"}
RBM_PATHS = ("geometric", "moment_averaged")


def gaussian_experiment(args, knots: torch.Tensor) -> list[dict]:
    rows, unit = [], torch.eye(1, dtype=torch.float64)
    for distance in args.distances:
        target, base = Gaussian.from_tensors(unit, torch.tensor([distance], dtype=torch.float64)), Gaussian.from_tensors(unit)
        exact_log_z = target.log_partition().item()
        for path_name, path_class in PATHS.items():
            path = path_class(target, base)
            for kind in SCHEDULES:
                schedule = "linear" if kind == "linear" else OptimalSchedule.for_path(path, knots)
                num_steps, bias = steps_for_bias(path, schedule, args.accuracy)
                row, extra = {"distance": distance, "path": path_name, "schedule": kind, "steps": num_steps, "bias": bias}, ""
                if num_steps <= args.max_measured_steps:
                    began = time.perf_counter()
                    run = anneal_path(path, schedule, num_steps, args.chains, generator=torch.Generator().manual_seed(args.seed))
                    row["measured"] = m = {"log_z_error": run.log_z - exact_log_z, "log_z_stderr": run.stderr,
                                           "mean_log_weight_deficit": exact_log_z - run.mean_log_weight,
                                           "deficit_stderr": run.mean_log_weight_stderr, "seconds": round(time.perf_counter() - began, 2)}
                    extra = (f"; AIS log Ẑ − log Z {m['log_z_error']:+.3f} ± {m['log_z_stderr']:.3f}, "
                             f"E[log w] deficit {m['mean_log_weight_deficit']:.3f} ± {m['deficit_stderr']:.3f}")
                rows.append(row)
                print(f"d = {distance:g}, {path_name} {kind}: K = {num_steps:,} (bias {bias:.4f}){extra}", flush=True)
    return rows


def growth_summary(rows: list[dict]) -> dict:
    """Growth exponents of K over the largest half of the distances (:func:`pfzoo.paths.step_count.growth_exponents`)."""
    summary = {}
    for name in (f"{p} {s}" for p in PATHS for s in SCHEDULES):
        points = [(r["distance"], r["steps"]) for r in rows if f"{r['path']} {r['schedule']}" == name and r["distance"] > 1]
        if len(points := points[len(points) // 2:]) >= 2:
            by_d, by_log_d = growth_exponents(*zip(*points))
            summary[name] = {"slope_log_k_vs_log_d": by_d, "slope_log_k_vs_log_log_d_squared": by_log_d, "distances": [d for d, _ in points]}
    return summary


def rbm_experiment(data_root: Path, step_counts, chains: int, seed: int) -> dict:
    """log Ẑ against K for the zoo's MNIST RBMs along the geometric and the moment-averaged spline paths (base rates)."""
    train, out = binarized_mnist(data_root).train, {}
    for name, folder in RBM_MODELS.items():
        model = zoo.load(REPO / "models" / folder / "checkpoint.pt")
        exact = model.log_partition().item() if model.num_hidden <= 20 else None
        out[name] = entry = {"exact_log_z": exact, "paths": {}}
        for kind in RBM_PATHS:
            began = time.perf_counter()
            with torch.no_grad():
                path, _ = paths.build(model, kind=kind, base="base_rate", data=train)
            entry["paths"][kind] = {"build_seconds": round(time.perf_counter() - began, 1), "rows": []}
            for num_steps in step_counts:
                began = time.perf_counter()
                run = anneal_path(path, "linear", num_steps, chains, generator=torch.Generator().manual_seed(seed))
                entry["paths"][kind]["rows"].append({"steps": num_steps, "log_z": run.log_z, "stderr": run.stderr, "ess": run.ess,
                                                     "seconds": round(time.perf_counter() - began, 1)})
                error = "" if exact is None else f", error {run.log_z - exact:+.3f}"
                print(f"{name} {kind} K = {num_steps:,}: log Ẑ {run.log_z:.3f} ± {run.stderr:.3f}{error}", flush=True)
    return out


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
    parser.add_argument("--data-root", type=Path, default=None, help="part (b): folder holding binarized_mnist/")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out-dir", type=Path, default=None, help="output folder (default reports/paths[/quick])")
    parser.add_argument("--render", type=Path, default=None, help="re-render README.md and the plots beside this results.json")
    args = parser.parse_args(argv)
    if args.render:
        return write_report(json.loads(args.render.read_text()), args.render.parent)
    torch.set_num_threads(args.threads)
    if args.quick:
        args.distances, args.chains, args.max_measured_steps = [2, 8, 32], 200, 2000
    out = args.out_dir or (REPO / "reports" / "paths" / ("quick" if args.quick else ""))
    out.mkdir(parents=True, exist_ok=True)
    previous = json.loads((out / "results.json").read_text()) if (out / "results.json").is_file() else {}
    results = {**previous, "date": datetime.date.today().isoformat(), "pfzoo": pfzoo.__version__, "torch": torch.__version__,
               "machine": machine_description(), "load_average": load_average()}
    if args.part in ("a", "all"):
        knots = end_dense_knots(args.knots_per_side)
        rows = gaussian_experiment(args, knots)
        results.update(settings={"accuracy": args.accuracy, "distances": args.distances, "chains": args.chains, "seed": args.seed,
                                 "max_measured_steps": args.max_measured_steps, "knots": knots.tolist()},
                       gaussians=rows, growth=growth_summary(rows))
    if args.part in ("b", "all"):
        data_root = resolve_data_root(args.data_root or os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")
        if not (data_root / "binarized_mnist").is_dir():
            parser.error(f"part (b) needs {data_root}/binarized_mnist; pass --data-root or set PFZOO_DATA")
        steps = [10, 100] if args.quick else args.rbm_steps
        results.update(rbm_settings={"steps": steps, "chains": args.rbm_chains, "seed": args.seed},
                       rbms=rbm_experiment(data_root, steps, args.rbm_chains, args.seed))
    if "gaussians" not in results:
        parser.error("no part (a) results to render: run with --part a (or all) first")
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    write_report(results, out)


def write_report(results: dict, out: Path) -> None:
    """``README.md``, ``gaussians.png`` and (with part (b)) ``rbms.png`` in ``out`` from ``results`` (what results.json holds)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    settings, rows, rbms = results["settings"], results["gaussians"], results.get("rbms")
    figure, axes = plt.subplots(figsize=(6, 4.5))
    for p in PATHS:
        for s in SCHEDULES:
            points = [(r["distance"], r["steps"]) for r in rows if r["path"] == p and r["schedule"] == s]
            axes.loglog(*zip(*points), marker="o", linestyle="-" if p == "MA" else "--", label=f"{p}, {s} schedule")
    axes.set(xlabel="distance d between the means (σ = 1)", ylabel=f"K for a bias of at most {settings['accuracy']} nats",
             title="Intermediate distributions needed (perfect transitions)")
    axes.legend()
    axes.grid(True, which="both", alpha=0.3)
    figure.tight_layout()
    figure.savefig(out / "gaussians.png", dpi=120)
    plt.close(figure)
    lookup = {(r["distance"], r["path"], r["schedule"]): r for r in rows}
    lines = [
        "# Annealing paths and schedules (Grosse, Maddison & Salakhutdinov 2013)", "",
        f"Measured on {results['date']} with pfzoo {results['pfzoo']}, torch {results['torch']} ({results['machine']}). "
        "Generated by `scripts/reproduce_paths.py`; raw numbers in `results.json`.", "", "## (a) Two Gaussians at distance d", "",
        f"Base N(0, 1), target N(d, 1). K is the smallest number of intermediate distributions whose bias of E[log w] "
        f"(= Σ_k KL(p_(k−1) ‖ p_k) under perfect transitions, exact) is at most {settings['accuracy']} nats. "
        f"The optimal schedule uses the path's exact divergences on {len(settings['knots']) - 1} segments, log-spaced towards both ends.",
        "", "| d | GA, linear | GA, optimal | MA, linear | MA, optimal |", "|---:|---:|---:|---:|---:|",
    ]
    for d in sorted({r["distance"] for r in rows}):
        lines.append(f"| {d:g} | " + " | ".join(f"{lookup[d, p, s]['steps']:,}" for p in PATHS for s in SCHEDULES) + " |")
    lines += ["", "Growth over the largest half of the distances (least-squares slopes):", ""]
    lines += [f"- {name}: log K ≈ {fit['slope_log_k_vs_log_d']:.2f} · log d; against log((log d)²) the slope is "
              f"{fit['slope_log_k_vs_log_log_d_squared']:.2f} (1 = grows like (log d)²)" for name, fit in results["growth"].items()]
    lines += ["", "![K against d](gaussians.png)", "",
              f"### Measured AIS at those K ({settings['chains']:,} chains, perfect transitions, K ≤ {settings['max_measured_steps']:,})", "",
              "AIS is unbiased in Z, so log Ẑ − log Z should be within a few stderr of 0; the E[log w] deficit should match the closed-form bias.",
              "", "| d | path | schedule | K | closed-form bias | E[log w] deficit | log Ẑ − log Z | seconds |",
              "|---:|---|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['distance']:g} | {r['path']} | {r['schedule']} | {r['steps']:,} | {r['bias']:.4f} | {m['mean_log_weight_deficit']:.4f} ± "
              f"{m['deficit_stderr']:.4f} | {m['log_z_error']:+.4f} ± {m['log_z_stderr']:.4f} | {m['seconds']} |"
              for r in rows if (m := r.get("measured")) is not None]
    text = "\n".join(lines) + "\n"
    if rbms:
        text += render_rbms(rbms, results["rbm_settings"], out / "rbms.png")
    (out / "README.md").write_text(text)
    print(f"written to {out}")


def render_rbms(rbms: dict, settings: dict, plot_path: Path) -> str:
    """Part (b)'s README section, and its plot of log Ẑ against K at ``plot_path``."""
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(1, len(rbms), figsize=(5.5 * len(rbms), 4))
    for axis, (name, entry) in zip(axes if len(rbms) > 1 else [axes], rbms.items()):
        for kind, data in entry["paths"].items():
            axis.errorbar([r["steps"] for r in data["rows"]], [r["log_z"] for r in data["rows"]], yerr=[r["stderr"] for r in data["rows"]],
                          marker="o", capsize=3, label="geometric" if kind == "geometric" else "moment-averaged spline")
        if entry["exact_log_z"] is not None:
            axis.axhline(entry["exact_log_z"], color="black", linestyle=":", label="exact")
        axis.set(xscale="log", xlabel="K (linear schedule)", ylabel="log Ẑ", title=f"MNIST RBM {name}")
        axis.legend()
    figure.tight_layout()
    figure.savefig(plot_path, dpi=120)
    plt.close(figure)
    lines = ["", "## (b) MNIST RBMs: geometric path against the moment-averaged spline", "",
             f"AIS from the data base rates, {settings['chains']} chains, linear schedule; log Ẑ ± stderr (ESS). log Ẑ is a "
             "stochastic lower bound on log Z, so without an exact value the larger estimate is the more accurate one. "
             "Per step the spline costs three matrix products against two (its statistics span one segment: both "
             "ends' hidden inputs); the knot fitting is its extra cost, paid once per model.", ""]
    for name, entry in rbms.items():
        exact = entry["exact_log_z"]
        lines += [f"### {name}" + ("" if exact is None else f" (exact log Z = {exact:.3f})"), "",
                  "| K | geometric | moment-averaged spline |", "|---:|---:|---:|"]
        by_kind = {kind: {r["steps"]: r for r in data["rows"]} for kind, data in entry["paths"].items()}
        for steps in sorted(by_kind["geometric"]):
            cells = [by_kind[kind][steps] for kind in RBM_PATHS]
            lines.append(f"| {steps:,} | " + " | ".join(
                f"{r['log_z']:.2f} ± {r['stderr']:.2f} (ESS {r['ess']:.0f}" + ("" if exact is None else f", error {r['log_z'] - exact:+.2f}")
                + f"; {r['seconds']} s)" for r in cells) + " |")
        lines += ["", f"Path construction: geometric {entry['paths']['geometric']['build_seconds']} s, "
                      f"moment-averaged spline {entry['paths']['moment_averaged']['build_seconds']} s.", ""]
    return "\n".join(lines + ["![log Z against K](rbms.png)"]) + "\n"


if __name__ == "__main__":
    main()
