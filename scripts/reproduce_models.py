"""Reproduce the model comparison of Sohl-Dickstein & Culpepper (2011), Table 1: test log-likelihood of six models of
natural image patches, each with its size, training method and the estimator that produced the number.

    python scripts/reproduce_models.py                       # full run (~35 min, one thread): reports/models/{README.md,results.json}
    python scripts/reproduce_models.py --quick               # smoke run (~3 min): reports/models/quick/
    python scripts/reproduce_models.py --sweep               # also Fig. 5: sparse coding vs number of latents → size_sweep.png
    python scripts/reproduce_models.py --source vanhateren   # the paper's images (<data-root>/natural_images): reports/models/vanhateren/

Data: whitened 36-dimensional natural image patches (:func:`pfzoo.data.patches`: 16×16 patches, log, mean removed, top
36 principal components, whitened), from scikit-learn's two embedded photos (default) or the van Hateren images.

Models, training and evaluation (every number in the report is measured by the run itself):

1. Gaussian: :meth:`Gaussian.fit` (exact ML); exact log-likelihood.
2. Complete Laplace product of experts (= ICA): exact ML with full-batch L-BFGS on
   :class:`pfzoo.training.ExactMaximumLikelihood`; exact log-likelihood (closed-form log Z).
3. Complete Student-t product of experts: the same, λ learned (kept > ½); exact log-likelihood.
4. Linear generative model with a Laplace prior (sparse coding), L = 72 latents (2× overcomplete), σ_n = 0.1, started
   from ICA's basis W⁻¹ plus 36 small random columns: EM with persistent HMC E-steps (:class:`pfzoo.training.EMHMC`,
   Adam at lr 3·10⁻⁴: at 3·10⁻³ the noisy Monte-Carlo gradient random-walks the basis and the likelihood falls) through
   :class:`pfzoo.training.Trainer`; per-example HAIS over the latents on a random subset of test patches, a stochastic
   lower bound on the log-likelihood.
5. Bilinear generative model (:class:`BilinearGenerative`, conf/model/bilinear.yaml): EM-HMC; per-example HAIS
   (reflecting at the style latents' bound d ≥ 0).
6. mcRBM (:class:`MeanCovarianceRBM`, conf/model/mcrbm.yaml): persistent MPF with Adam (conf/trainer/mpf_adam.yaml);
   HAIS estimate of log Z from N(0, I), then mean(−E(x)) − log Ẑ: log Ẑ is a stochastic lower bound on log Z, so the
   log-likelihood is biased upward.

Plus two in-run checks of the per-example estimator, each evaluated by the same procedure (its own pilot, then HAIS)
next to a known value: the Gaussian-prior linear generative model with the same L and σ_n at its exact
maximum-likelihood basis (closed form), and the complete Laplace-prior model with ICA's basis, whose density is ICA's
blurred by the noise (Monte Carlo over the noise). The second also measures what σ_n alone costs against the ICA row.

HAIS step size and schedule are chosen per model by a pilot on training patches: every ε in a grid, for the generative
models also steps that shrink with β as the posterior stiffens (``HAIS(..., stiffness=s)``), and two β schedules (linear;
geometric from β = 10⁻³), keeping the setting with the largest pilot estimate. Both per-example log p̂(x) and
log Ẑ are stochastic lower bounds, so the largest one is the tightest; the pilot's acceptance rates are reported.
"""

from __future__ import annotations

import os
import argparse
import copy
import datetime
import json
import logging
import math
import shlex
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import torch

import pfzoo
from pfzoo.logmath import log_mean_exp
from pfzoo.estimators import HAIS
from pfzoo.kernels import HMCKernel
from pfzoo.models import BilinearGenerative, Gaussian, LinearGenerative, MeanCovarianceRBM
from pfzoo.training import EMHMC, MPF, PersistentMPF, Trainer

from reproduce_hais import describe_poe, load_patch_splits, train_poe  # noqa: E402
from pfzoo.data.root import resolve_data_root
from pfzoo.reporting import load_average, machine_description

REPO = Path(__file__).resolve().parents[1]


