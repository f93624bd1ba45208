"""Models with one visible and one binary hidden layer and exact block conditionals (RBM family)."""

from __future__ import annotations

from typing import Any

import torch

from pfzoo.kernels import BLOCK_CONDITIONALS, CHAIN_BETAS, STATISTICS_LOG_DENSITY, TEMPERED_LOG_DENSITY, BlockGibbs, Kernel, ParallelTempering, check_kernel, run_chain
from pfzoo.models.base import EnergyModel, PathStateProposal
from pfzoo.sampling import bernoulli
from pfzoo.validation import allocates, check_beta, check_binary, check_bool, check_generator, check_positive_int


class BipartiteConditionals:
    """A bipartite model's own ``p_β(v, h) ∝ exp(−β E(v, h))`` as a block-Gibbs target
    (:class:`~pfzoo.kernels.BlockConditionals`). Its draws take a β per chain (an ``[N, 1]`` tensor), and it offers the
    visible marginal's tempered log density, so :class:`~pfzoo.kernels.ParallelTempering` runs on it with every replica
    in one batch.

    With ``keep_statistics`` each state carries its hidden input (``vW + c`` for an RBM, the model's
    :meth:`~BipartiteModel.hidden_input`), computed once after the visible draw and read by the next hidden draw and by
    replica exchange (:data:`~pfzoo.kernels.STATISTICS_LOG_DENSITY`): a parallel-tempering step at fixed parameters then
    costs two products instead of three. Without (the default), the chains keep nothing: a CD-k chain restarted at every
    update would otherwise pay one product more than its 2k."""

    def __init__(self, model: "BipartiteModel", *, keep_statistics: bool = False) -> None:
        self.model = model
        self.keep_statistics = keep_statistics
        self.offers = frozenset({BLOCK_CONDITIONALS, TEMPERED_LOG_DENSITY, CHAIN_BETAS} | ({STATISTICS_LOG_DENSITY} if keep_statistics else set()))

    def log_density(self, visible: torch.Tensor, *, beta: float | torch.Tensor, stats: torch.Tensor | None = None) -> torch.Tensor:
        """``log f_β(v) = log Σ_h exp(−β E(v, h))`` of ``visible [N, V]``: float64 ``[N]`` for β a number, ``[N, K]`` for β
        an ``[N, K]`` tensor; from the states' kept hidden input ``stats [N, H]`` when given."""
        if stats is None:
            return self.model.tempered_log_density(visible, beta=beta)
        return self.model.tempered_log_density_from_input(visible, stats, beta=beta)

    def statistics(self, visible: torch.Tensor, *, beta: float | torch.Tensor = 0.0) -> torch.Tensor | None:
        """The hidden input ``[N, H]`` of ``visible`` with ``keep_statistics`` (the same at every β), else None."""
        return self.model.hidden_input(visible) if self.keep_statistics else None

    def draw_hidden(self, visible: torch.Tensor, stats: Any, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        if stats is None:
            return self.model.draw_hidden(visible, beta=beta, generator=generator)
        return self.model.draw_hidden_from_input(stats, beta=beta, generator=generator)

    def draw_visible(self, hidden: torch.Tensor, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        return self.model.draw_visible(hidden, beta=beta, generator=generator)


class BipartiteModel(EnergyModel):
    """An :class:`EnergyModel` over ``(v [B, V], h ∈ {0,1}^[B, H])`` whose conditionals factorise.

    Subclasses implement the unchecked hot-loop draws ``draw_hidden(v, *, beta, generator)`` and
    ``draw_visible(h, *, beta, generator)``; :meth:`gibbs_chain` hands them to :class:`~pfzoo.kernels.BlockGibbs`
    (model samplers, trainers' negative phases), and this class adds the validated public samplers on top.
    ``p_β(v, h) ∝ exp(-β E(v, h))``.
    """

    num_hidden: int

    def check_hidden(self, h: torch.Tensor, name: str = "h") -> torch.Tensor:
        """Raise ``ValueError`` unless ``h`` is a binary ``[B, H]`` tensor on the model's device."""
        return check_binary(h, name, width=self.num_hidden, device=self.device, dtype=self.dtype)

    def check_sampler_beta(self, beta: float) -> float:
        """The inverse temperatures the samplers accept; [0, 1] unless a subclass narrows it."""
        return check_beta(beta)

    def hidden_probs(self, v: torch.Tensor, *, beta: float = 1.0) -> torch.Tensor:
        raise NotImplementedError

    def draw_hidden(self, v: torch.Tensor, *, beta: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
        raise NotImplementedError

    def draw_visible(self, h: torch.Tensor, *, beta: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
        raise NotImplementedError

    def tempered_log_density(self, v: torch.Tensor, *, beta: float | torch.Tensor = 1.0) -> torch.Tensor:
        """``log f_β(v) = log Σ_h exp(−β E(v, h))``, the unnormalised visible marginal of ``p_β`` (``−F(v)`` at β = 1), for
        ``v [B, V]``: float64 ``[B]`` for β a number, ``[B, K]`` for β a ``[B, K]`` tensor (K inverse temperatures per row,
        one product ``vW`` for all of them). What replica exchange compares. Not validated."""
        raise NotImplementedError

    def hidden_input(self, v: torch.Tensor) -> torch.Tensor:
        """The hidden units' input ``[B, H]`` from ``v [B, V]`` at β = 1 (one product with the weights), which the hidden
        conditional and the tempered log density at every β read. Not validated."""
        raise NotImplementedError

    def draw_hidden_from_input(self, hidden_input: torch.Tensor, *, beta: float = 1.0,
                               generator: torch.Generator | None = None) -> torch.Tensor:
        """``h ~ p_β(h | v)`` ``[B, H]`` given ``v``'s :meth:`hidden_input`. Not validated."""
        raise NotImplementedError

    def tempered_log_density_from_input(self, v: torch.Tensor, hidden_input: torch.Tensor, *,
                                        beta: float | torch.Tensor = 1.0) -> torch.Tensor:
        """:meth:`tempered_log_density` of ``v [B, V]`` given its :meth:`hidden_input` ``[B, H]``. Not validated."""
        raise NotImplementedError

    def gibbs_chain(self, *, reversible: bool = False, keep_statistics: bool = False) -> tuple[BlockGibbs, BipartiteConditionals]:
        """Block Gibbs ``v → h → v`` on the model's own conditionals (reversible in v as it stands); ``keep_statistics``:
        the states carry their hidden input (:class:`BipartiteConditionals`), for long runs at fixed parameters."""
        return BlockGibbs(), BipartiteConditionals(self, keep_statistics=check_bool(keep_statistics, "keep_statistics"))

    @torch.no_grad()
    def hidden_means(self, v: torch.Tensor) -> list[torch.Tensor]:
        """``[p(h = 1 | v)]``, one ``[B, H]`` tensor for visible ``v [B, V]`` (:attr:`Capability.HIDDEN_MEANS`: the
        hidden units' posterior means, features for a classifier); the posterior factorises, so these are exact."""
        return [self.hidden_probs(self.check_visible(v))]

    @torch.no_grad()
    def sample_h_given_v(self, v: torch.Tensor, *, beta: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
        """Exact sample ``h ~ p_β(h | v)`` for ``v [B, V]`` → ``[B, H]``."""
        self.check_visible(v)
        check_generator(generator, self.device)
        return self.draw_hidden(v, beta=self.check_sampler_beta(beta), generator=generator)

    @torch.no_grad()
    def sample_v_given_h(self, h: torch.Tensor, *, beta: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
        """Exact sample ``v ~ p_β(v | h)`` for binary ``h [B, H]`` → ``[B, V]``."""
        self.check_hidden(h)
        check_generator(generator, self.device)
        return self.draw_visible(h, beta=self.check_sampler_beta(beta), generator=generator)

    @allocates("num_samples")
    @torch.no_grad()
    def sample(self, num_samples: int, *, num_steps: int = 1000, kernel: Kernel | None = None,
               generator: torch.Generator | None = None) -> torch.Tensor:
        """Approximate samples of the visible units ``[num_samples, V]`` by MCMC: ``num_samples`` independent chains
        start from uniformly random hidden states, draw ``v ~ p(v | h)``, then run ``num_steps`` steps of ``kernel`` on
        the model's own conditionals (:meth:`gibbs_chain`'s target; default: block Gibbs sweeps ``h ~ p(h | v)``,
        ``v ~ p(v | h)``); returns the last visible states. Exact only in the limit of many steps; strongly trained
        models mix slowly, so check convergence (e.g. two seeds' statistics), or pass a kernel that mixes between modes,
        e.g. ``kernel=ParallelTempering(BlockGibbs(), temperature_ladder(10, min_beta=0.1))`` (its β = 1 replicas are
        returned)."""
        self.check_computable()
        check_positive_int(num_samples, "num_samples")
        check_positive_int(num_steps, "num_steps")
        check_generator(generator, self.device)
        # replica exchange at fixed parameters reads each sweep's kept hidden input; other kernels gain nothing from it
        default, target = self.gibbs_chain(keep_statistics=isinstance(kernel, ParallelTempering))
        kernel = default if kernel is None else check_kernel(kernel, target.offers, f"{type(self).__name__}'s Gibbs target")
        hidden = bernoulli(torch.full((num_samples, self.num_hidden), 0.5, device=self.device, dtype=self.dtype), generator=generator)
        state, _ = run_chain(kernel, target, self.draw_visible(hidden, generator=generator), num_steps, generator=generator)
        return state.position

    def propose_path_state(
        self, v: torch.Tensor, *, num_samples: int = 1, generator: torch.Generator | None = None
    ) -> PathStateProposal:
        """The path state is ``v`` itself (hidden units are summed out), weight ``log f(v) = -F(v)`` exactly."""
        with torch.no_grad():
            return PathStateProposal(v.repeat_interleave(num_samples, dim=0), -self.free_energy(v).double().repeat_interleave(num_samples))
