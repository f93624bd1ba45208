"""Any data set saved as a NumPy array: ``.npy`` (one ``[N, D]`` array) or ``.npz`` (several named arrays).

An ``.npz`` file holding arrays named ``train`` and ``test`` gives those splits as they are (and
``valid`` too when present). Otherwise one ``[N, D]`` array is split at random: the single array of a
``.npy`` file, the single array of an ``.npz`` file, or the array named ``key``. The random split
depends only on ``split_seed``, never on global RNG state. Files are read with
``allow_pickle=False``, so object arrays are refused and loading never runs code from the file.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from pfzoo.data.splits import DataSplits
from pfzoo.validation import all_finite, check_finite_number

logger = logging.getLogger(__name__)

SUFFIXES = (".npy", ".npz")
SPLIT_KEYS = ("train", "test")


@contextlib.contextmanager
def _refusing_pickles(file: Path):
    """NumPy's refusal of an object array (``allow_pickle=False``) as one line naming ``file``: NumPy's own names neither
    the file nor what to do."""
    try:
        yield
    except ValueError as error:
        if "allow_pickle" not in str(error):
            raise
        raise ValueError(f"{file} holds Python objects (an object array, stored by pickling), which pfzoo does not load "
                         f"(allow_pickle=False: unpickling can run code); save plain numbers instead, e.g. np.save(path, x.astype(np.float32))") from None


def _to_tensor(values: np.ndarray, what: str, binarize_threshold: float | None) -> Tensor:
    """A checked float32 ``[N, D]`` tensor from a numeric 2-D array; ``what`` names the array in errors."""
    if values.ndim != 2:
        raise ValueError(f"{what} must be a 2-D [examples, features] array, got shape {values.shape}")
    if 0 in values.shape:
        raise ValueError(f"{what} must hold at least one row and one column, got shape {values.shape}")
    if not (np.issubdtype(values.dtype, np.number) or values.dtype == np.bool_) or np.iscomplexobj(values):
        raise ValueError(f"{what} must hold real numbers, got dtype {values.dtype}")
    with np.errstate(over="ignore"):  # values beyond float32's range become inf, refused just below
        x = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))
    if not all_finite(x):
        raise ValueError(f"{what} contains NaN or infinite values (after conversion to float32)")
    if binarize_threshold is not None:
        x = (x > binarize_threshold).float()
    return x


def _random_split(x: Tensor, test_fraction: float, split_seed: int, what: str) -> tuple[Tensor, Tensor]:
    """Rows of ``x [N, D]`` split at random into train ``[N - T, D]`` and test ``[T, D]``, T = ceil(test_fraction N)."""
    num_rows = x.shape[0]
    num_test = math.ceil(test_fraction * num_rows)
    if num_test >= num_rows:
        raise ValueError(
            f"{what} has {num_rows} rows, too few to split with test_fraction={test_fraction} "
            "(both splits need at least one row)"
        )
    order = torch.randperm(num_rows, generator=torch.Generator().manual_seed(split_seed))
    return x[order[num_test:]], x[order[:num_test]]


def array(
    path: str | os.PathLike,
    *,
    key: str | None = None,
    test_fraction: float = 0.2,
    split_seed: int = 0,
    binarize_threshold: float | None = None,
    image_shape: Sequence[int] | None = None,
) -> DataSplits:
    """Load ``path`` (``.npy`` or ``.npz``) as train ``[N_train, D]`` and test ``[N_test, D]`` float32 splits.

    Args:
        path: the file; ``~`` is expanded.
        key: for ``.npz`` files, the name of the one array to split at random (needed when the file
            holds several arrays but not both ``train`` and ``test``; overrides them when it does).
            Not allowed for ``.npy`` files.
        test_fraction: share of the rows that go to test when one array is split, in (0, 1);
            the test split gets ``ceil(test_fraction * N)`` rows.
        split_seed: seed of the random permutation behind the split.
        binarize_threshold: if given, every value becomes ``1.0`` where it exceeds the threshold, else ``0.0``.
        image_shape: how a row folds into an image (e.g. ``[28, 28]``); None for non-image data.

    ``name`` is the file's stem (``"spins"`` for ``spins.npz``).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: a suffix other than ``.npy``/``.npz``, an array that is not 2-D, empty, not real-valued or not
            finite, a ``key`` the file does not hold (the message lists the keys), an ambiguous ``.npz``
            without ``key``, splits of different widths, or a bad ``test_fraction``.
    """
    file = Path(os.fspath(path)).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"path {str(file)!r} does not exist or is not a file")
    suffix = file.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"path must end in .npy or .npz, got {str(file)!r}")
    if not 0.0 < check_finite_number(test_fraction, "test_fraction") < 1.0:
        raise ValueError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction}")
    if isinstance(split_seed, bool) or not isinstance(split_seed, int):
        raise ValueError(f"split_seed must be an integer, got {split_seed!r}")
    if binarize_threshold is not None:
        check_finite_number(binarize_threshold, "binarize_threshold")

    valid = None
    if suffix == ".npy":
        if key is not None:
            raise ValueError(f"key={key!r} selects an array inside an .npz file; {file.name} is a .npy file holding one array")
        with _refusing_pickles(file):
            x = _to_tensor(np.load(file, allow_pickle=False), f"the array in {file}", binarize_threshold)
        train, test = _random_split(x, test_fraction, split_seed, f"the array in {file}")
    else:
        with _refusing_pickles(file), np.load(file, allow_pickle=False) as archive:
            keys = list(archive.files)
            if key is not None:
                if key not in keys:
                    raise ValueError(f"key {key!r} is not in {file}; available keys: {keys}")
                x = _to_tensor(archive[key], f"array {key!r} of {file}", binarize_threshold)
                train, test = _random_split(x, test_fraction, split_seed, f"array {key!r} of {file}")
            elif all(name in keys for name in SPLIT_KEYS):
                train = _to_tensor(archive["train"], f"array 'train' of {file}", binarize_threshold)
                test = _to_tensor(archive["test"], f"array 'test' of {file}", binarize_threshold)
                if "valid" in keys:
                    valid = _to_tensor(archive["valid"], f"array 'valid' of {file}", binarize_threshold)
            elif len(keys) == 1:
                x = _to_tensor(archive[keys[0]], f"array {keys[0]!r} of {file}", binarize_threshold)
                train, test = _random_split(x, test_fraction, split_seed, f"array {keys[0]!r} of {file}")
            elif not keys:
                raise ValueError(f"path {str(file)!r} holds no arrays")
            else:
                raise ValueError(
                    f"{file} holds several arrays but not both 'train' and 'test'; choose one with key "
                    f"(available keys: {keys})"
                )
    splits = DataSplits(name=file.stem, train=train, test=test, valid=valid, image_shape=image_shape)
    logger.info("loaded %r from %s", splits, file)
    return splits
