"""What SMC's error advantage over linear-schedule AIS is made of, on scripts/smc_vs_ais.py's four families: SMC with its
defaults against the same run without resampling, and against AIS with as many chains (1,000) and steps as SMC took, on
SMC's own adapted schedule, on a linear one and on AIS's default (fitted) one.

If AIS on SMC's schedule is as accurate as SMC, resampling adds nothing and the schedule is the whole advantage; then
the most SMC can gain over linear AIS at equal cost is what the adapted schedule gains over the linear one at equal
steps. Each row: root-mean-square error against the exact log Z over ``--repeats`` seeds, and median CPU seconds.

    .venv/bin/python scripts/smc_ablation.py --repeats 20 --out estimators/smc_ablation.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from pfzoo.estimators import AIS, SMC
from smc_vs_ais import families, rmse

CHAINS = 1000
"""SMC's default particles, given to every AIS row so that only the schedule and the resampling differ."""


def measured(make, model, exact: float, seeds: range) -> dict:
    """RMSE and median CPU seconds of ``make()(model)`` over ``seeds``, and the first run's schedule."""
    errors, seconds, schedule = [], [], None
    for seed in seeds:
        estimator = make()
        began = time.process_time()
        estimate = estimator(model, generator=torch.Generator().manual_seed(seed))
        seconds.append(time.process_time() - began)
        errors.append(estimate.log_z - exact)
        if schedule is None:
            schedule = estimate.info.get("betas")
    return {"rmse": rmse(errors), "seconds": statistics.median(seconds), "schedule": schedule}


def ablate(model, repeats: int) -> dict:
    exact = model.log_partition().item()
    smc = measured(SMC, model, exact, range(repeats))
    betas = torch.tensor(smc["schedule"][0], dtype=torch.float64)  # the first block's schedule (one block by default)
    steps = len(betas) - 1
    rows = {
        "SMC (defaults)": smc,
        "SMC without resampling": measured(lambda: SMC(resample_threshold=0.0), model, exact, range(repeats)),
        "AIS on SMC's schedule": measured(lambda: AIS(CHAINS, steps, schedule=betas), model, exact, range(repeats, 2 * repeats)),
        "AIS, linear schedule": measured(lambda: AIS(CHAINS, steps, schedule="linear"), model, exact, range(repeats, 2 * repeats)),
        "AIS, fitted schedule (its default)": measured(lambda: AIS(CHAINS, steps), model, exact, range(repeats, 2 * repeats)),
    }
    for row in rows.values():
        row.pop("schedule")
    return {"exact": exact, "steps": steps, "rows": rows}


def render(results: dict) -> str:
    names = list(next(iter(results.values()))["rows"])
    lines = ["| family | steps | " + " | ".join(names) + " | linear ÷ SMC's schedule |", "|---|---:|" + "---:|" * (len(names) + 1)]
    for family, result in results.items():
        rows = result["rows"]
        cells = [f"{rows[name]['rmse']:.4f} ({rows[name]['seconds']:.2f} s)" for name in names]
        gain = rows["AIS, linear schedule"]["rmse"] / rows["AIS on SMC's schedule"]["rmse"]
        lines.append(f"| {family} | {result['steps']} | " + " | ".join(cells) + f" | {gain:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--only", nargs="*", default=None, help="family names to run (default: all four)")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = {name: ablate(model, args.repeats) for name, model in families().items() if args.only is None or name in args.only}
    print(render(results))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
