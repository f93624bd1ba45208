"""Contrastive divergence (CD-k, Hinton 2002) and persistent CD (PCD-k, Tieleman 2008).

Both minimise the free-energy surrogate

    L(θ) = mean_n F_θ(v_n) - mean_m F_θ(ṽ_m),   ṽ held fixed (no gradient through the sampler),

whose gradient ``∂L/∂θ = ⟨∂F/∂θ⟩_data - ⟨∂F/∂θ⟩_negatives`` is the CD / PCD update (Deep Learning
§18.2). For an RBM, ``-∂L/∂W = ⟨v p(h|v)ᵀ⟩_data - ⟨ṽ p(h|ṽ)ᵀ⟩_negatives``. They differ only in where
the negatives ``ṽ`` come from.
"""

from __future__ import annotations

import torch

from pfzoo import distributed
from pfzoo.kernels import Kernel, check_kernel, run_chain
from pfzoo.models.capabilities import Capability
from pfzoo.training.objective import Objective
from pfzoo.validation import allocating, check_positive_int


def _free_energy_gap(model, batch: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
    """The surrogate ``mean F(batch [B, V]) - mean F(negatives [M, V])`` (scalar); ``negatives`` are detached.

    One free energy of both stacked ``[B + M, V]``, weighted ``1/B`` and ``−1/M``: one product of each shape forward and
    backward instead of two (on a 784 × 500 RBM's PCD step about a millisecond, an eighth of it, on the CPU)."""
    energies = model.free_energy(torch.cat([batch, negatives.detach()]))  # [B + M]
    weights = torch.cat([energies.new_full((batch.shape[0],), 1 / batch.shape[0]),
                         energies.new_full((negatives.shape[0],), -1 / negatives.shape[0])])
    return energies @ weights


def _missing_gibbs_chain(model) -> str | None:
    offered = model.capabilities
    if Capability.VISIBLE_GIBBS_CHAIN in offered and Capability.EXACT_FREE_ENERGY in offered:
        return None
    return f"{Capability.VISIBLE_GIBBS_CHAIN.value} and {Capability.EXACT_FREE_ENERGY.value}"


def owned_chains(num_chains: int) -> int:
    """How many of ``num_chains`` persistent chains this rank holds: its share under a process group, all without one."""
    count = len(distributed.owned_share(num_chains))
    if count == 0:
        raise ValueError(f"num_chains must be at least the number of ranks ({distributed.world_size()}) so that every rank holds a chain, got {num_chains}")
    return count


def persistent_chains(chains: torch.Tensor, batch: torch.Tensor, num_chains: int, *, generator: torch.Generator | None) -> torch.Tensor:
    """Persistent chains ``[C_r, V]`` to advance: ``chains`` as they are, or, before the first update (empty), this
    rank's share of ``num_chains`` rows of ``batch [B, V]`` drawn with replacement; refuses a batch of another width."""
    if chains.numel() == 0:
        with allocating("num_chains", num_chains):
            rows = torch.randint(batch.shape[0], (owned_chains(num_chains),), generator=generator, device=batch.device)
            return batch[rows]
    if chains.shape[1] != batch.shape[1]:
        raise ValueError(f"batch must have {chains.shape[1]} columns like the persistent chains, got shape {tuple(batch.shape)}")
    return chains


class CD(Objective):
    """CD-k: negatives from ``k`` block-Gibbs sweeps started at the batch.

    Works with any model whose visible Gibbs chain (``model.gibbs_chain()``, a kernel and its target) and free energy
    are exact: RBMs, Gaussian–Bernoulli RBMs, Ising models.

    Args:
        k: Gibbs sweeps per update (≥ 1), from epoch ``k_ramp_epochs + 1`` on.
        k_start: the sweeps of the first epoch (default ``k``). Salakhutdinov & Murray (2008) grew the number of
            sweeps during learning, from 1 to 25 for their CD25 RBMs: epoch e runs
            ``round(k_start + (k − k_start) · min(1, (e − 1) / k_ramp_epochs))`` sweeps.
        k_ramp_epochs: epochs over which the sweeps grow from ``k_start`` to ``k`` (0: ``k`` throughout).
    """

    config_name = "cd"

    def __init__(self, k: int = 1, k_start: int | None = None, k_ramp_epochs: int = 0) -> None:
        super().__init__()
        self.final_k = check_positive_int(k, "k")
        self.k_start = self.final_k if k_start is None else check_positive_int(k_start, "k_start")
        if isinstance(k_ramp_epochs, bool) or not isinstance(k_ramp_epochs, int) or k_ramp_epochs < 0:
            raise ValueError(f"k_ramp_epochs must be a non-negative integer (0: k throughout), got {k_ramp_epochs!r}")
        self.k_ramp_epochs = k_ramp_epochs
        self.k = self.k_start if k_ramp_epochs else self.final_k

    missing = staticmethod(_missing_gibbs_chain)

    def start_epoch(self, epoch: int) -> None:
        """Set this epoch's sweeps ``k`` from the schedule (class docstring)."""
        progress = 1.0 if self.k_ramp_epochs == 0 else min(1.0, (epoch - 1) / self.k_ramp_epochs)
        self.k = round(self.k_start + (self.final_k - self.k_start) * progress)

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Surrogate loss for binary ``batch [B, V]`` (scalar) whose gradient is the CD-k update."""
        self.check_outside_fit(model)  # the objective's capabilities, refused in one line (real-valued models have no bit flips)
        model.check_visible(batch, "batch")
        with torch.no_grad():
            state, _ = run_chain(*model.gibbs_chain(), batch, self.k, generator=generator)
        return _free_energy_gap(model, batch, state.position)

    def extra_repr(self) -> str:
        ramp = f", k_start={self.k_start}, k_ramp_epochs={self.k_ramp_epochs}" if self.k_ramp_epochs else ""
        return f"k={self.final_k}{ramp}"


class PCD(Objective):
    """PCD-k (stochastic maximum likelihood): negatives from persistent chains advanced ``k`` sweeps per update.

    The chains ``[num_chains, V]`` are a registered buffer, so they are part of ``state_dict()``
    and survive checkpoint / resume. They start, on the first batch, from ``num_chains`` rows of
    that batch drawn with replacement.

    Under a ``torch.distributed`` process group (e.g. the :class:`~pfzoo.training.Trainer` under ``torchrun``)
    ``num_chains`` counts the chains of the whole run, split across the ranks: rank r holds its contiguous share
    ``[C_r, V]`` (:func:`pfzoo.distributed.owned_share`, sizes differ by at most one), started from its own shard of
    the first minibatch and advanced with its own stream, so an R-rank run has the same total number of chains (and
    the same per-step sampling cost in all) as one process. The ranks' negative phases are averaged with the weights
    of their data shards, ``B_r / B``, which equal ``C_r / C`` when R divides both ``batch_size`` and ``num_chains``.

    Args:
        k: Gibbs sweeps per update (≥ 1).
        num_chains: number of persistent chains (the size of the negative batch), over all ranks; at least the
            number of ranks.
        kernel: a kernel on the model's Gibbs target to advance the chains instead of its Gibbs sweep (each step
            counts as a sweep), e.g. :class:`~pfzoo.kernels.SwendsenWang` for an Ising model; None: the sweep. A
            target that does not offer what it needs is refused in one line.
    """

    lazy_buffers = ("chains",)

    chains: torch.Tensor
    config_name = "pcd"
    missing = staticmethod(_missing_gibbs_chain)

    def __init__(self, k: int = 1, num_chains: int = 100, kernel: Kernel | None = None) -> None:
        super().__init__()
        self.k = check_positive_int(k, "k")
        self.num_chains = check_positive_int(num_chains, "num_chains")
        self.kernel = kernel
        self.register_buffer("chains", torch.empty(0))

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Surrogate loss for binary ``batch [B, V]`` (scalar) whose gradient is the PCD-k update; advances the chains."""
        self.check_outside_fit(model)  # the objective's capabilities, refused in one line (real-valued models have no bit flips)
        model.check_visible(batch, "batch")
        self.chains = persistent_chains(self.chains, batch, self.num_chains, generator=generator)
        default, target = model.gibbs_chain()
        kernel = default if self.kernel is None else check_kernel(self.kernel, target.offers, f"{type(model).__name__}'s Gibbs target")
        with torch.no_grad():
            state, _ = run_chain(kernel, target, self.chains, self.k, generator=generator)
        self.chains = state.position
        return _free_energy_gap(model, batch, self.chains)

    def extra_repr(self) -> str:
        return f"k={self.k}, num_chains={self.num_chains}" + ("" if self.kernel is None else f", kernel={self.kernel!r}")
