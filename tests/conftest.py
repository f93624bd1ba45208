import os
import pathlib

import pytest
import torch

# Tests run small tensors; one intra-op thread avoids OpenMP spin-waiting when the machine is
# shared, and keeps results independent of the thread count.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def seed_everything():
    """Every test starts from the same global RNG state (tests still pass explicit generators)."""
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def shared_data_root() -> pathlib.Path:
    """The reference data folder: ``$PFZOO_DATA``, else ``<repo>/../shared/data``; skip when absent."""
    env = os.environ.get("PFZOO_DATA")
    root = pathlib.Path(env).expanduser() if env else pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data"
    if not root.is_dir():
        source = "$PFZOO_DATA" if env else "<repo>/../shared/data"
        pytest.skip(f"reference data folder {root} ({source}) is absent; set PFZOO_DATA to run data tests")
    return root


# ---- shared model and data factories (import them: ``from conftest import random_rbm``) ------------------------


def all_binary_states(num_units: int, dtype=torch.float64) -> torch.Tensor:
    """Every state of ``num_units`` binary units, ``[2^n, n]``, unit i = bit i of the row index."""
    return ((torch.arange(2**num_units)[:, None] >> torch.arange(num_units)) & 1).to(dtype)


def random_rbm(num_visible: int, num_hidden: int, scale: float = 1.0, seed: int = 0, dtype=torch.float64, bias_scale: float = 0.5):
    """An RBM with ``N(0, scale²)`` weights and ``N(0, bias_scale²)`` biases."""
    from pfzoo.models import RBM

    g = torch.Generator().manual_seed(seed)
    return RBM.from_tensors(
        (torch.randn(num_visible, num_hidden, generator=g) * scale).to(dtype),
        (torch.randn(num_visible, generator=g) * bias_scale).to(dtype),
        (torch.randn(num_hidden, generator=g) * bias_scale).to(dtype),
    )


def biased_binary_data(num_visible: int, seed: int = 0, num_examples: int = 500, dtype=torch.float64) -> torch.Tensor:
    """Binary rows with per-unit rates drawn uniformly, so base-rate bases differ from uniform ones."""
    g = torch.Generator().manual_seed(seed)
    pixel_means = torch.rand(num_visible, generator=g)
    return (torch.rand(num_examples, num_visible, generator=g) < pixel_means).to(dtype)
