"""Reproduce the model comparison of Sohl-Dickstein & Culpepper (2011), Table 1: test log-likelihood of six models of
natural image patches, each with its size, training method and the estimator that produced the number.

    python scripts/reproduce_models.py                       # full run (~35 min, one thread): reports/models/{README.md,results.json}
    python scripts/reproduce_models.py --quick               # smoke run (~3 min): reports/models/quick/
    python scripts/reproduce_models.py --sweep               # also Fig. 5: sparse coding vs number of latents → size_sweep.png
    python scripts/reproduce_models.py --source vanhateren   # the paper's images (<data-root>/natural_images): reports/models/vanhateren/
    python scripts/reproduce_models.py --rerender            # measure nothing: README.md (and the sweep plot) from results.json

Data: whitened 36-D natural image patches (conf/dataset/patches.yaml). Models, each trained by pfzoo.training.Trainer from a
recipe in conf/experiment/: the Gaussian (exact ML), ICA and the Student-t POE (hais_poe_*: exact ML, full-batch L-BFGS,
float64), sparse coding (models_sparse_coding: EM-HMC from ICA's basis, 72 latents), the bilinear model (models_bilinear:
EM-HMC) and the mcRBM (models_mcrbm: persistent MPF). Exact log-likelihoods where log Z has a closed form; per-example
HAIS (a stochastic lower bound) for the generative models; HAIS log Ẑ from N(0, I) for the mcRBM (biased upward). Two
in-run checks evaluate models with known likelihoods by the same procedure. HAIS's ε, its β-scaling and the schedule
come per model from pfzoo.studies.step_size_pilot on training patches (the largest lower bound wins).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import itertools
import json
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
from pfzoo.logmath import log_mean_exp
from pfzoo.models import Gaussian, LinearGenerative
from pfzoo.studies import reporting
from pfzoo.studies.step_size_pilot import SCALED_STEP_GRID, STEP_GRID, candidate_settings, pilot_hais
from pfzoo.training import ExactMaximumLikelihood
from pfzoo.training.recipe import fit_recipe

REPO = Path(__file__).resolve().parents[1]
DIM, NOISE_STD, NUM_LATENT, SWEEP_SIZES = 36, 0.1, 72, (18, 36, 72, 108)
# Stiffness candidates s for the generative models. s = λ_max(ΦᵀΦ)/σ_n² (sparse coding: ≈ 75) would keep the stiffest
# direction's stability margin, but a Laplace prior's kinks also limit ε at small β, so smaller s with a small ε can win.
STIFFNESS_GRID, GEOMETRIC_START = (3.0, 10.0, 30.0, 100.0, 300.0, 1000.0), 1e-3
SEED_STRIDE, SUBSET_SEED_OFFSET, PILOT_SEED_OFFSET = 1000, 7, 11  # estimate r: seed + 1000·r; test subset / pilot patches
ITERS_PER_EPOCH = 100  # the hais_poe_* recipes' L-BFGS max_iter: one Trainer epoch
GROUPS = {"gaussian": ("gaussian",), "laplace": ("ica", "sparse-coding"), "richer": ("bilinear", "poe-student-t", "mcrbm")}
SETTINGS = {  # budgets; the training recipes themselves are the conf/experiment files
    "full": {"num_train": 20000, "num_test": 5000, "poe_iters": 2000, "em_epochs": 80, "em_burn_in": 20, "bilinear_epochs": 80,
             "mpf_epochs": 100, "hais_patches": 100, "hais_particles": 200, "hais_steps": 12000, "check_patches": 50,
             "check_particles": 100, "noise_draws": 200000, "logz_chains": 200, "logz_steps": 100000, "pilot_patches": 10,
             "pilot_particles": 20, "pilot_steps": 3000, "pilot_chains": 100, "pilot_logz_steps": 10000},
    "quick": {"num_train": 5000, "num_test": 1000, "poe_iters": 300, "em_epochs": 10, "em_burn_in": 5, "bilinear_epochs": 10,
              "mpf_epochs": 5, "hais_patches": 20, "hais_particles": 50, "hais_steps": 2000, "check_patches": 10, "check_particles": 50,
              "noise_draws": 20000, "logz_chains": 100, "logz_steps": 5000, "pilot_patches": 5, "pilot_particles": 10,
              "pilot_steps": 1000, "pilot_chains": 50, "pilot_logz_steps": 2000},
}
OTHER_SOURCE = {
    "embedded": "the same comparison on the paper's van Hateren images is `python scripts/reproduce_models.py --source vanhateren`, "
    "written to `vanhateren/` below this folder.",
    "vanhateren": "the same comparison on scikit-learn's embedded photos is `python scripts/reproduce_models.py` (the default), "
    "written to the parent folder of this one.",
}
SCHEDULE_TEXT = {"linear": "linear β", "geometric": f"geometric β from {GEOMETRIC_START:g}"}


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def step_text(step_size: float, stiffness: float) -> str:
    return f"ε = {step_size:g}" if stiffness == 0 else f"ε = {step_size:g} / √(1 + {stiffness:.0f} β)"


def count_parameters(model) -> int:
    """Free parameters: every entry, except the Gaussian's precision Cholesky factor, of which only the lower triangle counts."""
    m = model.num_visible
    return m + m * (m + 1) // 2 if type(model) is Gaussian else sum(p.numel() for p in model.parameters())


def ica_initial_basis(ica_basis: torch.Tensor, num_latent: int, seed: int) -> torch.Tensor:
    """``[M, L]``: the ICA basis's min(L, M) longest columns, then columns of 0.01·N(0, 1) up to L (EM from a random basis
    stays far below ICA: −43 against −32 in the 2026-11-22 report; the extra columns start small so they only add)."""
    order = ica_basis.norm(dim=0).argsort(descending=True)[: min(num_latent, ica_basis.shape[1])]
    extra = 0.01 * torch.randn(ica_basis.shape[0], num_latent - order.numel(), generator=gen(seed), dtype=ica_basis.dtype)
    return torch.cat([ica_basis[:, order], extra], dim=1)


