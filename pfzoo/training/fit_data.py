"""What :meth:`Trainer.fit <pfzoo.training.Trainer.fit>` accepts as data, turned into the tensors it trains on.

The Trainer needs its whole training set in memory: every epoch it draws its own order of the rows from its seeded
generator (so runs are reproducible and resume bit for bit), objectives prepare on the whole set (MPF's θ_old, PCD's
chains, NCE's noise), and the divergence guard and the diagnostics read held-out rows. So a ``Dataset`` or a
``DataLoader`` is read once, at the start of the fit, and its rows stacked into one tensor ``[N, V]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from pfzoo.data.splits import DataSplits
from pfzoo.sampling import bernoulli

FIXED_DRAW_SEED_OFFSET = 1_000_003
"""``fixed_draws`` draws from ``seed +`` this: far from the Trainer's streams (``seed + 0 … 2``, callbacks ``seed + 3 + i``)
and from :class:`~pfzoo.training.GreedyTrainer`'s per-layer seeds (``seed + 4i …``), so no stream is reused."""
READ_BATCH = 1024
"""Rows per batch when a ``Dataset`` is read (its items stacked by torch's default collate)."""
ACCEPTED = "a pfzoo.data.DataSplits, a torch.Tensor [N, V], a torch.utils.data.Dataset or a torch.utils.data.DataLoader"


@dataclass(frozen=True)
class TrainingData:
    """The rows one fit trains on and judges the model by, with what objectives read of the data set
    (:meth:`Objective.attach_data <pfzoo.training.Objective.attach_data>`: ``name``, ``image_shape``).

    Attributes:
        name: the data set's name (``"data"`` for rows given without one).
        train: ``[N, V]`` training rows.
        held_out_name: ``"valid"`` or ``"test"``, the name the held-out split's metrics carry; ``None`` without one.
        held_out: ``[M, V]`` held-out rows, or ``None``: then the diagnostics, the estimator and the divergence guard
            read the training rows (metrics named ``train_...``).
        image_shape: how a row folds into an image (``(28, 28)``), or ``None``.
        labels: the argument each split came from, for error messages (``{"train": "data.train", ...}``).
    """

    name: str
    train: Tensor
    held_out_name: str | None
    held_out: Tensor | None
    image_shape: tuple[int, ...] | None
    labels: dict[str, str]


def training_data(data, valid=None, *, held_out: str = "auto") -> TrainingData:
    """``data`` (and ``valid``) as a :class:`TrainingData`.

    ``data`` is one of:

    * a :class:`~pfzoo.data.DataSplits`: trains on ``data.train``, judged on the split ``held_out`` names
      (:meth:`DataSplits.held_out <pfzoo.data.DataSplits.held_out>`); ``valid`` must then be ``None``;
    * a tensor ``[N, V]`` (one example per row; ``[N, *shape]`` is flattened to ``[N, prod(shape)]``);
    * a map-style or iterable ``torch.utils.data.Dataset`` whose items are tensors ``[*shape]`` or tuples/lists whose
      first element is one (``(x, y)``: ``x`` is taken, labels are never used);
    * a ``torch.utils.data.DataLoader`` yielding batches ``[B, *shape]`` or tuples/lists whose first element is one
      (``(x, y)`` batches: ``x`` is taken). It is iterated once, in its own order; its batch size and shuffling do not
      shape the training (the Trainer draws its own minibatches from its seed), so a loader with ``shuffle=False``
      is as good as any, and one that shuffles from torch's global generator makes the run's data order depend on it.

    * a :class:`TrainingData`, taken as it is (a :class:`~pfzoo.training.GreedyTrainer` hands each layer's Trainer the
      rows mapped up to it this way, keeping the held-out split's name).

    ``valid`` is ``None`` (no held-out data: the model is judged on its training rows) or a tensor, ``Dataset`` or
    ``DataLoader`` as above, named ``"test"`` when ``held_out="test"`` and ``"valid"`` otherwise. Rows are flattened
    from ``[*shape]``; ``image_shape`` is ``shape`` when it is ``(H, W)`` or ``(1, H, W)`` (torchvision's images).
    Anything else is refused in one line naming the argument and what was expected.
    """
    if isinstance(data, (DataSplits, TrainingData)) and valid is not None:
        raise ValueError(f"valid must be None when data is a {type(data).__name__} (it holds its own held-out data), "
                         f"got {type(valid).__name__}")
    if isinstance(data, TrainingData):
        return data
    if isinstance(data, DataSplits):
        name, split = data.held_out(held_out)
        return TrainingData(data.name, data.train, name, split, data.image_shape, {"train": "data.train", name: f"data.{name}"})
    train, image_shape = rows(data, "data")
    if valid is None:
        return TrainingData("data", train, None, None, image_shape, {"train": "data"})
    held, held_shape = rows(valid, "valid")
    if held.shape[1:] != train.shape[1:]:
        raise ValueError(f"valid must have {train.shape[1]} features per row like data, got rows of {held.shape[1]}")
    name = "test" if held_out == "test" else "valid"
    return TrainingData("data", train, name, held, image_shape or held_shape, {"train": "data", name: "valid"})


