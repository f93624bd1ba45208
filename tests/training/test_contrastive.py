"""CD-k and PCD-k: their gradients are the analytic contrastive updates, and PCD's chains persist."""

from functools import partial

import pytest
import torch
from factories import random_rbm

from pfzoo.kernels import run_chain
from pfzoo.training import CD, PCD

# This file's RBM: 7 × 5 unless given, drawn in float64.
random_rbm = partial(random_rbm, num_visible=7, num_hidden=5, draw_dtype=None)


def random_batch(rows, width, seed=1):
    return torch.bernoulli(torch.full((rows, width), 0.5, dtype=torch.float64), generator=torch.Generator().manual_seed(seed))


def analytic_gradients(model, data, negatives):
    """Minus the contrastive update: -(⟨v p(h|v)ᵀ⟩_data - ⟨ṽ p(h|ṽ)ᵀ⟩_neg) for W, and likewise for b, c."""
    p_data, p_neg = model.hidden_probs(data), model.hidden_probs(negatives)
    return {
        "weight": -(data.T @ p_data / len(data) - negatives.T @ p_neg / len(negatives)),
        "visible_bias": -(data.mean(0) - negatives.mean(0)),
        "hidden_bias": -(p_data.mean(0) - p_neg.mean(0)),
    }


def gradients_of(loss, model):
    model.zero_grad()
    loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters()}


def assert_gradients_equal(actual, expected):
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], rtol=1e-12, atol=1e-12, msg=name)


@pytest.mark.parametrize("k", [1, 3])
def test_cd_gradient_is_the_cd_k_update(k):
    model, batch = random_rbm(), random_batch(40, 7)
    loss = CD(k=k).loss(model, batch, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        state, _ = run_chain(*model.gibbs_chain(), batch, k, generator=torch.Generator().manual_seed(5))
    assert_gradients_equal(gradients_of(loss, model), analytic_gradients(model, batch, state.visible))


def test_cd_is_reproducible_and_depends_on_the_seed():
    model, batch, cd = random_rbm(), random_batch(40, 7), CD(k=2)
    losses = [cd.loss(model, batch, generator=torch.Generator().manual_seed(s)).item() for s in (0, 0, 1)]
    assert losses[0] == losses[1] != losses[2]


def test_pcd_chains_persist_and_drive_the_gradient():
    model, batch, pcd = random_rbm(), random_batch(40, 7), PCD(k=2, num_chains=30)
    generator = torch.Generator().manual_seed(3)
    pcd.loss(model, batch, generator=generator)
    assert pcd.chains.shape == (30, 7)
    assert torch.equal(pcd.state_dict()["chains"], pcd.chains)
    before = pcd.chains.clone()
    replay = torch.Generator().manual_seed(0)
    replay.set_state(generator.get_state())
    loss = pcd.loss(model, random_batch(40, 7, seed=2), generator=generator)
    with torch.no_grad():
        expected, _ = run_chain(*model.gibbs_chain(), before, 2, generator=replay)
    assert torch.equal(pcd.chains, expected.visible)
    assert_gradients_equal(gradients_of(loss, model), analytic_gradients(model, random_batch(40, 7, seed=2), expected.visible))


def test_pcd_initialises_chains_from_batch_rows():
    model, batch = random_rbm(), random_batch(40, 7)
    pcd = PCD(k=1, num_chains=25)
    generator = torch.Generator().manual_seed(4)
    replay = torch.Generator().manual_seed(4)
    pcd.loss(model, batch, generator=generator)
    initial = batch[torch.randint(40, (25,), generator=replay)]
    with torch.no_grad():
        expected, _ = run_chain(*model.gibbs_chain(), initial, 1, generator=replay)
    assert torch.equal(pcd.chains, expected.visible)


def test_pcd_state_dict_restores_into_a_fresh_objective():
    model, batch = random_rbm(), random_batch(40, 7)
    trained = PCD(k=1, num_chains=30)
    trained.loss(model, batch, generator=torch.Generator().manual_seed(0))
    fresh = PCD(k=1, num_chains=30)
    fresh.load_state_dict(trained.state_dict())
    assert torch.equal(fresh.chains, trained.chains)
    losses = [obj.loss(model, batch, generator=torch.Generator().manual_seed(9)).item() for obj in (trained, fresh)]
    assert losses[0] == losses[1]
    assert torch.equal(fresh.chains, trained.chains)


def test_objectives_validate_their_input():
    model = random_rbm()
    with pytest.raises(ValueError, match="batch must be binary"):
        CD().loss(model, torch.full((4, 7), 0.5, dtype=torch.float64))
    with pytest.raises(ValueError, match="batch must have 7 columns"):
        PCD().loss(model, random_batch(4, 6))
    pcd = PCD(num_chains=5)
    pcd.loss(model, random_batch(4, 7))
    with pytest.raises(ValueError, match="batch must have 7 columns"):
        pcd.loss(random_rbm(num_visible=6), random_batch(4, 6))
    for bad in (dict(k=0), dict(num_chains=0)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            PCD(**bad)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        CD(k=0)
