"""Natural image patches, preprocessed as in HAIS §4 (Sohl-Dickstein & Culpepper 2011).

Random ``patch_size`` x ``patch_size`` patches (16 x 16, flattened row by row into P = 256 pixels) are
log-transformed, the pixel mean of the training patches is subtracted, and they are projected onto
the top ``num_components`` principal components (M = 36) and whitened. The :class:`PatchTransform` is
fitted on the training patches only and the same one maps the test patches; :func:`patches` returns
it as ``DataSplits.transform`` so that new data get the same transform, and it saves as plain tensors.

Log of zero: the embedded photos contain black pixels (value 0), so the transform takes
``log(x + offset)`` with ``offset = LOG_OFFSET = 1``, one grey level. Pixel values are raw grey
levels (0..255 for the embedded photos, camera counts up to a few thousand for van Hateren), so
the offset moves the log of a typical pixel by about one percent of its value and maps 0 to 0.

Train / test separation: every image is cut into square blocks of ``2 * patch_size`` pixels (32 x 32),
numbered from the top-left corner; a block in an odd row *and* an odd column is test, the others are
train (a quarter of the area is test), and a patch lies inside one block. Train and test patches thus
never share a pixel, while the test blocks form a fine lattice over every image, so both splits see
the same kinds of content. Patches straddling block edges are never drawn; edge blocks narrower than
``patch_size`` are unused.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from pfzoo.data.images import IMAGE_SUFFIXES, embedded_images, read_image
from pfzoo.data.root import ENV_VAR, resolve_data_root
from pfzoo.data.splits import DataSplits
from pfzoo.validation import all_finite, check_choice, describe

logger = logging.getLogger(__name__)

LOG_OFFSET = 1.0
SOURCES = ("embedded", "vanhateren")
BLOCK_PATCHES = 2  # side of a train / test block, in patch sizes


@dataclass(frozen=True, eq=False)
class PatchTransform:
    """Raw patches ``[N, P]`` to whitened principal components ``[N, M]``: log, subtract mean, project, whiten.

    ``mean [P]``: pixel mean of the log training patches; ``components [M, P]``: orthonormal rows, the
    top-M principal directions in order of decreasing variance; ``scales [M]``: 1 / sqrt(variance) of
    each direction; ``offset``: added to the pixels before the log. Tensors are stored as float64.
    Not an ``nn.Module``, whose own ``apply`` this class's :meth:`apply` would shadow.
    """

    mean: Tensor
    components: Tensor
    scales: Tensor
    offset: float = LOG_OFFSET

    def __post_init__(self) -> None:
        for name in ("mean", "components", "scales"):
            value = getattr(self, name)
            if not isinstance(value, Tensor) or not value.is_floating_point():
                raise ValueError(f"{name} must be a floating-point torch.Tensor, got {type(value).__name__}")
            object.__setattr__(self, name, value.to(torch.float64))
        if self.mean.dim() != 1:
            raise ValueError(f"mean must have shape [P], got shape {tuple(self.mean.shape)}")
        num_pixels = self.mean.shape[0]
        if self.components.dim() != 2 or self.components.shape[1] != num_pixels:
            raise ValueError(
                f"components must have shape [M, {num_pixels}], got shape {tuple(self.components.shape)}"
            )
        if self.scales.shape != self.components.shape[:1]:
            raise ValueError(
                f"scales must have shape [{self.components.shape[0]}], got shape {tuple(self.scales.shape)}"
            )
        object.__setattr__(self, "offset", _check_offset(self.offset))

    @property
    def num_pixels(self) -> int:
        """The width ``P`` of a raw patch."""
        return self.mean.shape[0]

    @property
    def num_components(self) -> int:
        """The width ``M`` of a transformed patch."""
        return self.components.shape[0]

    def apply(self, raw_patches: Tensor) -> Tensor:
        """``((log(x + offset) - mean) @ components.T) * scales``: raw ``[N, P]`` to float64 ``[N, M]``.

        Computed in float64 on the device of ``raw_patches``.
        """
        centred = _log_pixels(raw_patches, self.offset, self.num_pixels) - self.mean.to(raw_patches.device)
        return (centred @ self.components.to(raw_patches.device).T) * self.scales.to(raw_patches.device)

    def state_dict(self) -> dict[str, Tensor]:
        """Plain tensors ``mean``, ``components``, ``scales`` and a 0-dim ``offset``; loads with ``weights_only``."""
        return {
            "mean": self.mean,
            "components": self.components,
            "scales": self.scales,
            "offset": torch.tensor(self.offset, dtype=torch.float64),
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Tensor]) -> PatchTransform:
        """The transform saved by :meth:`state_dict`; raises ``ValueError`` naming missing or unexpected keys."""
        expected = {"mean", "components", "scales", "offset"}
        if set(state) != expected:
            raise ValueError(f"state must have the keys {sorted(expected)}, got {sorted(state)}")
        return cls(state["mean"], state["components"], state["scales"], float(state["offset"]))


def fit_patch_transform(
    raw_patches: Tensor, num_components: int = 36, *, offset: float = LOG_OFFSET
) -> PatchTransform:
    """Fit the :class:`PatchTransform` of raw patches ``[N, P]`` keeping the top ``num_components`` directions.

    The covariance of the centred log patches is normalised by N, so the transformed ``raw_patches``
    have zero mean and covariance ``Z.T @ Z / N`` equal to the identity up to rounding. Each
    component's sign makes its largest-magnitude entry positive, so the fit is reproducible.
    Raises ``ValueError`` if ``num_components`` is not in [1, P], if there are not more patches than
    components, or if the patches span fewer than ``num_components`` directions.
    """
    if not isinstance(raw_patches, Tensor) or raw_patches.dim() != 2:
        raise ValueError(f"raw_patches must be a torch.Tensor of shape [N, P], got {_describe(raw_patches)}")
    num_patches, num_pixels = raw_patches.shape
    if isinstance(num_components, bool) or not isinstance(num_components, int) or not 1 <= num_components <= num_pixels:
        raise ValueError(
            f"num_components must be an integer in [1, {num_pixels}] (pixels per patch), got {num_components!r}"
        )
    if num_patches <= num_components:
        raise ValueError(
            f"raw_patches must hold more than num_components = {num_components} patches, got {num_patches}"
        )
    log_pixels = _log_pixels(raw_patches, _check_offset(offset), num_pixels)
    mean = log_pixels.mean(dim=0)
    centred = log_pixels - mean
    variances, vectors = torch.linalg.eigh(centred.T @ centred / num_patches)  # ascending order
    variances = variances.flip(0)[:num_components]
    components = vectors.flip(1)[:, :num_components].T.contiguous()
    if variances[-1] <= variances[0] * num_pixels * torch.finfo(torch.float64).eps:
        raise ValueError(
            f"raw_patches span fewer than num_components = {num_components} directions "
            f"(variance of component {num_components} is {variances[-1].item():.3g}); use fewer components"
        )
    largest = components.gather(1, components.abs().argmax(dim=1, keepdim=True))
    return PatchTransform(mean, components * largest.sign(), variances.rsqrt(), offset)


def sample_patches(
    images: Sequence[Tensor | np.ndarray],
    num_patches: int,
    patch_size: int = 16,
    *,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``num_patches`` random patches ``[N, patch_size ** 2]`` (float64, CPU, flattened row by row).

    ``images`` are 2-D arrays ``[H_k, W_k]`` of any sizes of at least ``patch_size`` x ``patch_size``.
    The top-left corner of each patch is uniform over all valid positions of all images, so an
    image contributes in proportion to its number of positions ``(H_k - patch_size + 1) * (W_k - patch_size + 1)``.
    """
    images = _check_images(images, patch_size)
    _check_int("num_patches", num_patches, 0)
    regions = torch.tensor([[k, 0, 0, *image.shape] for k, image in enumerate(images)])
    return _sample_regions(images, regions, num_patches, patch_size, generator)


