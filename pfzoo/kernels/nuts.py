"""The no-U-turn sampler (NUTS; Hoffman & Gelman 2014) with multinomial sampling along the trajectory (Betancourt 2017),
for energies over real vectors, batched over chains: each chain grows its own tree, chains that have stopped are masked.

One transition at β from x₀, with ``H(x, p) = E_β(x) + ½|p|²`` (unit mass) and ``p₀ ~ N(0, I)``:

* **Doubling** (Hoffman & Gelman Alg. 3): at depth j = 0, 1, … a direction v = ±1 is drawn and a new subtree of 2ʲ
  leapfrog steps of size vε is built from that end of the trajectory, which then holds 2ʲ⁺¹ points (a balanced binary
  tree).
* **No-U-turn criterion** (Betancourt 2017 §A.4.2, the generalized criterion with unit mass): a (sub)tree with end
  momenta p⁻, p⁺ and momentum sum ρ = Σ pᵢ over its points has turned when ``ρ·p⁻ ≤ 0`` or ``ρ·p⁺ ≤ 0``. Every subtree of
  a new subtree (the aligned blocks of 2ᵐ leaves, m ≥ 1) is checked as its last leaf is made; a new subtree with a
  turned block, or a leaf whose ``H − H₀`` exceeds ``max_energy_error`` (a divergence), is discarded and the chain
  stops. Otherwise it is merged and the whole trajectory checked: a turn stops the chain; so does ``max_depth``.
* **Multinomial sampling** (Betancourt 2017 §A.3.2): each point has weight ``w = exp(H₀ − H)``. Within a new subtree a
  candidate is kept by progressive sampling (the i-th leaf replaces it with probability ``wᵢ / Σ_{k≤i} w_k``, so the
  candidate is drawn ∝ w); on merging, the chain moves to the subtree's candidate with probability
  ``min(1, W_new / W_old)`` (biased progressive sampling, Betancourt §A.3.2 eq. 32), which favours points far from x₀
  and leaves the same distribution invariant.

Every set of trees the doubling can build from any of its points is equally likely, so the transition is reversible
with respect to ``p_β ∝ exp(−E_β)``. Chains are advanced in lockstep: a leapfrog step is evaluated for every chain (the
target's statistics are per chain, so a subset cannot be evaluated alone) and kept only where the chain is still
building. Whether any chain is still building is read back once per leapfrog step (a host sync on a GPU, which the
fixed-length kernels avoid). The number of draws depends on how far the deepest chain goes, so one block of chains
drawing from :class:`~pfzoo.sampling.ChainStreams` draws as it would alone only when its depth is the batch's.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch

from pfzoo.hamiltonian import Evaluation, hamiltonian, leapfrog
from pfzoo.kernels.base import ENERGY_AND_GRADIENT, select_chains
from pfzoo.kernels.hmc import PositionTarget
from pfzoo.sampling import normal, uniform
from pfzoo.validation import check_finite_number, check_positive_int, check_step_size


class NUTSState(NamedTuple):
    """position ``[N, D]`` and the target's statistics of it."""

    position: torch.Tensor
    stats: Any


class NUTSInfo(NamedTuple):
    """accept_prob ``[N]``: the mean of ``min(1, exp(H₀ − H))`` over the points the chain integrated (Hoffman & Gelman
    §3.2.1's statistic, what step sizes are adapted on); depth ``[N]``: doublings built (the last one possibly
    discarded); num_leapfrog ``[N]``: leapfrog steps the chain used; diverged ``[N]``: whether a leaf's energy error
    exceeded the bound; the step ε used."""

    accept_prob: torch.Tensor
    depth: torch.Tensor
    num_leapfrog: torch.Tensor
    diverged: torch.Tensor
    step_size: float | torch.Tensor


class _Point(NamedTuple):
    """One end of a trajectory: position ``[N, D]``, momentum ``[N, D]``, the evaluation there (``extras`` = statistics)."""

    position: torch.Tensor
    momentum: torch.Tensor
    evaluation: Evaluation


