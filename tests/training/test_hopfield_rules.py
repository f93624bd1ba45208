"""Classical Hopfield storage rules: the outer-product rule against its explicit formula and the spin
energy, capacity of both rules on random patterns (n = 64), and argument checks."""

import itertools
import logging

import pytest
import torch

from pfzoo.models import Hopfield
from pfzoo.training import outer_product_rule, perceptron_fit, perceptron_rule

NUM_UNITS = 64


def random_patterns(num_patterns, num_units=NUM_UNITS, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(num_patterns, num_units, generator=g) < 0.5).to(dtype)


def spin_energy(spins, spin_coupling, spin_bias=None):
    """``-½ sᵀJ_s s - θ·s`` for ``spins [B, n]`` → ``[B]``."""
    energy = -0.5 * ((spins @ spin_coupling) * spins).sum(-1)
    return energy if spin_bias is None else energy - spins @ spin_bias


def test_outer_product_rule_matches_the_explicit_formula():
    patterns = random_patterns(3, num_units=6, seed=1, dtype=torch.float64)
    model = outer_product_rule(patterns)
    assert isinstance(model, Hopfield) and model.num_units == 6 and model.dtype == torch.float64
    spins = (2 * patterns - 1).tolist()
    spin_coupling = torch.zeros(6, 6, dtype=torch.float64)
    for i, j in itertools.product(range(6), repeat=2):
        if i != j:
            spin_coupling[i, j] = sum(s[i] * s[j] for s in spins) / 6
    assert torch.allclose(model.symmetric_coupling, 4 * spin_coupling, atol=1e-12)
    assert torch.allclose(model.bias, -2 * spin_coupling.sum(1), atol=1e-12)
    assert torch.equal(model.coupling, model.coupling.T) and torch.equal(model.coupling.diagonal(), torch.zeros(6, dtype=torch.float64))


def test_outer_product_energy_is_the_hebbian_spin_energy_up_to_a_constant():
    patterns = random_patterns(4, num_units=10, seed=2, dtype=torch.float64)
    model = outer_product_rule(patterns)
    spins = 2 * patterns - 1
    spin_coupling = spins.T @ spins / 10
    spin_coupling.fill_diagonal_(0)
    states = random_patterns(50, num_units=10, seed=3, dtype=torch.float64)
    binary = model.energy(states).detach()
    spin = spin_energy(2 * states - 1, spin_coupling)
    assert torch.allclose(binary - binary[0], spin - spin[0], atol=1e-10)
    assert (spin - binary).std() < 1e-10 and (spin - binary).abs().max() > 0.1  # a constant, and not zero


def test_from_spins_gives_the_rules_spin_energy_as_a_hopfield_network():
    g = torch.Generator().manual_seed(4)
    upper = torch.triu(torch.randn(7, 7, generator=g, dtype=torch.float64), 1)
    spin_coupling, spin_bias = upper + upper.T, torch.randn(7, generator=g, dtype=torch.float64)
    model = Hopfield.from_spins(spin_coupling, spin_bias)
    assert type(model) is Hopfield
    states = random_patterns(40, num_units=7, seed=5, dtype=torch.float64)
    difference = spin_energy(2 * states - 1, spin_coupling, spin_bias) - model.energy(states).detach()
    assert difference.std() < 1e-10
    # the 0/1 field is twice the spin field: the same fixed points
    assert torch.allclose(model.local_fields(states).detach(), 2 * ((2 * states - 1) @ spin_coupling + spin_bias), atol=1e-10)


def test_outer_product_rule_stores_few_patterns_but_not_many():
    few = random_patterns(5, seed=6)
    assert outer_product_rule(few).is_fixed_point(few).all()
    many = random_patterns(40, seed=6)
    assert outer_product_rule(many).is_fixed_point(many).float().mean() < 0.25  # far beyond its ~0.14 n capacity


