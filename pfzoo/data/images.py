"""Grey natural images as float64 arrays ``[H, W]``: van Hateren files, grey TIFFs and embedded photos.

van Hateren & van der Schaaf (1998) distribute every image as a headerless file of 1024 rows by
1536 columns, stored row by row from the top-left corner, each pixel a 2-byte *unsigned big-endian*
integer. This holds for both sets: ``.iml`` (strictly linear in intensity) and ``.imc`` (calibrated,
approximately linear). Neither is float32: a float32 ``.imc`` would need 6291456 bytes, every copy
of the database has 3145728, so both suffixes are read as big-endian uint16 and the byte count is
checked. Values are returned as stored; the per-image factor that converts them to cd/m^2 is
published in a separate table and is not applied.

TIFFs (``.tif``, ``.tiff``) are decoded with Pillow, which torchvision and scikit-learn's sample
images already require; any compression Pillow supports works. The image must be single-channel
(1-, 8- or 16-bit, int32 or float32); for a multi-page TIFF the first page is read.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np

VANHATEREN_SHAPE = (1024, 1536)  # rows, columns
VANHATEREN_SUFFIXES = (".iml", ".imc")
TIFF_SUFFIXES = (".tif", ".tiff")
IMAGE_SUFFIXES = VANHATEREN_SUFFIXES + TIFF_SUFFIXES
LUMINANCE_WEIGHTS = (0.299, 0.587, 0.114)  # ITU-R BT.601 (R, G, B), the weights of Pillow's convert("L")
_GREY_MODES = ("1", "L", "I", "F", "I;16", "I;16L", "I;16B", "I;16N")


def read_image(path: str | os.PathLike) -> np.ndarray:
    """Read one grey image as float64 ``[H, W]``, choosing the format by the (case-insensitive) suffix.

    ``.iml`` / ``.imc``: van Hateren, ``[1024, 1536]`` (see :func:`read_vanhateren`); ``.tif`` /
    ``.tiff``: single-channel TIFF (see :func:`read_tiff`). Raises ``ValueError`` for other suffixes
    and ``FileNotFoundError`` for a missing file.
    """
    path = pathlib.Path(path)
    suffix = path.suffix.lower()
    if suffix in VANHATEREN_SUFFIXES:
        return read_vanhateren(path)
    if suffix in TIFF_SUFFIXES:
        return read_tiff(path)
    raise ValueError(f"path must end in one of {', '.join(IMAGE_SUFFIXES)} (case-insensitive), got {path}")


def read_vanhateren(path: str | os.PathLike) -> np.ndarray:
    """Read a van Hateren ``.iml`` / ``.imc`` file as float64 ``[1024, 1536]`` of the stored uint16 values.

    Raises ``ValueError`` naming the file unless it holds exactly 1024 x 1536 x 2 = 3145728 bytes.
    """
    path = pathlib.Path(path)
    data = path.read_bytes()
    expected = 2 * VANHATEREN_SHAPE[0] * VANHATEREN_SHAPE[1]
    if len(data) != expected:
        raise ValueError(
            f"{path}: a van Hateren image must hold {VANHATEREN_SHAPE[0]} x {VANHATEREN_SHAPE[1]} big-endian "
            f"uint16 pixels ({expected} bytes), got {len(data)} bytes"
        )
    return np.frombuffer(data, dtype=">u2").reshape(VANHATEREN_SHAPE).astype(np.float64)


def read_tiff(path: str | os.PathLike) -> np.ndarray:
    """Read the first page of a single-channel TIFF as float64 ``[H, W]`` (values as stored, any byte order).

    Raises ``ValueError`` naming the file and its Pillow mode for colour or palette images.
    """
    from PIL import Image  # imported here to keep `import pfzoo.data` light

    path = pathlib.Path(path)
    with Image.open(path) as image:
        if image.mode not in _GREY_MODES:
            raise ValueError(
                f"{path}: expected a single-channel (grey) TIFF, got Pillow mode {image.mode!r}; "
                f"convert it to grey first"
            )
        return np.asarray(image).astype(np.float64)


def embedded_images() -> list[np.ndarray]:
    """scikit-learn's two bundled photos (``china.jpg``, ``flower.jpg``) as grey float64 ``[427, 640]`` each.

    The RGB uint8 pixels become luminance ``0.299 R + 0.587 G + 0.114 B`` (ITU-R BT.601), not rounded,
    so values lie in [0, 255] and include zeros. Needs no internet and no data folder.
    """
    from sklearn.datasets import load_sample_images  # imported here to keep `import pfzoo.data` light

    weights = np.array(LUMINANCE_WEIGHTS)
    return [rgb.astype(np.float64) @ weights for rgb in load_sample_images().images]
