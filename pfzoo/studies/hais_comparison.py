"""HAIS against AIS baselines on natural-image models with a closed-form log Z (Sohl-Dickstein & Culpepper 2011,
Figs. 2–4): the estimators, the models' summaries, the estimation runs and the report (what ``scripts/reproduce_hais.py``
composes and writes).

:func:`estimate_runs` returns one model's runs (one per estimator and N), :func:`readme` the README's markdown and
:func:`figure` the plot of estimate and error against N; the renderers read nothing but the stored results.
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING

import torch
from omegaconf import DictConfig

from pfzoo.data.splits import DataSplits
from pfzoo.estimators import AIS, HAIS
from pfzoo.kernels import RandomWalkMetropolis
from pfzoo.models import ProductOfExperts
from pfzoo.training import ExactMaximumLikelihood
from pfzoo.training.recipe import fit_recipe

if TYPE_CHECKING:
    from matplotlib.figure import Figure

logger = logging.getLogger(__name__)

STEP_SIZE, METROPOLIS_SCALE = 0.2, 0.1  # HAIS ε and the random-walk σ (the paper's)
SEED_STRIDE = 1000  # run r (counted over models, estimators and N) uses generator seed seed + 1000·r
ITERS_PER_EPOCH = 100  # the recipes' L-BFGS max_iter: one Trainer epoch
CONVERGED_NATS, NEGLIGIBLE, PAPER_SECONDS = 0.1, 1e-6, 170.0
ESTIMATORS = {"hais": "HAIS (ε = 0.2, momentum kept, γ = 1 − 0.5^ε)", "ais-hmc-resampled": "AIS, 1 leapfrog step (ε = 0.2), momentum resampled",
              "ais-metropolis": "AIS, random-walk Metropolis (σ = 0.1)"}
SHORT = {"hais": "HAIS", "ais-hmc-resampled": "AIS, HMC, momentum resampled", "ais-metropolis": "AIS, random-walk Metropolis"}
MODELS = {"gaussian": "Gaussian (ML fit)", "poe-laplace": "POE, Laplace experts", "poe-student-t": "POE, Student-t experts"}
OTHER_SOURCE = {
    "embedded": "the same comparison on the paper's van Hateren images is "
    "`python scripts/reproduce_hais.py --source vanhateren`, written to `vanhateren/` below this folder.",
    "vanhateren": "the same comparison on scikit-learn's embedded photos is `python scripts/reproduce_hais.py` "
    "(the default), written to the parent folder of this one.",
}


def make_estimator(name: str, num_chains: int, num_steps: int) -> AIS | HAIS:
    """The estimator ``name`` of :data:`ESTIMATORS` with ``num_chains`` particles and ``num_steps`` distributions."""
    if name == "ais-metropolis":
        return AIS(num_chains, num_steps, base="isotropic", kernel=RandomWalkMetropolis(METROPOLIS_SCALE))
    return HAIS(num_chains, num_steps, STEP_SIZE, base="isotropic", momentum_refresh=1.0 if name == "ais-hmc-resampled" else None)


def fit_poe(cfg: DictConfig, recipe: str, splits: DataSplits) -> tuple[ProductOfExperts, dict]:
    """The POE of ``cfg``, the composed ``+experiment=recipe`` (``conf/experiment/hais_poe_*.yaml``), trained by its Trainer in float64
    (returned in float32) and a summary of the L-BFGS run."""
    fit = fit_recipe(cfg, splits, dtype=torch.float64)
    final = ExactMaximumLikelihood().loss(fit.model, splits.train.double())
    final.backward()
    text = (f"`+experiment={recipe}`: torch.optim.LBFGS(lr=1, history_size=20, strong Wolfe line search) on the full training set "
            f"in float64 through `pfzoo.training.Trainer`, {ITERS_PER_EPOCH} iterations per epoch until an epoch changes the loss "
            f"by ≤ {cfg.trainer.stop_tolerance:g}·|loss| (at most {cfg.trainer.epochs * ITERS_PER_EPOCH})")
    return fit.model.float().requires_grad_(False), {
        "optimizer": text, "initial_loss": fit.records[0]["loss"], "final_loss": final.item(), "seconds": fit.seconds,
        "iterations": fit.optimizer_state["state"][0]["n_iter"], "converged": fit.stop_reason is not None,
        "final_grad_norm": math.sqrt(sum(p.grad.square().sum().item() for p in fit.model.parameters()))}


def model_record(name: str, model, training: dict | None, description: str, train: torch.Tensor, test: torch.Tensor) -> dict:
    """What results.json keeps of a model: its exact log Z and exact mean log-likelihoods of ``train [N, 36]`` and
    ``test [T, 36]``, its ``training`` summary (``None``: closed form) and, for a POE, :func:`describe_poe`'s fields."""
    with torch.no_grad():
        log_z = model.log_partition().item()
        return {"name": name, "label": MODELS[name], "description": description, "exact_log_z": log_z, "training": training,
                "exact_train_ll": model.log_prob(train, log_z=log_z).mean().item(),
                "exact_test_ll": model.log_prob(test, log_z=log_z).mean().item(), **(describe_poe(model) if training else {})}


