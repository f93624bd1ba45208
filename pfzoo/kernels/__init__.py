"""MCMC transition kernels.

Block Gibbs (:func:`block_gibbs_step`) follows ``step(state, target, *, beta, generator)``; the
position-space kernels (:class:`HMCKernel`, :class:`RandomWalkMetropolis`) take the energy as an
``evaluate`` function plus the cached evaluation of the current state (see :mod:`pfzoo.kernels.hmc`).
"""

from pfzoo.kernels.gibbs import GibbsInfo, GibbsState, block_gibbs_step, run_gibbs
from pfzoo.kernels.hmc import Evaluation, HMCInfo, HMCKernel, HMCState, hais_momentum_refresh, leapfrog, refresh_momentum
from pfzoo.kernels.metropolis import MetropolisInfo, RandomWalkMetropolis

__all__ = [
    "Evaluation", "GibbsInfo", "GibbsState", "HMCInfo", "HMCKernel", "HMCState", "MetropolisInfo",
    "RandomWalkMetropolis", "block_gibbs_step", "hais_momentum_refresh", "leapfrog", "refresh_momentum", "run_gibbs",
]
