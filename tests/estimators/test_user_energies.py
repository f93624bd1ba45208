"""A user's own ``nn.Module`` energy, wrapped as :class:`EnergyFunction`, estimated against integrals done by hand."""

import math

import pytest
import torch
from torch import nn

from pfzoo.estimators import AIS, HAIS, Exact
from pfzoo.kernels import RandomWalkMetropolis
from pfzoo.models import EnergyFunction, MissingCapability

K_SIGMA = 3.0


class Quartic(nn.Module):
    """``E(x) = Σ_i x_i⁴``: ``Z = (2 Γ(5/4))^M``."""

    def forward(self, x):
        return x.pow(4).sum(-1)


class QuadraticPlusMLP(nn.Module):
    """``E(x) = ½|x|² + 2 tanh(MLP(x))``: a bounded perturbation of a Gaussian, integrable, no closed form."""

    def __init__(self, dim, generator):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim, 16), nn.Tanh(), nn.Linear(16, 1))
        with torch.no_grad():
            for parameter in self.mlp.parameters():
                parameter.copy_(torch.randn(parameter.shape, generator=generator))

    def energy(self, x):
        return 0.5 * x.square().sum(-1) + 2 * torch.tanh(self.mlp(x)).squeeze(-1)


def grid_log_partition(energy, half_width=7.0, points=1401):
    """``log ∫ exp(−E(x)) dx`` over ℝ² by the trapezoid-free midpoint rule on a fine grid (the tails are negligible)."""
    axis = torch.linspace(-half_width, half_width, points, dtype=torch.float64)
    step = (axis[1] - axis[0]).item()
    x, y = torch.meshgrid(axis, axis, indexing="ij")
    with torch.no_grad():
        values = -energy(torch.stack([x.reshape(-1), y.reshape(-1)], dim=1))
    return (torch.logsumexp(values, 0) + 2 * math.log(step)).item()


def test_hais_on_a_quartic_in_4d_matches_its_known_partition_function():
    model = EnergyFunction(Quartic(), num_visible=4).double()
    exact = 4 * math.log(2 * math.gamma(1.25))
    estimate = HAIS(num_chains=200, num_steps=2000, step_size=0.3)(model, generator=torch.Generator().manual_seed(1))
    assert estimate.stderr < 0.05
    assert abs(estimate.log_z - exact) <= K_SIGMA * estimate.stderr + 1e-3
    assert len(estimate.info["acceptance"]) == 10 and min(estimate.info["acceptance"]) > 0.5


@pytest.mark.slow
def test_hais_on_an_mlp_plus_quadratic_energy_matches_numerical_integration():
    model = EnergyFunction(QuadraticPlusMLP(2, torch.Generator().manual_seed(0)).double(), num_visible=2)
    exact = grid_log_partition(model.net.energy)
    estimate = HAIS(num_chains=300, num_steps=2000, step_size=0.3)(model, generator=torch.Generator().manual_seed(2))
    assert estimate.stderr < 0.05
    assert abs(estimate.log_z - exact) <= K_SIGMA * estimate.stderr + 1e-3


def test_random_walk_ais_on_a_user_energy_agrees_too():
    model = EnergyFunction(Quartic(), num_visible=2).double()
    exact = 2 * math.log(2 * math.gamma(1.25))
    estimate = AIS(num_chains=200, num_steps=1000, kernel=RandomWalkMetropolis(0.5))(model, generator=torch.Generator().manual_seed(3))
    assert abs(estimate.log_z - exact) <= K_SIGMA * estimate.stderr + 1e-3


class PairwiseBinaryEnergy(nn.Module):
    """A small fully visible binary energy written by hand, ``E(x) = −xᵀ A x − b·x`` plus a triple interaction."""

    def __init__(self, dim, generator):
        super().__init__()
        self.a = nn.Parameter(torch.randn(dim, dim, generator=generator, dtype=torch.float64) * 0.5)
        self.b = nn.Parameter(torch.randn(dim, generator=generator, dtype=torch.float64) * 0.5)

    def forward(self, x):
        return -((x @ self.a) * x).sum(-1) - x @ self.b - 0.7 * x[:, 0] * x[:, 1] * x[:, 2]


def test_bit_flip_ais_on_a_binary_user_energy_matches_enumeration():
    dim = 8
    net = PairwiseBinaryEnergy(dim, torch.Generator().manual_seed(4))
    model = EnergyFunction(net, num_visible=dim, binary=True)
    states = ((torch.arange(2**dim)[:, None] >> torch.arange(dim)) & 1).double()
    with torch.no_grad():
        exact = torch.logsumexp(-net(states), 0).item()
    estimate = AIS(num_chains=200, num_steps=300)(model, generator=torch.Generator().manual_seed(5))
    assert abs(estimate.log_z - exact) <= K_SIGMA * estimate.stderr + 1e-3
    assert "acceptance" in estimate.info


def test_user_energies_are_refused_where_nothing_applies_and_checked_for_shape():
    model = EnergyFunction(Quartic(), num_visible=3).double()
    with pytest.raises(MissingCapability, match=r"^Exact needs an exact log Z .* EnergyFunction .* use estimator=ais, bridge, hais, importance, linked, pt or smc$"):
        Exact()(model)
    wrong = EnergyFunction(nn.Linear(3, 2).double(), num_visible=3)
    with pytest.raises(ValueError, match=r"energies \[B\]"):
        wrong.energy(torch.zeros(4, 3, dtype=torch.float64))
    assert torch.equal(model(torch.ones(2, 3, dtype=torch.float64)), -torch.full((2,), 3.0, dtype=torch.float64))
