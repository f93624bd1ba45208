"""Classical Hopfield storage rules: the outer-product (Hebb) rule and a symmetric perceptron rule.

These are the baselines MPF is compared against for associative memory (thesis ch. 3): each maps a set of
binary patterns to a :class:`~pfzoo.models.Hopfield` network in which the patterns should be fixed points.

Both rules are stated for spins ``s = 2x - 1 ∈ {-1, +1}^n`` with the energy ``E_s(s) = -½ sᵀJ_s s - θ·s``
(``J_s`` symmetric, zero diagonal) and return the same energy in 0/1 units, ``E(x) = -½ xᵀJx - b·x``, up to
an additive constant. Substituting ``s = 2x - 1``::

    -½ sᵀJ_s s = -½ (2x - 1)ᵀJ_s(2x - 1) = -2 xᵀJ_s x + 2·1ᵀJ_s x - ½ 1ᵀJ_s 1
    -θ·s       = -2 θ·x + θ·1

so ``J = 4 J_s`` and ``b = 2θ - 2 J_s 1`` (:meth:`~pfzoo.models.Ising.from_spins`, which Hopfield inherits). The 0/1 local field is then twice the
spin field, ``(Jx + b)_i = 2 (J_s s + θ)_i``, so both forms have the same fixed points.
"""

from __future__ import annotations

import logging
import math
from typing import NamedTuple

import torch

from pfzoo.models.hopfield import Hopfield
from pfzoo.validation import check_binary, check_generator, check_positive_int

logger = logging.getLogger(__name__)


def _check_patterns(patterns: torch.Tensor) -> torch.Tensor:
    check_binary(patterns, "patterns")
    if patterns.shape[0] < 1 or patterns.shape[1] < 1:
        raise ValueError(f"patterns must hold at least one pattern of at least one unit, got shape {tuple(patterns.shape)}")
    return patterns


def outer_product_rule(patterns: torch.Tensor) -> Hopfield:
    """The Hebb (outer-product) rule: ``J_s = (1/n) Σ_p s_p s_pᵀ`` with a zero diagonal, no spin bias.

    Args:
        patterns: ``[m, n]`` binary 0/1 patterns (m patterns of n units, floating point); the spins are
            ``s_p = 2x_p - 1``.

    Returns:
        A :class:`~pfzoo.models.Hopfield` network over n units holding ``J = 4 J_s`` and ``b = -2 J_s 1``
        (the module docstring derives the conversion), in the dtype and on the device of ``patterns``.
        Its energy equals the spin energy ``-½ sᵀJ_s s`` up to the constant ``-½ 1ᵀJ_s 1``.

    Random patterns are reliably fixed points only while ``m`` is a small fraction of ``n``
    (about ``0.14 n`` with a few unstable bits; far fewer for every bit to be stable).
    """
    _check_patterns(patterns)
    spins = 2 * patterns - 1
    spin_coupling = spins.T @ spins / patterns.shape[1]
    spin_coupling.fill_diagonal_(0)
    return Hopfield.from_spins(spin_coupling, torch.zeros(spin_coupling.shape[0], dtype=spin_coupling.dtype))


class PerceptronFit(NamedTuple):
    """What :func:`perceptron_fit` returns: the network, the epochs of updates it ran, and whether an epoch then found
    every pattern stable (``False``: it stopped at ``max_epochs``)."""

    model: Hopfield
    epochs: int
    stable: bool


def perceptron_rule(
    patterns: torch.Tensor,
    *,
    learning_rate: float = 0.1,
    max_epochs: int = 1000,
    margin: float = 0.0,
    generator: torch.Generator | None = None,
) -> Hopfield:
    """The perceptron learning rule for associative memory (:func:`perceptron_fit`'s network): the trained
    :class:`~pfzoo.models.Hopfield` network."""
    return perceptron_fit(patterns, learning_rate=learning_rate, max_epochs=max_epochs, margin=margin, generator=generator).model


