"""The path comparison of Grosse, Maddison & Salakhutdinov (2013), "Annealing between distributions by averaging moments":
the experiments and their report (what ``scripts/reproduce_paths.py`` composes and writes).

(a) :func:`gaussian_experiment`: two Gaussians N(0, 1) → N(d, 1), the geometric-average (GA) and moment-averaged (MA)
paths and the optimal path (OPT, the Fisher–Rao geodesic; Gelman & Meng 1998) under the linear and the optimal schedule,
the K each needs for a given bias and AIS measured there; :func:`two_gaussians_figure` draws GA's and MA's
intermediate distributions between two 2-D Gaussians (the slides' picture).
(b) :func:`rbm_experiment`: log Ẑ against K for MNIST RBMs along the geometric path and the moment-averaged spline.
:func:`gaussians_markdown`, :func:`rbms_markdown` (composed with the spline ablation's section by :func:`report_markdown`) and
the figures render results.json's content alone.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Mapping, Sequence

import torch

from pfzoo import paths
from pfzoo.estimators.path_ais import anneal_path
from pfzoo.models import Gaussian
from pfzoo.models.base import EnergyModel
from pfzoo.paths import GaussianGeodesicPath, GaussianGeometricPath, GaussianMomentAveragedPath, OptimalSchedule
from pfzoo.paths.step_count import growth_exponents, steps_for_bias
from pfzoo.studies.path_samples import samples_markdown
from pfzoo.studies.spline_ablation import ablation_markdown

if TYPE_CHECKING:
    from matplotlib.figure import Figure

logger = logging.getLogger(__name__)

PATHS = {"GA": GaussianGeometricPath, "MA": GaussianMomentAveragedPath, "OPT": GaussianGeodesicPath}
"""Part (a)'s paths: OPT travels the geodesic at constant speed, so its linear schedule already is its optimal one."""
SCHEDULES = ("linear", "optimal")
RBM_MODELS = {"pcd-20": "rbm-binarized_mnist-pcd-20", "cd1-500": "rbm-binarized_mnist-cd1-500"}
"""Part (b)'s RBMs: the slides' PCD(20) (exact log Z) and CD1(500)."""
RBM_PATHS = ("geometric", "moment_averaged")


def gaussian_experiment(distances: Sequence[float], knots: torch.Tensor, *, accuracy: float, max_measured_steps: int, chains: int,
                        seed: int) -> list[dict]:
    """Per distance d, path and schedule: the smallest K whose perfect-transition bias is at most ``accuracy`` nats
    (the optimal schedule from exact divergences on ``knots [S + 1]``), and where K ≤ ``max_measured_steps`` AIS with
    perfect transitions and ``chains`` chains measured there (generator seeded with ``seed``)."""
    rows, unit = [], torch.eye(1, dtype=torch.float64)
    for distance in distances:
        target, base = Gaussian.from_tensors(unit, torch.tensor([distance], dtype=torch.float64)), Gaussian.from_tensors(unit)
        exact_log_z = target.log_partition().item()
        for path_name, path_class in PATHS.items():
            path = path_class(target, base)
            for kind in SCHEDULES:
                schedule = "linear" if kind == "linear" else OptimalSchedule.for_path(path, knots)
                num_steps, bias = steps_for_bias(path, schedule, accuracy)
                row, extra = {"distance": distance, "path": path_name, "schedule": kind, "steps": num_steps, "bias": bias}, ""
                if num_steps <= max_measured_steps:
                    began = time.perf_counter()
                    run = anneal_path(path, schedule, num_steps, chains, generator=torch.Generator().manual_seed(seed))
                    row["measured"] = m = {"log_z_error": run.log_z - exact_log_z, "log_z_stderr": run.stderr,
                                           "mean_log_weight_deficit": exact_log_z - run.mean_log_weight,
                                           "deficit_stderr": run.mean_log_weight_stderr, "seconds": round(time.perf_counter() - began, 2)}
                    extra = (f"; AIS log Ẑ − log Z {m['log_z_error']:+.3f} ± {m['log_z_stderr']:.3f}, "
                             f"E[log w] deficit {m['mean_log_weight_deficit']:.3f} ± {m['deficit_stderr']:.3f}")
                rows.append(row)
                logger.info("d = %g, %s %s: K = %s (bias %.4f)%s", distance, path_name, kind, f"{num_steps:,}", bias, extra)
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


