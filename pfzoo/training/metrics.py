"""Cheap training diagnostics that need no partition function."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import torch
from torch.nn import functional as F

from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability, require
from pfzoo.validation import check_binary, check_generator

if TYPE_CHECKING:
    from pfzoo.estimators.base import LikelihoodEstimate

logger = logging.getLogger(__name__)

PSEUDO_LIKELIHOOD_MAX_UNITS = 10
"""The pseudo-likelihood metric needs two exact free energies per example; it is skipped for models whose
``free_energy_cost`` (``log2`` of the terms per free energy) exceeds this (a DBM's even hidden units)."""

def random_rows(data: torch.Tensor, count: int | None, seed: int) -> torch.Tensor:
    """The rows of ``data [N, V]`` a diagnostic reads: all of them when ``count`` is ``None`` or at least N, else
    ``count`` rows drawn at random without replacement (a generator seeded ``seed``, kept in ascending order): splits
    may be sorted by class (binarized MNIST's test file is), so a prefix would not do."""
    if count is None or data.shape[0] <= count:
        return data
    rows = torch.randperm(data.shape[0], generator=torch.Generator().manual_seed(seed))[:count].sort().values
    return data[rows.to(data.device)]


def has_reconstruction(model: EnergyModel) -> bool:
    """Whether :func:`reconstruction_error` applies (:attr:`Capability.RECONSTRUCTION`: RBMs, DBMs)."""
    return Capability.RECONSTRUCTION in model.capabilities


def pseudo_likelihood_is_affordable(model: EnergyModel, max_units: int = PSEUDO_LIKELIHOOD_MAX_UNITS) -> bool:
    """Whether :func:`pseudo_log_likelihood` is cheap: binary visible units and an exact free energy of at
    most ``2^max_units`` terms per example (and within the model's own ``max_enumeration_units``)."""
    cost = model.free_energy_cost
    limit = min(max_units, model.max_enumeration_units or max_units)
    return bool(model.binary_visible) and cost is not None and cost <= limit


@torch.no_grad()
def reconstruction_error(model: EnergyModel, v: torch.Tensor) -> float:
    """Mean squared error ``mean_{n,i} (v_ni - v̂_ni)²`` of the mean-field reconstruction ``v̂ = model.reconstruct(v)``
    of ``v [B, V]`` (for an RBM ``σ(σ(vW + c) Wᵀ + b)``; for a DBM through its first hidden layer's mean-field means).
    A diagnostic of how much the (approximate) posterior retains about ``v``, not a likelihood."""
    require(model, Capability.RECONSTRUCTION, by="reconstruction_error")
    model.check_visible(v, "v")
    return (v - model.reconstruct(v)).pow(2).mean().item()


@torch.no_grad()
def pseudo_log_likelihood(model: EnergyModel, v: torch.Tensor, *, generator: torch.Generator | None = None) -> float:
    """Stochastic pseudo-log-likelihood of binary ``v [B, V]``, averaged over the B examples.

    The pseudo-log-likelihood ``Σ_i log p(v_i | v_{-i})`` is estimated, per example, from one
    uniformly drawn unit ``i``: ``V · log σ(F(ṽ) - F(v))`` with ``ṽ`` equal to ``v`` with unit ``i``
    flipped, since ``p(v_i | v_{-i}) = e^{-F(v)} / (e^{-F(v)} + e^{-F(ṽ)})``. Unbiased for the
    pseudo-log-likelihood; needs only ``free_energy``.
    """
    check_binary(v, "v", width=model.num_visible, device=model.device, dtype=model.dtype)
    check_generator(generator, model.device)
    rows = torch.arange(v.shape[0], device=v.device)
    units = torch.randint(v.shape[1], (v.shape[0],), generator=generator, device=v.device)
    flipped = v.clone()
    flipped[rows, units] = 1 - flipped[rows, units]
    per_example = v.shape[1] * F.logsigmoid(model.free_energy(flipped) - model.free_energy(v))
    return per_example.mean().item()


def estimate_record(estimate: LikelihoodEstimate, held_out_name: str) -> dict[str, float | None]:
    """An epoch record's fields for a held-out log-likelihood estimate: ``<held>_log_likelihood`` and its ``_stderr``,
    ``log_z`` (``None`` without a partition estimate), ``log_z_ess`` (its weights' effective sample size, where it has
    them) and ``<held>_log_likelihood_warnings``, how many reasons not to trust it, each logged as a warning: an
    evaluation whose estimator warns (AIS whose few chains carry the weight) must not read as a clean number in the
    run's metrics."""
    for warning in estimate.warnings:
        logger.warning("the %s log-likelihood estimate may be wrong: %s", held_out_name, warning)
    partition = estimate.partition
    record = {f"{held_out_name}_log_likelihood": estimate.mean, f"{held_out_name}_log_likelihood_stderr": estimate.stderr,
              "log_z": None if partition is None else partition.log_z, f"{held_out_name}_log_likelihood_warnings": len(estimate.warnings)}
    if partition is not None and partition.ess is not None:
        record["log_z_ess"] = float(partition.ess)
    return record
