"""DBM: energies, exact sums and samplers against brute-force enumeration of every layer."""

import math
from functools import partial

import pytest
import torch
from factories import all_binary_states, random_dbm

from pfzoo import zoo
from pfzoo.models import DBM
from pfzoo.models import dbm as dbm_module
from pfzoo.estimators import importance_log_marginal


# This file's DBMs are drawn in float64; its states list the first unit as the top bit.
all_states = partial(all_binary_states, msb_first=True)
random_dbm = partial(random_dbm, draw_dtype=None)


def brute_force_joint(model):
    """Every joint state of every layer and its energy, straight from the definition E = -Σ x_i W_i x_{i+1} - Σ b_i x_i."""
    sizes = model.layer_sizes
    grids = torch.meshgrid(*[torch.arange(2**n) for n in sizes], indexing="ij")
    layers = [all_states(n)[grid.reshape(-1)] for n, grid in zip(sizes, grids)]
    energy = torch.zeros(layers[0].shape[0], dtype=torch.float64)
    for i, layer in enumerate(layers):
        energy -= layer @ model.biases[i].detach()
        if i + 1 < len(layers):
            energy -= ((layer @ model.weights[i].detach()) * layers[i + 1]).sum(-1)
    return layers, energy, grids[0].reshape(-1)


@pytest.fixture(params=[[5, 4, 3], [4, 3, 3, 2]], ids=["2-layer", "3-layer"])
def model(request):
    return random_dbm(request.param, seed=len(request.param))


def test_energy_matches_definition(model):
    layers, energy, _ = brute_force_joint(model)
    assert torch.allclose(model.energy(*layers), energy, atol=1e-10)


def test_log_partition_and_free_energy_match_brute_force(model):
    _, energy, visible_index = brute_force_joint(model)
    assert model.log_partition().item() == pytest.approx(torch.logsumexp(-energy, 0).item(), abs=1e-9)
    marginal = torch.stack([torch.logsumexp(-energy[visible_index == k], 0) for k in range(2**model.num_visible)])
    v = all_states(model.num_visible)
    assert torch.allclose(-model.free_energy(v), marginal, atol=1e-9)
    assert torch.logsumexp(model.log_prob(v), 0).item() == pytest.approx(0.0, abs=1e-9)


def test_even_odd_rbm_is_the_same_distribution(model):
    rbm = model.even_odd_rbm()
    layers, energy, _ = brute_force_joint(model)
    even = torch.cat([layers[i] for i in model.even_layers], 1)
    odd = torch.cat([layers[i] for i in model.odd_layers], 1)
    assert torch.allclose(rbm.energy(even, odd), energy, atol=1e-10)


def test_mean_field_is_a_lower_bound_and_a_fixed_point(model):
    v = all_states(model.num_visible)
    means = model.mean_field(v, num_iterations=500, tolerance=1e-12)
    bound = model.mean_field_lower_bound(v, means)
    assert torch.all(bound <= -model.free_energy(v) + 1e-9)
    # Fixed point: each layer's mean is the sigmoid of its mean-field input.
    full = [v] + means
    for i in range(1, model.num_layers):
        total = full[i - 1] @ model.weights[i - 1] + model.biases[i]
        if i + 1 < model.num_layers:
            total = total + full[i + 1] @ model.weights[i].T
        assert torch.allclose(torch.sigmoid(total), full[i], atol=1e-8)


def test_mean_field_stops_each_row_on_its_own_and_in_blocks_gives_the_same_means(model, monkeypatch):
    """A row's mean-field posterior is the same whichever rows share its call: with a loose tolerance the rows stop
    at different sweeps, and a row stopped with the slowest one would move on."""
    v = all_states(model.num_visible)
    together = model.mean_field(v, num_iterations=50, tolerance=1e-2)
    alone = [model.mean_field(v[row:row + 1], num_iterations=50, tolerance=1e-2) for row in range(v.shape[0])]
    for layer, means in enumerate(together):
        torch.testing.assert_close(means, torch.cat([row_means[layer] for row_means in alone]), rtol=0, atol=1e-12)
    monkeypatch.setattr(dbm_module, "MEAN_FIELD_BLOCK_ROWS", 3)  # the CPU's blocks: 3, 3, …
    for blocked, means in zip(model.mean_field(v, num_iterations=50, tolerance=1e-2), together):
        torch.testing.assert_close(blocked, means, rtol=0, atol=1e-12)


