"""The score ``s(x) = ∇_x log p̃(x) = −∇_x F(x)`` of a model over real vectors by autograd, and the second derivatives the
score-matching objectives take of it: the Laplacian ``Σ_i ∂s_i/∂x_i`` exactly (one backward pass per dimension) or by
Hutchinson's estimator, and random projections ``vᵀ (∇_x s) v``.

Every function keeps the graph (``create_graph=True``), so a loss built from them is differentiable in the model's
parameters. Rows must not interact in :meth:`free_energy` (they never do in pfzoo): the derivative of a column sum
over the batch with respect to ``x [B, M]`` is then each row's own derivative.
"""

from __future__ import annotations

import torch

from pfzoo.models.capabilities import Capability
from pfzoo.sampling import bernoulli, normal

PROJECTIONS = ("rademacher", "gaussian")


def missing_real_free_energy(model) -> str | None:
    """What a score-matching objective needs and ``model`` lacks, or ``None``: real-valued visible units with an exact
    free energy (differentiable in them; the hidden units summed out)."""
    if model.binary_visible or Capability.EXACT_FREE_ENERGY not in model.capabilities:
        return "real-valued visible units with an exact free energy differentiable in them"
    return None


def missing_smooth_free_energy(model) -> str | None:
    """What an objective taking second derivatives of ``log p̃`` by autograd needs and ``model`` lacks, or ``None``:
    :func:`missing_real_free_energy`, and a twice-differentiable free energy (autograd would see a kink's delta
    function as zero curvature, and the objective would fall without bound as the filters shrink)."""
    return missing_real_free_energy(model) or (
        None if model.twice_differentiable else "a twice-differentiable free energy (Laplace experts have kinks)")


def autograd_score(model, x: torch.Tensor) -> torch.Tensor:
    """``s(x) = −∇_x F(x)`` ``[B, M]`` for ``x [B, M]`` that requires grad, with its graph kept (so it can be
    differentiated again, in ``x`` or the parameters)."""
    (score,) = torch.autograd.grad(-model.free_energy(x).sum(), x, create_graph=True)
    return score


def exact_laplacian(score: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``Σ_i ∂s_i/∂x_i`` ``[B]`` of ``score [B, M]`` computed from ``x [B, M]``: the diagonal of the Hessian of
    ``log p̃`` by one backward pass per dimension (M in all), graph kept."""
    diagonal = [torch.autograd.grad(score[:, i].sum(), x, create_graph=True)[0][:, i] for i in range(x.shape[1])]
    return torch.stack(diagonal, 1).sum(1)


def random_projections(shape: tuple[int, ...], kind: str, *, generator: torch.Generator | None,
                       device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Draws ``v`` of ``shape`` with ``E[v vᵀ] = I``: ``"rademacher"`` (±1 with probability ½ each) or ``"gaussian"``."""
    if kind == "gaussian":
        return normal(shape, generator=generator, device=device, dtype=dtype)
    if kind == "rademacher":
        half = torch.full(shape, 0.5, device=device, dtype=dtype)
        return 2 * bernoulli(half, generator=generator) - 1
    raise ValueError(f"projection must be one of {PROJECTIONS}, got {kind!r}")


def projected_jacobian(score: torch.Tensor, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``vᵀ (∇_x s) v`` ``[B]`` for ``score [B, M]`` computed from ``x [B, M]`` and directions ``v [B, M]``: one
    Hessian-vector product (``∇_x (vᵀ s)``), graph kept."""
    (hessian_v,) = torch.autograd.grad((score * v).sum(), x, create_graph=True)
    return (hessian_v * v).sum(1)


def hutchinson_laplacian(score: torch.Tensor, x: torch.Tensor, num_probes: int, *, generator: torch.Generator | None) -> torch.Tensor:
    """Hutchinson's unbiased estimate ``(1/K) Σ_k v_kᵀ (∇_x s) v_k`` ``[B]`` of the Laplacian ``tr ∇_x s``, with ``K =
    num_probes`` Rademacher probes ``v_k [B, M]`` per row (one Hessian-vector product each), graph kept."""
    total = torch.zeros(x.shape[0], device=x.device, dtype=x.dtype)
    for _ in range(num_probes):
        probe = random_projections(tuple(x.shape), "rademacher", generator=generator, device=x.device, dtype=x.dtype)
        total = total + projected_jacobian(score, x, probe)
    return total / num_probes
