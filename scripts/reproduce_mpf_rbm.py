"""An RBM trained by minimum probability flow on binarized MNIST, next to a CD-1 RBM of the same size (thesis appendix F).

    python scripts/reproduce_mpf_rbm.py            # full run: reports/mpf_rbm/{README.md,results.json,samples.png}
    python scripts/reproduce_mpf_rbm.py --quick    # smoke run (1 epoch, short AIS and sampling): reports/mpf_rbm/quick/
    python scripts/reproduce_mpf_rbm.py --render reports/mpf_rbm/results.json   # rewrite README.md beside it

The two recipes conf/experiment/mpf_rbm_mpf.yaml and mpf_rbm_cd1.yaml (784 visible and ``--hidden`` hidden units, the
same initial weights from the seed, visible biases at the data's base rates, SGD on minibatches of 100) are trained by
:func:`pfzoo.app.train`, as ``python scripts/train.py +experiment=mpf_rbm_mpf`` would:
- MPF: :class:`pfzoo.training.BitFlipMPF`, single-bit-flip connectivity with the hidden units summed out,
  ``--num-flips`` flips sampled per digit (an unbiased estimate of the flow K), minimising log K (scale-free steps);
- CD-1: :class:`pfzoo.training.CD`.
Each is then evaluated (:func:`pfzoo.studies.mpf_rbm.evaluate`) by AIS (base-rate base, ``--ais-steps`` intermediate distributions, ``--ais-chains`` chains) on
the 10,000 test digits; samples are the visible probabilities after ``--gibbs-sweeps`` sweeps of the model's block-Gibbs chain, 100 chains
started from uniform noise. Data from ``data.root`` (``--data-root``, else ``$PFZOO_DATA``, else ``../shared/data``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from pfzoo import app, zoo
from pfzoo.cli import compose
from pfzoo.data import binarized_mnist
from pfzoo.data.root import resolve_data_root
from pfzoo.studies.mpf_rbm import RECIPES, evaluate, readme, samples_figure
from pfzoo.studies.reporting import run_header, settings_record

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--learning-rate-decay", type=float, default=0.1, help="epoch e runs at lr / (1 + decay·(e − 1))")
    parser.add_argument("--num-flips", type=int, default=100, help="single flips sampled per digit for MPF")
    parser.add_argument("--mpf-learning-rate", type=float, default=0.3)
    parser.add_argument("--cd-learning-rate", type=float, default=0.05)
    parser.add_argument("--ais-steps", type=int, default=10000)
    parser.add_argument("--ais-chains", type=int, default=100)
    parser.add_argument("--gibbs-sweeps", type=int, default=1000)
    parser.add_argument("--data-root", type=Path, default=None, help="default $PFZOO_DATA or ../shared/data")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="1 epoch, AIS with 500 steps, 100 Gibbs sweeps")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default reports/mpf_rbm[/quick])")
    parser.add_argument("--render", type=Path, default=None, help="rewrite README.md beside this results.json (samples.png stays)")
    args = parser.parse_args()
    if args.render:
        write_report(json.loads(args.render.read_text()), args.render.parent)
        return
    if args.quick:
        args.epochs, args.ais_steps, args.gibbs_sweeps = 1, 500, 100
    out = args.out or REPO / "reports" / "mpf_rbm" / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    root = resolve_data_root(args.data_root or os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")
    data = binarized_mnist(root)
    common = [f"data.root={root}", f"seed={args.seed}", f"model.num_hidden={args.hidden}", f"trainer.epochs={args.epochs}",
              f"trainer.learning_rate_decay={args.learning_rate_decay}"]
    specific = {"MPF": [f"trainer.optimizer.lr={args.mpf_learning_rate}", f"trainer.objective.binary.num_flips={args.num_flips}"],
                "CD-1": [f"trainer.optimizer.lr={args.cd_learning_rate}"]}

    results, samples = {}, {}
    for index, (name, recipe) in enumerate(RECIPES.items()):
        run_dir = REPO / "runs" / "mpf_rbm" / ("quick" if args.quick else "") / name  # git-ignored checkpoints
        cfg = compose("train", [f"+experiment={recipe}", *common, *specific[name], f"run_dir={run_dir}"])
        began = time.perf_counter()
        model = zoo.load(app.train(cfg)["checkpoint"])
        seconds = time.perf_counter() - began
        measured, samples[name] = evaluate(model, data, ais_chains=args.ais_chains, ais_steps=args.ais_steps, gibbs_sweeps=args.gibbs_sweeps,
                                           generator=torch.Generator().manual_seed(args.seed + 10 + index))
        results[name] = {"learning_rate": cfg.trainer.optimizer.lr, "momentum": cfg.trainer.optimizer.momentum, "train_seconds": seconds, **measured}
        print(f"{name}: test log-likelihood {measured['test_log_likelihood']:.2f} ± {measured['stderr']:.2f} (train {seconds:.0f} s)", flush=True)

    samples_figure(samples, out / "samples.png", args.gibbs_sweeps)
    record = {
        **run_header(sys.argv, args.threads),
        "settings": settings_record(vars(args), leave_out=("out", "data_root", "render")),
        "num_train": data.train.shape[0],
        "num_test": data.test.shape[0],
        "results": results,
    }
    (out / "results.json").write_text(json.dumps(record, indent=1))
    write_report(record, out)


def write_report(record: dict, out: Path) -> None:
    """``README.md`` in ``out`` from a run's ``record`` (what results.json holds; samples.png stays)."""
    (out / "README.md").write_text(readme(record))
    print(f"wrote {out}/README.md")


if __name__ == "__main__":
    main()