def test_mean_field_bound_increases_with_iterations(model):
    v = all_states(model.num_visible)
    one = model.mean_field_lower_bound(v, model.mean_field(v, num_iterations=1))
    many = model.mean_field_lower_bound(v, model.mean_field(v, num_iterations=100))
    assert torch.all(many >= one - 1e-9)


def test_importance_sampling_with_the_mean_field_proposal_is_unbiased(model):
    v = all_states(model.num_visible)
    estimate = importance_log_marginal(model, v, 20000, generator=torch.Generator().manual_seed(0))
    exact = -model.free_energy(v)
    z = (estimate.log_marginal - exact) / estimate.stderr.clamp_min(1e-12)
    assert z.abs().max() < 5, z
    assert estimate.stderr.max() < 0.05


def test_gibbs_samples_follow_the_exact_marginal_of_v():
    model = random_dbm([4, 3, 3], seed=11)
    samples = model.sample_layers(20000, num_steps=30, generator=torch.Generator().manual_seed(1))[0]
    index = (samples @ (2 ** torch.arange(3, -1, -1, dtype=torch.float64))).long()
    counts = torch.bincount(index, minlength=16).double()
    expected = model.log_prob(all_states(4)).exp() * samples.shape[0]
    chi2 = ((counts - expected) ** 2 / expected).sum().item()
    assert chi2 < 37.7  # χ²(15) upper 0.1 % point
    # Power: the same samples are far from the β = 0.5 marginal.
    hot = DBM.from_tensors([w.detach() * 0.5 for w in model.weights], [b.detach() * 0.5 for b in model.biases])
    expected_hot = hot.log_prob(all_states(4)).exp() * samples.shape[0]
    assert ((counts - expected_hot) ** 2 / expected_hot).sum().item() > 100


def test_hidden_chain_and_conditional_log_prob():
    model = random_dbm([4, 3, 2], seed=3)
    v = all_states(4)
    h = all_states(3)
    logits = h @ model.weights[0].T + model.biases[0]
    direct = torch.stack([(v * lg - torch.nn.functional.softplus(lg)).sum(-1) for lg in logits], 1)
    assert torch.allclose(model.log_prob_visible_given_hidden(v, h), direct.detach(), atol=1e-10)
    chain = model.hidden_chain(v[:3], generator=torch.Generator().manual_seed(0))
    assert next(chain).shape == (3, 3)


