"""The AIS estimator card: AIS measured on reference problems whose log Z is exact, and the card's markdown.

A *reference problem* is a binary RBM small enough that ``model.log_partition()`` enumerates its smaller layer
exactly, with the data its ``base_rate`` base is fitted to (:class:`CardProblem`; random RBMs by
:func:`random_problem` of :data:`RANDOM_SPECS`, a 784×20 RBM trained on binarised MNIST by :func:`mnist_problem`). :func:`run_row` estimates log Z with
:class:`~pfzoo.estimators.AIS` from one base along one schedule at one K, repeated over generator seeds, and
records each run's error against the exact value in units of its own reported standard error; :func:`row_summary`
and the card's calibration table pool those errors (an honest stderr gives RMS(error/stderr) ≈ 1). :func:`render_card`
writes ``estimators/ais.md`` from the JSON payload the card script stores beside it (``{"meta", "problems", "runs"}``),
so a card re-renders without re-measuring.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch.nn import functional as F

from pfzoo.data import DataSplits, binarized_mnist
from pfzoo.estimators.ais import AIS
from pfzoo.models.rbm import RBM
from pfzoo.training.recipe import fit_recipe

BASES = ("uniform", "base_rate")
SCHEDULES = ("linear", "sigmoid")
NUM_BASE_SAMPLES = 1000  # exact model samples the base rates of a random RBM are fitted to
SEED_STRIDE = 1000  # row c uses generator seeds 1000·c + r, r < repeats: no two estimates share a random stream
UNDER_REPORT = 1.5  # a row "under-reports" when its RMSE over seeds exceeds this multiple of its mean stderr
RANDOM_SPECS = [(20, 10, 0.3, 0), (40, 15, 1.0, 1), (20, 25, 1.5, 2), (25, 12, 2.0, 3)]  # (V, H, weight scale, seed)
MNIST_TRAIN, MNIST_TEST, MNIST_MODEL_SEED = 10_000, 1000, 1  # the subset (drawn with seed 0) and the weights' seed


@dataclass
class CardProblem:
    """A reference problem: ``model`` (an RBM whose log Z enumerates), the ``base_data [N, V]`` its base rates come
    from, how many seeds each configuration is repeated over, and (once computed) its exact log Z and the seconds that took."""

    name: str
    description: str
    model: RBM
    base_data: torch.Tensor
    base_data_description: str
    repeats: int = 1
    exact_log_z: float = math.nan
    exact_seconds: float = math.nan

    def compute_exact(self) -> None:
        """Fill ``exact_log_z`` (enumeration, float64) and ``exact_seconds``."""
        began = time.perf_counter()
        self.exact_log_z = self.model.log_partition().item()
        self.exact_seconds = time.perf_counter() - began

    def record(self) -> dict:
        """The JSON form the card stores and renders from."""
        return {"name": self.name, "description": self.description, "num_visible": self.model.num_visible,
                "num_hidden": self.model.num_hidden, "exact_log_z": self.exact_log_z, "exact_seconds": self.exact_seconds,
                "base_data": self.base_data_description}


def random_rbm(num_visible: int, num_hidden: int, scale: float, seed: int) -> RBM:
    """Weights ``N(0, scale²)``, biases ``N(0, 0.25)`` (as in tests/estimators/test_partition_table.py), float32."""
    g = torch.Generator().manual_seed(seed)
    return RBM.from_tensors(
        torch.randn(num_visible, num_hidden, generator=g) * scale,
        torch.randn(num_visible, generator=g) * 0.5,
        torch.randn(num_hidden, generator=g) * 0.5,
    )


@torch.no_grad()
def exact_visible_samples(model: RBM, num: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
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


def random_problem(num_visible: int, num_hidden: int, scale: float, seed: int, *, repeats: int = 1) -> CardProblem:
    """A random RBM (:func:`random_rbm`) with ``NUM_BASE_SAMPLES`` exact samples of it (seed ``1000 + seed``) as base data."""
    model = random_rbm(num_visible, num_hidden, scale, seed)
    samples = exact_visible_samples(model, NUM_BASE_SAMPLES, generator=torch.Generator().manual_seed(1000 + seed))
    return CardProblem(
        name=f"rbm-{num_visible}x{num_hidden}-w{scale:.1f}",
        description=f"random RBM V={num_visible}, H={num_hidden}, W ~ N(0, {scale:g}²), biases ~ N(0, 0.5²), seed {seed}",
        model=model,
        base_data=samples,
        base_data_description=f"{NUM_BASE_SAMPLES} exact samples of the model",
        repeats=repeats,
    )


def mnist_problem(cfg: DictConfig, root: Path, repeats: int) -> CardProblem:
    """The recipe card_mnist_cd1 (composed as ``cfg``) trained on ``MNIST_TRAIN`` random binarised-MNIST training digits
    from ``root`` (deterministic), each configuration repeated over ``repeats`` seeds."""
    splits = binarized_mnist(root)
    g = torch.Generator().manual_seed(0)
    train = splits.train[torch.randperm(splits.train.shape[0], generator=g)[:MNIST_TRAIN]]
    test = splits.test[torch.randperm(splits.test.shape[0], generator=g)[:MNIST_TEST]]
    model = instantiate(cfg.model, num_visible=784, generator=torch.Generator().manual_seed(MNIST_MODEL_SEED))
    model.init_from_data(train)
    fit_recipe(cfg, DataSplits("binarized_mnist_subset", train=train, test=test), model=model)
    model.requires_grad_(False)
    trainer, optimizer = cfg.trainer, cfg.trainer.optimizer
    return CardProblem(
        name=f"mnist-784x{cfg.model.num_hidden}-cd1",
        description=(
            f"784×{cfg.model.num_hidden} RBM trained with CD-1 (SGD lr {optimizer.lr}, momentum {optimizer.momentum}, batch "
            f"{trainer.batch_size}, {trainer.epochs} epochs) on {MNIST_TRAIN:,} random binarised-MNIST training images "
            "(Larochelle & Murray), seeds fixed"
        ),
        model=model,
        base_data=train,
        base_data_description=f"the {MNIST_TRAIN:,} training images",
        repeats=repeats,
    )


def run_row(problem: CardProblem, base: str, schedule: str, num_steps: int, num_chains: int, first_seed: int) -> list[dict]:
    """``problem.repeats`` AIS estimates with generator seeds ``first_seed, first_seed + 1, …``: one dict per run with the
    configuration, the estimate (log_z, stderr, ess), ``error = log_z − exact_log_z``, ``error_over_stderr`` and wall ``seconds``."""
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
    """RMSE, mean error and mean stderr over a row's runs, and the largest |error/stderr|."""
    errors = [r["error"] for r in runs]
    return {
        "rmse": math.sqrt(sum(e * e for e in errors) / len(errors)),
        "mean_error": sum(errors) / len(errors),
        "mean_stderr": sum(r["stderr"] for r in runs) / len(runs),
        "max_abs_z": max(abs(r["error_over_stderr"]) for r in runs),
    }


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