def default_data_root() -> Path:
    """``$PFZOO_DATA``, else ``<repo>/../shared/data`` (where the reference data sit beside a checkout)."""
    return resolve_data_root(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")

DIM = 36
NOISE_STD = 0.1  # σ_n of the linear and bilinear generative models (the paper's)
NUM_LATENT = 72  # sparse coding: 2× overcomplete
SWEEP_SIZES = (18, 36, 72, 108)  # --sweep: numbers of latents L of the Laplace linear generative model (Fig. 5)
STEP_GRID = (0.2, 0.1, 0.05, 0.025)  # candidate HAIS leapfrog steps ε (0.2 is the paper's), one ε at every β
SCALED_STEP_GRID = (1.0, 0.5, 0.2)  # candidate ε at β = 0 when the step shrinks as ε / √(1 + β s) (HAIS stiffness s > 0)
# Stiffness candidates s for the generative models. s = λ_max(ΦᵀΦ)/σ_n² (sparse coding: ≈ 75) would keep the stiffest
# direction's stability margin, but a Laplace prior's kinks also limit ε at small β, so smaller s with a small ε can win.
STIFFNESS_GRID = (3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)
GEOMETRIC_START = 1e-3  # the geometric schedule: β_0 = 0, then K values log-spaced from this to 1
SEED_STRIDE = 1000  # estimate r uses generator seed seed + 1000·r
SUBSET_SEED_OFFSET = 7  # the common test subset: randperm seeded with seed + 7
PILOT_SEED_OFFSET = 11  # the pilot's training patches: randperm seeded with seed + 11
GROUPS = {  # the paper's qualitative ordering: gaussian < laplace < richer
    "gaussian": ("gaussian",),
    "laplace": ("ica", "sparse-coding"),
    "richer": ("bilinear", "poe-student-t", "mcrbm"),
}
SETTINGS = {
    "full": {
        "num_train": 20000, "num_test": 5000, "poe_iters": 2000,
        "em_epochs": 80, "em_burn_in": 20, "sparse_lr": 0.0003, "bilinear_lr": 0.003, "bilinear_epochs": 80, "mpf_epochs": 100,
        "hais_patches": 100, "hais_particles": 200, "hais_steps": 12000,
        "check_patches": 50, "check_particles": 100, "noise_draws": 200000,
        "logz_chains": 200, "logz_steps": 100000,
        "pilot_patches": 10, "pilot_particles": 20, "pilot_steps": 3000, "pilot_chains": 100, "pilot_logz_steps": 10000,
    },
    "quick": {
        "num_train": 5000, "num_test": 1000, "poe_iters": 300,
        "em_epochs": 10, "em_burn_in": 5, "sparse_lr": 0.0003, "bilinear_lr": 0.003, "bilinear_epochs": 10, "mpf_epochs": 5,
        "hais_patches": 20, "hais_particles": 50, "hais_steps": 2000,
        "check_patches": 10, "check_particles": 50, "noise_draws": 20000,
        "logz_chains": 100, "logz_steps": 5000,
        "pilot_patches": 5, "pilot_particles": 10, "pilot_steps": 1000, "pilot_chains": 50, "pilot_logz_steps": 2000,
    },
}
OTHER_SOURCE = {
    "embedded": "the same comparison on the paper's van Hateren images is `python scripts/reproduce_models.py --source vanhateren`, "
    "written to `vanhateren/` below this folder.",
    "vanhateren": "the same comparison on scikit-learn's embedded photos is `python scripts/reproduce_models.py` (the default), "
    "written to the parent folder of this one.",
}


# ---- helpers ----------------------------------------------------------------------------------


def require_matplotlib():
    """The pyplot module with the Agg backend, or exit with a message if matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        sys.exit("reproduce_models.py: --sweep draws a plot and needs matplotlib (`pip install matplotlib`).")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def geometric_betas(num_steps: int) -> torch.Tensor:
    """``[0, β_1 … β_K]`` with β_1 = GEOMETRIC_START, β_K = 1, log-spaced: K + 1 values."""
    return torch.cat([torch.zeros(1, dtype=torch.float64), torch.logspace(math.log10(GEOMETRIC_START), 0.0, num_steps, dtype=torch.float64)])


def schedule_of(name: str, num_steps: int):
    return geometric_betas(num_steps) if name == "geometric" else name


SCHEDULE_TEXT = {"linear": "linear β", "geometric": f"geometric β from {GEOMETRIC_START:g}"}


class RecordingHMC(HMCKernel):
    """HAIS's kernel, unchanged, that also keeps the mean acceptance probability of every transition (in order), also
    those of the kernels it hands out for each β (:meth:`HMCKernel.at` copies share the list)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.acceptance: list[float] = []

    def step(self, state, current, evaluate, *, generator=None):
        state, evaluation, info = super().step(state, current, evaluate, generator=generator)
        self.acceptance.append(info.accept_prob.mean().item())
        return state, evaluation, info


def hais(model, num_chains: int, num_steps: int, step_size: float, schedule: str, stiffness: float = 0.0) -> HAIS:
    """``HAIS(num_chains, K, ε, schedule=..., stiffness=...)`` whose kernel records acceptance (same kernel, same lower bounds)."""
    lower = getattr(model, "latent_lower", None)
    estimator = HAIS(num_chains, None if schedule == "geometric" else num_steps, step_size,
                     schedule=schedule_of(schedule, num_steps), lower=lower, stiffness=stiffness)
    estimator.kernel = RecordingHMC(step_size, lower=lower, stiffness=stiffness)
    return estimator


def step_text(step_size: float, stiffness: float) -> str:
    return f"ε = {step_size:g}" if stiffness == 0 else f"ε = {step_size:g} / √(1 + {stiffness:.0f} β)"


def acceptance_summary(acceptance: list[float], num_steps: int) -> dict:
    """Mean acceptance over all transitions and over the last 10% of distributions (the stiffest), pooled over chunks."""
    per_chunk = max(num_steps - 1, 1)
    values = torch.tensor(acceptance, dtype=torch.float64).view(-1, per_chunk)
    tail = max(per_chunk // 10, 1)
    return {"acceptance_mean": values.mean().item(), "acceptance_last_10pct": values[:, -tail:].mean().item()}


def count_parameters(model) -> int:
    """Free parameters: every entry, except the Gaussian's precision Cholesky factor, of which only the lower triangle counts."""
    if isinstance(model, Gaussian):
        m = model.num_visible
        return m + m * (m + 1) // 2
    return sum(p.numel() for p in model.parameters())


class ObjectiveLog(logging.Handler):
    """Collects the (acceptance, step size) that EMHMC / PersistentMPF log at every E-step / refresh."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.values: list[tuple[float, float]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.args, tuple) and len(record.args) >= 2:
            self.values.append((float(record.args[-2]), float(record.args[-1])))


def run_trainer(model, objective, optimizer, splits, epochs: int, batch_size: int, seed: int) -> dict:
    """``Trainer(objective, optimizer, epochs, batch_size).fit(model, splits)`` in a scratch run_dir; returns a summary."""
    log = ObjectiveLog()
    loggers = [logging.getLogger(name) for name in ("pfzoo.training.em_hmc", "pfzoo.training.persistent_mpf")]
    for lg in loggers:
        lg.addHandler(log)
        lg.setLevel(logging.INFO)
    began = time.perf_counter()
    error = None
    losses: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as run_dir:
            trainer = Trainer(objective, optimizer, run_dir=run_dir, epochs=epochs, batch_size=batch_size,
                              checkpoint_every=epochs, progress=False, seed=seed)
            try:
                trainer.fit(model, splits)
            except FloatingPointError as exc:  # NaN / inf loss: report, do not hide
                error = str(exc)
            if trainer.metrics_path.is_file():
                losses = [json.loads(line)["loss"] for line in trainer.metrics_path.read_text().splitlines() if line.strip()]
    finally:
        for lg in loggers:
            lg.removeHandler(log)
    seconds = time.perf_counter() - began
    finite = all(torch.isfinite(p).all().item() for p in model.parameters())
    return {
        "epochs": epochs,
        "batch_size": batch_size,
        "losses": losses,
        "final_loss": losses[-1] if losses else None,
        "sampler_acceptance": [a for a, _ in log.values],
        "sampler_step_size": [s for _, s in log.values],
        "error": error if error or finite else "parameters are NaN or infinite after training",
        "seconds": seconds,
    }


# ---- models -----------------------------------------------------------------------------------


def ml_gaussian_prior_basis(train: torch.Tensor, num_latent: int, seed: int) -> torch.Tensor:
    """The maximum-likelihood Φ ``[M, L]`` of the Gaussian-prior linear generative model with σ_n fixed (probabilistic PCA):
    ``ΦΦᵀ = S − σ_n² I`` with S the training covariance (eigenvalues below σ_n² clipped), Φ = (S − σ_n² I)^½ R with R a
    random ``[M, L]`` matrix with orthonormal rows (any such R is optimal; L ≥ M)."""
    data = train.double()
    covariance = data.T @ data / data.shape[0]
    values, vectors = torch.linalg.eigh(covariance)
    root = vectors @ torch.diag((values - NOISE_STD**2).clamp_min(0).sqrt()) @ vectors.T
    q, r = torch.linalg.qr(torch.randn(num_latent, DIM, generator=generator(seed), dtype=torch.float64))
    rotation = (q * r.diagonal().sign()).T  # [M, L], orthonormal rows
    return (root @ rotation).float()


def ica_initial_basis(ica_basis: torch.Tensor, num_latent: int, seed: int) -> torch.Tensor:
    """``[M, L]``: the ICA basis's min(L, M) longest columns, then columns of 0.01·N(0, 1) up to L.

    With σ_n → 0 and L = M, a Laplace linear generative model with Φ = W⁻¹ is ICA; EM from a random basis stays far below
    that (−43 against ICA's −32 in the 2026-11-22 report), and the extra columns start small so they only add."""
    order = ica_basis.norm(dim=0).argsort(descending=True)[: min(num_latent, ica_basis.shape[1])]
    extra = 0.01 * torch.randn(ica_basis.shape[0], num_latent - order.numel(), generator=generator(seed), dtype=ica_basis.dtype)
    return torch.cat([ica_basis[:, order], extra], dim=1)


def train_linear(splits, num_latent: int, ica_basis: torch.Tensor, s: dict, seed: int) -> tuple[LinearGenerative, dict]:
    """Laplace-prior linear generative model from :func:`ica_initial_basis`: burn-in E-steps, then EM-HMC epochs with Adam."""
    model = LinearGenerative.from_tensors(ica_initial_basis(ica_basis, num_latent, seed), prior="laplace", noise_std=NOISE_STD)
    return model, train_em(model, splits, s["em_epochs"], s["sparse_lr"], s, seed)


def train_em(model, splits, epochs: int, lr: float, s: dict, seed: int) -> dict:
    objective = EMHMC(num_hmc_steps=10, step_size=0.05, num_leapfrog=10, target_acceptance=0.8, batch_hmc_steps=2)
    began = time.perf_counter()
    with torch.no_grad():  # burn-in: the latents start at prior draws; move them to the initial posterior before any M-step
        burn = generator(seed + 3)
        for _ in range(s["em_burn_in"]):
            objective.prepare(model, splits.train, generator=burn)
    burn_seconds = time.perf_counter() - began
    info = run_trainer(model, objective, partial(torch.optim.Adam, lr=lr), splits, epochs, 100, seed)
    info["burn_in_e_steps"] = s["em_burn_in"]
    info["seconds"] += burn_seconds
    info["final_step_size"] = objective.step_size.item()
    return info


# ---- evaluation -------------------------------------------------------------------------------


@torch.no_grad()
def noise_convolved_log_prob(model, x: torch.Tensor, noise_std: float, draws: int, gen: torch.Generator) -> torch.Tensor:
    """``log E_n[p(x − n)]``, ``n ~ N(0, noise_std² I)``, for ``x [B, D]`` → ``[B]``: the log density of ``x + n`` under
    ``model``'s density blurred by Gaussian noise, by simple Monte Carlo over ``draws`` noise vectors per row (float64)."""
    reference = copy.deepcopy(model).double()
    values = [log_mean_exp(reference.log_prob(row - noise_std * torch.randn(draws, x.shape[1], generator=gen, dtype=torch.float64)), dim=0)
              for row in x.double()]
    return torch.stack(values)


def pilot(model, kind: str, data: torch.Tensor, s: dict, seed: int, stiffness_grid: tuple[float, ...] = ()) -> dict:
    """Try every (ε, schedule, stiffness) on a small problem; keep the largest estimate (all are stochastic lower bounds).

    ``kind="latent"``: per-example log p̂(x) on ``data`` (training patches); ``kind="log_z"``: log Ẑ of the model.
    Stiffness 0 (one ε everywhere) runs the ε of STEP_GRID; each s in ``stiffness_grid`` the ε of SCALED_STEP_GRID.
    """
    trials = []
    index = 0
    candidates = [(step_size, 0.0) for step_size in STEP_GRID] + [(step_size, float(k)) for k in stiffness_grid for step_size in SCALED_STEP_GRID]
    for schedule in ("linear", "geometric"):
        for step_size, stiffness in candidates:
            if kind == "latent":
                estimator = hais(model, s["pilot_particles"], s["pilot_steps"], step_size, schedule, stiffness)
                began = time.perf_counter()
                value = estimator.log_likelihood(model, data, generator=generator(seed + index))
                bound, stderr = value.mean, value.stderr
            else:
                estimator = hais(model, s["pilot_chains"], s["pilot_logz_steps"], step_size, schedule, stiffness)
                began = time.perf_counter()
                value = estimator(model, generator=generator(seed + index))
                bound, stderr = value.log_z, value.stderr
            index += 1
            trials.append({"schedule": schedule, "step_size": step_size, "stiffness": stiffness, "bound": bound, "stderr": stderr,
                           "seconds": time.perf_counter() - began,
                           **acceptance_summary(estimator.kernel.acceptance, estimator.num_steps)})
    best = max(trials, key=lambda t: t["bound"])
    return {"trials": trials, "step_size": best["step_size"], "schedule": best["schedule"], "stiffness": best["stiffness"],
            "what": "mean per-example log p̂(x)" if kind == "latent" else "log Ẑ",
            "num_steps": s["pilot_steps"] if kind == "latent" else s["pilot_logz_steps"],
            "chains": s["pilot_particles"] if kind == "latent" else s["pilot_chains"],
            "patches": data.shape[0] if kind == "latent" else None}


def evaluate_exact(model, test: torch.Tensor) -> dict:
    began = time.perf_counter()
    with torch.no_grad():
        per_example = model.log_prob(test).double()
    return {"per_example": per_example, "mean": per_example.mean().item(), "estimator_stderr": 0.0,
            "data_stderr": (per_example.std() / math.sqrt(len(per_example))).item(), "kind": "exact",
            "seconds": time.perf_counter() - began, "estimator": "exact (closed form)", "test_patches": len(per_example)}


def evaluate_latent(model, subset: torch.Tensor, particles: int, steps: int, chosen: dict, seed: int) -> dict:
    estimator = hais(model, particles, steps, chosen["step_size"], chosen["schedule"], chosen["stiffness"])
    began = time.perf_counter()
    estimate = estimator.log_likelihood(model, subset, generator=generator(seed))
    seconds = time.perf_counter() - began
    return {"per_example": estimate.per_example, "mean": estimate.mean, "estimator_stderr": estimate.stderr,
            "data_stderr": estimate.data_stderr, "kind": estimate.kind.value, "seconds": seconds,
            "estimator": f"per-example HAIS, {step_text(chosen['step_size'], chosen['stiffness'])}, {SCHEDULE_TEXT[chosen['schedule']]}",
            "num_steps": steps, "particles": particles, "test_patches": subset.shape[0],
            **acceptance_summary(estimator.kernel.acceptance, estimator.num_steps)}


def evaluate_energy_model(model, test: torch.Tensor, train: torch.Tensor, chains: int, steps: int, chosen: dict, seed: int) -> dict:
    estimator = hais(model, chains, steps, chosen["step_size"], chosen["schedule"], chosen["stiffness"])
    began = time.perf_counter()
    estimate = estimator.log_likelihood(model, test, base_data=train, generator=generator(seed))
    seconds = time.perf_counter() - began
    return {"per_example": estimate.per_example, "mean": estimate.mean, "estimator_stderr": estimate.stderr,
            "data_stderr": estimate.data_stderr, "kind": estimate.kind.value, "seconds": seconds,
            "estimator": f"HAIS log Z from N(0, I), {step_text(chosen['step_size'], chosen['stiffness'])}, {SCHEDULE_TEXT[chosen['schedule']]}",
            "num_steps": steps, "chains": chains, "test_patches": test.shape[0],
            "log_z": estimate.partition.log_z, "log_z_stderr": estimate.partition.stderr, "ess": estimate.partition.ess,
            **acceptance_summary(estimator.kernel.acceptance, estimator.num_steps)}


def paired(a: torch.Tensor, b: torch.Tensor, extra_variance: float = 0.0) -> tuple[float, float]:
    """Mean and stderr of ``a − b`` over the same patches (plus ``extra_variance`` for a shared error such as log Ẑ's)."""
    diff = a - b
    return diff.mean().item(), math.sqrt(diff.var().item() / len(diff) + extra_variance)


# ---- outputs ----------------------------------------------------------------------------------


def fmt_seconds(x: float | None) -> str:
    return "—" if x is None else f"{x:.0f}" if x >= 10 else f"{x:.1f}"


def ordering(rows: list[dict]) -> dict:
    """Paired differences on the common test subset for every (lower group, higher group) pair of GROUPS."""
    by_name = {r["name"]: r for r in rows if r.get("subset_per_example") is not None}
    pairs = []
    for low_group, high_group in (("gaussian", "laplace"), ("laplace", "richer")):
        for low in GROUPS[low_group]:
            for high in GROUPS[high_group]:
                if low not in by_name or high not in by_name:
                    continue
                a, b = by_name[high], by_name[low]
                extra = a.get("shared_stderr", 0.0) ** 2 + b.get("shared_stderr", 0.0) ** 2
                diff, stderr = paired(torch.tensor(a["subset_per_example"]), torch.tensor(b["subset_per_example"]), extra)
                pairs.append({"higher": high, "lower": low, "difference": diff, "stderr": stderr,
                              "holds": diff > 0, "significant": diff > 2 * stderr})
    return {"pairs": pairs, "holds": sum(p["holds"] for p in pairs), "significant": sum(p["significant"] for p in pairs),
            "total": len(pairs)}


def write_readme(path: Path, meta: dict, rows: list[dict], order: dict, sweep: list[dict] | None) -> None:
    labels = {r["name"]: r["label"] for r in rows}
    lines = [
        "# Model comparison on natural image patches (Sohl-Dickstein & Culpepper 2011, Table 1)",
        "",
        f"Measured on {meta['date']} with pfzoo {meta['pfzoo_version']}, torch {meta['torch_version']}"
        + (" — **quick smoke run** (`--quick`): small data, few epochs, short annealing; the numbers are not the comparison" if meta["quick"] else "")
        + ". Generated by `scripts/reproduce_models.py`; raw numbers (including per-patch values on the common subset) in `results.json`.",
        "",
        "## Table",
        "",
        "Average log-likelihood of test patches (nats per 36-dimensional whitened patch). ± is the total standard error: "
        "the estimator's and the test-sampling one (sd over patches / √patches) in quadrature; both are listed in "
        "[Details](#details). Exact rows use all test patches; HAIS rows of generative models use the random subset named in "
        "the evaluation column. \"same patches\" is every model's mean on the common subset of "
        f"{meta['subset_size']} test patches that the per-example HAIS rows use, so the rows can be compared pairwise.",
        "",
        "| model | parameters | train method | evaluation (estimator, N, particles/chains, test patches) | test log-likelihood ± stderr | same patches | kind | train s | eval s |",
        "|---|---|---|---|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        if r.get("failed"):
            lines.append(f"| {r['label']} | {r['parameters']:,} ({r['sizes']}) | {r['train_method']} | — | **failed**: {r['failed']} | — | — | "
                         f"{fmt_seconds(r['train_seconds'])} | — |")
            continue
        e = r["evaluation"]
        what = e["estimator"]
        if "num_steps" in e:
            what += f", N = {e['num_steps']:,}"
        if "particles" in e:
            what += f", {e['particles']} particles per patch"
        if "chains" in e:
            what += f", {e['chains']} chains"
        what += f", {e['test_patches']:,} test patches"
        total = math.hypot(e["estimator_stderr"], e["data_stderr"])
        lines.append(
            f"| {r['label']} | {r['parameters']:,} ({r['sizes']}) | {r['train_method']} | {what} | {e['mean']:.2f} ± {total:.2f} | "
            f"{'—' if r['subset_mean'] is None else format(r['subset_mean'], '.2f')} | {e['kind']} | {fmt_seconds(r['train_seconds'])} | {fmt_seconds(e['seconds'])} |"
        )
    lines += ["", "## What to look for", ""]
    lines.append(
        "The paper's qualitative ordering: Gaussian < Laplace models (ICA / complete Laplace POE, sparse coding) < the richer models "
        "(bilinear, Student-t POE, mcRBM). Checked here with paired differences on the common test subset (higher − lower, "
        "± stderr of the paired mean; the mcRBM's adds its log Ẑ stderr):"
    )
    lines.append("")
    for p in order["pairs"]:
        mark = "holds" if p["holds"] else "**violated**"
        sig = " (by more than 2 stderr)" if abs(p["difference"]) > 2 * p["stderr"] else " (within 2 stderr)"
        lines.append(f"- {labels[p['higher']]} − {labels[p['lower']]}: {p['difference']:+.2f} ± {p['stderr']:.2f}: {mark}{sig}")
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
    by_name = {r["name"]: r for r in rows}
    for p in order["pairs"]:
        if p["holds"]:
            continue
        high, low = by_name[p["higher"]], by_name[p["lower"]]
        if high["evaluation"]["kind"] == "exact" or high["evaluation"]["kind"].startswith("unbiased Z"):
            why = (f"{high['label']}'s value is {'exact' if high['evaluation']['kind'] == 'exact' else 'biased upward'} and "
                   f"{low['label']}'s is {'exact' if low['evaluation']['kind'] == 'exact' else 'a lower bound'}, so the estimators' "
                   "biases cannot explain this violation: it is the model (or its training), not the evaluation")
        else:
            why = (f"{high['label']}'s value is a stochastic lower bound, so part of this gap may be the estimator's looseness "
                   "(see the estimator check for its size on a model with a known answer)")
        if abs(p["difference"]) <= 2 * p["stderr"]:
            why += "; the difference is within 2 stderr, so the violation itself is not significant"
        lines.append(f"- {labels[p['higher']]} < {labels[p['lower']]}: {why}.")
    lines.append("")
    lines.append("Reading the kinds: an exact value is exact; per-example HAIS is a stochastic *lower* bound (the true value is "
                 "likely higher); the mcRBM's value uses log Ẑ, a stochastic lower bound on log Z, so it is biased *upward*. "
                 "A richer model beating a Laplace one is therefore robust for the bilinear model (a lower bound above an exact "
                 "value) and weaker for the mcRBM.")
    checks = [r for r in rows if r["name"].startswith("check") and not r.get("failed")]
    if checks:
        lines += ["", "## Estimator checks", "",
                  "Generative models with a known log-likelihood, each evaluated like every generative row (its own pilot on the "
                  "training patches, then HAIS) on the first patches of the common subset:", ""]
    for check in checks:
        c = check["check"]
        tight = abs(c["error"]) <= max(3 * c["stderr"], 0.1)
        lines.append(
            f"- {check['label']} (reference: {c['reference_method']}): its pilot chose {step_text(c['step_size'], c.get('stiffness', 0.0))}, "
            f"{SCHEDULE_TEXT[c['schedule']]}; N = {c['num_steps']:,}, {c['particles']} particles, {c['patches']} patches: "
            f"HAIS {c['estimate']:.3f} ± {c['stderr']:.3f} vs reference {c['exact']:.3f}, error {c['error']:+.3f} "
            f"({c['error'] / c['stderr'] if c['stderr'] > 0 else float('nan'):+.1f} stderr): "
            + ("the procedure recovers the reference on this model." if tight
               else "the bound is not tight on this model, so the generative rows evaluated the same way may be underestimated too "
                    "(by how much depends on each model's posterior)."))
    laplace = next((r for r in checks if r["name"] == "check-laplace"), None)
    ica = next((r for r in rows if r["name"] == "ica" and not r.get("failed")), None)
    if laplace is not None and ica is not None:
        c = laplace["check"]
        ica_same = sum(ica["subset_per_example"][: c["patches"]]) / c["patches"]
        lines += ["", f"Blurring ICA's density by the noise σ_n = {NOISE_STD} changes its log-likelihood on these patches by "
                      f"{c['exact'] - ica_same:+.2f} nats (ICA exact {ica_same:.3f}, blurred {c['exact']:.3f}): what the noise alone "
                      "does to the sparse-coding and bilinear models, which carry it, against ICA, the noiseless limit."]
    trends = []
    for r in rows:
        losses = (r.get("training") or {}).get("losses") or []
        if r["train_method"].startswith("EM") and len(losses) > 1 and losses[-1] > losses[0]:
            trends.append(f"- {r['label']}: the EM complete-data loss mean_n −log p(x_n, z_n) rose from {losses[0]:.2f} (epoch 1) to "
                          f"{losses[-1]:.2f} (epoch {len(losses)}), lowest {min(losses):.2f}. With z_n a posterior sample this is "
                          "−log p(x) plus the posterior's entropy on average, so a rise is not by itself a falling likelihood, but it "
                          "is no evidence of progress either; the HAIS row is the measure of the trained model.")
    if trends:
        lines += ["", "## Training notes", "", *trends]
    lines += ["", "## Details", "", "| model | estimator stderr | test-sampling stderr | HAIS acceptance (all / last 10% of β) | notes |",
              "|---|---:|---:|---|---|"]
    for r in rows:
        if r.get("failed"):
            continue
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
    for r in rows:
        p = r.get("pilot")
        if not p:
            continue
        size = f"{p['what']}, N = {p['num_steps']:,}, {p['chains']} " + (f"particles × {p['patches']} patches" if p["patches"] else "chains")
        for t in p["trials"]:
            key = lambda x: (x["schedule"], x["step_size"], x.get("stiffness", 0.0))  # noqa: E731
            chosen = "**yes**" if key(t) == key(p) else ""
            lines.append(f"| {r['label']} | {size} | {t['schedule']} | {step_text(t['step_size'], t.get('stiffness', 0.0))} | {t['bound']:.3f} ± {t['stderr']:.3f} | "
                         f"{t['acceptance_mean']:.2f} / {t['acceptance_last_10pct']:.2f} | {chosen} |")
    if sweep is not None:
        lines += ["", "## Size sweep (Fig. 5)", "",
                  "Laplace-prior linear generative model against its number of latents L, each trained and evaluated like the "
                  "sparse-coding row (same epochs, same HAIS settings except the per-model pilot choice, same test subset).", "",
                  "| L | parameters | test log-likelihood ± stderr | ε | schedule | train s | eval s |", "|---:|---:|---:|---|---|---:|---:|"]
        for p in sweep:
            if p.get("failed"):
                lines.append(f"| {p['num_latent']} | {p['parameters']:,} | failed: {p['failed']} | | | | |")
                continue
            lines.append(f"| {p['num_latent']} | {p['parameters']:,} | {p['mean']:.2f} ± {p['stderr']:.2f} | {step_text(p['step_size'], p.get('stiffness', 0.0))} | "
                         f"{p['schedule']} | {fmt_seconds(p['train_seconds'])} | {fmt_seconds(p['eval_seconds'])} |")
        lines += ["", "![log-likelihood vs number of latents](size_sweep.png)"]
    lines += ["", "## Setup", "", f"- **Data**: {meta['data']}", f"- **Data check**: {meta['data_check']}"]
    for r in rows:
        lines.append(f"- **{r['label']}**: {r['description']}")
    lines += [f"- **Other image source**: {OTHER_SOURCE[meta['source']]}", "", "## How it was measured", "", "```", meta["command"], "```", "",
              f"- Budget ({'quick' if meta['quick'] else 'full'} settings): {budget_text(meta['settings'])}",
              f"- All settings: `{json.dumps(meta['settings'])}`",
              f"- Machine: {meta['machine']}; `torch.get_num_threads() = {meta['torch_threads']}`.",
              f"- Load average (1/5/15 min) at start and end: {meta['load_average']['start']} → {meta['load_average']['end']}; "
              "wall times are indicative only.",
              f"- Total runtime {meta['total_seconds']:.0f} s ({meta['total_seconds'] / 60:.1f} min): data {meta['data_seconds']:.1f} s, "
              f"training {meta['training_seconds']:.0f} s, pilots {meta['pilot_seconds']:.0f} s, evaluation {meta['evaluation_seconds']:.0f} s"
              + (f", sweep {meta['sweep_seconds']:.0f} s" if meta.get("sweep_seconds") else "") + ".", ""]
    if meta.get("notes"):
        lines += ["## Notes", "", *meta["notes"], ""]
    path.write_text("\n".join(lines))


def budget_text(s: dict) -> str:
    return (f"{s['num_train']:,} training / {s['num_test']:,} test patches; POE L-BFGS ≤ {s['poe_iters']:,} iterations; "
            f"EM-HMC {s['em_burn_in']} burn-in E-steps + {s['em_epochs']} epochs (sparse coding) / {s['bilinear_epochs']} epochs (bilinear); "
            f"mcRBM {s['mpf_epochs']} MPF epochs; per-example HAIS N = {s['hais_steps']:,} with {s['hais_particles']} particles on "
            f"{s['hais_patches']} test patches (check: {s['check_particles']} particles on {s['check_patches']}); mcRBM log Z: "
            f"{s['logz_chains']} chains, N = {s['logz_steps']:,}; pilots: N = {s['pilot_steps']:,}, {s['pilot_particles']} particles × "
            f"{s['pilot_patches']} training patches (log Z: {s['pilot_chains']} chains, N = {s['pilot_logz_steps']:,}).")


def plot_sweep(plt, path: Path, sweep: list[dict], references: dict, meta: dict) -> None:
    ok = [p for p in sweep if not p.get("failed")]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.errorbar([p["num_latent"] for p in ok], [p["mean"] for p in ok], yerr=[p["stderr"] for p in ok], marker="o", capsize=3,
                label="Laplace linear generative (per-example HAIS, lower bound)")
    for (name, value), style in zip(references.items(), (":", "--", "-.")):
        ax.axhline(value, color="k", linestyle=style, linewidth=1, label=f"{name} (exact, same patches)")
    ax.axvline(DIM, color="0.7", linewidth=0.8)
    if references and ok:  # keep the axis on the interesting range; mark far-off points (e.g. undercomplete L) at the bottom edge
        floor = min(references.values()) - 60
        shown = [p for p in ok if p["mean"] >= floor]
        values = list(references.values()) + [p["mean"] + sign * p["stderr"] for p in shown for sign in (-1, 1)]
        low, high = min(values) - 5, max(values) + 5
        ax.set_ylim(low, high)
        for p in ok:
            if p["mean"] < low:
                ax.annotate(f"L = {p['num_latent']}: {p['mean']:.0f} ± {p['stderr']:.0f}\n(off scale)", xy=(p["num_latent"], low),
                            xytext=(p["num_latent"] + 4, low + 0.3 * (high - low)), ha="left", fontsize=8,
                            arrowprops={"arrowstyle": "->", "color": "C0"})
    ax.set_xticks([p["num_latent"] for p in sweep])
    ax.set_xlabel("number of latents L (M = 36)")
    ax.set_ylabel("test log-likelihood (nats per patch)")
    ax.set_title(f"Sparse coding vs number of latents ({meta['source']} patches, {meta['subset_size']} test patches)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- main -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run (~3 min): small data and budgets, writes <out-dir>/quick")
    parser.add_argument("--sweep", action="store_true", help=f"also the size sweep (Fig. 5): L in {list(SWEEP_SIZES)} → size_sweep.png")
    parser.add_argument("--source", choices=("embedded", "vanhateren"), default="embedded",
                        help="patch images: scikit-learn's embedded photos (default) or <data-root>/natural_images")
    parser.add_argument("--data-root", type=Path, default=default_data_root(), help="data folder for --source vanhateren")
    parser.add_argument("--seed", type=int, default=0, help="seed of the patches, initial weights, training and estimators")
    parser.add_argument("--hais-steps", type=lambda v: int(float(v)), default=None, help="N of the per-example HAIS estimates")
    parser.add_argument("--hais-patches", type=int, default=None, help="test patches of the per-example HAIS estimates")
    parser.add_argument("--hais-particles", type=int, default=None, help="particles per patch of the per-example HAIS estimates")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--out-dir", type=Path, default=None, help="output folder (default reports/models[/vanhateren][/quick])")
    parser.add_argument("--rerender", action="store_true", help="measure nothing: rewrite README.md (and the PNG) from results.json")
    args = parser.parse_args(argv)

    s = dict(SETTINGS["quick" if args.quick else "full"])
    for key, value in (("hais_steps", args.hais_steps), ("hais_patches", args.hais_patches), ("hais_particles", args.hais_particles)):
        if value is not None:
            s[key] = value
    out_dir = args.out_dir
    if out_dir is None:
        out_dir = REPO / "reports" / "models"
        if args.source != "embedded":
            out_dir = out_dir / args.source
        if args.quick:
            out_dir = out_dir / "quick"
    plt = require_matplotlib() if args.sweep else None

    if args.rerender:
        payload = json.loads((out_dir / "results.json").read_text())
        write_readme(out_dir / "README.md", payload["meta"], payload["models"], payload["ordering"], payload.get("sweep"))
        if payload.get("sweep") and plt is not None:
            plot_sweep(plt, out_dir / "size_sweep.png", payload["sweep"], payload["sweep_references"], payload["meta"])
        print(f"rewrote {out_dir}/README.md from results.json")
        return

    torch.set_num_threads(args.threads)
    total_began = time.perf_counter()
    load_at_start = load_average()
    seed = args.seed
    torch.manual_seed(seed)  # nothing below draws from the global stream; set anyway

    began = time.perf_counter()
    splits, data_text = load_patch_splits("reproduce_models.py", args.source, args.data_root, s["num_train"], s["num_test"], seed)
    train, test = splits.train, splits.test
    data_seconds = time.perf_counter() - began
    duplicates = {name: 1 - torch.unique(split, dim=0).shape[0] / split.shape[0] for name, split in (("train", train), ("test", test))}
    norms = test.norm(dim=1)
    data_check = (
        f"{100 * duplicates['train']:.1f}% of the training and {100 * duplicates['test']:.1f}% of the test patches repeat another "
        f"patch of their split exactly (flat, saturated or black regions give identical patches: the data have point masses, which "
        f"a density with a sharp enough peak can exploit); test patch norms: median {norms.median().item():.2f}, 90th percentile "
        f"{norms.quantile(0.9).item():.2f} (a whitened Gaussian's would be ≈ 6)."
    )
    print(f"data: train {tuple(train.shape)}, test {tuple(test.shape)} ({data_seconds:.1f} s); {data_check}", flush=True)
    subset_index = torch.randperm(test.shape[0], generator=generator(seed + SUBSET_SEED_OFFSET))[: s["hais_patches"]]
    subset = test[subset_index]
    pilot_data = train[torch.randperm(train.shape[0], generator=generator(seed + PILOT_SEED_OFFSET))[: s["pilot_patches"]]]

    rows: list[dict] = []
    timers = {"training": 0.0, "pilot": 0.0, "evaluation": 0.0}
    estimate_index = [0]

    def next_seed() -> int:
        estimate_index[0] += 1
        return seed + SEED_STRIDE * estimate_index[0]

    def finish(row: dict, evaluation: dict) -> None:
        per_example = evaluation.pop("per_example")
        if evaluation["test_patches"] == test.shape[0]:
            subset_values = per_example[subset_index]
        elif evaluation["test_patches"] == subset.shape[0]:
            subset_values = per_example
        else:
            subset_values = None  # another set of patches (the estimator check): not part of the pairwise comparison
        row["evaluation"] = evaluation
        row["subset_per_example"] = None if subset_values is None else subset_values.tolist()
        row["subset_mean"] = None if subset_values is None else subset_values.mean().item()
        row["shared_stderr"] = evaluation.get("log_z_stderr", 0.0)
        rows.append(row)
        total = math.hypot(evaluation["estimator_stderr"], evaluation["data_stderr"])
        same = "" if subset_values is None else f", same patches {row['subset_mean']:.3f}"
        print(f"{row['label']}: {evaluation['mean']:.3f} ± {total:.3f} ({evaluation['kind']}){same}; "
              f"train {row['train_seconds']:.1f} s, eval {evaluation['seconds']:.1f} s", flush=True)

    def fail(row: dict, reason: str) -> None:
        row["failed"] = reason
        rows.append(row)
        print(f"{row['label']}: FAILED: {reason}", flush=True)

    # 1. Gaussian.
    began = time.perf_counter()
    gaussian = Gaussian.fit(train).requires_grad_(False)
    row = {"name": "gaussian", "label": "Gaussian", "parameters": count_parameters(gaussian), "sizes": "mean and full covariance",
           "train_method": "exact ML (`Gaussian.fit`)", "train_seconds": time.perf_counter() - began,
           "description": "`Gaussian.fit(train)`: sample mean and covariance (+1e-6·I); the data are whitened on the training set, so ≈ N(0, I)."}
    timers["training"] += row["train_seconds"]
    result = evaluate_exact(gaussian, test)
    timers["evaluation"] += result["seconds"]
    finish(row, result)

    # 2-3. Complete products of experts: exact ML with full-batch L-BFGS (reproduce_hais.train_poe).
    for expert, name, label in (("laplace", "ica", "ICA (complete Laplace POE)"), ("student_t", "poe-student-t", "Student-t POE (complete)")):
        model, info = train_poe(expert, train, s["poe_iters"], seed)
        timers["training"] += info["seconds"]
        shape = describe_poe(model)
        notes = f"L-BFGS {info['iterations']} iterations, final |grad| {info['final_grad_norm']:.1e}" + ("" if info["converged"] else " (iteration limit)")
        notes += f"; filter norms {shape['filter_norm_min']:.2f} / {shape['filter_norm_median']:.2f} / {shape['filter_norm_max']:.2f} (min/median/max)"
        if expert == "student_t":
            notes += f"; λ {shape['shape_min']:.3f} / {shape['shape_median']:.3f} / {shape['shape_max']:.3f}"
        row = {"name": name, "label": label, "parameters": count_parameters(model),
               "sizes": "36 experts, complete" + (", λ learned" if expert == "student_t" else ""),
               "train_method": "exact ML, full-batch L-BFGS", "train_seconds": info["seconds"], "notes": notes, "training": info,
               "description": f"`ProductOfExperts(36, 36, expert={expert!r})` fitted by `reproduce_hais.train_poe`: {info['optimizer']}; "
                              f"loss {info['initial_loss']:.3f} → {info['final_loss']:.4f}"
                              + ("; λ = ½ + softplus(ρ) keeps Z finite during line searches" if expert == "student_t" else "") + "."}
        result = evaluate_exact(model, test)
        timers["evaluation"] += result["seconds"]
        finish(row, result)
        if name == "ica":
            ica_model = model.requires_grad_(False)
            ica_basis = torch.linalg.inv(model.filters.detach().double()).float()  # Φ = W⁻¹: ICA's basis, sparse coding's start

    # 4. Sparse coding: Laplace linear generative model, 2× overcomplete.
    def sparse_coding(num_latent: int, label: str, particles: int, steps: int) -> tuple[dict, LinearGenerative]:
        model, info = train_linear(splits, num_latent, ica_basis, s, seed + num_latent)
        timers["training"] += info["seconds"]
        row = {"name": "sparse-coding" if num_latent == NUM_LATENT else f"sparse-coding-{num_latent}", "label": label,
               "parameters": count_parameters(model), "sizes": f"L = {num_latent} latents, σ_n = {NOISE_STD}",
               "train_method": f"EM-HMC + Adam, {info['epochs']} epochs", "train_seconds": info["seconds"], "training": info,
               "description": (f"`LinearGenerative(36, {num_latent}, prior='laplace', noise_std={NOISE_STD})`, initial basis the ICA row's "
                               f"Φ = W⁻¹ ({'its ' + str(num_latent) + ' longest columns' if num_latent < DIM else 'all 36 columns'}"
                               f"{', then ' + str(num_latent - DIM) + ' columns of 0.01·N(0, 1)' if num_latent > DIM else ''}); "
                               f"{info['burn_in_e_steps']} burn-in E-steps (the latents start at prior draws), then `Trainer(EMHMC(num_hmc_steps=10, "
                               f"step_size=0.05, num_leapfrog=10, target_acceptance=0.8, batch_hmc_steps=2), Adam(lr={s['sparse_lr']}), epochs={info['epochs']}, batch_size=100)`; "
                               f"complete-data loss per epoch {', '.join(f'{x:.1f}' for x in info['losses'][:: max(1, len(info['losses']) // 6)])}.")}
        if info["error"]:
            fail(row, info["error"])
            return row, model
        model.requires_grad_(False)
        began = time.perf_counter()
        row["pilot"] = pilot(model, "latent", pilot_data, s, next_seed(), stiffness_grid=STIFFNESS_GRID)
        timers["pilot"] += time.perf_counter() - began
        row["notes"] = (f"E-step acceptance {info['sampler_acceptance'][-1]:.2f} at ε {info['final_step_size']:.3f}; "
                        f"basis column norms {model.basis.norm(dim=0).min().item():.2f}–{model.basis.norm(dim=0).max().item():.2f}")
        result = evaluate_latent(model, subset, particles, steps, row["pilot"], next_seed())
        timers["evaluation"] += result["seconds"]
        finish(row, result)
        return row, model

    sc_row, _ = sparse_coding(NUM_LATENT, f"Sparse coding (Laplace linear generative, L = {NUM_LATENT})", s["hais_particles"], s["hais_steps"])

    def estimator_check(name: str, label: str, model: LinearGenerative, train_method: str, reference_method: str, description: str,
                        exact_fn) -> None:
        """A generative model with a known log-likelihood, evaluated like every generative row (its own pilot on the
        training patches, then HAIS on the first ``check_patches`` test patches of the common subset)."""
        model.requires_grad_(False)
        row = {"name": name, "label": label, "parameters": count_parameters(model),
               "sizes": f"L = {model.num_latent} latents, σ_n = {NOISE_STD}", "train_method": train_method, "train_seconds": 0.0,
               "description": description}
        began = time.perf_counter()
        row["pilot"] = pilot(model, "latent", pilot_data, s, next_seed(), stiffness_grid=STIFFNESS_GRID)
        timers["pilot"] += time.perf_counter() - began
        check_subset = subset[: s["check_patches"]]
        result = evaluate_latent(model, check_subset, s["check_particles"], s["hais_steps"], row["pilot"], next_seed())
        timers["evaluation"] += result["seconds"]
        began = time.perf_counter()
        exact = exact_fn(check_subset).double()
        timers["evaluation"] += time.perf_counter() - began
        row["check"] = {"patches": check_subset.shape[0], "particles": s["check_particles"], "num_steps": s["hais_steps"],
                        "step_size": row["pilot"]["step_size"], "schedule": row["pilot"]["schedule"], "stiffness": row["pilot"]["stiffness"],
                        "estimate": result["mean"], "stderr": result["estimator_stderr"], "exact": exact.mean().item(),
                        "reference_method": reference_method, "error": result["mean"] - exact.mean().item()}
        row["notes"] = f"reference on the same {check_subset.shape[0]} patches: {exact.mean().item():.3f}; error {row['check']['error']:+.3f}"
        finish(row, result)

    # Estimator checks. (a) The Gaussian-prior linear generative model at its exact ML basis: closed-form log-likelihood.
    check_model = LinearGenerative.from_tensors(ml_gaussian_prior_basis(train, NUM_LATENT, seed + 5), prior="gaussian", noise_std=NOISE_STD)
    estimator_check(
        "check", f"Gaussian-prior linear generative (L = {NUM_LATENT}), HAIS check", check_model, "exact ML (closed form, probabilistic PCA)",
        "closed-form log-likelihood",
        "`LinearGenerative(36, 72, prior='gaussian', noise_std=0.1)` with Φ = (S − σ_n²I)^½ R, S the training covariance and R a "
        "random 36×72 matrix with orthonormal rows: the exact ML basis (ΦΦᵀ + σ_n²I = S), so this model is the Gaussian row's "
        "distribution written with 72 latents. Its exact log-likelihood checks the per-example HAIS procedure (pilot, then the "
        "chosen settings) that the generative rows use.",
        check_model.log_prob)
    # (b) The complete Laplace-prior model with ICA's basis: ICA's density blurred by the noise, p(x) = E_n[p_ICA(x − n)],
    # n ~ N(0, σ_n² I). A Laplace posterior like sparse coding's, and the cost of σ_n alone against the ICA row.
    noisy_ica = LinearGenerative.from_tensors(ica_basis, prior="laplace", noise_std=NOISE_STD)
    estimator_check(
        "check-laplace", f"Laplace-prior linear generative with ICA's basis (L = {DIM}), HAIS check", noisy_ica,
        "not trained: the ICA row's basis Φ = W⁻¹",
        f"Monte Carlo over the noise, {s['noise_draws']:,} draws per patch",
        f"`LinearGenerative(36, 36, prior='laplace', noise_std={NOISE_STD})` with the ICA row's Φ = W⁻¹, not trained: x = Φz + n "
        "with Φz distributed as the ICA row's density, so log p(x) = log E_n[p_ICA(x − n)]; the reference value averages "
        f"p_ICA(x − n) over {s['noise_draws']:,} noise draws per patch (a consistent estimate whose Jensen bias is far below the "
        "table's precision). Its difference from the ICA row is what the noise σ_n alone costs a Laplace model.",
        lambda x: noise_convolved_log_prob(ica_model, x, NOISE_STD, s["noise_draws"], generator(seed + 6)))

    # 5. Bilinear generative model (conf/model/bilinear.yaml), EM-HMC with bounded column norms.
    model = BilinearGenerative(DIM, None, None, 8, noise_std=NOISE_STD, init_std=0.17, max_basis_norm=1.0, generator=generator(seed + 2))
    info = train_em(model, splits, s["bilinear_epochs"], s["bilinear_lr"], s, seed + 2)
    timers["training"] += info["seconds"]
    row = {"name": "bilinear", "label": "Bilinear generative", "parameters": count_parameters(model),
           "sizes": f"K = {model.num_components} components, {model.num_content} content + {model.num_style} style latents, σ_n = {NOISE_STD}",
           "train_method": f"EM-HMC + Adam, {info['epochs']} epochs", "train_seconds": info["seconds"], "training": info,
           "description": (f"`BilinearGenerative(36, num_style=8, noise_std={NOISE_STD}, init_std=0.17, max_basis_norm=1.0)` "
                           "(conf/model/bilinear.yaml, with the bound its comment recommends for EM); "
                           f"{info['burn_in_e_steps']} burn-in E-steps, then the same EM-HMC Trainer as sparse coding with Adam(lr={s['bilinear_lr']}); complete-data loss per epoch "
                           f"{', '.join(f'{x:.1f}' for x in info['losses'][:: max(1, len(info['losses']) // 6)])}.")}
    if info["error"]:
        fail(row, info["error"])
    else:
        model.requires_grad_(False)
        began = time.perf_counter()
        row["pilot"] = pilot(model, "latent", pilot_data, s, next_seed(), stiffness_grid=STIFFNESS_GRID)
        timers["pilot"] += time.perf_counter() - began
        row["notes"] = f"E-step acceptance {info['sampler_acceptance'][-1]:.2f} at ε {info['final_step_size']:.3f}"
        result = evaluate_latent(model, subset, s["hais_particles"], s["hais_steps"], row["pilot"], next_seed())
        timers["evaluation"] += result["seconds"]
        finish(row, result)

    # 6. mcRBM (conf/model/mcrbm.yaml), persistent MPF with Adam (conf/trainer/mpf_adam.yaml).
    model = MeanCovarianceRBM(DIM, 72, 36, 36, init_std=0.17, mean_init_std=0.05, normalization_eps=0.5, factor_norm=None,
                              normalize_pooling=True, generator=generator(seed + 4))
    objective = MPF(continuous=PersistentMPF(num_hmc_steps=5, step_size=0.05, num_leapfrog=10, resample_every=1, target_acceptance=0.8))
    info = run_trainer(model, objective, partial(torch.optim.Adam, lr=0.003), splits, s["mpf_epochs"], 500, seed + 4)
    timers["training"] += info["seconds"]
    row = {"name": "mcrbm", "label": "mcRBM", "parameters": count_parameters(model),
           "sizes": f"F = {model.num_factors} factors, {model.num_covariance_hidden} covariance + {model.num_mean_hidden} mean hiddens",
           "train_method": f"persistent MPF + Adam, {info['epochs']} epochs", "train_seconds": info["seconds"], "training": info,
           "description": ("`MeanCovarianceRBM(36, 72, 36, 36, init_std=0.17, factor_norm=None, normalize_pooling=True)` (conf/model/mcrbm.yaml: "
                           "learned factor lengths; fixed unit lengths gave -43.09 on 2026-11-22); "
                           "`Trainer(MPF(continuous=PersistentMPF(num_hmc_steps=5, step_size=0.05, num_leapfrog=10, target_acceptance=0.8)), "
                           f"Adam(lr=0.003), epochs={info['epochs']}, batch_size=500)` (conf/trainer/mpf_adam.yaml). Parameter count includes the "
                           "pooling matrix P (constrained ≥ 0, columns of unit L1 norm).")}
    if info["error"]:
        fail(row, info["error"])
    else:
        model.requires_grad_(False)
        began = time.perf_counter()
        row["pilot"] = pilot(model, "log_z", None, s, next_seed())
        timers["pilot"] += time.perf_counter() - began
        biases = max(model.covariance_bias.abs().max().item(), model.mean_bias.abs().max().item(), model.visible_bias.abs().max().item())
        result = evaluate_energy_model(model, test, train, s["logz_chains"], s["logz_steps"], row["pilot"], next_seed())
        row["notes"] = (f"log Ẑ = {result['log_z']:.3f} ± {result['log_z_stderr']:.3f}, ESS {result['ess']:.0f} of {result['chains']}; "
                        f"MPF particle acceptance {info['sampler_acceptance'][-1]:.2f}; largest |bias| {biases:.2f}")
        timers["evaluation"] += result["seconds"]
        finish(row, result)

    # Sweep (Fig. 5).
    sweep = None
    sweep_seconds = 0.0
    references = {}
    if args.sweep:
        began = time.perf_counter()
        sweep = []
        for num_latent in SWEEP_SIZES:
            if num_latent == NUM_LATENT and not sc_row.get("failed"):
                r = sc_row
            else:
                r, _ = sparse_coding(num_latent, f"Sparse coding, L = {num_latent}", s["hais_particles"], s["hais_steps"])
                rows.remove(r)
            entry = {"num_latent": num_latent, "parameters": r["parameters"], "train_seconds": r["train_seconds"]}
            if r.get("failed"):
                entry["failed"] = r["failed"]
            else:
                e = r["evaluation"]
                entry.update({"mean": e["mean"], "stderr": math.hypot(e["estimator_stderr"], e["data_stderr"]), "eval_seconds": e["seconds"],
                              "step_size": r["pilot"]["step_size"], "schedule": r["pilot"]["schedule"], "stiffness": r["pilot"]["stiffness"]})
            sweep.append(entry)
            print(f"sweep L={num_latent}: {entry.get('mean', float('nan')):.3f}", flush=True)
        sweep_seconds = time.perf_counter() - began
        references = {r["label"]: r["subset_mean"] for r in rows if r["name"] in ("gaussian", "ica") and not r.get("failed")}

    order = ordering(rows)
    command = "python scripts/reproduce_models.py" + "".join(" " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    meta = {
        "date": datetime.date.today().isoformat(),
        "command": command,
        "quick": args.quick,
        "machine": machine_description(),
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "pfzoo_version": pfzoo.__version__,
        "source": args.source,
        "seed": seed,
        "settings": s,
        "data": data_text,
        "data_check": data_check,
        "duplicate_fraction": duplicates,
        "subset_size": subset.shape[0],
        "subset_indices": subset_index.tolist(),
        "data_seconds": data_seconds,
        "training_seconds": timers["training"],
        "pilot_seconds": timers["pilot"],
        "evaluation_seconds": timers["evaluation"],
        "sweep_seconds": sweep_seconds,
        "total_seconds": time.perf_counter() - total_began,
        "load_average": {"start": load_at_start, "end": load_average()},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {"meta": meta, "models": rows, "ordering": order, "sweep": sweep, "sweep_references": references}
    (out_dir / "results.json").write_text(json.dumps(payload, indent=1, default=float) + "\n")
    write_readme(out_dir / "README.md", meta, rows, order, sweep)
    if sweep is not None:
        plot_sweep(plt, out_dir / "size_sweep.png", sweep, references, meta)
    print(f"wrote {out_dir}/README.md, results.json" + (", size_sweep.png" if sweep is not None else "")
          + f" ({meta['total_seconds']:.0f} s in all)")


if __name__ == "__main__":
    main()
