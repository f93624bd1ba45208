"""Model and data factories shared by the tests: ``from factories import random_rbm`` from any test folder.

setup.cfg's ``[tool:pytest] pythonpath = tests`` puts this folder on ``sys.path``, so the import works from a plain
``pytest`` at the repository root and from any subfolder; ``conftest.py`` holds fixtures only.

Each factory draws from its own ``torch.Generator().manual_seed(seed)``, in the order its docstring gives. One
generator's float32 and float64 streams are different numbers (not roundings of each other), so ``draw_dtype`` names
the dtype the normal/uniform draws are made in: they are scaled in that dtype and then converted to ``dtype``;
``draw_dtype=None`` draws in ``dtype`` itself. The default, float32 draws, is what ``random_rbm`` and
``biased_binary_data`` have always done; a test that drew in float64 passes ``draw_dtype=None`` (or
``torch.float64``) to keep its models.
"""

import torch

from pfzoo.models import DBM, DBN, RBM, Ising


def all_binary_states(num_units: int, dtype=torch.float64, msb_first: bool = False) -> torch.Tensor:
    """Every state of ``num_units`` binary units, ``[2^n, n]``, unit i = bit i of the row index.

    ``msb_first=True`` reverses the bits: the first column is the most significant, the order of
    ``itertools.product([0, 1], repeat=n)`` (tests that index rows by ``Σ_i x_i 2^(n-1-i)`` need it).
    """
    shifts = torch.arange(num_units - 1, -1, -1) if msb_first else torch.arange(num_units)
    return ((torch.arange(2**num_units)[:, None] >> shifts) & 1).to(dtype)


def _normal(g: torch.Generator, shape, scale, dtype, draw_dtype) -> torch.Tensor:
    """``N(0, scale²)`` of ``shape``: drawn in ``draw_dtype`` (None: ``dtype``), scaled there, converted to ``dtype``."""
    return (torch.randn(*shape, generator=g, dtype=dtype if draw_dtype is None else draw_dtype) * scale).to(dtype)


def random_rbm(num_visible: int, num_hidden: int, scale: float = 1.0, seed: int = 0, dtype=torch.float64, bias_scale: float = 0.5,
               draw_dtype=torch.float32):
    """An RBM with ``N(0, scale²)`` weights and ``N(0, bias_scale²)`` biases, drawn weight, visible bias, hidden bias."""
    g = torch.Generator().manual_seed(seed)
    return RBM.from_tensors(
        _normal(g, (num_visible, num_hidden), scale, dtype, draw_dtype),
        _normal(g, (num_visible,), bias_scale, dtype, draw_dtype),
        _normal(g, (num_hidden,), bias_scale, dtype, draw_dtype),
    )


def random_dbm(layer_sizes, scale: float = 1.0, seed: int = 0, dtype=torch.float64, bias_scale: float = 0.5, draw_dtype=torch.float32):
    """A DBM with ``N(0, scale²)`` weights and ``N(0, bias_scale²)`` biases, drawn every weight (bottom up), then every bias."""
    g = torch.Generator().manual_seed(seed)
    weights = [_normal(g, (a, b), scale, dtype, draw_dtype) for a, b in zip(layer_sizes[:-1], layer_sizes[1:])]
    return DBM.from_tensors(weights, [_normal(g, (n,), bias_scale, dtype, draw_dtype) for n in layer_sizes])


def random_dbn_parameters(layer_sizes, scale: float = 1.0, seed: int = 0, dtype=torch.float64, bias_scale: float = 0.5,
                          draw_dtype=torch.float32):
    """``(weights, visible_biases, hidden_biases)`` of a DBN (``DBN.from_tensors``'s arguments): ``N(0, scale²)`` weights
    and ``N(0, bias_scale²)`` biases, drawn every weight, every visible bias, then every hidden bias (bottom up)."""
    g = torch.Generator().manual_seed(seed)
    weights = [_normal(g, (a, b), scale, dtype, draw_dtype) for a, b in zip(layer_sizes[:-1], layer_sizes[1:])]
    visible_biases = [_normal(g, (a,), bias_scale, dtype, draw_dtype) for a in layer_sizes[:-1]]
    hidden_biases = [_normal(g, (b,), bias_scale, dtype, draw_dtype) for b in layer_sizes[1:]]
    return weights, visible_biases, hidden_biases


def random_dbn(layer_sizes, scale: float = 1.0, seed: int = 0, dtype=torch.float64, bias_scale: float = 0.5, draw_dtype=torch.float32):
    """A DBN from :func:`random_dbn_parameters`."""
    return DBN.from_tensors(*random_dbn_parameters(layer_sizes, scale, seed, dtype, bias_scale, draw_dtype))


def random_ising(num_units: int, scale: float = 1.0, seed: int = 0, dtype=torch.float64, bias_scale: float = 0.5,
                 draw_dtype=torch.float32, cls=None, coupling_mask=None):
    """A dense Ising model (or ``cls``, e.g. Hopfield): couplings ``N(0, scale²)`` on every pair (symmetric, zero diagonal),
    biases ``N(0, bias_scale²)``; drawn a full ``[D, D]`` matrix (its strict upper triangle kept), then the biases.

    ``coupling_mask`` (``[D, D]``, symmetric 0/1) multiplies the couplings, keeping only its pairs.
    """
    g = torch.Generator().manual_seed(seed)
    upper = torch.triu(_normal(g, (num_units, num_units), scale, dtype, draw_dtype), 1)
    coupling = upper + upper.T
    if coupling_mask is not None:
        coupling = coupling * coupling_mask
    return (Ising if cls is None else cls).from_tensors(coupling, _normal(g, (num_units,), bias_scale, dtype, draw_dtype))


def biased_binary_data(num_visible: int, seed: int = 0, num_examples: int = 500, dtype=torch.float64, draw_dtype=torch.float32) -> torch.Tensor:
    """Binary rows with per-unit rates drawn uniformly, so base-rate bases differ from uniform ones (rates drawn first)."""
    g = torch.Generator().manual_seed(seed)
    draw_dtype = dtype if draw_dtype is None else draw_dtype
    pixel_means = torch.rand(num_visible, generator=g, dtype=draw_dtype)
    return (torch.rand(num_examples, num_visible, generator=g, dtype=draw_dtype) < pixel_means).to(dtype)
