"""The one-rank strategy of a run without a process group: every collective is the identity. (Several ranks:
tests/test_distributed.py runs the Trainer under gloo.)"""

import torch

from pfzoo.training.distributed_strategy import DistributedStrategy


def test_without_a_process_group_this_is_rank_0_of_1_and_the_leader():
    ranks = DistributedStrategy()
    assert (ranks.group, ranks.rank, ranks.world_size, ranks.leader) == (False, 0, 1, True)


def test_the_one_rank_trains_on_every_row_at_full_weight():
    ranks = DistributedStrategy()
    rows = torch.tensor([4, 1, 3])
    assert torch.equal(ranks.shard(rows), rows)
    parameter = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    loss = ranks.minibatch_loss(lambda: (parameter * torch.tensor([0.5, 0.25])).sum(), 3, 3, [parameter])
    assert loss.item() == 0.0 and not loss.requires_grad
    assert torch.equal(parameter.grad, torch.tensor([0.5, 0.25]))  # the shard's own gradient, unweighted and unsummed


def test_the_one_rank_agrees_with_itself_and_keeps_no_rank_copies():
    ranks = DistributedStrategy()
    model = torch.nn.Linear(2, 1)
    assert ranks.agree_on_change(True, model) is True and ranks.agree_on_change(False, model) is False
    assert ranks.slowest((1.25, 0.5), torch.device("cpu")) == (1.25, 0.5)
    calls = []
    assert ranks.gather(lambda: calls.append("made")) is None and calls == []
    assert ranks.from_leader(lambda: {"read": 1}) == {"read": 1}


def test_rank_0_samples_from_the_plain_seeded_stream():
    generator = DistributedStrategy().sampling_generator(7, torch.device("cpu"))
    assert torch.equal(torch.rand(4, generator=generator), torch.rand(4, generator=torch.Generator().manual_seed(7)))