def rbm_experiment(models: Mapping[str, EnergyModel], train: torch.Tensor, step_counts: Sequence[int], chains: int, seed: int,
                   base: str = "base_rate") -> dict:
    """log Ẑ against K for each RBM of ``models`` (name → model) along the geometric and the moment-averaged spline
    paths from ``base`` (``"base_rate"``: the base rates of ``train [N, 784]``; ``"uniform"``: every unit at ½, the
    slides' start); the exact log Z where at most 20 hidden units enumerate."""
    out = {}
    for name, model in models.items():
        exact = model.log_partition().item() if model.num_hidden <= 20 else None
        out[name] = entry = {"exact_log_z": exact, "paths": {}}
        for kind in RBM_PATHS:
            began = time.perf_counter()
            with torch.no_grad():
                path, _ = paths.build(model, kind=kind, base=base, data=train)
            entry["paths"][kind] = {"build_seconds": round(time.perf_counter() - began, 1), "rows": []}
            for num_steps in step_counts:
                began = time.perf_counter()
                run = anneal_path(path, "linear", num_steps, chains, generator=torch.Generator().manual_seed(seed))
                entry["paths"][kind]["rows"].append({"steps": num_steps, "log_z": run.log_z, "stderr": run.stderr, "ess": run.ess,
                                                     "seconds": round(time.perf_counter() - began, 1)})
                error = "" if exact is None else f", error {run.log_z - exact:+.3f}"
                logger.info("%s %s K = %s: log Ẑ %.3f ± %.3f%s", name, kind, f"{num_steps:,}", run.log_z, run.stderr, error)
    return out


def gaussians_figure(results: dict) -> Figure:
    """Part (a)'s plot of K against d for every path and schedule; the caller saves and closes it."""
    from matplotlib import pyplot as plt

    settings, rows = results["settings"], results["gaussians"]
    figure, axes = plt.subplots(figsize=(6, 4.5))
    for p in PATHS:
        for s in SCHEDULES:
            points = [(r["distance"], r["steps"]) for r in rows if r["path"] == p and r["schedule"] == s]
            if points:
                axes.loglog(*zip(*points), marker="o", linestyle={"GA": "--", "MA": "-", "OPT": ":"}[p], label=f"{p}, {s} schedule")
    axes.set(xlabel="distance d between the means (σ = 1)", ylabel=f"K for a bias of at most {settings['accuracy']} nats",
             title="Intermediate distributions needed (perfect transitions)")
    axes.legend()
    axes.grid(True, which="both", alpha=0.3)
    figure.tight_layout()
    return figure


def two_gaussians_figure(betas: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0)) -> Figure:
    """The slides' picture ("Two Gaussians"): the intermediate distributions of the geometric (GA) and the moment-averaged
    (MA) path between N((−10, 0), [[1, −0.85], [−0.85, 1]]) and N((10, 0), [[1, 0.85], [0.85, 1]]), the slides' two, as 2σ
    ellipses at ``betas``; GA's stay between the ends and as narrow as they are, MA's spread to cover both. The caller saves
    and closes it."""
    from matplotlib import pyplot as plt

    def correlated(mean: float, rho: float) -> Gaussian:
        covariance = torch.tensor([[1.0, rho], [rho, 1.0]], dtype=torch.float64)
        return Gaussian.from_tensors(torch.linalg.inv(covariance), torch.tensor([mean, 0.0], dtype=torch.float64))

    base, target = correlated(-10.0, -0.85), correlated(10.0, 0.85)
    angle = torch.linspace(0, 2 * torch.pi, 200, dtype=torch.float64)
    circle = torch.stack([angle.cos(), angle.sin()], 1) * 2.0
    figure, axes = plt.subplots(1, 2, figsize=(11, 2.8), sharex=True, sharey=True)
    for axis, (name, path_class) in zip(axes, (("geometric average (GA)", GaussianGeometricPath), ("moment average (MA)", GaussianMomentAveragedPath))):
        path = path_class(target, base)
        colours = plt.cm.viridis(torch.linspace(0, 1, len(betas)).tolist())
        for beta, colour in zip(betas, colours):
            p = path.parameters(beta)
            ellipse = (p.mean + circle @ p.covariance_cholesky.T).detach()
            axis.plot(ellipse[:, 0].tolist(), ellipse[:, 1].tolist(), color=colour, label=f"β = {beta:g}")
            axis.plot(*p.mean.tolist(), marker="+", color=colour)
        axis.set(title=name, xlabel="x₁", aspect="equal")
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("x₂")
    axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes: the ellipses fill them
    figure.suptitle("Intermediate distributions between N((−10, 0), ρ = −0.85) and N((10, 0), ρ = 0.85), unit variances: 2σ ellipses",
                    fontsize=10)
    figure.tight_layout()
    return figure


