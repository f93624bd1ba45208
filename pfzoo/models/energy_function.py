"""A user's own energy network as a model the estimators can anneal: ``EnergyFunction(net, num_visible=M)``."""

from __future__ import annotations

import torch
from torch import nn

from pfzoo.models.capabilities import Capability
from pfzoo.models.continuous import ContinuousModel
from pfzoo.validation import allocates, check_model_dtype


class EnergyFunction(ContinuousModel):
    """Wrap any ``nn.Module`` whose ``energy(x)`` (if it has one) or ``forward(x)`` maps ``[B, M]`` to ``[B]`` energies.

    ``p(x) = exp(−E(x)) / Z`` over ``x ∈ ℝ^M`` (``binary=False``: gradients by autograd, so HAIS and AIS with
    HMC or random-walk Metropolis anneal it from a Gaussian) or over ``x ∈ {0, 1}^M`` (``binary=True``: AIS
    with single-bit-flip Metropolis from independent Bernoulli units). The wrapped network keeps its own
    parameters, device and dtype; nothing is copied. ``Z`` must be finite: the estimators cannot tell a
    density from an improper one, so an energy that does not grow at infinity gives meaningless estimates.

    Args:
        net: the energy network.
        num_visible: M, the width of ``x``.
        binary: whether states are binary vectors.
    """

    heavy_tailed = None  # unknown: base="auto" judges the tails by the data instead

    def __init__(self, net: nn.Module, num_visible: int, *, binary: bool = False) -> None:
        super().__init__()
        if not isinstance(net, nn.Module):
            raise ValueError(f"net must be an nn.Module mapping [B, {num_visible}] to [B] energies, got {type(net).__name__}")
        if isinstance(num_visible, bool) or not isinstance(num_visible, int) or num_visible < 1:
            raise ValueError(f"num_visible must be a positive integer, got {num_visible!r}")
        self.net = net
        self.num_visible = num_visible
        self.binary_visible = bool(binary)
        if binary:
            self.family_capabilities = frozenset({Capability.BINARY_STATES})
            self.path_family = "binary_energy"
        # A parameter-free net still has a device and dtype: this empty buffer follows .to() with the net.
        reference = next(iter(list(net.parameters()) + list(net.buffers())), torch.zeros(0))
        check_model_dtype(reference.dtype, "net")
        self.register_buffer("_anchor", torch.zeros(0, dtype=reference.dtype, device=reference.device), persistent=False)

    def extra_repr(self) -> str:
        """The sizes, shown by ``repr``: ``EnergyFunction(...)``."""
        return f"num_visible={self.num_visible}, binary={self.binary_visible}"

    @property
    def device(self) -> torch.device:
        return self._anchor.device

    @property
    def dtype(self) -> torch.dtype:
        return self._anchor.dtype

    @property
    def log_partition_cost(self) -> None:
        return None

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """``E(x)`` for ``x [B, M]`` → ``[B]``, validated, from the wrapped network.

        The network's answer is checked too: a floating-point ``[B]`` tensor in the model's dtype. A network that fails
        on ``x`` (typically a width other than ``num_visible``) is reported in one line naming ``net`` and
        ``num_visible``, with the first line of its error."""
        self.check_visible(x, "x")
        compute = getattr(self.net, "energy", None)
        try:
            energy = compute(x) if callable(compute) else self.net(x)
        except (RuntimeError, IndexError, TypeError) as error:  # what torch raises for a width the net does not take
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise ValueError(f"net failed on x of shape {tuple(x.shape)} ({type(error).__name__}: {reason}); "
                             f"check that num_visible={self.num_visible} is the width net accepts") from error
        if not isinstance(energy, torch.Tensor) or energy.shape != (x.shape[0],):
            found = tuple(energy.shape) if isinstance(energy, torch.Tensor) else type(energy).__name__
            raise ValueError(f"net must map x [B, {self.num_visible}] to energies [B], got {found} for B = {x.shape[0]}")
        if energy.dtype != self.dtype:
            raise ValueError(f"net must return energies of the model's dtype {self.dtype}, got dtype {energy.dtype}")
        return energy

    @allocates("num_samples")
    def sample(self, num_samples: int, *, generator: torch.Generator | None = None, **hmc_options) -> torch.Tensor:
        """HMC samples for real-valued energies (see :meth:`ContinuousModel.sample`); binary energies have no sampler here
        (anneal them with ``AIS``, whose final chains are approximate samples)."""
        if self.binary_visible:
            raise NotImplementedError("EnergyFunction(binary=True) has no sampler: AIS's final chains are approximate samples")
        return super().sample(num_samples, generator=generator, **hmc_options)

    def config(self) -> dict:
        raise NotImplementedError("EnergyFunction wraps a user's network: save the network itself, not a pfzoo checkpoint")
