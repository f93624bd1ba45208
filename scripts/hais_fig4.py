"""HAIS report Fig. 4: per-example HAIS against N on the Gaussian-prior linear generative model, beside its exact
log-likelihood, on the van Hateren patches of reports/models/vanhateren (the same data, model and HAIS setting as that
report's "check" row, which ran one N).

    python scripts/hais_fig4.py                          # N = 10 … 10⁴, 200 particles (the figure's) on 20 patches
    python scripts/hais_fig4.py --patches 5 --steps 10 100 --output reports/hais_fig4/quick
    python scripts/hais_fig4.py --render                 # README and picture from results.json

Writes results.json, README.md and fig4.png into --output (default reports/hais_fig4).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from pfzoo.data import patches
from pfzoo.data.root import resolve_data_root
from pfzoo.models import LinearGenerative
from pfzoo.studies import reporting
from pfzoo.studies.hais_convergence import convergence_against_exact, convergence_figure
from pfzoo.studies.model_comparison.comparison import ml_gaussian_prior_basis
from pfzoo.studies.model_comparison.settings import NOISE_STD, NUM_LATENT
from pfzoo.studies.step_size_pilot import HAISSetting

REPO = Path(__file__).resolve().parents[1]
COMPARISON = REPO / "reports" / "models" / "vanhateren" / "results.json"
TITLE = "HAIS on the Gaussian-prior linear generative model (L = 72)"


def readme(results: dict) -> str:
    s, rows = results["settings"], results["rows"]
    lines = ["# HAIS against N on a model with an exact likelihood (Sohl-Dickstein & Culpepper 2011, Fig. 4)", "",
             f"Measured {results['date']} on {results['machine']} ({results['threads']} thread(s), load average {results['load_average']}); "
             f"`{results['command']}`; raw numbers in `results.json`.", "",
             f"Model: `LinearGenerative(36, {NUM_LATENT}, prior='gaussian', noise_std={NOISE_STD})` at its exact ML basis "
             "(Φ = (S − σ_n²I)^½ R, as the check row of [reports/models/vanhateren](../models/vanhateren/README.md)), so "
             "p(x) = N(0, ΦΦᵀ + σ_n² I) is exact. "
             f"Data: the first {s['patches']} patches of that report's common test subset ({results['data']}). "
             f"Estimator: per-example HAIS with {s['particles']} particles per patch (the figure's 200), leapfrog ε = "
             f"{s['step_size']} / √(1 + {s['stiffness']:g} β), {s['schedule']} β from 10⁻³ (that report's pilot choice).", "",
             "| N | HAIS mean ± stderr | exact | error | ESS | seconds |", "|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['num_steps']:,} | {r['mean']:.3f} ± {r['stderr']:.3f} | {r['exact']:.3f} | {r['error']:+.3f} | "
              f"{'—' if r['ess'] is None else format(r['ess'], '.1f')} | {r['seconds']:.0f} |" for r in rows]
    last = rows[-1]
    verdict = ("converges to the exact value: at the largest N it is within 3 stderr of it" if abs(last["error"]) <= 3 * max(last["stderr"], 1e-12)
               else f"has not reached the exact value at N = {last['num_steps']:,} ({last['error']:+.3f} nats)")
    lines += ["", f"The seed says the estimate converges to the true log-likelihood (no number). Here HAIS {verdict}; below "
              "it, the bound sits under the dashed line and rises with N, as in the figure.", "", "![HAIS against N](fig4.png)", ""]
    return "\n".join(lines)


def render(out: Path, results: dict) -> None:
    (out / "README.md").write_text(readme(results))
    convergence_figure(results["rows"], TITLE).savefig(out / "fig4.png", dpi=110)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 100, 1000, 3000, 10000], help="the N's")
    parser.add_argument("--particles", type=int, default=200)
    parser.add_argument("--patches", type=int, default=20, help="test patches (the first of the comparison's common subset)")
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--output", type=Path, default=REPO / "reports" / "hais_fig4")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--render", action="store_true", help="measure nothing: README and picture from results.json")
    args = parser.parse_args(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    if args.render:
        return render(args.output, json.loads((args.output / "results.json").read_text()))
    torch.set_num_threads(args.threads)
    comparison = json.loads(COMPARISON.read_text())
    meta, check = comparison["meta"], next(row for row in comparison["models"] if row["name"] == "check")
    root = resolve_data_root(args.data_root or os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")
    data = patches(source="vanhateren", root=root, num_train=meta["settings"]["num_train"], num_test=meta["settings"]["num_test"], seed=meta["seed"])
    model = LinearGenerative.from_tensors(ml_gaussian_prior_basis(data.train, NUM_LATENT, meta["seed"] + 5), prior="gaussian", noise_std=NOISE_STD)
    model.requires_grad_(False)
    test = data.test[torch.tensor(meta["subset_indices"][: args.patches])]
    pilot = check["pilot"]
    setting = HAISSetting(pilot["step_size"], pilot["stiffness"], pilot["schedule"])
    began = time.perf_counter()
    rows = convergence_against_exact(model, test, sorted(args.steps), particles=args.particles, setting=setting, seed=meta["seed"])
    results = {**reporting.run_header([Path(sys.argv[0]).name if argv is None else "scripts/hais_fig4.py", *(argv or sys.argv[1:])], args.threads),
               "data": meta["data"].split(":")[0], "seconds": round(time.perf_counter() - began, 1),
               "settings": {"patches": args.patches, "particles": args.particles, **vars(setting)}, "rows": rows}
    (args.output / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    render(args.output, results)


if __name__ == "__main__":
    main()
