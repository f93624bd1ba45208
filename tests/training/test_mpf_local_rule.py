"""The MPF local learning rule (thesis eqs. 3.12–3.13): its update is -∇K exactly, and online descent with it stores
patterns as MPF does."""

import math

import pytest
import torch

from pfzoo.data import random_patterns
from pfzoo.models import Hopfield
from pfzoo.training import mpf_local_update, mpf_online_rule, outer_product_rule
from pfzoo.training.mpf_local_rule import flip_rates


def random_network(num_units, seed):
    g = torch.Generator().manual_seed(seed)
    upper = torch.triu(torch.randn(num_units, num_units, generator=g, dtype=torch.float64), 1)
    return Hopfield.from_tensors(upper + upper.T, torch.randn(num_units, generator=g, dtype=torch.float64))


def flow_by_enumerated_flips(coupling, bias, batch, tail_start=None):
    """K = (1/B) Σ_x Σ_i φ(½[E(x) - E(x⁽ⁱ⁾)]) written out flip by flip, for free parameters ``coupling`` [n, n] (upper
    triangle used, J = U + Uᵀ) and ``bias``; φ = exp, or exp continued linearly beyond ``tail_start`` when given."""
    upper = torch.triu(coupling, 1)
    symmetric = upper + upper.T

    def energy(x):
        return -0.5 * ((x @ symmetric) * x).sum(-1) - x @ bias

    total = 0
    for i in range(batch.shape[1]):
        flipped = batch.clone()
        flipped[:, i] = 1 - flipped[:, i]
        exponent = 0.5 * (energy(batch) - energy(flipped))
        if tail_start is None:
            total = total + torch.exp(exponent)
        else:
            linear = math.exp(tail_start) * (1 + exponent - tail_start)
            total = total + torch.where(exponent <= tail_start, torch.exp(exponent.clamp(max=tail_start)), linear)
    return total.mean()


@pytest.mark.parametrize("max_flip_rate", [None, 1.5])
def test_local_update_is_minus_the_autograd_gradient_of_k(max_flip_rate):
    model = random_network(7, seed=0)
    batch = random_patterns(20, 7, generator=torch.Generator().manual_seed(1)).double()
    coupling = model.symmetric_coupling.detach().clone().requires_grad_(True)
    bias = model.bias.detach().clone().requires_grad_(True)
    tail = None if max_flip_rate is None else math.log(max_flip_rate)
    flow_by_enumerated_flips(coupling, bias, batch, tail).backward()
    delta_coupling, delta_bias = mpf_local_update(model, batch, max_flip_rate=max_flip_rate)
    expected = -torch.triu(coupling.grad, 1)  # ∂K/∂J_ij for the free parameter J_ij = J_ji, i < j
    assert torch.allclose(delta_coupling, expected + expected.T, rtol=0, atol=1e-13)
    assert torch.allclose(delta_bias, -bias.grad, rtol=0, atol=1e-13)
    assert delta_coupling.abs().max() > 0.05 and delta_bias.abs().max() > 0.05  # not trivially zero
    if max_flip_rate is not None:  # the bound binds somewhere, so this case differs from the exact one
        assert flip_rates(model, batch).max() > max_flip_rate
        assert not torch.allclose(delta_coupling, mpf_local_update(model, batch)[0])


def test_local_update_from_zero_is_the_hebbian_correlation_of_spins_and_states():
    batch = random_patterns(5, 6, generator=torch.Generator().manual_seed(2)).double()
    zero = Hopfield.from_tensors(torch.zeros(6, 6, dtype=torch.float64), torch.zeros(6, dtype=torch.float64))
    delta_coupling, delta_bias = mpf_local_update(zero, batch)
    spins = 2 * batch - 1
    hebbian = (spins.T @ batch + batch.T @ spins) / (2 * 5)  # every flip rate is 1 at J = 0, b = 0
    hebbian.fill_diagonal_(0)
    assert torch.allclose(delta_coupling, hebbian, rtol=0, atol=1e-15)
    assert torch.allclose(delta_bias, spins.mean(0) / 2, rtol=0, atol=1e-15)