def reading(runs: list[dict], step_counts: list[int], problems: list[dict]) -> list[str]:
    """Data-driven observations about the measured table (each sentence is computed from ``runs``); ``problems``: the
    JSON records with their ``repeats``."""
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
                    row = [r for r in sel if r["problem"] == problem["name"] and r["base"] == base and r["schedule"] == schedule]
                    if row:
                        s = row_summary(row)
                        if s["rmse"] > UNDER_REPORT * s["mean_stderr"]:
                            median_ess = sorted(r["ess"] for r in row)[len(row) // 2]
                            flagged.append(
                                f"{problem['name']} / {base} / {schedule} (RMSE {s['rmse']:.3f} vs mean stderr {s['mean_stderr']:.3f}, "
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
            sel = [r for r in runs if r["problem"] == problem["name"] and r["base"] == base and r["num_steps"] == large]
            if sel:
                se[base] = sum(r["stderr"] for r in sel) / len(sel)
        if len(se) == 2:
            parts.append(f"{problem['name']} {se['base_rate']:.3f} vs {se['uniform']:.3f}")
            gains[problem["name"]] = se["uniform"] / se["base_rate"] if se["base_rate"] > 0 else math.inf
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
                sel = [r for r in runs if r["problem"] == problem["name"] and r["base"] == base and r["schedule"] == schedule and r["num_steps"] == large]
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
        sel = [r for r in runs if r["problem"] == problem["name"] and r["num_steps"] == large]
        if sel:
            per_step = sorted(r["seconds"] / r["num_steps"] for r in sel)[len(sel) // 2]
            costs.append(f"{problem['name']} {per_step * 1e3:.2f} ms")
    out.append(
        f"- **Cost** (median wall time per intermediate distribution for {runs[0]['num_chains']} chains, from the K = {large} runs): "
        + "; ".join(costs)
        + ". Time is linear in K and in the number of chains."
    )
    counts = sorted({p["repeats"] for p in problems})
    out.append(
        f"- Each row's err/stderr comes from a single seed and is itself noisy; the RMSE and max |err/stderr| columns "
        f"(over {' or '.join(map(str, counts))} seeds) and the calibration table are the ones to read. With so few seeds an "
        "RMSE is itself only a rough estimate of the true spread (±25–35 %), so a ⚠ near the threshold is weak evidence."
    )
    return out


def render_card(payload: dict) -> str:
    """The card's markdown from the stored payload ``{"meta": ..., "problems": [record, ...], "runs": [run, ...]}``."""
    meta, runs, step_counts = payload["meta"], payload["runs"], payload["meta"]["num_steps"]
    problems = [{**p, "repeats": meta["repeats"][p["name"]]} for p in payload["problems"]]
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
        f"{meta['load_average']['end']} on {meta.get('cpu_count') or os.cpu_count()} cores; wall times were taken on a machine shared with other jobs "
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
        lines.append(f"| {p['name']} | {p['description']} | {p['exact_log_z']:.4f} | {p['base_data']} | {p['exact_seconds']:.1f} | {p['repeats']} |")
    lines += ["", "## Results", ""]
    for p in problems:
        lines += [
            f"### {p['name']} (exact log Z = {p['exact_log_z']:.4f})",
            "",
            "| base | schedule | K | estimate | stderr | ESS | err/stderr | s | RMSE | mean stderr | max \\|err/stderr\\| |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for base in BASES:
            for schedule in SCHEDULES:
                for num_steps in step_counts:
                    sel = [r for r in runs if r["problem"] == p["name"] and r["base"] == base and r["schedule"] == schedule and r["num_steps"] == num_steps]
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
    return "\n".join(lines)
