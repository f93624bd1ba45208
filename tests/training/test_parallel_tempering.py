"""PT-SML: its negatives are the β = 1 replica of persistent parallel-tempering chains, its state resumes bit for bit,
the Trainer logs its swap acceptance, its ladder adapts, and it refuses what it cannot train."""

import json
from functools import partial

import pytest
import torch
from factories import random_rbm

from pfzoo.data import DataSplits
from pfzoo.kernels import ParallelTempering
from pfzoo.models import ICA, RBM, MissingCapability
from pfzoo.training import PT, Trainer

random_rbm = partial(random_rbm, num_visible=7, num_hidden=5, draw_dtype=None)  # float64 weights N(0, 1), biases N(0, 0.5²)


def random_batch(rows, width=7, seed=1):
    return torch.bernoulli(torch.full((rows, width), 0.5, dtype=torch.float64), generator=torch.Generator().manual_seed(seed))


def test_negatives_are_the_target_replica_of_persistent_tempering_chains():
    model, batch = random_rbm(), random_batch(40)
    objective = PT(k=3, num_chains=30, num_replicas=4, min_beta=0.3)
    generator, replay = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
    loss = objective.loss(model, batch, generator=generator)

    kernel, target = model.gibbs_chain()
    tempering = ParallelTempering(kernel, objective.betas)
    start = batch[torch.randint(40, (30,), generator=replay)]  # every replica starts at the same rows of the first batch
    state = tempering.init(start, target)
    for _ in range(3):
        state, _ = tempering.step(state, target, generator=replay)
    assert torch.equal(objective.chains, state.replicas.position) and objective.chains.shape == (4 * 30, 7)
    assert int(objective.swap_round) == 3
    model.zero_grad()
    loss.backward()
    negatives = state.position
    p_data, p_neg = model.hidden_probs(batch), model.hidden_probs(negatives)
    torch.testing.assert_close(model.weight.grad, -(batch.T @ p_data / 40 - negatives.T @ p_neg / 30), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(model.visible_bias.grad, -(batch.mean(0) - negatives.mean(0)), rtol=1e-12, atol=1e-12)


def test_the_objective_state_resumes_bit_for_bit():
    model = random_rbm()
    trained = PT(num_chains=10, num_replicas=3, min_beta=0.4)
    generator = torch.Generator().manual_seed(0)
    for seed in range(3):
        trained.loss(model, random_batch(20, seed=seed), generator=generator)
    fresh = PT(num_chains=10, num_replicas=3, min_beta=0.4)
    fresh.load_state_dict(trained.state_dict())
    assert fresh.swap_round.item() == 3 and torch.equal(fresh.chains, trained.chains)
    losses = [objective.loss(model, random_batch(20, seed=9), generator=torch.Generator().manual_seed(5)).item() for objective in (trained, fresh)]
    assert losses[0] == losses[1]
    assert torch.equal(fresh.chains, trained.chains) and torch.equal(fresh.accept_sum, trained.accept_sum)


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(0)
    rates = torch.linspace(0.1, 0.9, 12, dtype=torch.float64)
    return DataSplits("toy", train=torch.bernoulli(rates.expand(300, 12), generator=g), test=torch.bernoulli(rates.expand(50, 12), generator=g))


def trainer(run_dir, epochs, adapt=True):
    objective = PT(num_chains=20, num_replicas=4, min_beta=0.05, adapt_ladder=adapt)
    return Trainer(objective, partial(torch.optim.SGD, lr=0.1, momentum=0.5), run_dir=run_dir, epochs=epochs, batch_size=50, progress=False)


def model(seed=0):
    return RBM(12, 6, init_std=1.0, generator=torch.Generator().manual_seed(seed)).double()


def read_metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_the_trainer_logs_the_swap_acceptance_and_the_ladder_adapts_towards_equal_acceptance(tmp_path, data):
    first = trainer(tmp_path, 1)
    first.fit(model(), data)
    acceptance = first.objective.pair_acceptance()
    record = read_metrics(tmp_path)[0]
    assert 0 <= record["swap_acceptance_min"] <= record["swap_acceptance"] <= 1
    assert record["swap_acceptance"] == pytest.approx(sum(acceptance) / 3) and record["swap_acceptance_min"] == min(acceptance)
    # the geometric ladder from 0.05 is uneven for this model: its acceptance spreads, and adapting narrows the spread
    assert max(acceptance) - min(acceptance) > 0.1
    before = first.objective.betas.clone()
    adapted = trainer(tmp_path / "adapted", 6)
    adapted.fit(model(), data)
    ladder = adapted.objective.betas
    assert ladder[0] == before[0] and ladder[-1] == 1.0 and torch.all(ladder[1:] > ladder[:-1]) and not torch.equal(ladder, before)
    spreads = [record["swap_acceptance"] - record["swap_acceptance_min"] for record in read_metrics(tmp_path / "adapted")]
    assert spreads[-1] < spreads[0] / 2


def test_resumed_training_with_an_adapting_ladder_is_bit_identical_to_training_in_one_go(tmp_path, data):
    one_go = model()
    trainer(tmp_path / "one_go", 3).fit(one_go, data)
    trainer(tmp_path / "resumed", 2).fit(model(), data)
    resumed = model(seed=1)  # everything must come from the checkpoint
    second = trainer(tmp_path / "resumed", 3)
    second.fit(resumed, data, resume=True)
    assert torch.equal(resumed.weight, one_go.weight)
    without_seconds = lambda records: [{k: v for k, v in r.items() if not k.endswith("seconds")} for r in records]
    assert without_seconds(read_metrics(tmp_path / "resumed")) == without_seconds(read_metrics(tmp_path / "one_go"))
    assert second.objective._ladder == tuple(second.objective.betas.tolist())


def test_models_without_a_gibbs_chain_are_refused_in_one_line():
    with pytest.raises(MissingCapability, match=r"^PT needs a Gibbs chain over its visible units .*; ICA is an energy over real vectors") as error:
        PT().check(ICA(4))
    assert "\n" not in str(error.value) and "trainer=" in str(error.value)
    for bad, match in ((dict(betas=[0.5, 0.9]), "betas must increase strictly and end at exactly 1"), (dict(num_replicas=1), "num_replicas"),
                       (dict(swaps="all"), "swaps"), (dict(adapt_ladder="yes"), "adapt_ladder"), (dict(min_beta=0.0), "min_beta")):
        with pytest.raises(ValueError, match=match):
            PT(**bad)
    assert PT(betas=[0.2, 1.0], num_replicas=10).num_replicas == 2  # an explicit ladder sets R
