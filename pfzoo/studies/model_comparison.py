"""The model comparison of Sohl-Dickstein & Culpepper (2011), Table 1 (and Fig. 5's size sweep) on whitened natural-image
patches: training every model from its recipe, evaluating it (exactly, or by HAIS after a step-size pilot), and the
report (what ``scripts/reproduce_models.py`` composes and writes).

:class:`ModelComparison` trains and evaluates the models one after another and collects one row per model (the dicts
results.json stores); :func:`ordering` checks the paper's ordering on them with paired differences; :func:`readme` and
:func:`sweep_figure` render results.json's content alone. The training recipes are the conf/experiment files; the
comparison gets them composed through a ``recipe(name, seed, *overrides)`` callable, so it needs no Hydra of its own.
The sampler's acceptance and step size during training come from the objectives' ``adaptation`` records, the
estimators' from their estimates' ``info``.
"""

from __future__ import annotations

import copy
import itertools
import json
import logging
import math
import time
from typing import TYPE_CHECKING, Callable

import torch
from omegaconf import DictConfig

from pfzoo.data.splits import DataSplits
from pfzoo.logmath import log_mean_exp
from pfzoo.models import Gaussian, LinearGenerative
from pfzoo.studies.step_size_pilot import SCALED_STEP_GRID, STEP_GRID, candidate_settings, pilot_hais
from pfzoo.training import ExactMaximumLikelihood
from pfzoo.training.recipe import fit_recipe

if TYPE_CHECKING:
    from matplotlib.figure import Figure

logger = logging.getLogger(__name__)

DIM, NOISE_STD, NUM_LATENT, SWEEP_SIZES = 36, 0.1, 72, (18, 36, 72, 108)
# Stiffness candidates s for the generative models. s = λ_max(ΦᵀΦ)/σ_n² (sparse coding: ≈ 75) would keep the stiffest
# direction's stability margin, but a Laplace prior's kinks also limit ε at small β, so smaller s with a small ε can win.
STIFFNESS_GRID, GEOMETRIC_START = (3.0, 10.0, 30.0, 100.0, 300.0, 1000.0), 1e-3
SEED_STRIDE, SUBSET_SEED_OFFSET, PILOT_SEED_OFFSET = 1000, 7, 11  # estimate r: seed + 1000·r; test subset / pilot patches
ITERS_PER_EPOCH = 100  # the hais_poe_* recipes' L-BFGS max_iter: one Trainer epoch
GROUPS = {"gaussian": ("gaussian",), "laplace": ("ica", "sparse-coding", "poe-laplace-2x-mpf"),
          "richer": ("bilinear", "poe-student-t", "mcrbm", "poe-student-t-2x-mpf")}
POE_MPF_RECIPES = (("models_poe_laplace_mpf", "laplace", "Laplace"), ("models_poe_student_mpf", "student-t", "Student-t"))
ROUTE_PAIRS = (("poe-laplace-mpf", "ica"), ("poe-student-t-mpf", "poe-student-t"), ("poe-laplace-2x-mpf", "poe-laplace-mpf"),
               ("poe-student-t-2x-mpf", "poe-student-t-mpf"))
