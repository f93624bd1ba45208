"""Geometric-average annealing path for Ising models (fully visible Boltzmann machines)."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from functools import cached_property

from pfzoo.kernels import PAIRWISE_BINARY, SCAN_CONDITIONALS, Kernel, ScanGibbs, check_kernel, coupling_edges
from pfzoo.models.ising import independent_sets
from pfzoo.paths.base import AnnealingPath
from pfzoo.paths.registry import register_family, register_path, same_family_base
from pfzoo.sampling import bernoulli


class IsingPathConditionals:
    """The Ising model of :class:`IsingGeometricPath` at β (``J_β = βJ``, ``b_β = (1-β) b_0 + β b``) as a scan-Gibbs
    target (:class:`~pfzoo.kernels.ScanConditionals`).

    Statistics of ``x [N, D]``: ``(s_0, s_1)`` with ``s_1(x) = ½ xᵀJx + b·x`` and ``s_0(x) = b_0·x`` (``[N]`` each), so
    ``log f_β(x) = (1-β) s_0 + β s_1``. The scan is symmetric, the blocks (independent sets of the target's coupling
    graph) ``B_1, …, B_m`` forward, then ``B_{m-1}, …, B_1`` back: a forward-only scan leaves ``f_β`` invariant but is
    not reversible (its reversal is the backward scan); the symmetric scan is, as RAISE requires when it runs the same
    transitions from the data down to the base. It costs ``2m - 1`` block updates (3 on a checkerboard lattice).

    It is also a :class:`~pfzoo.kernels.PairwiseBinary` target (couplings ``βJ``, biases ``b_β``), so a path built with
    ``kernel=SwendsenWang()`` (reversible too) moves clusters at the strongly coupled end.
    """

    offers = frozenset({SCAN_CONDITIONALS, PAIRWISE_BINARY})

    def __init__(self, target, base) -> None:
        if base.coupling.shape != target.coupling.shape:
            raise ValueError(f"base Ising model has {base.num_units} units, target {target.num_units}")
        if torch.any(base.symmetric_coupling != 0):
            raise ValueError("the base of an Ising geometric path must have zero couplings (independent units)")
        self.coupling = target.symmetric_coupling.detach()
        self.bias = target.bias.detach()
        self.base_bias = base.bias.detach().to(self.bias)
        blocks = independent_sets(self.coupling)
        self.scan = blocks + blocks[-2::-1]  # B_1 … B_m … B_1: a reversible kernel

    @cached_property
    def edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The coupled pairs ``i < j`` of the target (:func:`~pfzoo.kernels.coupling_edges`), found at the first call only."""
        return coupling_edges(self.coupling)

    def bias_at(self, beta: float) -> torch.Tensor:
        """``b_β = (1-β) b_0 + β b`` ``[D]``."""
        return (1 - beta) * self.base_bias + beta * self.bias

    def statistics(self, x: torch.Tensor, *, beta: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
        target_term = 0.5 * ((x @ self.coupling) * x).sum(-1) + x @ self.bias
        return x @ self.base_bias, target_term

    def draw_block(self, x: torch.Tensor, block: torch.Tensor, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        logits = beta * (x @ self.coupling[:, block] + self.bias[block]) + (1 - beta) * self.base_bias[block]
        return bernoulli(torch.sigmoid(logits), generator=generator)


class IsingGeometricPath(AnnealingPath):
    """Geometric path from an independent-units base (``J_0 = 0``, biases ``b_0``) to a target Ising model.

    The energy is linear in the parameters, so ``f_β = f_0^{1-β} f_1^β`` is the Ising model with
    ``J_β = βJ`` and ``b_β = (1-β) b_0 + β b`` (:class:`IsingPathConditionals`); an increment costs a subtraction of
    its statistics, and ``log Z_0 = Σ_i softplus(b_0,i)``. The default kernel is one symmetric scan of block Gibbs;
    :class:`~pfzoo.kernels.SwendsenWang` also acts on the path's target.
    """

    linear_in_beta = True

    def __init__(self, target, base, kernel: Kernel | None = None) -> None:
        self.target = IsingPathConditionals(target, base)
        self.kernel = ScanGibbs() if kernel is None else check_kernel(kernel, self.target.offers, "an Ising path")

    def draw_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        return bernoulli(torch.sigmoid(self.target.base_bias).expand(num_chains, -1), generator=generator)

    def base_log_partition(self) -> torch.Tensor:
        return F.softplus(self.target.base_bias.double()).sum()

    def log_weight_increment(self, stats, beta_from: float, beta_to: float) -> torch.Tensor:
        base_term, target_term = stats
        return (beta_to - beta_from) * (target_term.double() - base_term.double())


register_family("ising", bases=("base_rate", "uniform"), make_base=same_family_base, free_base="uniform")


@register_path("ising", "geometric")
def ising_geometric_path(model, base, kernel) -> IsingGeometricPath:
    return IsingGeometricPath(target=model, base=base, kernel=kernel)
