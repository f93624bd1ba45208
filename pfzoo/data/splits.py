"""The container every dataset loader returns: named train / test / optional valid splits.

Each split is a float32 tensor ``[N, D]`` with one flattened example per row; all splits
share the width ``D``. ``image_shape`` (e.g. ``(28, 28)``) says how to fold a row back into
an image, and is ``None`` for data that are not images.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch import Tensor


@dataclass(frozen=True, eq=False, repr=False)
class DataSplits:
    """Train ``[N_train, D]``, test ``[N_test, D]`` and optional valid ``[N_valid, D]`` splits."""

    name: str
    train: Tensor
    test: Tensor
    valid: Tensor | None = None
    image_shape: tuple[int, ...] | None = None
    transform: object | None = None  # preprocessing fitted on train (e.g. a PatchTransform), for new data

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
            if width is None:
                width = x.shape[1]
            elif x.shape[1] != width:
                raise ValueError(f"{split} must have {width} columns like train, got shape {tuple(x.shape)}")
        if self.image_shape is not None:
            object.__setattr__(self, "image_shape", tuple(int(s) for s in self.image_shape))
            if math.prod(self.image_shape) != width:
                raise ValueError(f"image_shape {self.image_shape} must have {width} pixels (the number of columns)")

    @property
    def num_features(self) -> int:
        """The width ``D`` of every split."""
        return self.train.shape[1]

    def __repr__(self) -> str:
        valid = None if self.valid is None else tuple(self.valid.shape)
        return (
            f"DataSplits(name={self.name!r}, train={tuple(self.train.shape)}, test={tuple(self.test.shape)}, "
            f"valid={valid}, image_shape={self.image_shape})"
        )