def gaussians_markdown(results: dict) -> str:
    """The README's title and part (a) from ``results`` (what results.json holds)."""
    settings, rows = results["settings"], results["gaussians"]
    lookup = {(r["distance"], r["path"], r["schedule"]): r for r in rows}
    columns = [(p, s) for p in PATHS for s in SCHEDULES if any(r["path"] == p and r["schedule"] == s for r in rows)]
    lines = [
        "# Annealing paths and schedules (Grosse, Maddison & Salakhutdinov 2013)", "",
        f"Measured on {results['date']} with pfzoo {results['pfzoo']}, torch {results['torch']} ({results['machine']}). "
        "Generated by `scripts/reproduce_paths.py`; raw numbers in `results.json`.", "", "## (a) Two Gaussians at distance d", "",
        f"Base N(0, 1), target N(d, 1). K is the smallest number of intermediate distributions whose bias of E[log w] "
        f"(= Σ_k KL(p_(k−1) ‖ p_k) under perfect transitions, exact) is at most {settings['accuracy']} nats. "
        f"The optimal schedule uses the path's exact divergences on {len(settings['knots']) - 1} segments, log-spaced towards both ends. "
        "OPT is the optimal path itself (Gelman & Meng 1998): the Fisher–Rao geodesic between the two Gaussians at constant speed, whose "
        "bias is ℓ²/(2K) for large K with ℓ their Fisher–Rao distance (√2 · arccosh(1 + d²/4) here), the least any path and schedule can "
        "reach; its optimal schedule, computed like the others', must agree with its linear one.",
        "", "| d | " + " | ".join(f"{p}, {s}" for p, s in columns) + " |", "|---:|" + "---:|" * len(columns),
    ]
    for d in sorted({r["distance"] for r in rows}):
        lines.append(f"| {d:g} | " + " | ".join(f"{lookup[d, p, s]['steps']:,}" if (d, p, s) in lookup else "—" for p, s in columns) + " |")
    lines += ["", "Growth over the largest half of the distances (least-squares slopes):", ""]
    lines += [f"- {name}: log K ≈ {fit['slope_log_k_vs_log_d']:.2f} · log d; against log((log d)²) the slope is "
              f"{fit['slope_log_k_vs_log_log_d_squared']:.2f} (1 = grows like (log d)²)" for name, fit in results["growth"].items()]
    lines += ["", "![K against d](gaussians.png)", "",
              "![Geometric and moment averages of two 2-D Gaussians](two_gaussians.png)", "",
              f"### Measured AIS at those K ({settings['chains']:,} chains, perfect transitions, K ≤ {settings['max_measured_steps']:,})", "",
              "AIS is unbiased in Z, so log Ẑ − log Z should be within a few stderr of 0; the E[log w] deficit should match the closed-form bias.",
              "", "| d | path | schedule | K | closed-form bias | E[log w] deficit | log Ẑ − log Z | seconds |",
              "|---:|---|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['distance']:g} | {r['path']} | {r['schedule']} | {r['steps']:,} | {r['bias']:.4f} | {m['mean_log_weight_deficit']:.4f} ± "
              f"{m['deficit_stderr']:.4f} | {m['log_z_error']:+.4f} ± {m['log_z_stderr']:.4f} | {m['seconds']} |"
              for r in rows if (m := r.get("measured")) is not None]
    return "\n".join(lines) + "\n"


def rbms_figure(rbms: dict) -> Figure:
    """Part (b)'s plot of log Ẑ against K per RBM; the caller saves and closes it."""
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
    return figure


def _uniform_verdict(by_kind: dict) -> str:
    """One sentence on the largest K of a uniform-base run: which path ends lower, by how much, and with what ESS."""
    steps = max(by_kind["geometric"])
    geometric, spline = by_kind["geometric"][steps], by_kind["moment_averaged"][steps]
    gap = geometric["log_z"] - spline["log_z"]
    lower, higher = ("the spline", "the geometric path") if gap > 0 else ("the geometric path", "the spline")
    return (f"At K = {steps:,}, {lower} ends {abs(gap):.1f} nats below {higher} (ESS {spline['ess']:.0f} and {geometric['ess']:.0f} of "
            f"the chains, spline and geometric); the slides report the geometric path the lower one, by about 20 nats.")


def rbms_markdown(rbms: dict, settings: dict, *, uniform: bool = False) -> str:
    """Part (b)'s README section (it shows ``rbms.png``), or with ``uniform`` the section of the runs from a uniform base."""
    if uniform:
        lines = ["", "## (b′) From a uniform base: the slides' CD1(500) comparison", "",
                 "The slides (\"Estimating Partition Functions of RBMs\", the RBM with 500 hidden units trained with CD1) show the "
                 "geometric path underestimating log Z by about 20 nats where the moment-averaged spline does not; they do not "
                 "state the base, and AIS from a uniform base (every weight and bias 0) is where such a gap can open, since the "
                 "base-rate start of (b) agrees along both paths. Same settings as (b) otherwise: "
                 f"{settings['chains']} chains, linear schedule; log Ẑ ± stderr (ESS).", ""]
    else:
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
        if uniform:
            lines += [_uniform_verdict(by_kind), ""]
    return "\n".join(lines + ([] if uniform else ["![log Z against K](rbms.png)"])) + "\n"


def report_markdown(results: dict) -> str:
    """reports/paths/README.md from results.json's content: part (a), part (b) where measured, (b′) from a uniform base
    where measured, the spline ablation where ``scripts/ablate_spline.py`` stored it (key ``spline_ablation``), and the
    pictures of the intermediate distributions where ``scripts/draw_path_samples.py`` stored them (key ``path_samples``)."""
    text = gaussians_markdown(results) + (rbms_markdown(results["rbms"], results["rbm_settings"]) if results.get("rbms") else "")
    if results.get("rbms_uniform"):
        text += rbms_markdown(results["rbms_uniform"], results["rbm_uniform_settings"], uniform=True)
    if results.get("spline_ablation"):
        text += ablation_markdown(results["spline_ablation"], results.get("rbms_uniform"))
    if results.get("path_samples"):
        text += samples_markdown(results["path_samples"])
    return text
