"""``MPF``: minimum probability flow with the connectivity that suits the model (the ``trainer=mpf`` objective).

Binary models (Ising, Hopfield, RBM) use bit-flip connectivity (:class:`~pfzoo.training.BitFlipMPF`,
thesis ch. 3); continuous models use persistent HMC connectivity (:class:`~pfzoo.training.PersistentMPF`,
thesis §2.9). This module only routes each call to the right one, so one
config trains every model family.
"""

from __future__ import annotations

import torch

from pfzoo.models.capabilities import Capability
from pfzoo.training.bit_flip_mpf import BitFlipMPF
from pfzoo.training.objective import Objective
from pfzoo.training.persistent_mpf import PersistentMPF


class MPF(Objective):
    """Route to ``binary`` for models with binary visible units and to ``continuous`` otherwise.

    Has the epoch-stateful Trainer interface (``prepare`` and ``loss(..., indices=...)``) because
    persistent MPF needs it; for binary models ``prepare`` does nothing and returns ``False``.

    Args:
        binary: the bit-flip objective (default ``BitFlipMPF()``: all single flips; ``BitFlipMPF(connectivity=g)`` for a
            general connectivity g_ij, thesis eq. 2.21).
        continuous: the persistent-HMC objective (default ``PersistentMPF()``).
        branches: the branches this configuration is meant for; a model of another branch is refused rather
            than trained with default settings that appear nowhere in its config (``trainer=mpf_sgd`` sets up
            minibatch bit flips for wide binary models, ``trainer=mpf_adam`` persistent MPF for the mcRBM).
    """

    config_name = "mpf"
    trainer_configs = ("mpf", "mpf_adam", "mpf_sgd")
    BRANCH_CONFIGS = {"binary": ("mpf", "mpf_sgd"), "continuous": ("mpf", "mpf_adam")}

    def __init__(
        self, binary: BitFlipMPF | None = None, continuous: PersistentMPF | None = None, branches: tuple[str, ...] | list[str] = ("binary", "continuous")
    ) -> None:
        super().__init__()
        self.binary = BitFlipMPF() if binary is None else binary
        self.continuous = PersistentMPF() if continuous is None else continuous
        branches = tuple(branches)
        if not branches or any(branch not in self.BRANCH_CONFIGS for branch in branches):
            raise ValueError(f"branches must be a non-empty subset of {list(self.BRANCH_CONFIGS)}, got {list(branches)}")
        self.branches = branches

    @staticmethod
    def branch(model) -> str | None:
        """"binary" (bit flips), "continuous" (persistent HMC) or ``None`` (neither applies) for ``model``."""
        offered = model.capabilities
        if Capability.BINARY_STATES in offered and Capability.EXACT_FREE_ENERGY in offered:
            return "binary"
        return "continuous" if Capability.REAL_ENERGY in offered else None

    def missing(self, model) -> str | None:
        branch = self.branch(model)
        if branch is None:
            return f"binary states with an exact free energy, or {Capability.REAL_ENERGY.value}"
        if branch not in self.branches:
            wanted = "binary states with an exact free energy" if "binary" in self.branches else Capability.REAL_ENERGY.value
            return f"{wanted} in this configuration (branches={list(self.branches)})"
        return None

    def configs_for(self, model) -> tuple[str, ...]:
        branch = self.branch(model)
        return () if branch is None else self.BRANCH_CONFIGS[branch]

    def prepare(self, model, data: torch.Tensor, *, generator: torch.Generator | None = None) -> bool:
        """Refresh the persistent connectivity of a continuous model when due; nothing to do for binary models."""
        if model.binary_visible:
            return False
        return self.continuous.prepare(model, data, generator=generator)

    def loss(
        self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None, indices: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The MPF loss of ``batch [B, D]`` under the objective for this model (scalar): K for binary models, log K for continuous ones."""
        if model.binary_visible:
            return self.binary.loss(model, batch, generator=generator)
        return self.continuous.loss(model, batch, generator=generator, indices=indices)
