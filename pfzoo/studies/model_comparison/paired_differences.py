"""The paper's ordering of the models, checked with paired differences of their log-likelihoods on the same test
patches."""

from __future__ import annotations

import itertools
import math

import torch

from pfzoo.studies.model_comparison.settings import GROUPS


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