def test_same_seed_same_samples():
    model = random_dbm([5, 4, 3], seed=0)
    a = model.sample_layers(10, 5, generator=torch.Generator().manual_seed(4))
    b = model.sample_layers(10, 5, generator=torch.Generator().manual_seed(4))
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_constructor_forms_and_checkpoint_round_trip(tmp_path):
    assert DBM(num_visible=6, hidden_sizes=[4, 2]).layer_sizes == [6, 4, 2]
    model = random_dbm([6, 4, 2], seed=1).float()
    path = tmp_path / "dbm.pt"
    zoo.save(model, path)
    loaded = zoo.load(path)
    assert isinstance(loaded, DBM) and loaded.layer_sizes == [6, 4, 2]
    assert loaded.log_partition().item() == pytest.approx(model.log_partition().item())


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: DBM([5]), "layer_sizes"),
        (lambda: DBM([5, 0]), "layer_sizes\\[1\\]"),
        (lambda: DBM([5, 3], num_visible=5, hidden_sizes=[3]), "either layer_sizes"),
        (lambda: DBM(), "layer_sizes is required"),
        (lambda: DBM.from_tensors([torch.zeros(3, 2), torch.zeros(3, 2)], [torch.zeros(3), torch.zeros(2), torch.zeros(2)]), "weights\\[1\\]"),
        (lambda: DBM.from_tensors([torch.zeros(3, 2)], [torch.zeros(3), torch.zeros(4)]), "biases\\[1\\]"),
        (lambda: DBM.from_tensors([torch.full((3, 2), math.nan)], [torch.zeros(3), torch.zeros(2)]), "NaN"),
        (lambda: random_dbm([3, 2], seed=0).free_energy(torch.full((2, 3), 0.5, dtype=torch.float64)), "binary"),
        (lambda: random_dbm([3, 2], seed=0).energy(torch.zeros(2, 3, dtype=torch.float64)), "2 layer states"),
        (lambda: random_dbm([3, 2], seed=0).annealing_base("base_rate"), "needs data"),
        (lambda: random_dbm([3, 2], seed=0).annealing_base("flat"), "kind"),
    ],
)
def test_bad_inputs_raise(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_free_energy_refuses_large_enumerations():
    model = DBM([5, 3, 30], max_enumeration_units=20)
    with pytest.raises(ValueError, match="max_enumeration_units"):
        model.free_energy(torch.zeros(1, 5))


def test_base_rate_base_puts_every_layer_at_its_data_rate():
    """Visible biases at the pixel rates, hidden biases at the mean-field posterior rates (smoothed logits)."""
    dbm = random_dbm([6, 4, 3], seed=5)
    data = torch.bernoulli(torch.full((40, 6), 0.3), generator=torch.Generator().manual_seed(6)).to(dbm.weights[0].dtype)
    base = dbm.annealing_base("base_rate", data, smoothing=0.5)
    assert all(torch.equal(weight, torch.zeros_like(weight)) for weight in base.weights)
    expected = [data.mean(0) * 40] + [means.sum(0) for means in dbm.mean_field(data)]
    for bias, total in zip(base.biases, expected):
        torch.testing.assert_close(torch.sigmoid(bias), (total + 0.5) / 41.0)


# ---- the depth diagnostic: the DBM without its top layer -------------------------------------------


@pytest.mark.parametrize("sizes", [[6, 4, 3], [5, 3, 4, 2]])
def test_removing_the_top_layer_keeps_the_lower_layers_and_folds_the_top_ones_average_input_into_the_bias(sizes):
    model = random_dbm(sizes, scale=1.0, seed=4)
    v = all_binary_states(sizes[0], msb_first=True)
    short = model.without_top_layer(v)
    assert short.layer_sizes == sizes[:-1]
    top_means = model.mean_field(v)[-1].mean(0)
    torch.testing.assert_close(short.biases[-1], model.biases[-2] + model.weights[-1] @ top_means)
    for kept, original in zip(short.weights, model.weights[:-1]):
        torch.testing.assert_close(kept, original)
    assert short.log_prob(v).exp().sum().item() == pytest.approx(1.0, abs=1e-10)  # a normalised model, by enumeration


def test_a_dbm_whose_top_layer_is_detached_loses_nothing_without_it_and_its_share_is_zero():
    """Upper weights 0: the top layer multiplies every state by the same factor, so the shorter model is the DBM's
    marginal exactly (by enumeration) and sends no example-dependent input down."""
    from factories import random_rbm

    rbm = random_rbm(6, 4, scale=1.5, seed=3)
    v = all_binary_states(6, msb_first=True)
    model = DBM([6, 4, 3]).double()
    model.start_from_rbm(rbm, upper_init_std=0.0)
    torch.testing.assert_close(model.without_top_layer(v).log_prob(v), model.log_prob(v))
    assert model.top_layer_share(v) == 0.0
    coupled = random_dbm([6, 4, 3], scale=3.0, seed=0)
    loss = (coupled.log_prob(v).exp() * (coupled.log_prob(v) - coupled.without_top_layer(v).log_prob(v))).sum()
    assert loss.item() > 0.1  # KL(p_DBM ‖ p_short) over all states (measured 0.25): a coupled top layer is lost when cut
    assert 0.05 < coupled.top_layer_share(v) < 1  # measured 0.13


def test_dead_units_are_those_on_for_almost_no_row():
    """A unit whose bias holds it off whatever the input is dead; the others of a random DBM are not."""
    model = random_dbm([6, 4, 3], seed=2)
    with torch.no_grad():
        model.biases[2][0] = -40.0  # top unit 0 off for every row
        model.biases[1][1:3] = -40.0  # middle units 1 and 2 off
    v = all_binary_states(6, msb_first=True)
    layers = [v, *model.mean_field(v)]
    assert model.dead_unit_shares(layers) == [0.5, pytest.approx(1 / 3)]
    assert model.training_diagnostics(v) == {"top_layer_share": model.top_layer_share(v), "dead_units_h1": 0.5,
                                             "dead_units_h2": pytest.approx(1 / 3)}


def test_the_depth_diagnostic_refuses_a_dbm_without_two_hidden_layers():
    with pytest.raises(ValueError, match="at least two hidden layers"):
        DBM([6, 4]).without_top_layer(torch.zeros(2, 6))
    with pytest.raises(ValueError, match="at least two hidden layers"):
        DBM([6, 4]).top_layer_share(torch.zeros(2, 6))
