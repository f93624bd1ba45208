"""Centering (Montavon & Müller 2012; Melchior, Fischer & Wiskott 2016): any objective's updates taken in the model's
centered parametrisation, which conditions the gradient of binary Boltzmann machines far better than the plain one.

A centered model subtracts an offset from every layer, ``E = −(v − μ)ᵀW(h − λ) − b̃·(v − μ) − c̃·(h − λ)`` for an RBM;
it is the same distribution as a plain model whose biases absorb the offsets, so pfzoo keeps the plain parameters
throughout (a trained model is an ordinary RBM, DBM or DBN) and centers only the direction of each update
(:meth:`~pfzoo.models.EnergyModel.center_gradients`). The offsets are the layers' data means (the "dd" variant, which
Melchior et al. found the most robust), recomputed on the whole training set at the start of every epoch and
smoothed across epochs by ``offset_rate``: every rank computes them alike, and a resumed run continues with the
checkpointed offsets.
"""

from __future__ import annotations

import torch

from pfzoo.models.capabilities import Capability
from pfzoo.training.objective import Objective
from pfzoo.validation import check_finite_number


class Centered(Objective):
    """``objective``'s loss, with each update centered on the layers' data means.

    Args:
        objective: the objective whose gradients are centered (CD, PCD, ...); its own state (e.g. PCD's chains) is part
            of this one's ``state_dict`` under ``objective.``.
        offset_rate: ρ ∈ (0, 1]; at the start of each epoch the offsets move to ``(1 − ρ)·old + ρ·means`` with
            ``means`` the model's :meth:`~pfzoo.models.EnergyModel.layer_means` of the training set (the first epoch
            takes the means themselves). 1 uses each epoch's means as they are.
    """

    lazy_buffers = ("offsets",)

    offsets: torch.Tensor

    def __init__(self, objective: Objective, offset_rate: float = 1.0) -> None:
        super().__init__()
        if not isinstance(objective, Objective):
            raise ValueError(f"objective must be a pfzoo.training.Objective to center, got {type(objective).__name__}")
        if isinstance(objective, Centered):
            raise ValueError("objective must not itself be Centered (its updates are already centered)")
        self.objective = objective
        self.offset_rate = check_finite_number(offset_rate, "offset_rate", minimum=0.0)
        if not 0 < self.offset_rate <= 1:
            raise ValueError(f"offset_rate must be in (0, 1], got {offset_rate}")
        self.register_buffer("offsets", torch.empty(0))
        self._sizes: list[int] = []

    def caveats(self, model) -> tuple[str, ...]:
        return self.objective.caveats(model)

    def missing(self, model) -> str | None:
        inner = self.objective.missing(model)
        if inner is not None:
            return inner
        return None if Capability.CENTERING in model.capabilities else Capability.CENTERING.value

    def start_epoch(self, epoch: int) -> None:
        self.objective.start_epoch(epoch)

    def attach_data(self, data) -> None:
        self.objective.attach_data(data)

    def prepare(self, model, train: torch.Tensor, *, generator: torch.Generator | None = None) -> bool:
        """The inner objective's epoch start (e.g. a DBM's greedy pretraining), then the offsets moved toward the
        training set's layer means ``[Σ layer sizes]``; returns whether the inner objective changed (a new
        preconditioner leaves the optimiser's momentum meaningful)."""
        changed = self.objective.prepare(model, train, generator=generator)  # with gradients: e.g. a DBM's pretraining
        with torch.no_grad():
            means = model.layer_means(train)
        self._sizes = [mean.numel() for mean in means]
        fresh = torch.cat(means).double()
        if self.offsets.numel() != fresh.numel():
            self.offsets = fresh
        else:
            self.offsets = (1 - self.offset_rate) * self.offsets + self.offset_rate * fresh
        return changed

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None,
             indices: torch.Tensor | None = None) -> torch.Tensor:
        """The inner objective's loss of ``batch [B, V]`` (its gradient is centered afterwards, in :meth:`precondition`)."""
        extra = {"indices": indices} if self.objective.epoch_stateful else {}
        return self.objective.loss(model, batch, generator=generator, **extra)

    def precondition(self, model) -> None:
        """Center the gradients in ``.grad`` on the current offsets (after the inner objective's own preconditioning)."""
        self.objective.precondition(model)
        if self.offsets.numel() == 0:
            raise ValueError("Centered.precondition needs offsets: call prepare(model, train) at the start of the epoch first")
        model.center_gradients(list(self.offsets.split(self._sizes)))

    def epoch_metrics(self) -> dict[str, float]:
        return self.objective.epoch_metrics()

    def extra_repr(self) -> str:
        return f"offset_rate={self.offset_rate}"
