"""The preprocessing bound to a zoo model's weights (``PretrainedWeights.transforms()``, as torchvision's
``weights.transforms()``): what turns raw inputs into the rows the model was trained on.

- digits and MNIST models take 0/1 pixels: :class:`Binarize` thresholds raw intensities on the data set's own scale
  (scikit-learn's 8×8 digits run 0–16, torchvision's MNIST images 0–255);
- image-patch models take whitened principal components: the data set's :class:`~pfzoo.data.PatchTransform` (log,
  centre, project, whiten), refitted from the card's data config (the same seed gives the same transform);
- spin-glass and Hopfield models take the states themselves: :class:`Identity` only checks the width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch

MNIST_BINARIZATION = 127.5
"""Larochelle & Murray drew their binarisation once at random (each pixel Bernoulli of its intensity); a new image has
no such draw, so its pixels are thresholded at half intensity, the draw's most likely value."""


@dataclass(frozen=True)
class Binarize:
    """Raw images ``[N, H, W]`` or ``[N, H·W]`` (any numeric dtype) to float32 rows ``[N, H·W]`` of ``x > threshold``.

    Attributes:
        threshold: on the raw intensities' own scale (digits: 8 of 16; MNIST: 127.5 of 255).
        num_features: the row width the weights take (64, 784).
        scale: what the raw intensities run up to, for the description.
    """

    threshold: float
    num_features: int
    scale: float

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        rows = _rows(images, self.num_features, "images")
        return (rows > self.threshold).to(torch.float32)

    def __str__(self) -> str:
        return f"pixels > {self.threshold:g} on a 0–{self.scale:g} scale, flattened to {self.num_features} 0/1 values"


@dataclass(frozen=True)
class Identity:
    """States ``[N, num_features]`` passed through as float32: the model takes them as they are."""

    num_features: int

    def __call__(self, states: torch.Tensor) -> torch.Tensor:
        return _rows(states, self.num_features, "states").to(torch.float32)

    def __str__(self) -> str:
        return f"none: the {self.num_features} states as they are"


@dataclass(frozen=True)
class Whiten:
    """Raw patches ``[N, P]`` (or ``[N, s, s]``) to the float32 whitened components ``[N, M]`` the weights take, by the
    data set's :class:`~pfzoo.data.PatchTransform` (``transform``)."""

    transform: Any

    def __call__(self, patches: torch.Tensor) -> torch.Tensor:
        rows = _rows(patches, self.transform.num_pixels, "patches")
        return self.transform.apply(rows.to(torch.float64)).to(torch.float32)

    def __str__(self) -> str:
        return (f"log(x + {self.transform.offset:g}) of {self.transform.num_pixels} raw pixels, centred, projected on "
                f"{self.transform.num_components} principal components and whitened")


def weights_transform(dataset_config: Mapping[str, Any], num_features: int, build: Callable[[Mapping[str, Any]], Any]) -> Callable:
    """The preprocessing of weights trained on the data set ``dataset_config`` (a card's, with ``_target_``), for a
    model of ``num_features`` visible units; ``build`` turns a data config into its :class:`~pfzoo.data.DataSplits`
    (only patch models need it, to refit their whitening)."""
    target = dataset_config["_target_"]
    if target == "pfzoo.data.digits":
        return Binarize(float(dataset_config.get("threshold", 8.0)), num_features, 16.0)
    if target == "pfzoo.data.binarized_mnist":
        return Binarize(MNIST_BINARIZATION, num_features, 255.0)
    if target == "pfzoo.data.mnist" and dataset_config.get("binarize", "threshold") == "threshold":
        return Binarize(float(dataset_config.get("threshold", 0.5)) * 255.0, num_features, 255.0)
    if target == "pfzoo.data.patches":
        return Whiten(build(dataset_config).transform)
    return Identity(num_features)


def _rows(values: torch.Tensor, width: int, name: str) -> torch.Tensor:
    """``values`` as ``[N, width]`` (an ``[N, ...]`` stack of images flattened); ``ValueError`` naming ``name`` otherwise."""
    if not isinstance(values, torch.Tensor) or values.dim() < 2:
        raise ValueError(f"{name} must be a tensor [N, {width}] (or [N, H, W] images), got {getattr(values, 'shape', type(values).__name__)}")
    rows = values.reshape(values.shape[0], -1)
    if rows.shape[1] != width:
        raise ValueError(f"{name} must have {width} values per row, got shape {tuple(values.shape)}")
    return rows
