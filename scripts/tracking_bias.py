"""Where the replica tracker's error sits along the ladder (issue 49, item 3), at one checkpoint of a PT training run.

    python scripts/tracking_bias.py --checkpoint /tmp/pfzoo_track_pt/checkpoint.pt [--ais-steps 10000] [--tracker-seeds 0 1 2]
        [--tracker relax_sweeps=300 ...]

Prints one JSON object:

* ``reference``: log Z_β at every level of the checkpoint's ladder from one AIS run from the uniform base (linear in β,
  ``--ais-steps`` over [0, 1], ``--ais-chains`` chains), read at each level: AIS's partial weights up to β_k estimate
  Z_{β_k} / Z_0 (Neal 2001), so one run gives every level's reference, with its stderr and ESS;
* ``tracked``: for each tracker seed, one observation of :class:`~pfzoo.training.ReplicaPartitionTracker` (its settings
  from ``--tracker``) at the checkpoint, the filter's log Z_β at every level, and its error against the reference per
  level and per bridge (error of level k minus that of level k − 1);
* ``log_f``: quantiles (0, ¼, ½, ¾, 1) of log f(v) = −F(v) at β = 1 of the training's coldest replicas, of the tracker's
  copy's coldest level after the first tracker seed's observation (hot-swept; relaxed with ``--tracker top_levels=relax``),
  of AIS's final states (≈ draws of the model) and of the first 2,000 training rows: how far below the model's typical states the training left its negatives.

The checkpoint must be one the Trainer wrote under ``trainer=pt`` (the objective's replicas are in its trainer state); the
data are binarized MNIST from ``--data-root``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from pfzoo import zoo
from pfzoo.data import binarized_mnist
from pfzoo.data.root import resolve_data_root
from pfzoo.estimators.annealing import anneal
from pfzoo.logmath import summarize_log_weights
from pfzoo.training import PT, ReplicaPartitionTracker

REPO = Path(__file__).resolve().parents[1]
QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)


def objective_from_state(state: dict) -> PT:
    """The PT objective of a checkpoint's trainer state (its ladder and replicas ``chains [R · C, V]``)."""
    betas = state["betas"].tolist()
    objective = PT(k=1, num_chains=state["chains"].shape[0] // len(betas), betas=betas)
    objective.load_state_dict(state)
    return objective


def level_references(path, betas: list[float], num_steps: int, num_chains: int, generator: torch.Generator) -> tuple[list[dict], torch.Tensor]:
    """log Z_β at each of ``betas`` (ascending) from one linear AIS run over [0, 1] with ``num_steps`` steps in all, each
    segment's steps in proportion to its width: ``[{"beta", "log_z", "stderr", "ess"}]``, and the chains' final positions
    ``[num_chains, V]``."""
    state = path.sample_base(num_chains, generator=generator)
    log_weights = torch.zeros(num_chains, dtype=torch.float64)
    rows, previous = [], 0.0
    log_z0 = path.base_log_partition().item()
    for beta in betas:
        steps = max(1, round(num_steps * (beta - previous)))
        result = anneal(path, torch.linspace(previous, beta, steps + 1, dtype=torch.float64), state, generator=generator)
        log_weights, state, previous = log_weights + result.log_weights.double(), result.state, beta
        summary = summarize_log_weights(log_weights)
        rows.append({"beta": beta, "log_z": log_z0 + summary.log_mean.item(), "stderr": summary.stderr.item(), "ess": summary.ess.item()})
    return rows, state.position


def quantiles(values: torch.Tensor) -> list[float]:
    return values.double().quantile(torch.tensor(QUANTILES, dtype=torch.float64)).tolist()


@torch.no_grad()
def measure(model, objective: PT, train: torch.Tensor, *, ais_steps: int, ais_chains: int, tracker_seeds: list[int],
            tracker_settings: dict, seed: int = 0) -> dict:
    """The JSON object of the module docstring for ``model`` and its PT ``objective`` (replicas loaded)."""
    betas = objective.betas.tolist()
    tracked, copy_cold = [], None
    for tracker_seed in tracker_seeds:
        # across_epochs only keeps the observation's states (a first observation is made afresh either way): the tracker's copy
        tracker = ReplicaPartitionTracker(objective, **{**tracker_settings, "across_epochs": True})
        tracker.start(model, train, seed=tracker_seed)
        began = time.process_time()
        tracker._observe(model, anchor=True)
        tracked.append({"seed": tracker_seed, "cpu_seconds": round(time.process_time() - began, 3), "log_z": tracker._filter.mean.tolist(),
                        "stderr": tracker._filter.covariance.diagonal().clamp(min=0).sqrt().tolist(), "sweeps": tracker._sweeps_run})
        if copy_cold is None:
            copy_cold = tracker._kept_positions
        path = tracker._path(model)
    reference, ais_states = level_references(path, betas, ais_steps, ais_chains, torch.Generator(model.device).manual_seed(seed))
    for row in tracked:
        errors = [t - r["log_z"] for t, r in zip(row["log_z"], reference)]
        row["error"] = errors
        row["bridge_error"] = [errors[0]] + [b - a for a, b in zip(errors[:-1], errors[1:])]
    cold = objective.chains.unflatten(0, (len(betas), -1))[-1]
    log_f = {"training_replicas": quantiles(-model.free_energy(cold)), "tracker_copy": quantiles(-model.free_energy(copy_cold[-1])),
             "ais_final_states": quantiles(-model.free_energy(ais_states)),
             "training_data": quantiles(-model.free_energy(train[:2000]))}
    return {"betas": betas, "reference": reference, "tracked": tracked, "log_f_quantiles": list(QUANTILES), "log_f": log_f}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, required=True, help="a PT training run's checkpoint.pt")
    parser.add_argument("--ais-steps", type=lambda v: int(float(v)), default=10_000, help="AIS steps over [0, 1] of the reference")
    parser.add_argument("--ais-chains", type=int, default=100)
    parser.add_argument("--tracker-seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--tracker", nargs="*", default=[], metavar="KEY=VALUE", help="ReplicaPartitionTracker settings (numbers, or top_levels=smc/relax)")
    parser.add_argument("--data-root", type=Path, default=None, help="folder holding binarized_mnist/ (default $PFZOO_DATA or ../shared/data)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="the reference AIS's seed")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    settings = {}
    for text in args.tracker:
        key, _, value = text.partition("=")
        if key == "top_levels":
            settings[key] = value
            continue
        try:
            settings[key] = int(value) if value.lstrip("-").isdigit() else float(value)
        except ValueError:
            parser.error(f"--tracker takes KEY=NUMBER settings, got {text!r}")
    if not args.checkpoint.is_file():
        parser.error(f"--checkpoint must be a checkpoint file, got {args.checkpoint}")
    raw = torch.load(args.checkpoint, map_location="cpu", weights_only=False)
    state = raw.get("trainer_state", {}).get("objective")
    if not state or "betas" not in state:
        parser.error(f"--checkpoint must be written by PT training (no parallel-tempering replicas in {args.checkpoint})")
    data = binarized_mnist(args.data_root or resolve_data_root(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data"))
    result = measure(zoo.load(args.checkpoint), objective_from_state(state), data.train, ais_steps=args.ais_steps, ais_chains=args.ais_chains,
                     tracker_seeds=args.tracker_seeds, tracker_settings=settings, seed=args.seed)
    result["command"] = "python scripts/tracking_bias.py " + " ".join(sys.argv[1:] if argv is None else argv)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