def estimate_runs(record: dict, model, train: torch.Tensor, test: torch.Tensor, step_counts: list[int], num_chains: int, seed: int,
                  first_run: int) -> list[dict]:
    """Every estimator of :data:`ESTIMATORS` at every N of ``step_counts`` on ``model`` (``record``: its
    :func:`model_record`), one run each, against the exact test log-likelihood. Run r (counted over models from
    ``first_run``) draws from a generator seeded with ``seed + SEED_STRIDE · r``."""
    runs, exact = [], record["exact_test_ll"]
    for est in ESTIMATORS:
        for n in step_counts:
            run_seed, began = seed + SEED_STRIDE * (first_run + len(runs)), time.perf_counter()
            estimate = make_estimator(est, num_chains, n).log_likelihood(model, test, base_data=train, generator=torch.Generator().manual_seed(run_seed))
            error = estimate.mean - exact
            runs.append({"model": record["name"], "estimator": est, "num_steps": n, "num_chains": num_chains, "seed": run_seed, "exact": exact,
                         "estimate": estimate.mean, "stderr": estimate.stderr, "error": error,
                         "error_over_stderr": error / estimate.stderr if estimate.stderr > 0 else math.copysign(math.inf, error),
                         "log_z": estimate.partition.log_z, "ess": estimate.partition.ess, "seconds": time.perf_counter() - began})
            logger.info("  %14s %18s N=%-7s est %9.4f ± %.4f err %+8.4f ESS %6.1f %7.2f s", record["name"], est, f"{n:,}", estimate.mean,
                        estimate.stderr, error, estimate.partition.ess, runs[-1]["seconds"])
    return runs


