"""Measure AIS on reference problems with known log Z and write its estimator card.

    python scripts/estimator_card.py                # full card: estimators/ais.md + estimators/ais.json
    python scripts/estimator_card.py --quick        # fast subset: estimators/ais-quick.{md,json}

Reference problems are binary RBMs small enough that ``model.log_partition()`` enumerates the
smaller layer exactly: random RBMs of a few sizes and weight scales, and (when the reference data
folder is present) a 784×20 RBM trained with CD-1 on a subset of binarised MNIST. Every problem is
estimated with AIS from the uniform and the data base-rate base distributions, along linear and
sigmoid schedules, at several numbers of intermediate distributions K, each repeated over seeds
0..R-1 so that the reported standard error can be compared with the actual error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
from torch.nn import functional as F

import pfzoo
from pfzoo.data import DataSplits, binarized_mnist
from pfzoo.estimators import AIS
from pfzoo.models import RBM
from pfzoo.training import CD, Trainer

from pfzoo.data.root import resolve_data_root
from pfzoo import reporting
from pfzoo.reporting import load_average, machine_description

REPO = Path(__file__).resolve().parents[1]


def default_data_root() -> Path:
    """``$PFZOO_DATA``, else ``<repo>/../shared/data`` (where the reference data sit beside a checkout)."""
    return resolve_data_root(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")
BASES = ("uniform", "base_rate")
SCHEDULES = ("linear", "sigmoid")
NUM_BASE_SAMPLES = 1000  # exact model samples the base rates of a random RBM are fitted to
SEED_STRIDE = 1000  # row c uses generator seeds 1000·c + r, r < repeats: no two estimates share a random stream
UNDER_REPORT = 1.5  # a row "under-reports" when its RMSE over seeds exceeds this multiple of its mean stderr

# The MNIST reference model (the same recipe as tests/estimators/test_ais_mnist.py, CD-1 variant).
MNIST_TRAIN, MNIST_HIDDEN, MNIST_EPOCHS, MNIST_LR = 10_000, 20, 5, 0.1


@dataclass
class Problem:
    name: str
    description: str
    model: RBM
    base_data: torch.Tensor
    base_data_description: str
    repeats: int = 1
    exact_log_z: float = math.nan
    exact_seconds: float = math.nan


# ---- reference problems ---------------------------------------------------------------------


def random_rbm(num_visible: int, num_hidden: int, scale: float, seed: int) -> RBM:
    """Weights ``N(0, scale²)``, biases ``N(0, 0.25)`` (as in tests/estimators/test_partition_table.py)."""
    g = torch.Generator().manual_seed(seed)
    return RBM.from_tensors(
        torch.randn(num_visible, num_hidden, generator=g) * scale,
        torch.randn(num_visible, generator=g) * 0.5,
        torch.randn(num_hidden, generator=g) * 0.5,
    )


@torch.no_grad()
def exact_visible_samples(model: RBM, num: int, generator: torch.Generator) -> torch.Tensor:
    """``num`` exact samples ``v ~ p(v)`` ``[num, V]``, by enumerating the smaller layer (≤ 2^20 states)."""
    weight, b, c = model.weight.double(), model.visible_bias.double(), model.hidden_bias.double()
    if model.num_hidden <= model.num_visible:
        size = model.num_hidden
        states = ((torch.arange(1 << size)[:, None] >> torch.arange(size)) & 1).double()
        log_p = states @ c + F.softplus(states @ weight.T + b).sum(-1)  # log p*(h)
        h = states[torch.multinomial(torch.softmax(log_p, 0), num, replacement=True, generator=generator)]
        return torch.bernoulli(torch.sigmoid(h @ weight.T + b), generator=generator).float()
    size = model.num_visible
    states = ((torch.arange(1 << size)[:, None] >> torch.arange(size)) & 1).double()
    log_p = states @ b + F.softplus(states @ weight + c).sum(-1)  # log p*(v) = -F(v)
    return states[torch.multinomial(torch.softmax(log_p, 0), num, replacement=True, generator=generator)].float()


def random_problems(specs: list[tuple[int, int, float, int]]) -> list[Problem]:
    problems = []
    for num_visible, num_hidden, scale, seed in specs:
        model = random_rbm(num_visible, num_hidden, scale, seed)
        samples = exact_visible_samples(model, NUM_BASE_SAMPLES, torch.Generator().manual_seed(1000 + seed))
        problems.append(
            Problem(
                name=f"rbm-{num_visible}x{num_hidden}-w{scale:.1f}",
                description=f"random RBM V={num_visible}, H={num_hidden}, W ~ N(0, {scale:g}²), biases ~ N(0, 0.5²), seed {seed}",
                model=model,
                base_data=samples,
                base_data_description=f"{NUM_BASE_SAMPLES} exact samples of the model",
            )
        )
    return problems


def mnist_problem(root: Path) -> Problem:
    """A 784×20 RBM trained with CD-1 on 10,000 random binarised-MNIST training images (deterministic)."""
    splits = binarized_mnist(root)
    g = torch.Generator().manual_seed(0)
    train = splits.train[torch.randperm(splits.train.shape[0], generator=g)[:MNIST_TRAIN]]
    test = splits.test[torch.randperm(splits.test.shape[0], generator=g)[:1000]]
    model = RBM(784, MNIST_HIDDEN, init_std=0.01, generator=torch.Generator().manual_seed(1))
    model.init_from_data(train)
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = Trainer(
            CD(k=1),
            partial(torch.optim.SGD, lr=MNIST_LR, momentum=0.5),
            run_dir=run_dir,
            epochs=MNIST_EPOCHS,
            batch_size=100,
            progress=False,
            seed=0,
        )
        trainer.fit(model, DataSplits("binarized_mnist_subset", train=train, test=test))
    model.requires_grad_(False)
    return Problem(
        name=f"mnist-784x{MNIST_HIDDEN}-cd1",
        description=(
            f"784×{MNIST_HIDDEN} RBM trained with CD-1 (SGD lr {MNIST_LR}, momentum 0.5, batch 100, {MNIST_EPOCHS} epochs) "
            f"on {MNIST_TRAIN:,} random binarised-MNIST training images (Larochelle & Murray), seeds fixed"
        ),
        model=model,
        base_data=train,
        base_data_description=f"the {MNIST_TRAIN:,} training images",
    )


# ---- measurement ------------------------------------------------------------------------------


def choose_threads(requested: str) -> tuple[int, dict]:
    """``requested`` threads, or with "auto" the faster of 1 and 2 on a short 784×20 AIS run."""
    model = RBM(784, 20, init_std=0.1, generator=torch.Generator().manual_seed(0))
    return reporting.pick_threads(requested, lambda steps: AIS(100, steps)(model, generator=torch.Generator().manual_seed(0)))


def run_row(problem: Problem, base: str, schedule: str, num_steps: int, num_chains: int, first_seed: int) -> list[dict]:
    """``problem.repeats`` AIS estimates with generator seeds ``first_seed, first_seed + 1, …``."""
    runs = []
    for seed in range(first_seed, first_seed + problem.repeats):
        estimator = AIS(num_chains, num_steps, schedule=schedule, base=base)
        began = time.perf_counter()
        estimate = estimator(problem.model, data=problem.base_data, generator=torch.Generator().manual_seed(seed))
        seconds = time.perf_counter() - began
        error = estimate.log_z - problem.exact_log_z
        runs.append(
            {
                "problem": problem.name,
                "base": base,
                "schedule": schedule,
                "num_steps": num_steps,
                "num_chains": num_chains,
                "seed": seed,
                "exact_log_z": problem.exact_log_z,
                "log_z": estimate.log_z,
                "stderr": estimate.stderr,
                "ess": estimate.ess,
                "error": error,
                "error_over_stderr": error / estimate.stderr if estimate.stderr > 0 else math.copysign(math.inf, error),
                "seconds": seconds,
            }
        )
    return runs


def row_summary(runs: list[dict]) -> dict:
    errors = [r["error"] for r in runs]
    return {
        "rmse": math.sqrt(sum(e * e for e in errors) / len(errors)),
        "mean_error": sum(errors) / len(errors),
        "mean_stderr": sum(r["stderr"] for r in runs) / len(runs),
        "max_abs_z": max(abs(r["error_over_stderr"]) for r in runs),
    }


# ---- the card ---------------------------------------------------------------------------------


def fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}f}" if math.isfinite(x) else str(x)


def calibration_table(runs: list[dict], step_counts: list[int]) -> list[str]:
    """Markdown rows of error/stderr statistics by (K, base) over all problems and schedules."""
    lines = [
        "| K | base | runs | RMS(err/stderr) | share \\|err\\| > 2 stderr | share \\|err\\| > 3 stderr | mean err (nats) | median ESS |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for num_steps in step_counts:
        for base in BASES:
            sel = [r for r in runs if r["num_steps"] == num_steps and r["base"] == base]
            if not sel:
                continue
            z = [r["error_over_stderr"] for r in sel]
            ess = sorted(r["ess"] for r in sel)
            entry = {
                "runs": len(sel),
                "rms_z": math.sqrt(sum(v * v for v in z) / len(z)),
                "over2": sum(abs(v) > 2 for v in z) / len(z),
                "over3": sum(abs(v) > 3 for v in z) / len(z),
                "mean_error": sum(r["error"] for r in sel) / len(sel),
                "median_ess": ess[len(ess) // 2],
            }
            lines.append(
                f"| {num_steps} | {base} | {entry['runs']} | {entry['rms_z']:.2f} | {entry['over2']:.0%} | {entry['over3']:.0%} | "
                f"{entry['mean_error']:+.3f} | {entry['median_ess']:.1f} |"
            )
    return lines


def reading(runs: list[dict], step_counts: list[int], problems: list[Problem]) -> list[str]:
    """Data-driven observations about the measured table (each sentence is computed from ``runs``)."""
    out = []
    large = step_counts[-1]
    for num_steps in step_counts:
        sel = [r for r in runs if r["num_steps"] == num_steps]
        z = [r["error_over_stderr"] for r in sel]
        rms = math.sqrt(sum(v * v for v in z) / len(z))
        over3 = sum(abs(v) > 3 for v in z)
        worst = max(sel, key=lambda r: abs(r["error_over_stderr"]))
        neg = sum(r["error"] < 0 for r in sel)
        verdict = "pooled over problems, " + (
            "the reported stderr under-reports the actual error" if rms > 1.25
            else "the reported stderr is roughly calibrated" if rms > 0.8
            else "the reported stderr is, if anything, conservative"
        )
        flagged = []
        for problem in problems:
            for base in BASES:
                for schedule in SCHEDULES:
                    row = [r for r in sel if r["problem"] == problem.name and r["base"] == base and r["schedule"] == schedule]
                    if row:
                        s = row_summary(row)
                        if s["rmse"] > UNDER_REPORT * s["mean_stderr"]:
                            median_ess = sorted(r["ess"] for r in row)[len(row) // 2]
                            flagged.append(
                                f"{problem.name} / {base} / {schedule} (RMSE {s['rmse']:.3f} vs mean stderr {s['mean_stderr']:.3f}, "
                                f"median ESS {median_ess:.0f})"
                            )
        flag_text = (
            f" Rows whose RMSE exceeds {UNDER_REPORT}× the mean stderr: " + "; ".join(flagged) + "."
            if flagged
            else f" No row's RMSE exceeds {UNDER_REPORT}× its mean stderr."
        )
        out.append(
            f"- **K = {num_steps}**: over {len(sel)} runs, RMS(error/stderr) = {rms:.2f} (≈ 1 if calibrated), so {verdict}; "
            f"{over3} run(s) miss the exact value by more than 3 stderr; {neg} of {len(sel)} errors are negative. "
            f"Worst: {worst['problem']} / {worst['base']} / {worst['schedule']}, error {worst['error']:+.3f} nats "
            f"with stderr {worst['stderr']:.3f} (ESS {worst['ess']:.1f} of {worst['num_chains']})." + flag_text
        )
    # Jensen bias: E[log Ẑ] ≤ log Z, visible as negative mean errors at small K.
    means = {k: sum(r["error"] for r in runs if r["num_steps"] == k) / max(1, sum(r["num_steps"] == k for r in runs)) for k in step_counts}
    low = []
    for k in step_counts:
        errors = [r["error"] for r in runs if r["num_steps"] == k]
        spread = math.sqrt(sum((e - means[k]) ** 2 for e in errors) / max(1, len(errors) - 1) / len(errors))
        if means[k] < -2 * spread:
            low.append(k)
    out.append(
        "- **Bias**: the mean error over all runs is "
        + ", ".join(f"{means[k]:+.3f} nats at K = {k}" for k in step_counts)
        + ". log Ẑ is a stochastic lower bound (E[log Ẑ] ≤ log Z), so estimates should fall below the truth more often "
        "than above it when K is too small (the Jensen gap). "
        + (
            f"The mean error is negative by more than 2 of its standard errors at K = {', '.join(map(str, low))}."
            if low
            else "No K shows a mean error negative by more than 2 of its standard errors."
        )
    )
    # Base distributions, on each problem at the largest K.
    parts, gains = [], {}
    for problem in problems:
        se = {}
        for base in BASES:
            sel = [r for r in runs if r["problem"] == problem.name and r["base"] == base and r["num_steps"] == large]
            if sel:
                se[base] = sum(r["stderr"] for r in sel) / len(sel)
        if len(se) == 2:
            parts.append(f"{problem.name} {se['base_rate']:.3f} vs {se['uniform']:.3f}")
            gains[problem.name] = se["uniform"] / se["base_rate"] if se["base_rate"] > 0 else math.inf
    if parts:
        best = max(gains, key=gains.get)
        worst = min(gains, key=gains.get)
        out.append(
            f"- **Base distribution** (mean stderr at K = {large}, base_rate vs uniform): " + "; ".join(parts) + ". "
            f"The base-rate start lowers the stderr by a factor {gains[worst]:.1f} ({worst}) to {gains[best]:.1f} ({best}) "
            "at equal cost."
        )
    # Schedules.
    ratios = []
    for problem in problems:
        for base in BASES:
            se = {}
            for schedule in SCHEDULES:
                sel = [r for r in runs if r["problem"] == problem.name and r["base"] == base and r["schedule"] == schedule and r["num_steps"] == large]
                if sel:
                    se[schedule] = sum(r["stderr"] for r in sel) / len(sel)
            if len(se) == 2 and se["linear"] > 0:
                ratios.append(se["sigmoid"] / se["linear"])
    if ratios:
        ratios.sort()
        out.append(
            f"- **Schedule**: at K = {large} the sigmoid schedule's mean stderr is {ratios[0]:.2f}–{ratios[-1]:.2f}× the linear one's "
            f"(median {ratios[len(ratios) // 2]:.2f}) across the {len(ratios)} problem/base pairs."
        )
    costs = []
    for problem in problems:
        sel = [r for r in runs if r["problem"] == problem.name and r["num_steps"] == large]
        if sel:
            per_step = sorted(r["seconds"] / r["num_steps"] for r in sel)[len(sel) // 2]
            costs.append(f"{problem.name} {per_step * 1e3:.2f} ms")
    out.append(
        f"- **Cost** (median wall time per intermediate distribution for {runs[0]['num_chains']} chains, from the K = {large} runs): "
        + "; ".join(costs)
        + ". Time is linear in K and in the number of chains."
    )
    counts = sorted({p.repeats for p in problems})
    out.append(
        f"- Each row's err/stderr comes from a single seed and is itself noisy; the RMSE and max |err/stderr| columns "
        f"(over {' or '.join(map(str, counts))} seeds) and the calibration table are the ones to read. With so few seeds an "
        "RMSE is itself only a rough estimate of the true spread (±25–35 %), so a ⚠ near the threshold is weak evidence."
    )
    return out


def write_card(path: Path, meta: dict, problems: list[Problem], runs: list[dict], step_counts: list[int]) -> None:
    lines = [
        "# Estimator card: AIS (annealed importance sampling)",
        "",
        f"`pfzoo.estimators.AIS` — measured on {meta['date']} with pfzoo {meta['pfzoo_version']}, torch {meta['torch_version']}.",
        "",
        "## What it estimates",
        "",
        "AIS (Neal 2001; Salakhutdinov & Murray 2008 for RBMs) anneals N independent chains from a tractable base",
        "distribution p₀ (known Z₀) to the model along the geometric path f_β = f₀^(1−β) f₁^β, β₀ = 0 < … < β_K = 1,",
        "accumulating log w = Σ_k [log f_{β_k}(x_{k−1}) − log f_{β_{k−1}}(x_{k−1})], with one block-Gibbs sweep of p_{β_k} between",
        "increments. For an RBM the path is the RBM with interpolated parameters (W_β = βW). The estimate",
        "Ẑ = Z₀ · mean_i w_i is **unbiased for Z**, so by Jensen **log Ẑ is a stochastic lower bound on log Z**",
        "(E[log Ẑ] ≤ log Z), and a test log-likelihood −F(v) − log Ẑ computed from it is biased *upward*.",
        "",
        "Bases: `uniform` (all parameters 0, log Z₀ = (V + H) log 2) and `base_rate` (visible biases = logits of the",
        "smoothed pixel means of the base data, W = 0, hidden biases 0). Schedules: `linear` (β_k = k/K) and `sigmoid`",
        "(Wu et al. 2017, δ = 4: denser near both ends).",
        "",
        "## How the standard error is computed",
        "",
        "`pfzoo.logmath.summarize_log_weights`: with w̃_i = exp(log w_i − max_j log w_j), the delta method on",
        "log(mean w) gives **stderr = sd(w̃) / (√N · mean(w̃))** (sample sd, N − 1 denominator), and",
        "**ESS = (Σ w̃)² / Σ w̃²** ∈ [1, N]. This is only as good as the sample variance of the weights: when the",
        "log weights are spread over several nats the largest weights are rarely drawn, the sample variance misses",
        "them, and the stderr *under*-reports the error. A small ESS is the warning sign.",
        "",
        "## How it was measured",
        "",
        "```",
        meta["command"],
        "```",
        "",
        f"- Machine: {meta['machine']}; `torch.get_num_threads() = {meta['torch_threads']}`"
        + (f" (chosen automatically; 300 AIS steps of a 784×20 RBM took {meta['thread_benchmark']})" if meta["thread_benchmark"] else "")
        + ".",
        f"- Load average (1/5/15 min) at the start and end of the measurements: {meta['load_average']['start']} → "
        f"{meta['load_average']['end']} on {os.cpu_count()} cores; wall times were taken on a machine shared with other jobs "
        "and are indicative only.",
        f"- {meta['num_chains']} chains per estimate; K ∈ {{{', '.join(map(str, step_counts))}}}; each configuration (table row c, "
        f"counted across all problems) repeated R times (R per problem below) with generator seeds {SEED_STRIDE}·c + r, r < R, so no two "
        "estimates share a random stream and the pooled counts below are over independent runs. Wall seconds are for one estimate "
        "(the first repeat), base fitting included, on CPU.",
        f"- Base data of the random RBMs: {NUM_BASE_SAMPLES} exact samples of the model (the smaller layer drawn from its",
        "  enumerated marginal, then the visible layer given it), so `base_rate` starts from the model's own pixel marginals.",
        "- Exact log Z from `model.log_partition()` (enumeration of the smaller layer, float64).",
        "- Columns: *estimate*, *stderr*, *ESS*, *err/stderr*, *s* are from the first repeat; *RMSE* (root mean squared error vs",
        "  exact), *mean stderr* and *max |err/stderr|* are over all R repeats. err = estimate − exact (negative = underestimate).",
        f"  A ⚠ marks rows whose RMSE exceeds {UNDER_REPORT}× their mean stderr (the stderr under-reports the error).",
    ]
    if meta.get("mnist_skipped"):
        lines.append(f"- The MNIST problem was skipped: {meta['mnist_skipped']}.")
    lines += ["", "## Reference problems", "", "| problem | description | exact log Z | base data | exact s | R |", "|---|---|---:|---|---:|---:|"]
    for p in problems:
        lines.append(f"| {p.name} | {p.description} | {p.exact_log_z:.4f} | {p.base_data_description} | {p.exact_seconds:.1f} | {p.repeats} |")
    lines += ["", "## Results", ""]
    for p in problems:
        lines += [
            f"### {p.name} (exact log Z = {p.exact_log_z:.4f})",
            "",
            "| base | schedule | K | estimate | stderr | ESS | err/stderr | s | RMSE | mean stderr | max \\|err/stderr\\| |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for base in BASES:
            for schedule in SCHEDULES:
                for num_steps in step_counts:
                    sel = [r for r in runs if r["problem"] == p.name and r["base"] == base and r["schedule"] == schedule and r["num_steps"] == num_steps]
                    if not sel:
                        continue
                    first, s = sel[0], row_summary(sel)
                    flag = " ⚠" if s["rmse"] > UNDER_REPORT * s["mean_stderr"] else ""
                    lines.append(
                        f"| {base} | {schedule} | {num_steps}{flag} | {first['log_z']:.4f} | {first['stderr']:.4f} | {first['ess']:.1f} | "
                        f"{first['error_over_stderr']:+.2f} | {first['seconds']:.2f} | {s['rmse']:.4f} | {s['mean_stderr']:.4f} | {s['max_abs_z']:.2f} |"
                    )
        lines.append("")
    calib = calibration_table(runs, step_counts)
    lines += ["## Is the stderr honest? (all problems and schedules pooled)", "", *calib, ""]
    lines += ["## Reading", "", *reading(runs, step_counts, problems), ""]
    lines += [
        "Practical advice from these numbers: report log Ẑ with its stderr *and* ESS; distrust the stderr when the ESS",
        "is a small fraction of the number of chains; prefer the data base-rate base for models of real data; and check",
        "that the estimate stops moving when K is multiplied by 10 (a rising log Ẑ means the smaller K was still biased low).",
        "",
        f"Raw numbers: `{meta['json_name']}` (every run, every seed).",
        "",
    ]
    path.write_text("\n".join(lines))








def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fast subset: K in {100, 1000}, 2 seeds, writes ais-quick.{md,json}")
    parser.add_argument("--data-root", type=Path, default=default_data_root(), help="reference data folder (default: $PFZOO_DATA or <repo>/../shared/data)")
    parser.add_argument("--no-mnist", action="store_true", help="skip the MNIST-trained reference model")
    parser.add_argument("--out-dir", type=Path, default=REPO / "estimators", help="where to write the card (default: <repo>/estimators)")
    parser.add_argument("--steps", type=int, nargs="+", default=None, help="numbers of intermediate distributions K (default 100 1000 10000)")
    parser.add_argument("--chains", type=int, default=100, help="AIS chains per estimate")
    parser.add_argument("--repeats", type=int, default=None, help="seeds per configuration of a random RBM (default 10; 2 with --quick)")
    parser.add_argument("--mnist-repeats", type=int, default=None, help="seeds per configuration of the MNIST RBM (default 4; 2 with --quick)")
    parser.add_argument("--threads", default="auto", help="torch threads, or 'auto': the faster of 1 and 2 (default)")
    args = parser.parse_args(argv)

    step_counts = args.steps or ([100, 1000] if args.quick else [100, 1000, 10000])
    repeats = args.repeats or (2 if args.quick else 10)
    mnist_repeats = args.mnist_repeats or (2 if args.quick else 4)
    stem = "ais-quick" if args.quick else "ais"
    threads, thread_benchmark = choose_threads(args.threads)
    torch.set_num_threads(threads)
    print(f"torch threads: {threads} {thread_benchmark or ''}", flush=True)

    specs = [(20, 10, 0.3, 0), (40, 15, 1.0, 1), (20, 25, 1.5, 2), (25, 12, 2.0, 3)]
    if args.quick:
        specs = specs[:2]
    problems = random_problems(specs)
    for problem in problems:
        problem.repeats = repeats
    mnist_skipped = None
    if args.no_mnist:
        mnist_skipped = "--no-mnist was given"
    elif not (args.data_root / "binarized_mnist").is_dir() and not (args.data_root / "binarized_mnist_train.amat").is_file():
        mnist_skipped = f"no binarised MNIST under {args.data_root}"
    else:
        began = time.perf_counter()
        problems.append(mnist_problem(args.data_root))
        problems[-1].repeats = mnist_repeats
        print(f"trained {problems[-1].name} in {time.perf_counter() - began:.1f} s", flush=True)
    if mnist_skipped:
        print(f"skipping MNIST: {mnist_skipped}", flush=True)

    load_at_start = load_average()
    runs: list[dict] = []
    row_index = 0
    total_began = time.perf_counter()
    for problem in problems:
        began = time.perf_counter()
        problem.exact_log_z = problem.model.log_partition().item()
        problem.exact_seconds = time.perf_counter() - began
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

    command = "python scripts/estimator_card.py" + "".join(" " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    meta = {
        "date": datetime.date.today().isoformat(),
        "command": command,
        "machine": machine_description(),
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
        "json_name": f"{stem}.json",
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        "meta": meta,
        "problems": [
            {
                "name": p.name,
                "description": p.description,
                "num_visible": p.model.num_visible,
                "num_hidden": p.model.num_hidden,
                "exact_log_z": p.exact_log_z,
                "exact_seconds": p.exact_seconds,
                "base_data": p.base_data_description,
            }
            for p in problems
        ],
        "runs": runs,
    }
    (args.out_dir / f"{stem}.json").write_text(json.dumps(payload, indent=1) + "\n")
    write_card(args.out_dir / f"{stem}.md", meta, problems, runs, step_counts)
    print(f"wrote {args.out_dir / (stem + '.md')} and {args.out_dir / (stem + '.json')} ({meta['total_seconds']:.0f} s of estimation)")


if __name__ == "__main__":
    main()
