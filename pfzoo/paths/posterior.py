"""The annealing path over a latent-variable model's latents, from the prior to the posterior of each data row."""

from __future__ import annotations

from typing import NamedTuple

import torch

from pfzoo.kernels import ENERGY_AND_GRADIENT, REAL_ENERGY_VALUES, Evaluation, check_kernel
from pfzoo.paths.base import AnnealingPath


class PosteriorPathStatistics(NamedTuple):
    """Prior and likelihood energies ``[N]`` and their gradients in z ``[N, L]`` at the chains' latents."""

    prior_energy: torch.Tensor
    likelihood_energy: torch.Tensor
    prior_grad: torch.Tensor
    likelihood_grad: torch.Tensor


class PosteriorEnergyTarget:
    """``E_β(z) = −log p(z) − β log p(x_n | z)`` per chain as a :class:`~pfzoo.kernels.PositionTarget`."""

    offers = frozenset({ENERGY_AND_GRADIENT, REAL_ENERGY_VALUES})

    def __init__(self, model, rows: torch.Tensor) -> None:
        self.model = model
        self.rows = rows

    def statistics(self, z: torch.Tensor) -> PosteriorPathStatistics:
        prior_energy, prior_grad = self.model.prior.energy_and_grad(z)
        likelihood_energy, likelihood_grad = self.model.likelihood_energy_and_grad(self.rows, z)
        return PosteriorPathStatistics(prior_energy, likelihood_energy, prior_grad, likelihood_grad)

    def evaluation(self, stats: PosteriorPathStatistics, beta: float) -> Evaluation:
        return Evaluation(stats.prior_energy + beta * stats.likelihood_energy, stats.prior_grad + beta * stats.likelihood_grad, stats)


class PosteriorPath(AnnealingPath):
    """``f_β(z) = p(z) p(x_n | z)^β`` for chain n's data row ``x_n`` (HAIS eqs. 27–29).

    At β = 0 this is the normalised prior (``log Z_0 = 0``, exact samples); at β = 1 its normaliser is
    ``∫ p(z) p(x_n | z) dz = p(x_n)``, so the AIS weights of the chains of row n average to ``p(x_n)``
    and their log-mean is a stochastic lower bound on ``log p(x_n)``. The increment is
    ``-(β' - β) · (-log p(x_n | z))``. Transitions are the kernel's (HMC with partial momentum refresh for
    HAIS) on ``E_β(z) = -log p(z) - β log p(x_n | z)``, reflecting at the prior's lower bound if it has one.

    Args:
        model: a :class:`~pfzoo.models.latent.LatentGenerativeModel`.
        rows: ``[N, M]`` the data row of each chain (examples repeated once per particle).
        kernel: an :class:`~pfzoo.kernels.HMCKernel`-like kernel on z.
    """

    linear_in_beta = True

    def __init__(self, model, rows: torch.Tensor, kernel) -> None:
        self.model = model
        self.rows = rows
        self.kernel = check_kernel(kernel, PosteriorEnergyTarget.offers, "a posterior path over latents")
        self.target = PosteriorEnergyTarget(model, rows)

    def draw_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        if num_chains != self.rows.shape[0]:
            raise ValueError(f"num_chains must equal the number of data rows ({self.rows.shape[0]}), got {num_chains}")
        return self.model.sample_prior(num_chains, generator=generator)

    def base_log_partition(self) -> torch.Tensor:
        return torch.zeros((), dtype=torch.float64, device=self.rows.device)

    def log_weight_increment(self, stats: PosteriorPathStatistics, beta_from: float, beta_to: float) -> torch.Tensor:
        return (beta_from - beta_to) * stats.likelihood_energy.double()
