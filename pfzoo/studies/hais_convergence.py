"""HAIS against the number of intermediate distributions on a latent-variable model with a closed-form likelihood
(Sohl-Dickstein & Culpepper 2011, Fig. 4: the Gaussian-prior linear generative model, whose marginal
``p(x) = N(0, ΦΦᵀ + σ_n² I)`` is exact).

Per-example HAIS anneals each patch's latents from the prior to the posterior; its mean ``log p̂(x)`` is a stochastic
lower bound that should rise to the exact value as N grows. Every N runs on the same patches with its own seed.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import torch
from matplotlib.figure import Figure

from pfzoo.studies.step_size_pilot import HAISSetting


def convergence_against_exact(model, patches: torch.Tensor, num_steps: Sequence[int], *, particles: int, setting: HAISSetting,
                              seed: int = 0) -> list[dict[str, Any]]:
    """Per-example HAIS with ``setting`` at every N of ``num_steps`` on ``patches [P, D]`` (``particles`` per patch) beside
    ``model.log_prob``: rows ``{num_steps, mean, stderr, exact, error, ess, seconds}`` (``mean`` and ``exact`` averaged
    over the patches, ``stderr`` the estimator's, ``ess`` the mean per-patch effective sample size)."""
    exact = model.log_prob(patches).double().mean().item()
    rows = []
    for index, steps in enumerate(num_steps):
        began = time.perf_counter()
        estimate = setting.estimator(particles, steps, base="isotropic").log_likelihood(
            model, patches, generator=torch.Generator().manual_seed(seed + index))
        rows.append({"num_steps": steps, "mean": estimate.mean, "stderr": estimate.stderr, "exact": exact, "error": estimate.mean - exact,
                     "ess": estimate.info.get("ess"), "seconds": round(time.perf_counter() - began, 1), "warnings": list(estimate.warnings)})
    return rows


def convergence_figure(rows: list[dict[str, Any]], title: str, *, zoom_from: int = 1000) -> Figure:
    """Fig. 4's layout: the HAIS estimate (solid, ± stderr) against N on a log axis, the exact log-likelihood dashed; a
    second panel zooms on the N ≥ ``zoom_from`` where the estimate meets the line (the small-N bounds are far below)."""
    figure = Figure(figsize=(9.0, 3.8), layout="constrained")
    figure.suptitle(title)
    for index, shown in enumerate((rows, [row for row in rows if row["num_steps"] >= zoom_from])):
        axes = figure.add_subplot(1, 2, index + 1)
        axes.errorbar([row["num_steps"] for row in shown], [row["mean"] for row in shown], yerr=[row["stderr"] for row in shown],
                      color="tab:blue", marker="o", capsize=3, label="HAIS estimate ± stderr")
        axes.axhline(rows[0]["exact"], color="tab:blue", linestyle="--", label="exact log-likelihood")
        axes.set(xscale="log", xlabel="intermediate distributions N", ylabel="mean test log-likelihood (nats per patch)",
                 title="every N" if index == 0 else f"N ≥ {zoom_from:,}")
        axes.legend(loc="lower right")
    return figure
