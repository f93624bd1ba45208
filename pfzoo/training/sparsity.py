"""A sparsity target for the hidden layers of a DBM (Hinton 2010, *A practical guide to training RBMs*, §11).

Each constrained hidden unit ``j`` keeps a damped estimate of its mean activity,

    q̂_j ← λ q̂_j + (1 − λ) q_j,        q_j = the minibatch mean of its mean-field posterior mean μ_j,

and the training objective gains the cross-entropy penalty ``cost · Σ_j [−p log q̂_j − (1 − p) log(1 − q̂_j)]``
towards the target activity ``p``. For a logistic unit the penalty's derivative with respect to the unit's total
input is ``cost · (q̂_j − p)``, and the guide uses that derivative for the unit's bias and for its incoming weights.
:func:`sparsity_surrogate` is a scalar whose gradient is exactly that update: the unit's total mean-field input

    a_j = b_j + (μ_{l−1} W_{l−1})_j + (μ_{l+1} W_lᵀ)_j          (the last term only below the top layer)

averaged over the batch, times the constant ``cost · (q̂_j − p)``. Its gradient is ``cost · (q̂_j − p)`` on ``b_j``
and ``cost · (q̂_j − p) · mean_n μ_{l±1, i}`` on the weights into unit ``j`` from both neighbouring layers (in a DBM
both are inputs of the unit). A unit that has died (``q̂ ≪ p``) has its bias and incoming weights raised, one that is
on too often lowered. Under centered updates (Montavon & Müller 2012) the weight part vanishes to first order (the
batch means ≈ the offsets) and the penalty acts on the biases.

:class:`SparsityTarget` holds the settings and the estimate ``q̂`` (a buffer, so checkpoints carry it); the DBM
objectives own one when they are given a target.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from pfzoo.models.dbm import DBM
from pfzoo.training.objective import resize_to_saved
from pfzoo.validation import check_finite_number

DEFAULT_SPARSITY_COST = 0.1
DEFAULT_SPARSITY_DAMPING = 0.9


class SparsityTarget(nn.Module):
    """The penalty of this module's docstring for one training run.

    Args:
        target: one mean activity ``p ∈ (0, 1)`` for every hidden layer, or a sequence with one entry per hidden layer
            (bottom first), each ``None`` (a free layer) or a ``p``.
        cost: the penalty's weight (its gradient on a unit's bias is ``cost · (q̂ − p)``); ``None``: the default.
        damping: ``λ ∈ [0, 1)`` of ``q̂ ← λ q̂ + (1 − λ) q_batch``; ``None``: the default.

    The buffer ``activity [Σ n_hidden]`` (hidden layers concatenated, bottom first) is empty until the first batch.
    """

    activity: torch.Tensor

    def __init__(self, target: float | Sequence[float | None], cost: float | None = DEFAULT_SPARSITY_COST,
                 damping: float | None = DEFAULT_SPARSITY_DAMPING) -> None:
        super().__init__()
        self.target = check_sparsity_targets(target)
        if self.target is None:
            raise ValueError("sparsity_target must be a number in (0, 1) or a list of them, got None")
        self.cost, self.damping = check_sparsity_settings(cost, damping)
        self.register_buffer("activity", torch.empty(0))

    def penalty(self, model: DBM, batch: torch.Tensor, means: list[torch.Tensor]) -> torch.Tensor:
        """Update ``activity`` with the batch's mean-field means ``[μ_1 [B, n_1], …]`` of ``batch [B, V]`` and return
        :func:`sparsity_surrogate` (a scalar to add to the loss)."""
        targets = layer_targets(model, self.target)
        self.activity = damped_activity(self.activity, means, self.damping)
        return sparsity_surrogate(model, batch, means, self.activity, targets, self.cost)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        resize_to_saved(self, state_dict, prefix, ("activity",))  # the estimate's size is known only once it exists
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self) -> str:
        return f"target={self.target}, cost={self.cost}, damping={self.damping}"


def check_sparsity_settings(cost, damping) -> tuple[float, float]:
    """``(cost ≥ 0, damping ∈ [0, 1))`` as floats, or a one-line error naming the bad one. ``None`` stands for the
    default (:data:`DEFAULT_SPARSITY_COST`, :data:`DEFAULT_SPARSITY_DAMPING`): the trainer configs say ``null`` so that
    a run started before these settings existed still resumes (a setting added at ``null`` is no difference)."""
    cost = check_finite_number(DEFAULT_SPARSITY_COST if cost is None else cost, "sparsity_cost", minimum=0.0)
    damping = check_finite_number(DEFAULT_SPARSITY_DAMPING if damping is None else damping, "sparsity_damping", minimum=0.0)
    if damping >= 1.0:
        raise ValueError(f"sparsity_damping must be in [0, 1), got {damping}")
    return cost, damping


def check_sparsity_targets(targets, name: str = "sparsity_target") -> tuple[float | None, ...] | float | None:
    """``None`` (no target), one target ``p ∈ (0, 1)`` for every hidden layer, or a sequence with one entry per hidden
    layer (bottom first), each ``None`` (that layer unconstrained) or a ``p ∈ (0, 1)``."""
    if targets is None:
        return None
    if isinstance(targets, (int, float)) and not isinstance(targets, bool):
        return _check_target(targets, name)
    if not isinstance(targets, Sequence) or isinstance(targets, str) or len(targets) == 0:
        raise ValueError(f"{name} must be None, a number in (0, 1) or a non-empty list of them (None for a free layer), got {targets!r}")
    checked = tuple(None if target is None else _check_target(target, f"{name}[{i}]") for i, target in enumerate(targets))
    if all(target is None for target in checked):
        raise ValueError(f"{name} must constrain at least one hidden layer, got {targets!r} (use null for no target)")
    return checked


def _check_target(target, name: str) -> float:
    target = check_finite_number(target, name)
    if not 0.0 < target < 1.0:
        raise ValueError(f"{name} must be a mean activity in (0, 1), got {target}")
    return target


def layer_targets(model: DBM, targets: float | tuple[float | None, ...]) -> list[float | None]:
    """One target (or ``None``) per hidden layer of ``model`` from a checked ``targets``."""
    num_hidden = model.num_layers - 1
    if isinstance(targets, float):
        return [targets] * num_hidden
    if len(targets) != num_hidden:
        raise ValueError(
            f"sparsity_target has {len(targets)} entries but the DBM has {num_hidden} hidden layers (layer sizes {model.layer_sizes}); "
            "give one per hidden layer, null for a free one"
        )
    return list(targets)


@torch.no_grad()
def damped_activity(previous: torch.Tensor, means: list[torch.Tensor], damping: float) -> torch.Tensor:
    """The updated estimate ``q̂ [Σ n_hidden]`` (hidden layers concatenated, bottom first) from the batch's mean-field
    means ``[μ_1 [B, n_1], …, μ_L [B, n_L]]``; an empty ``previous`` (the first batch) starts at the batch's means."""
    batch_activity = torch.cat([layer.mean(0) for layer in means])
    if previous.numel() == 0:
        return batch_activity
    return damping * previous + (1.0 - damping) * batch_activity


def sparsity_surrogate(
    model: DBM, batch: torch.Tensor, means: list[torch.Tensor], activity: torch.Tensor, targets: list[float | None], cost: float
) -> torch.Tensor:
    """``cost · Σ_{constrained j} (q̂_j − p_l) · mean_n a_{n,j}`` (scalar; module docstring) for ``batch [B, V]``, its
    mean-field means, the damped activity ``q̂ [Σ n_hidden]`` and one target per hidden layer (``None``: free)."""
    layers = [batch, *means]
    per_layer = activity.split(model.layer_sizes[1:])
    total = batch.new_zeros(())
    for layer, (target, q_hat) in enumerate(zip(targets, per_layer), start=1):
        if target is None:
            continue
        mean_input = model.biases[layer] + layers[layer - 1].mean(0) @ model.weights[layer - 1]
        if layer + 1 < model.num_layers:
            mean_input = mean_input + layers[layer + 1].mean(0) @ model.weights[layer].T
        total = total + ((q_hat - target) * mean_input).sum()
    return cost * total
