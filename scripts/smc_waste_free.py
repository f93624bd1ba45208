"""Waste-free SMC (``chain_length`` P) against standard SMC with its defaults at equal wall time, on an enumerable RBM.

``SMC()`` runs ``--repeats`` times (different seeds) for its root-mean-square error against the exact log Z and its
median wall time T; each waste-free setting (P, τ) then gets as many particles as fit in T (scaled from a pilot run of
1,000 and 4,000 particles, the time taken as linear in the particles, rounded to whole chains of every group) and the same number of runs. The RBM is scripts/smc_vs_ais.py's
(20 × 12, weights N(0, 2.5²), biases N(0, 0.5²), seed 0), annealed from the uniform base.

    .venv/bin/python scripts/smc_waste_free.py --repeats 30 --out smc_waste_free.json

Time is the process's CPU time on one thread (``torch.set_num_threads(1)``): the wall time of an idle machine, and
steady on a shared one, where the wall clock counts the other processes' turns.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import torch

from pfzoo.estimators import SMC
from pfzoo.models import RBM

PILOT_CHAINS = (1000, 4000)


def rbm() -> RBM:
    g = torch.Generator().manual_seed(0)
    return RBM.from_tensors(2.5 * torch.randn(20, 12, generator=g, dtype=torch.float64),
                            0.5 * torch.randn(20, generator=g, dtype=torch.float64), 0.5 * torch.randn(12, generator=g, dtype=torch.float64))


def runs(make, model, exact: float, seeds: range) -> tuple[list[float], list[float], list[int]]:
    """``(errors, seconds, steps)`` of ``make()(model)`` over ``seeds``."""
    errors, seconds, steps = [], [], []
    for seed in seeds:
        estimator = make()
        start = time.process_time()
        estimate = estimator(model, generator=torch.Generator().manual_seed(seed))
        seconds.append(time.process_time() - start)
        errors.append(estimate.log_z - exact)
        steps.append(estimate.info["num_steps"][0])
    return errors, seconds, steps


def summary(label: str, chains: int, errors: list[float], seconds: list[float], steps: list[int]) -> dict:
    return {"setting": label, "num_chains": chains, "rmse": math.sqrt(statistics.fmean(e * e for e in errors)),
            "mean_error": statistics.fmean(errors), "seconds": statistics.median(seconds), "steps": statistics.median(steps)}


def compare(repeats: int, lengths: list[int], targets: list[float], groups: int) -> list[dict]:
    model = rbm()
    exact = model.log_partition().item()
    default = SMC(base="uniform")
    rows = [summary("default", default.num_chains, *runs(lambda: SMC(base="uniform"), model, exact, range(repeats)))]
    budget = rows[0]["seconds"]
    for length in lengths:
        for target in targets:
            make = lambda chains: SMC(chains, target_cess=target, num_groups=groups, chain_length=length, base="uniform")  # noqa: E731
            small, large = (min(runs(lambda: make(chains), model, exact, range(1000, 1003))[1]) for chains in PILOT_CHAINS)
            per_chain = max(large - small, 1e-9) / (PILOT_CHAINS[1] - PILOT_CHAINS[0])  # the time is a + b N: fixed per-step work
            unit = groups * length  # whole chains in every group
            chains = max(unit, round((PILOT_CHAINS[0] + (budget - small) / per_chain) / unit) * unit)
            rows.append(summary(f"waste-free P={length} τ={target}", chains, *runs(lambda: make(chains), model, exact, range(repeats))))
    return rows


def render(rows: list[dict], exact: float) -> str:
    budget = rows[0]["seconds"]
    lines = [f"RBM 20 × 12, exact log Z = {exact:.4f}", "",
             "| setting | particles | steps | median CPU s | RMSE | RMSE at the default's time | mean error |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['setting']} | {r['num_chains']} | {r['steps']:.0f} | {r['seconds']:.3f} | {r['rmse']:.4f} | "
              f"{r['rmse'] * math.sqrt(r['seconds'] / budget):.4f} | {r['mean_error']:+.4f} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--lengths", type=int, nargs="+", default=[5, 10, 20])
    parser.add_argument("--targets", type=float, nargs="+", default=[0.5, 0.8, 0.9, 0.95])
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = compare(args.repeats, args.lengths, args.targets, args.groups)
    print(render(rows, rbm().log_partition().item()))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
