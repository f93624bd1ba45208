"""Geometric (parameter-interpolation) annealing path for Gaussian–Bernoulli RBMs."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch.nn import functional as F

from pfzoo.kernels import BLOCK_CONDITIONALS, BlockGibbs, Kernel, check_kernel
from pfzoo.logmath import softplus, softplus_difference
from pfzoo.paths.base import AnnealingPath, tempered_block_rows
from pfzoo.paths.registry import register_family, register_path, same_family_base
from pfzoo.sampling import bernoulli, normal


class GaussianRBMPathStatistics(NamedTuple):
    """Statistics of visible states ``v [N, V]`` on a Gaussian–Bernoulli RBM path.

    hidden_input: ``(v/σ) W + c - c_0`` ``[N, H]``; the hidden pre-activation at β is ``c_0 + β · hidden_input``.
    visible_term: ``Σ_i (b_i - b_0,i)(v_i - b_0,i)/σ_i²`` ``[N]``.
    """

    hidden_input: torch.Tensor
    visible_term: torch.Tensor


class GaussianRBMPathConditionals:
    """The intermediate GBRBM of :class:`GaussianRBMGeometricPath` at β as a block-Gibbs target
    (:class:`~pfzoo.kernels.BlockConditionals`): ``h ~ sigmoid(c_β + β (v/σ) W)``, ``v ~ N(b_β + β σ ⊙ (W h), σ²)``,
    two matrix products, a Bernoulli and a Gaussian draw per step, the new state's statistics
    (:class:`GaussianRBMPathStatistics`) included.
    """

    offers = frozenset({BLOCK_CONDITIONALS})

    def __init__(self, target, base) -> None:
        if base.weight.shape != target.weight.shape:
            raise ValueError(f"base GBRBM has shape {tuple(base.weight.shape)}, target {tuple(target.weight.shape)}")
        if torch.any(base.weight != 0):
            raise ValueError("the base GBRBM of a geometric path must have zero weights (a factorised, tractable model)")
        log_sigma = target.log_sigma.detach()
        if not torch.equal(base.log_sigma.detach().to(log_sigma), log_sigma):
            raise ValueError("the base GBRBM must share log_sigma with the target (the path interpolates means, not variances)")
        weight = target.weight.detach()
        self.sigma = log_sigma.exp()
        self.log_sigma = log_sigma
        self.hidden_weight = weight / self.sigma[:, None]
        self.visible_weight = weight * self.sigma[:, None]
        self.base_visible_bias = base.visible_bias.detach().to(weight)
        self.base_hidden_bias = base.hidden_bias.detach().to(weight)
        self.visible_bias_delta = target.visible_bias.detach() - self.base_visible_bias
        self.hidden_bias_delta = target.hidden_bias.detach() - self.base_hidden_bias
        self.visible_precision_delta = self.visible_bias_delta / self.sigma.square()
        self.quadratic_coefficient = (self.visible_bias_delta.double() / self.sigma.double()).square().sum() / 2

    def statistics(self, v: torch.Tensor, *, beta: float = 0.0) -> GaussianRBMPathStatistics:
        hidden_input = v @ self.hidden_weight + self.hidden_bias_delta
        return GaussianRBMPathStatistics(hidden_input, (v - self.base_visible_bias) @ self.visible_precision_delta)

    def draw_hidden(self, v: torch.Tensor, stats: GaussianRBMPathStatistics, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        return bernoulli(torch.sigmoid(self.base_hidden_bias + beta * stats.hidden_input), generator=generator)

    def draw_visible(self, h: torch.Tensor, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        mean = self.base_visible_bias + beta * (h @ self.visible_weight.T + self.visible_bias_delta)
        return mean + self.sigma * normal(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)


class GaussianRBMGeometricPath(AnnealingPath):
    """Path between a base GBRBM with ``W_0 = 0`` and a target GBRBM with the same σ.

    The intermediate model at β is the GBRBM with interpolated parameters
    ``W_β = βW``, ``b_β = (1-β) b_0 + β b``, ``c_β = (1-β) c_0 + β c`` and the shared σ. Its joint
    energy differs from ``(1-β) E_0 + β E`` only by the constant ``β(1-β) Σ_i (b_i - b_0,i)²/(2σ_i²)``,
    so this is the geometric average of the joints (Salakhutdinov & Murray 2008, eq. 14) up to
    normalisation, which AIS does not need. Every intermediate distribution is proper (unlike
    ``exp(-β E)``, which is flat in ``v`` at β = 0). Summing out ``h``:

        log f_β(v) = -Σ_i (v_i - b_β,i)²/(2σ_i²) + Σ_j softplus(c_0 + β ((v/σ) W + c - c_0))_j

    and ``log Z_0 = Σ_i log(√(2π) σ_i) + Σ_j softplus(c_0,j)`` (``+ H log 2`` for ``c_0 = 0``).
    With ``δ = b - b_0`` the quadratic term is ``-A(v) + β B(v) - β² C``, where
    ``A = Σ (v - b_0)²/(2σ²)``, ``B = Σ δ (v - b_0)/σ²`` (the ``visible_term`` statistic) and
    ``C = Σ δ²/(2σ²)``. The target is :class:`GaussianRBMPathConditionals`; the default kernel one block Gibbs sweep
    of the intermediate model per step.
    """

    def __init__(self, target, base, kernel: Kernel | None = None) -> None:
        self.target = GaussianRBMPathConditionals(target, base)
        self.kernel = BlockGibbs() if kernel is None else check_kernel(kernel, self.target.offers, "a Gaussian–Bernoulli RBM path")

    def draw_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        sigma = self.target.sigma
        noise = normal((num_chains, sigma.shape[0]), generator=generator, device=sigma.device, dtype=sigma.dtype)
        return self.target.base_visible_bias + sigma * noise

    def base_log_partition(self) -> torch.Tensor:
        target = self.target
        gaussian = target.sigma.shape[0] * 0.5 * math.log(2 * math.pi) + target.log_sigma.double().sum()
        return gaussian + F.softplus(target.base_hidden_bias.double()).sum()

    def log_f(self, v: torch.Tensor, stats: GaussianRBMPathStatistics, beta: float) -> torch.Tensor:
        """``log f_β(v)`` (float64 ``[N]``); the engine uses the exact increment form instead."""
        target = self.target
        base_quadratic = ((v - target.base_visible_bias) / target.sigma).square().sum(-1, dtype=torch.float64) / 2
        hidden_term = F.softplus(target.base_hidden_bias + beta * stats.hidden_input).sum(-1, dtype=torch.float64)
        return -base_quadratic + beta * stats.visible_term.double() - beta**2 * target.quadratic_coefficient + hidden_term

    def log_weight_increment(self, stats: GaussianRBMPathStatistics, beta_from: float, beta_to: float) -> torch.Tensor:
        """``log f_{β'}(v) - log f_β(v) = (β'-β)(B(v) - (β'+β) C) + Σ_j [softplus(x'_j) - softplus(x_j)]``.

        The quadratic part is exact in closed form (``A(v)`` cancels). With ``x' = c_0 + β'u``, the
        hidden sum is :func:`pfzoo.logmath.softplus_difference`, on its exact branch because a
        real-valued ``v`` gives no static bound on ``u``. float64 ``[N]``.
        """
        step = beta_to - beta_from
        visible = step * (stats.visible_term.double() - (beta_to + beta_from) * self.target.quadratic_coefficient)
        x_to = self.target.base_hidden_bias + beta_to * stats.hidden_input
        return visible + softplus_difference(x_to, step * stats.hidden_input, max_abs_delta=math.inf)

    def tempered_log_density(self, stats: GaussianRBMPathStatistics, beta: torch.Tensor) -> torch.Tensor:
        """``log f_β(v) − log f_0(v) = β (B(v) − β C) + Σ_j [softplus(c_0 + β u)_j − softplus(c_0,j)]`` (``A(v)`` cancels)
        at a β per row and column ``beta [N, K]``, float64 ``[N, K]``: one ``[N, K, H]`` pass, in blocks of rows of at
        most :data:`~pfzoo.paths.base.TEMPERED_BLOCK_ELEMENTS` elements (thousands of chains over a ladder would
        otherwise hold gigabytes). The softplus is :func:`pfzoo.logmath.softplus`, in float64: exact to its rounding where
        :meth:`log_weight_increment`'s exact branch takes torch's, which returns ``x`` above 20 (off by ``e^{−x} < 2.1e-9``
        a unit there)."""
        target = self.target
        base_hidden_bias = target.base_hidden_bias.double()
        rows = tempered_block_rows(beta.shape[1], base_hidden_bias.numel())
        hidden = torch.cat([softplus(base_hidden_bias + block[:, :, None] * inputs.double()[:, None, :]).sum(-1)
                            for block, inputs in zip(beta.split(rows), stats.hidden_input.split(rows))])
        visible = beta * (stats.visible_term.double()[:, None] - beta * target.quadratic_coefficient)
        return visible + hidden - softplus(base_hidden_bias).sum()


register_family("gaussian_rbm", bases=("base_rate", "uniform"), make_base=same_family_base, free_base="uniform")


@register_path("gaussian_rbm", "geometric")
def gaussian_rbm_geometric_path(model, base, kernel) -> GaussianRBMGeometricPath:
    return GaussianRBMGeometricPath(target=model, base=base, kernel=kernel)
