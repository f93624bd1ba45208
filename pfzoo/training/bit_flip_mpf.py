"""Minimum probability flow for binary models with bit-flip connectivity (Sohl-Dickstein's thesis ch. 3, appendices E–F).

MPF fits θ by minimising the initial rate at which probability flows out of the data states under a
dynamics whose equilibrium is the model (thesis eq. 2.11):

    K(θ) = (1/N) Σ_n Σ_{x' ∈ C(x_n)} exp( ½ [F(x_n; θ) - F(x'; θ)] )

with ``C(x)`` the states connected to ``x`` and F the free energy (the energy for an Ising model; for an
RBM the hidden units are summed out, appendix F). Single-bit-flip connectivity (eq. 3.2, appendix E.1)
connects ``x`` to its D neighbours ``x⁽ⁱ⁾``, and ``F(x) - F(x⁽ⁱ⁾)`` is cheap: for an Ising model
``E(x) = -½ xᵀJx - b·x`` it is ``(1 - 2x_i)(Jx + b)_i``, so K is a sum of exponentials of functions linear in
(J, b), convex, with no partition function anywhere. Adding the all-bits-flipped state ``1 - x``
(appendix E.2) lets flow escape between far-apart modes. Neighbours that are themselves data states
are kept in the sum, as in the thesis's reference code; they contribute equal and opposite flows in
expectation, so the fixed point of the objective is unchanged.

A general connectivity ``g_ij`` (thesis §2.8) replaces the bit flips when given: with ``g_ij`` the weight of the
connection from ``x_j`` to ``x_i`` (not necessarily symmetric, ``g_ij > 0 ⇔ g_ji > 0``), eq. 2.20's rates make the flow

    K(θ; g) = (1/N) Σ_n Σ_{x' ∈ C(x_n)} g(x'|x_n) (g(x_n|x') / g(x'|x_n))^½ exp( ½ [F(x_n; θ) - F(x'; θ)] )   (eq. 2.21)

summed over the states the connectivity lists (data states among them kept, as above).
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from pfzoo.training.objective import Objective
from pfzoo.validation import check_bool, check_positive_int


def sampled_units(batch: torch.Tensor, num_units: int | None, *, generator: torch.Generator | None) -> torch.Tensor | None:
    """``num_units`` unit indices per row of ``batch [B, D]``, drawn uniformly with replacement (``[B, k]``); ``None`` = all units."""
    if num_units is None:
        return None
    return torch.randint(batch.shape[1], (batch.shape[0], num_units), generator=generator, device=batch.device)


class BitFlipMPF(Objective):
    """MPF for binary models with single-bit-flip connectivity, optionally plus the all-bits-flipped state.

    The loss is the flow ``K(θ)`` itself (module docstring), summed in float64 from ``logsumexp`` of the
    exponents so that no line-search step can overflow it. K is the thesis's objective: convex for an
    Ising model, its minibatch average is unbiased for the full-data K, and when every data state can
    be made a strict local minimum (a Hopfield network below capacity) K → 0 with a vanishing gradient,
    so optimisers settle instead of chasing ``log K → -∞``. ``log_flows`` gives the per-example terms.

    Works with any binary :class:`~pfzoo.models.EnergyModel` through its ``flip_free_energy_gaps``
    (analytic for :class:`~pfzoo.models.Ising` and :class:`~pfzoo.models.RBM`, one matrix product).

    Args:
        all_bits_flipped: also connect each ``x`` to ``1 - x`` (thesis appendix E.2).
        num_flips: ``None`` sums over all D single flips; an integer k samples k units per example
            with replacement and weights each by D/k (an unbiased estimate of the flow, for wide models
            such as MNIST RBMs; random, so use it with minibatch optimisers, not L-BFGS).
        log_flow: minimise ``log K`` instead of K. Its gradient ``∇K / K`` is scale-free, so one learning
            rate serves the whole run, and a single large sampled term cannot blow up a step: the choice for
            minibatch SGD on wide RBMs (a ratio estimate on minibatches, biased by O(1/B)). Same minimiser as K
            on a fixed data set, but none at all when K → 0 (storable Hopfield patterns): keep K there.
        connectivity: ``None`` (the default) for the bit flips above; otherwise a general connectivity (eq. 2.21,
            module docstring) that replaces them: a deterministic callable mapping ``batch [B, D]`` to
            ``(connected [B, K, D], log_forward [B, K], log_backward [B, K])``, the K states each row connects to and
            ``log g(x'|x)``, ``log g(x|x')`` (``-inf`` for no connection). Rows list states other than their own (a
            listed ``x`` itself adds the θ-independent ``g(x|x)``, outside eq. 2.20's ``i ≠ j``). Costs one free energy
            per connected state; not with ``all_bits_flipped`` or ``num_flips``.
    """

    def __init__(
        self, all_bits_flipped: bool = False, num_flips: int | None = None, log_flow: bool = False,
        connectivity: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] | None = None,
    ) -> None:
        super().__init__()
        self.all_bits_flipped = check_bool(all_bits_flipped, "all_bits_flipped")
        self.log_flow = check_bool(log_flow, "log_flow")
        self.num_flips = None if num_flips is None else check_positive_int(num_flips, "num_flips")
        if connectivity is not None and not callable(connectivity):
            raise ValueError(f"connectivity must be None or a callable batch -> (connected, log_forward, log_backward), got {connectivity!r}")
        if connectivity is not None and (self.all_bits_flipped or self.num_flips is not None):
            raise ValueError("connectivity replaces the bit flips: give it without all_bits_flipped or num_flips")
        self.connectivity = connectivity

    def log_flows(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """``log Σ_{x' ∈ C(x_n)} exp(½ [F(x_n) - F(x')])`` for each row of binary ``batch [B, D]`` → ``[B]``."""
        if not model.binary_visible:  # real-valued states have no bit flips
            raise ValueError(f"BitFlipMPF needs a model over binary states; {type(model).__name__} is real-valued (use MPF's continuous branch)")
        model.check_visible(batch, "batch")
        if self.connectivity is not None:
            return self._connected_log_flows(model, batch)
        units = sampled_units(batch, self.num_flips, generator=generator)
        exponents = -0.5 * model.flip_free_energy_gaps(batch, units)
        if units is not None:
            exponents = exponents + math.log(batch.shape[1] / units.shape[1])
        if self.all_bits_flipped:
            complement = 0.5 * (model.free_energy(batch) - model.free_energy(1 - batch))
            exponents = torch.cat([exponents, complement.unsqueeze(1)], dim=1)
        return torch.logsumexp(exponents, dim=1)

    def _connected_log_flows(self, model, batch: torch.Tensor) -> torch.Tensor:
        """Eq. 2.21's inner sum for each row of ``batch [B, D]`` under :attr:`connectivity` → ``[B]``."""
        connected, log_forward, log_backward = self.connectivity(batch)
        num_rows, num_connected = log_forward.shape
        if connected.shape != (num_rows, num_connected, batch.shape[1]) or log_backward.shape != log_forward.shape:
            raise ValueError(
                f"connectivity must return connected [{num_rows}, K, {batch.shape[1]}] and log_forward, log_backward [{num_rows}, K]; "
                f"got {tuple(connected.shape)}, {tuple(log_forward.shape)}, {tuple(log_backward.shape)}"
            )
        gaps = model.free_energy(batch).unsqueeze(1) - model.free_energy(connected.reshape(-1, batch.shape[1])).reshape(num_rows, num_connected)
        # g_ij (g_ji / g_ij)^½ = (g_ij g_ji)^½: in logs, half the sum, with no 0/0 for unconnected pairs (-inf + -inf)
        return torch.logsumexp(0.5 * (log_forward + log_backward) + 0.5 * gaps, dim=1)

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """The flow ``K(θ) = (1/B) Σ_n exp(log_flows_n)`` over ``batch [B, D]``, or its log with ``log_flow`` (float64 scalar)."""
        log_flows = self.log_flows(model, batch, generator=generator).double()
        log_k = torch.logsumexp(log_flows, 0) - math.log(batch.shape[0])
        return log_k if self.log_flow else torch.exp(log_k)

    def extra_repr(self) -> str:
        text = f"all_bits_flipped={self.all_bits_flipped}, num_flips={self.num_flips}, log_flow={self.log_flow}"
        return text if self.connectivity is None else f"{text}, connectivity={self.connectivity!r}"
