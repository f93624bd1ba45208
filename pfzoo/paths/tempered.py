"""A path's target with the tempered log density replica exchange needs, so that :class:`~pfzoo.kernels.ParallelTempering`
runs over the levels of any annealing path."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from pfzoo.kernels import STATISTICS_LOG_DENSITY, TEMPERED_LOG_DENSITY
from pfzoo.paths.base import AnnealingPath


class TemperedPathTarget:
    """``path.target`` (every draw and statistic is its own) that also offers :data:`~pfzoo.kernels.TEMPERED_LOG_DENSITY`
    at the path's levels ``levels`` (the β's of a ladder).

    ``log_density(x, beta) = log f_β(x) − log f_0(x)``, from the path's weight increment at the statistics of ``x``: it
    differs from ``log f_β(x)`` by a term that does not depend on β, which cancels in every exchange
    ratio ``f_{β_i}(x_j) f_{β_j}(x_i) / (f_{β_i}(x_i) f_{β_j}(x_j))``. A tensor ``beta [M, K]`` is evaluated in one pass
    where the path offers :meth:`~pfzoo.paths.base.AnnealingPath.tempered_log_density`; elsewhere it must hold values
    of ``levels`` only (how :class:`~pfzoo.kernels.ParallelTempering` calls it on its ladder), and each level's weight
    increment from 0 is computed for every row (``[M]`` work per level beside the one evaluation of the statistics).
    No host read either way.
    """

    def __init__(self, path: AnnealingPath, levels: Sequence[float]) -> None:
        self.path = path
        self.levels = tuple(float(level) for level in levels)
        # a path whose statistics do not depend on β lets the exchanges read those its states keep
        kept = {STATISTICS_LOG_DENSITY} if path.beta_free_statistics else set()
        self.offers = path.target.offers | {TEMPERED_LOG_DENSITY} | kept

    def __getattr__(self, name: str) -> Any:
        # the inner kernel's protocol (statistics, draws, scans): the path's own target answers
        return getattr(self.path.target, name)

    def log_density(self, position: torch.Tensor, *, beta: float | torch.Tensor, stats: Any = None) -> torch.Tensor:
        """``log f_β − log f_0`` float64 of ``position [M, D]``: ``[M]`` for β a number, ``[M, K]`` for β an
        ``[M, K]`` tensor; from the states' kept ``stats`` where given (paths with
        :attr:`~pfzoo.paths.base.AnnealingPath.beta_free_statistics`)."""
        stats = self.path.target.statistics(position) if stats is None else stats
        if not torch.is_tensor(beta):
            return self.path.log_weight_increment(stats, 0.0, beta)
        beta = beta.double()
        density = self.path.tempered_log_density(stats, beta)
        if density is not None:
            return density
        density = torch.zeros(beta.shape, dtype=torch.float64, device=beta.device)
        for level in self.levels:
            density = torch.where(beta == level, self.path.log_weight_increment(stats, 0.0, level)[:, None], density)
        return density
