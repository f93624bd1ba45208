"""Cheap training diagnostics that need no partition function."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from pfzoo.models.base import EnergyModel
from pfzoo.validation import check_binary, check_generator, check_matrix


@torch.no_grad()
def reconstruction_error(model: EnergyModel, v: torch.Tensor) -> float:
    """Mean squared error ``mean_{n,i} (v_ni - v̂_ni)²`` of the mean-field reconstruction of ``v [B, V]``.

    ``v̂ = visible_probs(hidden_probs(v))``, i.e. ``σ(σ(vW + c) Wᵀ + b)`` for an RBM; needs a model
    with ``hidden_probs`` and ``visible_probs``.
    """
    check_matrix(v, "v", width=model.num_visible, device=model.device)
    reconstruction = model.visible_probs(model.hidden_probs(v))
    return (v - reconstruction).pow(2).mean().item()


@torch.no_grad()
def pseudo_log_likelihood(model: EnergyModel, v: torch.Tensor, *, generator: torch.Generator | None = None) -> float:
    """Stochastic pseudo-log-likelihood of binary ``v [B, V]``, averaged over the B examples.

    The pseudo-log-likelihood ``Σ_i log p(v_i | v_{-i})`` is estimated, per example, from one
    uniformly drawn unit ``i``: ``V · log σ(F(ṽ) - F(v))`` with ``ṽ`` equal to ``v`` with unit ``i``
    flipped, since ``p(v_i | v_{-i}) = e^{-F(v)} / (e^{-F(v)} + e^{-F(ṽ)})``. Unbiased for the
    pseudo-log-likelihood; needs only ``free_energy``.
    """
    check_binary(v, "v", width=model.num_visible, device=model.device)
    check_generator(generator, model.device)
    rows = torch.arange(v.shape[0], device=v.device)
    units = torch.randint(v.shape[1], (v.shape[0],), generator=generator, device=v.device)
    flipped = v.clone()
    flipped[rows, units] = 1 - flipped[rows, units]
    per_example = v.shape[1] * F.logsigmoid(model.free_energy(flipped) - model.free_energy(v))
    return per_example.mean().item()
