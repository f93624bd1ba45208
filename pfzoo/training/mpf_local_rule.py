"""The MPF learning rule for Hopfield networks written as a local, online update (thesis §3.3, eqs. 3.12–3.13).

Single-bit-flip MPF (:class:`~pfzoo.training.BitFlipMPF`) minimises, over a batch of B binary states x,

    K(J, b) = (1/B) Σ_x Σ_i exp( ½ [E(x) - E(x⁽ⁱ⁾)] ),     E(x) = -½ xᵀJx - b·x,

with ``x⁽ⁱ⁾`` the state x with bit i flipped. Flipping bit i changes the energy by ``E(x) - E(x⁽ⁱ⁾) = (1 - 2x_i) h_i``
with the local field ``h = Jx + b``; writing the spin ``s_i = 2x_i - 1`` ∈ {-1, +1}, the term of unit i is its
*flip rate*

    k_i(x) = exp( -½ s_i h_i ),

the rate at which probability leaves x through a flip of unit i: large when unit i disagrees with its field.
J is symmetric with a zero diagonal; its free parameters are the J_ij, i < j, each entering h_i (through x_j)
and h_j (through x_i): ``∂h_i/∂J_ij = x_j``, ``∂h_j/∂J_ij = x_i``, ``∂h_i/∂b_i = 1``. Hence

    -∂K/∂J_ij = (1/2B) Σ_x [ s_i x_j k_i(x) + s_j x_i k_j(x) ],        -∂K/∂b_i = (1/2B) Σ_x s_i k_i(x).

The update of a coupling needs only what its two units see: their states and their own flip rates (each a
function of the unit's field, which the unit computes anyway). It is Hebbian-like: with all k = 1 (J = 0, b = 0)
it is the correlation ``s_i x_j + s_j x_i`` of the two units, and as learning proceeds it weights each example by
how unstable each unit still is on it, so examples the network already holds firmly stop changing the weights —
the outer-product rule's crosstalk is what this weighting removes. Gradient descent on K with these updates,
one example at a time (or summed over a minibatch), is :func:`mpf_online_rule`; full-batch L-BFGS on the same K
is the recipe ``conf/experiment/hopfield_mpf.yaml``.
"""

from __future__ import annotations

import logging
from typing import Callable

import torch

from pfzoo.models.hopfield import Hopfield
from pfzoo.validation import check_binary, check_finite_number, check_generator, check_nonempty, check_positive_int

logger = logging.getLogger(__name__)


def flip_rates(model: Hopfield, batch: torch.Tensor) -> torch.Tensor:
    """``k_i(x) = exp(-½ s_i (Jx + b)_i)`` for each row x of binary ``batch [B, n]`` and unit i → ``[B, n]``.

    ``K`` of the module docstring is ``flip_rates(model, batch).sum(1).mean()``.
    """
    spins = 2 * batch - 1
    return torch.exp(-0.5 * spins * model.local_fields(batch).detach())


