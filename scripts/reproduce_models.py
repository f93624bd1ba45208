"""Reproduce the model comparison of Sohl-Dickstein & Culpepper (2011), Table 1: test log-likelihood of the models of
natural image patches (Fig. 4: estimates against N; Fig. 5: the size sweep), each with its size, training method and the estimator that produced the number.

    python scripts/reproduce_models.py                       # full run (~50 min, one thread): reports/models/{README.md,results.json,convergence.png}
    python scripts/reproduce_models.py --quick               # smoke run (~3 min): reports/models/quick/
    python scripts/reproduce_models.py --sweep               # also Fig. 5: sparse coding vs number of latents → size_sweep.png
    python scripts/reproduce_models.py --source vanhateren   # the paper's images (<data-root>/natural_images): reports/models/vanhateren/
    python scripts/reproduce_models.py --rerender            # measure nothing: README.md (and the plots) from results.json,
                                                             # which gets the numbers the README derives (each row's ±)

Data: whitened 36-D natural image patches (conf/dataset/patches.yaml). Models, each trained by pfzoo.training.Trainer from a
recipe in conf/experiment/: the Gaussian (exact ML), ICA and the Student-t POE (hais_poe_*: exact ML, full-batch L-BFGS,
float64), sparse coding (models_sparse_coding: EM-HMC from ICA's basis, 72 latents), the bilinear model (models_bilinear:
EM-HMC), the mcRBM (models_mcrbm: persistent MPF) and, the paper's route, complete and 2× overcomplete Laplace and
Student-t POEs trained by persistent MPF (models_poe_*_mpf). Exact log-likelihoods where log Z has a closed form; per-example
HAIS (a stochastic lower bound) for the generative models; HAIS log Ẑ from N(0, I) for the mcRBM and the overcomplete
POEs (biased upward). Two
in-run checks evaluate models with known likelihoods by the same procedure. HAIS's ε, its β-scaling and the schedule
come per model from pfzoo.studies.step_size_pilot on training patches (the largest lower bound wins). The training and
evaluation are :class:`pfzoo.studies.model_comparison.comparison.ModelComparison`; this script composes the recipes and writes the files.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
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
from pfzoo.studies import reporting
from pfzoo.studies.model_comparison.comparison import ModelComparison
from pfzoo.studies.model_comparison.data_description import describe_data
from pfzoo.studies.model_comparison.figures import convergence_figure, sweep_figure
from pfzoo.studies.model_comparison.paired_differences import ordering
from pfzoo.studies.model_comparison.report import readme
from pfzoo.studies.model_comparison.row_recorder import store_total_stderr
from pfzoo.studies.model_comparison.settings import SETTINGS, SWEEP_SIZES

REPO = Path(__file__).resolve().parents[1]


def save_figure(path: Path, draw) -> None:
    """Save the figure ``draw()`` returns to ``path``, drawn off screen (Agg, chosen before the figure imports pyplot)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = draw()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def has_convergence(rows: list[dict]) -> bool:
    return any(not r.get("failed") and r["evaluation"].get("convergence") for r in rows)


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
    parser.add_argument("--rerender", action="store_true", help="measure nothing: rewrite README.md (and the PNG) from results.json, and add to it each row's ± (total stderr)")
    args = parser.parse_args(argv)
    s = dict(SETTINGS["quick" if args.quick else "full"])
    s.update({k: v for k, v in (("hais_steps", args.hais_steps), ("hais_patches", args.hais_patches), ("hais_particles", args.hais_particles)) if v is not None})
    out_dir = args.out_dir or REPO / "reports" / "models" / ("" if args.source == "embedded" else args.source) / ("quick" if args.quick else "")
    try:
        args.sweep and __import__("matplotlib")
    except ImportError:
        sys.exit("reproduce_models.py: --sweep draws a plot and needs matplotlib (`pip install matplotlib`).")
    if args.rerender:  # results.json is rewritten too: its rows get the numbers the README derives from them (each row's ±)
        payload = json.loads((out_dir / "results.json").read_text())
        store_total_stderr(payload["models"])
        (out_dir / "results.json").write_text(json.dumps(payload, indent=1, default=float) + "\n")
        filters = json.loads((out_dir / "filters.json").read_text()) if (out_dir / "filters.json").is_file() else None  # Fig. 1, when drawn
        (out_dir / "README.md").write_text(readme(payload["meta"], payload["models"], payload["ordering"], payload.get("sweep"), filters))
        if payload.get("sweep") and args.sweep:
            save_figure(out_dir / "size_sweep.png", lambda: sweep_figure(payload["sweep"], payload["sweep_references"], payload["meta"]))
        if has_convergence(payload["models"]):
            save_figure(out_dir / "convergence.png", lambda: convergence_figure(payload["models"], payload["meta"]))
        return print(f"rewrote {out_dir}/README.md from results.json")

    torch.set_num_threads(args.threads)
    logging.basicConfig(format="%(message)s")
    logging.getLogger("pfzoo.studies").setLevel(logging.INFO)  # each model's row as it is measured
    total_began, load_at_start, seed, began = time.perf_counter(), reporting.load_average(), args.seed, time.perf_counter()
    common = [f"dataset.source={args.source}", f"data.root={args.data_root}", f"dataset.num_train={s['num_train']}",
              f"dataset.num_test={s['num_test']}", f"dataset.seed={seed}", "trainer.progress=false"]
    recipe = lambda name, run_seed, *more: compose("train", [f"+experiment={name}", *common, f"seed={run_seed}", *more])  # noqa: E731
    try:
        splits = instantiate(recipe("hais_poe_laplace", seed).dataset)
    except FileNotFoundError as error:
        sys.exit(f"reproduce_models.py: {error}\nPass --data-root <folder that holds natural_images/>.")
    data_seconds = time.perf_counter() - began
    images = "scikit-learn's two embedded photos (china.jpg, flower.jpg)" if args.source == "embedded" else f"the images in {args.data_root / 'natural_images'}"
    data_text, data_check, duplicates = describe_data(splits, args.source, images, s, seed)
    print(f"data: train {tuple(splits.train.shape)}, test {tuple(splits.test.shape)} ({data_seconds:.1f} s); {data_check}", flush=True)
    study = ModelComparison(splits, s, seed, recipe)
    sweep, references = study.run(sweep=args.sweep)

    meta = {"date": datetime.date.today().isoformat(), "quick": args.quick, "machine": reporting.machine_description(),
            "command": "python scripts/reproduce_models.py" + "".join(" " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)),
            "torch_threads": torch.get_num_threads(), "torch_version": torch.__version__, "pfzoo_version": pfzoo.__version__, "source": args.source,
            "seed": seed, "settings": s, "data": data_text, "data_check": data_check, "duplicate_fraction": duplicates, "subset_size": study.subset.shape[0],
            "subset_indices": study.subset_index.tolist(), "data_seconds": data_seconds, **{f"{k}_seconds": v for k, v in study.timers.items()},
            "sweep_seconds": study.sweep_seconds, "total_seconds": time.perf_counter() - total_began,
            "load_average": {"start": load_at_start, "end": reporting.load_average()}}
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, order = study.rows, ordering(study.rows)
    (out_dir / "results.json").write_text(json.dumps({"meta": meta, "models": rows, "ordering": order, "sweep": sweep, "sweep_references": references},
                                                     indent=1, default=float) + "\n")
    (out_dir / "README.md").write_text(readme(meta, rows, order, sweep))
    if sweep is not None:
        save_figure(out_dir / "size_sweep.png", lambda: sweep_figure(sweep, references, meta))
    if has_convergence(rows):
        save_figure(out_dir / "convergence.png", lambda: convergence_figure(rows, meta))
    print(f"wrote {out_dir}/README.md, results.json" + (", size_sweep.png" if sweep is not None else "")
          + (", convergence.png" if has_convergence(rows) else "") + f" ({meta['total_seconds']:.0f} s in all)")


if __name__ == "__main__":
    main()
