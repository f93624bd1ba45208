"""The random models the benchmark cases time, each drawn from the case's seeded generator so a case builds the same
model on every run."""

from __future__ import annotations

import torch

from pfzoo.models import DBM, RBM, ProductOfExperts


def random_rbm(num_visible: int, num_hidden: int, g: torch.Generator, device: torch.device) -> RBM:
    """Weights N(0, 0.05²), biases N(0, 1), drawn from ``g`` in that order (the RBM every RBM benchmark times)."""
    return RBM.from_tensors(torch.randn(num_visible, num_hidden, generator=g, device=device) * 0.05,
                            torch.randn(num_visible, generator=g, device=device), torch.randn(num_hidden, generator=g, device=device))


def random_dbm(layer_sizes, g: torch.Generator, device: torch.device) -> DBM:
    """Weights N(0, 0.05²), then biases N(0, 1), drawn from ``g`` layer by layer (the DBM the DBM benchmarks time)."""
    weights = [torch.randn(lower, upper, generator=g, device=device) * 0.05 for lower, upper in zip(layer_sizes[:-1], layer_sizes[1:])]
    return DBM.from_tensors(weights, [torch.randn(size, generator=g, device=device) for size in layer_sizes])


def student_t_poe(g: torch.Generator, device: torch.device, dim: int) -> ProductOfExperts:
    """The ``dim``-d Student-t product of experts the HAIS and score-matching cases use, drawn from ``g``: filters near the
    identity, shapes in [1.5, 3.5]."""
    filters = torch.eye(dim, device=device) + 0.3 * torch.randn(dim, dim, generator=g, device=device) / dim**0.5
    shape = 1.5 + 2.0 * torch.rand(dim, generator=g, device=device)
    return ProductOfExperts.from_tensors(filters, shape, expert="student_t")
