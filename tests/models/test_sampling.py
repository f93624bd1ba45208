"""``sample(n, *, generator)`` of every family returns visible samples ``[n, V]`` from the model's distribution."""

import math

import pytest
import torch
from factories import all_binary_states, random_rbm

from pfzoo.models import DBM, DBN, RBM, GaussianBernoulliRBM, ICA, MeanCovarianceRBM, ProductOfExperts


def test_rbm_gibbs_sampler_matches_enumerated_probabilities():
    rbm = random_rbm(4, 3, seed=0, draw_dtype=None)
    states = all_binary_states(4)
    probs = rbm.log_prob(states).exp()
    samples = rbm.sample(40000, num_steps=30, generator=torch.Generator().manual_seed(1))
    index = (samples * (1 << torch.arange(4))).sum(1).long()
    counts = torch.bincount(index, minlength=16).double()
    expected = probs * samples.shape[0]
    chi_square = ((counts - expected) ** 2 / expected).sum().item()
    assert chi_square < 45.0  # 15 degrees of freedom: P(χ² > 45) ≈ 7e-5
    assert not samples.requires_grad


def test_continuous_hmc_sampler_matches_the_exact_ica_sampler():
    """A complete Laplace POE with Φ = I is ICA with Laplace(0, 1) sources: variance 2, E|x| = 1 per coordinate."""
    filters = torch.eye(3, dtype=torch.float64)
    poe = ProductOfExperts.from_tensors(filters, expert="laplace")
    x = poe.sample(4000, num_steps=200, step_size=0.3, num_leapfrog=8, generator=torch.Generator().manual_seed(2))
    exact = ICA.from_tensors(filters).sample(4000, generator=torch.Generator().manual_seed(3))
    for samples in (x, exact):
        assert samples.var(0).sub(2.0).abs().max().item() < 0.25
        assert samples.abs().mean(0).sub(1.0).abs().max().item() < 0.06


@pytest.mark.parametrize("make", [
    lambda: RBM(6, 3), lambda: GaussianBernoulliRBM(5, num_hidden=3), lambda: DBM([6, 4, 3]), lambda: DBN([6, 4, 3]),
    lambda: ProductOfExperts(4, 6, "student_t"), lambda: MeanCovarianceRBM(4, 4, 4, 4),
], ids=["rbm", "gbrbm", "dbm", "dbn", "poe", "mcrbm"])
def test_every_family_samples_visible_rows_reproducibly(make):
    model = make()
    first = model.sample(5, num_steps=3, generator=torch.Generator().manual_seed(4))
    again = model.sample(5, num_steps=3, generator=torch.Generator().manual_seed(4))
    assert first.shape == (5, model.num_visible) and torch.equal(first, again) and math.isfinite(first.sum().item())


def test_conditional_draws_carry_no_gradient():
    """A draw is data for the next step, never a node of the parameters' graph (it would keep the graph alive and
    leak gradients into whoever trains on it)."""
    g = torch.Generator().manual_seed(0)
    rbm, gbrbm = RBM(6, 4, init_std=0.5, generator=g), GaussianBernoulliRBM(6, 4, init_std=0.5, generator=g)
    dbm = DBM([6, 4, 3], init_std=0.5, generator=g)
    v, h = torch.ones(5, 6), torch.ones(5, 4)
    draws = {
        "RBM.draw_hidden": rbm.draw_hidden(v, generator=g), "RBM.draw_visible": rbm.draw_visible(h, generator=g),
        "GBRBM.draw_hidden": gbrbm.draw_hidden(v, generator=g), "GBRBM.draw_visible": gbrbm.draw_visible(h, generator=g),
        "DBM.draw_odd": dbm.draw_odd(torch.ones(5, dbm.num_even_units), generator=g),
        "DBM.draw_even": dbm.draw_even(torch.ones(5, dbm.num_odd_units), generator=g),
    }
    assert {name: draw.requires_grad for name, draw in draws.items()} == dict.fromkeys(draws, False)
