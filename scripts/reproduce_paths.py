"""Reproduce the path comparison of Grosse, Maddison & Salakhutdinov (2013), "Annealing between distributions by averaging moments".

    python scripts/reproduce_paths.py            # reports/paths/{README.md,results.json,gaussians.png}
    python scripts/reproduce_paths.py --quick    # smoke run: reports/paths/quick/
    python scripts/reproduce_paths.py --part b   # only the MNIST RBMs (needs binarized MNIST under the data root)

Part (a), two Gaussians at distance d: base N(0, 1), target N(d, 1). For the geometric-average (GA) and
moment-averaged (MA) paths (:class:`pfzoo.paths.GaussianGeometricPath`, :class:`pfzoo.paths.GaussianMomentAveragedPath`)
under the linear and the optimal schedule (:class:`pfzoo.paths.OptimalSchedule`, built from the path's exact
divergences on a partition dense near both ends), it finds the number of intermediate distributions K needed for a
fixed accuracy: the smallest K whose bias of E[log w] is at most ``--accuracy`` nats. With perfect transitions
(an exact draw from every intermediate Gaussian, the setting of the paper's analysis) that bias is exactly
Σ_k KL(p_{k−1} ‖ p_k), computed in closed form (:meth:`pfzoo.paths.GaussianPath.kl_sum`). The paper's result:
K grows like d² for GA under either schedule and like (log d)² for MA with the optimal schedule.

Part (b), MNIST RBMs (``--part b``; the zoo's CD1(20) RBM, whose log Z is exact by enumeration, and CD25(500)):
log Ẑ by AIS from the data base rates against K along the geometric path and along the moment-averaged spline
(``AIS(path="moment_averaged")``: knot RBMs fitted to interpolated moments, geometric averages between them), with
the spline's fitting time reported as its extra cost.

Each K found in part (a) is then *measured*: AIS with perfect transitions and ``--chains`` chains at that K, reporting
log Ẑ − log Z (within its standard error: AIS is unbiased in Z) and the observed E[log w] deficit against the
closed-form bias.
"""

from __future__ import annotations

import os
import argparse
import datetime
import json
import math
import time
from pathlib import Path

import torch

import pfzoo
from pfzoo.estimators.annealing import anneal
from pfzoo.logmath import summarize_log_weights
from pfzoo.models import Gaussian
from pfzoo.paths import GaussianGeometricPath, GaussianMomentAveragedPath, OptimalSchedule, make_betas

from pfzoo.data.root import resolve_data_root
from pfzoo.reporting import load_average, machine_description

REPO = Path(__file__).resolve().parents[1]


