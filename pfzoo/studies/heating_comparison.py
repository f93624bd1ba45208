"""RAISE on a DBM with its latents from the mean-field posterior or from Algorithm 3's clamped heating chain.

RAISE (Burda, Grosse & Salakhutdinov 2015) starts each reverse chain at a test digit with the DBM's latent units drawn
from a proposal q(h | v); any proposal keeps the bound valid, and a worse one only adds variance (a lower bound in
expectation, since log of a noisier mean is lower). Algorithm 3 refines the mean-field q by a heating chain with v
clamped (:meth:`pfzoo.models.DBM.heat_clamped`). :func:`compare_heating` runs RAISE on the same test digits with the
same K for each number of heating sweeps T (T = 0 is the mean-field proposal) and pairs every T's per-digit bounds with
T = 0's, so the comparison's error is the paired one.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence

import torch

from pfzoo.estimators.raise_ import RAISE
from pfzoo.models.base import EnergyModel

logger = logging.getLogger(__name__)


def compare_heating(
    model: EnergyModel,
    digits: torch.Tensor,
    heating_steps: Sequence[int],
    *,
    num_steps: int,
    num_chains: int,
    base_data: torch.Tensor,
    seed: int,
) -> list[dict]:
    """One row per T of ``heating_steps`` for RAISE (base rates, linear β, ``num_steps`` K) on ``digits [B, V]``.

    Each row: ``heating_steps``, ``mean`` and ``stderr`` of the mean bound over the digits (the chains' own error),
    ``ess`` (per digit over its chains, averaged), ``seconds``, ``per_example`` (the B bounds) and, against the first
    T, ``paired_difference`` with ``paired_stderr`` (over digits: the digits are shared, so their spread cancels).
    Every T's reverse chains draw from a generator seeded ``seed``.
    """
    rows: list[dict] = []
    for steps in heating_steps:
        estimator = RAISE(num_chains, num_steps, base="base_rate", heating_steps=steps).to(model.device)
        began = time.perf_counter()
        estimate = estimator.log_likelihood(model, digits, base_data=base_data, generator=torch.Generator(model.device).manual_seed(seed))
        per_example = estimate.per_example.double().cpu()
        row = {"heating_steps": steps, "mean": estimate.mean, "stderr": estimate.stderr, "ess": estimate.info["ess"],
               "seconds": round(time.perf_counter() - began, 1), "per_example": per_example.tolist()}
        if rows:
            difference = per_example - torch.tensor(rows[0]["per_example"], dtype=torch.float64)
            row.update(paired_difference=difference.mean().item(), paired_stderr=(difference.std() / math.sqrt(difference.numel())).item())
        logger.info("  heating T = %-6d RAISE %.3f ± %.3f  ESS %.2f  (%s s)", steps, row["mean"], row["stderr"], row["ess"], row["seconds"])
        rows.append(row)
    return rows
