"""The container every dataset loader returns: named train / test / optional valid splits.

Each split is a float32 tensor ``[N, D]`` with one flattened example per row; all splits
share the width ``D``. ``image_shape`` (e.g. ``(28, 28)``) says how to fold a row back into
an image, and is ``None`` for data that are not images. Labelled data sets (digits, MNIST) also
carry each split's class labels (int64 ``[N]``), for evaluations such as a classifier on a
model's features; the models never see them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

HELD_OUT_CHOICES = ("auto", "valid", "test")
"""The values of :meth:`DataSplits.held_out`'s ``which`` (and the Trainer's ``held_out``)."""


def check_held_out(which: object) -> str:
    """``which`` if it is one of :data:`HELD_OUT_CHOICES`, else ValueError naming them."""
    if which not in HELD_OUT_CHOICES:
        raise ValueError(f"held_out must be one of {', '.join(HELD_OUT_CHOICES)}, got {which!r}")
    return which


@dataclass(frozen=True, eq=False, repr=False)
class DataSplits:
    """Train ``[N_train, D]``, test ``[N_test, D]`` and optional valid ``[N_valid, D]`` splits, with their int64 class
    labels ``[N]`` where the data set has them (``None`` otherwise)."""

    name: str
    train: Tensor
    test: Tensor
    valid: Tensor | None = None
    image_shape: tuple[int, ...] | None = None
    transform: object | None = None  # preprocessing fitted on train (e.g. a PatchTransform), for new data
    train_labels: Tensor | None = None
    test_labels: Tensor | None = None
    valid_labels: Tensor | None = None

    def __post_init__(self) -> None:
        width = None
        for split in ("train", "test", "valid"):
            x = getattr(self, split)
            if x is None and split == "valid":
                continue
            if not isinstance(x, Tensor):
                raise ValueError(f"{split} must be a torch.Tensor, got {type(x).__name__}")
            if x.dim() != 2:
                raise ValueError(f"{split} must have shape [examples, features], got shape {tuple(x.shape)}")
            if not x.is_floating_point():
                raise ValueError(f"{split} must be a floating-point tensor, got dtype {x.dtype}")
            if x.shape[0] == 0 or x.shape[1] == 0:  # a mean over no rows is NaN; a model over no units has nothing to model
                raise ValueError(f"{split} must hold at least one row and one column, got shape {tuple(x.shape)}")
            if width is None:
                width = x.shape[1]
            elif x.shape[1] != width:
                raise ValueError(f"{split} must have {width} columns like train, got shape {tuple(x.shape)}")
        for split in ("train", "test", "valid"):
            labels, x = getattr(self, f"{split}_labels"), getattr(self, split)
            if labels is None:
                continue
            if x is None or not isinstance(labels, Tensor) or labels.dtype != torch.int64 or labels.shape != (x.shape[0],):
                raise ValueError(f"{split}_labels must be an int64 tensor with one label per row of {split}, got "
                                 f"{type(labels).__name__ if not isinstance(labels, Tensor) else (labels.dtype, tuple(labels.shape))}")
        if self.image_shape is not None:
            object.__setattr__(self, "image_shape", tuple(int(s) for s in self.image_shape))
            if math.prod(self.image_shape) != width:
                raise ValueError(f"image_shape {self.image_shape} must have {width} pixels (the number of columns)")

    @property
    def num_features(self) -> int:
        """The width ``D`` of every split."""
        return self.train.shape[1]

    def held_out(self, which: str = "auto") -> tuple[str, Tensor]:
        """The split that judges a model while it trains, as ``(name, [N, D])``: ``which="auto"`` takes ``valid`` where
        the data set has one and ``test`` otherwise; ``"valid"`` and ``"test"`` name it. Choosing epochs or settings by
        the test split would select on the numbers that are then reported, so a run with a validation split is judged
        on it (ValueError for ``"valid"`` on a data set without one, or another ``which``)."""
        if check_held_out(which) == "valid" and self.valid is None:
            raise ValueError(f"held_out='valid' but data set {self.name!r} has no valid split; use 'test' or 'auto'")
        name = "valid" if which == "valid" or (which == "auto" and self.valid is not None) else "test"
        return name, getattr(self, name)

    @property
    def labelled(self) -> bool:
        """Whether the train and test splits carry class labels."""
        return self.train_labels is not None and self.test_labels is not None

    def __repr__(self) -> str:
        valid = None if self.valid is None else tuple(self.valid.shape)
        return (
            f"DataSplits(name={self.name!r}, train={tuple(self.train.shape)}, test={tuple(self.test.shape)}, "
            f"valid={valid}, image_shape={self.image_shape})"
        )
