"""Geometric-average path for continuous models, with any position-space kernel (HMC, Metropolis)."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from pfzoo.kernels.hmc import Evaluation
from pfzoo.paths.base import AnnealingPath


class ContinuousPathStatistics(NamedTuple):
    """Base and target energies ``[N]`` and gradients ``[N, D]`` at the chains' positions."""

    base_energy: torch.Tensor
    target_energy: torch.Tensor
    base_grad: torch.Tensor
    target_grad: torch.Tensor


class ContinuousGeometricPath(AnnealingPath):
    """``log f_β(x) = −(1−β) E_0(x) − β E_1(x)`` from a tractable base (a Gaussian) to the target (HAIS eq. 13).

    Statistics are the two energies and gradients, so ``log f_β``, its gradient and the AIS increment
    ``log f_{β'}(x) − log f_β(x) = −(β'−β)(E_1(x) − E_0(x))`` follow at any β without re-evaluating
    the models; one kernel step then costs one joint energy-and-gradient evaluation of base and
    target per leapfrog step. The kernel (:class:`~pfzoo.kernels.HMCKernel` for HAIS, whose momentum
    is part of the state and so carried across intermediate distributions, or
    :class:`~pfzoo.kernels.RandomWalkMetropolis`) leaves ``f_β`` invariant.

    Args:
        target: a continuous model with ``energy_and_grad(x) -> (energy [N], grad [N, D])``.
        base: a model with the same, plus exact ``sample(n, generator=...)`` and ``log_partition()``.
        kernel: the transition kernel.
    """

    def __init__(self, target, base, kernel) -> None:
        if base.num_visible != target.num_visible:
            raise ValueError(f"base has {base.num_visible} dimensions, target {target.num_visible}")
        self.target = target
        self.base = base
        self.kernel = kernel

    def sample_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> Any:
        with torch.no_grad():
            position = self.base.sample(num_chains, generator=generator)
        return self.kernel.init_state(position, generator=generator)

    def base_log_partition(self) -> torch.Tensor:
        return self.base.log_partition()

    def _statistics_at(self, x: torch.Tensor) -> ContinuousPathStatistics:
        base_energy, base_grad = self.base.energy_and_grad(x)
        target_energy, target_grad = self.target.energy_and_grad(x)
        return ContinuousPathStatistics(base_energy, target_energy, base_grad, target_grad)

    def statistics(self, state: Any) -> ContinuousPathStatistics:
        return self._statistics_at(self.kernel.position(state))

    @staticmethod
    def _evaluation(stats: ContinuousPathStatistics, beta: float) -> Evaluation:
        """Energy ``(1−β)E_0 + βE_1`` and its gradient at β, carrying the statistics along."""
        energy = torch.lerp(stats.base_energy, stats.target_energy, beta)
        grad = torch.lerp(stats.base_grad, stats.target_grad, beta)
        return Evaluation(energy, grad, stats)

    def log_f(self, stats: ContinuousPathStatistics, beta: float) -> torch.Tensor:
        """``log f_β(x)`` (float64 ``[N]``)."""
        return -torch.lerp(stats.base_energy.double(), stats.target_energy.double(), beta)

    def log_weight_increment(self, stats: ContinuousPathStatistics, beta_from: float, beta_to: float) -> torch.Tensor:
        return (beta_from - beta_to) * (stats.target_energy.double() - stats.base_energy.double())

    def transition(
        self, state: Any, stats: ContinuousPathStatistics, beta: float, *, generator: torch.Generator | None = None
    ) -> tuple[Any, ContinuousPathStatistics]:
        evaluate = lambda x: self._evaluation(self._statistics_at(x), beta)  # noqa: E731
        state, evaluation, _ = self.kernel.at(beta).step(state, self._evaluation(stats, beta), evaluate, generator=generator)
        return state, evaluation.extras