def ml_gaussian_prior_basis(train: torch.Tensor, num_latent: int, seed: int) -> torch.Tensor:
    """The ML Φ ``[M, L]`` of the Gaussian-prior linear generative model with σ_n fixed (probabilistic PCA): ΦΦᵀ = S − σ_n² I
    (eigenvalues below σ_n² clipped), Φ = (S − σ_n² I)^½ R with R ``[M, L]`` with orthonormal rows (any such R is optimal)."""
    data = train.double()
    values, vectors = torch.linalg.eigh(data.T @ data / data.shape[0])
    root = vectors @ torch.diag((values - NOISE_STD**2).clamp_min(0).sqrt()) @ vectors.T
    q, r = torch.linalg.qr(torch.randn(num_latent, DIM, generator=gen(seed), dtype=torch.float64))
    return (root @ (q * r.diagonal().sign()).T).float()


@torch.no_grad()
def noise_convolved_log_prob(model, x: torch.Tensor, draws: int, generator: torch.Generator) -> torch.Tensor:
    """``log E_n[p(x − n)]``, ``n ~ N(0, σ_n² I)``, for ``x [B, D]`` → ``[B]`` by simple Monte Carlo over ``draws`` noise vectors."""
    reference = copy.deepcopy(model).double()
    return torch.stack([log_mean_exp(reference.log_prob(row - NOISE_STD * torch.randn(draws, x.shape[1], generator=generator, dtype=torch.float64)), dim=0)
                        for row in x.double()])


def paired(a: torch.Tensor, b: torch.Tensor, extra_variance: float = 0.0) -> tuple[float, float]:
    """Mean and stderr of ``a − b`` over the same patches (plus ``extra_variance`` for a shared error such as log Ẑ's)."""
    diff = a - b
    return diff.mean().item(), math.sqrt(diff.var().item() / len(diff) + extra_variance)


def ordering(rows: list[dict]) -> dict:
    """Paired differences on the common test subset for every (lower group, higher group) pair of GROUPS."""
    by_name, pairs = {r["name"]: r for r in rows if r.get("subset_per_example") is not None}, []
    for low_group, high_group in (("gaussian", "laplace"), ("laplace", "richer")):
        for low, high in itertools.product(GROUPS[low_group], GROUPS[high_group]):
            if low in by_name and high in by_name:
                a, b = by_name[high], by_name[low]
                extra = a.get("shared_stderr", 0.0) ** 2 + b.get("shared_stderr", 0.0) ** 2
                diff, stderr = paired(torch.tensor(a["subset_per_example"]), torch.tensor(b["subset_per_example"]), extra)
                pairs.append({"higher": high, "lower": low, "difference": diff, "stderr": stderr, "holds": diff > 0, "significant": diff > 2 * stderr})
    return {"pairs": pairs, "holds": sum(p["holds"] for p in pairs), "significant": sum(p["significant"] for p in pairs), "total": len(pairs)}


def fmt_seconds(x: float | None) -> str:
    return "—" if x is None else f"{x:.0f}" if x >= 10 else f"{x:.1f}"


def budget_text(s: dict) -> str:
    return (f"{s['num_train']:,} training / {s['num_test']:,} test patches; POE L-BFGS ≤ {s['poe_iters']:,} iterations; "
            f"EM-HMC {s['em_burn_in']} burn-in E-steps + {s['em_epochs']} epochs (sparse coding) / {s['bilinear_epochs']} epochs (bilinear); "
            f"mcRBM {s['mpf_epochs']} MPF epochs; per-example HAIS N = {s['hais_steps']:,} with {s['hais_particles']} particles on "
            f"{s['hais_patches']} test patches (check: {s['check_particles']} particles on {s['check_patches']}); mcRBM log Z: "
            f"{s['logz_chains']} chains, N = {s['logz_steps']:,}; pilots: N = {s['pilot_steps']:,}, {s['pilot_particles']} particles × "
            f"{s['pilot_patches']} training patches (log Z: {s['pilot_chains']} chains, N = {s['pilot_logz_steps']:,}).")


