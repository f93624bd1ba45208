"""Train a composed recipe (``conf/experiment/*.yaml``) on given data, optionally on a model initialised elsewhere.

:func:`pfzoo.app.train` builds everything from the config and leaves the result in a checkpoint. Reproductions need
three things more, which :func:`fit_recipe` adds while keeping the recipe's trainer, objective and optimiser: the data
set they already hold (and evaluate on), a model they built themselves (e.g. sparse coding started from ICA's basis)
or in another dtype (float64 for full-batch L-BFGS), and burn-in sweeps of an epoch-stateful objective before the
first update (EM's latents start at prior draws; an M-step on them would fit the prior, not the posterior).
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

from pfzoo.data.splits import DataSplits
from pfzoo.models.base import EnergyModel
from pfzoo.training.trainer import Trainer
from pfzoo.zoo import load_checkpoint


@dataclass
class RecipeFit:
    """What :func:`fit_recipe` trained and how.

    model: the trained model (trained in place when one was passed in). records: the trainer's per-epoch metrics
    (``metrics.jsonl`` rows, oldest first; each ``loss`` is the epoch's mean loss, for full-batch L-BFGS the loss before
    its step). seconds: wall time of burn-in and training. stop_reason: why the trainer's stopping rule (e.g.
    ``stop_tolerance``) holds after the last epoch, ``None`` when it does not (the run used its epochs). optimizer_state: the optimiser's final ``state_dict()`` (e.g. L-BFGS's
    ``["state"][0]["n_iter"]``), ``None`` when training failed. objective: the trainer's objective after training
    (its state: e.g. EM's adapted HMC step size, PCD's chains). error: why training stopped on a non-finite loss
    (``FloatingPointError``), else ``None``; the model then holds the parameters of the failed epoch.
    """

    model: EnergyModel
    records: list[dict[str, Any]]
    seconds: float
    stop_reason: str | None
    optimizer_state: dict | None
    objective: torch.nn.Module
    error: str | None = None


def fit_recipe(
    cfg: DictConfig,
    data: DataSplits,
    *,
    model: EnergyModel | None = None,
    dtype: torch.dtype | None = None,
    burn_in: int = 0,
    generator: torch.Generator | None = None,
) -> RecipeFit:
    """Train with ``cfg.trainer`` on ``data`` (a composed ``train`` config, e.g. ``compose("train", ["+experiment=..."])``).

    ``model=None`` instantiates ``cfg.model`` with ``num_visible = data.num_features`` and a generator seeded with
    ``cfg.seed`` (then ``init_from_data`` when ``cfg.init_from_data``), as :func:`pfzoo.app.train` does. ``dtype``
    casts the model first (the data follow the model's dtype). ``burn_in`` calls the objective's
    ``prepare(model, data.train, generator=generator)`` that many times under the initial parameters before the
    first epoch. The run directory is temporary: the model is returned, not a checkpoint path.
    """
    if isinstance(burn_in, bool) or not isinstance(burn_in, int) or burn_in < 0:
        raise ValueError(f"burn_in must be a non-negative integer, got {burn_in!r}")
    if model is None:
        model = instantiate(cfg.model, num_visible=data.num_features, generator=torch.Generator().manual_seed(cfg.seed))
        if cfg.get("init_from_data", False):
            model.init_from_data(data.train.to(device=model.device, dtype=model.dtype))
    if dtype is not None:
        model = model.to(dtype)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as run_dir:
        trainer: Trainer = instantiate(cfg.trainer, run_dir=run_dir, estimator=None)
        if burn_in:
            if not trainer.objective.epoch_stateful:
                raise ValueError(f"burn_in needs an objective with prepare(model, data, *, generator); {type(trainer.objective).__name__} has none")
            train = data.train.to(device=model.device, dtype=model.dtype)
            trainer.objective.to(model.device)
            with torch.no_grad():
                for _ in range(burn_in):
                    trainer.objective.prepare(model, train, generator=generator)
        error = None
        try:
            trainer.fit(model, data)
        except FloatingPointError as exc:  # a non-finite loss: the caller reports it
            error = str(exc)
        records = [json.loads(line) for line in trainer.metrics_path.read_text().splitlines() if line.strip()] \
            if trainer.metrics_path.is_file() else []
        state = load_checkpoint(trainer.checkpoint_path)["trainer_state"]["optimizer"] if error is None else None
    reason = None if error is not None else trainer.stop_reason(records)
    return RecipeFit(model, records, time.perf_counter() - began, reason, state, trainer.objective, error)
