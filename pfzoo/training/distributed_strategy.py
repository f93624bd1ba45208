"""How the ranks of a training run share its work: who trains on which rows, with which random stream, how their
gradients combine, and which rank writes. A run without a process group is the same strategy with one rank, whose
collectives are all the identity, so the Trainer has one code path.

While a ``torch.distributed`` process group is initialised (``torchrun``, world size R ≥ 1;
:func:`pfzoo.distributed.is_active`), every rank must call ``Trainer.fit`` alike (same model, data and settings). All
ranks draw the same shuffled order (the shuffle stream is seeded alike) and cut each minibatch of ``batch_size`` rows
``[B]`` into R contiguous shards ``[B_r]`` (sizes differ by at most one; :func:`pfzoo.distributed.owned_share`); rank r
evaluates the objective on its shard alone (an epoch-stateful objective gets the shard's row numbers as ``indices``).
Each rank's gradient and loss, weighted by its share ``B_r / B``, are summed over the ranks in one ``all_reduce`` of a
flat buffer per loss evaluation (each closure call of an L-BFGS step included), and the L2 penalty's gradient is added
after it: this is equivalent to DistributedDataParallel's gradient averaging, written out because DDP prepares its
reducer in ``forward`` while objectives call other model methods (``free_energy``, ``energy``, ...). Every rank then
takes the same step, so the parameters (broadcast from rank 0 at the start) stay identical.

What a 2-rank run equals: for deterministic objectives (pseudo-likelihood, bit-flip MPF, exact maximum likelihood) the
updates of one process with the same ``batch_size``, up to the order of floating-point summation; for sampling
objectives (CD, PCD, EM-HMC, persistent MPF) the same algorithm with the same total number of chains (PCD splits its
``num_chains`` across the ranks) on other random streams, so their numbers differ from one process's. Rank r > 0
samples from a generator seeded by (``seed + 1``, r) with :func:`pfzoo.distributed.block_generator`; rank 0 keeps the
stream of a run without a process group, so a 1-rank ``torchrun`` run trains as a plain one, bit for bit. An
epoch-stateful objective prepares the whole training set on every rank with that rank's stream (when any rank reports
a change the optimiser's state is discarded and the model re-broadcast from rank 0, since a prepare that trains, a
DBM's greedy pretraining, drew from each rank's stream). Evaluation runs on every rank alike: estimators shard their
chains, pseudo-likelihood and reconstruction error are computed whole on each rank. Rank 0 alone writes
``metrics.jsonl``, checkpoints and log lines; an epoch's ``seconds`` is the slowest rank's (so the ``max_seconds`` rule
stops every rank at the same epoch). The checkpoint then holds every rank's objective state and sampling stream
(:mod:`pfzoo.training.checkpoints`) and resumes only with the same number of ranks.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar

import torch
from torch import nn

from pfzoo import distributed

T = TypeVar("T")


class DistributedStrategy:
    """This process's part in a training run: its rank among ``world_size`` ranks (0 of 1 without a process group)."""

    def __init__(self) -> None:
        self.group = distributed.is_active()
        self.rank = distributed.rank()
        self.world_size = distributed.world_size()

    @property
    def leader(self) -> bool:
        """Whether this rank writes the run's files and log lines (rank 0; the one rank without a process group)."""
        return self.rank == 0

    def sampling_generator(self, seed: int, device: torch.device) -> torch.Generator:
        """This rank's sampling stream on ``device``: seeded with ``seed`` on rank 0, by (``seed``, rank) through
        :func:`pfzoo.distributed.block_generator` on the others, so persistent chains differ between ranks while a
        1-rank ``torchrun`` run keeps the stream of a plain run."""
        if self.rank == 0:
            return torch.Generator(device).manual_seed(seed)
        return distributed.block_generator(seed, self.rank, device)

    def shard(self, rows: torch.Tensor) -> torch.Tensor:
        """This rank's contiguous part ``[B_r]`` of a minibatch's row numbers ``rows [B]`` (all of them on one rank)."""
        share = distributed.owned_share(rows.shape[0])
        return rows[share.start : share.stop]

    def minibatch_loss(
        self, shard_loss: Callable[[], torch.Tensor], shard_size: int, batch_size: int, parameters: list[nn.Parameter]
    ) -> torch.Tensor:
        """The minibatch's mean loss (a detached scalar), its gradient in the ``.grad`` of ``parameters`` (the model's
        first): this rank's ``shard_loss()``, the mean over its ``shard_size`` rows ``B_r``, weighted by their share
        ``B_r / B`` of the ``batch_size`` rows ``B`` and backpropagated, then summed with the other ranks' (gradients and
        losses in one ``all_reduce``), so the sum is the minibatch mean ``Σ_r B_r/B · mean_r``. A minibatch smaller than
        the world size leaves some ranks without rows: they never call ``shard_loss`` and add no gradient."""
        if shard_size == 0:
            loss = torch.zeros((), dtype=parameters[0].dtype, device=parameters[0].device)
        else:
            loss = shard_loss()
            if self.group:
                loss = loss * (shard_size / batch_size)
            loss.backward()
            loss = loss.detach()
        if not self.group:
            return loss
        return distributed.all_reduce_gradients(parameters, loss, structure_may_differ=batch_size < self.world_size)

    def agree_on_change(self, changed: bool, model: nn.Module) -> bool:
        """Whether any rank's objective changed in its ``prepare``; if so, every rank then holds rank 0's model (a
        prepare that trains, a DBM's greedy pretraining, drew from each rank's own stream). Every rank must clear its
        optimiser alike, or their L-BFGS steps would part."""
        if not self.group:
            return bool(changed)
        changed = distributed.max_over_ranks(float(bool(changed)), model.device) > 0
        if changed:
            distributed.broadcast_module_state(model)
        return changed

    def slowest(self, seconds: Sequence[float], device: torch.device) -> tuple[float, ...]:
        """Each of ``seconds`` (e.g. an epoch's training and evaluation times), the most any rank took: one record for
        all ranks, or the ``max_seconds`` rule could stop some only."""
        if not self.group:
            return tuple(seconds)
        return tuple(distributed.max_over_ranks(value, device) for value in seconds)

    def broadcast_model(self, model: nn.Module) -> None:
        """Copy rank 0's parameters and buffers to every rank, as DDP does at the start: ranks that were initialised
        apart still start from one model."""
        if self.group:
            distributed.broadcast_module_state(model)

    def gather(self, make_item: Callable[[], Any]) -> list[Any] | None:
        """Every rank's picklable ``make_item()`` in rank order, or ``None`` without a process group (which then never
        calls ``make_item``: a plain run keeps no per-rank copies)."""
        return distributed.all_gather(make_item()) if self.group else None

    def from_leader(self, compute: Callable[[], T]) -> T:
        """``compute()`` run on rank 0 alone, its result sent to every rank, so every rank decides alike (and the run
        directory need not be shared); a ``ValueError`` it raises is raised on every rank."""
        if not self.group:
            return compute()
        shared: list[Any] = [None, None]  # [rank 0's result, rank 0's error message]
        if self.leader:
            try:
                shared[0] = compute()
            except ValueError as error:
                shared[1] = str(error)
        distributed.broadcast_from_first(shared)
        if shared[1] is not None:
            raise ValueError(shared[1])
        return shared[0]
