"""Naive MCMC (Algorithm 18.1): with a long burn-in its gradient is the exact log-likelihood gradient within its Monte
Carlo error (enumeration), with too short a one it is not; fresh starts and refusals."""

from functools import partial

import pytest
import torch
from factories import all_binary_states, random_gbrbm, random_rbm

from pfzoo.models import ICA, MissingCapability
from pfzoo.training import NaiveMCMC

random_rbm = partial(random_rbm, num_visible=5, num_hidden=3, scale=1.5, seed=2, draw_dtype=None)
NUM_CHAINS = 20_000


def per_state_free_energy_gradients(model, v):
    """``∂F(v)/∂θ`` for each row of ``v [N, V]`` → ``[N, P]``: ``−v σ(vW + c)ᵀ`` for W, ``−v`` for b, ``−σ(vW + c)`` for c."""
    p = model.hidden_probs(v).detach()
    return torch.cat([-(v[:, :, None] * p[:, None, :]).flatten(1), -v, -p], 1)


def z_scores(burn_in, seed=0):
    """(estimated − exact) gradient over its standard error, per parameter: the exact gradient is
    ``∂ mean F(data)/∂θ − E_p[∂F/∂θ]`` and the estimate's error ``std_p(∂F/∂θ) / √C`` for C independent negatives."""
    model = random_rbm()
    batch = all_binary_states(5)[torch.randint(32, (50,), generator=torch.Generator().manual_seed(9))]
    loss = NaiveMCMC(burn_in=burn_in, num_chains=NUM_CHAINS).loss(model, batch, generator=torch.Generator().manual_seed(seed))
    model.zero_grad()
    loss.backward()
    estimate = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    states = all_binary_states(5)
    p = torch.softmax(-model.free_energy(states).detach(), 0)
    per_state = per_state_free_energy_gradients(model, states)
    mean = p @ per_state
    std = (p @ (per_state - mean) ** 2).sqrt()
    exact = per_state_free_energy_gradients(model, batch).mean(0) - mean
    return (estimate - exact) / (std / NUM_CHAINS**0.5)


def test_with_a_long_burn_in_the_gradient_is_the_exact_log_likelihood_gradient_within_its_monte_carlo_error():
    z = z_scores(burn_in=50)
    assert z.abs().max() < 4.5  # 23 parameters; a correct sampler exceeds this with probability about 1e-4
    assert z.pow(2).mean() < 2.5  # and their spread is the standard error's


def test_with_too_short_a_burn_in_it_is_not():
    assert z_scores(burn_in=1).abs().max() > 10  # the test above has power


def test_fresh_starts_are_uniform_or_match_the_minibatch_marginals():
    g = torch.Generator().manual_seed(1)
    batch = torch.bernoulli(torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64).expand(400, 3), generator=g)
    binary = random_rbm(num_visible=3)
    marginals = NaiveMCMC(start="marginals").fresh_chains(binary, batch, 40_000, generator=g)
    torch.testing.assert_close(marginals.mean(0), (batch.sum(0) + 1) / 402, atol=0.01, rtol=0)
    uniform = NaiveMCMC().fresh_chains(binary, batch, 40_000, generator=g)
    torch.testing.assert_close(uniform.mean(0), torch.full((3,), 0.5, dtype=torch.float64), atol=0.01, rtol=0)
    real = torch.randn(400, 3, generator=g, dtype=torch.float64) * torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64) + 3
    gaussian = NaiveMCMC(start="marginals").fresh_chains(random_gbrbm(3, 2), real, 40_000, generator=g)
    torch.testing.assert_close(gaussian.mean(0), real.mean(0), atol=0.05, rtol=0)
    torch.testing.assert_close(gaussian.std(0), real.std(0), atol=0.05, rtol=0)
    standard = NaiveMCMC().fresh_chains(random_gbrbm(3, 2), real, 40_000, generator=g)
    torch.testing.assert_close(standard.std(0), torch.ones(3, dtype=torch.float64), atol=0.03, rtol=0)


def test_the_same_seed_gives_the_same_loss_and_bad_settings_are_refused():
    model, batch = random_rbm(), all_binary_states(5)
    losses = [NaiveMCMC(burn_in=3, num_chains=50).loss(model, batch, generator=torch.Generator().manual_seed(s)).item() for s in (0, 0, 1)]
    assert losses[0] == losses[1] != losses[2]
    for bad, match in ((dict(burn_in=0), "burn_in"), (dict(num_chains=0), "num_chains"), (dict(start="data"), "start must be one of")):
        with pytest.raises(ValueError, match=match):
            NaiveMCMC(**bad)
    with pytest.raises(MissingCapability, match=r"^NaiveMCMC needs a Gibbs chain over its visible units"):
        NaiveMCMC().loss(ICA(3), torch.zeros(2, 3))
