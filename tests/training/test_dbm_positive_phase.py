"""The DBM objectives' sampled positive phase (``positive_sweeps``): clamped Gibbs statistics of p(h | v) against
enumeration, and the objectives' wiring of them."""

import pytest
import torch
from factories import all_binary_states, random_dbm

from pfzoo.training import DBMParallelTempering, DBMPersistentMeanField
from pfzoo.training.dbm import clamped_posterior_layers

ROWS = 4000


def exact_pair_statistics(model, v):
    """``E[x_i x_{i+1}ᵀ | v]`` for every neighbouring pair, by enumerating the hidden layers of one visible state ``v [V]``."""
    hidden = all_binary_states(sum(model.layer_sizes[1:]))
    layers = [v.expand(hidden.shape[0], -1), *torch.split(hidden, model.layer_sizes[1:], dim=1)]
    with torch.no_grad():
        posterior = torch.softmax(-model.energy(*layers), dim=0)
    return [torch.einsum("s,si,sj->ij", posterior, lower, upper) for lower, upper in zip(layers[:-1], layers[1:])]


def sampled_pair_products(layers):
    """Per-row outer products ``[B, n_i, n_{i+1}]`` of every neighbouring pair."""
    return [lower[:, :, None] * upper[:, None, :] for lower, upper in zip(layers[:-1], layers[1:])]


@pytest.mark.parametrize("sizes, seed", [([5, 4, 3], 0), ([4, 3, 3, 2], 1)])
def test_clamped_sweeps_give_the_posteriors_pair_statistics_where_mean_field_does_not(sizes, seed):
    """Each row's statistic is an unbiased draw for the chain's law, so the mean over 4,000 rows lies within 5 standard
    errors of the exact posterior value (about 1e-5 false failures over the 18–24 entries); the mean-field product
    misses it by more, so the comparison can fail."""
    model = random_dbm(sizes, scale=1.5, seed=seed)
    v = torch.bernoulli(torch.full((sizes[0],), 0.5, dtype=torch.float64), generator=torch.Generator().manual_seed(seed))
    batch = v.expand(ROWS, -1).clone()
    with torch.no_grad():
        means = model.mean_field(batch, num_iterations=50)
        hidden = clamped_posterior_layers(model, model.even_odd_rbm(), batch, means, 20, torch.Generator().manual_seed(7))
    assert all(h.shape == m.shape for h, m in zip(hidden, means))
    exact = exact_pair_statistics(model, v)
    mean_field_error = 0.0
    for product, truth, (lower, upper) in zip(sampled_pair_products([batch, *hidden]), exact,
                                              zip([v, *[m[0] for m in means[:-1]]], [m[0] for m in means])):
        stderr = product.std(0) / ROWS**0.5
        assert ((product.mean(0) - truth).abs() <= 5 * stderr + 1e-12).all(), (product.mean(0) - truth) / stderr
        mean_field_error = max(mean_field_error, float(((torch.outer(lower, upper) - truth).abs() / (stderr + 1e-12)).max()))
    assert mean_field_error > 5


def test_no_sweeps_is_the_mean_field_positive_phase():
    model = random_dbm([5, 4, 3])
    batch = torch.bernoulli(torch.full((8, 5), 0.5, dtype=torch.float64), generator=torch.Generator().manual_seed(0))
    means = model.mean_field(batch)
    assert clamped_posterior_layers(model, model.even_odd_rbm(), batch, means, 0, None) is means


@pytest.mark.parametrize("objective_type", [DBMPersistentMeanField, DBMParallelTempering])
def test_objectives_take_their_positive_statistics_from_the_clamped_chain(objective_type):
    """With ``positive_sweeps`` the gradient differs from the mean-field objective's (same particles, same stream up to
    there) by exactly the mean-field statistics minus those of the clamped chain replayed on the stream that follows."""
    model = random_dbm([5, 4, 3], seed=2)
    batch = torch.bernoulli(torch.full((30, 5), 0.5, dtype=torch.float64), generator=torch.Generator().manual_seed(1))
    settings = dict(k=2, num_chains=10, mean_field_iterations=10)
    sampled, plain = objective_type(**settings, positive_sweeps=3), objective_type(**settings)
    gradients = []
    replay = torch.Generator().manual_seed(4)
    for objective, generator in ((sampled, torch.Generator().manual_seed(4)), (plain, replay)):
        model.zero_grad()
        objective.loss(model, batch, generator=generator).backward()
        gradients.append([w.grad.clone() for w in model.weights])
    assert torch.equal(sampled.chains, plain.chains)
    with torch.no_grad():
        means = model.mean_field(batch, num_iterations=10)
        hidden = clamped_posterior_layers(model, model.even_odd_rbm(), batch, means, 3, replay)
    for i, (with_sweeps, without) in enumerate(zip(*gradients)):
        sampled_layers, mean_field_layers = [batch, *hidden], [batch, *means]
        expected = -(sampled_layers[i].T @ sampled_layers[i + 1] - mean_field_layers[i].T @ mean_field_layers[i + 1]) / 30
        torch.testing.assert_close(with_sweeps - without, expected, rtol=1e-9, atol=1e-12)
    assert "positive_sweeps=3" in repr(sampled)
    with pytest.raises(ValueError, match="positive_sweeps"):
        objective_type(positive_sweeps=-1)
