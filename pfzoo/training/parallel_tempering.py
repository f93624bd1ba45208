"""Stochastic maximum likelihood with a parallel-tempering negative phase (Desjardins, Courville, Bengio, Vincent &
Delalleau 2010; Cho, Raiko & Ilin 2010; *Deep Learning* §18.2).

PCD's surrogate ``L(θ) = mean_n F_θ(v_n) − mean_m F_θ(ṽ_m)`` (:mod:`pfzoo.training.contrastive`) with negatives ``ṽ``
the β = 1 replica of persistent chains run by :class:`~pfzoo.kernels.ParallelTempering` over the model's own Gibbs
chain: hot replicas cross between the modes that a trained model's plain Gibbs chain no longer leaves, and exchanges
bring their states down to β = 1, so the negative phase keeps sampling every mode.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from pfzoo import distributed
from pfzoo.kernels import SWAP_SCHEMES, TEMPERED_LOG_DENSITY, ParallelTempering, Target, adapt_ladder, check_ladder, temperature_ladder
from pfzoo.training.contrastive import _free_energy_gap, _missing_gibbs_chain, owned_chains
from pfzoo.training.objective import Objective
from pfzoo.validation import allocating, check_bool, check_choice, check_positive_int


def _offers_density(target: Target) -> bool:
    """Whether a Gibbs target declares its tempered log density (what exchanges need)."""
    return TEMPERED_LOG_DENSITY in target.offers


class PT(Objective):
    """SML/PCD whose negatives are the β = 1 replica of persistent parallel-tempering chains.

    Every update runs ``k`` parallel-tempering steps (each: one Gibbs step of every replica at its β, as one batch, then
    one round of exchanges between neighbours; :class:`~pfzoo.kernels.ParallelTempering`) and takes the β = 1 replica's
    ``num_chains`` states as negatives. All replicas persist in the buffer ``chains [R · C, V]`` (replica-major, β
    ascending), with the ladder ``betas [R]`` (float64) and the exchange rounds done ``swap_round`` (the alternation's
    parity), so checkpoint/resume continues bit for bit. The chains start, on the first batch, from ``num_chains`` rows of
    that batch drawn with replacement, every replica from the same rows.

    The swap acceptance of each neighbouring pair is averaged over the epoch (buffers ``accept_sum``, ``accept_count``);
    :meth:`epoch_metrics` reports its mean and its least pair as ``swap_acceptance`` and ``swap_acceptance_min`` in the
    Trainer's log, and :meth:`pair_acceptance` gives every pair. With ``adapt_ladder`` the ladder moves, at the start of
    each epoch, to where the last epoch's acceptance would have been equal between neighbours
    (:func:`~pfzoo.kernels.adapt_ladder`; its ends stay).

    Works with every family whose visible Gibbs chain and free energy are exact and whose Gibbs target offers its
    tempered log density: RBMs, Gaussian–Bernoulli RBMs, Ising models, Hopfield networks. Under a
    ``torch.distributed`` process group ``num_chains`` counts the chains of the whole run, each rank holding its share of
    every replica (as :class:`~pfzoo.training.PCD`); the acceptance is pooled over the ranks, so they adapt one ladder.

    Args:
        k: parallel-tempering steps per update (≥ 1).
        num_chains: persistent chains per replica (the size of the negative batch), over all ranks.
        num_replicas: R, when ``betas`` is not given: the ladder is :func:`~pfzoo.kernels.temperature_ladder`
            ``(num_replicas, min_beta=min_beta, spacing=spacing)``.
        min_beta: the hottest replica's β, in (0, 1).
        spacing: ``"geometric"`` or ``"linear"``.
        betas: an explicit ladder (strictly increasing in (0, 1], ending at 1), which then sets R; None = the above.
        swaps: which pairs a step proposes to exchange, ``"alternate"`` (even/odd pairs in turn) or ``"random"``.
        adapt_ladder: adapt the ladder towards equal acceptance between neighbours at the start of every epoch.
    """

    lazy_buffers = ("chains",)

    chains: torch.Tensor
    betas: torch.Tensor
    swap_round: torch.Tensor
    accept_sum: torch.Tensor
    accept_count: torch.Tensor
    config_name = "pt"

    def __init__(self, k: int = 1, num_chains: int = 100, num_replicas: int = 10, min_beta: float = 0.1, spacing: str = "geometric",
                 betas: Sequence[float] | None = None, swaps: str = "alternate", adapt_ladder: bool = False) -> None:
        super().__init__()
        self.k = check_positive_int(k, "k")
        self.num_chains = check_positive_int(num_chains, "num_chains")
        ladder = check_ladder(betas) if betas is not None else tuple(temperature_ladder(num_replicas, min_beta=min_beta, spacing=spacing).tolist())
        check_choice(swaps, "swaps", SWAP_SCHEMES)
        self.swaps = swaps
        self.adapt_ladder = check_bool(adapt_ladder, "adapt_ladder")
        # Host copies of the ladder and the round: reading the buffers at every step would stall a GPU's queue.
        self._ladder, self._round = ladder, 0
        self.register_buffer("chains", torch.empty(0))
        self.register_buffer("betas", torch.tensor(ladder, dtype=torch.float64))
        self.register_buffer("swap_round", torch.zeros((), dtype=torch.long))
        self.register_buffer("accept_sum", torch.zeros(len(ladder) - 1, dtype=torch.float64))
        self.register_buffer("accept_count", torch.zeros(len(ladder) - 1, dtype=torch.float64))

    @property
    def num_replicas(self) -> int:
        return len(self._ladder)

    def missing(self, model) -> str | None:
        need = _missing_gibbs_chain(model)
        if need is None and not _offers_density(model.gibbs_chain()[1]):
            return f"a Gibbs target with {TEMPERED_LOG_DENSITY}"
        return need

    def _gibbs_chain(self, model):
        """``model.gibbs_chain()``, built once per update, or the one-line refusal when the objective does not apply. With
        ``k > 1`` the states keep what exchanges and the next sweep share (an RBM's ``vW + c``: 2k + 1 products per update
        instead of 3k, the same draws); at ``k = 1`` the update's first product is needed either way."""
        chain = None if _missing_gibbs_chain(model) else model.gibbs_chain(keep_statistics=self.k > 1)
        if chain is None or not _offers_density(chain[1]):
            self.check(model)
        return chain

    def prepare(self, model, train: torch.Tensor, *, generator: torch.Generator | None = None) -> bool:
        """The start of an epoch: with ``adapt_ladder``, move the ladder towards equal acceptance from the last epoch's
        (pooled over ranks; not before every pair was proposed); then restart the epoch's acceptance. The loss is
        unchanged, so ``False``."""
        if self.adapt_ladder:
            acceptance = self.pair_acceptance()
            if not any(math.isnan(rate) for rate in acceptance):  # every pair proposed at least once
                adapted = adapt_ladder(self._ladder, acceptance)
                self._ladder = tuple(adapted.tolist())
                self.betas.copy_(adapted)
        self.accept_sum.zero_()
        self.accept_count.zero_()
        return False

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None, indices: torch.Tensor | None = None) -> torch.Tensor:
        """Surrogate loss for ``batch [B, V]`` (scalar) whose gradient is the PT-SML update; advances every replica ``k``
        steps. ``indices`` (the Trainer's row numbers) is not used."""
        kernel, target = self._gibbs_chain(model)
        model.check_visible(batch, "batch")
        start = lambda: batch[torch.randint(batch.shape[0], (owned_chains(self.num_chains),), generator=generator, device=batch.device)]  # noqa: E731
        with allocating("num_chains", self.num_chains):
            particles = self.advance(kernel, target, start, batch.shape[1], generator=generator)
        return _free_energy_gap(model, batch, particles)

    @torch.no_grad()
    def advance(self, kernel, target, start, width: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Run every replica of the persistent chains ``k`` parallel-tempering steps of ``kernel`` on ``target`` and
        return the β = 1 replica's states ``[C, width]``. ``start()`` gives the first states ``[C, width]`` (every
        replica starts there) when there are no chains yet; chains of another width are refused."""
        if self.chains.numel() == 0:
            self.chains = start().repeat(self.num_replicas, 1)
        elif self.chains.shape[1] != width:
            raise ValueError(f"batch must have {self.chains.shape[1]} columns like the persistent chains, got {width}")
        tempering = ParallelTempering(kernel, self._ladder, swaps=self.swaps)
        state = tempering.init_replicas(self.chains.unflatten(0, (self.num_replicas, -1)), target, swap_round=self._round)
        for _ in range(self.k):
            state, info = tempering.step(state, target, generator=generator)
            self.accept_sum += info.swap_accept_prob.mean(1)
            self.accept_count += info.attempted
        self.chains = state.replicas.position
        self._round = state.swap_round
        self.swap_round.fill_(self._round)
        return state.position

    def pair_acceptance(self) -> list[float]:
        """The mean swap acceptance of each neighbouring pair ``(β_i, β_{i+1})`` since the epoch began, pooled over ranks
        (NaN for a pair not yet proposed); reads the buffers once."""
        sums, counts = self.accept_sum.cpu(), self.accept_count.cpu()
        if distributed.is_active():
            gathered = distributed.all_gather((sums, counts))
            sums, counts = sum(s for s, _ in gathered), sum(c for _, c in gathered)
        return [total / count if count else float("nan") for total, count in zip(sums.tolist(), counts.tolist())]

    def epoch_metrics(self) -> dict[str, float]:
        """``swap_acceptance``: the mean over neighbouring pairs of their epoch's swap acceptance;
        ``swap_acceptance_min``: the least pair's (the ladder's bottleneck); nothing before any exchange."""
        acceptance = [rate for rate in self.pair_acceptance() if not math.isnan(rate)]
        if not acceptance:
            return {}
        return {"swap_acceptance": sum(acceptance) / len(acceptance), "swap_acceptance_min": min(acceptance)}

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._ladder = tuple(self.betas.tolist())  # the host copies of the ladder and the round follow the loaded buffers
        self._round = int(self.swap_round)

    def extra_repr(self) -> str:
        ladder = ", ".join(f"{beta:.3g}" for beta in self._ladder)
        return f"k={self.k}, num_chains={self.num_chains}, betas=[{ladder}], swaps={self.swaps!r}, adapt_ladder={self.adapt_ladder}"
