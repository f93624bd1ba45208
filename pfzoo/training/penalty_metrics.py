"""Metrics for the natural gradient of non-probabilistic models (Sohl-Dickstein's thesis, §4.2.8 "Natural gradient of
non-probabilistic models").

The thesis gives three recipes for an objective that is not a log-likelihood (eq. 4.29):

1. For ``J(θ) = ⟨l(x; θ)⟩_{p(x)}`` (eq. 4.38), the outer product of the penalty's gradients over the data,
   ``G_ij = ⟨∂l/∂θ_i ∂l/∂θ_j⟩_{p(x)}`` (eq. 4.39): :func:`penalty_gradients` and :func:`penalty_metric`.
2. Treat the penalty as a log-likelihood and take its Fisher information. For the L2 penalty ``‖y − f(x; θ)‖²`` over
   pairs ``p(x, y)``: the conditional Gaussian ``q(y|x; θ) ∝ exp(−‖y − f(x; θ)‖²)``, i.e. ``N(f(x; θ), ½ I)``, joined
   with the data's ``p(x)``, gives (eqs. 4.40–4.41)
   ``G = ⟨∇_θ log q(y|x; θ) ∇_θ log q(y|x; θ)ᵀ⟩_{q(y|x; θ) p(x)}``. With ``J_f = ∂f/∂θᵀ`` ``[D, P]`` the score is
   ``2 J_fᵀ (y − f)`` and ``y − f`` has covariance ``½ I`` under q, so ``G = 2 ⟨J_fᵀ J_f⟩_{p(x)}`` in closed form
   (:func:`squared_error_fisher`; twice the Gauss–Newton matrix). The thesis's footnote 4 (after Amari 1998): the
   average may instead run over an uninformative ``q(x)``, e.g. a Gaussian; pass its samples as ``x``.
3. A metric invariant to chosen parameter transformations (eq. 4.42); its matrix case is Amari's ``ΔW WᵀW``, the
   ``relative`` metric of :mod:`pfzoo.training.natural_gradient` (§4.2.9).

The functions take any ``nn.Module`` ``f: [B, D_in] → [B, D_out]`` (a regression, an autoencoder with ``y = x``);
parameters are its trainable ones, flattened row-major in ``named_parameters`` order, as everywhere in pfzoo's
natural-gradient code, so the matrices feed :class:`~pfzoo.training.natural_space.NaturalParameterSpace` or
:func:`~pfzoo.training.natural_gradient.precondition_direction` directly.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call, grad, jacrev, vmap

_CHUNK = 128


def _trainable(function: nn.Module) -> dict[str, torch.Tensor]:
    return {name: parameter.detach() for name, parameter in function.named_parameters() if parameter.requires_grad}


def _check_pairs(x: torch.Tensor, y: torch.Tensor | None = None) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[0] == 0:
        raise ValueError(f"x must be a matrix [B ≥ 1, D_in], got {tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
    if y is not None and (not isinstance(y, torch.Tensor) or y.dim() != 2 or y.shape[0] != x.shape[0]):
        raise ValueError(f"y must be a matrix [{x.shape[0]}, D_out] (one target per row of x), got "
                         f"{tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__}")


def output_jacobians(function: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``∂f(x_n)/∂θᵀ`` ``[B, D_out, P]`` (float64) of ``function``'s outputs ``f(x) [B, D_out]`` for ``x [B, D_in]``."""
    _check_pairs(x)
    values = _trainable(function)

    def single(params, row):
        return functional_call(function, params, (row[None],))[0]
    # one row at a time under vmap: D_out backward passes batched over the rows (a Jacobian of a whole chunk's outputs
    # would cost chunk·D_out passes)
    jacobian = vmap(jacrev(single), in_dims=(None, 0))(values, x)
    return torch.cat([piece.reshape(x.shape[0], piece.shape[1], -1) for piece in jacobian.values()], dim=2).double()


def squared_error(function: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The L2 penalty ``l(x, y; θ) = ‖y − f(x; θ)‖²`` of each pair, ``[B]`` (§4.2.8's example; J = its mean, eq. 4.38)."""
    _check_pairs(x, y)
    return (y - function(x)).square().sum(1)


def penalty_gradients(function: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-pair gradients ``∇_θ l(x_n, y_n; θ)`` ``[B, P]`` (float64) of the L2 penalty (:func:`squared_error`), by
    autograd: the rows whose outer products eq. 4.39 averages."""
    _check_pairs(x, y)
    values = _trainable(function)

    def single(params, row, target):
        return (target - functional_call(function, params, (row[None],))[0]).square().sum()
    gradient = vmap(grad(single), in_dims=(None, 0, 0))(values, x, y)
    return torch.cat([piece.reshape(x.shape[0], -1) for piece in gradient.values()], dim=1).double()


def penalty_metric(gradients: torch.Tensor) -> torch.Tensor:
    """Eq. 4.39, ``G = ⟨∇l ∇lᵀ⟩_{p(x)}`` ``[P, P]`` (float64), from per-pair penalty gradients ``[B, P]`` (not centred: the
    thesis averages the products themselves)."""
    if not isinstance(gradients, torch.Tensor) or gradients.dim() != 2 or gradients.shape[0] == 0:
        raise ValueError(f"gradients must be a matrix [B ≥ 1, P], got {tuple(gradients.shape) if isinstance(gradients, torch.Tensor) else type(gradients).__name__}")
    gradients = gradients.double()
    return gradients.T @ gradients / gradients.shape[0]


def squared_error_fisher(function: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Eq. 4.41 for the L2 penalty in closed form, ``G = 2 ⟨J_fᵀ J_f⟩_{p(x)}`` ``[P, P]`` (float64), ``J_f`` the output
    Jacobian (:func:`output_jacobians`) at each row of ``x [B, D_in]`` (the data's inputs, or footnote 4's samples of an
    uninformative q(x)). Accumulated chunk by chunk, so ``[B, D_out, P]`` is never held whole."""
    _check_pairs(x)
    total = None
    for chunk in x.split(_CHUNK):
        jacobian = output_jacobians(function, chunk).flatten(0, 1)  # [b·D_out, P]
        piece = jacobian.T @ jacobian
        total = piece if total is None else total + piece
    return 2.0 * total / x.shape[0]
