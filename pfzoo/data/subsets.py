"""Which rows of a split a subset takes: drawn at random with a seed, so that ``num_test=100`` measures the whole test
set's distribution, or, when asked for explicitly, the first rows in file order.

Test files can be sorted: Larochelle's binarized MNIST test file runs through the digit classes in order, so its first
100 rows are all zeros. Under the zoo's PCD(20) RBM (exact log-likelihoods) they average −159.58 nats against −142.39 ±
0.40 over all 10,000 rows, and the first 2,000 (zeros and ones) −116.65; random subsets of 100 drawn with seeds 0, 1, 2
give −144.21, −144.51 and −137.72 (a subset's standard error there is 4.0). A random subset's mean is an unbiased
estimate of the whole split's; a prefix's is not.
"""

from __future__ import annotations

import torch

SUBSET_ORDERS = ("random", "first")
"""How a subset picks its rows: ``random`` (seeded, the default everywhere) or ``first`` (file order)."""


def subset_rows(num_rows: int, size: int | None, *, seed: int, order: str = "random") -> torch.Tensor:
    """Row indices ``[min(size, num_rows)]`` (int64, ascending) of a subset of ``size`` of ``num_rows`` rows.

    ``order="random"`` draws them without replacement by ``torch.randperm`` from a generator seeded ``seed`` (the same
    rows on every machine and rank for the same seed); ``order="first"`` takes rows ``0 … size − 1``. ``size=None`` or
    ``size ≥ num_rows`` takes every row.
    """
    if order not in SUBSET_ORDERS:
        raise ValueError(f"order must be one of {', '.join(SUBSET_ORDERS)} (how a subset picks its rows), got {order!r}")
    if isinstance(num_rows, bool) or not isinstance(num_rows, int) or num_rows < 0:
        raise ValueError(f"num_rows must be a number of rows ≥ 0, got {num_rows!r}")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise ValueError(f"size must be a positive number of rows or None (all of them), got {size!r}")
    if size is None or size >= num_rows:
        return torch.arange(num_rows)
    if order == "first":
        return torch.arange(size)
    return torch.randperm(num_rows, generator=torch.Generator().manual_seed(seed))[:size].sort().values


def describe_subset(size: int, num_rows: int, *, seed: int, order: str = "random") -> str:
    """How a report names the rows it measured: ``"all 10000"``, ``"100 of 10000 (drawn at random, seed 0)"`` or
    ``"the first 100 of 10000 (file order)"``."""
    if size >= num_rows:
        return f"all {num_rows}"
    if order == "first":
        return f"the first {size} of {num_rows} (file order)"
    return f"{size} of {num_rows} (drawn at random, seed {seed})"
