"""The one place that batches examples × chains: per-example estimators run many examples' chains as one tensor."""

from __future__ import annotations

import torch


def example_batches(data: torch.Tensor, chains_per_example: int, *, max_rows: int) -> tuple[torch.Tensor, ...]:
    """Split ``data [B, V]`` into runs of whole examples whose ``examples × chains_per_example`` rows stay within
    ``max_rows`` (at least one example per batch); each batch then runs as one ``[rows, ...]`` tensor."""
    return torch.split(data, max(1, max_rows // chains_per_example))
