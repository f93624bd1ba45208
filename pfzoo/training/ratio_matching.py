"""Ratio matching (Hyvärinen 2007; Deep Learning eq. 18.26) for binary models, and its stochastic form that computes
an importance-sampled subset of the terms (after Dauphin & Bengio 2013).

Ratio matching compares each data state ``x`` with its D single-bit-flip neighbours ``x⁽ʲ⁾`` through the model's
probability ratios, in which the partition function cancels:

    L(θ) = (1/B) Σ_n Σ_j ( 1 / (1 + p̃(x_n) / p̃(x_n⁽ʲ⁾)) )²          (Deep Learning eq. 18.26)
         = (1/B) Σ_n Σ_j σ( F(x_n) − F(x_n⁽ʲ⁾) )²,

because ``p̃(x) / p̃(x⁽ʲ⁾) = exp(F(x⁽ʲ⁾) − F(x))`` and ``1 / (1 + e^g) = σ(−g)``. With the gaps
``g_nj = F(x_n⁽ʲ⁾) − F(x_n)`` of :meth:`~pfzoo.models.EnergyModel.flip_free_energy_gaps` each term is ``σ(−g_nj)²
= (1 − p_θ(x_nj | x_n,−j))²``, the squared probability the model gives unit j's other value: the loss lowers the free
energy of data states below their neighbours', is bounded (in ``[0, D]`` per example, unlike generalized score
matching's), and its minimiser is consistent (Hyvärinen 2007; tests/training/test_ratio_matching.py checks the
stationarity at the generating model by enumeration). F is the free energy (hidden units summed out), so this works
for every binary family with an exact one: RBMs, DBMs with few even hidden units, Ising and Hopfield models and a
user's binary :class:`~pfzoo.models.EnergyFunction`.

The stochastic form. Dauphin & Bengio (2013) make ratio matching affordable for sparse, high-dimensional inputs by
computing the terms of only some units per example, chosen at random with a preference for the non-zero inputs (the
reconstruction sampling of Dauphin, Glorot & Bengio 2011: every non-zero plus a random sample of the zeros), each kept
term weighted by the inverse of its selection probability so that the sum stays unbiased. Their selection keeps a
varying number of units per example, which here would cost a host read per step to size the tensors; this module
instead draws a fixed number k of units per example, with replacement, from the proposal

    q_n(j) = s / n₁(x_n)        where x_nj = 1,
             (1 − s) / n₀(x_n)  where x_nj = 0          (q_n(j) = 1/D when x_n is all zeros or all ones),

with ``n₁``, ``n₀`` the example's numbers of ones and zeros and ``s`` the share of draws spent on the non-zeros (s = ½:
as many zeros as non-zeros in expectation, the balance of reconstruction sampling), and weights each drawn term by
``1 / (k q_n(j))``:

    L̂(θ) = (1/B) Σ_n (1/k) Σ_{m=1..k} σ( F(x_n) − F(x_n⁽ʲᵐ⁾) )² / q_n(j_m),     j_m ~ q_n,

the Hansen–Hurwitz estimator, unbiased for the full ``L(θ)`` as the paper's weights are. Without a preference (``s``
unset) ``q_n(j) = 1/D`` and the weight is ``D/k``, as pseudo-likelihood's ``num_units`` samples.
"""

from __future__ import annotations

import torch

from pfzoo.sampling import uniform
from pfzoo.training.bit_flip_mpf import sampled_units
from pfzoo.training.objective import Objective
from pfzoo.training.pseudolikelihood import missing_binary_free_energy
from pfzoo.validation import check_finite_number, check_positive_int


