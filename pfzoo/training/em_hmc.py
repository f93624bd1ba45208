"""Expectation–maximisation with HMC E-steps for latent-variable generative models (HAIS paper §3's training)."""

from __future__ import annotations

import logging

import torch

from pfzoo import distributed
from pfzoo.kernels.adaptation import adaptive_chain
from pfzoo.kernels.hmc import HMCKernel
from pfzoo.models.capabilities import Capability, require
from pfzoo.paths.posterior import PosteriorEnergyTarget
from pfzoo.training.objective import Objective
from pfzoo.validation import check_finite_number, check_generator, check_positive_int

logger = logging.getLogger(__name__)


class EMHMC(Objective):
    """Stochastic EM for ``p(x) = ∫ p(x | z) p(z) dz`` with persistent HMC samples of each example's posterior.

    E-step (:meth:`prepare`, every Trainer epoch): one persistent latent vector ``z_n`` per training example
    advances ``num_hmc_steps`` HMC transitions under the current posterior ``p(z | x_n) ∝ p(z) p(x_n | z)``
    (momentum fully resampled, ``num_leapfrog`` leapfrog steps, Metropolis accept/reject, reflection at the
    prior's lower bound; ε adapts towards ``target_acceptance``). The latents start at prior draws. With
    ``batch_hmc_steps > 0`` the latents of every minibatch also take that many transitions under the *current*
    parameters right before its M-step, so they never lag an epoch of parameter updates behind (stale latents
    bias the M-step; this matters once an epoch holds many optimiser steps). Those per-batch draws make
    :meth:`loss` random: use them with first-order optimisers, and ``batch_hmc_steps=0`` with L-BFGS.
    M-step (:meth:`loss`): the complete-data negative log-likelihood ``mean_n -log p(x_n, z_n)`` on a minibatch,
    whose gradient in the parameters is a Monte Carlo estimate of the EM (Fisher-identity) gradient
    ``-∇ log p(x)`` once the chains have mixed. Constraints such as bounded basis norms are the model's
    ``project_parameters``, which the Trainer applies after every step.

    Buffers (checkpointed): ``latents [N, L]``, ``step_size``, ``batch_advanced [N]`` (the examples whose latents a
    minibatch advanced since the last E-step). ``adaptation`` (not checkpointed) holds one (mean acceptance
    probability, ε after it adapted) pair per E-step of this rank, oldest first: what a report shows of the sampler.

    Under a ``torch.distributed`` process group the E-step is split: each rank advances a contiguous share of the
    examples with its own stream and ε, and the shares are gathered. The Trainer splits the M-step's minibatches, so a
    minibatch's transitions of a latent happen on one rank only; the next E-step starts every example from the copy of
    the rank that advanced it last, so no transition is lost.

    Args:
        num_hmc_steps: HMC transitions per E-step (≥ 1).
        step_size: initial leapfrog ε > 0.
        num_leapfrog: leapfrog steps per transition (≥ 1).
        target_acceptance: mean acceptance ε adapts to, in (0, 1); ``None`` keeps ε fixed.
        batch_hmc_steps: HMC transitions of a minibatch's latents before its M-step (≥ 0).
    """

    latents: torch.Tensor
    step_size: torch.Tensor

    config_name = "em_hmc"

    def missing(self, model) -> str | None:
        return None if Capability.LATENT_GENERATIVE in model.capabilities else Capability.LATENT_GENERATIVE.value

    def __init__(
        self,
        num_hmc_steps: int = 10,
        step_size: float = 0.05,
        num_leapfrog: int = 10,
        target_acceptance: float | None = 0.8,
        batch_hmc_steps: int = 2,
    ) -> None:
        super().__init__()
        if isinstance(batch_hmc_steps, bool) or not isinstance(batch_hmc_steps, int) or batch_hmc_steps < 0:
            raise ValueError(f"batch_hmc_steps must be a non-negative integer, got {batch_hmc_steps!r}")
        self.batch_hmc_steps = batch_hmc_steps
        self.num_hmc_steps = check_positive_int(num_hmc_steps, "num_hmc_steps")
        check_finite_number(step_size, "step_size", minimum=0.0, exclusive=True)
        self.num_leapfrog = check_positive_int(num_leapfrog, "num_leapfrog")
        if target_acceptance is not None and not 0.0 < check_finite_number(target_acceptance, "target_acceptance") < 1.0:
            raise ValueError(f"target_acceptance must lie in (0, 1) or be None, got {target_acceptance}")
        self.target_acceptance = target_acceptance
        self.register_buffer("step_size", torch.tensor(float(step_size), dtype=torch.float64))
        self.register_buffer("latents", torch.empty(0))
        self.register_buffer("batch_advanced", torch.zeros(0, dtype=torch.bool))
        self.adaptation: list[tuple[float, float]] = []

    @torch.no_grad()
    def prepare(self, model, data: torch.Tensor, *, generator: torch.Generator | None = None) -> bool:
        """The E-step for ``data [N, M]``: advance the persistent latents; returns ``True`` (the M-step objective changed)."""
        require(model, Capability.LATENT_GENERATIVE, by="EM-HMC")
        model.check_visible(data, "data")
        check_generator(generator, model.device)
        if self.latents.shape != (data.shape[0], model.num_latent):
            self.latents = model.sample_prior(data.shape[0], generator=generator)
            self.batch_advanced = torch.zeros(data.shape[0], dtype=torch.bool, device=self.latents.device)
        if distributed.is_active():
            self._merge_rank_copies()
        # Under a process group each rank advances its contiguous share of the examples (its ε adapting on that share)
        # and the shares are gathered, so the E-step's work is split and every rank holds every latent.
        share = distributed.owned_share(data.shape[0])
        rows = slice(share.start, share.stop)
        if len(share):
            acceptance = self._advance(model, data[rows], rows, self.num_hmc_steps, generator)
            self.adaptation.append((acceptance.item(), self.step_size.item()))
            logger.info("EM-HMC E-step: mean acceptance %.3f, step size now %.4g", *self.adaptation[-1])
        if distributed.is_active():
            self.latents = distributed.gather_rows(self.latents[rows])
        self.batch_advanced.zero_()
        return True

    def _merge_rank_copies(self) -> None:
        """Every rank's copy of the latents replaced by each example's latest: the copy of the rank whose minibatch
        shards advanced it since the last E-step (an example falls in one shard per epoch), else the common copy."""
        copies = distributed.all_gather((self.latents.cpu(), self.batch_advanced.cpu()))
        merged = copies[0][0].clone()
        for latents, advanced in copies:
            merged[advanced] = latents[advanced]
        self.latents = merged.to(self.latents.device)

    @torch.no_grad()
    def _advance(self, model, data: torch.Tensor, rows, num_steps: int, generator: torch.Generator | None) -> torch.Tensor:
        """``num_steps`` HMC transitions of ``latents[rows]`` under the posteriors of ``data [B, M]``; adapts ε; returns
        the mean acceptance probability (a 0-dim tensor).

        ε is adapted on the device, ``ε ← ε exp(ā − target)`` after each transition with ā its mean acceptance, so the
        batch steps (``batch_hmc_steps``) never wait for a value read back from a GPU."""

        posterior = PosteriorEnergyTarget(model, data)  # at β = 1: -log p(z) - log p(x | z)
        kernel = HMCKernel(self.step_size, num_leapfrog=self.num_leapfrog, momentum_refresh=1.0, lower=model.latent_lower)
        chain = adaptive_chain(kernel, posterior, kernel.init(self.latents[rows], posterior, momentum=torch.zeros_like(self.latents[rows])), num_steps, step_size=self.step_size,
                               target_acceptance=self.target_acceptance, generator=generator)
        self.step_size.copy_(chain.step_size)
        self.latents[rows] = chain.state.position
        return chain.acceptance

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None, indices: torch.Tensor | None = None) -> torch.Tensor:
        """``mean_n -log p(x_n, z_n)`` over ``batch [B, M]``, rows ``indices [B]`` of the prepared data (``None``: all, in order)."""
        if self.latents.numel() == 0:
            raise ValueError("EMHMC has no latents yet: call prepare(model, data, generator=...) first (the Trainer does)")
        rows = slice(None) if indices is None else indices
        if self.latents[rows].shape[0] != batch.shape[0]:
            raise ValueError(f"batch has {batch.shape[0]} rows but {self.latents[rows].shape[0]} latents were selected; pass the batch's indices")
        if self.batch_hmc_steps:
            self._advance(model, batch, rows, self.batch_hmc_steps, generator)
            if indices is None:
                self.batch_advanced.fill_(True)
            else:
                self.batch_advanced.index_fill_(0, indices, True)  # the value as a kernel argument: no copy to a GPU
        return model.joint_energy(batch, self.latents[rows]).mean()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        saved = state_dict.get(prefix + "latents")
        if saved is not None:  # created by prepare: resize before copying
            self.latents = torch.empty_like(saved, device=self.latents.device)
            # a checkpoint from before batch_advanced existed: no minibatch has advanced a latent on another rank
            state_dict.setdefault(prefix + "batch_advanced", torch.zeros(saved.shape[0], dtype=torch.bool))
            self.batch_advanced = torch.empty_like(state_dict[prefix + "batch_advanced"], device=self.latents.device)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self) -> str:
        return (
            f"num_hmc_steps={self.num_hmc_steps}, step_size={self.step_size.item():.4g}, num_leapfrog={self.num_leapfrog}, "
            f"target_acceptance={self.target_acceptance}, batch_hmc_steps={self.batch_hmc_steps}"
        )