def default_data_root() -> Path:
    """``$PFZOO_DATA``, else ``<repo>/../shared/data`` (where the reference data sit beside a checkout)."""
    return resolve_data_root(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")

PATHS = {"GA": GaussianGeometricPath, "MA": GaussianMomentAveragedPath}
SCHEDULES = ("linear", "optimal")
MAX_STEPS = 1 << 26


def two_gaussians(distance: float) -> tuple[Gaussian, Gaussian]:
    """(target N(d, 1), base N(0, 1)), float64."""
    unit = torch.eye(1, dtype=torch.float64)
    return Gaussian.from_tensors(unit, torch.tensor([distance], dtype=torch.float64)), Gaussian.from_tensors(unit)


def dense_knots(num_per_side: int) -> torch.Tensor:
    """Knots ``[2n + 1]`` log-spaced from 10⁻⁹ to ½ and mirrored: fine where the MA path moves fastest, at both ends."""
    half = torch.logspace(-9, math.log10(0.5), num_per_side, dtype=torch.float64)
    return torch.cat([torch.zeros(1, dtype=torch.float64), half[:-1], torch.tensor([0.5], dtype=torch.float64), (1 - half[:-1]).flip(0),
                      torch.ones(1, dtype=torch.float64)])


def schedule_for(path, kind: str, knots: torch.Tensor):
    return "linear" if kind == "linear" else OptimalSchedule.for_path(path, knots)


def steps_needed(path, schedule, accuracy: float) -> tuple[int, float]:
    """Smallest K with Σ_k KL(p_{k−1}‖p_k) ≤ accuracy (doubling, then bisection), and that bias."""
    def bias(num_steps: int) -> float:
        return path.kl_sum(make_betas(schedule, num_steps)).item()

    high = 1
    while bias(high) > accuracy:
        high *= 2
        if high > MAX_STEPS:
            raise RuntimeError(f"more than {MAX_STEPS} steps needed for accuracy {accuracy}")
    low = high // 2  # bias(low) > accuracy, or low = 0
    while high - low > 1:
        middle = (low + high) // 2
        if bias(middle) > accuracy:
            low = middle
        else:
            high = middle
    return high, bias(high)


def measure_ais(path, schedule, num_steps: int, num_chains: int, exact_log_z: float, seed: int) -> dict:
    """AIS with perfect transitions at K = num_steps: log Ẑ error and the observed E[log w] deficit."""
    generator = torch.Generator().manual_seed(seed)
    began = time.perf_counter()
    result = anneal(path, make_betas(schedule, num_steps), path.sample_base(num_chains, generator=generator), generator=generator)
    log_weights = result.log_weights + path.base_log_partition()
    summary = summarize_log_weights(log_weights)
    return {
        "log_z_error": summary.log_mean.item() - exact_log_z,
        "log_z_stderr": summary.stderr.item(),
        "mean_log_weight_deficit": exact_log_z - log_weights.mean().item(),
        "deficit_stderr": log_weights.std().item() / math.sqrt(num_chains),
        "seconds": round(time.perf_counter() - began, 2),
    }


def gaussian_experiment(distances, accuracy: float, knots: torch.Tensor, chains: int, max_measured_steps: int, seed: int, log) -> list[dict]:
    rows = []
    for distance in distances:
        target, base = two_gaussians(distance)
        exact_log_z = target.log_partition().item()
        for path_name, path_class in PATHS.items():
            path = path_class(target, base)
            for kind in SCHEDULES:
                schedule = schedule_for(path, kind, knots)
                num_steps, bias = steps_needed(path, schedule, accuracy)
                row = {"distance": distance, "path": path_name, "schedule": kind, "steps": num_steps, "bias": bias}
                if num_steps <= max_measured_steps:
                    row["measured"] = measure_ais(path, schedule, num_steps, chains, exact_log_z, seed)
                rows.append(row)
                measured = row.get("measured")
                extra = "" if measured is None else (
                    f"; AIS log Ẑ − log Z {measured['log_z_error']:+.3f} ± {measured['log_z_stderr']:.3f}, "
                    f"E[log w] deficit {measured['mean_log_weight_deficit']:.3f} ± {measured['deficit_stderr']:.3f}")
                log(f"d = {distance:g}, {path_name} {kind}: K = {num_steps:,} (bias {bias:.4f}){extra}")
    return rows


def growth_summary(rows: list[dict]) -> dict:
    """Least-squares slopes of log K against log d and against log((log d)²) over the largest half of the distances."""
    summary = {}
    for path_name in PATHS:
        for kind in SCHEDULES:
            points = [(r["distance"], r["steps"]) for r in rows if r["path"] == path_name and r["schedule"] == kind and r["distance"] > 1]
            points = points[len(points) // 2:]
            if len(points) < 2:
                continue
            x = torch.tensor([math.log(d) for d, _ in points], dtype=torch.float64)
            y = torch.tensor([math.log(k) for _, k in points], dtype=torch.float64)
            slope = ((x - x.mean()) * (y - y.mean())).sum() / (x - x.mean()).square().sum()
            log_log = torch.tensor([math.log(math.log(d) ** 2) for d, _ in points], dtype=torch.float64)
            slope_log = ((log_log - log_log.mean()) * (y - y.mean())).sum() / (log_log - log_log.mean()).square().sum()
            summary[f"{path_name} {kind}"] = {"slope_log_k_vs_log_d": slope.item(), "slope_log_k_vs_log_log_d_squared": slope_log.item(),
                                               "distances": [d for d, _ in points]}
    return summary


def plot(rows: list[dict], accuracy: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4.5))
    for path_name in PATHS:
        for kind in SCHEDULES:
            points = [(r["distance"], r["steps"]) for r in rows if r["path"] == path_name and r["schedule"] == kind]
            axes.loglog(*zip(*points), marker="o", linestyle="-" if path_name == "MA" else "--", label=f"{path_name}, {kind} schedule")
    axes.set_xlabel("distance d between the means (σ = 1)")
    axes.set_ylabel(f"K for a bias of at most {accuracy} nats")
    axes.set_title("Intermediate distributions needed (perfect transitions)")
    axes.legend()
    axes.grid(True, which="both", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


RBM_MODELS = {"cd1-20": "rbm-binarized_mnist-cd1-20", "cd25-500": "rbm-binarized_mnist-cd25-500"}
RBM_PATHS = ("geometric", "moment_averaged")


def rbm_experiment(data_root: Path, step_counts, chains: int, seed: int, log) -> dict:
    """log Ẑ against K for the zoo's MNIST RBMs along the geometric and the moment-averaged spline paths (base rates)."""
    from pfzoo import zoo
    from pfzoo.data import binarized_mnist

    train = binarized_mnist(data_root).train
    out = {}
    for name, folder in RBM_MODELS.items():
        model = zoo.load(REPO / "models" / folder / "checkpoint.pt")
        exact = model.log_partition().item() if model.num_hidden <= 20 else None
        base = model.annealing_base("base_rate", train)
        entry = {"exact_log_z": exact, "paths": {}}
        for kind in RBM_PATHS:
            began = time.perf_counter()
            with torch.no_grad():
                path = model.annealing_path(kind, base)
            build_seconds = round(time.perf_counter() - began, 1)
            rows = []
            for num_steps in step_counts:
                generator = torch.Generator().manual_seed(seed)
                began = time.perf_counter()
                result = anneal(path, make_betas("linear", num_steps), path.sample_base(chains, generator=generator), generator=generator)
                summary = summarize_log_weights(result.log_weights)
                log_z = (path.base_log_partition() + summary.log_mean).item()
                rows.append({"steps": num_steps, "log_z": log_z, "stderr": summary.stderr.item(), "ess": summary.ess.item(),
                             "seconds": round(time.perf_counter() - began, 1)})
                error = "" if exact is None else f", error {log_z - exact:+.3f}"
                log(f"{name} {kind} K = {num_steps:,}: log Ẑ {log_z:.3f} ± {summary.stderr.item():.3f}{error} ({rows[-1]['seconds']} s)")
            entry["paths"][kind] = {"build_seconds": build_seconds, "rows": rows}
        out[name] = entry
    return out


def plot_rbms(rbms: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(1, len(rbms), figsize=(5.5 * len(rbms), 4))
    for axis, (name, entry) in zip(axes if len(rbms) > 1 else [axes], rbms.items()):
        for kind, data in entry["paths"].items():
            steps = [r["steps"] for r in data["rows"]]
            axis.errorbar(steps, [r["log_z"] for r in data["rows"]], yerr=[r["stderr"] for r in data["rows"]], marker="o", capsize=3,
                          label="geometric" if kind == "geometric" else "moment-averaged spline")
        if entry["exact_log_z"] is not None:
            axis.axhline(entry["exact_log_z"], color="black", linestyle=":", label="exact")
        axis.set_xscale("log")
        axis.set_xlabel("K (linear schedule)")
        axis.set_ylabel("log Ẑ")
        axis.set_title(f"MNIST RBM {name}")
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def render_rbms(results: dict) -> str:
    rbms = results.get("rbms")
    if not rbms:
        return ""
    settings = results["rbm_settings"]
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
            cells = []
            for kind in RBM_PATHS:
                r = by_kind[kind][steps]
                error = "" if exact is None else f", error {r['log_z'] - exact:+.2f}"
                cells.append(f"{r['log_z']:.2f} ± {r['stderr']:.2f} (ESS {r['ess']:.0f}{error}; {r['seconds']} s)")
            lines.append(f"| {steps:,} | " + " | ".join(cells) + " |")
        lines += ["", f"Path construction: geometric {entry['paths']['geometric']['build_seconds']} s, "
                      f"moment-averaged spline {entry['paths']['moment_averaged']['build_seconds']} s.", ""]
    lines.append("![log Z against K](rbms.png)")
    return "\n".join(lines) + "\n"


def render(results: dict) -> str:
    settings = results["settings"]
    rows = results["gaussians"]
    distances = sorted({r["distance"] for r in rows})
    lookup = {(r["distance"], r["path"], r["schedule"]): r for r in rows}
    lines = [
        "# Annealing paths and schedules (Grosse, Maddison & Salakhutdinov 2013)",
        "",
        f"Measured on {results['date']} with pfzoo {results['pfzoo']}, torch {results['torch']} ({results['machine']}). "
        "Generated by `scripts/reproduce_paths.py`; raw numbers in `results.json`.",
        "",
        "## (a) Two Gaussians at distance d",
        "",
        f"Base N(0, 1), target N(d, 1). K is the smallest number of intermediate distributions whose bias of E[log w] "
        f"(= Σ_k KL(p_(k−1) ‖ p_k) under perfect transitions, exact) is at most {settings['accuracy']} nats. "
        f"The optimal schedule uses the path's exact divergences on {len(settings['knots']) - 1} segments, log-spaced towards both ends.",
        "",
        "| d | GA, linear | GA, optimal | MA, linear | MA, optimal |",
        "|---:|---:|---:|---:|---:|",
    ]
    for d in distances:
        cells = [f"{lookup[d, p, s]['steps']:,}" for p in PATHS for s in SCHEDULES]
        lines.append(f"| {d:g} | " + " | ".join(cells) + " |")
    lines += ["", "Growth over the largest half of the distances (least-squares slopes):", ""]
    for name, fit in results["growth"].items():
        lines.append(f"- {name}: log K ≈ {fit['slope_log_k_vs_log_d']:.2f} · log d; "
                     f"against log((log d)²) the slope is {fit['slope_log_k_vs_log_log_d_squared']:.2f} (1 = grows like (log d)²)")
    lines += [
        "",
        "![K against d](gaussians.png)",
        "",
        f"### Measured AIS at those K ({settings['chains']:,} chains, perfect transitions, K ≤ {settings['max_measured_steps']:,})",
        "",
        "AIS is unbiased in Z, so log Ẑ − log Z should be within a few stderr of 0; the E[log w] deficit should match the closed-form bias.",
        "",
        "| d | path | schedule | K | closed-form bias | E[log w] deficit | log Ẑ − log Z | seconds |",
        "|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        m = r.get("measured")
        if m is None:
            continue
        lines.append(f"| {r['distance']:g} | {r['path']} | {r['schedule']} | {r['steps']:,} | {r['bias']:.4f} | "
                     f"{m['mean_log_weight_deficit']:.4f} ± {m['deficit_stderr']:.4f} | {m['log_z_error']:+.4f} ± {m['log_z_stderr']:.4f} | {m['seconds']} |")
    return "\n".join(lines) + "\n"


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
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.quick:
        args.distances, args.chains, args.max_measured_steps = [2, 8, 32], 200, 2000
    out = args.out_dir or (REPO / "reports" / "paths" / ("quick" if args.quick else ""))
    out.mkdir(parents=True, exist_ok=True)
    previous = json.loads((out / "results.json").read_text()) if (out / "results.json").is_file() else {}
    results = {
        **previous,
        "date": datetime.date.today().isoformat(),
        "pfzoo": pfzoo.__version__,
        "torch": torch.__version__,
        "machine": machine_description(),
        "load_average": load_average(),
    }
    log = lambda line: print(line, flush=True)  # noqa: E731
    if args.part in ("a", "all"):
        knots = dense_knots(args.knots_per_side)
        rows = gaussian_experiment(args.distances, args.accuracy, knots, args.chains, args.max_measured_steps, args.seed, log)
        results.update(settings={"accuracy": args.accuracy, "distances": args.distances, "chains": args.chains, "seed": args.seed,
                                 "max_measured_steps": args.max_measured_steps, "knots": knots.tolist()},
                       gaussians=rows, growth=growth_summary(rows))
        plot(rows, args.accuracy, out / "gaussians.png")
    if args.part in ("b", "all"):
        data_root = args.data_root or default_data_root()
        if not (data_root / "binarized_mnist").is_dir():
            parser.error(f"part (b) needs {data_root}/binarized_mnist; pass --data-root or set PFZOO_DATA")
        steps = [10, 100] if args.quick else args.rbm_steps
        results.update(rbm_settings={"steps": steps, "chains": args.rbm_chains, "seed": args.seed},
                       rbms=rbm_experiment(data_root, steps, args.rbm_chains, args.seed, log))
        plot_rbms(results["rbms"], out / "rbms.png")
    if "gaussians" not in results:
        parser.error("no part (a) results to render: run with --part a (or all) first")
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "README.md").write_text(render(results) + render_rbms(results))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
