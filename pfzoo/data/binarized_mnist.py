"""Larochelle & Murray's fixed binarisation of MNIST, read from the standard ``.amat`` text files.

Files: ``binarized_mnist_{train,valid,test}.amat`` in ``<root>/binarized_mnist/`` (or directly in
``<root>``), one image a line of 784 space-separated ``0``/``1`` tokens; 50k / 10k / 10k images.

No class labels: the files are not in MNIST's order, so MNIST's label files cannot be attached by position. Measured
against the official IDX images thresholded at 0.5 (tests/data/test_data_binarized_mnist.py): the mean per-row pixel
agreement of row i with MNIST's train[i] (train), train[50000 + i] (valid) and test[i] (test) is 0.828 in every split,
the same as with the row after it (0.828): the agreement of two unrelated digits. Matched instead by likelihood (each
row to the MNIST test image under which it is most probable as a Bernoulli draw of the intensities), the 10,000 test
rows find 9,991 distinct images, whose labels run in class order (0 … 9, with MNIST's test class counts): the test file
is MNIST's test set sorted by class. Labels for these files would need such a matching, not positions; for a labelled
MNIST use :func:`pfzoo.data.mnist` (e.g. ``binarize="stochastic"``, the binarisation Larochelle & Murray drew once).
"""

from __future__ import annotations

import logging
import os
import pathlib

import numpy as np
import torch

from pfzoo.data.root import ENV_VAR, resolve_data_root
from pfzoo.data.splits import DataSplits

logger = logging.getLogger(__name__)

NUM_PIXELS = 784
SPLITS = ("train", "valid", "test")
_ALLOWED = np.zeros(256, dtype=bool)
_ALLOWED[list(b"01 \t\r\n")] = True


def binarized_mnist(root: str | os.PathLike | None = None) -> DataSplits:
    """Train ``[50000, 784]``, valid ``[10000, 784]`` and test ``[10000, 784]`` of 0/1 float32.

    The splits are returned in file order. The test file is ordered by digit class, so shuffle
    before taking a subset of it. ``image_shape`` is ``(28, 28)``.
    """
    root = resolve_data_root(root)
    candidates = [root / "binarized_mnist", root]
    for folder in candidates:
        paths = {s: folder / f"binarized_mnist_{s}.amat" for s in SPLITS}
        if all(p.is_file() for p in paths.values()):
            break
    else:
        expected = " or ".join(str(f / "binarized_mnist_{train,valid,test}.amat") for f in candidates)
        raise FileNotFoundError(
            f"binarized MNIST not found under data root {root}: expected {expected}. "
            f"Set the root with data.root=... or the environment variable {ENV_VAR}."
        )
    data = {s: torch.from_numpy(read_amat(p)) for s, p in paths.items()}
    splits = DataSplits(name="binarized_mnist", image_shape=(28, 28), **data)
    logger.info("loaded %r from %s", splits, folder)
    return splits


def read_amat(path: str | os.PathLike, width: int = NUM_PIXELS) -> np.ndarray:
    """Parse a binary ``.amat`` file into a float32 array ``[lines, width]`` of 0/1.

    Raises ``ValueError`` naming the file if a token is not a single ``0``/``1`` or a line does not
    hold exactly ``width`` values. Vectorised over the raw bytes: 50k lines take about half a second.
    """
    path = pathlib.Path(path)
    text = np.frombuffer(path.read_bytes().rstrip(), dtype=np.uint8)
    is_digit = (text & 0xFE) == ord("0")  # '0' or '1'
    is_newline = text == ord("\n")
    bad = ~_ALLOWED[text]
    bad[1:] |= is_digit[1:] & is_digit[:-1]  # multi-character tokens such as '10'
    if bad.any():
        line = int(np.count_nonzero(is_newline[: np.argmax(bad)])) + 1
        raise ValueError(f"{path}: line {line} has a token other than a single 0 or 1")
    tokens = text[is_digit | is_newline]  # the digits of each line, lines separated by '\n'
    ends = np.append(np.flatnonzero(tokens == ord("\n")), len(tokens))
    counts = np.diff(ends, prepend=-1) - 1
    if (counts != width).any():
        line = int(np.argmax(counts != width))
        raise ValueError(f"{path}: every line must hold {width} values, line {line + 1} has {counts[line]}")
    rows = np.lib.stride_tricks.as_strided(tokens, shape=(len(ends), width), strides=(width + 1, 1))
    return np.subtract(rows, ord("0"), dtype=np.float32)