def test_one_full_batch_epoch_is_one_gradient_step_from_zero():
    patterns = random_patterns(6, 10, generator=torch.Generator().manual_seed(3)).double()
    model = mpf_online_rule(patterns, learning_rate=0.05, max_epochs=1, batch_size=6, max_flip_rate=None, generator=torch.Generator().manual_seed(0))
    zero = Hopfield.from_tensors(torch.zeros(10, 10, dtype=torch.float64), torch.zeros(10, dtype=torch.float64))
    delta_coupling, delta_bias = mpf_local_update(zero, patterns)
    assert torch.allclose(model.symmetric_coupling.detach(), 0.05 * delta_coupling, rtol=0, atol=1e-15)
    assert torch.allclose(model.bias.detach(), 0.05 * delta_bias, rtol=0, atol=1e-15)


def test_online_rule_stores_as_many_patterns_as_units_where_the_outer_product_rule_fails():
    patterns = random_patterns(48, 48, generator=torch.Generator().manual_seed(4)).double()
    model = mpf_online_rule(patterns, max_epochs=300, generator=torch.Generator().manual_seed(0))
    assert model.is_fixed_point(patterns).all()
    assert torch.equal(model.symmetric_coupling, model.symmetric_coupling.T)
    assert outer_product_rule(patterns).is_fixed_point(patterns).double().mean() < 0.1
    again = mpf_online_rule(patterns, max_epochs=300, generator=torch.Generator().manual_seed(0))
    assert torch.equal(again.coupling, model.coupling)  # same seed, same visiting order, same network


def test_online_rule_lowers_k_epoch_by_epoch_and_stops_once_stored():
    patterns = random_patterns(12, 24, generator=torch.Generator().manual_seed(5)).double()
    flows, epochs = [], []

    def trace(epoch, model):
        epochs.append(epoch)
        flows.append(flip_rates(model, patterns).sum(1).mean().item())

    model = mpf_online_rule(patterns, learning_rate=0.05, max_epochs=500, generator=torch.Generator().manual_seed(1), on_epoch=trace)
    assert flows[-1] < flows[0] < 24  # K = n = 24 at J = 0
    assert model.is_fixed_point(patterns).all() and epochs == list(range(1, len(epochs) + 1)) and len(epochs) < 500


def test_too_large_a_step_is_refused_unless_the_rates_are_bounded():
    patterns = random_patterns(64, 32, generator=torch.Generator().manual_seed(6)).double()  # 2n patterns: not storable
    with pytest.raises(ValueError, match="learning_rate"):
        mpf_online_rule(patterns, learning_rate=50.0, max_epochs=50, max_flip_rate=None, generator=torch.Generator().manual_seed(0))
    bounded = mpf_online_rule(patterns, learning_rate=50.0, max_epochs=50, max_flip_rate=10.0, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(bounded.coupling).all()


@pytest.mark.parametrize("kwargs, match", [
    ({"learning_rate": 0.0}, "learning_rate"), ({"max_epochs": 0}, "max_epochs"), ({"batch_size": 0}, "batch_size"),
    ({"max_flip_rate": -1.0}, "max_flip_rate"),
])
def test_online_rule_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mpf_online_rule(torch.ones(2, 3, dtype=torch.float64), **kwargs)


def test_local_update_rejects_non_binary_or_misshapen_batches():
    model = random_network(4, seed=7)
    with pytest.raises(ValueError, match="batch"):
        mpf_local_update(model, torch.full((2, 4), 0.5, dtype=torch.float64))
    with pytest.raises(ValueError, match="batch"):
        mpf_local_update(model, torch.ones(2, 5, dtype=torch.float64))
