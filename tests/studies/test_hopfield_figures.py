"""The pieces of the thesis's Hopfield figures (pfzoo.studies.hopfield_figures, hopfield_images) against exact answers:
the fast MPF gradient against autograd of BitFlipMPF, the in-order dynamics against Hopfield.recall, the bare loops'
counts, and storage from corrupted copies on small networks."""

import numpy as np
import pytest
import torch

from pfzoo.data.hopfield_patterns import random_patterns
from pfzoo.models import Hopfield
from pfzoo.studies import hopfield_figures as figures
from pfzoo.studies import hopfield_images as images
from pfzoo.training.bit_flip_mpf import BitFlipMPF


def random_network(n: int, generator: torch.Generator) -> Hopfield:
    coupling = torch.randn(n, n, generator=generator, dtype=torch.float64)
    coupling = (coupling + coupling.T) / 2
    coupling.fill_diagonal_(0)
    return Hopfield.from_tensors(coupling, torch.randn(n, generator=generator, dtype=torch.float64))


def test_flow_and_gradient_equal_autograd_of_bit_flip_mpf():
    generator = torch.Generator().manual_seed(0)
    model = random_network(9, generator)
    batch = random_patterns(7, 9, generator=generator).double()
    loss = BitFlipMPF().loss(model, batch)
    loss.backward()
    flow, grad_coupling, grad_bias = images.flow_and_gradient(model.symmetric_coupling.detach(), model.bias.detach(), batch)
    assert flow.item() == pytest.approx(loss.item(), rel=1e-12)
    # the model's free parameter C enters as J = (C + Cᵀ)/2, so ∂K/∂C_ij = ½ ∂K/∂J_ij on each of the pair
    torch.testing.assert_close(grad_coupling / 2, model.coupling.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(grad_bias, model.bias.grad, rtol=1e-10, atol=1e-12)


def test_in_order_dynamics_equal_recall_of_a_fully_connected_network():
    generator = torch.Generator().manual_seed(1)
    model = random_network(12, generator)
    states = random_patterns(20, 12, generator=generator).double()
    first, final = images.converge(model, states)
    torch.testing.assert_close(first, model.update_sweep(states))
    torch.testing.assert_close(final, model.recall(states))
    assert model.is_fixed_point(final).all()


def test_hex_round_trip():
    bits = random_patterns(1, 64, generator=torch.Generator().manual_seed(2))[0]
    text = images.to_hex(bits)
    assert len(text) == 16
    np.testing.assert_array_equal(images.from_hex(text, 64), bits.numpy().astype(np.uint8))


def test_grass_patterns_are_balanced_distinct_tiles():
    rng = np.random.default_rng(0)
    image = np.exp(rng.normal(size=(40, 60)))
    patterns = images.grass_patterns(image, count=6, side=8, generator=torch.Generator().manual_seed(0))
    assert patterns.shape == (6, 64) and patterns.dtype == torch.float32
    assert (patterns.sum(1) == 32).all()  # binarised at each tile's own median (continuous pixels: no ties)
    assert len({tuple(row.tolist()) for row in patterns}) == 6
    with pytest.raises(ValueError, match="fewer than count"):
        images.grass_patterns(image, count=36, side=8)


def test_noisy_copies_of_a_few_patterns_are_stored_by_the_stream():
    generator = torch.Generator().manual_seed(3)
    patterns = random_patterns(3, 100, generator=generator).double()
    model = images.fit_from_noisy_copies(patterns, flips=30, steps=60, copies_per_step=10, learning_rate=1e-3, generator=generator)
    assert model.is_fixed_point(patterns).all()


def test_bare_loops_store_patterns_below_capacity_and_count_their_steps():
    patterns = random_patterns(10, 32, generator=torch.Generator().manual_seed(4)).double()
    rules = figures.thesis_rules({"mpf_iterations": 500, "perceptron_epochs": 500})
    for name in (figures.MPF, figures.PER):
        cost = figures.FitCost()
        model = rules[name](patterns, cost=cost)
        assert model.is_fixed_point(patterns).all(), name
        assert 0 < cost.steps < 500 and cost.evaluations >= cost.steps
    cost = figures.FitCost()
    figures.counted_perceptron(random_patterns(80, 16, generator=torch.Generator().manual_seed(5)).double(), max_epochs=7, cost=cost)
    assert cost.steps == 7  # far beyond capacity: every epoch runs


def test_one_pattern_from_exactly_counted_flips_is_not_stored_but_independent_flips_are():
    """With exactly k of n bits flipped, every copy sits at distance k from its pattern; for one pattern an anti-Hebbian
    coupling (J_s = -β s sᵀ, θ = (n - 2k)β s) then predicts each copy's own bits from the others and makes every copy a
    minimum, the original a maximum of stability. Flipping bits independently breaks that constraint: each copy's bit is
    then independent of its other bits, K's minimiser is J = 0 with the bias along the pattern, and enough copies find it."""
    rules = {figures.MPF: figures.thesis_rules({"mpf_iterations": 2000, "perceptron_epochs": 10})[figures.MPF]}
    exact = figures.measure_corrupted_training(rules, 24, [1], flips=8, copies=1000, trials=2, generator=torch.Generator().manual_seed(6))
    independent = figures.measure_corrupted_training(rules, 24, [1], flips=8, copies=1000, trials=2, independent=True,
                                                    generator=torch.Generator().manual_seed(6))
    assert exact[figures.MPF]["patterns"]["1"] == 0.0
    assert independent[figures.MPF]["patterns"]["1"] == 1.0


def test_the_online_perceptron_stores_patterns_below_capacity_and_counts_its_visits():
    patterns = random_patterns(12, 32, generator=torch.Generator().manual_seed(7)).double()
    cost = figures.FitCost()
    model = figures.online_perceptron(patterns, max_epochs=200, cost=cost)
    assert model.is_fixed_point(patterns).all()
    assert 1 <= cost.steps < 200 and cost.evaluations == 12 * cost.steps
    assert torch.equal(model.symmetric_coupling, model.symmetric_coupling.T)
