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
Each is then evaluated by AIS (base-rate base, ``--ais-steps`` intermediate distributions, ``--ais-chains`` chains) on
the 10,000 test digits; samples are the visible probabilities after ``--gibbs-sweeps`` block-Gibbs sweeps of 100 chains
started from uniform noise. Data from ``data.root`` (``--data-root``, else ``$PFZOO_DATA``, else ``../shared/data``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import sys
import time
from pathlib import Path

import torch

from pfzoo import app, zoo
from pfzoo.cli import compose
from pfzoo.data import binarized_mnist
from pfzoo.data.root import resolve_data_root
from pfzoo.estimators import AIS
from pfzoo.sampling import bernoulli
from pfzoo.studies.reporting import load_average, machine_description

REPO = Path(__file__).resolve().parents[1]
RECIPES = {"MPF": "mpf_rbm_mpf", "CD-1": "mpf_rbm_cd1"}


@torch.no_grad()
def gibbs_samples(model, sweeps: int, generator: torch.Generator) -> torch.Tensor:
    """Visible probabilities ``[100, 784]`` after ``sweeps`` block-Gibbs sweeps from uniform noise."""
    v = bernoulli(torch.full((100, 784), 0.5), generator=generator)
    for _ in range(sweeps - 1):
        v = model.draw_visible(model.draw_hidden(v, generator=generator), generator=generator)
    return model.visible_probs(model.draw_hidden(v, generator=generator))


def plot_samples(samples: dict, path: Path, sweeps: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(1, len(samples), figsize=(5 * len(samples), 5.3))
    for ax, (name, images) in zip(axes, samples.items()):
        grid = images.reshape(10, 10, 28, 28).permute(0, 2, 1, 3).reshape(280, 280)
        ax.imshow(grid.numpy(), cmap="gray", vmin=0, vmax=1)
        ax.set_title(f"{name}: 100 chains, {sweeps} Gibbs sweeps")
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


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
        generator = torch.Generator().manual_seed(args.seed + 10 + index)
        estimator = AIS(num_chains=args.ais_chains, num_steps=args.ais_steps, base="base_rate")
        began = time.perf_counter()
        estimate = estimator.log_likelihood(model, data.test, base_data=data.train, generator=generator)
        results[name] = {
            "learning_rate": cfg.trainer.optimizer.lr,
            "momentum": cfg.trainer.optimizer.momentum,
            "train_seconds": seconds,
            "test_log_likelihood": estimate.mean,
            "stderr": estimate.stderr,
            "log_z": estimate.partition.log_z,
            "log_z_stderr": estimate.partition.stderr,
            "ais_seconds": time.perf_counter() - began,
        }
        samples[name] = gibbs_samples(model, args.gibbs_sweeps, generator)
        print(f"{name}: test log-likelihood {estimate.mean:.2f} ± {estimate.stderr:.2f} (train {seconds:.0f} s)", flush=True)

    plot_samples(samples, out / "samples.png", args.gibbs_sweeps)
    record = {
        "command": "python " + shlex.join(sys.argv),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine_description(),
        "threads": args.threads,
        "load_average": load_average(),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("out", "data_root", "render")},
        "num_train": data.train.shape[0],
        "num_test": data.test.shape[0],
        "results": results,
    }
    (out / "results.json").write_text(json.dumps(record, indent=1))
    write_report(record, out)


def write_report(record: dict, out: Path) -> None:
    """``README.md`` in ``out`` from a run's ``record`` (what results.json holds)."""
    settings = record["settings"]
    rows = [
        f"| {name} | {r['learning_rate']} (momentum {r['momentum']}) | {r['train_seconds']:.0f} | {r['test_log_likelihood']:.2f} ± {r['stderr']:.2f} "
        f"| {r['log_z']:.2f} ± {r['log_z_stderr']:.2f} |"
        for name, r in record["results"].items()
    ]
    (out / "README.md").write_text(
        f"# MPF and CD-1 RBMs (784 × {settings['hidden']}) on binarized MNIST\n\n"
        f"Made by `{record['command']}` on {record['date']} ({record['machine']}, {record['threads']} threads, "
        f"load average {record['load_average']}).\n\n"
        f"Both trained {settings['epochs']} epochs on {record['num_train']:,} digits with SGD (batch 100, learning rate lr/(1 + "
        f"{settings['learning_rate_decay']}·(epoch − 1))) from the same start. MPF: "
        f"single-bit-flip connectivity, hidden units summed out (thesis appendix F), {settings['num_flips']} flips sampled per digit, "
        "log K minimised. "
        f"Test log-likelihood: AIS, base-rate base, {settings['ais_steps']:,} intermediate distributions, {settings['ais_chains']} chains, "
        f"on {record['num_test']:,} test digits (± is the stderr of log Ẑ; AIS is a stochastic lower bound on log Z, so "
        "these are upper-biased).\n\n"
        "| objective | learning rate | train seconds | test log-likelihood (nats) | log Z |\n|---|---|---|---|---|\n"
        + "\n".join(rows) + "\n\n![samples](samples.png)\n"
    )
    print(f"wrote {out}/README.md")


if __name__ == "__main__":
    main()
