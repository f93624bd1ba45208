"""Generalized score matching for binary data: the loss against its definition through the exact conditionals, the
gradient against finite differences, the consistency of the corrected objective (and the inconsistency of the form
that keeps only 1/q_j in the cross term), and the unbounded loss on data where a unit never flips. Recovery of known
models: test_principle_consistency.py."""

from functools import partial

import pytest
import torch
from factories import all_binary_states, random_hopfield, random_ising, random_rbm

from pfzoo.models import GaussianBernoulliRBM, MissingCapability
from pfzoo.training import GeneralizedScoreMatching

random_ising = partial(random_ising, draw_dtype=None)
random_rbm = partial(random_rbm, draw_dtype=None)
small_models = [partial(random_rbm, 5, 3), partial(random_ising, 6)]


def exact_conditionals(model, data: torch.Tensor) -> torch.Tensor:
    """``q_nj = p(x_nj | x_n,−j)`` from the free energies of each state and its flip, ``[B, D]``."""
    columns = []
    for j in range(data.shape[1]):
        flipped = data.clone()
        flipped[:, j] = 1 - flipped[:, j]
        here, there = -model.free_energy(data), -model.free_energy(flipped)
        columns.append(torch.exp(here - torch.logaddexp(here, there)))
    return torch.stack(columns, 1)


@pytest.mark.parametrize("make", [*small_models, partial(random_hopfield, 6)], ids=["rbm", "ising", "hopfield"])
def test_loss_is_the_corrected_objective_through_the_exact_conditionals(make):
    """``(1/B) Σ_n Σ_j [½ q_nj⁻² − q_nj⁻¹ (1 − q_nj)⁻¹]``."""
    model = make(seed=1)
    data = (torch.rand(15, model.num_visible, generator=torch.Generator().manual_seed(2)) < 0.5).double()
    q = exact_conditionals(model, data)
    definition = (0.5 / q.square() - 1 / (q * (1 - q))).sum(1).mean()
    loss = GeneralizedScoreMatching().loss(model, data)
    assert loss.dtype == torch.float64
    assert loss.item() == pytest.approx(definition.item(), rel=1e-10)


@pytest.mark.parametrize("make", small_models, ids=["rbm", "ising"])
def test_gradient_matches_finite_differences(make):
    model = make(seed=3)
    data = (torch.rand(30, model.num_visible, generator=torch.Generator().manual_seed(4)) < 0.5).double()
    objective = GeneralizedScoreMatching()
    grads = torch.autograd.grad(objective.loss(model, data), list(model.parameters()))
    step = 1e-6
    for parameter, grad in zip(model.parameters(), grads):
        index = (0, parameter.shape[1] - 1) if parameter.dim() == 2 else (parameter.shape[0] - 1,)
        with torch.no_grad():
            parameter[index] += step
            up = objective.loss(model, data).item()
            parameter[index] -= 2 * step
            down = objective.loss(model, data).item()
            parameter[index] += step
        assert grad[index].item() == pytest.approx((up - down) / (2 * step), rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("make", small_models, ids=["rbm", "ising"])
def test_corrected_objective_is_stationary_at_the_generating_model_and_the_uncorrected_one_is_not(make):
    """Under the generating model's own distribution (every state weighted by its exact probability) the expected loss's
    gradient vanishes at that model: the estimator is consistent. Keeping only ``1/q_j`` of the cross term
    (``½ q⁻² − q⁻¹``) moves the stationary point away from it."""
    model = make(seed=5)
    states = all_binary_states(model.num_visible)
    probs = model.log_prob(states).exp().detach()

    def largest_gradient(expected):
        return max(g.abs().max().item() for g in torch.autograd.grad(expected, list(model.parameters())))

    corrected = (probs * GeneralizedScoreMatching().example_losses(model, states)).sum()
    assert largest_gradient(corrected) < 1e-10
    q = torch.sigmoid(model.flip_free_energy_gaps(states))
    uncorrected = (probs * (0.5 / q.square() - 1 / q).sum(1)).sum()
    assert largest_gradient(uncorrected) > 1e-2
    with torch.no_grad():
        next(model.parameters()).add_(0.3)
    assert largest_gradient((probs * GeneralizedScoreMatching().example_losses(model, states)).sum()) > 1e-3


def test_loss_has_no_minimum_when_a_unit_never_flips_in_the_data():
    """A unit that is 0 in every example: lowering its bias lowers the loss without bound (its term −e^g with g the
    free-energy cost of switching it on), as Deep Learning §18.4.1 warns for data whose events mostly never occur."""
    model = random_ising(5, seed=6)
    data = (torch.rand(40, 5, generator=torch.Generator().manual_seed(7)) < 0.5).double()
    data[:, 2] = 0
    losses = []
    for bias in (-5.0, -10.0, -20.0):
        with torch.no_grad():
            model.bias[2] = bias
        losses.append(GeneralizedScoreMatching().loss(model, data).item())
    assert losses[0] > losses[1] > losses[2] and losses[2] < -1e8, losses


def test_non_binary_models_and_batches_are_refused():
    with pytest.raises(MissingCapability, match="GeneralizedScoreMatching needs binary states"):
        GeneralizedScoreMatching().loss(GaussianBernoulliRBM(4, 2), torch.zeros(3, 4))
    with pytest.raises(ValueError, match="batch"):
        GeneralizedScoreMatching().loss(random_ising(4), torch.full((3, 4), 0.5, dtype=torch.float64))
