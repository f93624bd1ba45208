"""Models over real-valued vectors ``x ∈ ℝ^M`` with a differentiable energy (the targets of Hamiltonian AIS)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from pfzoo.kernels.hmc import HMCKernel
from pfzoo.models.base import EnergyModel
from pfzoo.paths.continuous import ContinuousGeometricPath

if TYPE_CHECKING:
    from pfzoo.models.gaussian import Gaussian

BASES = ("isotropic", "fitted")


class ContinuousModel(EnergyModel):
    """An :class:`EnergyModel` over ``x ∈ ℝ^M`` without latent variables: ``p(x) = exp(-E(x)) / Z``.

    Subclasses implement the validated public :meth:`energy`. :meth:`energy_grad` and
    :meth:`energy_and_grad` are the unchecked hot-loop primitives of Hamiltonian AIS (one call per
    leapfrog step); the versions here are the autograd fallback, and subclasses override them with
    analytic ones where those are cheap.
    """

    binary_visible = False

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
            (grad,) = torch.autograd.grad(self.energy(x).sum(), x)
        return grad

    def energy_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(E(x) [B], ∇_x E(x) [B, M])`` for ``x [B, M]``: one call per leapfrog step of HMC.

        This fallback calls :meth:`energy` and :meth:`energy_grad`; subclasses override it to share
        the work of the two (for a product of experts, the projection ``x Φᵀ``) and skip validation.
        """
        return self.energy(x), self.energy_grad(x)

    def annealing_base(self, kind: str = "isotropic", data: torch.Tensor | None = None, *, smoothing: float | None = None) -> "Gaussian":
        """A Gaussian with exactly known ``log Z`` to anneal from, on this model's device and dtype.

        ``kind="isotropic"``: ``N(0, I)``, zero mean and unit precision.
        ``kind="fitted"``: :meth:`Gaussian.fit <pfzoo.models.gaussian.Gaussian.fit>` of ``data [N, M]``,
        i.e. ``N(mean(data), cov(data) + 1e-6 · I)`` with the maximum-likelihood covariance; the
        ``1e-6 · I`` keeps the precision finite when the data lie in a subspace.

        ``smoothing`` is accepted and ignored: :class:`pfzoo.estimators.AIS` passes it to every model
        (it is the pseudo-count of the binary models' base-rate bases).
        """
        from pfzoo.models.gaussian import Gaussian

        if kind == "isotropic":
            return Gaussian(self.num_visible).to(device=self.device, dtype=self.dtype)
        if kind == "fitted":
            if data is None:
                raise ValueError("annealing_base(kind='fitted') needs data [N, M] to fit the mean and covariance")
            return Gaussian.fit(self.check_visible(data, "data").to(self.dtype))
        raise ValueError(f"kind must be one of {BASES}, got {kind!r}")

    def geometric_path(self, base: EnergyModel, kernel=None):
        """``f_β = exp(−(1−β)E_base − βE)`` with ``kernel`` transitions (default: HAIS's HMC, ε = 0.2)."""
        return ContinuousGeometricPath(target=self, base=base, kernel=HMCKernel(0.2) if kernel is None else kernel)
