"""Parallel tempering (replica exchange; Swendsen & Wang 1986, Geyer 1991, Hukushima & Nemoto 1996) as a kernel built
from a kernel, and the ladders of inverse temperatures it runs on.

R replicas of the same N chains run at a ladder ``0 < β_1 < … < β_R = 1``. A step advances every replica by the inner
kernel at its own β, then proposes to exchange the states of neighbouring replicas ``(i, i + 1)``, accepted with

    min(1, f_{β_i}(x_{i+1}) f_{β_{i+1}}(x_i) / (f_{β_i}(x_i) f_{β_{i+1}}(x_{i+1})))

(*Deep Learning* §18.2; Desjardins et al. 2010). Both moves leave the product ``Π_r p_{β_r}(x_r)`` invariant, so
the β = 1 replica samples ``p_1``, while states cross between modes at the hot end (small β, a flatter density) and
travel down the ladder by exchanges. Exchanges need ``log f_β`` of any position at any β: a target offers it as
``log_density`` (:data:`~pfzoo.kernels.base.TEMPERED_LOG_DENSITY`). The ladder adapts towards equal acceptance between
neighbours with :func:`adapt_ladder`.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np
import torch

from pfzoo.kernels.base import CHAIN_BETAS, STATISTICS_LOG_DENSITY, TEMPERED_LOG_DENSITY, Kernel, Target, check_kernel, select_chains, take_chains
from pfzoo.sampling import randint, uniform
from pfzoo.validation import check_bool, check_choice, check_finite_number, check_positive_int

SWAP_SCHEMES = ("alternate", "random")
"""Which neighbour pairs a step proposes to exchange: ``"alternate"`` the even pairs ``(1, 2), (3, 4), …`` at even steps and
the odd ones ``(2, 3), …`` at odd steps (deterministic even–odd, non-reversible PT; Okabe et al. 2001, Syed et al. 2022,
which carries states along the ladder in O(R) steps rather than a random walk's O(R²)); ``"random"`` the even or the odd
pairs with probability ½ each (reversible; one host read of the draw per step)."""


def check_ladder(betas: Sequence[float] | torch.Tensor, name: str = "betas") -> tuple[float, ...]:
    """The ladder ``betas`` as floats if it holds at least two strictly increasing inverse temperatures in (0, 1] ending at
    exactly 1; else ``ValueError`` in one line. (A tensor is read to the host once.)"""
    values = betas.detach().double().cpu().tolist() if torch.is_tensor(betas) else list(betas)
    if len(values) < 2:
        raise ValueError(f"{name} must hold at least two inverse temperatures ending at 1, got {values}")
    floats = tuple(check_finite_number(value, f"{name}[{index}]", minimum=0.0, maximum=1.0, exclusive=True)
                   for index, value in enumerate(values))
    if floats[-1] != 1.0 or any(b >= a for a, b in zip(floats[1:], floats[:-1])):
        raise ValueError(f"{name} must increase strictly and end at exactly 1 (the target), got {list(floats)}")
    return floats


def temperature_ladder(num_replicas: int, *, min_beta: float = 0.1, spacing: str = "geometric") -> torch.Tensor:
    """``β_1 = min_beta < … < β_R = 1``, float64 ``[R]``: ``spacing="geometric"`` gives ``β_r = min_beta^((R−r)/(R−1))``
    (a constant ratio between neighbours: equal acceptance where the heat capacity is constant), ``"linear"`` equal steps."""
    if check_positive_int(num_replicas, "num_replicas") < 2:
        raise ValueError(f"num_replicas must be at least 2 (the target and a hotter replica), got {num_replicas}")
    min_beta = check_finite_number(min_beta, "min_beta", minimum=0.0, exclusive=True)
    if min_beta >= 1.0:
        raise ValueError(f"min_beta must lie in (0, 1), got {min_beta}")
    steps = torch.linspace(0.0, 1.0, num_replicas, dtype=torch.float64)
    if spacing == "geometric":
        ladder = min_beta ** (1.0 - steps)
    elif spacing == "linear":
        ladder = min_beta + (1.0 - min_beta) * steps
    else:
        raise ValueError(f"spacing must be 'geometric' or 'linear', got {spacing!r}")
    ladder[-1] = 1.0  # exactly the target whatever the rounding
    return ladder


def adapt_ladder(betas: Sequence[float] | torch.Tensor, acceptance: Sequence[float] | torch.Tensor, *,
                 min_rejection: float = 1e-3) -> torch.Tensor:
    """A ladder with the ends of ``betas [R]`` that would equalise the swap rejection between neighbours, float64 ``[R]``.

    ``acceptance [R − 1]`` is the measured mean swap acceptance of each pair ``(β_i, β_{i+1})``. The cumulative rejection
    ``Λ(β_i) = Σ_{j<i} (1 − a_j)``, interpolated linearly in β, estimates the communication barrier of the ladder; the new
    ``β_k`` are where Λ reaches ``k/(R − 1)`` of its total (Syed, Bouchard-Côté, Deligiannidis & Doucet 2022, §5.2). At
    equal rejection everywhere the ladder stays as it is. Rejections are floored at ``min_rejection`` so that Λ increases
    strictly (pairs that always swap then share their span evenly)."""
    ladder = np.asarray(check_ladder(betas), dtype=np.float64)
    values = acceptance.detach().double().cpu().numpy() if torch.is_tensor(acceptance) else np.asarray(acceptance, dtype=np.float64)
    if values.shape != (ladder.size - 1,) or not np.all(np.isfinite(values)) or np.any((values < 0) | (values > 1)):
        raise ValueError(f"acceptance must hold {ladder.size - 1} rates in [0, 1], one per neighbouring pair, got {values.tolist()}")
    check_finite_number(min_rejection, "min_rejection", minimum=0.0, maximum=1.0, exclusive=True)
    barrier = np.concatenate([[0.0], np.cumsum(np.maximum(1.0 - values, min_rejection))])
    levels = np.linspace(0.0, barrier[-1], ladder.size)
    adapted = np.interp(levels, barrier, ladder)
    adapted[0], adapted[-1] = ladder[0], 1.0
    return torch.from_numpy(adapted)


class TemperingState(NamedTuple):
    """replicas: the inner kernel's state of all ``R · N`` chains, replica-major (rows ``r·N … (r+1)·N − 1`` at ``β_r``,
    β ascending, so the target's replica is last); num_chains: N; swap_round: exchange rounds done (the alternation's
    parity)."""

    replicas: Any
    num_chains: int
    swap_round: int = 0

    @property
    def position(self) -> torch.Tensor:
        """The β = 1 replica's positions ``[N, D]``: the chains as a caller of the kernel sees them."""
        return self.replicas.position[-self.num_chains:]

    @property
    def replica_positions(self) -> torch.Tensor:
        """Every replica's positions ``[R, N, D]``, β ascending (a view)."""
        return self.replicas.position.unflatten(0, (-1, self.num_chains))

    def replica(self, index: int) -> Any:
        """Replica ``index``'s chains (β ascending) as an inner kernel state: rows ``index·N … (index+1)·N − 1``."""
        rows = self.replicas.position.shape[0]
        return take_chains(self.replicas, slice(index * self.num_chains, (index + 1) * self.num_chains), rows)

    def with_replica(self, index: int, replica: Any, mask: torch.Tensor) -> "TemperingState":
        """This state with replica ``index``'s chains replaced by ``replica``'s (an inner kernel state of N chains) where
        ``mask [N]`` (bool) holds: how a move made outside the exchanges (a fresh draw accepted at a level) lands."""
        rows, count = self.replicas.position.shape[0], self.num_chains
        merged = select_chains(mask, replica, self.replica(index), count)
        pieces = [take_chains(self.replicas, slice(0, index * count), rows), merged,
                  take_chains(self.replicas, slice((index + 1) * count, rows), rows)]
        pieces = [piece for piece in pieces if piece.position.shape[0]]
        return self._replace(replicas=_concatenate(pieces, pieces[0].position.shape[0]))


