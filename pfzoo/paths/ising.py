"""Geometric-average annealing path for Ising models (fully visible Boltzmann machines)."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from pfzoo.models.ising import independent_sets
from pfzoo.paths.base import AnnealingPath
from pfzoo.paths.registry import refuse_kernel, register_family, register_path, same_family_base
from pfzoo.sampling import bernoulli


class IsingGeometricPath(AnnealingPath):
    """Geometric path from an independent-units base (``J_0 = 0``, biases ``b_0``) to a target Ising model.

    The energy is linear in the parameters, so ``f_β = f_0^{1-β} f_1^β`` is the Ising model with
    ``J_β = βJ`` and ``b_β = (1-β) b_0 + β b``. With the statistics ``s_1(x) = ½ xᵀJx + b·x`` and
    ``s_0(x) = b_0·x`` (``[N]`` each), ``log f_β(x) = (1-β) s_0 + β s_1``, so an increment costs a
    subtraction; ``log Z_0 = Σ_i softplus(b_0,i)``. The transition is one symmetric-scan block Gibbs
    sweep of the Ising model at β: the blocks (independent sets of the target's coupling graph)
    ``B_1, …, B_m`` forward, then ``B_{m-1}, …, B_1`` back. A forward-only scan leaves ``f_β``
    invariant but is not reversible (its reversal is the backward scan); the symmetric scan is, as
    RAISE requires when it runs the same transitions from the data down to the base. It costs
    ``2m - 1`` block updates (3 on a checkerboard lattice).
    """

    def __init__(self, target, base) -> None:
        if base.coupling.shape != target.coupling.shape:
            raise ValueError(f"base Ising model has {base.num_units} units, target {target.num_units}")
        if torch.any(base.symmetric_coupling != 0):
            raise ValueError("the base of an Ising geometric path must have zero couplings (independent units)")
        self.coupling = target.symmetric_coupling.detach()
        self.bias = target.bias.detach()
        self.base_bias = base.bias.detach().to(self.bias)
        self.blocks = independent_sets(self.coupling)
        self.scan = self.blocks + self.blocks[-2::-1]  # B_1 … B_m … B_1: a reversible kernel

    def sample_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        return bernoulli(torch.sigmoid(self.base_bias).expand(num_chains, -1), generator=generator)

    def base_log_partition(self) -> torch.Tensor:
        return F.softplus(self.base_bias.double()).sum()

    def statistics(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        target_term = 0.5 * ((x @ self.coupling) * x).sum(-1) + x @ self.bias
        return x @ self.base_bias, target_term

    def log_weight_increment(self, stats, beta_from: float, beta_to: float) -> torch.Tensor:
        base_term, target_term = stats
        return (beta_to - beta_from) * (target_term.double() - base_term.double())

    def transition(self, x: torch.Tensor, stats, beta: float, *, generator: torch.Generator | None = None):
        x = x.clone()
        for block in self.scan:
            logits = beta * (x @ self.coupling[:, block] + self.bias[block]) + (1 - beta) * self.base_bias[block]
            x[:, block] = bernoulli(torch.sigmoid(logits), generator=generator)
        return x, self.statistics(x), None


register_family("ising", bases=("base_rate", "uniform"), make_base=same_family_base, free_base="uniform")


@register_path("ising", "geometric")
def ising_geometric_path(model, base, kernel) -> IsingGeometricPath:
    refuse_kernel(model, kernel)
    return IsingGeometricPath(target=model, base=base)
