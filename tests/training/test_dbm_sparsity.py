"""The sparsity target of DBM training (pfzoo.training.sparsity; Hinton's practical guide §11)."""

import functools

import pytest
import torch
from factories import random_dbm
from hydra.utils import instantiate

from pfzoo.cli import compose
from pfzoo.data import DataSplits
from pfzoo.models import DBM
from pfzoo.training import DBMParallelTempering, DBMPersistentMeanField, Trainer
from pfzoo.training.sparsity import damped_activity, sparsity_surrogate

random_dbm = functools.partial(random_dbm, draw_dtype=None)


def random_batch(rows, width, seed=1):
    return torch.bernoulli(torch.full((rows, width), 0.5, dtype=torch.float64), generator=torch.Generator().manual_seed(seed))


def gradient(parameter):
    """The parameter's ``.grad``, zeros where the loss did not depend on it."""
    return torch.zeros_like(parameter) if parameter.grad is None else parameter.grad


@pytest.mark.parametrize("targets", [[0.2, None, 0.1], [None, 0.3, None], [0.1, 0.1, 0.1]])
def test_the_surrogates_gradient_is_the_guides_update_on_biases_and_both_neighbours_weights(targets):
    model = random_dbm([6, 5, 4, 3], seed=4)
    batch = random_batch(30, 6)
    means = model.mean_field(batch)
    activity = torch.rand(5 + 4 + 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    cost = 0.7
    model.zero_grad()
    sparsity_surrogate(model, batch, means, activity, targets, cost).backward()

    layers = [batch, *means]
    per_unit = [
        torch.zeros(size, dtype=torch.float64) if target is None else cost * (q_hat - target)
        for target, q_hat, size in zip(targets, activity.split([5, 4, 3]), [5, 4, 3])
    ]
    steps = [torch.zeros(6, dtype=torch.float64), *per_unit]  # d(penalty)/d(total input), per layer; v is free
    for l, bias in enumerate(model.biases):
        torch.testing.assert_close(gradient(bias), steps[l])
    for l, weight in enumerate(model.weights):  # W_l joins layers l and l + 1: an input of both
        expected = torch.outer(layers[l].mean(0), steps[l + 1]) + torch.outer(steps[l], layers[l + 1].mean(0))
        torch.testing.assert_close(gradient(weight), expected)


def test_the_activity_estimate_starts_at_the_first_batch_and_is_damped_after():
    first = [torch.tensor([[0.0, 1.0], [1.0, 1.0]]), torch.tensor([[0.2], [0.4]])]
    second = [torch.tensor([[1.0, 0.0], [1.0, 0.0]]), torch.tensor([[1.0], [1.0]])]
    estimate = damped_activity(torch.empty(0), first, 0.9)
    torch.testing.assert_close(estimate, torch.tensor([0.5, 1.0, 0.3]))
    torch.testing.assert_close(damped_activity(estimate, second, 0.9), 0.9 * torch.tensor([0.5, 1.0, 0.3]) + 0.1 * torch.tensor([1.0, 0.0, 1.0]))


def dead_top_dbm():
    """A DBM [12, 6, 6] whose top layer is off for every input (biases −5): the state the target is meant to revive."""
    model = DBM([12, 6, 6], init_std=0.1, generator=torch.Generator().manual_seed(0)).double()
    with torch.no_grad():
        model.biases[2].fill_(-5.0)
    return model


def train(model, objective, data, steps=1000, lr=0.1):
    generator = torch.Generator().manual_seed(1)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for step in range(steps):
        optimizer.zero_grad()
        rows = data[step % 10 * 20 : step % 10 * 20 + 20]
        objective.loss(model, rows, generator=generator).backward()
        optimizer.step()
    return model


def top_activity(model, data):
    return model.mean_field(data)[-1].mean().item()


def test_the_parallel_tempering_objective_takes_the_same_target():
    data = random_batch(200, 12, seed=5)
    revived = train(dead_top_dbm(), DBMParallelTempering(k=1, num_chains=10, num_replicas=3, sparsity_target=[None, 0.2], sparsity_cost=1.0), data)
    assert abs(top_activity(revived, data) - 0.2) < 0.05


def test_a_target_on_the_top_layer_revives_a_dead_one_and_pulls_an_overactive_one_down():
    data = random_batch(200, 12, seed=5)
    plain = train(dead_top_dbm(), DBMPersistentMeanField(k=1, num_chains=20), data)
    revived = train(dead_top_dbm(), DBMPersistentMeanField(k=1, num_chains=20, sparsity_target=[None, 0.2], sparsity_cost=1.0), data)
    assert top_activity(plain, data) < 0.05
    assert abs(top_activity(revived, data) - 0.2) < 0.05

    overactive = dead_top_dbm()
    with torch.no_grad():
        overactive.biases[2].fill_(5.0)
    lowered = train(overactive, DBMPersistentMeanField(k=1, num_chains=20, sparsity_target=[None, 0.2], sparsity_cost=1.0), data)
    assert abs(top_activity(lowered, data) - 0.2) < 0.05


def test_the_activity_is_checkpointed_and_a_resumed_run_continues_identically(tmp_path):
    toy = DataSplits("toy", train=random_batch(200, 12, seed=6).float(), test=random_batch(50, 12, seed=7).float())

    def trainer(run_dir, epochs):
        objective = DBMPersistentMeanField(k=1, num_chains=20, sparsity_target=0.2)
        return Trainer(objective, functools.partial(torch.optim.SGD, lr=0.05, momentum=0.5), run_dir=run_dir, epochs=epochs, batch_size=50, progress=False)

    one_go = DBM([12, 6, 4], generator=torch.Generator().manual_seed(0))
    trainer(tmp_path / "one_go", 3).fit(one_go, toy)
    trainer(tmp_path / "resumed", 2).fit(DBM([12, 6, 4], generator=torch.Generator().manual_seed(0)), toy)
    resumed = DBM([12, 6, 4], generator=torch.Generator().manual_seed(1))
    second = trainer(tmp_path / "resumed", 3)
    second.fit(resumed, toy, resume=True)
    assert second.objective.sparsity.activity.shape == (6 + 4,)
    for name, parameter in one_go.named_parameters():
        assert torch.equal(parameter, dict(resumed.named_parameters())[name]), name


@pytest.mark.parametrize("objective_class", [DBMPersistentMeanField, functools.partial(DBMParallelTempering, num_replicas=2)])
def test_a_plain_objective_refuses_a_checkpoint_with_an_activity_and_a_sparse_one_loads_it(objective_class):
    model, data = random_dbm([6, 4, 3]), random_batch(20, 6)
    sparse = objective_class(num_chains=5, sparsity_target=0.1)
    sparse.loss(model, data, generator=torch.Generator().manual_seed(0))
    with pytest.raises(RuntimeError, match="sparsity.activity"):
        objective_class(num_chains=5).load_state_dict(sparse.state_dict())
    restored = objective_class(num_chains=5, sparsity_target=0.1)
    restored.load_state_dict(sparse.state_dict())
    assert torch.equal(restored.sparsity.activity, sparse.sparsity.activity)
    plain = objective_class(num_chains=5)
    plain.loss(model, data, generator=torch.Generator().manual_seed(0))
    objective_class(num_chains=5).load_state_dict(plain.state_dict())


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(sparsity_target=0.0), "sparsity_target must be a mean activity in"),
        (dict(sparsity_target=1.0), "sparsity_target must be a mean activity in"),
        (dict(sparsity_target=[0.1, 2.0]), r"sparsity_target\[1\]"),
        (dict(sparsity_target=[None, None]), "at least one hidden layer"),
        (dict(sparsity_target="0.1"), "sparsity_target must be None, a number"),
        (dict(sparsity_target=[]), "sparsity_target must be None, a number"),
        (dict(sparsity_target=0.1, sparsity_cost=-1.0), "sparsity_cost"),
        (dict(sparsity_target=0.1, sparsity_damping=1.0), "sparsity_damping"),
        (dict(sparsity_target=0.1, sparsity_damping=float("nan")), "sparsity_damping"),
    ],
)
@pytest.mark.parametrize("objective_class", [DBMPersistentMeanField, DBMParallelTempering])
def test_sparsity_arguments_are_validated_in_one_line(bad, match, objective_class):
    with pytest.raises(ValueError, match=match) as error:
        objective_class(**bad)
    assert "\n" not in str(error.value)


