"""Pseudo-likelihood (Besag 1975) for binary models: the product of every unit's conditional given the rest."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from pfzoo.models.capabilities import Capability
from pfzoo.training.bit_flip_mpf import sampled_units
from pfzoo.training.objective import Objective
from pfzoo.validation import check_positive_int


def missing_binary_free_energy(model) -> str | None:
    """What an objective built on a binary model's conditionals (bit-flip or set free-energy differences) needs and
    ``model`` lacks: binary states and an exact free energy at its size; ``None`` when it has both."""
    offered = model.capabilities
    if Capability.BINARY_STATES in offered and Capability.EXACT_FREE_ENERGY in offered:
        return None
    return f"{Capability.BINARY_STATES.value} and {Capability.EXACT_FREE_ENERGY.value}"


class PseudoLikelihood(Objective):
    """Minimise the negative log pseudo-likelihood ``-(1/B) Σ_n Σ_i log p(x_ni | x_n,-i)``.

    For a binary model ``p(x_i | x_{-i}) = σ(F(x⁽ⁱ⁾) - F(x))`` with ``x⁽ⁱ⁾`` the state with unit i flipped,
    so the loss is ``(1/B) Σ_n Σ_i softplus(F(x_n) - F(x_n⁽ⁱ⁾))``, needing only the model's
    ``flip_free_energy_gaps`` (for an Ising model a logistic regression of each unit on the others).
    Consistent, and convex in (J, b) for Ising models; deterministic, so full-batch L-BFGS applies.

    Args:
        num_units: ``None`` sums over all D units; an integer k samples k units per example with
            replacement and scales by D/k (unbiased; random, so for minibatch optimisers only).
    """

    config_name = "pseudolikelihood"
    missing = staticmethod(missing_binary_free_energy)

    def __init__(self, num_units: int | None = None) -> None:
        super().__init__()
        self.num_units = None if num_units is None else check_positive_int(num_units, "num_units")

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Negative log pseudo-likelihood per example of binary ``batch [B, D]`` (scalar)."""
        self.check_outside_fit(model)  # the objective's capabilities, refused in one line (real-valued models have no bit flips)
        model.check_visible(batch, "batch")
        units = sampled_units(batch, self.num_units, generator=generator)
        terms = F.softplus(-model.flip_free_energy_gaps(batch, units))
        scale = 1.0 if units is None else batch.shape[1] / units.shape[1]
        return scale * terms.sum(1).mean()

    def extra_repr(self) -> str:
        return f"num_units={self.num_units}"