def rows(source, argument: str) -> tuple[Tensor, tuple[int, ...] | None]:
    """``source`` (a tensor, ``Dataset`` or ``DataLoader``; :func:`training_data`) as ``[N, V]`` rows and the image shape
    of one row (``None`` when a row is no 2-d image)."""
    if isinstance(source, Tensor):
        if source.dim() < 2:
            raise ValueError(f"{argument} must be a tensor [N, V] with one example per row, got shape {tuple(source.shape)}")
        batches = [source]
    elif isinstance(source, DataLoader):
        batches = [first_tensor(batch, argument, "yields") for batch in source]
    elif isinstance(source, Dataset):
        reader = DataLoader(source, batch_size=READ_BATCH, shuffle=False)
        batches = [first_tensor(batch, argument, "holds") for batch in reader]
    else:
        raise ValueError(f"{argument} must be {ACCEPTED}, got {type(source).__name__}"
                         + ("; torch.as_tensor(x) makes it a tensor" if isinstance(source, np.ndarray) else ""))
    if not batches or sum(batch.shape[0] for batch in batches) == 0:
        raise ValueError(f"{argument} must hold at least one example, got none")
    shape = batches[0].shape[1:]
    for batch in batches:
        if batch.dim() < 2 or batch.shape[1:] != shape:
            raise ValueError(f"{argument}'s examples must all have one shape, got {tuple(shape)} and {tuple(batch.shape[1:])}")
    flat = torch.cat([batch.reshape(batch.shape[0], math.prod(shape)) for batch in batches])
    image = tuple(shape[1:]) if len(shape) == 3 and shape[0] == 1 else tuple(shape)
    return flat, image if len(image) == 2 else None


def first_tensor(batch, argument: str, verb: str) -> Tensor:
    """A batch's examples ``[B, *shape]``: the batch itself, or the first element of an ``(x, y, ...)`` tuple or list."""
    if isinstance(batch, (tuple, list)) and batch:
        batch = batch[0]
    if not isinstance(batch, Tensor):
        raise ValueError(f"{argument} {verb} {type(batch).__name__} batches; expected tensors [B, V] or (x, y) tuples whose x is a tensor")
    if batch.dim() < 2:  # a Dataset of scalars, or a loader with batch_size=None (single examples, no batch dimension)
        raise ValueError(f"{argument} {verb} batches of shape {tuple(batch.shape)}; expected batches [B, V] of B examples "
                         f"(a DataLoader needs a batch_size)")
    return batch


def held_out_name(splits: Mapping[str, Tensor]) -> str:
    """The split that judges the model: the one beside ``"train"`` in ``splits``, or ``"train"`` when there is none."""
    return next((name for name in splits if name != "train"), "train")


def check_probabilities(split: Tensor, name: str) -> None:
    """Refuse rows ``[N, V]`` with a value outside [0, 1] (or NaN) in one line: with ``binarize`` they are probabilities."""
    outside = ~((split >= 0) & (split <= 1))
    if outside.any():
        row, column = (int(i) for i in outside.nonzero()[0])
        raise ValueError(f"{name} must hold probabilities in [0, 1] with trainer.binarize (each minibatch a Bernoulli draw "
                         f"of its rows), got {split[row, column].item()} at row {row}, column {column}")


def fixed_draws(splits: Mapping[str, Tensor], seed: int) -> dict[str, Tensor]:
    """One draw ``x ~ Bernoulli(p)`` of every split ``{name: [N, V] probabilities}``, from a generator on their device
    seeded with ``seed + FIXED_DRAW_SEED_OFFSET``: the binary rows a ``binarize`` run's diagnostics, objective set-up,
    callbacks and estimator read, the same at every epoch and on every rank (a resumed run draws them again alike)."""
    generator = torch.Generator(next(iter(splits.values())).device).manual_seed(seed + FIXED_DRAW_SEED_OFFSET)
    return {name: bernoulli(split, generator=generator) for name, split in splits.items()}


def minibatch(train: Tensor, rows: Tensor, probabilities: Tensor | None, *, generator: torch.Generator) -> Tensor:
    """The minibatch ``[B, V]`` of the training rows numbered ``rows [B]``: a copy of ``train``'s (``index_select``, a
    fifth of advanced indexing's time on the CPU), or with ``binarize`` a fresh draw ``Bernoulli(probabilities[rows])``."""
    if probabilities is None:
        return train.index_select(0, rows)
    return bernoulli(probabilities.index_select(0, rows), generator=generator)
