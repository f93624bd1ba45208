"""A zoo model's training time as its card states it: summed from the run's ``metrics.jsonl`` (the epochs' own seconds, so
time paused between sessions does not count), with the trained models it started from named (their time is on their own
cards)."""

from __future__ import annotations

import json
from pathlib import Path


def duration(seconds: float) -> str:
    """``42.0 s``, ``12.5 min`` or ``3.20 h``."""
    return f"{seconds:.1f} s" if seconds < 60 else f"{seconds / 60:.1f} min" if seconds < 3600 else f"{seconds / 3600:.2f} h"


def training_record(run_dir: Path, machine: str, config: dict | None = None) -> dict | None:
    """``{epochs, seconds, machine[, pretrained]}`` of the training run in ``run_dir`` from its ``metrics.jsonl`` (the
    epochs' seconds and diagnostics' seconds summed, so time spent paused between sessions does not count); ``None``
    without one. A greedy run (a DBN) keeps each layer's epochs in ``layer<i>/metrics.jsonl``: their times are summed,
    ``epochs`` is the most any layer trained, and the layers taken from trained models are listed under ``pretrained``
    (their training time is on their own cards), as is the trained RBM a DBM recipe of ``config`` (the run's composed
    config) starts from (:func:`pfzoo.training.start_dbm_from_rbm`)."""
    histories = sorted(run_dir.glob("layer*/metrics.jsonl")) or [run_dir / "metrics.jsonl"]
    lines = [json.loads(line) for history in histories if history.is_file() for line in history.read_text().splitlines() if line.strip()]
    if not lines:
        return None
    seconds = sum(line.get("seconds", 0.0) + line.get("evaluation_seconds", 0.0) for line in lines)
    record = {"epochs": max(line.get("epoch", 0) for line in lines), "seconds": round(seconds, 1), "machine": machine}
    top = run_dir / "metrics.jsonl"
    pretrained = [line["pretrained"] for line in map(json.loads, top.read_text().splitlines() if top.is_file() else []) if "pretrained" in line]
    pretrained += [source for source in [started_from_rbm(config or {})] if source and source not in pretrained]
    return record | ({"pretrained": pretrained} if pretrained else {})


def started_from_rbm(config: dict) -> str | None:
    """The trained RBM (a zoo name or a checkpoint path) a DBM recipe's joint training starts from: the ``rbm`` of its
    ``trainer.objective.pretrain`` when that is :func:`pfzoo.training.start_dbm_from_rbm`; ``None`` otherwise."""
    pretrain = ((config.get("trainer") or {}).get("objective") or {}).get("pretrain") or {}
    return pretrain.get("rbm") if str(pretrain.get("_target_", "")).endswith("start_dbm_from_rbm") else None


def training_fact(training: dict) -> str:
    """The card's training-time line, e.g. ``600 epochs, 5.20 h on a 2-core … CPU``; a greedy run's also names the
    layers it took from trained models."""
    fact = f"{training['epochs']:,} epochs, {duration(training['seconds'])} (sum of the epochs' times in metrics.jsonl) on {training['machine']}"
    pretrained = training.get("pretrained")
    return fact + (f"; the bottom layer{'s are' if len(pretrained) > 1 else ' is'} {', '.join(f'`{name}`' for name in pretrained)}, "
                   "trained by its own recipe (its card gives its time)" if pretrained else "")
