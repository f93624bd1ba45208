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

import hashlib
import logging
import os
import pathlib
import shutil
import urllib.parse
import urllib.request

import numpy as np
import torch

from pfzoo.data.root import ENV_VAR, resolve_data_root
from pfzoo.data.splits import DataSplits
from pfzoo.validation import check_bool

logger = logging.getLogger(__name__)

NUM_PIXELS = 784
SPLITS = ("train", "valid", "test")
SHA256 = {
    "train": "ad693b29f94c14277b095f5238ddefbbdaaae0939789dd2f4f0205278cee3e4d",
    "valid": "1de3d397c40fe8eeb33dafd4099a1f665ec01e96d9be234aaeeac8a34930e2e2",
    "test": "e6687bfea3f820c174f33b7865140b2a2dd2930ef786f35d45795fc193b5ab2c",
}
"""The SHA-256 of Larochelle & Murray's three files (78.4 MB, 15.7 MB, 15.7 MB), which :func:`fetch` checks."""
KNOWN_SOURCE = "http://www.cs.toronto.edu/~larocheh/public/datasets/binarized_mnist/"
"""Where Larochelle published the files: ``download=True`` fetches from here unless ``source`` names another place. Not
reachable from pfzoo's build machines, so nothing fetches from it unasked."""
NO_PACKAGE = ("no package on the Python package index ships these files, so pfzoo fetches them only when asked: pass "
              "download=True (from " + KNOWN_SOURCE + ", where Larochelle published them) or source=URL or folder, "
              "or copy binarized_mnist_{train,valid,test}.amat there yourself")
_ALLOWED = np.zeros(256, dtype=bool)
_ALLOWED[list(b"01 \t\r\n")] = True


def binarized_mnist(
    root: str | os.PathLike | None = None, source: str | os.PathLike | None = None, *, download: bool = False
) -> DataSplits:
    """Train ``[50000, 784]``, valid ``[10000, 784]`` and test ``[10000, 784]`` of 0/1 float32.

    The splits are returned in file order. The test file is ordered by digit class, so shuffle
    before taking a subset of it (``pfzoo.data.subset_rows``). ``image_shape`` is ``(28, 28)``.
    Files missing under ``root`` are fetched first (:func:`fetch`: each checked against :data:`SHA256`) from
    ``source``, a URL or a local folder holding the three files, or with ``download=True`` and no ``source`` from
    :data:`KNOWN_SOURCE`, where Larochelle published them; with neither they are only read.
    """
    root = resolve_data_root(root)
    if (check_bool(download, "download") or source is not None) and find_files(root) is None:
        fetch(KNOWN_SOURCE if source is None else source, root)
    paths = find_files(root)
    if paths is None:
        expected = " or ".join(str(f / "binarized_mnist_{train,valid,test}.amat") for f in (root / "binarized_mnist", root))
        raise FileNotFoundError(
            f"binarized MNIST not found under data root {root}: expected {expected}. "
            f"Set the root with data.root=... or the environment variable {ENV_VAR}; {NO_PACKAGE}."
        )
    data = {s: torch.from_numpy(read_amat(p)) for s, p in paths.items()}
    splits = DataSplits(name="binarized_mnist", image_shape=(28, 28), **data)
    logger.info("loaded %r from %s", splits, paths["test"].parent)
    return splits


def find_files(root: pathlib.Path) -> dict[str, pathlib.Path] | None:
    """The three ``.amat`` files by split, from ``<root>/binarized_mnist/`` or else ``<root>``; ``None`` when neither holds all three."""
    for folder in (root / "binarized_mnist", root):
        paths = {s: folder / f"binarized_mnist_{s}.amat" for s in SPLITS}
        if all(p.is_file() for p in paths.values()):
            return paths
    return None


def fetch(source: str | os.PathLike, root: str | os.PathLike | None = None) -> pathlib.Path:
    """Copy or download the three files from ``source`` into ``<root>/binarized_mnist/``; returns that folder.

    ``source`` is a URL of the folder holding ``binarized_mnist_{train,valid,test}.amat`` (``http(s)://`` or
    ``file://``) or a local folder. Each file is written beside its final name and moved there only once its SHA-256
    matches :data:`SHA256`, so an interrupted or wrong download leaves nothing that :func:`binarized_mnist` would read;
    a mismatch raises ``ValueError`` naming the file and both hashes, an unreachable source ``FileNotFoundError``
    naming it.
    """
    folder = resolve_data_root(root) / "binarized_mnist"
    folder.mkdir(parents=True, exist_ok=True)
    local = pathlib.Path(os.fspath(source)).expanduser()
    for split in SPLITS:
        name = f"binarized_mnist_{split}.amat"
        target, partial = folder / name, folder / f".{name}.part"
        try:
            if local.is_dir():
                shutil.copyfile(local / name, partial)
            else:
                url = urllib.parse.urljoin(str(source).rstrip("/") + "/", name)
                with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as file:  # noqa: S310  the user names the URL
                    shutil.copyfileobj(response, file)
        except OSError as error:  # URLError is an OSError: offline, no such host or file
            partial.unlink(missing_ok=True)
            raise FileNotFoundError(f"cannot fetch {name} from source={source}: {getattr(error, 'reason', None) or error}") from error
        digest = hashlib.sha256(partial.read_bytes()).hexdigest()
        if digest != SHA256[split]:
            partial.unlink()
            raise ValueError(f"{name} from source={source} has sha256 {digest}, not Larochelle & Murray's {SHA256[split]}; "
                             f"nothing was kept")
        os.replace(partial, target)
        logger.info("fetched %s from %s", target, source)
    return folder


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