"""(row, reference row) pairs of the training-routes section: the same complete model trained by MPF against exact ML, and
the 2× overcomplete model against the complete one, both by MPF."""
ROUTE_PAIRS_NAMES = {name for name, _ in ROUTE_PAIRS}
SETTINGS = {  # budgets; the training recipes themselves are the conf/experiment files
    "full": {"num_train": 20000, "num_test": 5000, "poe_iters": 2000, "em_epochs": 80, "em_burn_in": 20, "bilinear_epochs": 200,
             "mpf_epochs": 100, "poe_mpf_epochs": 100, "convergence_steps": [100, 1000, 10000], "convergence_patches": 20,
             "convergence_particles": 50, "hais_patches": 100, "hais_particles": 200, "hais_steps": 12000, "check_patches": 50,
             "check_particles": 100, "noise_draws": 200000, "logz_chains": 200, "logz_steps": 100000, "pilot_patches": 10,
             "pilot_particles": 20, "pilot_steps": 3000, "pilot_chains": 100, "pilot_logz_steps": 10000},
    "quick": {"num_train": 5000, "num_test": 1000, "poe_iters": 300, "em_epochs": 10, "em_burn_in": 5, "bilinear_epochs": 10,
              "mpf_epochs": 5, "poe_mpf_epochs": 5, "convergence_steps": [100, 1000], "convergence_patches": 5, "convergence_particles": 10,
              "hais_patches": 20, "hais_particles": 50, "hais_steps": 2000, "check_patches": 10, "check_particles": 50,
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
    """A CPU generator seeded with ``seed``."""
    return torch.Generator().manual_seed(seed)


def step_text(step_size: float, stiffness: float) -> str:
    """The leapfrog step of a HAIS setting, e.g. ``ε = 0.05 / √(1 + 30 β)``."""
    return f"ε = {step_size:g}" if stiffness == 0 else f"ε = {step_size:g} / √(1 + {stiffness:.0f} β)"


def count_parameters(model) -> int:
    """Free parameters: every entry of every parameter tensor (the Gaussian row counts its own, see :meth:`ModelComparison.gaussian`)."""
    return sum(p.numel() for p in model.parameters())


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


def describe_data(splits: DataSplits, source: str, images: str, s: dict, seed: int) -> tuple[str, str, dict]:
    """What the report says of the patches: how they were made (``images``: the photos they come from), a check of
    their point masses and norms, and the fraction of each split's patches that repeat another (split → fraction)."""
    train, test = splits.train, splits.test
    duplicates = {name: 1 - torch.unique(split, dim=0).shape[0] / split.shape[0] for name, split in (("train", train), ("test", test))}
    norms = test.norm(dim=1)
    data_text = (f"`pfzoo.data.patches(source={source!r}, num_train={s['num_train']}, num_test={s['num_test']}, seed={seed})`: "
                 f"16×16 patches of {images}, log(x + 1), training pixel mean removed, projected on the top 36 principal components "
                 "of the training patches and whitened (train covariance = I); train and test patches come from disjoint image blocks.")
    data_check = (f"{100 * duplicates['train']:.1f}% of the training and {100 * duplicates['test']:.1f}% of the test patches repeat another "
                  f"patch of their split exactly (flat, saturated or black regions give identical patches: the data have point masses, which "
                  f"a density with a sharp enough peak can exploit); test patch norms: median {norms.median().item():.2f}, 90th percentile "
                  f"{norms.quantile(0.9).item():.2f} (a whitened Gaussian's would be ≈ 6).")
    return data_text, data_check, duplicates


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
    """Seconds for a table cell: ``—`` for none, no decimals from 10 s."""
    return "—" if x is None else f"{x:.0f}" if x >= 10 else f"{x:.1f}"


def budget_text(s: dict) -> str:
    """The settings ``s`` (one of :data:`SETTINGS`) in a sentence."""
    return (f"{s['num_train']:,} training / {s['num_test']:,} test patches; POE L-BFGS ≤ {s['poe_iters']:,} iterations; "
            f"EM-HMC {s['em_burn_in']} burn-in E-steps + {s['em_epochs']} epochs (sparse coding) / {s['bilinear_epochs']} epochs (bilinear); "
            f"mcRBM {s['mpf_epochs']} MPF epochs; per-example HAIS N = {s['hais_steps']:,} with {s['hais_particles']} particles on "
            f"{s['hais_patches']} test patches (check: {s['check_particles']} particles on {s['check_patches']}); mcRBM log Z: "
            f"{s['logz_chains']} chains, N = {s['logz_steps']:,}; pilots: N = {s['pilot_steps']:,}, {s['pilot_particles']} particles × "
            f"{s['pilot_patches']} training patches (log Z: {s['pilot_chains']} chains, N = {s['pilot_logz_steps']:,})"
            + (f"; MPF-trained POEs {s['poe_mpf_epochs']} epochs" if "poe_mpf_epochs" in s else "")
            + (f"; Fig. 4: N in {s['convergence_steps']} ({s['convergence_particles']} particles on {s['convergence_patches']} patches for "
               "per-example estimates, the table's chains for log Ẑ)" if "convergence_steps" in s else "") + ".")


def readme(meta: dict, rows: list[dict], order: dict, sweep: list[dict] | None) -> str:
    """README.md's markdown from what results.json holds: ``meta``, the model ``rows``, their :func:`ordering` and the size ``sweep``."""
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
    if any(r["name"] in ROUTE_PAIRS_NAMES for r in rows):
        lines += ["", "The paper's own analysis models are 2× overcomplete and trained by MPF: the MPF-trained 2× overcomplete Laplace POE "
                  "joins the Laplace group and the Student-t one the richer group."]
    lines += ["", "Reading the kinds: an exact value is exact; per-example HAIS is a stochastic *lower* bound (the true value is "
              "likely higher); the mcRBM's value uses log Ẑ, a stochastic lower bound on log Z, so it is biased *upward*. "
              "A richer model beating a Laplace one is therefore robust for the bilinear model (a lower bound above an exact "
              "value) and weaker for the mcRBM."]
    lines += routes_section(by_name) + convergence_section(rows)
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
              + (f", Fig. 4 runs {meta['convergence_seconds']:.0f} s" if meta.get("convergence_seconds") else "")
              + (f", sweep {meta['sweep_seconds']:.0f} s" if meta.get("sweep_seconds") else "") + ".", ""]
    lines += ["## Notes", "", *meta["notes"], ""] if meta.get("notes") else []
    return "\n".join(lines)

def short_kind(kind: str) -> str:
    """An estimate's kind in a few words: ``exact``, ``biased upward`` (a log Ẑ lower bound) or ``lower bound``."""
    return "exact" if kind == "exact" else "biased upward" if kind.startswith("unbiased Z") else "lower bound"


def routes_section(by_name: dict) -> list[str]:
    """README lines comparing training routes on the common test subset (:data:`ROUTE_PAIRS`); none without the MPF rows."""
    lines = []
    for name, reference in ROUTE_PAIRS:
        row, ref = by_name.get(name), by_name.get(reference)
        if row is None or ref is None or row.get("failed") or ref.get("failed") or row.get("subset_per_example") is None:
            continue
        extra = row.get("shared_stderr", 0.0) ** 2 + ref.get("shared_stderr", 0.0) ** 2
        diff, stderr = paired(torch.tensor(row["subset_per_example"]), torch.tensor(ref["subset_per_example"]), extra)
        lines.append(f"- {row['label']} − {ref['label']}: {diff:+.2f} ± {stderr:.2f} nats per patch "
                     f"({short_kind(row['evaluation']['kind'])} against {short_kind(ref['evaluation']['kind'])}).")
    if not lines:
        return []
    return ["", "## Training routes", "",
            "The paper trains its energy-based analysis models by minimum probability flow; the complete POEs above by exact maximum "
            "likelihood (the oracle). The same complete model trained both ways, both evaluated exactly, measures what MPF costs; "
            "the 2× overcomplete model against the complete one, both by MPF, what the paper's extra experts buy. Paired on the "
            "common test subset:", "", *lines]


def convergence_section(rows: list[dict]) -> list[str]:
    """README lines for Fig. 4 (each HAIS row's estimate against N); none when no row has convergence runs."""
    runs = [(r, r["evaluation"]["convergence"]) for r in rows if not r.get("failed") and r["evaluation"].get("convergence")]
    if not runs:
        return []
    steps = sorted({c["num_steps"] for _, conv in runs for c in conv})
    lines = ["", "## Convergence against N (Fig. 4)", "",
             "Each HAIS row's estimate with its chosen setting at fewer intermediate distributions N. Per-example rows: the mean "
             "log p̂(x) on the first patches of the common subset (the last column is the table's run on those patches); log Ẑ rows: "
             "the test log-likelihood with log Ẑ from the table's number of chains. Per-example values are lower bounds and should "
             "rise to a plateau; log-Ẑ-based values are biased upward and should fall to one.", "",
             "| model | " + " | ".join(f"N = {n:,}" for n in steps) + " |", "|---|" + "---:|" * len(steps)]
    for row, conv in runs:
        by_steps = {c["num_steps"]: c for c in conv}
        lines.append(f"| {row['label']} | " + " | ".join(f"{by_steps[n]['mean']:.2f} ± {by_steps[n]['stderr']:.2f}" if n in by_steps else "—" for n in steps) + " |")
    return lines + ["", "![estimates against N](convergence.png)"]


def convergence_figure(rows: list[dict], meta: dict) -> Figure:
    """Fig. 4: every HAIS row's estimate minus its value at the largest N, against N; the caller saves and closes it."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.8, 6.4))
    for row in (r for r in rows if not r.get("failed") and r["evaluation"].get("convergence")):
        conv, latent = row["evaluation"]["convergence"], "log_z" not in row["evaluation"]
        final = conv[-1]["mean"]
        ax.errorbar([c["num_steps"] for c in conv], [c["mean"] - final for c in conv], yerr=[c["stderr"] for c in conv], marker="o" if latent else "s",
                    linestyle="-" if latent else "--", capsize=3, label=f"{row['label']} ({'per-example' if latent else 'log Ẑ'}; {final:.2f} at the last N)")
    ax.axhline(0.0, color="k", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1.0)  # short runs of the generative models are hundreds of nats low; the log Ẑ rows move by tenths
    ax.set_xlabel("intermediate distributions N")
    ax.set_ylabel("estimate − estimate at the largest N (nats per patch, symlog)")
    ax.set_title(f"HAIS estimates against N ({meta['source']} patches)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False)
    fig.tight_layout()
    return fig


def sweep_figure(sweep: list[dict], references: dict, meta: dict) -> Figure:
    """Fig. 5: the sparse-coding rows' log-likelihood against the number of latents, with the exact ``references``
    (label → mean on the same patches) as lines; the caller saves and closes it."""
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
    return fig


class ModelComparison:
    """Trains and evaluates the comparison's models on ``splits`` (whitened patches ``[N, 36]``) with the budgets ``s``
    (one of :data:`SETTINGS`, possibly overridden), collecting one row per model in :attr:`rows`.

    ``recipe(name, seed, *overrides)`` composes ``conf/experiment/<name>.yaml`` into a ``train`` config for these data.
    Every evaluation of a generative model uses the same random subset of ``hais_patches`` test patches
    (:attr:`subset`); the step-size pilots use ``pilot_patches`` training patches. Estimate r draws from a generator
    seeded with ``seed + SEED_STRIDE · r``. :attr:`timers` sums the seconds of training, pilots and evaluation.
    """

    def __init__(self, splits: DataSplits, s: dict, seed: int, recipe: Callable[..., DictConfig]) -> None:
        self.splits, self.s, self.seed, self.recipe = splits, s, seed, recipe
        self.train, self.test = splits.train, splits.test
        self.subset_index = torch.randperm(self.test.shape[0], generator=gen(seed + SUBSET_SEED_OFFSET))[: s["hais_patches"]]
        self.subset = self.test[self.subset_index]
        self.pilot_data = self.train[torch.randperm(self.train.shape[0], generator=gen(seed + PILOT_SEED_OFFSET))[: s["pilot_patches"]]]
        self.rows: list[dict] = []
        self.timers = {"training": 0.0, "pilot": 0.0, "evaluation": 0.0}
        self.sweep_seconds = 0.0
        self._estimates = itertools.count(1)

    def run(self, sweep: bool) -> tuple[list[dict] | None, dict]:
        """Every model in the table's order, then (``sweep``) Fig. 5's sizes; returns the sweep's entries (``None``
        without it) and its exact references (label → mean on the same patches)."""
        self.gaussian()
        self.products_of_experts()
        sparse_coding = self.sparse_coding(NUM_LATENT, f"Sparse coding (Laplace linear generative, L = {NUM_LATENT})")
        self.estimator_checks()
        self.bilinear()
        self.mcrbm()
        self.mpf_products_of_experts()
        return self.size_sweep(sparse_coding) if sweep else (None, {})

    def next_seed(self) -> int:
        return self.seed + SEED_STRIDE * next(self._estimates)

    def finish(self, row: dict, e: dict) -> dict:
        """Store the evaluation ``e`` in ``row`` (with its per-patch values on the common subset) and add the row."""
        per_example = e.pop("per_example")
        values = (per_example[self.subset_index] if e["test_patches"] == self.test.shape[0]
                  else per_example if e["test_patches"] == self.subset.shape[0] else None)
        row.update(evaluation=e, subset_per_example=None if values is None else values.tolist(), shared_stderr=e.get("log_z_stderr", 0.0),
                   subset_mean=None if values is None else values.mean().item())
        self.rows.append(row)
        self.timers["evaluation"] += e["seconds"]
        logger.info("%s", f"{row['label']}: {e['mean']:.3f} ± {math.hypot(e['estimator_stderr'], e['data_stderr']):.3f} ({e['kind']})"
                    + ("" if values is None else f", same patches {row['subset_mean']:.3f}") + f"; train {row['train_seconds']:.1f} s, eval {e['seconds']:.1f} s")
        return row

    def exact(self, row: dict, model) -> dict:
        """Evaluate ``model`` exactly (closed-form log-likelihood) on every test patch."""
        began = time.perf_counter()
        with torch.no_grad():
            per_example = model.log_prob(self.test).double()
        return self.finish(row, {"per_example": per_example, "mean": per_example.mean().item(), "estimator_stderr": 0.0, "kind": "exact",
                                 "data_stderr": (per_example.std() / math.sqrt(len(per_example))).item(), "seconds": time.perf_counter() - began,
                                 "estimator": "exact (closed form)", "test_patches": len(per_example)})

    def pilot_and_evaluate(self, row: dict, model, data: torch.Tensor, chains: int, steps: int, latent: bool = True,
                           convergence: bool = False) -> dict:
        """The step-size pilot (per-example log p̂(x) on training patches for generative models, else log Ẑ), then HAIS with
        its choice; with ``convergence`` also the same estimate at every N of ``convergence_steps`` (Fig. 4, :meth:`convergence_runs`)."""
        s, began = self.s, time.perf_counter()
        pilot_chains, pilot_steps = (s["pilot_particles"], s["pilot_steps"]) if latent else (s["pilot_chains"], s["pilot_logz_steps"])
        result = pilot_hais(model, candidate_settings(stiffness_grid=STIFFNESS_GRID if latent else ()), num_chains=pilot_chains, num_steps=pilot_steps,
                            data=self.pilot_data if latent else None, base="isotropic", generator=gen(self.next_seed()))
        chosen = result.setting
        row["pilot"] = {"trials": [{**vars(t.setting), "bound": t.bound, "stderr": t.stderr, "seconds": t.seconds, "acceptance_mean": t.acceptance_mean,
                                    "acceptance_last_10pct": t.acceptance_last} for t in result.trials],
                        **vars(chosen), "what": result.what, "num_steps": pilot_steps, "chains": pilot_chains,
                        "patches": self.pilot_data.shape[0] if latent else None}
        self.timers["pilot"] += time.perf_counter() - began
        estimator, began = chosen.estimator(chains, steps, base="isotropic"), time.perf_counter()
        e = (estimator.log_likelihood(model, data, generator=gen(self.next_seed())) if latent
             else estimator.log_likelihood(model, self.test, base_data=self.train, generator=gen(self.next_seed())))
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
        if convergence:
            evaluation["convergence"] = self.convergence_runs(model, chosen, data, e, chains, steps, latent)
        return evaluation

    def convergence_runs(self, model, chosen, data: torch.Tensor, final, chains: int, steps: int, latent: bool) -> list[dict]:
        """Fig. 4: the evaluation ``final`` (made at ``steps``) repeated at every N of ``convergence_steps`` below it, with
        the same setting ``chosen``. Per-example estimates use ``convergence_particles`` particles on the first
        ``convergence_patches`` patches of ``data``, log Ẑ estimates ``chains`` chains; the last entry is ``final`` itself on
        those patches. Entries: N, the mean log-likelihood on those patches, its estimator stderr, seconds."""
        s, began, runs = self.s, time.perf_counter(), []
        patches = data[: s["convergence_patches"]] if latent else None
        for num_steps in (n for n in s["convergence_steps"] if n < steps):
            estimator, began_run = chosen.estimator(s["convergence_particles"] if latent else chains, num_steps, base="isotropic"), time.perf_counter()
            if latent:
                e = estimator.log_likelihood(model, patches, generator=gen(self.next_seed()))
                runs.append({"num_steps": num_steps, "mean": e.mean, "stderr": e.stderr, "seconds": time.perf_counter() - began_run})
            else:
                log_z = estimator(model, data=self.train, generator=gen(self.next_seed()))
                runs.append({"num_steps": num_steps, "log_z": log_z.log_z, "stderr": log_z.stderr, "ess": log_z.ess,
                             "mean": final.mean + final.partition.log_z - log_z.log_z, "seconds": time.perf_counter() - began_run})
        last = final.per_example[: s["convergence_patches"]].mean().item() if latent else final.mean
        runs.append({"num_steps": steps, "mean": last, "stderr": final.stderr, "seconds": None, "final": True})
        self.timers["convergence"] = self.timers.get("convergence", 0.0) + time.perf_counter() - began
        return runs

    def fail(self, row: dict, reason: str) -> dict:
        """Add ``row`` as failed for ``reason``."""
        row["failed"] = reason
        self.rows.append(row)
        logger.info("%s: FAILED: %s", row["label"], reason)
        return row

    def fit_em(self, name: str, run_seed: int, epochs: int, *overrides: str, model=None) -> tuple:
        """EM-HMC (or persistent MPF) from a recipe (with ``overrides``), with burn-in E-steps for EM; the row fields describing the training."""
        s = self.s
        cfg = self.recipe(name, run_seed, f"trainer.epochs={epochs}", *overrides)
        em = cfg.trainer.objective._target_.endswith("EMHMC")
        fit = fit_recipe(cfg, self.splits, model=model, burn_in=s["em_burn_in"] if em else 0, generator=gen(run_seed + 3))
        adaptation = (fit.objective if em else fit.objective.continuous).adaptation  # EMHMC's, or MPF's PersistentMPF's
        self.timers["training"] += fit.seconds
        losses = [r["loss"] for r in fit.records]
        finite = all(torch.isfinite(p).all().item() for p in fit.model.parameters())
        info = {"epochs": epochs, "batch_size": cfg.trainer.batch_size, "losses": losses, "final_loss": losses[-1] if losses else None,
                "sampler_acceptance": [a for a, _ in adaptation], "sampler_step_size": [v for _, v in adaptation], "seconds": fit.seconds,
                "error": fit.error if fit.error or finite else "parameters are NaN or infinite after training"}
        if em:
            info.update(burn_in_e_steps=s["em_burn_in"], final_step_size=fit.objective.step_size.item())
        losses_text = ", ".join(f"{x:.1f}" for x in losses[:: max(1, len(losses) // 6)])
        return fit.model.requires_grad_(False), cfg, info, {"train_seconds": fit.seconds, "training": info}, losses_text

    def gaussian(self) -> None:
        """1. The Gaussian (exact ML)."""
        train = self.train
        began = time.perf_counter()
        gaussian = Gaussian.fit(train).requires_grad_(False)
        self.timers["training"] += (seconds := time.perf_counter() - began)
        m = gaussian.num_visible  # the mean, and of the precision's Cholesky factor only the lower triangle
        self.exact({"name": "gaussian", "label": "Gaussian", "parameters": m + m * (m + 1) // 2, "sizes": "mean and full covariance",
                    "train_method": "exact ML (`Gaussian.fit`)", "train_seconds": seconds,
                    "description": "`Gaussian.fit(train)`: sample mean and covariance (+1e-6·I); the data are whitened on the training set, so ≈ N(0, I)."}, gaussian)

    def products_of_experts(self) -> None:
        """2-3. Complete products of experts: exact ML, full-batch L-BFGS in float64 (conf/experiment/hais_poe_*.yaml); keeps
        ICA's model and basis Φ = W⁻¹ for sparse coding's start and the estimator check."""
        s, seed, train = self.s, self.seed, self.train
        for recipe_name, name, label in (("hais_poe_laplace", "ica", "ICA (complete Laplace POE)"), ("hais_poe_student", "poe-student-t", "Student-t POE (complete)")):
            cfg = self.recipe(recipe_name, seed, f"trainer.epochs={math.ceil(s['poe_iters'] / ITERS_PER_EPOCH)}")
            fit = fit_recipe(cfg, self.splits, dtype=torch.float64)
            final = ExactMaximumLikelihood().loss(fit.model, train.double())
            final.backward()
            grad_norm = math.sqrt(sum(p.grad.square().sum().item() for p in fit.model.parameters()))
            model, student = fit.model.float().requires_grad_(False), name == "poe-student-t"
            self.timers["training"] += fit.seconds
            info = {"optimizer": f"`+experiment={recipe_name}`: torch.optim.LBFGS(lr=1, history_size=20, strong Wolfe line search) on the full training "
                                 f"set in float64 through `pfzoo.training.Trainer`, {ITERS_PER_EPOCH} iterations per epoch until an epoch changes the loss "
                                 f"by ≤ {cfg.trainer.stop_tolerance:g}·|loss| (at most {cfg.trainer.epochs * ITERS_PER_EPOCH})",
                    "initial_loss": fit.records[0]["loss"], "final_loss": final.item(), "iterations": fit.optimizer_state["state"][0]["n_iter"],
                    "final_grad_norm": grad_norm, "converged": fit.stop_reason is not None, "seconds": fit.seconds}
            norms, shapes = model.filters.norm(dim=1).sort().values, model.shape.sort().values
            notes = (f"L-BFGS {info['iterations']} iterations, final |grad| {grad_norm:.1e}" + ("" if info["converged"] else " (iteration limit)")
                     + f"; filter norms {norms[0]:.2f} / {norms[len(norms) // 2]:.2f} / {norms[-1]:.2f} (min/median/max)"
                     + (f"; λ {shapes[0]:.3f} / {shapes[len(shapes) // 2]:.3f} / {shapes[-1]:.3f}" if student else ""))
            self.exact({"name": name, "label": label, "parameters": count_parameters(model), "sizes": "36 experts, complete" + (", λ learned" if student else ""),
                        "train_method": "exact ML, full-batch L-BFGS", "train_seconds": fit.seconds, "notes": notes, "training": info,
                        "description": f"`ProductOfExperts(36, 36, expert={model.expert!r})`: {info['optimizer']}; loss {info['initial_loss']:.3f} → "
                                       f"{info['final_loss']:.4f}"
                                       + ("; λ = ½ + softplus(ρ) (`shape_above_half=True`) keeps Z finite during line searches" if student else "") + "."}, model)
            if name == "ica":
                self.ica_model, self.ica_basis = model, torch.linalg.inv(model.filters.detach().double()).float()  # Φ = W⁻¹: ICA's basis, sparse coding's start

    def sparse_coding(self, num_latent: int, label: str) -> dict:
        """4. Sparse coding: Laplace linear generative model, EM-HMC from ICA's basis (conf/experiment/models_sparse_coding.yaml)."""
        s, seed, subset = self.s, self.seed, self.subset
        start = LinearGenerative.from_tensors(ica_initial_basis(self.ica_basis, num_latent, seed + num_latent), prior="laplace", noise_std=NOISE_STD)
        model, cfg, info, fields, losses = self.fit_em("models_sparse_coding", seed + num_latent, s["em_epochs"], model=start)
        columns = f"{'its ' + str(num_latent) + ' longest columns' if num_latent < DIM else 'all 36 columns'}"
        columns += f", then {num_latent - DIM} columns of 0.01·N(0, 1)" if num_latent > DIM else ""
        row = {"name": "sparse-coding" if num_latent == NUM_LATENT else f"sparse-coding-{num_latent}", "label": label, "parameters": count_parameters(model),
               "sizes": f"L = {num_latent} latents, σ_n = {NOISE_STD}", "train_method": f"EM-HMC + Adam, {info['epochs']} epochs", **fields,
               "description": f"`LinearGenerative(36, {num_latent}, prior='laplace', noise_std={NOISE_STD})`, initial basis the ICA row's Φ = W⁻¹ ({columns}); "
                              f"{info['burn_in_e_steps']} burn-in E-steps (the latents start at prior draws), then `+experiment=models_sparse_coding`: "
                              f"`Trainer(EMHMC(num_hmc_steps=10, step_size=0.05, num_leapfrog=10, target_acceptance=0.8, batch_hmc_steps=2), "
                              f"Adam(lr={cfg.trainer.optimizer.lr}), epochs={info['epochs']}, batch_size=100)`; complete-data loss per epoch {losses}."}
        if info["error"]:
            return self.fail(row, info["error"])
        row["notes"] = (f"E-step acceptance {info['sampler_acceptance'][-1]:.2f} at ε {info['final_step_size']:.3f}; "
                        f"basis column norms {model.basis.norm(dim=0).min().item():.2f}–{model.basis.norm(dim=0).max().item():.2f}")
        return self.finish(row, self.pilot_and_evaluate(row, model, subset, s["hais_particles"], s["hais_steps"], convergence=num_latent == NUM_LATENT))

    def estimator_check(self, name: str, label: str, model, train_method: str, reference_method: str, description: str, exact_fn) -> None:
        """A generative model with a known log-likelihood, evaluated like every generative row (its own pilot, then HAIS) on the
        first ``check_patches`` test patches of the common subset."""
        s, subset = self.s, self.subset
        row = {"name": name, "label": label, "parameters": count_parameters(model), "sizes": f"L = {model.num_latent} latents, σ_n = {NOISE_STD}",
               "train_method": train_method, "train_seconds": 0.0, "description": description}
        patches = subset[: s["check_patches"]]
        evaluation = self.pilot_and_evaluate(row, model.requires_grad_(False), patches, s["check_particles"], s["hais_steps"])
        began = time.perf_counter()
        reference = exact_fn(patches).double().mean().item()
        self.timers["evaluation"] += time.perf_counter() - began
        p = row["pilot"]
        row["check"] = {"patches": patches.shape[0], "particles": s["check_particles"], "num_steps": s["hais_steps"], "step_size": p["step_size"],
                        "schedule": p["schedule"], "stiffness": p["stiffness"], "estimate": evaluation["mean"], "stderr": evaluation["estimator_stderr"],
                        "exact": reference, "reference_method": reference_method, "error": evaluation["mean"] - reference}
        row["notes"] = f"reference on the same {patches.shape[0]} patches: {reference:.3f}; error {row['check']['error']:+.3f}"
        self.finish(row, evaluation)

    def estimator_checks(self) -> None:
        """Generative models with a known log-likelihood, evaluated like the generative rows."""
        seed, train, s = self.seed, self.train, self.s
        ica_model, ica_basis = self.ica_model, self.ica_basis
        # Estimator checks. (a) The Gaussian-prior linear generative model at its exact ML basis: closed-form log-likelihood.
        check_model = LinearGenerative.from_tensors(ml_gaussian_prior_basis(train, NUM_LATENT, seed + 5), prior="gaussian", noise_std=NOISE_STD)
        self.estimator_check(
            "check", f"Gaussian-prior linear generative (L = {NUM_LATENT}), HAIS check", check_model, "exact ML (closed form, probabilistic PCA)",
            "closed-form log-likelihood",
            "`LinearGenerative(36, 72, prior='gaussian', noise_std=0.1)` with Φ = (S − σ_n²I)^½ R, S the training covariance and R a "
            "random 36×72 matrix with orthonormal rows: the exact ML basis (ΦΦᵀ + σ_n²I = S), so this model is the Gaussian row's "
            "distribution written with 72 latents. Its exact log-likelihood checks the per-example HAIS procedure (pilot, then the "
            "chosen settings) that the generative rows use.", check_model.log_prob)
        # (b) The complete Laplace-prior model with ICA's basis: ICA's density blurred by the noise, p(x) = E_n[p_ICA(x − n)].
        self.estimator_check(
            "check-laplace", f"Laplace-prior linear generative with ICA's basis (L = {DIM}), HAIS check",
            LinearGenerative.from_tensors(ica_basis, prior="laplace", noise_std=NOISE_STD), "not trained: the ICA row's basis Φ = W⁻¹",
            f"Monte Carlo over the noise, {s['noise_draws']:,} draws per patch",
            f"`LinearGenerative(36, 36, prior='laplace', noise_std={NOISE_STD})` with the ICA row's Φ = W⁻¹, not trained: x = Φz + n "
            "with Φz distributed as the ICA row's density, so log p(x) = log E_n[p_ICA(x − n)]; the reference value averages "
            f"p_ICA(x − n) over {s['noise_draws']:,} noise draws per patch (a consistent estimate whose Jensen bias is far below the "
            "table's precision). Its difference from the ICA row is what the noise σ_n alone costs a Laplace model.",
            lambda x: noise_convolved_log_prob(ica_model, x, s["noise_draws"], gen(seed + 6)))

    def bilinear(self) -> None:
        """5. The bilinear generative model, EM-HMC with bounded column norms (conf/experiment/models_bilinear.yaml)."""
        s, seed, subset = self.s, self.seed, self.subset
        model, cfg, info, fields, losses = self.fit_em("models_bilinear", seed + 2, s["bilinear_epochs"])
        row = {"name": "bilinear", "label": "Bilinear generative", "parameters": count_parameters(model), **fields,
               "sizes": f"K = {model.num_components} components, {model.num_content} content + {model.num_style} style latents, σ_n = {NOISE_STD}",
               "train_method": f"EM-HMC + Adam, {info['epochs']} epochs",
               "description": f"`BilinearGenerative(36, num_style=8, noise_std={NOISE_STD}, init_std=0.17, max_basis_norm=1.0)` (`+experiment=models_bilinear`: "
                              f"conf/model/bilinear.yaml with the bound its comment recommends for EM); {info['burn_in_e_steps']} burn-in E-steps, then the "
                              f"same EM-HMC Trainer as sparse coding with Adam(lr={cfg.trainer.optimizer.lr}); complete-data loss per epoch {losses}."}
        if info["error"]:
            self.fail(row, info["error"])
        else:
            row["notes"] = f"E-step acceptance {info['sampler_acceptance'][-1]:.2f} at ε {info['final_step_size']:.3f}"
            self.finish(row, self.pilot_and_evaluate(row, model, subset, s["hais_particles"], s["hais_steps"], convergence=True))

    def mcrbm(self) -> None:
        """6. The mcRBM, persistent MPF with Adam (conf/experiment/models_mcrbm.yaml); log Ẑ by HAIS from N(0, I)."""
        s, seed, test = self.s, self.seed, self.test
        model, cfg, info, fields, _ = self.fit_em("models_mcrbm", seed + 4, s["mpf_epochs"])
        row = {"name": "mcrbm", "label": "mcRBM", "parameters": count_parameters(model), **fields, "train_method": f"persistent MPF + Adam, {info['epochs']} epochs",
               "sizes": f"F = {model.num_factors} factors, {model.num_covariance_hidden} covariance + {model.num_mean_hidden} mean hiddens",
               "description": "`MeanCovarianceRBM(36, 72, 36, 36, init_std=0.17, factor_norm=None, normalize_pooling=True)` (conf/model/mcrbm.yaml: "
                              "learned factor lengths; fixed unit lengths gave -43.09 on 2026-11-22); `+experiment=models_mcrbm`: "
                              "`Trainer(MPF(continuous=PersistentMPF(num_hmc_steps=5, step_size=0.05, num_leapfrog=10, target_acceptance=0.8)), "
                              f"Adam(lr={cfg.trainer.optimizer.lr}), epochs={info['epochs']}, batch_size=500)` (conf/trainer/mpf_adam.yaml). Parameter count "
                              "includes the pooling matrix P (constrained ≥ 0, columns of unit L1 norm)."}
        if info["error"]:
            self.fail(row, info["error"])
        else:
            evaluation = self.pilot_and_evaluate(row, model, test, s["logz_chains"], s["logz_steps"], latent=False, convergence=True)
            biases = max(model.covariance_bias.abs().max().item(), model.mean_bias.abs().max().item(), model.visible_bias.abs().max().item())
            row["notes"] = (f"log Ẑ = {evaluation['log_z']:.3f} ± {evaluation['log_z_stderr']:.3f}, ESS {evaluation['ess']:.0f} of {evaluation['chains']}; "
                            f"MPF particle acceptance {info['sampler_acceptance'][-1]:.2f}; largest |bias| {biases:.2f}")
            self.finish(row, evaluation)

    def mpf_products_of_experts(self) -> None:
        """7-10. Products of experts trained the paper's way, persistent MPF with HMC connectivity and Adam
        (conf/experiment/models_poe_*_mpf.yaml): complete, evaluated exactly (against the exact-ML rows: what the training
        route costs), and 2× overcomplete, the paper's size, with a HAIS log Ẑ from N(0, I)."""
        s, seed, test = self.s, self.seed, self.test
        for offset, (recipe_name, expert, expert_label) in enumerate(POE_MPF_RECIPES):
            for num_experts in (DIM, 2 * DIM):
                complete = num_experts == DIM
                model, cfg, info, fields, losses = self.fit_em(recipe_name, seed + 5 + offset, s["poe_mpf_epochs"], f"model.num_experts={num_experts}")
                student = expert == "student-t"
                row = {"name": f"poe-{expert}-{'' if complete else '2x-'}mpf", "parameters": count_parameters(model), **fields,
                       "label": f"{expert_label} POE ({'complete' if complete else '2× overcomplete'}), MPF",
                       "sizes": f"{num_experts} experts, {'complete' if complete else '2× overcomplete'}" + (", λ learned" if student else ""),
                       "train_method": f"persistent MPF + Adam, {info['epochs']} epochs",
                       "description": f"`ProductOfExperts(36, {num_experts}, expert={model.expert!r}"
                                      + (", shape_above_half=True" if student else "") + f")`; `+experiment={recipe_name} model.num_experts={num_experts}`: "
                                      "`Trainer(MPF(continuous=PersistentMPF(num_hmc_steps=5, step_size=0.05, num_leapfrog=10, target_acceptance=0.8)), "
                                      f"Adam(lr={cfg.trainer.optimizer.lr}), epochs={info['epochs']}, batch_size={cfg.trainer.batch_size})` "
                                      f"(conf/trainer/mpf_adam.yaml); MPF loss per epoch {losses}."}
                if info["error"]:
                    self.fail(row, info["error"])
                    continue
                norms = model.filters.norm(dim=1).sort().values
                row["notes"] = (f"MPF particle acceptance {info['sampler_acceptance'][-1]:.2f}; filter norms {norms[0]:.2f} / {norms[len(norms) // 2]:.2f} / "
                                f"{norms[-1]:.2f} (min/median/max)")
                if student:
                    shapes = model.shape.sort().values
                    row["notes"] += f"; λ {shapes[0]:.3f} / {shapes[len(shapes) // 2]:.3f} / {shapes[-1]:.3f}"
                if complete:
                    self.exact(row, model)
                    continue
                evaluation = self.pilot_and_evaluate(row, model, test, s["logz_chains"], s["logz_steps"], latent=False, convergence=True)
                row["notes"] = f"log Ẑ = {evaluation['log_z']:.3f} ± {evaluation['log_z_stderr']:.3f}, ESS {evaluation['ess']:.0f} of {evaluation['chains']}; " + row["notes"]
                self.finish(row, evaluation)

    def size_sweep(self, sc_row: dict) -> tuple[list[dict], dict]:
        """Fig. 5: sparse coding at every L of :data:`SWEEP_SIZES` (``sc_row``: the table's, reused at L = NUM_LATENT); the
        entries and the exact references (label → the Gaussian's and ICA's means on the same patches). The extra models
        are not table rows."""
        sweep, began = [], time.perf_counter()
        for num_latent in SWEEP_SIZES:
            r = sc_row if num_latent == NUM_LATENT and not sc_row.get("failed") else self.sparse_coding(num_latent, f"Sparse coding, L = {num_latent}")
            if r is not sc_row:
                self.rows.remove(r)
            entry = {"num_latent": num_latent, "parameters": r["parameters"], "train_seconds": r["train_seconds"]}
            if r.get("failed"):
                entry["failed"] = r["failed"]
            else:
                e, p = r["evaluation"], r["pilot"]
                entry.update({"mean": e["mean"], "stderr": math.hypot(e["estimator_stderr"], e["data_stderr"]), "eval_seconds": e["seconds"],
                              "step_size": p["step_size"], "schedule": p["schedule"], "stiffness": p["stiffness"]})
            sweep.append(entry)
            logger.info("sweep L=%d: %.3f", num_latent, entry.get("mean", float("nan")))
        self.sweep_seconds = time.perf_counter() - began
        return sweep, {r["label"]: r["subset_mean"] for r in self.rows if r["name"] in ("gaussian", "ica") and not r.get("failed")}