def test_the_unused_settings_are_checked_too():
    with pytest.raises(ValueError, match="sparsity_damping"):
        DBMPersistentMeanField(sparsity_damping=2.0)


def test_a_target_list_must_have_one_entry_per_hidden_layer():
    objective = DBMPersistentMeanField(num_chains=5, sparsity_target=[0.1])
    with pytest.raises(ValueError, match="sparsity_target has 1 entries but the DBM has 2 hidden layers"):
        objective.loss(random_dbm([6, 4, 3]), random_batch(10, 6), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("trainer", ["dbm_pcd", "dbm_pt"])
def test_the_configs_take_a_per_layer_target(trainer):
    cfg = compose("train", [f"trainer={trainer}", "trainer.objective.sparsity_target=[null,0.1]", "trainer.objective.sparsity_cost=0.5"])
    objective = instantiate(cfg.trainer, run_dir="unused", progress=False).objective
    assert objective.sparsity.target == (None, 0.1) and objective.sparsity.cost == 0.5 and objective.sparsity.damping == 0.9
    assert instantiate(compose("train", [f"trainer={trainer}"]).trainer, run_dir="unused", progress=False).objective.sparsity is None


@pytest.mark.parametrize("trainer", ["dbm_pcd", "dbm_pt"])
def test_a_run_started_before_the_sparsity_settings_and_positive_sweeps_existed_still_resumes(trainer):
    from omegaconf import OmegaConf

    from pfzoo.training.checkpoints import config_differences

    current = OmegaConf.to_container(compose("train", [f"trainer={trainer}"]), resolve=True)
    stored = OmegaConf.to_container(compose("train", [f"trainer={trainer}"]), resolve=True)
    for key in ("sparsity_target", "sparsity_cost", "sparsity_damping", "positive_sweeps"):
        del stored["trainer"]["objective"][key]
    assert config_differences(stored, current) == []
    sampled = OmegaConf.to_container(compose("train", [f"trainer={trainer}", "trainer.objective.positive_sweeps=5"]), resolve=True)
    assert config_differences(stored, sampled) == ["trainer.objective.positive_sweeps: '<absent>' → 5"]
    objective = instantiate(compose("train", [f"trainer={trainer}", "trainer.objective.sparsity_target=0.1"]).trainer, run_dir="unused",
                            progress=False).objective
    assert (objective.sparsity.cost, objective.sparsity.damping) == (0.1, 0.9)  # null in the config: the defaults