def importance_sampled_units(
    batch: torch.Tensor, num_units: int, nonzero_share: float | None, *, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``num_units`` = k unit indices per row of binary ``batch [B, D]``, drawn with replacement from the module's
    proposal ``q_n`` (uniform when ``nonzero_share`` is ``None``), and their weights ``1 / (k q_n(j))``: ``([B, k] int64,
    [B, k])``. Reads nothing back to the host."""
    num_rows, width = batch.shape
    if nonzero_share is None:
        units = sampled_units(batch, num_units, generator=generator)
        return units, torch.full(units.shape, width / num_units, dtype=batch.dtype, device=batch.device)
    ones = batch.sum(1, keepdim=True)
    zeros = width - ones
    proposal = torch.where(batch == 1, nonzero_share / ones.clamp_min(1), (1 - nonzero_share) / zeros.clamp_min(1))
    proposal = torch.where((ones > 0) & (zeros > 0), proposal, torch.full_like(proposal, 1 / width))
    cumulative = proposal.cumsum(1)
    # inverse-CDF draws; scaling by the last entry keeps rounding in the cumulative sum from pointing past the end
    draws = uniform((num_rows, num_units), generator=generator, device=batch.device, dtype=batch.dtype) * cumulative[:, -1:]
    units = torch.searchsorted(cumulative, draws, right=True).clamp_max(width - 1)
    return units, 1 / (num_units * proposal.gather(1, units))


class RatioMatching(Objective):
    """Minimise the ratio-matching loss ``(1/B) Σ_n Σ_j σ(F(x_n) − F(x_n⁽ʲ⁾))²`` (module docstring, Deep Learning eq. 18.26).

    Deterministic with all D units (``num_units=None``): full-batch L-BFGS applies (``trainer=ratio_matching``). With
    ``num_units`` = k each example draws k units and the loss is the unbiased importance-weighted estimate of the module
    docstring, for minibatch optimisers (``trainer=stochastic_ratio_matching``).

    Args:
        num_units: ``None`` sums over all D units; an integer k draws k units per example with replacement.
        nonzero_share: with ``num_units``, the share ``s ∈ (0, 1)`` of the draws spent on the example's non-zero units
            (Dauphin & Bengio's preference for the non-zeros of sparse inputs; ½ = as many zeros as non-zeros);
            ``None`` draws units uniformly (weight D/k).
    """

    config_name = "ratio_matching"
    trainer_configs = ("ratio_matching", "stochastic_ratio_matching")
    missing = staticmethod(missing_binary_free_energy)

    def __init__(self, num_units: int | None = None, nonzero_share: float | None = None) -> None:
        super().__init__()
        self.num_units = None if num_units is None else check_positive_int(num_units, "num_units")
        if nonzero_share is not None:
            if self.num_units is None:
                raise ValueError("nonzero_share needs num_units (the number of units drawn per example); with num_units=None every unit counts")
            nonzero_share = check_finite_number(nonzero_share, "nonzero_share", minimum=0.0, exclusive=True)
            if nonzero_share >= 1:
                raise ValueError(f"nonzero_share must lie strictly between 0 and 1 (the zeros need draws too), got {nonzero_share:g}")
        self.nonzero_share = nonzero_share

    def example_losses(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Each row's loss ``Σ_j σ(F(x_n) − F(x_n⁽ʲ⁾))²`` (or its importance-sampled estimate) for binary ``batch [B, D]`` → ``[B]``."""
        self.check_outside_fit(model)  # binary states with an exact free energy, refused in one line otherwise
        model.check_visible(batch, "batch")
        if self.num_units is None:
            return torch.sigmoid(-model.flip_free_energy_gaps(batch)).square().sum(1)
        units, weights = importance_sampled_units(batch, self.num_units, self.nonzero_share, generator=generator)
        return (weights * torch.sigmoid(-model.flip_free_energy_gaps(batch, units)).square()).sum(1)

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """The ratio-matching loss per example of binary ``batch [B, D]`` (scalar): the mean of :meth:`example_losses`."""
        return self.example_losses(model, batch, generator=generator).mean()

    def extra_repr(self) -> str:
        return f"num_units={self.num_units}, nonzero_share={self.nonzero_share}"
