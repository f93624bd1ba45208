"""AIS along a path object the caller built: studies of paths and schedules (Grosse, Maddison & Salakhutdinov 2013).

The :class:`~pfzoo.estimators.AIS` estimator builds its path from a model on every call. A study that compares
paths runs one path at many K (paying its construction, e.g. the RBM spline's knot fitting, once) or a path
between two given distributions (two Gaussians at distance d); :func:`anneal_path` runs the annealing engine
(:func:`~pfzoo.estimators.annealing.anneal`, Neal 2001 eqs. 3–4) on such a path and reduces the weights with
:func:`~pfzoo.logmath.summarize_log_weights`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from pfzoo.estimators.annealing import anneal
from pfzoo.logmath import summarize_log_weights
from pfzoo.paths.schedules import ScheduleSpec, make_betas
from pfzoo.validation import allocating, check_positive_int


class PathRun(NamedTuple):
    """log_weights: float64 ``[N]``, each chain's ``log Z_0 + log w`` (``E[exp]`` = Z); log_z: ``log Ẑ`` (a stochastic
    lower bound on log Z); stderr: its delta-method standard error; ess: the effective sample size of the weights;
    mean_log_weight: ``mean(log_weights)``, whose shortfall from log Z is the path's bias (``Σ_k KL(p_(k−1) ‖ p_k)``
    under perfect transitions), and mean_log_weight_stderr: its standard error ``sd / √N``."""

    log_weights: torch.Tensor
    log_z: float
    stderr: float
    ess: float
    mean_log_weight: float
    mean_log_weight_stderr: float


def anneal_path(path, schedule: ScheduleSpec, num_steps: int | None, num_chains: int, *,
                generator: torch.Generator | None = None) -> PathRun:
    """AIS with ``num_chains`` chains drawn from ``path.sample_base`` along ``make_betas(schedule, num_steps)``.

    The chains' random stream: the base draw, then the transitions, all from ``generator``.
    """
    check_positive_int(num_chains, "num_chains")
    betas = make_betas(schedule, num_steps)
    with allocating("num_chains", num_chains):
        result = anneal(path, betas, path.sample_base(num_chains, generator=generator), generator=generator)
    log_weights = result.log_weights + path.base_log_partition()
    summary = summarize_log_weights(log_weights)
    return PathRun(log_weights, summary.log_mean.item(), summary.stderr.item(), summary.ess.item(),
                   log_weights.mean().item(), log_weights.std().item() / math.sqrt(num_chains))
