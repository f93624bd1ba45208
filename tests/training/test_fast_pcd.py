"""Fast PCD: chains run under θ + θ_f, the fast weights follow the closed-form update, the loss is PCD's surrogate in
value and gradient, and with a zero fast learning rate FPCD is PCD exactly."""

import json
from functools import partial

import pytest
import torch
from factories import random_ising, random_rbm

from pfzoo.data import DataSplits
from pfzoo.kernels import run_chain
from pfzoo.models import ICA, RBM, MissingCapability
from pfzoo.training import FPCD, PCD, Trainer

random_rbm = partial(random_rbm, num_visible=7, num_hidden=5, draw_dtype=None)  # float64 weights N(0, 1), biases N(0, 0.5²)


def random_batch(rows, width=7, seed=1):
    return torch.bernoulli(torch.full((rows, width), 0.5, dtype=torch.float64), generator=torch.Generator().manual_seed(seed))


def loss_gradient(model, data, negatives):
    """∂L/∂θ of L = mean F(data) − mean F(negatives) in closed form: −(⟨v p(h|v)ᵀ⟩_data − ⟨ṽ p(h|ṽ)ᵀ⟩_neg) for W, likewise
    for b and c; flattened in ``model.parameters()`` order (weight, visible bias, hidden bias)."""
    p_data, p_neg = model.hidden_probs(data), model.hidden_probs(negatives)
    weight = -(data.T @ p_data / len(data) - negatives.T @ p_neg / len(negatives))
    return torch.cat([weight.reshape(-1), -(data.mean(0) - negatives.mean(0)), -(p_data.mean(0) - p_neg.mean(0))]).detach()


def shifted(model, fast):
    """The RBM with parameters θ + θ_f (``fast`` flat, in ``model.parameters()`` order)."""
    weight, visible, hidden = fast.split([model.weight.numel(), model.num_visible, model.num_hidden])
    return RBM.from_tensors(model.weight.detach() + weight.view_as(model.weight), model.visible_bias.detach() + visible,
                            model.hidden_bias.detach() + hidden)


def test_chains_run_under_the_shifted_parameters_and_fast_weights_follow_the_closed_form():
    model = random_rbm()
    objective = FPCD(k=2, num_chains=30, fast_learning_rate=0.3, fast_decay=0.9)
    generator, replay = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    batches = [random_batch(40, seed=seed) for seed in (1, 2)]
    chains = batches[0][torch.randint(40, (30,), generator=replay)]
    fast = torch.zeros(7 * 5 + 7 + 5, dtype=torch.float64)
    for batch in batches:
        loss = objective.loss(model, batch, generator=generator)
        unshifted = torch.Generator().manual_seed(0)
        unshifted.set_state(replay.get_state())
        with torch.no_grad():
            plain = run_chain(*model.gibbs_chain(), chains, 2, generator=unshifted)[0].position
            chains = run_chain(*shifted(model, fast).gibbs_chain(), chains, 2, generator=replay)[0].position
        assert torch.equal(objective.chains, chains)
        assert torch.equal(chains, plain) == (batch is batches[0])  # the fast weights steer the chains once they moved
        gradient = loss_gradient(model, batch, chains)
        fast = 0.9 * fast - 0.3 * gradient
        torch.testing.assert_close(objective.fast, fast, rtol=1e-12, atol=1e-12)
        # the loss is the surrogate in value and in gradient
        assert loss.item() == pytest.approx((model.free_energy(batch).mean() - model.free_energy(chains).mean()).item(), rel=1e-12)
        model.zero_grad()
        loss.backward()
        torch.testing.assert_close(torch.cat([p.grad.reshape(-1) for p in model.parameters()]), gradient, rtol=1e-12, atol=1e-12)


def data_splits():
    g = torch.Generator().manual_seed(0)
    rates = torch.linspace(0.1, 0.9, 10, dtype=torch.float64)
    return DataSplits("toy", train=torch.bernoulli(rates.expand(200, 10), generator=g), test=torch.bernoulli(rates.expand(40, 10), generator=g))


@pytest.mark.parametrize("family", ["rbm", "ising"])
def test_with_a_zero_fast_learning_rate_fpcd_is_pcd_exactly(tmp_path, family):
    runs = {}
    for name, objective in (("pcd", PCD(k=2, num_chains=20)), ("fpcd", FPCD(k=2, num_chains=20, fast_learning_rate=0.0))):
        model = random_rbm(num_visible=10, num_hidden=4) if family == "rbm" else random_ising(10, scale=0.3, draw_dtype=None)
        decay = 1e-3 if family == "rbm" else 0.0  # the penalty reaches the regular weights only (an Ising model has none named weight)
        trainer = Trainer(objective, partial(torch.optim.SGD, lr=0.1, momentum=0.5), run_dir=tmp_path / name, epochs=2, batch_size=32,
                          weight_decay=decay, progress=False)
        trainer.fit(model, data_splits())
        records = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
        runs[name] = (model, [{k: v for k, v in r.items() if not k.endswith("seconds")} for r in records], objective.chains)
    (pcd, pcd_records, pcd_chains), (fpcd, fpcd_records, fpcd_chains) = runs["pcd"], runs["fpcd"]
    for (name, parameter), other in zip(pcd.named_parameters(), fpcd.parameters()):
        assert torch.equal(parameter, other), name
    assert pcd_records == fpcd_records and torch.equal(pcd_chains, fpcd_chains)


def test_the_objective_state_resumes_bit_for_bit():
    model = random_rbm()
    trained = FPCD(num_chains=10, fast_learning_rate=0.1)
    for seed in range(2):
        trained.loss(model, random_batch(20, seed=seed), generator=torch.Generator().manual_seed(seed))
    fresh = FPCD(num_chains=10, fast_learning_rate=0.1)
    fresh.load_state_dict(trained.state_dict())
    assert torch.equal(fresh.fast, trained.fast) and torch.equal(fresh.chains, trained.chains)
    losses = [objective.loss(model, random_batch(20, seed=7), generator=torch.Generator().manual_seed(4)).item() for objective in (trained, fresh)]
    assert losses[0] == losses[1] and torch.equal(fresh.fast, trained.fast)


def test_bad_settings_and_models_are_refused():
    for bad, match in ((dict(fast_decay=1.0), "fast_decay must lie in"), (dict(fast_learning_rate=-0.1), "fast_learning_rate"),
                       (dict(k=0), "k must be a positive integer")):
        with pytest.raises(ValueError, match=match):
            FPCD(**bad)
    with pytest.raises(MissingCapability, match=r"^FPCD needs a Gibbs chain over its visible units"):
        FPCD().loss(ICA(3), torch.zeros(2, 3))
    objective = FPCD(num_chains=5)
    objective.loss(random_rbm(), random_batch(4))
    with pytest.raises(ValueError, match="the fast weights hold 47"):
        objective.loss(random_rbm(num_hidden=6), random_batch(4))
