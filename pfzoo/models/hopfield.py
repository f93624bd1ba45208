"""Hopfield network: the Ising energy with deterministic asynchronous dynamics, used as an associative memory."""

from __future__ import annotations

import torch

from pfzoo.models.ising import Ising
from pfzoo.models.registry import register_model
from pfzoo.validation import check_positive_int


@register_model("hopfield")
class Hopfield(Ising):
    """An :class:`~pfzoo.models.Ising` model read as a memory: stored patterns are fixed points of the dynamics.

    Asynchronous deterministic dynamics (thesis eq. 3.7): visit the units one at a time and set
    ``x_i ← 1[(Jx + b)_i > 0]`` (a unit whose field is exactly 0 keeps its state). Each visit lowers
    or keeps the energy ``E(x) = -½ xᵀJx - b·x``, so the dynamics reach a fixed point, a local
    minimum under single flips. A pattern is *stored* when it is a fixed point. Training objectives
    (MPF, pseudo-likelihood, the outer-product and perceptron rules) are those of the Ising model and
    :mod:`pfzoo.training.hopfield_rules`.
    """

    def update_sweep(self, x: torch.Tensor, *, blocks: list[torch.Tensor] | None = None) -> torch.Tensor:
        """One asynchronous sweep over all units, block by block (:meth:`gibbs_blocks`), ``x [B, D]`` → ``[B, D]``. Not validated.

        Units of one independent set of the coupling graph do not interact, so each set is updated
        at once; the result equals a unit-by-unit sweep in the order of the sets.
        """
        coupling, bias = self.symmetric_coupling.detach(), self.bias.detach()
        x = x.clone()
        for block in self.gibbs_blocks() if blocks is None else blocks:
            fields = x @ coupling[:, block] + bias[block]
            x[:, block] = torch.where(fields > 0, 1.0, torch.where(fields < 0, 0.0, x[:, block])).to(x.dtype)
        return x

    @torch.no_grad()
    def recall(self, x: torch.Tensor, *, max_sweeps: int = 100) -> torch.Tensor:
        """Run the dynamics from ``x [B, D]`` until no unit changes (or ``max_sweeps`` sweeps); returns ``[B, D]``.

        Rows that have not converged after ``max_sweeps`` are returned as they are; check them with
        :meth:`is_fixed_point`.
        """
        x = self.check_visible(x, "x")
        check_positive_int(max_sweeps, "max_sweeps")
        blocks = self.gibbs_blocks()
        for _ in range(max_sweeps):
            updated = self.update_sweep(x, blocks=blocks)
            if torch.equal(updated, x):
                break
            x = updated
        return x

    @torch.no_grad()
    def is_fixed_point(self, x: torch.Tensor) -> torch.Tensor:
        """Whether each row of ``x [B, D]`` is left unchanged by the dynamics: bool ``[B]``.

        True when every unit agrees with the sign of its field: ``(Jx + b)_i > 0`` where ``x_i = 1`` and
        ``< 0`` where ``x_i = 0`` (a zero field also leaves the unit unchanged).
        """
        x = self.check_visible(x, "x")
        fields = self.local_fields(x)
        disagree = ((x == 1) & (fields < 0)) | ((x == 0) & (fields > 0))
        return ~disagree.any(-1)