def split_patches(
    images: Sequence[Tensor | np.ndarray],
    num_train: int,
    num_test: int,
    patch_size: int = 16,
    *,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Raw train ``[num_train, P]`` and test ``[num_test, P]`` patches from disjoint blocks of the images.

    Square blocks of ``2 * patch_size`` pixels a side; a block is test when both its block row and
    column are odd (see the module docstring). Each split's patch corners are uniform over the valid
    positions inside its blocks, train drawn first. Raises ``ValueError`` if no image holds a test
    block, i.e. none has at least ``3 * patch_size`` rows and columns.
    """
    images = _check_images(images, patch_size)
    _check_int("num_train", num_train, 0)
    _check_int("num_test", num_test, 0)
    size = BLOCK_PATCHES * patch_size
    train, test = [], []
    for k, image in enumerate(images):
        height, width = image.shape
        tops, lefts = torch.meshgrid(torch.arange(0, height, size), torch.arange(0, width, size), indexing="ij")
        heights, widths = (height - tops).clamp(max=size), (width - lefts).clamp(max=size)
        blocks = torch.stack([torch.full_like(tops, k), tops, lefts, heights, widths], dim=-1)
        usable = (heights >= patch_size) & (widths >= patch_size)
        is_test = (tops // size % 2 == 1) & (lefts // size % 2 == 1)
        train.append(blocks[usable & ~is_test])
        test.append(blocks[usable & is_test])
    train, test = torch.cat(train), torch.cat(test)
    if len(test) == 0:
        raise ValueError(
            f"images are too small for a test block: need an image with at least {size + patch_size} rows and "
            f"columns (blocks of {size} x {size} pixels), got shapes {[tuple(i.shape) for i in images]}"
        )
    return (
        _sample_regions(images, train, num_train, patch_size, generator),
        _sample_regions(images, test, num_test, patch_size, generator),
    )


def patches(
    source: str = "embedded",
    root: str | os.PathLike | None = None,
    num_train: int = 50000,
    num_test: int = 10000,
    patch_size: int = 16,
    num_components: int = 36,
    seed: int = 0,
) -> DataSplits:
    """Whitened natural image patches: train ``[num_train, M]``, test ``[num_test, M]`` float32, M = ``num_components``.

    ``source="embedded"`` uses scikit-learn's two photos (:func:`pfzoo.data.images.embedded_images`)
    and ignores ``root``; ``"vanhateren"`` reads every ``.iml``, ``.imc``, ``.tif`` and ``.tiff`` file
    (any case, sorted by path) in ``<root>/natural_images`` and its subfolders. Patches come from
    :func:`split_patches` with a generator seeded by ``seed`` (same seed, identical tensors), the
    :class:`PatchTransform` is fitted on the train patches only and applied to both splits, and it is
    returned as ``transform``. ``image_shape`` is ``None``: the columns are components, not pixels.
    """
    check_choice(source, "source", SOURCES)
    _check_int("patch_size", patch_size, 1)
    _check_int("num_components", num_components, 1)
    if isinstance(num_train, bool) or not isinstance(num_train, int) or num_train <= num_components:
        raise ValueError(
            f"num_train must be an integer > num_components = {num_components} (to fit the PCA), got {num_train!r}"
        )
    _check_int("num_test", num_test, 1)
    if num_components > patch_size**2:
        raise ValueError(f"num_components must be at most patch_size ** 2 = {patch_size**2}, got {num_components}")
    images = embedded_images() if source == "embedded" else _read_image_folder(root)
    generator = torch.Generator().manual_seed(seed)
    raw_train, raw_test = split_patches(images, num_train, num_test, patch_size, generator=generator)
    transform = fit_patch_transform(raw_train, num_components)
    splits = DataSplits(
        name="patches",
        train=transform.apply(raw_train).float(),
        test=transform.apply(raw_test).float(),
        transform=transform,
    )
    logger.info("loaded %r from %d %s images", splits, len(images), source)
    return splits


def _read_image_folder(root: str | os.PathLike | None) -> list[np.ndarray]:
    """Every image file under ``<root>/natural_images``, sorted by path; ``FileNotFoundError`` if none."""
    folder = resolve_data_root(root) / "natural_images"
    paths = sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
    if not paths:
        raise FileNotFoundError(
            f"no natural images ({', '.join('*' + s for s in IMAGE_SUFFIXES)}) found in {folder} or its "
            f"subfolders. Set the root with data.root=... or the environment variable {ENV_VAR}."
        )
    return [read_image(p) for p in paths]


def _sample_regions(
    images: list[Tensor], regions: Tensor, num_patches: int, patch_size: int, generator: torch.Generator | None
) -> Tensor:
    """Patches ``[num_patches, patch_size ** 2]`` with corners uniform over the valid positions of ``regions``.

    ``regions [R, 5]`` rows are (image index, top, left, height, width), each at least ``patch_size``
    high and wide; a patch lies inside one region. Vectorised over patches, one step per image.
    """
    rows, cols = regions[:, 3] - patch_size + 1, regions[:, 4] - patch_size + 1
    ends = torch.cumsum(rows * cols, dim=0)
    flat = torch.randint(int(ends[-1]), (num_patches,), generator=generator)
    region = torch.searchsorted(ends, flat, right=True)
    local = flat - (ends - rows * cols)[region]  # index among the region's positions, row by row
    which = regions[region, 0]
    tops = regions[region, 1] + local // cols[region]
    lefts = regions[region, 2] + local % cols[region]
    out = torch.empty(num_patches, patch_size * patch_size, dtype=torch.float64)
    order = torch.argsort(which, stable=True)
    for image, mine in zip(images, torch.split(order, torch.bincount(which, minlength=len(images)).tolist())):
        windows = image.unfold(0, patch_size, 1).unfold(1, patch_size, 1)  # view [H - p + 1, W - p + 1, p, p]
        out[mine] = windows[tops[mine], lefts[mine]].reshape(len(mine), patch_size * patch_size)
    return out


def _log_pixels(raw_patches: Tensor, offset: float, num_pixels: int) -> Tensor:
    """``log(raw_patches + offset)`` in float64 after checking the shape ``[N, num_pixels]`` and the values."""
    if not isinstance(raw_patches, Tensor) or raw_patches.dim() != 2 or raw_patches.shape[1] != num_pixels:
        raise ValueError(f"raw_patches must be a torch.Tensor of shape [N, {num_pixels}], got {_describe(raw_patches)}")
    pixels = raw_patches.to(torch.float64) + offset
    if not all_finite(pixels):
        raise ValueError("raw_patches must be finite, got NaN or inf")
    if len(pixels) and pixels.min() <= 0:
        raise ValueError(
            f"raw_patches must exceed -offset = {-offset} (the transform takes log(x + offset)), "
            f"got minimum {pixels.min().item() - offset}"
        )
    return pixels.log()


def _check_images(images: Sequence[Tensor | np.ndarray], patch_size: int) -> list[Tensor]:
    """The images as float64 CPU tensors ``[H, W]``; ``ValueError`` naming the first one not 2-D or too small."""
    _check_int("patch_size", patch_size, 1)
    if len(images) == 0:
        raise ValueError("images must be a non-empty sequence of 2-D arrays [H, W]")
    tensors = [torch.as_tensor(image, dtype=torch.float64, device="cpu") for image in images]
    for k, image in enumerate(tensors):
        if image.dim() != 2 or min(image.shape) < patch_size:
            raise ValueError(
                f"images[{k}] must be 2-D with at least {patch_size} rows and columns (patch_size), "
                f"got shape {tuple(image.shape)}"
            )
    return tensors


def _check_offset(offset: float) -> float:
    """``offset`` as a float; ``ValueError`` unless it is finite and >= 0."""
    offset = float(offset)
    if not (np.isfinite(offset) and offset >= 0):
        raise ValueError(f"offset must be a finite number >= 0, got {offset}")
    return offset


def _check_int(name: str, value: int, minimum: int) -> None:
    """``ValueError`` naming ``name`` unless ``value`` is an integer (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {describe(value)}")


def _describe(value: object) -> str:
    """The shape of a tensor, else the type name, for error messages."""
    return f"shape {tuple(value.shape)}" if isinstance(value, Tensor) else type(value).__name__
