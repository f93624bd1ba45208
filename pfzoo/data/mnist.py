"""MNIST from the official IDX files, optionally binarised (thresholded or sampled).

The data root (see :func:`pfzoo.data.resolve_data_root`) must hold
``MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte``, the layout
``torchvision.datasets.MNIST`` reads. Intensities are scaled to [0, 1] before binarising.
"""

from __future__ import annotations

import logging
import os

import torch

from pfzoo.data.root import ENV_VAR, resolve_data_root
from pfzoo.data.splits import DataSplits
from pfzoo.validation import check_choice, check_finite_number

logger = logging.getLogger(__name__)

BINARIZE_MODES = ("none", "threshold", "stochastic")
RAW_FILES = tuple(f"{s}-{k}-ubyte" for s in ("train", "t10k") for k in ("images-idx3", "labels-idx1"))


def mnist(
    root: str | os.PathLike | None = None,
    binarize: str = "threshold",
    threshold: float = 0.5,
    download: bool = True,
    valid_size: int = 0,
    binarize_seed: int = 0,
) -> DataSplits:
    """MNIST as train ``[60000 - valid_size, 784]``, test ``[10000, 784]`` and valid ``[valid_size, 784]``.

    ``binarize``: ``"none"`` keeps intensities in [0, 1]; ``"threshold"`` gives ``intensity > threshold``;
    ``"stochastic"`` draws each pixel from Bernoulli(intensity) with a generator seeded by
    ``binarize_seed`` (same seed, same data). ``valid_size > 0`` takes the *last* ``valid_size``
    training images as the valid split (else ``valid`` is ``None``). ``image_shape`` is ``(28, 28)``; each split's
    digit classes are its ``*_labels``.

    Missing files are downloaded by torchvision when ``download`` is true; if that is off or fails
    (e.g. offline), raises ``FileNotFoundError`` naming the root and the expected layout.
    """
    check_choice(binarize, "binarize", BINARIZE_MODES)
    if not 0.0 <= check_finite_number(threshold, "threshold") <= 1.0:
        raise ValueError(f"threshold must lie in [0, 1] (intensities are scaled to [0, 1]), got {threshold}")
    if isinstance(valid_size, bool) or not isinstance(valid_size, int) or not 0 <= valid_size < 60000:
        raise ValueError(f"valid_size must be an integer in [0, 60000), got {valid_size!r}")
    import torchvision  # imported here: it adds a second to `import pfzoo.data`

    root = resolve_data_root(root)
    _ensure_files(root, download)

    def load(train: bool) -> tuple[torch.Tensor, torch.Tensor]:
        dataset = torchvision.datasets.MNIST(root=root, train=train, download=False)
        images = dataset.data  # [N, 28, 28] uint8
        return images.reshape(len(images), -1).float().div_(255.0), dataset.targets.long()

    (train, train_labels), (test, test_labels) = load(True), load(False)
    if binarize == "threshold":
        train, test = (train > threshold).float(), (test > threshold).float()
    elif binarize == "stochastic":
        generator = torch.Generator().manual_seed(binarize_seed)
        train, test = torch.bernoulli(train, generator=generator), torch.bernoulli(test, generator=generator)
    valid = valid_labels = None
    if valid_size > 0:
        train, valid = train[:-valid_size], train[-valid_size:]
        train_labels, valid_labels = train_labels[:-valid_size], train_labels[-valid_size:]
    splits = DataSplits(name="mnist", train=train, test=test, valid=valid, image_shape=(28, 28), train_labels=train_labels,
                        test_labels=test_labels, valid_labels=valid_labels)
    logger.info("loaded %r from %s (binarize=%s)", splits, root, binarize)
    return splits


def _ensure_files(root: os.PathLike, download: bool) -> None:
    """Make sure the four raw IDX files exist under ``root/MNIST/raw``, downloading them if allowed."""
    raw = os.path.join(root, "MNIST", "raw")
    missing = [f for f in RAW_FILES if not os.path.isfile(os.path.join(raw, f))]
    if not missing:
        return
    error = None
    if download:
        import torchvision

        try:
            torchvision.datasets.MNIST(root=root, train=True, download=True)  # fetches all four files
            return
        except (RuntimeError, OSError) as err:  # offline, unreachable mirror, read-only root, ...
            logger.warning("downloading MNIST into %s failed: %s", root, err)
            error = err
    raise FileNotFoundError(
        f"MNIST not found under data root {root} (missing {', '.join(missing)}; "
        f"{'the download failed' if download else 'download=False'}). "
        f"Expected {os.path.join(raw, '{train,t10k}-{images-idx3,labels-idx1}-ubyte')}. "
        f"Set the root with data.root=... or the environment variable {ENV_VAR}."
    ) from error