class TemperingInfo(NamedTuple):
    """inner: the inner kernel's info for each replica, β ascending; swap_accept_prob ``[R − 1, N]`` float64: the exchange
    acceptance probability of pair ``(β_i, β_{i+1})`` for each chain, 0 for pairs this step did not propose; attempted
    ``[R − 1]`` bool: the pairs this step proposed; accept_prob ``[N]``: the mean over the proposed pairs; swapped
    ``[R − 1, N]`` bool: the exchanges accepted (which rows traded places: how a caller follows states along the ladder,
    e.g. to count round trips)."""

    inner: tuple
    swap_accept_prob: torch.Tensor
    attempted: torch.Tensor
    accept_prob: torch.Tensor
    swapped: torch.Tensor


def _concatenate(trees: list, rows: int) -> Any:
    """The trees (states of the same structure) stacked along their chains: per-chain tensors (first dimension ``rows``)
    concatenated, other leaves taken from the first where every tree holds the same, ``None`` where they differ: a label
    that describes one replica's rows (the RBM spline path's segment, in which a state's statistics were kept) would
    mislabel the others', so the stack says it has none and the target recomputes what it described."""
    first = trees[0]
    if torch.is_tensor(first):
        return torch.cat(trees) if first.dim() > 0 and first.shape[0] == rows else first
    if isinstance(first, tuple):
        items = [_concatenate(list(parts), rows) for parts in zip(*trees)]
        return type(first)(*items) if hasattr(first, "_fields") else tuple(items)
    return first if all(tree == first for tree in trees[1:]) else None