def perceptron_fit(
    patterns: torch.Tensor,
    *,
    learning_rate: float = 0.1,
    max_epochs: int = 1000,
    margin: float = 0.0,
    generator: torch.Generator | None = None,
) -> PerceptronFit:
    """The perceptron learning rule for associative memory, made symmetric; full batch over patterns.

    Starting from ``J_s = 0``, ``θ = 0`` (spin form, see the module docstring), each epoch computes the
    spin fields ``h_p = J_s s_p + θ`` of all m patterns at once (``[m, n]``) and marks every (pattern p,
    unit i) with ``s_pi h_pi ≤ margin`` as an error: the field has the wrong sign, is zero, or is within
    the margin. The textbook perceptron updates each unit's incoming weights on its errors,
    ``ΔJ_ij = η Σ_p e_pi s_pi s_pj`` and ``Δθ_i = η Σ_p e_pi s_pi`` (``e_pi`` ∈ {0, 1} the error mask),
    which makes ``J_s`` asymmetric. Our Hopfield/Ising models are symmetric, so this rule departs from the
    textbook one: it applies the symmetric part ``(ΔJ + ΔJᵀ)/2`` with the diagonal zeroed (and ``Δθ``
    unchanged). Each step is one matrix product; there is no Python loop over patterns or units.
    Training stops as soon as an epoch finds no error (every pattern is then a fixed point, with spin
    fields beyond ``margin``) or after ``max_epochs`` epochs; if errors remain a warning is logged and
    the current network is returned (check it with :meth:`~pfzoo.models.Hopfield.is_fixed_point`).

    With ``margin = 0`` the result does not depend on ``learning_rate`` (every update scales with it);
    a positive margin is measured in spin-field units (the 0/1 field is twice as large).

    Args:
        patterns: ``[m, n]`` binary 0/1 patterns (floating point).
        learning_rate: η > 0.
        max_epochs: the most full-batch epochs to run.
        margin: required stability ``s_pi h_pi > margin`` (≥ 0).
        generator: accepted for the keyword-only ``generator`` convention of training functions; the rule is
            deterministic (full batch, zero initial couplings) and draws no random numbers.

    Returns:
        :class:`PerceptronFit`: a :class:`~pfzoo.models.Hopfield` network with ``J = 4 J_s`` and ``b = 2θ - 2 J_s 1``,
        in the dtype and on the device of ``patterns``, the epochs of updates run, and whether it stopped stable.
    """
    _check_patterns(patterns)
    learning_rate = float(learning_rate)
    if not math.isfinite(learning_rate) or learning_rate <= 0:
        raise ValueError(f"learning_rate must be a positive finite number, got {learning_rate}")
    check_positive_int(max_epochs, "max_epochs")
    margin = float(margin)
    if not math.isfinite(margin) or margin < 0:
        raise ValueError(f"margin must be a non-negative finite number, got {margin}")
    check_generator(generator, patterns.device)

    # Parameters are kept in units of η: they are then half-integers, exact in floating point, so a field
    # that is exactly zero (a tie, common from the zero start) is recognised as an error rather than
    # passing as a rounding residue of either sign.
    spins = 2 * patterns - 1  # [m, n]
    num_units = patterns.shape[1]
    threshold = margin / learning_rate
    coupling_steps = torch.zeros(num_units, num_units, dtype=patterns.dtype, device=patterns.device)  # J_s / η
    bias_steps = torch.zeros(num_units, dtype=patterns.dtype, device=patterns.device)  # θ / η
    epochs, stable = max_epochs, False
    for epoch in range(max_epochs):
        fields = torch.addmm(bias_steps, spins, coupling_steps)  # [m, n], h / η; J_s symmetric, so s J_s = (J_s s)ᵀ
        errors = (spins * fields <= threshold).to(patterns.dtype)  # [m, n]
        if not errors.any():
            logger.debug("perceptron rule: all %d patterns stable after %d epochs", patterns.shape[0], epoch)
            epochs, stable = epoch, True
            break
        signed_errors = errors * spins  # e_pi s_pi
        delta = signed_errors.T @ spins  # [n, n]: row i = Σ_p e_pi s_pi s_p
        delta = (delta + delta.T) / 2
        delta.fill_diagonal_(0)
        coupling_steps += delta
        bias_steps += signed_errors.sum(0)
    else:
        fields = torch.addmm(bias_steps, spins, coupling_steps)
        num_errors = int((spins * fields <= threshold).sum())
        if num_errors:
            logger.warning(
                "perceptron rule: %d (pattern, unit) pairs still within the margin after max_epochs=%d epochs",
                num_errors,
                max_epochs,
            )
    return PerceptronFit(Hopfield.from_spins(learning_rate * coupling_steps, learning_rate * bias_steps), epochs, stable)
