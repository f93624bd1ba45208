"""Centered updates of Boltzmann machines whose binary layers form a chain (RBM, DBM): the one formula both use.

A centered machine subtracts an offset ``μ_l`` from every layer ``x_l``:

    E = −Σ_l (x_l − μ_l)ᵀ W_l (x_{l+1} − μ_{l+1}) − Σ_l b̃_l·(x_l − μ_l)

(Montavon & Müller 2012, eq. 4; Melchior, Fischer & Wiskott 2016, eq. 12), which is the plain machine
``E = −Σ_l x_lᵀ W_l x_{l+1} − Σ_l b_l·x_l`` with ``b_l = b̃_l − W_l μ_{l+1} − W_{l−1}ᵀ μ_{l−1}`` (plus a constant).
A gradient step in ``(W, b̃)`` at fixed offsets is therefore, in the plain parameters, the step along

    G̃_{W_l} = G_{W_l} − μ_l G_{b_{l+1}}ᵀ − G_{b_l} μ_{l+1}ᵀ,
    G_{b_l} − G̃_{W_l} μ_{l+1} − G̃_{W_{l−1}}ᵀ μ_{l−1},

with ``G`` the plain gradients (the chain rule through the biases' dependence on W, then the step mapped back).
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn


def center_chain_gradients(weights: Sequence[nn.Parameter], biases: Sequence[nn.Parameter], offsets: Sequence[torch.Tensor]) -> None:
    """Replace the plain gradients in ``.grad`` of ``weights [n_l, n_{l+1}]`` (l < L) and ``biases [n_l]`` (l ≤ L) by
    the centered update on ``offsets`` ``[n_l]`` (module docstring), in place; nothing happens while a gradient is
    missing."""
    grads_w, grads_b = [w.grad for w in weights], [b.grad for b in biases]
    if any(grad is None for grad in grads_w + grads_b):
        return
    mus = [offset.to(grads_w[0].dtype) for offset in offsets]
    centered = [grad_w - torch.outer(mus[i], grads_b[i + 1]) - torch.outer(grads_b[i], mus[i + 1]) for i, grad_w in enumerate(grads_w)]
    for layer, grad_b in enumerate(grads_b):
        if layer < len(centered):
            grad_b.sub_(centered[layer] @ mus[layer + 1])
        if layer > 0:
            grad_b.sub_(centered[layer - 1].T @ mus[layer - 1])
    for grad_w, step in zip(grads_w, centered):
        grad_w.copy_(step)
