"""MCMC transition kernels: ``step(state, target, *, beta, generator) -> (state, info)``."""

from pfzoo.kernels.gibbs import GibbsInfo, GibbsState, block_gibbs_step, run_gibbs

__all__ = ["GibbsInfo", "GibbsState", "block_gibbs_step", "run_gibbs"]