class _Subtree(NamedTuple):
    """A new subtree per chain: kept ``[N]`` (built without a turn or divergence), its far end, the candidate (position,
    statistics), ``log W`` ``[N]`` (relative to ``exp(−H₀)``), momentum sum ``[N, D]``, and the step's counters."""

    kept: torch.Tensor
    end: _Point
    position: torch.Tensor
    stats: Any
    log_weight: torch.Tensor
    momentum_sum: torch.Tensor
    num_leapfrog: torch.Tensor
    accept_sum: torch.Tensor
    diverged: torch.Tensor


def turned(momentum_sum: torch.Tensor, first: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """Betancourt's generalized no-U-turn criterion with unit mass → ``[N]``: ``ρ·p⁻ ≤ 0`` or ``ρ·p⁺ ≤ 0`` for a
    (sub)tree with momentum sum ``ρ [N, D]`` and end momenta ``first``, ``last [N, D]`` (symmetric in the two ends, so
    the direction the tree grew in does not matter)."""
    return ((momentum_sum * first).sum(-1) <= 0) | ((momentum_sum * last).sum(-1) <= 0)


def merge_probability(log_subtree: torch.Tensor, log_trajectory: torch.Tensor) -> torch.Tensor:
    """Biased progressive sampling (Betancourt 2017 eq. 32): the probability ``min(1, W_new / W_old)`` ``[N]`` of moving to
    a new subtree's candidate, from ``log W`` of the new subtree and of the trajectory before it."""
    return torch.exp(torch.clamp(log_subtree - log_trajectory, max=0.0))


class NUTSKernel:
    """The no-U-turn sampler with multinomial sampling (module docstring), under the :class:`~pfzoo.kernels.Kernel`
    protocol on any :class:`~pfzoo.kernels.PositionTarget`.

    The kernel holds settings only; :meth:`step` takes ``step_size`` per call too (a number or a 0-dim tensor, e.g. one
    adapted between calls by :func:`~pfzoo.kernels.adaptive_chain` towards an acceptance statistic of about 0.8).

    Args:
        step_size: leapfrog step ε > 0.
        max_depth: the most doublings per transition (at most ``2^max_depth − 1`` leapfrog steps); Stan's default 10.
        max_energy_error: a leaf with ``H − H₀`` above this is a divergence (Stan's 1000).
    """

    needs = ENERGY_AND_GRADIENT

    def __init__(self, step_size: float | torch.Tensor, *, max_depth: int = 10, max_energy_error: float = 1000.0) -> None:
        step_size = check_step_size(step_size)
        self.step_size = step_size
        self.max_depth = check_positive_int(max_depth, "max_depth")
        self.max_energy_error = float(check_finite_number(max_energy_error, "max_energy_error", minimum=0.0, exclusive=True))

    def init(self, position: torch.Tensor, target: PositionTarget, *, generator: torch.Generator | None = None) -> NUTSState:
        """Chains at ``position [N, D]`` with the target's statistics (no draws)."""
        return NUTSState(position, target.statistics(position))

    def step(self, state: NUTSState, target: PositionTarget, *, beta: float = 1.0, generator: torch.Generator | None = None,
             step_size: float | torch.Tensor | None = None) -> tuple[NUTSState, NUTSInfo]:
        """One NUTS transition at β leaving ``p_β`` invariant → ``(state, info)``; ``step_size`` replaces ε for this call."""
        step_size = self.step_size if step_size is None else step_size
        x = state.position
        n = x.shape[0]
        current = target.evaluation(state.stats, beta)
        momentum = normal(x.shape, generator=generator, device=x.device, dtype=x.dtype)
        start_energy = hamiltonian(current, momentum)
        left = right = _Point(x, momentum, current)
        momentum_sum = momentum
        log_weight = torch.zeros(n, dtype=torch.float64, device=x.device)  # the start's weight exp(H₀ − H₀) = 1
        sample_position, sample_stats = x, state.stats
        building = torch.ones(n, dtype=torch.bool, device=x.device)
        depth = torch.zeros(n, dtype=torch.int64, device=x.device)
        num_leapfrog = torch.zeros(n, dtype=torch.int64, device=x.device)
        accept_sum = torch.zeros(n, dtype=torch.float64, device=x.device)
        diverged = torch.zeros(n, dtype=torch.bool, device=x.device)
        for level in range(self.max_depth):
            if not bool(building.any()):
                break
            forward = uniform((n,), generator=generator, device=x.device, dtype=torch.float64) < 0.5
            signed = ((2 * forward.to(x.dtype) - 1) * step_size)[:, None]
            subtree = self._subtree(select_chains(forward, right, left), signed, level, start_energy, building, target, beta, generator)
            kept = subtree.kept
            left = select_chains(kept & ~forward, subtree.end, left)
            right = select_chains(kept & forward, subtree.end, right)
            draw = uniform((n,), generator=generator, device=x.device, dtype=torch.float64)
            move = kept & (draw < merge_probability(subtree.log_weight, log_weight))
            sample_position = select_chains(move, subtree.position, sample_position)
            sample_stats = select_chains(move, subtree.stats, sample_stats)
            log_weight = torch.where(kept, torch.logaddexp(log_weight, subtree.log_weight), log_weight)
            momentum_sum = torch.where(kept[:, None], momentum_sum + subtree.momentum_sum, momentum_sum)
            depth += building
            num_leapfrog += subtree.num_leapfrog
            accept_sum += subtree.accept_sum
            diverged |= subtree.diverged
            building = kept & ~turned(momentum_sum, left.momentum, right.momentum)
        accept_prob = accept_sum / num_leapfrog.clamp(min=1)
        return NUTSState(sample_position, sample_stats), NUTSInfo(accept_prob, depth, num_leapfrog, diverged, step_size)

    def _subtree(self, start: _Point, signed: torch.Tensor, level: int, start_energy: torch.Tensor, building: torch.Tensor,
                 target: PositionTarget, beta: float, generator: torch.Generator | None) -> _Subtree:
        """2^level leapfrog steps of ``signed`` ``[N, 1]`` (±ε per chain) from ``start`` for the chains ``building``."""
        n = start_energy.shape[0]
        evaluate = lambda position: target.evaluation(target.statistics(position), beta)  # noqa: E731
        point = start
        kept = building.clone()
        log_weight = torch.full((n,), -math.inf, dtype=torch.float64, device=start_energy.device)
        position, stats = start.position, start.evaluation.extras
        momentum_sum = torch.zeros_like(start.momentum)
        # block_starts[m]: (first momentum, momentum sum before it) of the latest aligned block of 2ᵐ leaves, m = 1..level;
        # the block ending at leaf k (k + 1 a multiple of 2ᵐ) starts at the latest multiple of 2ᵐ, k + 1 − 2ᵐ.
        block_starts: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        num_leapfrog = torch.zeros(n, dtype=torch.int64, device=start_energy.device)
        accept_sum = torch.zeros(n, dtype=torch.float64, device=start_energy.device)
        diverged = torch.zeros(n, dtype=torch.bool, device=start_energy.device)
        for k in range(2**level):
            if not bool(kept.any()):
                break
            leaf = _Point(*leapfrog(point.position, point.momentum, point.evaluation, evaluate, step_size=signed, num_steps=1))
            error = hamiltonian(leaf.evaluation, leaf.momentum) - start_energy
            error = torch.nan_to_num(error, nan=math.inf)
            num_leapfrog += kept
            accept_sum += torch.where(kept, torch.exp(torch.clamp(-error, max=0.0)), 0.0)
            divergent = kept & ~(error <= self.max_energy_error)
            diverged |= divergent
            kept = kept & ~divergent
            point = select_chains(kept, leaf, point)
            for m in range(1, level + 1):
                if k % 2**m == 0:
                    block_starts[m] = (leaf.momentum, momentum_sum)
            momentum_sum = torch.where(kept[:, None], momentum_sum + leaf.momentum, momentum_sum)
            grown = torch.where(kept, torch.logaddexp(log_weight, -error), log_weight)
            draw = uniform((n,), generator=generator, device=start_energy.device, dtype=torch.float64)
            take = kept & (draw < torch.exp(-error - grown))
            position = select_chains(take, leaf.position, position)
            stats = select_chains(take, leaf.evaluation.extras, stats)
            log_weight = grown
            for m in range(1, level + 1):
                if (k + 1) % 2**m == 0:
                    first, before = block_starts[m]
                    kept = kept & ~turned(momentum_sum - before, first, leaf.momentum)
        return _Subtree(kept, point, position, stats, log_weight, momentum_sum, num_leapfrog, accept_sum, diverged)

    def __repr__(self) -> str:
        return f"NUTSKernel(step_size={self.step_size}, max_depth={self.max_depth})"
