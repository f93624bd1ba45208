"""Geometric-average path for models over real vectors, with any position-space kernel (HMC, Metropolis), and their Gaussian bases."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from pfzoo.kernels.hmc import Evaluation, HMCKernel
from pfzoo.models.gaussian import Gaussian
from pfzoo.paths.base import KernelPath
from pfzoo.paths.registry import register_family, register_path
from pfzoo.validation import check_matrix

DEFAULT_STEP_SIZE = 0.2
"""The leapfrog step of the default HMC transition (HAIS's ε)."""


class ContinuousPathStatistics(NamedTuple):
    """Base and target energies ``[N]`` and gradients ``[N, D]`` at the chains' positions."""

    base_energy: torch.Tensor
    target_energy: torch.Tensor
    base_grad: torch.Tensor
    target_grad: torch.Tensor


class GeometricEnergyTarget:
    """``E_β = (1−β) E_0 + β E_1`` as a :class:`~pfzoo.kernels.PositionTarget`: statistics are both energies and gradients."""

    def __init__(self, target, base) -> None:
        self.target = target
        self.base = base

    def statistics(self, x: torch.Tensor) -> ContinuousPathStatistics:
        base_energy, base_grad = self.base.energy_and_grad(x)
        target_energy, target_grad = self.target.energy_and_grad(x)
        return ContinuousPathStatistics(base_energy, target_energy, base_grad, target_grad)

    def evaluation(self, stats: ContinuousPathStatistics, beta: float) -> Evaluation:
        energy = torch.lerp(stats.base_energy, stats.target_energy, beta)
        grad = torch.lerp(stats.base_grad, stats.target_grad, beta)
        return Evaluation(energy, grad, stats)


class ContinuousGeometricPath(KernelPath):
    """``log f_β(x) = −(1−β) E_0(x) − β E_1(x)`` from a tractable base (a Gaussian) to the target (HAIS eq. 13).

    Statistics are the two energies and gradients, so ``log f_β``, its gradient and the AIS increment
    ``log f_{β'}(x) − log f_β(x) = −(β'−β)(E_1(x) − E_0(x))`` follow at any β without re-evaluating
    the models; one kernel step then costs one joint energy-and-gradient evaluation of base and
    target per leapfrog step. The kernel (:class:`~pfzoo.kernels.HMCKernel` for HAIS, whose momentum
    is part of the state and so carried across intermediate distributions, or
    :class:`~pfzoo.kernels.RandomWalkMetropolis`) leaves ``f_β`` invariant; its state carries the statistics.

    Args:
        target: a model with ``energy_and_grad(x) -> (energy [N], grad [N, D])``.
        base: a model with the same, plus exact ``sample(n, generator=...)`` and ``log_partition()``.
        kernel: the transition kernel.
    """

    def __init__(self, target, base, kernel) -> None:
        if not (callable(getattr(kernel, "step", None)) and callable(getattr(kernel, "init_state", None))):
            raise ValueError(f"kernel must be a position-space transition kernel with init_state and step (e.g. pfzoo.kernels.HMCKernel), "
                             f"got {type(kernel).__name__}")
        if base.num_visible != target.num_visible:
            raise ValueError(f"base has {base.num_visible} dimensions, target {target.num_visible}")
        self.base = base
        self.kernel = kernel
        self.density = GeometricEnergyTarget(target, base)

    def sample_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> Any:
        with torch.no_grad():
            position = self.base.sample(num_chains, generator=generator)
        return self.kernel.init_state(position, self.density, generator=generator)

    def base_log_partition(self) -> torch.Tensor:
        return self.base.log_partition()

    def log_f(self, stats: ContinuousPathStatistics, beta: float) -> torch.Tensor:
        """``log f_β(x)`` (float64 ``[N]``)."""
        return -torch.lerp(stats.base_energy.double(), stats.target_energy.double(), beta)

    def log_weight_increment(self, stats: ContinuousPathStatistics, beta_from: float, beta_to: float) -> torch.Tensor:
        return (beta_from - beta_to) * (stats.target_energy.double() - stats.base_energy.double())


def gaussian_base(model, name: str, data: torch.Tensor | None, smoothing: float) -> Gaussian:
    """A Gaussian with exactly known ``log Z`` to anneal from, on the model's device and dtype.

    ``"fitted"``: :meth:`Gaussian.fit <pfzoo.models.Gaussian.fit>` of ``data [N, M]``, i.e.
    ``N(mean(data), cov(data) + 1e-6 · I)`` (the ``1e-6 · I`` keeps the precision finite when the data lie
    in a subspace). ``"isotropic"``: ``N(0, I)``. ``smoothing`` is the binary families' pseudo-count, unused here.
    """
    if name == "fitted":
        if data is None:
            raise ValueError("base='fitted' needs data [N, M] to fit the mean and covariance")
        # data only supplies statistics here (mean, covariance), so it is cast, not refused, when its dtype differs
        data = check_matrix(data, "data", width=model.num_visible, device=model.device, allow_empty=False)
        return Gaussian.fit(data.to(model.dtype))
    return Gaussian(model.num_visible).to(device=model.device, dtype=model.dtype)


register_family("continuous", bases=("fitted", "isotropic"), make_base=gaussian_base, free_base="isotropic")


@register_path("continuous", "geometric")
def continuous_geometric_path(model, base, kernel) -> ContinuousGeometricPath:
    """Default transition: HAIS's HMC (one leapfrog step of ε = 0.2, partial momentum refresh)."""
    return ContinuousGeometricPath(target=model, base=base, kernel=HMCKernel(DEFAULT_STEP_SIZE) if kernel is None else kernel)
