"""An RBM trained by minimum probability flow on binarized MNIST, next to a CD-1 RBM of the same size (thesis appendix F).

    python scripts/reproduce_mpf_rbm.py            # full run: reports/mpf_rbm/{README.md,results.json,samples.png}
    python scripts/reproduce_mpf_rbm.py --quick    # smoke run (5,000 digits, 2 epochs, short AIS): reports/mpf_rbm/quick/

Both RBMs have 784 visible and ``--hidden`` hidden units, start from the same initial weights with the
visible biases at the data's base rates, and train with minibatch SGD (batch 100) through
:class:`pfzoo.training.Trainer`:
- MPF: :class:`pfzoo.training.BitFlipMPF`, single-bit-flip connectivity with the hidden units summed out,
  ``--num-flips`` flips sampled per digit (an unbiased estimate of the flow K), minimising log K (scale-free steps);
- CD-1: :class:`pfzoo.training.CD`.
Each is then evaluated by AIS (base-rate base, ``--ais-steps`` intermediate distributions,
``--ais-chains`` chains) on the 10,000 test digits; samples are the visible probabilities after
``--gibbs-sweeps`` block-Gibbs sweeps of 100 chains started from uniform noise. Data from ``data.root``
(``$PFZOO_DATA`` or ``../shared/data``).
"""

from __future__ import annotations

import os
import argparse
import datetime
import json
import shlex
import sys
import time
from functools import partial
from pathlib import Path

import torch

from pfzoo.data import DataSplits, binarized_mnist
from pfzoo.estimators import AIS
from pfzoo.models import RBM
from pfzoo.sampling import bernoulli
from pfzoo.training import CD, BitFlipMPF, Trainer

from pfzoo.data.root import resolve_data_root
from pfzoo.reporting import load_average, machine_description

REPO = Path(__file__).resolve().parents[1]


def default_data_root() -> Path:
    """``$PFZOO_DATA``, else ``<repo>/../shared/data`` (where the reference data sit beside a checkout)."""
    return resolve_data_root(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")


def train(name: str, objective, learning_rate: float, momentum: float, data: DataSplits, args) -> tuple[RBM, float]:
    model = RBM(784, args.hidden, generator=torch.Generator().manual_seed(args.seed))
    model.init_from_data(data.train)
    trainer = Trainer(
        objective,
        partial(torch.optim.SGD, lr=learning_rate, momentum=momentum),
        run_dir=REPO / "runs" / "mpf_rbm" / ("quick" if args.quick else "") / name,  # git-ignored checkpoints
        epochs=args.epochs,
        batch_size=100,
        learning_rate_decay=args.learning_rate_decay,
        progress=False,
        seed=args.seed,
    )
    began = time.perf_counter()
    trainer.fit(model, data)
    return model, time.perf_counter() - began


@torch.no_grad()
def gibbs_samples(model: RBM, sweeps: int, generator: torch.Generator) -> torch.Tensor:
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
    parser.add_argument("--quick", action="store_true", help="5,000 training digits, 2 epochs, AIS with 500 steps")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default reports/mpf_rbm[/quick])")
    args = parser.parse_args()
    out = args.out or REPO / "reports" / "mpf_rbm" / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    data = binarized_mnist(root=args.data_root or default_data_root())
    if args.quick:
        args.epochs, args.ais_steps, args.gibbs_sweeps = 2, 500, 100
        data = DataSplits(data.name, train=data.train[:5000], test=data.test[:1000], image_shape=data.image_shape)

    learners = {
        "MPF": (BitFlipMPF(num_flips=args.num_flips, log_flow=True), args.mpf_learning_rate, 0.9),
        "CD-1": (CD(k=1), args.cd_learning_rate, 0.5),
    }
    results, samples = {}, {}
    for index, (name, (objective, learning_rate, momentum)) in enumerate(learners.items()):
        model, seconds = train(name, objective, learning_rate, momentum, data, args)
        generator = torch.Generator().manual_seed(args.seed + 10 + index)
        estimator = AIS(num_chains=args.ais_chains, num_steps=args.ais_steps, base="base_rate")
        began = time.perf_counter()
        estimate = estimator.log_likelihood(model, data.test, base_data=data.train, generator=generator)
        results[name] = {
            "learning_rate": learning_rate,
            "momentum": momentum,
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
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("out", "data_root")},
        "num_train": data.train.shape[0],
        "num_test": data.test.shape[0],
        "results": results,
    }
    (out / "results.json").write_text(json.dumps(record, indent=1))
    rows = [
        f"| {name} | {r['learning_rate']} (momentum {r['momentum']}) | {r['train_seconds']:.0f} | {r['test_log_likelihood']:.2f} ± {r['stderr']:.2f} "
        f"| {r['log_z']:.2f} ± {r['log_z_stderr']:.2f} |"
        for name, r in results.items()
    ]
    (out / "README.md").write_text(
        f"# MPF and CD-1 RBMs (784 × {args.hidden}) on binarized MNIST\n\n"
        f"Made by `{record['command']}` on {record['date']} ({record['machine']}, {args.threads} threads, "
        f"load average {record['load_average']}).\n\n"
        f"Both trained {args.epochs} epochs on {data.train.shape[0]:,} digits with SGD (batch 100, learning rate lr/(1 + "
        f"{args.learning_rate_decay}·(epoch − 1))) from the same start. MPF: "
        f"single-bit-flip connectivity, hidden units summed out (thesis appendix F), {args.num_flips} flips sampled per digit, "
        "log K minimised. "
        f"Test log-likelihood: AIS, base-rate base, {args.ais_steps:,} intermediate distributions, {args.ais_chains} chains, "
        f"on {data.test.shape[0]:,} test digits (± is the stderr of log Ẑ; AIS is a stochastic lower bound on log Z, so "
        "these are upper-biased).\n\n"
        "| objective | learning rate | train seconds | test log-likelihood (nats) | log Z |\n|---|---|---|---|---|\n"
        + "\n".join(rows) + "\n\n![samples](samples.png)\n"
    )
    print(f"wrote {out}/README.md, results.json, samples.png")


if __name__ == "__main__":
    main()
