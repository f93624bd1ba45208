"""The embedded default dataset: scikit-learn's bundled 8x8 digits, binarised, with a fixed split.

``load_digits`` ships 1797 images of 8x8 pixels with values 0..16; a pixel becomes 1 when it
exceeds ``threshold`` (default 8, i.e. intensity above one half). The train/test split is
stratified by digit class and depends only on ``split_seed``, never on global RNG state.
Needs no internet and no data folder.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from pfzoo.data.splits import DataSplits
from pfzoo.validation import check_finite_number

logger = logging.getLogger(__name__)


def digits(test_fraction: float = 0.2, threshold: float = 8.0, split_seed: int = 0) -> DataSplits:
    """Binarised 8x8 digits: train ``[N_train, 64]``, test ``[N_test, 64]`` of 0/1 float32.

    With the defaults, N_train = 1437 and N_test = 360, each with the class proportions of the
    full set. ``image_shape`` is ``(8, 8)``; the splits' digit classes are ``train_labels`` and ``test_labels``.
    """
    if not 0.0 < check_finite_number(test_fraction, "test_fraction") < 1.0:
        raise ValueError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction}")
    if not 0.0 <= check_finite_number(threshold, "threshold") < 16.0:
        raise ValueError(f"threshold must lie in [0, 16) (pixel values are 0..16), got {threshold}")
    from sklearn.datasets import load_digits  # imported here to keep `import pfzoo.data` light
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    images = torch.from_numpy(bunch.data > threshold).float()
    train_idx, test_idx = train_test_split(
        np.arange(len(images)), test_size=test_fraction, random_state=split_seed, stratify=bunch.target
    )
    labels = torch.from_numpy(bunch.target).long()
    splits = DataSplits(
        name="digits",
        train=images[torch.from_numpy(train_idx)],
        test=images[torch.from_numpy(test_idx)],
        image_shape=(8, 8),
        train_labels=labels[torch.from_numpy(train_idx)],
        test_labels=labels[torch.from_numpy(test_idx)],
    )
    logger.info("loaded %r", splits)
    return splits
