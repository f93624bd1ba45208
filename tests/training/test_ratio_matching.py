"""Ratio matching (Deep Learning eq. 18.26) and its importance-sampled form: the loss against the definition evaluated
flip by flip, gradients against finite differences, stationarity of the expected loss at the generating model,
unbiasedness of the sampled form, and the refusals. Recovery of known models: test_principle_consistency.py."""

import math
from functools import partial

import pytest
import torch
from factories import all_binary_states, random_hopfield, random_ising, random_rbm
from torch import nn

from pfzoo.models import EnergyFunction, GaussianBernoulliRBM, MissingCapability
from pfzoo.training import RatioMatching
from pfzoo.training.ratio_matching import importance_sampled_units

random_ising = partial(random_ising, draw_dtype=None)
random_rbm = partial(random_rbm, draw_dtype=None)


class QuadraticEnergy(nn.Module):
    """A user's binary energy ``E(x) = -½ xᵀJx - b·x`` (J symmetric, zero diagonal), as an ``nn.Module``."""

    def __init__(self, coupling: torch.Tensor, bias: torch.Tensor) -> None:
        super().__init__()
        self.coupling, self.bias = nn.Parameter(coupling.clone()), nn.Parameter(bias.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return -0.5 * ((x @ self.coupling) * x).sum(-1) - x @ self.bias


def user_energy(seed: int = 0) -> EnergyFunction:
    ising = random_ising(6, seed=seed)
    return EnergyFunction(QuadraticEnergy(ising.symmetric_coupling.detach(), ising.bias.detach()), 6, binary=True)


def exact_samples(model, num_samples: int, seed: int) -> torch.Tensor:
    states = all_binary_states(model.num_visible)
    probs = model.log_prob(states).exp()
    return states[torch.multinomial(probs, num_samples, replacement=True, generator=torch.Generator().manual_seed(seed))]


def brute_force_ratio_matching(model, data: torch.Tensor) -> torch.Tensor:
    """Eq. 18.26 flip by flip: ``(1/B) Σ_n Σ_j (1 / (1 + p̃(x_n) / p̃(f(x_n, j))))²`` with ``p̃ = exp(-F)``."""
    total = torch.zeros((), dtype=torch.float64)
    for x in data:
        unnormalised = torch.exp(-model.free_energy(x[None]).double())
        for j in range(data.shape[1]):
            flipped = x.clone()
            flipped[j] = 1 - flipped[j]
            ratio = unnormalised / torch.exp(-model.free_energy(flipped[None]).double())
            total = total + (1 / (1 + ratio)).square().squeeze()
    return total / data.shape[0]


@pytest.mark.parametrize("make", [partial(random_rbm, 5, 3), partial(random_ising, 6), partial(random_hopfield, 6), user_energy],
                         ids=["rbm", "ising", "hopfield", "user_energy"])
def test_loss_is_equation_18_26_evaluated_flip_by_flip(make):
    model = make(seed=1)
    data = (torch.rand(12, model.num_visible, generator=torch.Generator().manual_seed(2)) < 0.4).double()
    loss = RatioMatching().loss(model, data)
    assert loss.item() == pytest.approx(brute_force_ratio_matching(model, data).item(), rel=1e-12)
    # the term is (1 − p(x_j | x_−j))²: the squared probability of unit j's other value
    assert 0 < loss.item() < model.num_visible


def test_a_users_binary_energy_gives_the_ising_models_loss():
    energy = user_energy(seed=3)
    ising = random_ising(6, seed=3)
    data = exact_samples(ising, 30, seed=4)
    torch.testing.assert_close(RatioMatching().loss(energy, data), RatioMatching().loss(ising, data))


@pytest.mark.parametrize("objective", [RatioMatching(), RatioMatching(num_units=3, nonzero_share=0.5)], ids=["full", "sampled"])
@pytest.mark.parametrize("make", [partial(random_rbm, 5, 3), partial(random_ising, 6)], ids=["rbm", "ising"])
def test_gradient_matches_finite_differences(objective, make):
    model = make(seed=5)
    data = exact_samples(model, 40, seed=6)
    seed = 7
    loss = objective.loss(model, data, generator=torch.Generator().manual_seed(seed))
    grads = torch.autograd.grad(loss, list(model.parameters()))
    step = 1e-6
    for parameter, grad in zip(model.parameters(), grads):
        index = (0, parameter.shape[1] - 1) if parameter.dim() == 2 else (parameter.shape[0] - 1,)
        with torch.no_grad():
            parameter[index] += step
            up = objective.loss(model, data, generator=torch.Generator().manual_seed(seed)).item()
            parameter[index] -= 2 * step
            down = objective.loss(model, data, generator=torch.Generator().manual_seed(seed)).item()
            parameter[index] += step
        assert grad[index].item() == pytest.approx((up - down) / (2 * step), rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("make", [partial(random_rbm, 5, 3), partial(random_ising, 6)], ids=["rbm", "ising"])
def test_generating_model_is_a_stationary_point_of_the_expected_loss(make):
    """Weighting every state by its exact probability, the expected loss's gradient vanishes at the generating model
    (ratio matching is consistent) and not at a perturbed one."""
    model = make(seed=8)
    states = all_binary_states(model.num_visible)
    probs = model.log_prob(states).exp().detach()

    def expected_gradient():
        expected = (probs * RatioMatching().example_losses(model, states)).sum()
        return max(g.abs().max().item() for g in torch.autograd.grad(expected, list(model.parameters())))

    assert expected_gradient() < 1e-12
    with torch.no_grad():
        next(model.parameters()).add_(0.3)
    assert expected_gradient() > 1e-3


@pytest.mark.parametrize("nonzero_share", [None, 0.5, 0.9])
def test_importance_sampled_loss_is_unbiased_for_every_row(nonzero_share):
    """Sparse rows, an all-zero and an all-one row: the mean of many sampled per-row losses is within 4 standard errors
    of the full per-row loss (the Hansen–Hurwitz weights 1/(k q))."""
    model = random_rbm(10, 4, seed=9)
    data = torch.zeros(5, 10, dtype=torch.float64)
    data[0, [1, 7]] = 1
    data[1, 4] = 1
    data[2, :6] = 1
    data[4] = 1  # row 3 stays all zeros
    full = RatioMatching().example_losses(model, data)
    sampled = RatioMatching(num_units=3, nonzero_share=nonzero_share)
    g = torch.Generator().manual_seed(10)
    draws = torch.stack([sampled.example_losses(model, data, generator=g) for _ in range(4000)])
    stderr = draws.std(0) / math.sqrt(draws.shape[0])
    assert ((draws.mean(0) - full).abs() < 4 * stderr).all(), (draws.mean(0), full, stderr)
    # a wrong weight would show: doubling every weight moves the mean far outside the band
    assert ((2 * draws.mean(0) - full).abs() > 4 * stderr).all()


def test_nonzero_share_sets_the_fraction_of_draws_on_the_ones():
    batch = torch.zeros(3, 50, dtype=torch.float64)
    batch[0, :2] = 1
    batch[1, 10:35] = 1
    batch[2] = 1  # all ones: drawn uniformly
    g = torch.Generator().manual_seed(11)
    units, weights = importance_sampled_units(batch, 20000, 0.5, generator=g)
    on_ones = batch.gather(1, units).mean(1)
    assert on_ones[0].item() == pytest.approx(0.5, abs=0.015) and on_ones[1].item() == pytest.approx(0.5, abs=0.015)
    # row 0 draws each of its two ones with probability ¼ and each of its 48 zeros with 1/96: weights 1/(k q)
    torch.testing.assert_close(weights[0], torch.where(batch[0].gather(0, units[0]) == 1, 4.0, 96.0).double() / 20000)
    torch.testing.assert_close(weights[2], torch.full((20000,), 50 / 20000, dtype=torch.float64))
    counts = torch.bincount(units[2], minlength=50).double()
    assert counts.min() > 0.8 * 400 and counts.max() < 1.2 * 400  # uniform: 400 expected per unit
    uniform_units, uniform_weights = importance_sampled_units(batch, 7, None, generator=g)
    assert uniform_units.shape == (3, 7) and torch.all(uniform_weights == 50 / 7)


def test_same_seed_same_sampled_loss():
    model = random_ising(6, seed=12)
    data = exact_samples(model, 20, seed=13)
    objective = RatioMatching(num_units=2, nonzero_share=0.3)
    first, second = (objective.loss(model, data, generator=torch.Generator().manual_seed(14)) for _ in range(2))
    assert torch.equal(first, second)


def test_bad_arguments_and_models_are_refused_in_one_line():
    with pytest.raises(ValueError, match="num_units"):
        RatioMatching(num_units=0)
    with pytest.raises(ValueError, match="nonzero_share needs num_units"):
        RatioMatching(nonzero_share=0.5)
    for share in (0.0, 1.0, float("nan")):
        with pytest.raises(ValueError, match="nonzero_share"):
            RatioMatching(num_units=2, nonzero_share=share)
    with pytest.raises(ValueError, match="batch"):
        RatioMatching().loss(random_ising(4), torch.full((3, 4), 0.5, dtype=torch.float64))
    gaussian_rbm = GaussianBernoulliRBM(4, 2)
    with pytest.raises(MissingCapability) as refusal:
        RatioMatching().loss(gaussian_rbm, torch.zeros(3, 4))
    message = str(refusal.value)
    assert "\n" not in message and message.startswith("RatioMatching needs binary states") and "trainer=" in message
