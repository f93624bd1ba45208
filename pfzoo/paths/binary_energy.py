"""Geometric path for energies over binary vectors that offer nothing but the energy (e.g. :class:`~pfzoo.models.EnergyFunction`)."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch.nn import functional as F

from pfzoo.kernels import BINARY_ENERGY_VALUES, BitFlipMetropolis, Evaluation, Kernel, check_kernel
from pfzoo.models.ising import Ising
from pfzoo.models.rbm import base_rate_visible_bias
from pfzoo.paths.base import AnnealingPath
from pfzoo.paths.registry import register_family, register_path
from pfzoo.sampling import bernoulli
from pfzoo.validation import check_binary


class BinaryPathStatistics(NamedTuple):
    """Base and target energies ``[N]`` of binary states."""

    base_energy: torch.Tensor
    target_energy: torch.Tensor


class BinaryGeometricEnergy:
    """``E_β = (1−β) E_0 + β E_1`` over binary states, as a :class:`~pfzoo.kernels.PositionTarget` without gradients."""

    offers = frozenset({BINARY_ENERGY_VALUES})

    def __init__(self, target, base_bias: torch.Tensor) -> None:
        self.target = target
        self.base_bias = base_bias

    def statistics(self, x: torch.Tensor) -> BinaryPathStatistics:
        return BinaryPathStatistics(-(x @ self.base_bias), self.target.energy(x))

    def evaluation(self, stats: BinaryPathStatistics, beta: float) -> Evaluation:
        return Evaluation(torch.lerp(stats.base_energy, stats.target_energy, beta), None, stats)


class BinaryGeometricPath(AnnealingPath):
    """``log f_β(x) = −(1−β) E_0(x) − β E_1(x)`` from independent units ``E_0(x) = −b_0·x`` to the target energy.

    ``log Z_0 = Σ_i softplus(b_0,i)``; the increment is ``−(β'−β)(E_1 − E_0)``; transitions are
    :class:`~pfzoo.kernels.BitFlipMetropolis` (``kernel``; default one proposal per unit).
    """

    linear_in_beta = True

    def __init__(self, target, base: Ising, kernel: Kernel | None = None) -> None:
        if base.num_units != target.num_visible:
            raise ValueError(f"base has {base.num_units} units, target {target.num_visible}")
        self.base_bias = base.bias.detach().to(target.dtype)
        self.kernel = BitFlipMetropolis() if kernel is None else check_kernel(kernel, BinaryGeometricEnergy.offers, "a path over binary energies")
        self.target = BinaryGeometricEnergy(target, self.base_bias)

    def draw_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        return bernoulli(torch.sigmoid(self.base_bias).expand(num_chains, -1), generator=generator)

    def base_log_partition(self) -> torch.Tensor:
        return F.softplus(self.base_bias.double()).sum()

    def log_weight_increment(self, stats: BinaryPathStatistics, beta_from: float, beta_to: float) -> torch.Tensor:
        return (beta_from - beta_to) * (stats.target_energy.double() - stats.base_energy.double())


def independent_units_base(model, name: str, data: torch.Tensor | None, smoothing: float) -> Ising:
    """Independent Bernoulli units (an Ising model without couplings): all at ½ (``"uniform"``) or at the smoothed
    unit means of ``data [N, M]`` (``"base_rate"``)."""
    zeros = torch.zeros(model.num_visible, model.num_visible, dtype=model.dtype, device=model.device)
    if name == "base_rate":
        if data is None:
            raise ValueError("base='base_rate' needs data [N, M] to take unit means from")
        return Ising.from_tensors(zeros, base_rate_visible_bias(
            check_binary(data, "data", width=model.num_visible, device=model.device, allow_empty=False).to(model.dtype), smoothing).to(model.dtype))
    return Ising.from_tensors(zeros, torch.zeros(model.num_visible, dtype=model.dtype, device=model.device))


register_family("binary_energy", bases=("base_rate", "uniform"), make_base=independent_units_base, free_base="uniform")


@register_path("binary_energy", "geometric")
def binary_geometric_path(model, base, kernel) -> BinaryGeometricPath:
    return BinaryGeometricPath(target=model, base=base, kernel=kernel)