def describe_poe(model: ProductOfExperts) -> dict:
    """The min / median / max filter norms (and Student-t shapes λ) of ``model``."""
    norms, shapes = model.filters.norm(dim=1).sort().values, model.shape.sort().values
    out = {"filter_norm_min": norms[0].item(), "filter_norm_median": norms[len(norms) // 2].item(), "filter_norm_max": norms[-1].item()}
    if model.expert == "student_t":
        out.update({"shape_min": shapes[0].item(), "shape_median": shapes[len(shapes) // 2].item(), "shape_max": shapes[-1].item()})
    return out


def converged_from(runs: list[dict]) -> int | None:
    """The smallest N from which every larger N has |error| < CONVERGED_NATS and |error| ≤ 3 stderr, else None."""
    first = None
    for r in sorted(runs, key=lambda r: r["num_steps"]):
        ok = abs(r["error"]) < CONVERGED_NATS and abs(r["error"]) <= 3 * r["stderr"] + NEGLIGIBLE
        first = (first or r["num_steps"]) if ok else None
    return first


def figure(models: list[dict], runs: list[dict], step_counts: list[int], meta: dict) -> Figure:
    """Per model, estimated test log-likelihood vs N with the exact value (top) and the error on a symlog axis (bottom);
    the caller saves and closes it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {"hais": ("C0", "o", "-"), "ais-hmc-resampled": ("C1", "s", "--"), "ais-metropolis": ("C2", "^", ":")}
    fig, axes = plt.subplots(2, len(models), figsize=(5.2 * len(models), 8.4), squeeze=False, sharex=True)
    for col, m in enumerate(models):
        top, bottom = axes[0, col], axes[1, col]
        values, errors = [m["exact_test_ll"]], [0.0]
        for est in ESTIMATORS:
            sel = sorted((r for r in runs if r["model"] == m["name"] and r["estimator"] == est), key=lambda r: r["num_steps"])
            color, marker, line = styles[est]
            xs, err = [r["num_steps"] for r in sel], [r["stderr"] for r in sel]
            top.errorbar(xs, [r["estimate"] for r in sel], yerr=err, color=color, marker=marker, linestyle=line, capsize=3, label=SHORT[est])
            bottom.errorbar(xs, [r["error"] for r in sel], yerr=err, color=color, marker=marker, linestyle=line, capsize=3)
            values += [r["estimate"] + sign * r["stderr"] for r in sel for sign in (-1, 1)]
            errors += [r["error"] + sign * r["stderr"] for r in sel for sign in (-1, 1)]
        top.axhline(m["exact_test_ll"], color="k", linewidth=1.2, label="exact (closed form)")
        low, high = min(values), max(values)
        pad = max(0.5 - (high - low) / 2, 0.0) + 0.05 * (high - low)
        top.set_ylim(low - pad, high + pad)
        top.ticklabel_format(axis="y", useOffset=False)
        top.set_title(f"{m['label']}\nexact test LL {m['exact_test_ll']:.3f} nats")
        top.set_ylabel("estimated test log-likelihood (nats)")
        bottom.axhline(0.0, color="k", linewidth=1.2)
        bottom.set_yscale("symlog", linthresh=0.01)
        bottom.set_ylim(1.5 * min(min(errors), -0.1), 1.5 * max(max(errors), 0.1))
        bottom.set_ylabel("estimate − exact (nats, symlog)")
        bottom.set_xlabel("intermediate distributions N")
        for ax in (top, bottom):
            ax.set_xscale("log")
            ax.set_xticks(step_counts)
            ax.grid(True, which="major", alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=10, frameon=False)
    fig.suptitle(f"Test log-likelihood of {meta['source']} patches (36-d, whitened) vs number of intermediate distributions N; "
                 f"{meta['num_chains']} particles, error bars ±1 stderr", fontsize=11)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def reading(models: list[dict], runs: list[dict], step_counts: list[int], meta: dict) -> list[str]:
    """Observations, each computed from the measured numbers."""
    out, largest = [], step_counts[-1]
    for m in models:
        mine = [r for r in runs if r["model"] == m["name"]]
        if mine and max(abs(r["error"]) for r in mine) < NEGLIGIBLE:
            out.append(f"- **{m['label']}** (exact {m['exact_test_ll']:.3f} nats): every estimate equals the exact value to float "
                       "rounding, as it must: the target is the annealing base N(0, I) itself, so every log weight is ≈ 0. "
                       "This row checks the plumbing, not the estimators.")
            continue
        parts = []
        for est in ESTIMATORS:
            sel = sorted((r for r in mine if r["estimator"] == est), key=lambda r: r["num_steps"])
            if sel:
                last, conv = sel[-1], converged_from(sel)
                where = (f"within {CONVERGED_NATS} nats (and 3 stderr) from N = {conv:,} on" if conv
                         else f"not within {CONVERGED_NATS} nats by N = {largest:,}")
                parts.append(f"{SHORT[est]} {where} (at N = {largest:,}: error {last['error']:+.3f} ± {last['stderr']:.3f}, ESS {last['ess']:.0f})")
        line = f"- **{m['label']}** (exact {m['exact_test_ll']:.3f} nats): " + "; ".join(parts) + "."
        error_wins = stderr_wins = cells = 0
        ratios = {est: [] for est in ESTIMATORS if est != "hais"}
        for n in step_counts:
            at = {r["estimator"]: r for r in mine if r["num_steps"] == n}
            if "hais" in at and len(at) > 1:
                cells += 1
                error_wins += abs(at["hais"]["error"]) <= min(abs(r["error"]) for r in at.values())
                stderr_wins += at["hais"]["stderr"] <= min(r["stderr"] for r in at.values())
                for est in ratios:
                    if est in at and at["hais"]["stderr"] > 0:
                        ratios[est].append(at[est]["stderr"] / at["hais"]["stderr"])
        if cells and any(converged_from([r for r in mine if r["estimator"] == est]) for est in ESTIMATORS):
            line += (f" At equal N, HAIS has the smallest stderr at {stderr_wins} of {cells} values of N"
                     + "".join(f"; the stderr of {SHORT[est]} is {min(v):.1f}–{max(v):.1f}× HAIS's" for est, v in ratios.items() if v)
                     + f", and the smallest |error| at {error_wins} of {cells} (one run per cell, so the errors themselves are noisy).")
        if "shape_min" in m and m["shape_min"] < 1:
            line += (f" This model is extreme: its smallest Student-t shape is λ = {m['shape_min']:.2f} < 1, so those experts' "
                     f"factors fall off as |u|^(−2λ) = |u|^(−{2 * m['shape_min']:.2f}), heavier-tailed than a Cauchy, while its "
                     f"median filter norm {m['filter_norm_median']:.1f} gives a core of width ≈ {1 / m['filter_norm_median']:.3f} along each "
                     f"filter, {STEP_SIZE * m['filter_norm_median']:.0f}× smaller than the leapfrog step ε = {STEP_SIZE}. Every intermediate "
                     "distribution of the geometric path from N(0, I) has Gaussian tails for β < 1, and steps tuned for unit-scale "
                     "data are too coarse for the core: both are plausible reasons the chains miss part of the mass. The measured "
                     "symptom: log Z is underestimated (estimates far above the exact line) with a tiny ESS, and the stderr does "
                     "not show the size of the error.")
        out.append(line)
    real = [r for r in runs if abs(r["error"]) >= NEGLIGIBLE]
    big = [r for r in real if abs(r["error"]) > 3 * r["stderr"] and abs(r["error"]) > CONVERGED_NATS]
    out.append(f"- **Sign of the error**: {sum(r['error'] > 0 for r in real)} of the {len(real)} non-trivial estimates lie above the exact value. "
               "log Ẑ is a stochastic lower bound on log Z, so mean(−E) − log Ẑ is biased *upward*; an estimate far above the exact "
               "line means the chains missed part of the model's mass, not that the model is better than it is."
               + (f" {len(big)} run(s) miss by more than both {CONVERGED_NATS} nats and 3 of their own stderr (ESS "
                  f"{min(r['ess'] for r in big):.0f}–{max(r['ess'] for r in big):.0f} of {meta['num_chains']}): there the stderr, "
                  "computed from the weights' sample variance, does not show the error." if big else ""))
    per_est = []
    for est in ESTIMATORS:
        seconds = sorted(r["seconds"] for r in runs if r["estimator"] == est and r["num_steps"] == largest)
        if seconds:
            per_est.append(f"{SHORT[est]} {seconds[0]:.3g}–{seconds[-1]:.3g} s")
    cost = (f"- **Cost** of one estimate at N = {largest:,} with {meta['num_chains']} particles, {meta['torch_threads']} torch "
            "thread(s), range over the models: " + "; ".join(per_est) + ". Time is linear in N.")
    if largest == 100_000 and meta["num_chains"] == 200:
        cost += (f" The paper reports about {PAPER_SECONDS:.0f} s for N = 10⁵ with 200 particles (2011 hardware and code), "
                 "so the comparison is only indicative.")
    return out + [cost]


def readme(meta: dict, models: list[dict], runs: list[dict]) -> str:
    """README.md's markdown from the stored ``meta``, ``models`` and ``runs`` (results.json)."""
    lines = [
        "# HAIS vs AIS baselines on natural-image models with known likelihood", "",
        f"Reproduction of the comparison in Sohl-Dickstein & Culpepper (2011), Figs. 2–4, measured on {meta['date']} with "
        f"pfzoo {meta['pfzoo_version']}, torch {meta['torch_version']}. Generated by `scripts/reproduce_hais.py`; raw numbers in "
        "`results.json`.", "", "## Setup", "", f"- **Data**: {meta['data']}",
        "- **Models**, fitted by exact maximum likelihood (the paper's oracle), so the test log-likelihood is known in closed form:",
        *(f"  - *{m['label']}*: {m['description']}" for m in models),
        f"- **Estimators**, each annealing {meta['num_chains']} particles from N(0, I) along the geometric path with a linear "
        "β schedule, at N intermediate distributions:",
        "  - *HAIS*: `HAIS(200, N, 0.2)`: one leapfrog step of ε = 0.2 per distribution, momentum partially refreshed "
        "(γ = 1 − 0.5^ε) and carried across distributions, Metropolis accept/reject with momentum flip on rejection.",
        "  - *AIS, HMC with resampled momentum*: `HAIS(200, N, 0.2, momentum_refresh=1.0)`: the same single leapfrog step, "
        "momentum drawn afresh for every distribution.",
        "  - *AIS, random-walk Metropolis*: `AIS(200, N, base=\"isotropic\", kernel=RandomWalkMetropolis(0.1))`.",
        "- **Estimate**: `estimator.log_likelihood(model, test, base_data=train, generator=...)`, i.e. mean_n(−E(x_n)) − log Ẑ. "
        "There is one log Ẑ per (model, estimator, N), so the reported stderr is that of log Ẑ (delta method on the "
        "importance weights) and ESS is that of the weights. Exact: `model.log_prob(test).mean()` (closed-form log Z). "
        "Error = estimate − exact. One run (one seed) per cell.",
        f"- **Other image source**: {OTHER_SOURCE[meta['source']]}", "", "## How it was measured", "", "```", meta["command"], "```", "",
        f"- Machine: {meta['machine']}; `torch.get_num_threads() = {meta['torch_threads']}`"
        + (f" (chosen automatically; 1000 HAIS steps of a 36×36 POE took {meta['thread_benchmark']})" if meta["thread_benchmark"] else "") + ".",
        f"- Load average (1/5/15 min) at start and end: {meta['load_average']['start']} → {meta['load_average']['end']}; "
        "wall times are indicative only.",
        f"- Total runtime {meta['total_seconds']:.0f} s ({meta['total_seconds'] / 60:.1f} min): data {meta['data_seconds']:.1f} s, "
        f"training {meta['training_seconds']:.1f} s, estimation {meta['estimation_seconds']:.1f} s.", "", "## Models", "",
        "| model | exact log Z | exact train LL | exact test LL | training | notes |", "|---|---:|---:|---:|---|---|",
    ]
    for m in models:
        t = m["training"]
        training = "closed form" if t is None else (f"{t['iterations']} L-BFGS iterations, {t['seconds']:.1f} s, final |grad| {t['final_grad_norm']:.1e}"
                                                    + ("" if t["converged"] else " (stopped at the iteration limit, still improving)"))
        notes = [f"filter norms {m['filter_norm_min']:.2f} / {m['filter_norm_median']:.2f} / {m['filter_norm_max']:.2f} (min/median/max)"] if "filter_norm_median" in m else []
        notes += [f"λ {m['shape_min']:.3f} / {m['shape_median']:.3f} / {m['shape_max']:.3f}"] if "shape_min" in m else []
        lines.append(f"| {m['label']} | {m['exact_log_z']:.4f} | {m['exact_train_ll']:.4f} | {m['exact_test_ll']:.4f} | {training} | {'; '.join(notes)} |")
    lines += ["", "## Results", "", "Estimated test log-likelihood (nats per patch) ± stderr; error = estimate − exact; seconds = wall time of one "
              "estimate; error/stderr is \"—\" where both are float rounding.", "",
              "| model | estimator | N | estimate ± stderr | exact | error | error/stderr | ESS | seconds |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for m in models:
        for est, label in ESTIMATORS.items():
            for n in meta["num_steps"]:
                for r in (r for r in runs if r["model"] == m["name"] and r["estimator"] == est and r["num_steps"] == n):
                    ratio = "—" if abs(r["error"]) < NEGLIGIBLE else f"{r['error_over_stderr']:+.1f}"
                    lines.append(f"| {m['label']} | {label} | {n:,} | {r['estimate']:.4f} ± {r['stderr']:.4f} | {r['exact']:.4f} | "
                                 f"{r['error']:+.4f} | {ratio} | {r['ess']:.1f} | {r['seconds']:.2f} |")
    lines += ["", "![estimated test log-likelihood vs N](loglik_vs_steps.png)" if meta["plot"] else "(plot skipped: --no-plot)", ""]
    lines += ["## Reading", "", *reading(models, runs, meta["num_steps"], meta), ""]
    lines += ["## Notes", "", *meta["notes"], ""] if meta.get("notes") else []
    return "\n".join(lines)
