"""A run's ``checkpoint.pt``: what the Trainer saves to resume bit for bit, written atomically, and the checks that
refuse a resume under other settings.

The file is :func:`pfzoo.zoo.save`'s (model state dict and config, the run's config) with a ``trainer_state``::

    {"epoch": int, "optimizer": optimizer.state_dict(), "objective": objective.state_dict(),
     "generators": {"shuffle": ByteTensor, "sampling": ByteTensor},
     "ranks": [{"objective": state_dict, "sampling": ByteTensor}, ...],   # only from a run under a process group
     "callbacks": [callback.state_dict(), ...]}                          # only from a run with callbacks

``"ranks"`` holds every rank's objective state (e.g. its PCD chains) and sampling stream in rank order (``"objective"``
and ``generators["sampling"]`` are rank 0's); a checkpoint without it counts as one rank's.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Any, Mapping

import torch
from torch import nn

from pfzoo.models.base import EnergyModel
from pfzoo.zoo import load_checkpoint, save
from pfzoo.zoo.checkpoints import check_state_dict

logger = logging.getLogger(__name__)

CHECKPOINT_FILE = "checkpoint.pt"
RESUMABLE_KEYS = ("trainer.epochs", "run_dir", "resume", "trainer.progress", "progress", "data.root", "dataset.root", "device",
                  "metrics_csv", "tensorboard", "trainer.held_out", "trainer.divergence", "trainer.clock",
                  "trainer.metrics_rows", "trainer.average_parameters", "estimator")
"""Config keys a resumed run may change: the number of epochs, where the run and its data live, progress bars, which
metrics files it writes besides metrics.jsonl, which split and how many of its rows its diagnostics read, what the divergence guard does and
which clock its timings read (older runs' configs lack those keys; none of them touches the training), the estimator of its
held-out log-likelihoods and closing figure (its whole subtree: it reads the model and never trains it, so a resumed run
may measure with more steps, and an estimator setting added since cannot strand a long run), and the device (a long run
started on a CPU may go on on a GPU: see :func:`restore_generator`), and the averaging of the parameters (it watches the
updates and never changes them; :class:`~pfzoo.training.ParameterAveraging` refuses a resume that would leave updates out
of its average)."""


class CheckpointStore:
    """``<run_dir>/checkpoint.pt``: read, written atomically (:func:`pfzoo.zoo.save` writes a temporary file and
    renames it), and checked before a resume."""

    def __init__(self, run_dir: str | os.PathLike) -> None:
        self.path = Path(run_dir) / CHECKPOINT_FILE

    def read(self) -> dict[str, Any] | None:
        """The raw checkpoint (:func:`pfzoo.zoo.load_checkpoint`), ``None`` when there is none."""
        return load_checkpoint(self.path) if self.path.is_file() else None

    def write(self, model: EnergyModel, trainer_state: dict[str, Any], config: dict | None) -> None:
        """Replace the checkpoint with ``model``'s parameters, ``config`` and ``trainer_state`` (module docstring)."""
        save(model, self.path, config=config, trainer_state=trainer_state)
        logger.debug("saved checkpoint after epoch %d to %s", trainer_state["epoch"], self.path)

    def remove_stale_temporaries(self) -> None:
        """Delete ``.checkpoint.pt.*.tmp`` files: a save killed mid-write (SIGKILL skips its clean-up) leaves one, and
        only one run writes to a run directory, so any found before the first save belong to no live writer."""
        for stale in self.path.parent.glob(f".{self.path.name}.*.tmp"):
            logger.info("removing %s, left by a checkpoint write that was killed", stale)
            stale.unlink(missing_ok=True)

    def check_resumable(self, checkpoint: Mapping[str, Any], model: EnergyModel, config: dict | None, world_size: int) -> None:
        """Refuse (``ValueError``, one line) to resume ``model`` from ``checkpoint`` unless it holds a trainer state for
        a model of the same family and config, was written by ``world_size`` ranks, and was trained under ``config``
        up to :data:`RESUMABLE_KEYS` (more epochs, where the run lives, whether bars show): any other difference (a
        learning rate, a seed, a chain count) would silently continue the old settings' optimiser state and random
        streams under the new ones' name, and another number of ranks has no counterpart for their chains and streams."""
        name = model.registry_name
        if checkpoint["trainer_state"] is None or checkpoint["model"] != name or checkpoint["model_config"] != model.config():
            raise ValueError(
                f"{self.path} cannot resume this run: it holds a {checkpoint['model']!r} model with config "
                f"{checkpoint['model_config']} (trainer state {'absent' if checkpoint['trainer_state'] is None else 'present'}), "
                f"expected a {name!r} model with config {model.config()}"
            )
        check_state_dict(self.path, model, checkpoint["state_dict"])  # same config, tensors edited since: one line, not torch's
        differences = config_differences(checkpoint["config"], config)
        if differences:
            raise ValueError(
                f"resume=true refused: the config differs from the one {self.path} was trained with in "
                f"{'; '.join(differences)} (only {', '.join(RESUMABLE_KEYS)} may change; start a new run_dir instead)"
            )
        ranks = checkpoint["trainer_state"].get("ranks")
        saved = 1 if ranks is None else len(ranks)
        if saved != world_size:
            raise ValueError(
                f"resume=true refused: {self.path} was trained on {saved} rank(s) but this run has {world_size} "
                f"(resume with torchrun --nproc_per_node={saved}, or start a new run_dir)"
            )


def rank_state(objective: nn.Module, sampling: torch.Generator) -> dict[str, Any]:
    """One rank's entry of ``trainer_state["ranks"]``: its objective state (on the CPU) and sampling stream."""
    return {"objective": {key: value.detach().cpu() for key, value in objective.state_dict().items()}, "sampling": sampling.get_state()}


def trainer_state(
    epoch: int, optimizer: torch.optim.Optimizer, objective: nn.Module, generators: Mapping[str, torch.Generator], ranks: list | None,
    callbacks: list | None = None,
) -> dict[str, Any]:
    """The ``trainer_state`` after ``epoch`` (module docstring); ``ranks``: every rank's :func:`rank_state`, or ``None``
    without a process group; ``callbacks``: the Trainer's callbacks' states (:mod:`pfzoo.training.callbacks`), or
    ``None``/empty without callbacks."""
    state = {
        "epoch": epoch,
        "optimizer": optimizer.state_dict(),
        "objective": objective.state_dict(),
        "generators": {name: generator.get_state() for name, generator in generators.items()},
    }
    if ranks is not None:
        state["ranks"] = ranks
    if callbacks:
        state["callbacks"] = callbacks
    return state


def restore_trainer_state(
    checkpoint: Mapping[str, Any],
    model: EnergyModel,
    optimizer: torch.optim.Optimizer,
    objective: nn.Module,
    generators: Mapping[str, torch.Generator],
    rank: int,
) -> int:
    """Load a checkpoint that passed :meth:`CheckpointStore.check_resumable` into the model, optimiser, objective and
    generators, with rank ``rank``'s objective state and sampling stream; returns the checkpoint's epoch."""
    state = checkpoint["trainer_state"]
    ranks = state.get("ranks")
    model.load_state_dict(checkpoint["state_dict"])
    optimizer.load_state_dict(state["optimizer"])
    own = {"objective": state["objective"], "sampling": state["generators"]["sampling"]} if ranks is None else ranks[rank]
    objective.load_state_dict(own["objective"])
    restore_generator(generators["shuffle"], state["generators"]["shuffle"])
    restore_generator(generators["sampling"], own["sampling"])
    return state["epoch"]


def restore_generator(generator: torch.Generator, saved_state: torch.Tensor) -> None:
    """Set ``generator`` to ``saved_state`` (a ``get_state()`` ByteTensor). A state saved by a generator of another
    device type (the CPU's Mersenne twister vs CUDA's Philox: different sizes) cannot be set; the generator is then
    seeded from a hash of the saved state instead, so a run moved between devices still goes on reproducibly (same
    checkpoint, same device type, same numbers), though not with the numbers the old device would have drawn."""
    if saved_state.numel() == generator.get_state().numel():
        generator.set_state(saved_state)
        return
    digest = hashlib.sha256(saved_state.cpu().numpy().tobytes()).digest()
    generator.manual_seed(int.from_bytes(digest[:8], "little") >> 1)
    logger.info("a generator state saved on another device type was re-seeded from its hash (the run moved between devices)")


def config_differences(stored: Mapping | None, current: Mapping | None, prefix: str = "") -> list[str]:
    """``"key: old → new"`` for every leaf that differs between two plain config dicts, :data:`RESUMABLE_KEYS` aside.
    Nothing is compared when either is ``None`` (a run started from the library without a config). A key absent from
    one side and ``None``, ``False`` or ``0`` on the other is no difference: a setting, switch or count added to the
    configs since the run started, at its off value, changes nothing (a long run can then resume under a newer pfzoo)."""
    if stored is None or current is None:
        return []
    differences = []
    for key in sorted(set(stored) | set(current)):
        path = f"{prefix}{key}"
        if path in RESUMABLE_KEYS:
            continue
        old, new = stored.get(key, "<absent>"), current.get(key, "<absent>")
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            differences += config_differences(old, new, f"{path}.")
        elif old != new and not _added_at_off_value(old, new) and not _added_at_off_value(new, old):
            differences.append(f"{path}: {old!r} → {new!r}")
    return differences


def _added_at_off_value(old: Any, new: Any) -> bool:
    """Whether ``new`` is a setting absent from the old config at its off value (``None``, ``False``, ``0``)."""
    off = new is None or new is False or (type(new) in (int, float) and new == 0)
    return isinstance(old, str) and old == "<absent>" and off