def write_readme(path: Path, meta: dict, rows: list[dict], order: dict, sweep: list[dict] | None) -> None:
    labels, by_name = {r["name"]: r["label"] for r in rows}, {r["name"]: r for r in rows}
    lines = [
        "# Model comparison on natural image patches (Sohl-Dickstein & Culpepper 2011, Table 1)", "",
        f"Measured on {meta['date']} with pfzoo {meta['pfzoo_version']}, torch {meta['torch_version']}"
        + (" — **quick smoke run** (`--quick`): small data, few epochs, short annealing; the numbers are not the comparison" if meta["quick"] else "")
        + ". Generated by `scripts/reproduce_models.py`; raw numbers (including per-patch values on the common subset) in `results.json`.", "",
        "## Table", "",
        "Average log-likelihood of test patches (nats per 36-dimensional whitened patch). ± is the total standard error: "
        "the estimator's and the test-sampling one (sd over patches / √patches) in quadrature; both are listed in "
        "[Details](#details). Exact rows use all test patches; HAIS rows of generative models use the random subset named in "
        "the evaluation column. \"same patches\" is every model's mean on the common subset of "
        f"{meta['subset_size']} test patches that the per-example HAIS rows use, so the rows can be compared pairwise.", "",
        "| model | parameters | train method | evaluation (estimator, N, particles/chains, test patches) | test log-likelihood ± stderr | same patches | kind | train s | eval s |",
        "|---|---|---|---|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        if r.get("failed"):
            lines.append(f"| {r['label']} | {r['parameters']:,} ({r['sizes']}) | {r['train_method']} | — | **failed**: {r['failed']} | — | — | "
                         f"{fmt_seconds(r['train_seconds'])} | — |")
            continue
        e = r["evaluation"]
        what = (e["estimator"] + (f", N = {e['num_steps']:,}" if "num_steps" in e else "") + (f", {e['particles']} particles per patch" if "particles" in e else "")
                + (f", {e['chains']} chains" if "chains" in e else "") + f", {e['test_patches']:,} test patches")
        error = math.hypot(e['estimator_stderr'], e['data_stderr'])
        lines.append(f"| {r['label']} | {r['parameters']:,} ({r['sizes']}) | {r['train_method']} | {what} | {e['mean']:.2f} ± {error:.2f} | "
                     f"{'—' if r['subset_mean'] is None else format(r['subset_mean'], '.2f')} | {e['kind']} | {fmt_seconds(r['train_seconds'])} | {fmt_seconds(e['seconds'])} |")
    lines += ["", "## What to look for", "",
              "The paper's qualitative ordering: Gaussian < Laplace models (ICA / complete Laplace POE, sparse coding) < the richer models "
              "(bilinear, Student-t POE, mcRBM). Checked here with paired differences on the common test subset (higher − lower, "
              "± stderr of the paired mean; the mcRBM's adds its log Ẑ stderr):", ""]
    for p in order["pairs"]:
        sig = " (by more than 2 stderr)" if abs(p["difference"]) > 2 * p["stderr"] else " (within 2 stderr)"
        lines.append(f"- {labels[p['higher']]} − {labels[p['lower']]}: {p['difference']:+.2f} ± {p['stderr']:.2f}: {'holds' if p['holds'] else '**violated**'}{sig}")
    lines.append("")
    if order["total"] == 0:
        lines.append("**Verdict**: no pair could be compared (models failed).")
    elif order["holds"] == order["total"]:
        lines.append(f"**Verdict**: this run reproduces the ordering: all {order['total']} pairwise inequalities hold, "
                     f"{order['significant']} of them by more than 2 stderr.")
    else:
        broken = [f"{labels[p['higher']]} > {labels[p['lower']]}" for p in order["pairs"] if not p["holds"]]
        lines.append(f"**Verdict**: this run does not fully reproduce the ordering: {order['holds']} of {order['total']} pairwise "
                     f"inequalities hold ({order['significant']} by more than 2 stderr); violated: {'; '.join(broken)}.")
    for p in (p for p in order["pairs"] if not p["holds"]):
        high, low = by_name[p["higher"]], by_name[p["lower"]]
        if high["evaluation"]["kind"] == "exact" or high["evaluation"]["kind"].startswith("unbiased Z"):
            why = (f"{high['label']}'s value is {'exact' if high['evaluation']['kind'] == 'exact' else 'biased upward'} and "
                   f"{low['label']}'s is {'exact' if low['evaluation']['kind'] == 'exact' else 'a lower bound'}, so the estimators' "
                   "biases cannot explain this violation: it is the model (or its training), not the evaluation")
        else:
            why = (f"{high['label']}'s value is a stochastic lower bound, so part of this gap may be the estimator's looseness "
                   "(see the estimator check for its size on a model with a known answer)")
        why += "; the difference is within 2 stderr, so the violation itself is not significant" if abs(p["difference"]) <= 2 * p["stderr"] else ""
        lines.append(f"- {labels[p['higher']]} < {labels[p['lower']]}: {why}.")
    lines += ["", "Reading the kinds: an exact value is exact; per-example HAIS is a stochastic *lower* bound (the true value is "
              "likely higher); the mcRBM's value uses log Ẑ, a stochastic lower bound on log Z, so it is biased *upward*. "
              "A richer model beating a Laplace one is therefore robust for the bilinear model (a lower bound above an exact "
              "value) and weaker for the mcRBM."]
    checks = [r for r in rows if r["name"].startswith("check") and not r.get("failed")]
    if checks:
        lines += ["", "## Estimator checks", "", "Generative models with a known log-likelihood, each evaluated like every generative row (its own pilot on the "
                  "training patches, then HAIS) on the first patches of the common subset:", ""]
    for check in checks:
        c = check["check"]
        lines.append(
            f"- {check['label']} (reference: {c['reference_method']}): its pilot chose {step_text(c['step_size'], c.get('stiffness', 0.0))}, "
            f"{SCHEDULE_TEXT[c['schedule']]}; N = {c['num_steps']:,}, {c['particles']} particles, {c['patches']} patches: "
            f"HAIS {c['estimate']:.3f} ± {c['stderr']:.3f} vs reference {c['exact']:.3f}, error {c['error']:+.3f} "
            f"({c['error'] / c['stderr'] if c['stderr'] > 0 else float('nan'):+.1f} stderr): "
            + ("the procedure recovers the reference on this model." if abs(c["error"]) <= max(3 * c["stderr"], 0.1)
               else "the bound is not tight on this model, so the generative rows evaluated the same way may be underestimated too "
                    "(by how much depends on each model's posterior)."))
    laplace, ica = by_name.get("check-laplace"), by_name.get("ica")
    if laplace in checks and ica is not None and not ica.get("failed"):
        c = laplace["check"]
        ica_same = sum(ica["subset_per_example"][: c["patches"]]) / c["patches"]
        lines += ["", f"Blurring ICA's density by the noise σ_n = {NOISE_STD} changes its log-likelihood on these patches by "
                      f"{c['exact'] - ica_same:+.2f} nats (ICA exact {ica_same:.3f}, blurred {c['exact']:.3f}): what the noise alone "
                      "does to the sparse-coding and bilinear models, which carry it, against ICA, the noiseless limit."]
    em_losses = {r["label"]: r["training"]["losses"] for r in rows if r["train_method"].startswith("EM") and len(r["training"]["losses"]) > 1}
    trends = [f"- {label}: the EM complete-data loss mean_n −log p(x_n, z_n) rose from {losses[0]:.2f} (epoch 1) to "
              f"{losses[-1]:.2f} (epoch {len(losses)}), lowest {min(losses):.2f}. With z_n a posterior sample this is "
              "−log p(x) plus the posterior's entropy on average, so a rise is not by itself a falling likelihood, but it "
              "is no evidence of progress either; the HAIS row is the measure of the trained model."
              for label, losses in em_losses.items() if losses[-1] > losses[0]]
    lines += ["", "## Training notes", "", *trends] if trends else []
    lines += ["", "## Details", "", "| model | estimator stderr | test-sampling stderr | HAIS acceptance (all / last 10% of β) | notes |", "|---|---:|---:|---|---|"]
    for r in (r for r in rows if not r.get("failed")):
        e = r["evaluation"]
        acc = f"{e['acceptance_mean']:.2f} / {e['acceptance_last_10pct']:.2f}" if "acceptance_mean" in e else "—"
        lines.append(f"| {r['label']} | {e['estimator_stderr']:.3f} | {e['data_stderr']:.3f} | {acc} | {r.get('notes', '')} |")
    lines += ["", "## Step-size and schedule choice (pilots)", "",
              f"Per model, a pilot ran every ε in {list(STEP_GRID)} at every β, and for the generative models also ε in "
              f"{list(SCALED_STEP_GRID)} shrinking as ε / √(1 + s β) (`HAIS(..., stiffness=s)`: the posterior at β is up to 1 + s β "
              f"times stiffer than the prior; s in {list(STIFFNESS_GRID)}), each with a linear and a geometric schedule "
              f"(β_0 = 0, then K values log-spaced from {GEOMETRIC_START:g} to 1), and kept the setting with the largest estimate: "
              "per-example log p̂(x) and log Ẑ are both stochastic lower bounds, so larger is tighter. Pilot data for the generative "
              "models are training patches, not test patches.", "",
              "| model | pilot | schedule | ε | estimate ± stderr | acceptance (all / last 10%) | chosen |", "|---|---|---|---|---:|---|---|"]
    for r in (r for r in rows if r.get("pilot")):
        p = r["pilot"]
        size = f"{p['what']}, N = {p['num_steps']:,}, {p['chains']} " + (f"particles × {p['patches']} patches" if p["patches"] else "chains")
        key = lambda x: (x["schedule"], x["step_size"], x.get("stiffness", 0.0))  # noqa: E731
        lines += [f"| {r['label']} | {size} | {t['schedule']} | {step_text(t['step_size'], t.get('stiffness', 0.0))} | {t['bound']:.3f} ± {t['stderr']:.3f} | "
                  f"{t['acceptance_mean']:.2f} / {t['acceptance_last_10pct']:.2f} | {'**yes**' if key(t) == key(p) else ''} |" for t in p["trials"]]
    if sweep is not None:
        lines += ["", "## Size sweep (Fig. 5)", "", "Laplace-prior linear generative model against its number of latents L, each trained and evaluated like the "
                  "sparse-coding row (same epochs, same HAIS settings except the per-model pilot choice, same test subset).", "",
                  "| L | parameters | test log-likelihood ± stderr | ε | schedule | train s | eval s |", "|---:|---:|---:|---|---|---:|---:|"]
        lines += [f"| {p['num_latent']} | {p['parameters']:,} | failed: {p['failed']} | | | | |" if p.get("failed") else
                  f"| {p['num_latent']} | {p['parameters']:,} | {p['mean']:.2f} ± {p['stderr']:.2f} | {step_text(p['step_size'], p.get('stiffness', 0.0))} | "
                  f"{p['schedule']} | {fmt_seconds(p['train_seconds'])} | {fmt_seconds(p['eval_seconds'])} |" for p in sweep]
        lines += ["", "![log-likelihood vs number of latents](size_sweep.png)"]
    lines += ["", "## Setup", "", f"- **Data**: {meta['data']}", f"- **Data check**: {meta['data_check']}", *(f"- **{r['label']}**: {r['description']}" for r in rows),
              f"- **Other image source**: {OTHER_SOURCE[meta['source']]}", "", "## How it was measured", "", "```", meta["command"], "```", "",
              f"- Budget ({'quick' if meta['quick'] else 'full'} settings): {budget_text(meta['settings'])}", f"- All settings: `{json.dumps(meta['settings'])}`",
              f"- Machine: {meta['machine']}; `torch.get_num_threads() = {meta['torch_threads']}`.",
              f"- Load average (1/5/15 min) at start and end: {meta['load_average']['start']} → {meta['load_average']['end']}; wall times are indicative only.",
              f"- Total runtime {meta['total_seconds']:.0f} s ({meta['total_seconds'] / 60:.1f} min): data {meta['data_seconds']:.1f} s, "
              f"training {meta['training_seconds']:.0f} s, pilots {meta['pilot_seconds']:.0f} s, evaluation {meta['evaluation_seconds']:.0f} s"
              + (f", sweep {meta['sweep_seconds']:.0f} s" if meta.get("sweep_seconds") else "") + ".", ""]
    lines += ["## Notes", "", *meta["notes"], ""] if meta.get("notes") else []
    path.write_text("\n".join(lines))


def plot_sweep(path: Path, sweep: list[dict], references: dict, meta: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [p for p in sweep if not p.get("failed")]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.errorbar([p["num_latent"] for p in ok], [p["mean"] for p in ok], yerr=[p["stderr"] for p in ok], marker="o", capsize=3,
                label="Laplace linear generative (per-example HAIS, lower bound)")
    for (name, value), style in zip(references.items(), (":", "--", "-.")):
        ax.axhline(value, color="k", linestyle=style, linewidth=1, label=f"{name} (exact, same patches)")
    ax.axvline(DIM, color="0.7", linewidth=0.8)
    if references and ok:  # keep the axis on the interesting range; mark far-off points (e.g. undercomplete L) at the bottom edge
        shown = [p for p in ok if p["mean"] >= min(references.values()) - 60]
        values = list(references.values()) + [p["mean"] + sign * p["stderr"] for p in shown for sign in (-1, 1)]
        low, high = min(values) - 5, max(values) + 5
        ax.set_ylim(low, high)
        for p in (p for p in ok if p["mean"] < low):
            ax.annotate(f"L = {p['num_latent']}: {p['mean']:.0f} ± {p['stderr']:.0f}\n(off scale)", xy=(p["num_latent"], low),
                        xytext=(p["num_latent"] + 4, low + 0.3 * (high - low)), ha="left", fontsize=8, arrowprops={"arrowstyle": "->", "color": "C0"})
    ax.set_xticks([p["num_latent"] for p in sweep])
    ax.set_xlabel("number of latents L (M = 36)")
    ax.set_ylabel("test log-likelihood (nats per patch)")
    ax.set_title(f"Sparse coding vs number of latents ({meta['source']} patches, {meta['subset_size']} test patches)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run (~3 min): small data and budgets, writes <out-dir>/quick")
    parser.add_argument("--sweep", action="store_true", help=f"also the size sweep (Fig. 5): L in {list(SWEEP_SIZES)} → size_sweep.png")
    parser.add_argument("--source", choices=("embedded", "vanhateren"), default="embedded", help="scikit-learn's photos or <data-root>/natural_images")
    parser.add_argument("--data-root", type=Path, default=resolve_data_root(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data"),
                        help="data folder for --source vanhateren")
    parser.add_argument("--seed", type=int, default=0, help="seed of the patches, initial weights, training and estimators")
    parser.add_argument("--hais-steps", type=lambda v: int(float(v)), default=None, help="N of the per-example HAIS estimates")
    parser.add_argument("--hais-patches", type=int, default=None, help="test patches of the per-example HAIS estimates")
    parser.add_argument("--hais-particles", type=int, default=None, help="particles per patch of the per-example HAIS estimates")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--out-dir", type=Path, default=None, help="output folder (default reports/models[/vanhateren][/quick])")
    parser.add_argument("--rerender", action="store_true", help="measure nothing: rewrite README.md (and the PNG) from results.json")
    args = parser.parse_args(argv)
    s = dict(SETTINGS["quick" if args.quick else "full"])
    s.update({k: v for k, v in (("hais_steps", args.hais_steps), ("hais_patches", args.hais_patches), ("hais_particles", args.hais_particles)) if v is not None})
    out_dir = args.out_dir or REPO / "reports" / "models" / ("" if args.source == "embedded" else args.source) / ("quick" if args.quick else "")
    try:
        args.sweep and __import__("matplotlib")
    except ImportError:
        sys.exit("reproduce_models.py: --sweep draws a plot and needs matplotlib (`pip install matplotlib`).")
    if args.rerender:
        payload = json.loads((out_dir / "results.json").read_text())
        write_readme(out_dir / "README.md", payload["meta"], payload["models"], payload["ordering"], payload.get("sweep"))
        if payload.get("sweep") and args.sweep:
            plot_sweep(out_dir / "size_sweep.png", payload["sweep"], payload["sweep_references"], payload["meta"])
        return print(f"rewrote {out_dir}/README.md from results.json")

    torch.set_num_threads(args.threads)
    total_began, load_at_start, seed, began = time.perf_counter(), reporting.load_average(), args.seed, time.perf_counter()
    common = [f"dataset.source={args.source}", f"data.root={args.data_root}", f"dataset.num_train={s['num_train']}",
              f"dataset.num_test={s['num_test']}", f"dataset.seed={seed}", "trainer.progress=false"]
    recipe = lambda name, run_seed, *more: compose("train", [f"+experiment={name}", *common, f"seed={run_seed}", *more])  # noqa: E731
    try:
        splits = instantiate(recipe("hais_poe_laplace", seed).dataset)
    except FileNotFoundError as error:
        sys.exit(f"reproduce_models.py: {error}\nPass --data-root <folder that holds natural_images/>.")
    train, test = splits.train, splits.test
    data_seconds = time.perf_counter() - began
    duplicates = {name: 1 - torch.unique(split, dim=0).shape[0] / split.shape[0] for name, split in (("train", train), ("test", test))}
    norms = test.norm(dim=1)
    images = "scikit-learn's two embedded photos (china.jpg, flower.jpg)" if args.source == "embedded" else f"the images in {args.data_root / 'natural_images'}"
    data_text = (f"`pfzoo.data.patches(source={args.source!r}, num_train={s['num_train']}, num_test={s['num_test']}, seed={seed})`: "
                 f"16×16 patches of {images}, log(x + 1), training pixel mean removed, projected on the top 36 principal components "
                 "of the training patches and whitened (train covariance = I); train and test patches come from disjoint image blocks.")
    data_check = (f"{100 * duplicates['train']:.1f}% of the training and {100 * duplicates['test']:.1f}% of the test patches repeat another "
                  f"patch of their split exactly (flat, saturated or black regions give identical patches: the data have point masses, which "
                  f"a density with a sharp enough peak can exploit); test patch norms: median {norms.median().item():.2f}, 90th percentile "
                  f"{norms.quantile(0.9).item():.2f} (a whitened Gaussian's would be ≈ 6).")
    print(f"data: train {tuple(train.shape)}, test {tuple(test.shape)} ({data_seconds:.1f} s); {data_check}", flush=True)
    subset_index = torch.randperm(test.shape[0], generator=gen(seed + SUBSET_SEED_OFFSET))[: s["hais_patches"]]
    subset = test[subset_index]
    pilot_data = train[torch.randperm(train.shape[0], generator=gen(seed + PILOT_SEED_OFFSET))[: s["pilot_patches"]]]
    rows, timers, estimates = [], {"training": 0.0, "pilot": 0.0, "evaluation": 0.0}, itertools.count(1)

    def next_seed() -> int:
        return seed + SEED_STRIDE * next(estimates)

    def finish(row: dict, e: dict) -> dict:
        per_example = e.pop("per_example")
        values = per_example[subset_index] if e["test_patches"] == test.shape[0] else per_example if e["test_patches"] == subset.shape[0] else None
        row.update(evaluation=e, subset_per_example=None if values is None else values.tolist(), shared_stderr=e.get("log_z_stderr", 0.0),
                   subset_mean=None if values is None else values.mean().item())
        rows.append(row)
        timers["evaluation"] += e["seconds"]
        print(f"{row['label']}: {e['mean']:.3f} ± {math.hypot(e['estimator_stderr'], e['data_stderr']):.3f} ({e['kind']})"
              + ("" if values is None else f", same patches {row['subset_mean']:.3f}") + f"; train {row['train_seconds']:.1f} s, eval {e['seconds']:.1f} s", flush=True)
        return row

    def exact(row: dict, model) -> dict:
        began = time.perf_counter()
        with torch.no_grad():
            per_example = model.log_prob(test).double()
        return finish(row, {"per_example": per_example, "mean": per_example.mean().item(), "estimator_stderr": 0.0, "kind": "exact",
                            "data_stderr": (per_example.std() / math.sqrt(len(per_example))).item(), "seconds": time.perf_counter() - began,
                            "estimator": "exact (closed form)", "test_patches": len(per_example)})

    def pilot_and_evaluate(row: dict, model, data: torch.Tensor, chains: int, steps: int, latent: bool = True) -> dict:
        """The step-size pilot (per-example log p̂(x) on training patches for generative models, else log Ẑ), then HAIS with its choice."""
        began = time.perf_counter()
        pilot_chains, pilot_steps = (s["pilot_particles"], s["pilot_steps"]) if latent else (s["pilot_chains"], s["pilot_logz_steps"])
        result = pilot_hais(model, candidate_settings(stiffness_grid=STIFFNESS_GRID if latent else ()), num_chains=pilot_chains, num_steps=pilot_steps,
                            data=pilot_data if latent else None, base="isotropic", generator=gen(next_seed()))
        chosen = result.setting
        row["pilot"] = {"trials": [{**vars(t.setting), "bound": t.bound, "stderr": t.stderr, "seconds": t.seconds, "acceptance_mean": t.acceptance_mean,
                                    "acceptance_last_10pct": t.acceptance_last} for t in result.trials],
                        **vars(chosen), "what": result.what, "num_steps": pilot_steps, "chains": pilot_chains,
                        "patches": pilot_data.shape[0] if latent else None}
        timers["pilot"] += time.perf_counter() - began
        estimator, began = chosen.estimator(chains, steps, base="isotropic"), time.perf_counter()
        e = (estimator.log_likelihood(model, data, generator=gen(next_seed())) if latent
             else estimator.log_likelihood(model, test, base_data=train, generator=gen(next_seed())))
        acceptance = e.info.get("acceptance") or e.partition.info["acceptance"]
        what = f"{step_text(chosen.step_size, chosen.stiffness)}, {SCHEDULE_TEXT[chosen.schedule]}"
        evaluation = {"per_example": e.per_example, "mean": e.mean, "estimator_stderr": e.stderr, "data_stderr": e.data_stderr, "kind": e.kind.value,
                      "seconds": time.perf_counter() - began, "num_steps": steps, "test_patches": data.shape[0],
                      "acceptance_mean": sum(acceptance) / len(acceptance), "acceptance_last_10pct": acceptance[-1]}
        if latent:
            evaluation.update(estimator=f"per-example HAIS, {what}", particles=chains)
        else:
            evaluation.update(estimator=f"HAIS log Z from N(0, I), {what}", chains=chains, log_z=e.partition.log_z,
                              log_z_stderr=e.partition.stderr, ess=e.partition.ess)
        return evaluation

    def fail(row: dict, reason: str) -> dict:
        row["failed"] = reason
        rows.append(row)
        print(f"{row['label']}: FAILED: {reason}", flush=True)
        return row

    def fit_em(name: str, run_seed: int, epochs: int, model=None) -> tuple:
        """EM-HMC (or persistent MPF) from a recipe, with burn-in E-steps for EM; the row fields describing the training."""
        cfg, em = recipe(name, run_seed, f"trainer.epochs={epochs}"), name != "models_mcrbm"
        fit = fit_recipe(cfg, splits, model=model, burn_in=s["em_burn_in"] if em else 0, generator=gen(run_seed + 3))
        adaptation = (fit.objective if em else fit.objective.continuous).adaptation  # EMHMC's, or MPF's PersistentMPF's
        timers["training"] += fit.seconds
        losses = [r["loss"] for r in fit.records]
        finite = all(torch.isfinite(p).all().item() for p in fit.model.parameters())
        info = {"epochs": epochs, "batch_size": cfg.trainer.batch_size, "losses": losses, "final_loss": losses[-1] if losses else None,
                "sampler_acceptance": [a for a, _ in adaptation], "sampler_step_size": [v for _, v in adaptation], "seconds": fit.seconds,
                "error": fit.error if fit.error or finite else "parameters are NaN or infinite after training"}
        if em:
            info.update(burn_in_e_steps=s["em_burn_in"], final_step_size=fit.objective.step_size.item())
        losses_text = ", ".join(f"{x:.1f}" for x in losses[:: max(1, len(losses) // 6)])
        return fit.model.requires_grad_(False), cfg, info, {"train_seconds": fit.seconds, "training": info}, losses_text

    # 1. Gaussian (exact ML).
    began = time.perf_counter()
    gaussian = Gaussian.fit(train).requires_grad_(False)
    timers["training"] += (seconds := time.perf_counter() - began)
    exact({"name": "gaussian", "label": "Gaussian", "parameters": count_parameters(gaussian), "sizes": "mean and full covariance",
           "train_method": "exact ML (`Gaussian.fit`)", "train_seconds": seconds,
           "description": "`Gaussian.fit(train)`: sample mean and covariance (+1e-6·I); the data are whitened on the training set, so ≈ N(0, I)."}, gaussian)

    # 2-3. Complete products of experts: exact ML, full-batch L-BFGS in float64 (conf/experiment/hais_poe_*.yaml).
    for recipe_name, name, label in (("hais_poe_laplace", "ica", "ICA (complete Laplace POE)"), ("hais_poe_student", "poe-student-t", "Student-t POE (complete)")):
        cfg = recipe(recipe_name, seed, f"trainer.epochs={math.ceil(s['poe_iters'] / ITERS_PER_EPOCH)}")
        fit = fit_recipe(cfg, splits, dtype=torch.float64)
        final = ExactMaximumLikelihood().loss(fit.model, train.double())
        final.backward()
        grad_norm = math.sqrt(sum(p.grad.square().sum().item() for p in fit.model.parameters()))
        model, student = fit.model.float().requires_grad_(False), name == "poe-student-t"
        timers["training"] += fit.seconds
        info = {"optimizer": f"`+experiment={recipe_name}`: torch.optim.LBFGS(lr=1, history_size=20, strong Wolfe line search) on the full training "
                             f"set in float64 through `pfzoo.training.Trainer`, {ITERS_PER_EPOCH} iterations per epoch until an epoch changes the loss "
                             f"by ≤ {cfg.trainer.stop_tolerance:g}·|loss| (at most {cfg.trainer.epochs * ITERS_PER_EPOCH})",
                "initial_loss": fit.records[0]["loss"], "final_loss": final.item(), "iterations": fit.optimizer_state["state"][0]["n_iter"],
                "final_grad_norm": grad_norm, "converged": fit.stop_reason is not None, "seconds": fit.seconds}
        norms, shapes = model.filters.norm(dim=1).sort().values, model.shape.sort().values
        notes = (f"L-BFGS {info['iterations']} iterations, final |grad| {grad_norm:.1e}" + ("" if info["converged"] else " (iteration limit)")
                 + f"; filter norms {norms[0]:.2f} / {norms[len(norms) // 2]:.2f} / {norms[-1]:.2f} (min/median/max)"
                 + (f"; λ {shapes[0]:.3f} / {shapes[len(shapes) // 2]:.3f} / {shapes[-1]:.3f}" if student else ""))
        exact({"name": name, "label": label, "parameters": count_parameters(model), "sizes": "36 experts, complete" + (", λ learned" if student else ""),
               "train_method": "exact ML, full-batch L-BFGS", "train_seconds": fit.seconds, "notes": notes, "training": info,
               "description": f"`ProductOfExperts(36, 36, expert={model.expert!r})`: {info['optimizer']}; loss {info['initial_loss']:.3f} → "
                              f"{info['final_loss']:.4f}"
                              + ("; λ = ½ + softplus(ρ) (`shape_above_half=True`) keeps Z finite during line searches" if student else "") + "."}, model)
        if name == "ica":
            ica_model, ica_basis = model, torch.linalg.inv(model.filters.detach().double()).float()  # Φ = W⁻¹: ICA's basis, sparse coding's start

    # 4. Sparse coding: Laplace linear generative model, 2× overcomplete, EM-HMC from ICA's basis (conf/experiment/models_sparse_coding.yaml).
    def sparse_coding(num_latent: int, label: str) -> dict:
        start = LinearGenerative.from_tensors(ica_initial_basis(ica_basis, num_latent, seed + num_latent), prior="laplace", noise_std=NOISE_STD)
        model, cfg, info, fields, losses = fit_em("models_sparse_coding", seed + num_latent, s["em_epochs"], model=start)
        columns = f"{'its ' + str(num_latent) + ' longest columns' if num_latent < DIM else 'all 36 columns'}"
        columns += f", then {num_latent - DIM} columns of 0.01·N(0, 1)" if num_latent > DIM else ""
        row = {"name": "sparse-coding" if num_latent == NUM_LATENT else f"sparse-coding-{num_latent}", "label": label, "parameters": count_parameters(model),
               "sizes": f"L = {num_latent} latents, σ_n = {NOISE_STD}", "train_method": f"EM-HMC + Adam, {info['epochs']} epochs", **fields,
               "description": f"`LinearGenerative(36, {num_latent}, prior='laplace', noise_std={NOISE_STD})`, initial basis the ICA row's Φ = W⁻¹ ({columns}); "
                              f"{info['burn_in_e_steps']} burn-in E-steps (the latents start at prior draws), then `+experiment=models_sparse_coding`: "
                              f"`Trainer(EMHMC(num_hmc_steps=10, step_size=0.05, num_leapfrog=10, target_acceptance=0.8, batch_hmc_steps=2), "
                              f"Adam(lr={cfg.trainer.optimizer.lr}), epochs={info['epochs']}, batch_size=100)`; complete-data loss per epoch {losses}."}
        if info["error"]:
            return fail(row, info["error"])
        row["notes"] = (f"E-step acceptance {info['sampler_acceptance'][-1]:.2f} at ε {info['final_step_size']:.3f}; "
                        f"basis column norms {model.basis.norm(dim=0).min().item():.2f}–{model.basis.norm(dim=0).max().item():.2f}")
        return finish(row, pilot_and_evaluate(row, model, subset, s["hais_particles"], s["hais_steps"]))

    sc_row = sparse_coding(NUM_LATENT, f"Sparse coding (Laplace linear generative, L = {NUM_LATENT})")

    def estimator_check(name: str, label: str, model, train_method: str, reference_method: str, description: str, exact_fn) -> None:
        """A generative model with a known log-likelihood, evaluated like every generative row (its own pilot, then HAIS) on the
        first ``check_patches`` test patches of the common subset."""
        row = {"name": name, "label": label, "parameters": count_parameters(model), "sizes": f"L = {model.num_latent} latents, σ_n = {NOISE_STD}",
               "train_method": train_method, "train_seconds": 0.0, "description": description}
        patches = subset[: s["check_patches"]]
        evaluation = pilot_and_evaluate(row, model.requires_grad_(False), patches, s["check_particles"], s["hais_steps"])
        began = time.perf_counter()
        reference = exact_fn(patches).double().mean().item()
        timers["evaluation"] += time.perf_counter() - began
        p = row["pilot"]
        row["check"] = {"patches": patches.shape[0], "particles": s["check_particles"], "num_steps": s["hais_steps"], "step_size": p["step_size"],
                        "schedule": p["schedule"], "stiffness": p["stiffness"], "estimate": evaluation["mean"], "stderr": evaluation["estimator_stderr"],
                        "exact": reference, "reference_method": reference_method, "error": evaluation["mean"] - reference}
        row["notes"] = f"reference on the same {patches.shape[0]} patches: {reference:.3f}; error {row['check']['error']:+.3f}"
        finish(row, evaluation)

    # Estimator checks. (a) The Gaussian-prior linear generative model at its exact ML basis: closed-form log-likelihood.
    check_model = LinearGenerative.from_tensors(ml_gaussian_prior_basis(train, NUM_LATENT, seed + 5), prior="gaussian", noise_std=NOISE_STD)
    estimator_check(
        "check", f"Gaussian-prior linear generative (L = {NUM_LATENT}), HAIS check", check_model, "exact ML (closed form, probabilistic PCA)",
        "closed-form log-likelihood",
        "`LinearGenerative(36, 72, prior='gaussian', noise_std=0.1)` with Φ = (S − σ_n²I)^½ R, S the training covariance and R a "
        "random 36×72 matrix with orthonormal rows: the exact ML basis (ΦΦᵀ + σ_n²I = S), so this model is the Gaussian row's "
        "distribution written with 72 latents. Its exact log-likelihood checks the per-example HAIS procedure (pilot, then the "
        "chosen settings) that the generative rows use.", check_model.log_prob)
    # (b) The complete Laplace-prior model with ICA's basis: ICA's density blurred by the noise, p(x) = E_n[p_ICA(x − n)].
    estimator_check(
        "check-laplace", f"Laplace-prior linear generative with ICA's basis (L = {DIM}), HAIS check",
        LinearGenerative.from_tensors(ica_basis, prior="laplace", noise_std=NOISE_STD), "not trained: the ICA row's basis Φ = W⁻¹",
        f"Monte Carlo over the noise, {s['noise_draws']:,} draws per patch",
        f"`LinearGenerative(36, 36, prior='laplace', noise_std={NOISE_STD})` with the ICA row's Φ = W⁻¹, not trained: x = Φz + n "
        "with Φz distributed as the ICA row's density, so log p(x) = log E_n[p_ICA(x − n)]; the reference value averages "
        f"p_ICA(x − n) over {s['noise_draws']:,} noise draws per patch (a consistent estimate whose Jensen bias is far below the "
        "table's precision). Its difference from the ICA row is what the noise σ_n alone costs a Laplace model.",
        lambda x: noise_convolved_log_prob(ica_model, x, s["noise_draws"], gen(seed + 6)))

    # 5. Bilinear generative model, EM-HMC with bounded column norms (conf/experiment/models_bilinear.yaml).
    model, cfg, info, fields, losses = fit_em("models_bilinear", seed + 2, s["bilinear_epochs"])
    row = {"name": "bilinear", "label": "Bilinear generative", "parameters": count_parameters(model), **fields,
           "sizes": f"K = {model.num_components} components, {model.num_content} content + {model.num_style} style latents, σ_n = {NOISE_STD}",
           "train_method": f"EM-HMC + Adam, {info['epochs']} epochs",
           "description": f"`BilinearGenerative(36, num_style=8, noise_std={NOISE_STD}, init_std=0.17, max_basis_norm=1.0)` (`+experiment=models_bilinear`: "
                          f"conf/model/bilinear.yaml with the bound its comment recommends for EM); {info['burn_in_e_steps']} burn-in E-steps, then the "
                          f"same EM-HMC Trainer as sparse coding with Adam(lr={cfg.trainer.optimizer.lr}); complete-data loss per epoch {losses}."}
    if info["error"]:
        fail(row, info["error"])
    else:
        row["notes"] = f"E-step acceptance {info['sampler_acceptance'][-1]:.2f} at ε {info['final_step_size']:.3f}"
        finish(row, pilot_and_evaluate(row, model, subset, s["hais_particles"], s["hais_steps"]))

    # 6. mcRBM, persistent MPF with Adam (conf/experiment/models_mcrbm.yaml); log Ẑ by HAIS from N(0, I).
    model, cfg, info, fields, _ = fit_em("models_mcrbm", seed + 4, s["mpf_epochs"])
    row = {"name": "mcrbm", "label": "mcRBM", "parameters": count_parameters(model), **fields, "train_method": f"persistent MPF + Adam, {info['epochs']} epochs",
           "sizes": f"F = {model.num_factors} factors, {model.num_covariance_hidden} covariance + {model.num_mean_hidden} mean hiddens",
           "description": "`MeanCovarianceRBM(36, 72, 36, 36, init_std=0.17, factor_norm=None, normalize_pooling=True)` (conf/model/mcrbm.yaml: "
                          "learned factor lengths; fixed unit lengths gave -43.09 on 2026-11-22); `+experiment=models_mcrbm`: "
                          "`Trainer(MPF(continuous=PersistentMPF(num_hmc_steps=5, step_size=0.05, num_leapfrog=10, target_acceptance=0.8)), "
                          f"Adam(lr={cfg.trainer.optimizer.lr}), epochs={info['epochs']}, batch_size=500)` (conf/trainer/mpf_adam.yaml). Parameter count "
                          "includes the pooling matrix P (constrained ≥ 0, columns of unit L1 norm)."}
    if info["error"]:
        fail(row, info["error"])
    else:
        evaluation = pilot_and_evaluate(row, model, test, s["logz_chains"], s["logz_steps"], latent=False)
        biases = max(model.covariance_bias.abs().max().item(), model.mean_bias.abs().max().item(), model.visible_bias.abs().max().item())
        row["notes"] = (f"log Ẑ = {evaluation['log_z']:.3f} ± {evaluation['log_z_stderr']:.3f}, ESS {evaluation['ess']:.0f} of {evaluation['chains']}; "
                        f"MPF particle acceptance {info['sampler_acceptance'][-1]:.2f}; largest |bias| {biases:.2f}")
        finish(row, evaluation)

    # Sweep (Fig. 5).
    sweep, sweep_seconds, references, began = None, 0.0, {}, time.perf_counter()
    if args.sweep:
        sweep = []
        for num_latent in SWEEP_SIZES:
            r = sc_row if num_latent == NUM_LATENT and not sc_row.get("failed") else sparse_coding(num_latent, f"Sparse coding, L = {num_latent}")
            if r is not sc_row:
                rows.remove(r)
            entry = {"num_latent": num_latent, "parameters": r["parameters"], "train_seconds": r["train_seconds"]}
            if r.get("failed"):
                entry["failed"] = r["failed"]
            else:
                e, p = r["evaluation"], r["pilot"]
                entry.update({"mean": e["mean"], "stderr": math.hypot(e["estimator_stderr"], e["data_stderr"]), "eval_seconds": e["seconds"],
                              "step_size": p["step_size"], "schedule": p["schedule"], "stiffness": p["stiffness"]})
            sweep.append(entry)
            print(f"sweep L={num_latent}: {entry.get('mean', float('nan')):.3f}", flush=True)
        sweep_seconds = time.perf_counter() - began
        references = {r["label"]: r["subset_mean"] for r in rows if r["name"] in ("gaussian", "ica") and not r.get("failed")}

    meta = {"date": datetime.date.today().isoformat(), "quick": args.quick, "machine": reporting.machine_description(),
            "command": "python scripts/reproduce_models.py" + "".join(" " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)),
            "torch_threads": torch.get_num_threads(), "torch_version": torch.__version__, "pfzoo_version": pfzoo.__version__, "source": args.source,
            "seed": seed, "settings": s, "data": data_text, "data_check": data_check, "duplicate_fraction": duplicates, "subset_size": subset.shape[0],
            "subset_indices": subset_index.tolist(), "data_seconds": data_seconds, **{f"{k}_seconds": v for k, v in timers.items()},
            "sweep_seconds": sweep_seconds, "total_seconds": time.perf_counter() - total_began,
            "load_average": {"start": load_at_start, "end": reporting.load_average()}}
    out_dir.mkdir(parents=True, exist_ok=True)
    order = ordering(rows)
    (out_dir / "results.json").write_text(json.dumps({"meta": meta, "models": rows, "ordering": order, "sweep": sweep, "sweep_references": references},
                                                     indent=1, default=float) + "\n")
    write_readme(out_dir / "README.md", meta, rows, order, sweep)
    if sweep is not None:
        plot_sweep(out_dir / "size_sweep.png", sweep, references, meta)
    print(f"wrote {out_dir}/README.md, results.json" + (", size_sweep.png" if sweep is not None else "") + f" ({meta['total_seconds']:.0f} s in all)")


if __name__ == "__main__":
    main()
