"""Naive MCMC maximum likelihood (*Deep Learning* Algorithm 18.1): fresh chains burned in at every update.

The surrogate ``L(θ) = mean_n F_θ(v_n) − mean_m F_θ(ṽ_m)`` of :mod:`pfzoo.training.contrastive`, with negatives ``ṽ``
from chains that start afresh at every update, from a distribution that does not depend on the model, and run
``burn_in`` Gibbs steps. With enough steps ``ṽ`` are samples of the model and the gradient is the exact log-likelihood
gradient's unbiased estimate; the price, ``burn_in`` steps per update, is why CD and PCD exist. The slow reference.
"""

from __future__ import annotations

import torch

from pfzoo.kernels import run_chain
from pfzoo.sampling import bernoulli, normal
from pfzoo.training.contrastive import _free_energy_gap, _missing_gibbs_chain, owned_chains
from pfzoo.training.objective import Objective
from pfzoo.validation import allocating, check_choice, check_positive_int

STARTS = ("uniform", "marginals")
"""Where fresh chains start: ``"uniform"``, uniform binary states (binary models) or ``N(0, I)`` (real-valued ones), the
algorithm's "random values"; ``"marginals"``, independent units matched to the minibatch's per-unit marginals
(Bernoulli of the smoothed means ``(Σ v + 1)/(B + 2)``, or normals of its means and standard deviations), the
algorithm's "distribution with marginals matched to the model's", with the data's marginals standing for the model's."""


class NaiveMCMC(Objective):
    """Negatives from ``num_chains`` fresh chains per update, each started from ``start`` and run ``burn_in`` steps of the
    model's own Gibbs chain (``model.gibbs_chain()``).

    Keeps no state across updates. Under a ``torch.distributed`` process group ``num_chains`` counts the chains of the
    whole run, each rank running its share (as :class:`~pfzoo.training.PCD`). Works with any model whose visible Gibbs
    chain and free energy are exact: RBMs, Gaussian–Bernoulli RBMs, Ising models, Hopfield networks.

    Args:
        burn_in: Gibbs steps from the fresh start before the negatives are taken (≥ 1).
        num_chains: fresh chains per update (the size of the negative batch), over all ranks.
        start: ``"uniform"`` or ``"marginals"`` (:data:`STARTS`).
    """

    config_name = "naive_mcmc"
    missing = staticmethod(_missing_gibbs_chain)

    def __init__(self, burn_in: int = 100, num_chains: int = 100, start: str = "uniform") -> None:
        super().__init__()
        self.burn_in = check_positive_int(burn_in, "burn_in")
        self.num_chains = check_positive_int(num_chains, "num_chains")
        check_choice(start, "start", STARTS)
        self.start = start

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Surrogate loss for ``batch [B, V]`` (scalar) whose gradient is the naive MCMC update."""
        self.check_outside_fit(model)
        model.check_visible(batch, "batch")
        with torch.no_grad(), allocating("num_chains", self.num_chains):
            fresh = self.fresh_chains(model, batch, owned_chains(self.num_chains), generator=generator)
            state, _ = run_chain(*model.gibbs_chain(), fresh, self.burn_in, generator=generator)
        return _free_energy_gap(model, batch, state.position)

    def fresh_chains(self, model, batch: torch.Tensor, count: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """``count`` starting states ``[count, V]`` drawn from :attr:`start` (the ``"marginals"`` of ``batch [B, V]``)."""
        shape = (count, batch.shape[1])
        if model.binary_visible:
            probs = batch.new_full(shape, 0.5) if self.start == "uniform" else ((batch.sum(0) + 1) / (batch.shape[0] + 2)).expand(shape)
            return bernoulli(probs, generator=generator)
        noise = normal(shape, generator=generator, device=batch.device, dtype=batch.dtype)
        if self.start == "uniform":
            return noise
        return batch.mean(0) + noise * batch.std(0, correction=0)

    def extra_repr(self) -> str:
        return f"burn_in={self.burn_in}, num_chains={self.num_chains}, start={self.start!r}"
