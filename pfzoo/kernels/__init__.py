"""MCMC transition kernels, all with ``step(state, target, *, beta, generator) -> (state, info)``.

Gibbs kernels (:class:`BlockGibbs`, :class:`SweepGibbs`) take a model with exact conditionals as the
target; position-space kernels (:class:`HMCKernel`, :class:`RandomWalkMetropolis`,
:class:`BitFlipMetropolis`) take a :class:`PositionTarget` (see :mod:`pfzoo.kernels.hmc`).
"""

from pfzoo.kernels.gibbs import BlockGibbs, GibbsInfo, GibbsState, SweepGibbs, gibbs_kernel, run_gibbs
from pfzoo.kernels.hmc import (
    EnergyTarget, Evaluation, HMCInfo, HMCKernel, HMCState, PositionTarget, hais_momentum_refresh, leapfrog, refresh_momentum,
)
from pfzoo.kernels.metropolis import BitFlipMetropolis, MetropolisInfo, MetropolisState, RandomWalkMetropolis

__all__ = [
    "BitFlipMetropolis", "BlockGibbs", "EnergyTarget", "Evaluation", "GibbsInfo", "GibbsState", "HMCInfo", "HMCKernel", "HMCState",
    "MetropolisInfo", "MetropolisState", "PositionTarget", "RandomWalkMetropolis", "SweepGibbs", "gibbs_kernel",
    "hais_momentum_refresh", "leapfrog", "refresh_momentum", "run_gibbs",
]