class ParallelTempering:
    """Replica exchange over a ladder ``β_1 < … < β_R = 1`` around any kernel: one step advances every replica by
    ``kernel`` at its β and then proposes one round of exchanges between neighbours (module docstring).

    The state (:class:`TemperingState`) holds all replicas; its ``position`` is the β = 1 replica, so
    :func:`~pfzoo.kernels.run_chain` and a model's ``sample(kernel=...)`` return the target's chains. ``init`` starts every
    replica at the given positions; :meth:`init_replicas` resumes persistent replicas. Rows are exchanged whole (position,
    the inner kernel's auxiliary variables such as HMC momenta, and the target's statistics), which is right for targets
    whose statistics do not depend on β, as every target offering a tempered log density keeps them.

    At a caller's ``beta`` the replicas run at ``beta · β_r``: the kernel leaves ``p_beta`` invariant on the last replica.
    When the target takes a β per chain (:data:`~pfzoo.kernels.base.CHAIN_BETAS`, e.g. an RBM path's, an RBM's or an Ising model's own
    conditionals) all replicas advance as one ``[R·N, D]`` batch, one inner step per PT step; otherwise (HMC on an energy)
    one inner step per replica. Exchanges cost one ``log_density`` call on the proposed pairs' ``2·P·N`` positions, each
    at its own and its partner's β (for an RBM one product ``vW``, none where the target reads what the inner step kept:
    :data:`~pfzoo.kernels.STATISTICS_LOG_DENSITY`), and no host sync (``swaps="random"`` reads its one draw).

    Args:
        kernel: the inner kernel (BlockGibbs on a bipartite model's own conditionals, ScanGibbs on an Ising model's,
            HMC or Metropolis on an energy target, or a Repeat/Cycle of them).
        betas: the ladder, strictly increasing in (0, 1] and ending at 1 (e.g. :func:`temperature_ladder`); ``step``
            takes ``betas=`` per call to replace it (an adapted ladder, :func:`adapt_ladder`).
        swaps: the pairs each step proposes (:data:`SWAP_SCHEMES`): ``"alternate"`` or ``"random"``; with two replicas
            the one pair at every step.
        batch_replicas: advance the replicas as one batch where the target allows it (the same law either way; False
            serves to measure the batching).
    """

    def __init__(self, kernel: Kernel, betas: Sequence[float] | torch.Tensor, *, swaps: str = "alternate",
                 batch_replicas: bool = True) -> None:
        if not isinstance(kernel, Kernel):
            raise ValueError(f"kernel must be a pfzoo kernel with init, step and needs (pfzoo.kernels), got {type(kernel).__name__}")
        check_choice(swaps, "swaps", SWAP_SCHEMES)
        self.kernel = kernel
        self.betas = check_ladder(betas)
        self.swaps = swaps
        self.batch_replicas = check_bool(batch_replicas, "batch_replicas")
        self.needs = kernel.needs

    @property
    def num_replicas(self) -> int:
        return len(self.betas)

    def check_target(self, target: Target) -> None:
        """``ValueError`` in one line unless ``target`` offers a tempered log density and what the inner kernel needs."""
        offered = target.offers if isinstance(target, Target) else frozenset()
        if TEMPERED_LOG_DENSITY not in offered:
            raise ValueError(f"ParallelTempering needs a target with {TEMPERED_LOG_DENSITY} (log_density(position, *, beta)) to "
                             f"exchange replicas; {type(target).__name__} offers {' and '.join(sorted(offered)) or 'no such declaration'}")
        check_kernel(self.kernel, offered, type(target).__name__)

    def init(self, position: torch.Tensor, target: Any, *, generator: torch.Generator | None = None) -> TemperingState:
        """Every replica at ``position [N, D]``."""
        return self.init_replicas(position.expand(self.num_replicas, *position.shape), target, generator=generator)

    def init_replicas(self, positions: torch.Tensor, target: Any, *, swap_round: int = 0,
                      generator: torch.Generator | None = None) -> TemperingState:
        """Replicas at ``positions [R, N, D]`` (β ascending), after ``swap_round`` exchange rounds (the alternation's parity):
        how persistent chains resume."""
        self.check_target(target)
        if positions.dim() < 2 or positions.shape[0] != self.num_replicas:
            raise ValueError(f"positions must have shape [{self.num_replicas}, N, ...] (one row of chains per replica), got {tuple(positions.shape)}")
        num_chains = positions.shape[1]
        replicas = self.kernel.init(positions.reshape(-1, *positions.shape[2:]), target, generator=generator)
        return TemperingState(replicas, num_chains, swap_round)

    def step(self, state: TemperingState, target: Any, *, beta: float = 1.0, generator: torch.Generator | None = None,
             betas: Sequence[float] | torch.Tensor | None = None, **settings) -> tuple[TemperingState, TemperingInfo]:
        """One inner step of every replica at ``beta · β_r``, then one round of exchanges → ``(state, info)``; ``betas``
        replaces the ladder for this call, ``settings`` go to the inner kernel."""
        self.check_target(target)
        ladder = self.betas if betas is None else check_ladder(betas)
        if len(ladder) != self.num_replicas:
            raise ValueError(f"betas must hold {self.num_replicas} inverse temperatures like the state's replicas, got {len(ladder)}")
        scaled = [level * beta for level in ladder]
        replicas, inner = self._advance(state, target, scaled, generator, settings)
        replicas, swap_info = self._exchange(replicas, target, scaled, state.num_chains, state.swap_round, generator)
        return TemperingState(replicas, state.num_chains, state.swap_round + 1), TemperingInfo(inner, *swap_info)

    def _advance(self, state: TemperingState, target: Any, scaled: list[float], generator, settings) -> tuple[Any, tuple]:
        """Every replica one inner step at its β: as one batch with a ``[R·N, 1]`` β column when the target takes one,
        else replica by replica."""
        count, rows = state.num_chains, self.num_replicas * state.num_chains
        blocks = [slice(r * count, (r + 1) * count) for r in range(self.num_replicas)]
        if self.batch_replicas and CHAIN_BETAS in target.offers:
            position = state.replicas.position
            # fills, not a tensor built from a list: a host-to-device copy would wait for the device's queue
            column = torch.cat([position.new_full((count, 1), level) for level in scaled])
            replicas, info = self.kernel.step(state.replicas, target, beta=column, generator=generator, **settings)
            return replicas, tuple(take_chains(info, block, rows) for block in blocks)
        states, infos = [], []
        for block, level in zip(blocks, scaled):
            replica, info = self.kernel.step(take_chains(state.replicas, block, rows), target, beta=level, generator=generator, **settings)
            states.append(replica)
            infos.append(info)
        return _concatenate(states, count), tuple(infos)

    def _exchange(self, replicas: Any, target: Any, scaled: list[float], count: int, swap_round: int,
                  generator) -> tuple[Any, tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
        """One round of exchange proposals between the neighbour pairs of this round's parity, accepted by the
        Metropolis ratio of the tempered densities; accepted pairs swap their rows."""
        position = replicas.position
        device, num_replicas = position.device, self.num_replicas
        if self.swaps == "alternate":
            parity = swap_round % 2
        else:
            parity = int(randint(2, (1,), generator=generator, device=device).item())
        if num_replicas == 2:
            parity = 0  # the one pair
        lows = torch.arange(parity, num_replicas - 1, 2, device=device)  # [P] the lower replica of each proposed pair
        num_pairs = len(range(parity, num_replicas - 1, 2))
        ladder = torch.cat([torch.full((1,), level, dtype=torch.float64, device=device) for level in scaled])
        low_rows = (lows[:, None] * count + torch.arange(count, device=device)).reshape(-1)  # [P·N]
        high_rows = low_rows + count
        lower, upper = ladder[lows].repeat_interleave(count), ladder[lows + 1].repeat_interleave(count)
        # each state of a pair at its own β and at its partner's, in one call: [2·P·N, 2]
        rows, pair_betas = torch.cat([low_rows, high_rows]), torch.stack([torch.cat([lower, upper]), torch.cat([upper, lower])], 1)
        stats = getattr(replicas, "stats", None)
        if STATISTICS_LOG_DENSITY in target.offers and stats is not None:  # what the inner step kept: no second pass
            log_f = target.log_density(position[rows], beta=pair_betas, stats=take_chains(stats, rows, position.shape[0]))
        else:
            log_f = target.log_density(position[rows], beta=pair_betas)
        (own_low, own_high), (cross_low, cross_high) = log_f[:, 0].view(2, -1), log_f[:, 1].view(2, -1)
        log_ratio = cross_low + cross_high - own_low - own_high
        accept_prob = torch.nan_to_num(torch.exp(torch.clamp(log_ratio, max=0.0)), nan=0.0)  # [P·N]
        accepted = uniform(accept_prob.shape, generator=generator, device=device, dtype=torch.float64) < accept_prob
        order = torch.arange(num_replicas * count, device=device)
        order[low_rows] = torch.where(accepted, high_rows, low_rows)
        order[high_rows] = torch.where(accepted, low_rows, high_rows)
        replicas = take_chains(replicas, order, num_replicas * count)
        per_pair = accept_prob.view(num_pairs, count)
        swap_accept_prob = torch.zeros(num_replicas - 1, count, dtype=torch.float64, device=device).index_copy_(0, lows, per_pair)
        attempted = torch.zeros(num_replicas - 1, dtype=torch.bool, device=device).index_fill_(0, lows, True)
        swapped = torch.zeros(num_replicas - 1, count, dtype=torch.bool, device=device).index_copy_(0, lows, accepted.view(num_pairs, count))
        return replicas, (swap_accept_prob, attempted, per_pair.mean(0), swapped)

    def __repr__(self) -> str:
        ladder = ", ".join(f"{level:.4g}" for level in self.betas)
        return f"ParallelTempering({self.kernel!r}, betas=[{ladder}], swaps={self.swaps!r})"

