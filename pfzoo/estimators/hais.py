"""Hamiltonian annealed importance sampling (Sohl-Dickstein & Culpepper 2011)."""

from __future__ import annotations

from pfzoo.estimators.ais import AIS
from pfzoo.kernels.hmc import HMCKernel
from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability
from pfzoo.paths.schedules import ScheduleSpec


class HAIS(AIS):
    """AIS whose transitions are single leapfrog steps with the momentum carried across distributions.

    Each intermediate distribution ``f_β`` gets one :class:`~pfzoo.kernels.HMCKernel` transition:
    partial momentum refresh ``p ← √(1−γ) p + √γ n`` with ``γ = 1 − 0.5^ε`` (half the momentum
    power per unit time), ``num_leapfrog`` leapfrog steps of size ε, Metropolis accept/reject and a
    momentum flip on rejection (HAIS eqs. 17–25). The momentum is part of the chain state, so the
    chain keeps moving in one direction through many distributions instead of diffusing.

    The paper's baselines are the same estimator with other kernels:
    ``HAIS(..., momentum_refresh=1.0)`` (one leapfrog step, momentum fully resampled every
    distribution) and ``AIS(..., base="isotropic", kernel=RandomWalkMetropolis(0.1))``.

    Args:
        num_chains: particles N (the paper uses 200).
        num_steps: intermediate distributions K.
        step_size: leapfrog ε (the paper uses 0.2).
        schedule, base, base_smoothing, diagnostics, compile: as :class:`AIS`; bases "isotropic" (N(0, I)), "fitted" (a
            Gaussian fitted to ``data``), "student_t" (independent Student-t experts fitted to ``data``,
            :class:`~pfzoo.paths.continuous.StudentTBase`) or "auto": without data "isotropic", with data "student_t"
            when the model's experts or the data are heavy-tailed, else "fitted". The leapfrog steps in the base's
            unit-scale coordinates, so ε is relative to the fitted scale (a target 1000× narrower than N(0, I) needs
            data to be estimated; without them its collapsed acceptance and ESS are reported as warnings).

    Models whose Z is infinite (``model.improper_reason()``: a product of experts with fewer independent filters than
    dimensions, or Student-t shapes λ ≤ ½ in a complete one) are refused with :class:`~pfzoo.models.MissingCapability`.
        num_leapfrog, momentum_refresh, flip, lower, stiffness: as :class:`~pfzoo.kernels.HMCKernel`. With
            stiffness s > 0 the leapfrog step at β is ``ε / √(1 + β s)``: ε sized for the base distribution, s for
            how much stiffer the target is.
    """

    config_name = "hais"

    def __init__(
        self,
        num_chains: int = 200,
        num_steps: int | None = 1000,
        step_size: float = 0.2,
        *,
        schedule: ScheduleSpec = "linear",
        base: str = "auto",
        base_smoothing: float = 1.0,
        num_leapfrog: int = 1,
        momentum_refresh: float | None = None,
        flip: str = "standard",
        lower: float | list[float] | None = None,
        stiffness: float = 0.0,
        diagnostics: bool = False,
        compile: bool = False,
    ) -> None:
        kernel = HMCKernel(step_size, num_leapfrog=num_leapfrog, momentum_refresh=momentum_refresh, flip=flip, lower=lower,
                           stiffness=stiffness)
        super().__init__(num_chains, num_steps, schedule, base, base_smoothing, kernel=kernel, diagnostics=diagnostics, compile=compile)

    def missing_for_partition(self, model: EnergyModel) -> str | None:
        if Capability.REAL_ENERGY not in model.capabilities:
            return Capability.REAL_ENERGY.value
        return super().missing_for_partition(model)
