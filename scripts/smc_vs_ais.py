"""Adaptive SMC with its defaults against linear-schedule AIS at equal wall time, on four families with exact log Z.

For each family: ``--repeats`` runs of ``SMC()`` (different seeds) give its root-mean-square error against the exact
log Z and its median wall time T; AIS with a linear schedule then gets, for each of ``--ais-chains``, as many steps as
fit in T (timed from a pilot run of 100 steps) and the same number of runs. The table gives both RMSEs and their ratio
(SMC / the better AIS): below ½ is what issue 49 asks of SMC on at least three of the four families.

    .venv/bin/python scripts/smc_vs_ais.py --repeats 10 --out smc_vs_ais.json

Timing is this process's CPU time on one thread (``torch.set_num_threads(1)``), so other processes' load on a shared
machine does not stretch one side of the comparison more than the other.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import torch

from pfzoo.estimators import AIS, SMC
from pfzoo.models import RBM, Gaussian, Ising, ProductOfExperts


def families() -> dict:
    """Four families with exact log Z, hard enough that the schedule matters: an RBM of N(0, 2.5²) weights (20 × 12,
    enumerated), a dense Ising model of N(0, 2²) couplings (12 units), a 10-d Gaussian whose precision's eigenvalues
    span 6 to 240, and a complete 10-d Laplace product of experts (closed form). All anneal from their data-free
    bases (uniform, N(0, I), or for the POE a Gaussian fitted to its own exact draws)."""
    g = torch.Generator().manual_seed(0)
    rbm = RBM.from_tensors(2.5 * torch.randn(20, 12, generator=g, dtype=torch.float64),
                           0.5 * torch.randn(20, generator=g, dtype=torch.float64), 0.5 * torch.randn(12, generator=g, dtype=torch.float64))
    upper = torch.triu(2.0 * torch.randn(12, 12, generator=g, dtype=torch.float64), 1)
    ising = Ising.from_tensors(upper + upper.T, 0.5 * torch.randn(12, generator=g, dtype=torch.float64))
    factor = 3.0 * torch.randn(10, 10, generator=g, dtype=torch.float64)
    gaussian = Gaussian.from_tensors(factor @ factor.T + 0.5 * torch.eye(10, dtype=torch.float64), torch.randn(10, generator=g, dtype=torch.float64))
    filters = torch.eye(10, dtype=torch.float64) + 0.5 * torch.randn(10, 10, generator=g, dtype=torch.float64) / math.sqrt(10)
    poe = ProductOfExperts.from_tensors(3.0 * filters, expert="laplace")
    return {"rbm": rbm, "ising": ising, "gaussian": gaussian, "poe_laplace": poe}


def runs(make, model, exact: float, seeds: range) -> tuple[list[float], list[float]]:
    """``(errors, seconds)`` of ``make()(model)`` over ``seeds``."""
    errors, seconds = [], []
    for seed in seeds:
        estimator = make()
        start = time.process_time()
        estimate = estimator(model, generator=torch.Generator().manual_seed(seed))
        seconds.append(time.process_time() - start)
        errors.append(estimate.log_z - exact)
    return errors, seconds


def rmse(errors: list[float]) -> float:
    return math.sqrt(sum(e * e for e in errors) / len(errors))


def compare(name: str, model, repeats: int, ais_chains: list[int]) -> dict:
    exact = model.log_partition().item()
    smc_errors, smc_seconds = runs(lambda: SMC(), model, exact, range(repeats))
    budget = statistics.median(smc_seconds)
    row = {"family": name, "exact": exact, "smc_rmse": rmse(smc_errors), "smc_mean_error": statistics.fmean(smc_errors),
           "smc_seconds": budget, "ais": []}
    for chains in ais_chains:
        _, pilot = runs(lambda: AIS(chains, 100, schedule="linear"), model, exact, range(1000, 1002))
        steps = max(2, int(100 * budget / min(pilot)))
        errors, seconds = runs(lambda: AIS(chains, steps, schedule="linear"), model, exact, range(repeats))
        row["ais"].append({"num_chains": chains, "num_steps": steps, "rmse": rmse(errors), "mean_error": statistics.fmean(errors),
                           "seconds": statistics.median(seconds)})
    best = min(row["ais"], key=lambda entry: entry["rmse"])
    row["ratio"] = row["smc_rmse"] / best["rmse"]
    return row


def render(rows: list[dict]) -> str:
    lines = ["| family | SMC RMSE | SMC s | AIS (chains × steps) | AIS RMSE | AIS s | SMC/AIS |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        for entry in row["ais"]:
            lines.append(f"| {row['family']} | {row['smc_rmse']:.4f} | {row['smc_seconds']:.2f} | {entry['num_chains']} × {entry['num_steps']} "
                         f"| {entry['rmse']:.4f} | {entry['seconds']:.2f} | {row['smc_rmse'] / entry['rmse']:.2f} |")
    wins = sum(row["ratio"] <= 0.5 for row in rows)
    return "\n".join(lines) + f"\n\nSMC's RMSE at most half the better AIS's on {wins} of {len(rows)} families."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--ais-chains", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--only", nargs="*", default=None, help="family names to run (default: all four)")
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [compare(name, model, args.repeats, args.ais_chains) for name, model in families().items()
            if args.only is None or name in args.only]
    print(render(rows))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