def mpf_local_update(model: Hopfield, batch: torch.Tensor, *, max_flip_rate: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(-∂K/∂J, -∂K/∂b)`` on binary ``batch [B, n]`` by the local rule of the module docstring (thesis eq. 3.13).

    ``max_flip_rate``: ``None`` gives the exact gradient of K; a number k_max uses ``min(k_i, k_max)`` for each flip
    rate, the exact gradient of K with each exponential ``e^u`` continued linearly beyond ``u = log k_max`` (still
    convex, the same minimiser wherever no unit disagrees that strongly with its field there, as when the patterns are
    storable). Each unit still needs only its own rate, and one update is bounded, so a fixed step cannot overflow.

    Returns ``delta_coupling [n, n]``, symmetric with a zero diagonal, whose (i, j) entry is ``-∂K/∂J_ij`` for the
    free parameter J_ij = J_ji, and ``delta_bias [n]``; K is the mean over the batch. Computed without autograd:
    ``(s ⊙ k)ᵀ x`` holds ``Σ_x s_i k_i x_j`` at (i, j), and the update is its symmetric part over 2B.
    """
    model.check_visible(batch, "batch")
    if max_flip_rate is not None:
        max_flip_rate = check_finite_number(max_flip_rate, "max_flip_rate", minimum=0.0, exclusive=True)
    return _local_update(model, batch, max_flip_rate)


def _local_update(model: Hopfield, batch: torch.Tensor, max_flip_rate: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`mpf_local_update` without the checks (the online rule's inner loop)."""
    rates = flip_rates(model, batch)
    if max_flip_rate is not None:
        rates = rates.clamp(max=max_flip_rate)
    signed_rates = (2 * batch - 1) * rates  # s_i k_i(x), [B, n]
    hebbian = signed_rates.T @ batch  # [n, n]: Σ_x s_i k_i x_j
    delta_coupling = (hebbian + hebbian.T) / (2 * batch.shape[0])
    delta_coupling.fill_diagonal_(0)
    return delta_coupling, signed_rates.sum(0) / (2 * batch.shape[0])


def mpf_online_rule(
    patterns: torch.Tensor,
    *,
    learning_rate: float = 0.3,
    max_epochs: int = 1000,
    batch_size: int = 8,
    stop_when_stored: bool = True,
    max_flip_rate: float | None = 20.0,
    generator: torch.Generator | None = None,
    on_epoch: Callable[[int, Hopfield], None] | None = None,
) -> Hopfield:
    """Store ``patterns [m, n]`` (binary 0/1, floating point) by online gradient descent on MPF's K with the local rule.

    From J = 0, b = 0, each epoch visits the patterns in a random order (a permutation drawn from ``generator``) in
    minibatches of ``batch_size`` (1: strictly online, one pattern per update) and applies
    ``J += η ΔJ``, ``b += η Δb`` with ``(ΔJ, Δb)`` = :func:`mpf_local_update` on the minibatch (K its mean, so η is a
    step on the per-example flow; ``max_flip_rate`` as there). With ``stop_when_stored`` training ends after the first epoch at whose end every
    pattern is a fixed point of the dynamics (as the perceptron rule stops); otherwise, or when that never happens
    (corrupted copies that cannot all be minima), it runs ``max_epochs`` epochs. ``on_epoch(epoch, model)`` (1-based)
    is called after each epoch, e.g. to trace K or the stored fraction.

    K is convex, so with a small enough η the iterates approach the same minimiser as full-batch MPF. Unbounded
    (``max_flip_rate=None``), the exponential flip rates make a large η overshoot until the couplings overflow (refused
    with a ``ValueError``), above all where K has no zero (more patterns than the network holds, corrupted copies);
    bounded (default 20, i.e. the exponential continued linearly beyond a field of 2 log 20 ≈ 6 against a unit), a
    step cannot overflow. The defaults (η = 0.3, minibatches of 8) store 128 random patterns in 128 units in about 25
    epochs and 176 in about 100; on noisy copies a smaller η (0.03) averages the noise better.

    Returns a :class:`~pfzoo.models.Hopfield` network in the dtype and on the device of ``patterns``.
    """
    check_nonempty(check_binary(patterns, "patterns"), "patterns")
    learning_rate = check_finite_number(learning_rate, "learning_rate", minimum=0.0, exclusive=True)
    check_positive_int(max_epochs, "max_epochs")
    check_positive_int(batch_size, "batch_size")
    check_generator(generator, patterns.device)
    if max_flip_rate is not None:
        max_flip_rate = check_finite_number(max_flip_rate, "max_flip_rate", minimum=0.0, exclusive=True)
    num_patterns, num_units = patterns.shape
    zeros = torch.zeros(num_units, num_units, dtype=patterns.dtype, device=patterns.device)
    model = Hopfield.from_tensors(zeros, zeros[0])
    coupling, bias = model.coupling.data, model.bias.data  # updated in place: symmetric_coupling is then J itself
    for epoch in range(1, max_epochs + 1):
        order = torch.randperm(num_patterns, generator=generator, device=patterns.device)
        for start in range(0, num_patterns, batch_size):
            delta_coupling, delta_bias = _local_update(model, patterns[order[start : start + batch_size]], max_flip_rate)
            coupling.add_(delta_coupling, alpha=learning_rate)
            bias.add_(delta_bias, alpha=learning_rate)
        if not (torch.isfinite(coupling).all() and torch.isfinite(bias).all()):
            raise ValueError(f"learning_rate={learning_rate:g} is too large: the couplings overflowed in epoch {epoch} (the flip rates grow exponentially)")
        if on_epoch is not None:
            on_epoch(epoch, model)
        if stop_when_stored and model.is_fixed_point(patterns).all():
            logger.debug("MPF online rule: all %d patterns stored after %d epochs", num_patterns, epoch)
            break
    return model