def test_perceptron_rule_stores_forty_random_patterns_in_sixty_four_units():
    patterns = random_patterns(40, seed=7)
    model = perceptron_rule(patterns, max_epochs=200)
    assert isinstance(model, Hopfield) and model.dtype == torch.float32
    assert model.is_fixed_point(patterns).all()
    assert torch.equal(model.recall(patterns), patterns)
    assert torch.equal(model.coupling, model.coupling.T) and torch.equal(model.coupling.diagonal(), torch.zeros(NUM_UNITS))
    assert not outer_product_rule(patterns).is_fixed_point(patterns).all()  # the baseline it improves on


def test_perceptron_margin_is_met_in_spin_field_units():
    patterns = random_patterns(20, seed=8, dtype=torch.float64)
    model = perceptron_rule(patterns, learning_rate=0.5, margin=3.0, max_epochs=500)
    spins = 2 * patterns - 1
    spin_fields = model.local_fields(patterns).detach() / 2
    assert (spins * spin_fields > 3.0).all()
    plain = perceptron_rule(patterns, learning_rate=0.5, max_epochs=500)
    assert (spins * plain.local_fields(patterns).detach() / 2).min() < 3.0  # the margin changed the result


def test_perceptron_rule_at_zero_margin_only_scales_with_the_learning_rate():
    patterns = random_patterns(30, seed=9, dtype=torch.float64)
    small, large = perceptron_rule(patterns, learning_rate=0.1), perceptron_rule(patterns, learning_rate=1.0)
    assert torch.allclose(10 * small.coupling, large.coupling, atol=1e-9)
    assert torch.allclose(10 * small.bias, large.bias, atol=1e-9)


def test_perceptron_rule_is_deterministic_and_stops_at_max_epochs_with_a_warning(caplog):
    patterns = random_patterns(40, seed=10)
    first = perceptron_rule(patterns, generator=torch.Generator().manual_seed(0))
    second = perceptron_rule(patterns)
    assert torch.equal(first.coupling, second.coupling) and torch.equal(first.bias, second.bias)
    with caplog.at_level(logging.WARNING, logger="pfzoo.training.hopfield_rules"):
        stopped = perceptron_rule(patterns, max_epochs=1)
    assert isinstance(stopped, Hopfield)
    assert "max_epochs=1" in caplog.text
    assert not stopped.is_fixed_point(patterns).all()


@pytest.mark.parametrize("rule", [outer_product_rule, perceptron_rule])
@pytest.mark.parametrize(
    "bad, message",
    [
        (torch.full((3, 5), 0.5), "binary"),
        (torch.ones(5), "shape"),
        (torch.ones(2, 3, 5), "shape"),
        (torch.tensor([[0.0, float("nan")]]), "NaN"),
        (torch.ones(3, 5, dtype=torch.long), "floating"),
        (torch.ones(0, 5), "at least one pattern"),
        ([[0.0, 1.0]], "torch.Tensor"),
    ],
)
def test_bad_patterns_raise_value_error_naming_the_argument(rule, bad, message):
    with pytest.raises(ValueError, match=f"^patterns .*{message}|^patterns must.*{message}"):
        rule(bad)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"learning_rate": float("nan")}, "learning_rate"),
        ({"max_epochs": 0}, "max_epochs"),
        ({"margin": -1.0}, "margin"),
        ({"generator": 3}, "generator"),
    ],
)
def test_bad_perceptron_arguments_raise_value_error_naming_them(kwargs, name):
    with pytest.raises(ValueError, match=name):
        perceptron_rule(random_patterns(2, num_units=4), **kwargs)


def test_perceptron_fit_reports_the_epochs_it_ran_and_whether_it_stopped_stable():
    patterns = (torch.rand(5, 16, generator=torch.Generator().manual_seed(0)) < 0.5).double()
    fit = perceptron_fit(patterns, max_epochs=1000)
    assert fit.stable and 0 < fit.epochs < 1000 and fit.model.is_fixed_point(patterns).all()
    short = perceptron_fit(patterns, max_epochs=1)
    assert not short.stable and short.epochs == 1
