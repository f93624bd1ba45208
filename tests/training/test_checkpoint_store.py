"""The Trainer's checkpoint store: trainer state round trips, the resume refusals, stale temporaries."""

import pytest
import torch

from pfzoo.models import RBM
from pfzoo.training import PCD
from pfzoo.training.checkpoints import CheckpointStore, rank_state, restore_generator, restore_trainer_state, trainer_state


def rbm(seed=0):
    return RBM(6, 3, generator=torch.Generator().manual_seed(seed))


def stepped_state(seed, ranks=None):
    """A model, optimiser (with momentum), PCD objective (with chains) and generators after one step, and its trainer state."""
    model, objective = rbm(seed), PCD(k=1, num_chains=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    generators = {"shuffle": torch.Generator().manual_seed(seed), "sampling": torch.Generator().manual_seed(seed + 1)}
    batch = torch.bernoulli(torch.full((5, 6), 0.5), generator=generators["shuffle"])
    objective.loss(model, batch, generator=generators["sampling"]).backward()
    optimizer.step()
    return model, optimizer, objective, generators, trainer_state(3, optimizer, objective, generators, ranks)


def fresh():
    model, objective = rbm(9), PCD(k=1, num_chains=4)
    generators = {"shuffle": torch.Generator(), "sampling": torch.Generator()}
    return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5), objective, generators


def test_a_written_checkpoint_restores_model_optimizer_objective_and_streams(tmp_path):
    store = CheckpointStore(tmp_path)
    assert store.read() is None
    model, optimizer, objective, generators, state = stepped_state(0)
    store.write(model, state, config={"seed": 0, "trainer": {"epochs": 3}})
    checkpoint = store.read()
    assert sorted(checkpoint["trainer_state"]) == ["epoch", "generators", "objective", "optimizer"]  # one rank: no "ranks"
    store.check_resumable(checkpoint, rbm(9), {"seed": 0, "trainer": {"epochs": 7}}, world_size=1)
    restored = fresh()
    assert restore_trainer_state(checkpoint, *restored, rank=0) == 3
    model2, optimizer2, objective2, generators2 = restored
    assert torch.equal(model2.weight, model.weight) and torch.equal(objective2.chains, objective.chains)
    assert torch.equal(optimizer2.state_dict()["state"][0]["momentum_buffer"], optimizer.state_dict()["state"][0]["momentum_buffer"])
    for name in generators:
        assert torch.equal(generators2[name].get_state(), generators[name].get_state())


def test_each_rank_restores_its_own_objective_state_and_sampling_stream(tmp_path):
    ranks = [rank_state(stepped_state(seed)[2], stepped_state(seed)[3]["sampling"]) for seed in (0, 5)]
    model, _, _, _, state = stepped_state(0, ranks=ranks)
    store = CheckpointStore(tmp_path)
    store.write(model, state, config=None)
    checkpoint = store.read()
    with pytest.raises(ValueError, match="trained on 2 rank\\(s\\) but this run has 1"):
        store.check_resumable(checkpoint, rbm(), None, world_size=1)
    store.check_resumable(checkpoint, rbm(), None, world_size=2)
    _, _, objective, generators = restored = fresh()
    restore_trainer_state(checkpoint, *restored, rank=1)
    assert torch.equal(objective.chains, ranks[1]["objective"]["chains"])
    assert torch.equal(generators["sampling"].get_state(), ranks[1]["sampling"])
    assert torch.equal(generators["shuffle"].get_state(), state["generators"]["shuffle"])  # one shuffle stream for all ranks


def test_resume_is_refused_for_another_model_another_config_or_no_trainer_state(tmp_path):
    store = CheckpointStore(tmp_path)
    model, *_, state = stepped_state(0)
    store.write(model, state, config={"seed": 0, "run_dir": "a"})
    checkpoint = store.read()
    with pytest.raises(ValueError, match="cannot resume this run: it holds a 'rbm' model"):
        store.check_resumable(checkpoint, RBM(6, 4), None, world_size=1)
    with pytest.raises(ValueError, match="resume=true refused: .* seed: 0 → 1"):
        store.check_resumable(checkpoint, rbm(), {"seed": 1, "run_dir": "b"}, world_size=1)
    store.check_resumable(checkpoint, rbm(), {"seed": 0, "run_dir": "b"}, world_size=1)  # run_dir may change
    checkpoint["trainer_state"] = None
    with pytest.raises(ValueError, match="trainer state absent"):
        store.check_resumable(checkpoint, rbm(), None, world_size=1)


def test_only_temporaries_of_killed_checkpoint_writes_are_removed(tmp_path):
    stale, other = tmp_path / ".checkpoint.pt.k1ll3d.tmp", tmp_path / ".metrics.jsonl.x.tmp"
    stale.write_bytes(b"half a zip")
    other.write_text("not ours")
    CheckpointStore(tmp_path).remove_stale_temporaries()
    assert not stale.exists() and other.exists()


def test_a_generator_state_from_the_same_device_type_is_restored_exactly():
    saved = torch.Generator().manual_seed(5)
    torch.rand(3, generator=saved)
    restored = torch.Generator().manual_seed(0)
    restore_generator(restored, saved.get_state())
    assert torch.equal(torch.rand(4, generator=restored), torch.rand(4, generator=saved))


def test_a_generator_state_from_another_device_type_reseeds_reproducibly_from_its_hash():
    philox_like = torch.arange(16, dtype=torch.uint8)  # a CUDA generator's state: 16 bytes, not the CPU's 5056
    first, second, other = torch.Generator(), torch.Generator(), torch.Generator()
    restore_generator(first, philox_like)
    restore_generator(second, philox_like.clone())
    restore_generator(other, philox_like.flip(0))
    draws = torch.rand(8, generator=first)
    assert torch.equal(draws, torch.rand(8, generator=second))
    assert not torch.equal(draws, torch.rand(8, generator=other))
