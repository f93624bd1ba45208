"""Tracking log Z through parallel-tempering training of a 784 × 500 RBM on binarized MNIST (issue 49, item 3): the
tracker on the trainer's own replicas (pfzoo.training.ReplicaPartitionTracker) against AIS at every epoch's checkpoint,
and its share of the training time. Writes reports/tracking/pt_mnist.{json,md}.

AIS runs from both starts after every epoch, the data's base rates (the trainer's evaluation) and the uniform base (a
callback of this script, whose time is left out of the tracker's share); the reference is the higher log Ẑ of the two
(each is a stochastic lower bound: a run that misses a mode of the model comes out low, as the base-rate start does on
these models once their own states are far denser than the data).

    python scripts/track_partition_pt.py [--epochs 5] [--replicas 30 --min-beta 0.05 --chains 3000] [--threads 2]
        [--clock cpu] [--tracker hot_sweeps=20 ...]

``--clock cpu`` times the training and the tracker by the process's CPU time (a one-thread run's shares then do not move
with the machine's load); ``--tracker KEY=VALUE`` sets a ``ReplicaPartitionTracker`` setting (integers and floats as
such, true/false as booleans).
"""

import argparse
import json
import os
import platform
import time
from functools import partial
from pathlib import Path

import torch

from pfzoo.data import binarized_mnist
from pfzoo.data.root import resolve_data_root
from pfzoo.estimators import AIS
from pfzoo.models import RBM
from pfzoo.training import PT, Trainer, TrainingCallback

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--replicas", type=int, default=30)
    parser.add_argument("--min-beta", type=float, default=0.05)
    parser.add_argument("--chains", type=int, default=3000, help="chains over all replicas (each replica gets chains / replicas; 100 "
                        "each, the PT trainer's default, by default: with 33 each the trained model was harder to track, reports/tracking)")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--observe-every", type=int, default=0)
    parser.add_argument("--ais-steps", type=int, default=10_000)
    parser.add_argument("--ais-chains", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-root", type=Path, default=None, help="folder holding binarized_mnist/ (default $PFZOO_DATA or ../shared/data)")
    parser.add_argument("--run-dir", type=Path, default=Path("/tmp/pfzoo_track_pt"))
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "tracking")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="what the shares of training time count")
    parser.add_argument("--tracker", nargs="*", default=[], metavar="KEY=VALUE", help="ReplicaPartitionTracker settings")
    args = parser.parse_args()
    tracker = {"observe_every": args.observe_every} | dict(_setting(text) for text in args.tracker)
    torch.set_num_threads(args.threads)
    data = binarized_mnist(args.data_root or resolve_data_root(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data"))
    model = RBM(784, 500, init_std=0.01, generator=torch.Generator().manual_seed(args.seed))
    model.init_from_data(data.train)
    objective = PT(k=1, num_chains=args.chains // args.replicas, num_replicas=args.replicas, min_beta=args.min_beta)
    trainer = Trainer(objective, partial(torch.optim.SGD, lr=args.lr, momentum=0.5), run_dir=args.run_dir, epochs=args.epochs,
                      batch_size=100, seed=args.seed, progress=False, held_out="test", metrics_rows=10_000, evaluate_every=1,
                      estimator=AIS(num_chains=args.ais_chains, num_steps=args.ais_steps), clock=args.clock,
                      track_partition=tracker, callbacks=[UniformStartAIS(args.ais_chains, args.ais_steps, args.clock)])
    began = time.perf_counter()
    trainer.fit(model, data)
    wall = time.perf_counter() - began
    records = [json.loads(line) for line in (args.run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [{key: record.get(key) for key in ("epoch", "log_z", "log_z_ess", "log_z_uniform", "log_z_uniform_ess", "log_z_tracked",
                                               "log_z_tracked_stderr", "test_log_likelihood", "test_log_likelihood_stderr",
                                               "test_tracked_log_likelihood", "tracking_anchor_ess", "log_z_tracking_correction",
                                               "swap_acceptance_min", "seconds", "callback_seconds", "reference_seconds")}
            for record in records]
    for row in rows:
        row["log_z_reference"] = max(row["log_z"], row["log_z_uniform"])
        row["test_log_likelihood_reference"] = row["test_log_likelihood"] - (row["log_z_reference"] - row["log_z"])
        row["tracked_minus_ais_log_z"] = row["log_z_tracked"] - row["log_z_reference"]
        row["callback_share"] = (row["callback_seconds"] - row["reference_seconds"]) / row["seconds"]
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, {args.threads} threads"
    result = {"settings": vars(args) | {"data_root": None, "run_dir": None, "out": None}, "machine": machine, "wall_seconds": wall, "epochs": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "pt_mnist.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    lines = ["# Tracking log Z through PT training of a 784 × 500 RBM on binarized MNIST", "",
             f"`python scripts/track_partition_pt.py --epochs {args.epochs} --replicas {args.replicas} --min-beta {args.min_beta} "
             f"--chains {args.chains} --lr {args.lr} --observe-every {args.observe_every} --clock {args.clock}"
             f"{' --tracker ' + ' '.join(args.tracker) if args.tracker else ''}`; {machine}; wall {wall:.0f} s.", "",
             f"AIS: {args.ais_chains} chains × K = {args.ais_steps:,} from the base rates and from the uniform base after every "
             f"epoch (ESS of {args.ais_chains} in brackets); the reference is the higher log Ẑ. Tracker: "
             f"`ReplicaPartitionTracker` defaults except {tracker}; shares on the {args.clock} clock.", "",
             "| epoch | AIS log Z, base rates | AIS log Z, uniform | tracked log Z | tracked − reference | reference test LL | "
             "tracked test LL | least swap acceptance | tracker's share of training time |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['epoch']} | {row['log_z']:.2f} ({row['log_z_ess']:.0f}) | {row['log_z_uniform']:.2f} ({row['log_z_uniform_ess']:.0f}) | "
                     f"{row['log_z_tracked']:.2f} ± {row['log_z_tracked_stderr']:.2f} | {row['tracked_minus_ais_log_z']:+.2f} | "
                     f"{row['test_log_likelihood_reference']:.2f} | {row['test_tracked_log_likelihood']:.2f} | "
                     f"{row['swap_acceptance_min']:.3f} | {row['callback_share']:.1%} |")
    (args.out / "pt_mnist.md").write_text("\n".join(lines) + "\n")


class UniformStartAIS(TrainingCallback):
    """AIS from the uniform base after every epoch (``log_z_uniform``, ``log_z_uniform_ess``), timed on the run's clock
    (``reference_seconds``) so that the tracker's share leaves it out; its own generator, so the training is untouched."""

    def __init__(self, num_chains: int, num_steps: int, clock: str) -> None:
        self.estimator = AIS(num_chains=num_chains, num_steps=num_steps, base="uniform")
        self.clock = time.process_time if clock == "cpu" else time.perf_counter

    def start(self, model, train, *, seed: int, state=None) -> None:
        self.generator = torch.Generator(model.device).manual_seed(seed + 7)

    def on_step(self, model) -> None:
        pass

    def on_epoch_end(self, model, epoch: int, splits) -> dict[str, float]:
        began = self.clock()
        estimate = self.estimator(model, generator=self.generator)
        return {"log_z_uniform": estimate.log_z, "log_z_uniform_ess": float(estimate.ess), "reference_seconds": self.clock() - began}


def _setting(text: str) -> tuple[str, bool | int | float]:
    """``KEY=VALUE`` → ``(key, value)``, the value ``true``/``false`` or a number; a bad one exits with the usage line."""
    key, _, value = text.partition("=")
    if value.lower() in ("true", "false"):
        return key, value.lower() == "true"
    try:
        return key, int(value) if value.lstrip("-").isdigit() else float(value)
    except ValueError:
        raise SystemExit(f"--tracker takes KEY=NUMBER or KEY=true/false settings, got {text!r}") from None


if __name__ == "__main__":
    main()
