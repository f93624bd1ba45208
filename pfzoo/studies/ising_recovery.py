"""How well a learner recovered a known Ising model: the coupling error ε_J and the correlation error ε_corr.

The errors of Sohl-Dickstein's thesis, Table 3.1 (and Sohl-Dickstein, Battaglino & DeWeese 2011, Fig. 2),
for a fully visible binary model ``E(x) = -½ xᵀJx - b·x`` fitted to samples of a true one:

    ε_J    = mean over pairs i < j of (J_ij − J*_ij)²
    ε_corr = mean over pairs i < j of (⟨x_i x_j⟩_model − ⟨x_i x_j⟩_data)²

Both average over *all* D(D−1)/2 pairs, so a lattice's non-neighbours (true coupling 0) count too. The true
model of a spin-glass data set is :func:`pfzoo.data.spin_glass_model` with the data set's arguments.
:class:`CorrelationTrace` follows ε_corr along training (Sohl-Dickstein et al. 2011, Fig. 2; thesis Fig. 3.2).
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor

from pfzoo.data import sample_spin_glass
from pfzoo.models.capabilities import Capability, require
from pfzoo.validation import check_matrix


def upper_pairs(matrix: Tensor) -> Tensor:
    """The entries ``i < j`` of a square ``matrix [D, D]``, row by row: ``[D(D−1)/2]``."""
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"matrix must be square [D, D], got shape {tuple(matrix.shape)}")
    rows, cols = torch.triu_indices(matrix.shape[0], matrix.shape[1], 1, device=matrix.device)
    return matrix[rows, cols]


def _couplings(model, name: str) -> Tensor:
    require(model, Capability.PAIRWISE_COUPLINGS, by=f"coupling_error's {name}")
    return model.symmetric_coupling.detach()


def coupling_error(model, truth, *, excluding: Sequence[int] = ()) -> float:
    """ε_J: the mean square error of ``model``'s couplings against ``truth``'s over all pairs ``i < j``, or over the pairs
    that touch no unit of ``excluding`` (e.g. :func:`nearly_constant_units` of the data, whose couplings a finite sample
    hardly determines).

    Both are Ising-family models of the same D (:attr:`Capability.PAIRWISE_COUPLINGS`); the difference
    is taken in the wider of their dtypes, on ``model``'s device.
    """
    learned, true = _couplings(model, "model"), _couplings(truth, "truth")
    if learned.shape != true.shape:
        raise ValueError(f"model and truth must have the same number of units, got {learned.shape[0]} and {true.shape[0]}")
    keep = torch.ones(learned.shape[0], dtype=torch.bool)
    for unit in excluding:
        if not 0 <= unit < learned.shape[0]:
            raise ValueError(f"excluding must hold unit indices in [0, {learned.shape[0]}), got {unit!r}")
        keep[unit] = False
    if int(keep.sum()) < 2:
        raise ValueError(f"excluding leaves fewer than two units of {learned.shape[0]}: no pair is left to compare")
    difference = (learned - true.to(learned.device))[keep][:, keep.to(learned.device)]
    return upper_pairs(difference).pow(2).mean().item()


def nearly_constant_units(samples: Tensor, *, fraction: float = 1e-3) -> list[int]:
    """The units of binary ``samples [N, D]`` whose rarer value takes at most ``fraction`` of the rows: the data say
    little about their couplings, which an unregularised fit may move far along a direction the loss hardly sees."""
    check_matrix(samples, "samples")
    ones = samples.sum(0)
    rarer = torch.minimum(ones, samples.shape[0] - ones)
    return torch.nonzero(rarer <= fraction * samples.shape[0]).flatten().tolist()


def pair_moments(samples: Tensor) -> Tensor:
    """``⟨x_i x_j⟩`` over the rows of ``samples [N, D]`` for the pairs ``i < j``: ``[D(D−1)/2]``."""
    check_matrix(samples, "samples")
    if samples.shape[0] == 0:
        raise ValueError("samples must hold at least one row")
    return upper_pairs(samples.T @ samples / samples.shape[0])


def correlation_error(samples: Tensor, reference: Tensor) -> float:
    """ε_corr: the mean square error of the pairwise moments of ``samples [N, D]`` against ``reference [M, D]``."""
    model_moments, data_moments = pair_moments(samples), pair_moments(reference)
    if model_moments.shape != data_moments.shape:
        raise ValueError(f"samples and reference must have the same width, got {samples.shape[1]} and {reference.shape[1]}")
    return (model_moments - data_moments.to(model_moments)).pow(2).mean().item()


class CorrelationTrace:
    """ε_corr of a model in training against ``reference [M, D]``, an epoch metric for :class:`~pfzoo.training.Trainer`.

    Each measurement draws a fresh sample of the model (:func:`~pfzoo.data.sample_spin_glass` with ``num_samples``,
    ``num_chains``, ``burn_in`` and ``thin``, from uniformly random starts), which costs far more than an L-BFGS step of a
    small model; so it measures at log-spaced epochs (1, 2, 3, 4, 5, 7, 8, 10, 13, 16, 20, ... for ``growth`` 1.25, each at least that times
    the last) and returns NaN at the epochs between. Every measurement draws from a generator seeded with ``seed``
    (common random numbers: the curve's steps are the model's, not the sampler's). The trainer calls it once per
    epoch, in order, so it counts epochs itself: use one instance per run, from epoch 1.
    """

    def __init__(self, reference: Tensor, *, num_samples: int, num_chains: int, burn_in: int, thin: int, seed: int,
                 growth: float = 1.25):
        check_matrix(reference, "reference")
        if not growth > 1:
            raise ValueError(f"growth must be above 1 (the ratio between measured epochs), got {growth!r}")
        self.reference = reference
        self.sampling = dict(num_chains=num_chains, burn_in=burn_in, thin=thin)
        self.num_samples, self.seed, self.growth = num_samples, seed, growth
        self._epoch, self._next = 0, 1.0

    def __call__(self, model) -> float:
        self._epoch += 1
        if self._epoch < self._next:
            return math.nan
        self._next = max(self._next * self.growth, self._epoch + 1)
        samples = sample_spin_glass(model, self.num_samples, **self.sampling, generator=torch.Generator(model.device).manual_seed(self.seed))
        return correlation_error(samples, self.reference)
