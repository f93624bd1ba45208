"""Fig. 5 of Sohl-Dickstein & Culpepper (2011) for its analysis models, and Table 1's rows at the best sizes: products of
Laplace and Student-t experts trained by MPF with full-batch L-BFGS (the paper's route, conf/experiment/models_poe_*_mpf_lbfgs)
and the mcRBM (persistent MPF + Adam) at several sizes on van Hateren patches, log Ẑ by HAIS from N(0, I).

    python scripts/reproduce_model_sizes.py                               # reports/models/vanhateren/sizes/{README.md,results.json,sizes.png}
    python scripts/reproduce_model_sizes.py --sizes 36 72 --mcrbm-sizes 72 --logz-steps 3000 --out-dir /tmp/s   # smoke run
    python scripts/reproduce_model_sizes.py --ablation-train 10000 --ablation-family student-t --ablation-sizes 36 144
    python scripts/reproduce_model_sizes.py --rerender                    # measure nothing: README.md and sizes.png from results.json

results.json is rewritten after every model, so a stopped run keeps what it measured; --resume keeps its rows (and
their meta) and measures only the models it lacks. The training and evaluation are
:class:`pfzoo.studies.model_comparison.sizes.SizeSweep`; the report is :mod:`pfzoo.studies.model_comparison.size_report`.
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
from pfzoo.data.splits import DataSplits
from pfzoo.models import Gaussian
from pfzoo.studies import reporting
from pfzoo.studies.model_comparison.settings import SETTINGS
from pfzoo.studies.model_comparison.size_report import readme, sizes_figure
from pfzoo.studies.model_comparison.row_recorder import store_total_stderr
from pfzoo.studies.model_comparison.sizes import SizeSweep

REPO = Path(__file__).resolve().parents[1]


def write(out_dir: Path, payload: dict) -> None:
    """results.json, README.md and sizes.png (Agg, chosen before pyplot is imported) from ``payload``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(payload, indent=1, default=float) + "\n")
    (out_dir / "README.md").write_text(readme(payload))
    figure = sizes_figure(payload)
    figure.savefig(out_dir / "sizes.png", dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="*", default=["laplace", "student-t"], choices=("laplace", "student-t"), help="POE families to sweep")
    parser.add_argument("--sizes", nargs="*", type=int, default=[36, 72, 144, 288], help="numbers of experts L")
    parser.add_argument("--mcrbm-sizes", nargs="*", type=int, default=[72, 144, 432], help="mcRBM mean + covariance units (split equally)")
    parser.add_argument("--epochs", type=int, default=60, help="MPF epochs of the POEs (one L-BFGS step of ≤ 5 iterations each)")
    parser.add_argument("--mcrbm-epochs", type=int, default=100, help="MPF + Adam epochs of the mcRBMs")
    parser.add_argument("--logz-steps", type=lambda v: int(float(v)), default=30000, help="N of the HAIS log Ẑ")
    parser.add_argument("--logz-chains", type=int, default=200, help="chains of the HAIS log Ẑ")
    parser.add_argument("--convergence-steps", nargs="*", type=lambda v: int(float(v)), default=[1000, 10000], help="shorter N of the convergence check")
    parser.add_argument("--ablation-train", type=int, default=None, help="also retrain --ablation-family on the first this many training patches")
    parser.add_argument("--ablation-family", default="student-t", choices=("laplace", "student-t"))
    parser.add_argument("--ablation-sizes", nargs="*", type=int, default=[36, 144])
    parser.add_argument("--data-root", type=Path, default=resolve_data_root(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out-dir", type=Path, default=REPO / "reports" / "models" / "vanhateren" / "sizes")
    parser.add_argument("--resume", action="store_true", help="keep the rows of <out-dir>/results.json and measure only the missing models")
    parser.add_argument("--rerender", action="store_true", help="measure nothing: README.md and sizes.png from results.json")
    args = parser.parse_args(argv)
    if args.rerender:
        write(args.out_dir, json.loads((args.out_dir / "results.json").read_text()))
        return print(f"rewrote {args.out_dir}/README.md and sizes.png from results.json")

    torch.set_num_threads(args.threads)
    logging.basicConfig(format="%(message)s")
    logging.getLogger("pfzoo.studies").setLevel(logging.INFO)
    began, load_at_start, seed = time.perf_counter(), reporting.load_average(), args.seed
    s = {**SETTINGS["full"], "logz_steps": args.logz_steps, "logz_chains": args.logz_chains, "convergence_steps": args.convergence_steps,
         "pilot_chains": 100, "pilot_logz_steps": 3000}
    common = ["dataset.source=vanhateren", f"data.root={args.data_root}", f"dataset.num_train={s['num_train']}", f"dataset.num_test={s['num_test']}",
              f"dataset.seed={seed}", "trainer.progress=false"]
    recipe = lambda name, run_seed, *more: compose("train", [f"+experiment={name}", *common, f"seed={run_seed}", *more])  # noqa: E731
    try:
        splits = instantiate(recipe("models_poe_laplace_mpf_lbfgs", seed).dataset)
    except FileNotFoundError as error:
        sys.exit(f"reproduce_model_sizes.py: {error}\nPass --data-root <folder that holds natural_images/>.")
    sweep = SizeSweep(splits, s, seed, recipe)
    with torch.no_grad():  # Table 1's Gaussian row, exact: the anchor for the gains over the Gaussian that the paper's claims are
        test_ll, train_ll = (Gaussian.fit(splits.train).log_prob(x).double() for x in (splits.test, splits.train))
    gaussian = {"mean": test_ll.mean().item(), "stderr": (test_ll.std() / len(test_ll) ** 0.5).item(), "train_mean": train_ll.mean().item()}
    ablation = None
    if args.ablation_train:
        small = DataSplits(splits.name, splits.train[: args.ablation_train], splits.test, image_shape=splits.image_shape, transform=splits.transform)
        ablation = SizeSweep(small, s, seed, recipe)
    meta = {"date": datetime.date.today().isoformat(), "machine": reporting.machine_description(), "torch_threads": torch.get_num_threads(),
            "command": "python scripts/reproduce_model_sizes.py" + "".join(" " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)),
            "torch_version": torch.__version__, "pfzoo_version": pfzoo.__version__, "seed": seed, "settings": s, "num_test": splits.test.shape[0],
            "data": f"`pfzoo.data.patches(source='vanhateren', num_train={s['num_train']}, num_test={s['num_test']}, seed={seed})`: 16×16 patches of "
                    f"the images in {args.data_root / 'natural_images'}, log, mean removed, top 36 principal components, whitened."}
    if args.resume and (args.out_dir / "results.json").exists():
        previous = json.loads((args.out_dir / "results.json").read_text())
        # rows measured before the total stderr was stored get it now
        sweep.rows, meta["resumed_from"] = store_total_stderr(previous["rows"]), previous["meta"]
        if ablation:
            ablation.rows = previous["ablation"]

    def save() -> None:
        timers = {k: sweep.timers.get(k, 0.0) + (ablation.timers.get(k, 0.0) if ablation else 0.0) for k in ("training", "pilot", "evaluation", "convergence")}
        meta.update({f"{k}_seconds": v for k, v in timers.items()}, total_seconds=time.perf_counter() - began,
                    load_average={"start": load_at_start, "end": reporting.load_average()})
        write(args.out_dir, {"meta": meta, "gaussian": gaussian, "rows": sweep.rows, "ablation": ablation.rows if ablation else []})

    for size in args.sizes:  # size-major, so a stopped run has every family at the smaller sizes
        for i, family in enumerate(args.families):
            sweep.product_of_experts(family, size, args.epochs, seed + 100 * i + size)
            save()
    for size in args.ablation_sizes if ablation else ():
        ablation.product_of_experts(args.ablation_family, size, args.epochs, seed + 100 * args.families.index(args.ablation_family) + size,
                                    tag=f", {args.ablation_train:,} training patches")
        save()
    for size in args.mcrbm_sizes:
        sweep.mcrbm(size, args.mcrbm_epochs, seed + 300 + size)
        save()
    print(f"wrote {args.out_dir}/README.md, results.json, sizes.png ({meta['total_seconds']:.0f} s in all)")


if __name__ == "__main__":
    main()
