"""Models over real-valued vectors ``x ∈ ℝ^M`` with a differentiable energy (the targets of Hamiltonian AIS)."""

from __future__ import annotations

import torch

from pfzoo.kernels import EnergyTarget, HMCKernel
from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability
from pfzoo.validation import allocates, check_generator, check_positive_int


class ContinuousModel(EnergyModel):
    """An :class:`EnergyModel` over ``x ∈ ℝ^M`` without latent variables: ``p(x) = exp(-E(x)) / Z``.

    Subclasses implement the validated public :meth:`energy`. :meth:`energy_grad` and
    :meth:`energy_and_grad` are the unchecked hot-loop primitives of Hamiltonian AIS (one call per
    leapfrog step); the versions here are the autograd fallback, and subclasses override them with
    analytic ones where those are cheap.
    """

    binary_visible = False
    family_capabilities = frozenset({Capability.REAL_ENERGY})
    path_family = "continuous"

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """``E(x)`` for ``x [B, M]`` → ``[B]``; implementations validate ``x`` with ``self.check_visible(x, "x")``."""
        raise NotImplementedError

    def free_energy(self, x: torch.Tensor) -> torch.Tensor:
        """``F(x) = E(x)`` for ``x [B, M]`` → ``[B]`` (there are no latent variables to integrate out)."""
        return self.energy(x)

    def energy_grad(self, x: torch.Tensor) -> torch.Tensor:
        """``∇_x E(x)`` for ``x [B, M]`` → ``[B, M]``, by autograd through :meth:`energy` (the fallback).

        The fallback goes through the validated :meth:`energy` and returns a gradient detached from
        the parameters; subclasses override it with an unchecked analytic version.
        """
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            energy = self.energy(x)
            if not energy.requires_grad:  # detached (numpy, .item(), .detach()) or not depending on x at all
                raise ValueError(f"the energy of {type(self).__name__} is not differentiable in x (no autograd graph): "
                                 "HMC and HAIS need ∇ₓE, so compute it with torch operations on x")
            (grad,) = torch.autograd.grad(energy.sum(), x)
        return grad

    def energy_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(E(x) [B], ∇_x E(x) [B, M])`` for ``x [B, M]``: one call per leapfrog step of HMC.

        This fallback calls :meth:`energy` and :meth:`energy_grad`; subclasses override it to share
        the work of the two (for a product of experts, the projection ``x Φᵀ``) and skip validation.
        """
        return self.energy(x), self.energy_grad(x)

    def energy_target(self) -> EnergyTarget:
        """``E_β = β E`` with the analytic (or autograd) :meth:`energy_and_grad`, for HMC and Metropolis kernels."""
        return EnergyTarget(self)

    @allocates("num_samples")
    @torch.no_grad()
    def sample(
        self,
        num_samples: int,
        *,
        num_steps: int = 1000,
        step_size: float = 0.1,
        num_leapfrog: int = 10,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Approximate samples ``[num_samples, M]`` by MCMC: ``num_samples`` independent chains started at
        ``N(0, I)``, each run ``num_steps`` standard HMC transitions (momentum resampled, ``num_leapfrog``
        leapfrog steps of ``step_size``, Metropolis test; Neal 2011); returns their last states. Families with
        exact samplers (Gaussian, complete ICA) override this. Whether the chains mixed is the caller's to
        check (e.g. compare two seeds' moments)."""
        self.check_computable()
        check_positive_int(num_samples, "num_samples")
        check_positive_int(num_steps, "num_steps")
        check_positive_int(num_leapfrog, "num_leapfrog")
        if not step_size > 0:
            raise ValueError(f"step_size must be positive, got {step_size}")
        check_generator(generator, self.device)
        kernel = HMCKernel(step_size, num_leapfrog=num_leapfrog, momentum_refresh=1.0)
        target = self.energy_target()
        start = torch.randn(num_samples, self.num_visible, generator=generator, device=self.device, dtype=self.dtype)
        state = kernel.init(start, target, momentum=torch.zeros_like(start))  # fully refreshed at every step
        for _ in range(num_steps):
            state, _ = kernel.step(state, target, generator=generator)
        return state.position
