"""What the model comparison's report says of its patches: how they were made, and a check of their point masses and
norms."""

from __future__ import annotations

import torch

from pfzoo.data.splits import DataSplits


def describe_data(splits: DataSplits, source: str, images: str, s: dict, seed: int) -> tuple[str, str, dict]:
    """What the report says of the patches: how they were made (``images``: the photos they come from), a check of
    their point masses and norms, and the fraction of each split's patches that repeat another (split → fraction)."""
    train, test = splits.train, splits.test
    duplicates = {name: 1 - torch.unique(split, dim=0).shape[0] / split.shape[0] for name, split in (("train", train), ("test", test))}
    norms = test.norm(dim=1)
    data_text = (f"`pfzoo.data.patches(source={source!r}, num_train={s['num_train']}, num_test={s['num_test']}, seed={seed})`: "
                 f"16×16 patches of {images}, log(x + 1), training pixel mean removed, projected on the top 36 principal components "
                 "of the training patches and whitened (train covariance = I); train and test patches come from disjoint image blocks.")
    data_check = (f"{100 * duplicates['train']:.1f}% of the training and {100 * duplicates['test']:.1f}% of the test patches repeat another "
                  f"patch of their split exactly (flat, saturated or black regions give identical patches: the data have point masses, which "
                  f"a density with a sharp enough peak can exploit); test patch norms: median {norms.median().item():.2f}, 90th percentile "
                  f"{norms.quantile(0.9).item():.2f} (a whitened Gaussian's would be ≈ 6).")
    return data_text, data_check, duplicates
