"""MCMC transition kernels, all under one contract (:class:`Kernel`): ``init(position, target) -> state`` and
``step(state, target, *, beta, generator, **settings) -> (state, info)``.

Gibbs kernels (:class:`BlockGibbs`, :class:`ScanGibbs`) act on targets with exact conditionals
(:class:`BlockConditionals`, :class:`ScanConditionals`); position-space kernels (:class:`HMCKernel`,
:class:`LangevinKernel` (MALA and unadjusted Langevin), :class:`NUTSKernel`, :class:`RandomWalkMetropolis`, :class:`BitFlipMetropolis`) on a
:class:`PositionTarget`. :class:`Cycle` and
:class:`Repeat` build kernels from kernels, and :class:`ParallelTempering` runs replicas of any kernel over a ladder of
β (:func:`temperature_ladder`, :func:`adapt_ladder`); :class:`SwendsenWang` moves clusters of a :class:`PairwiseBinary`
target (Ising models, spin glasses); :func:`adaptive_chain` adapts an HMC step between transitions.
"""

from pfzoo.kernels.adaptation import AdaptedChain, adaptive_chain
from pfzoo.kernels.base import (
    BINARY_ENERGY_VALUES, BLOCK_CONDITIONALS, CHAIN_BETAS, ENERGY_AND_GRADIENT, EXACT_DRAWS, PAIRWISE_BINARY, REAL_ENERGY_VALUES,
    SCAN_CONDITIONALS, STATISTICS_LOG_DENSITY, TEMPERED_LOG_DENSITY, CompositeInfo, Cycle, Kernel, ReflectingKernel, Repeat, Target, check_kernel,
    reflection_bounds, run_chain, select_chains, take_chains,
)
from pfzoo.kernels.exact import ExactDraws, ExactInfo, ExactState, PerfectTransition
from pfzoo.kernels.gibbs import BlockConditionals, BlockGibbs, GibbsInfo, GibbsState, ScanConditionals, ScanGibbs
from pfzoo.kernels.hmc import (
    EnergyTarget, Evaluation, HMCInfo, HMCKernel, HMCState, PositionTarget, hais_momentum_refresh, leapfrog, refresh_momentum,
)
from pfzoo.kernels.langevin import LangevinInfo, LangevinKernel, LangevinState
from pfzoo.kernels.metropolis import BitFlipMetropolis, MetropolisInfo, MetropolisState, RandomWalkMetropolis
from pfzoo.kernels.nuts import NUTSInfo, NUTSKernel, NUTSState
from pfzoo.kernels.swendsen_wang import PairwiseBinary, SwendsenWang, SwendsenWangInfo, cluster_labels, coupling_edges
from pfzoo.kernels.tempering import (
    SWAP_SCHEMES, ParallelTempering, TemperingInfo, TemperingState, adapt_ladder, check_ladder, temperature_ladder,
)

__all__ = [
    "BINARY_ENERGY_VALUES", "BLOCK_CONDITIONALS", "ENERGY_AND_GRADIENT", "EXACT_DRAWS", "ExactDraws", "ExactInfo", "ExactState",
    "PerfectTransition", "REAL_ENERGY_VALUES", "ReflectingKernel", "SCAN_CONDITIONALS", "Target", "check_kernel", "reflection_bounds",
    "AdaptedChain", "BitFlipMetropolis", "BlockConditionals", "BlockGibbs", "CompositeInfo", "Cycle", "EnergyTarget", "Evaluation",
    "GibbsInfo", "GibbsState", "HMCInfo", "HMCKernel", "HMCState", "Kernel", "MetropolisInfo", "MetropolisState", "PositionTarget",
    "RandomWalkMetropolis", "Repeat", "ScanConditionals", "ScanGibbs", "adaptive_chain", "hais_momentum_refresh", "leapfrog",
    "refresh_momentum", "run_chain", "select_chains", "take_chains", "LangevinInfo", "LangevinKernel", "LangevinState",
    "NUTSInfo", "NUTSKernel", "NUTSState",
    "CHAIN_BETAS", "STATISTICS_LOG_DENSITY", "SWAP_SCHEMES", "TEMPERED_LOG_DENSITY", "ParallelTempering", "TemperingInfo", "TemperingState", "adapt_ladder",
    "check_ladder", "temperature_ladder",
    "PAIRWISE_BINARY", "PairwiseBinary", "SwendsenWang", "SwendsenWangInfo", "cluster_labels", "coupling_edges",
]
