"""DBM training: the PCD + mean-field objective (S&H 2009 Algorithm 1), greedy pretraining (§3.1), DBM metrics."""

import copy
import functools
import json
from pathlib import Path

import pytest
import torch
from factories import all_binary_states, random_dbm
from hydra.utils import instantiate

from pfzoo.cli import compose
from pfzoo.data import DataSplits
from pfzoo.models import DBM, RBM
from pfzoo.models.rbm import base_rate_visible_bias
from pfzoo.models.dbm_surgery import DEAD_UNIT_ACTIVITY
from pfzoo.sampling import bernoulli
from pfzoo.training import CD, DBMPersistentMeanField, Trainer, pretrain_dbm, reconstruction_error, start_dbm_from_rbm
from pfzoo.models.tied_rbm import TiedRBM
from pfzoo.training.dbm import tied_cd_loss
from pfzoo.training.metrics import pseudo_likelihood_is_affordable
from pfzoo.models import MissingCapability



# ---- helpers --------------------------------------------------------------------------------------


random_dbm = functools.partial(random_dbm, draw_dtype=None)  # drawn in float64


def structured_dbm(sizes=(6, 4, 3), seed=1, scale=3.0):
    """Strong random weights with roughly centring biases: data far from independent (≈ 2.6 nats per example)."""
    g = torch.Generator().manual_seed(seed)
    weights = [scale * torch.randn(a, b, generator=g, dtype=torch.float64) for a, b in zip(sizes[:-1], sizes[1:])]
    biases = [-0.5 * weights[0].sum(1), -0.5 * (weights[1].sum(1) + weights[0].sum(0)), -0.5 * weights[1].sum(0)]
    return DBM.from_tensors(weights, biases)


def exact_samples(model, num, seed):
    """``num`` exact draws of ``v`` from the DBM's marginal, by enumerating all visible states."""
    states = all_binary_states(model.num_visible, msb_first=True)
    probs = model.log_prob(states).exp()
    return states[torch.multinomial(probs, num, replacement=True, generator=torch.Generator().manual_seed(seed))]


def random_batch(rows, width, seed=1):
    return torch.bernoulli(torch.full((rows, width), 0.5, dtype=torch.float64), generator=torch.Generator().manual_seed(seed))


def base_rate_dbm(sizes, data, seed=2):
    """The usual starting point: small random weights, visible biases at the data's base-rate logits."""
    model = DBM(list(sizes), init_std=0.01, generator=torch.Generator().manual_seed(seed)).double()
    with torch.no_grad():
        model.biases[0].copy_(base_rate_visible_bias(data))
    return model


def layers_from(model, even_state):
    """Particle layers: the even layers of ``even_state``, the odd ones at ``p(x_odd = 1 | x_even)``, written out per layer."""
    layers = [None] * model.num_layers
    for layer, state in zip(model.even_layers, model.split_even(even_state)):
        layers[layer] = state
    for i in model.odd_layers:
        total = layers[i - 1] @ model.weights[i - 1] + model.biases[i]
        if i + 1 < model.num_layers:
            total = total + layers[i + 1] @ model.weights[i].T
        layers[i] = torch.sigmoid(total)
    return [layer.detach() for layer in layers]


def gradients_of(loss, model):
    model.zero_grad()
    loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters()}


def mean_log_likelihood(model, data):
    return model.log_prob(data).mean().item()


@pytest.fixture
def toy():
    """Random binary data with unequal pixel rates: train [200, 16], test [50, 16]."""
    g = torch.Generator().manual_seed(0)
    rates = torch.linspace(0.1, 0.9, 16)
    return DataSplits("toy", train=torch.bernoulli(rates.expand(200, 16), generator=g), test=torch.bernoulli(rates.expand(50, 16), generator=g))


def read_metrics(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


# ---- the objective's gradient and particles -------------------------------------------------------


@pytest.mark.parametrize("sizes, k", [([6, 4, 3], 1), ([6, 4, 3], 3), ([5, 4, 3, 2], 2), ([5, 3], 1)])
def test_loss_gradient_is_mean_field_minus_particle_statistics(sizes, k):
    model, batch = random_dbm(sizes), random_batch(40, sizes[0])
    objective = DBMPersistentMeanField(k=k, num_chains=30, mean_field_iterations=7)
    loss = objective.loss(model, batch, generator=torch.Generator().manual_seed(5))

    # The particles: batch rows and uniform even hidden layers, then k odd/even sweeps, replayed by hand.
    replay = torch.Generator().manual_seed(5)
    rows = torch.randint(40, (30,), generator=replay)
    hidden = bernoulli(torch.full((30, model.num_even_units - sizes[0]), 0.5, dtype=torch.float64), generator=replay)
    even = torch.cat([batch[rows], hidden], 1)
    with torch.no_grad():
        for _ in range(k):
            even = model.draw_even(model.draw_odd(even, generator=replay), generator=replay)
    assert torch.equal(objective.chains, even)

    data_layers = [batch, *model.mean_field(batch, num_iterations=7)]
    particles = layers_from(model, even)
    expected = {}
    for i in range(len(sizes) - 1):  # -(⟨x_i x_{i+1}ᵀ⟩_{data, q} - ⟨x_i x_{i+1}ᵀ⟩_particles)
        expected[f"weights.{i}"] = -(data_layers[i].T @ data_layers[i + 1] / 40 - particles[i].T @ particles[i + 1] / 30)
    for i in range(len(sizes)):
        expected[f"biases.{i}"] = -(data_layers[i].mean(0) - particles[i].mean(0))
    actual = gradients_of(loss, model)
    assert set(actual) == set(expected)
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], rtol=1e-10, atol=1e-12, msg=name)


def test_positive_phase_uses_the_mean_field_fixed_point():
    """With enough iterations the positive statistics are those of the converged mean-field posterior."""
    model, batch = random_dbm([6, 4, 3], scale=0.5), random_batch(20, 6)
    objective = DBMPersistentMeanField(k=1, num_chains=10, mean_field_iterations=200)
    gradient = gradients_of(objective.loss(model, batch, generator=torch.Generator().manual_seed(0)), model)
    mu1, mu2 = model.mean_field(batch, num_iterations=500, tolerance=1e-14)
    torch.testing.assert_close(mu1, torch.sigmoid(batch @ model.weights[0] + mu2 @ model.weights[1].T + model.biases[1]))  # a fixed point
    particles = layers_from(model, objective.chains)
    torch.testing.assert_close(gradient["weights.1"], -(mu1.T @ mu2 / 20 - particles[1].T @ particles[2] / 10), rtol=1e-6, atol=1e-8)


def test_objective_is_reproducible_and_depends_on_the_seed():
    model, batch = random_dbm([6, 4, 3]), random_batch(20, 6)
    losses = [DBMPersistentMeanField(k=2, num_chains=10).loss(model, batch, generator=torch.Generator().manual_seed(s)).item() for s in (0, 0, 1)]
    assert losses[0] == losses[1] != losses[2]


# ---- learning (exact log-likelihoods by enumeration) ----------------------------------------------


def test_training_on_samples_of_a_known_dbm_raises_the_exact_log_likelihood():
    truth = structured_dbm()
    data = exact_samples(truth, 500, seed=1)
    model = base_rate_dbm([6, 4, 3], data)
    before, target = mean_log_likelihood(model, data), mean_log_likelihood(truth, data)
    assert target > before + 2.0  # the data are far from independent pixels
    objective = DBMPersistentMeanField(k=5, num_chains=50, mean_field_iterations=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    generator = torch.Generator().manual_seed(3)
    for _ in range(300):
        rows = torch.randint(500, (50,), generator=generator)
        optimizer.zero_grad()
        objective.loss(model, data[rows], generator=generator).backward()
        optimizer.step()
    after = mean_log_likelihood(model, data)
    assert after > before + 1.0, (before, after, target)


# ---- persistence: state_dict and Trainer resume ---------------------------------------------------


def test_particles_survive_a_state_dict_round_trip_and_training_continues_identically():
    data = random_batch(60, 6, seed=3)

    def run(model, objective, generator, steps):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        for step in range(steps):
            optimizer.zero_grad()
            objective.loss(model, data[step % 3 * 20 : step % 3 * 20 + 20], generator=generator).backward()
            optimizer.step()

    model, objective, generator = random_dbm([6, 4, 3]), DBMPersistentMeanField(k=2, num_chains=15), torch.Generator().manual_seed(0)
    run(model, objective, generator, 4)
    saved_model, saved_objective = copy.deepcopy(model.state_dict()), copy.deepcopy(objective.state_dict())
    saved_generator = generator.get_state()
    assert saved_objective["chains"].shape == (15, 6 + 3)
    run(model, objective, generator, 4)

    restored_model, restored_objective = random_dbm([6, 4, 3], seed=9), DBMPersistentMeanField(k=2, num_chains=15)
    restored_model.load_state_dict(saved_model)
    restored_objective.load_state_dict(saved_objective)
    restored_generator = torch.Generator()
    restored_generator.set_state(saved_generator)
    run(restored_model, restored_objective, restored_generator, 4)
    assert torch.equal(restored_objective.chains, objective.chains)
    for name, parameter in model.named_parameters():
        assert torch.equal(parameter, dict(restored_model.named_parameters())[name]), name


def test_trainer_resume_with_pretraining_is_bit_identical_and_does_not_pretrain_again(tmp_path, toy):
    calls = []

    def counting_pretrain(model, data, *, generator=None):
        calls.append(data.shape)
        pretrain_dbm(model, data, epochs_per_layer=2, batch_size=50, lr=0.05, k=1, generator=generator)

    def trainer(run_dir, epochs):
        objective = DBMPersistentMeanField(k=2, num_chains=20, pretrain=counting_pretrain)
        return Trainer(objective, functools.partial(torch.optim.SGD, lr=0.05, momentum=0.5), run_dir=run_dir, epochs=epochs, batch_size=50, progress=False)

    def dbm(seed=0):
        return DBM([16, 6, 4], generator=torch.Generator().manual_seed(seed))

    one_go = dbm()
    trainer(tmp_path / "one_go", 3).fit(one_go, toy)
    trainer(tmp_path / "resumed", 2).fit(dbm(), toy)
    resumed = dbm(seed=1)
    second = trainer(tmp_path / "resumed", 3)
    second.fit(resumed, toy, resume=True)
    assert len(calls) == 2  # once per fresh run, not on resume
    assert bool(second.objective.pretrained)
    for name, parameter in one_go.named_parameters():
        assert torch.equal(parameter, dict(resumed.named_parameters())[name]), name

    def without_timing(records):
        return [{key: value for key, value in record.items() if not key.endswith("seconds")} for record in records]

    assert without_timing(read_metrics(tmp_path / "resumed")) == without_timing(read_metrics(tmp_path / "one_go"))


# ---- greedy pretraining ---------------------------------------------------------------------------


@pytest.mark.parametrize("up, down", [(2, 1), (1, 2), (1, 1)])
def test_tied_rbm_cd_is_the_cd_of_the_rbm_with_duplicated_units(up, down):
    """The modified RBMs of §3.1 are genuine RBMs whose duplicated units share weights: compare with pfzoo's CD-k."""
    g = torch.Generator().manual_seed(0)
    x = random_batch(30, 5)
    tied = TiedRBM(x, 3, up=up, down=down, generator=g)
    with torch.no_grad():
        for parameter in tied.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=g, dtype=torch.float64))
    loss = tied_cd_loss(tied, x, 2, generator=torch.Generator().manual_seed(7))
    grads = gradients_of(loss, tied)

    weight = tied.weight.detach().repeat(up, down)
    reference = RBM.from_tensors(weight, tied.visible_bias.detach().repeat(up), tied.hidden_bias.detach().repeat(down))
    reference_loss = CD(k=2).loss(reference, x.repeat(1, up), generator=torch.Generator().manual_seed(7))
    reference_grads = gradients_of(reference_loss, reference)
    torch.testing.assert_close(loss, reference_loss, rtol=1e-12, atol=1e-12)
    n, m = tied.weight.shape
    torch.testing.assert_close(grads["weight"], reference_grads["weight"].reshape(up, n, down, m).sum((0, 2)), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grads["visible_bias"], reference_grads["visible_bias"].reshape(up, n).sum(0), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grads["hidden_bias"], reference_grads["hidden_bias"].reshape(down, m).sum(0), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(tied.upward_probs(x), torch.sigmoid(up * (x @ tied.weight) + tied.hidden_bias))


def test_pretraining_a_one_hidden_layer_dbm_is_cd_training_of_an_rbm():
    data = random_batch(50, 6, seed=4)
    model = DBM([6, 4]).double()
    pretrain_dbm(model, data, epochs_per_layer=3, batch_size=20, lr=0.1, k=2, momentum=0.5, generator=torch.Generator().manual_seed(5))

    g = torch.Generator().manual_seed(5)
    rbm = RBM.from_tensors(0.01 * torch.randn(6, 4, generator=g, dtype=torch.float64), base_rate_visible_bias(data), torch.zeros(4, dtype=torch.float64))
    optimizer, cd = torch.optim.SGD(rbm.parameters(), lr=0.1, momentum=0.5), CD(k=2)
    for _ in range(3):
        for rows in torch.randperm(50, generator=g).split(20):
            optimizer.zero_grad()
            cd.loss(rbm, data[rows], generator=g).backward()
            optimizer.step()
    torch.testing.assert_close(model.weights[0], rbm.weight, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(model.biases[0], rbm.visible_bias, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(model.biases[1], rbm.hidden_bias, rtol=1e-12, atol=1e-12)


def test_composition_keeps_outer_weights_halves_middle_ones_and_averages_interior_biases():
    g = torch.Generator().manual_seed(0)
    sizes = [5, 4, 3, 2]
    stack = [
        (torch.randn(a, b, generator=g, dtype=torch.float64), torch.randn(a, generator=g, dtype=torch.float64), torch.randn(b, generator=g, dtype=torch.float64))
        for a, b in zip(sizes[:-1], sizes[1:])
    ]
    model = DBM(sizes).double()
    model.compose_from_stack(stack)
    for index, scale in enumerate([1.0, 0.5, 1.0]):
        torch.testing.assert_close(model.weights[index], scale * stack[index][0])
    torch.testing.assert_close(model.biases[0], stack[0][1])
    torch.testing.assert_close(model.biases[1], (stack[0][2] + stack[1][1]) / 2)
    torch.testing.assert_close(model.biases[2], (stack[1][2] + stack[2][1]) / 2)
    torch.testing.assert_close(model.biases[3], stack[2][2])
    # Two hidden layers: the paper's p(h¹ | v, h²) = σ(vW¹ + W²h² + b¹) is the average of the doubled inputs.
    two = DBM([5, 4, 3]).double()
    two.compose_from_stack([stack[0], (stack[1][0], stack[1][1], stack[1][2])])
    v, h2 = random_batch(8, 5), random_batch(8, 3, seed=2)
    bottom_logits = 2 * v @ stack[0][0] + stack[0][2]  # p(h¹ | v) of the bottom RBM (doubled visible input)
    top_logits = 2 * h2 @ stack[1][0].T + stack[1][1]  # p(h¹ | h²) of the top RBM (doubled hidden input)
    composed = v @ two.weights[0] + h2 @ two.weights[1].T + two.biases[1]
    torch.testing.assert_close(composed, (bottom_logits + top_logits) / 2)


@pytest.mark.parametrize("sizes", [[6, 4, 3], [6, 4, 3, 2]])
def test_a_dbm_started_from_an_rbm_has_the_rbms_exact_log_likelihood_and_mean_field_posterior(sizes):
    from factories import random_rbm

    rbm = random_rbm(6, 4, scale=1.5, seed=3)
    states = all_binary_states(6, msb_first=True)
    model = DBM(sizes).double()
    start_dbm_from_rbm(model, states, rbm=rbm, upper_init_std=0.0, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(model.log_prob(states), rbm.log_prob(states))  # every visible state, by enumeration
    means = model.mean_field(states)[0]
    torch.testing.assert_close(means, torch.sigmoid(states @ rbm.weight + rbm.hidden_bias))  # q(h¹ | v) is exact
    # Small upper weights move it a little and only a little; a fresh generator draws them alike.
    nudged, again = DBM(sizes).double(), DBM(sizes).double()
    for target in (nudged, again):
        start_dbm_from_rbm(target, states, rbm=rbm, upper_init_std=0.01, generator=torch.Generator().manual_seed(5))
    assert 0 < (nudged.log_prob(states) - rbm.log_prob(states)).abs().max() < 0.05
    torch.testing.assert_close(nudged.weights[1], again.weights[1])


def test_starting_from_an_rbm_refuses_mismatched_models_in_one_line(tmp_path):
    from factories import random_rbm

    data = random_batch(10, 6)
    with pytest.raises(ValueError, match=r"rbm must be a binary RBM with weight shape \(6, 4\).*\(6, 5\)"):
        start_dbm_from_rbm(DBM([6, 4, 3]).double(), data, rbm=random_rbm(6, 5))
    with pytest.raises(ValueError, match="at least two hidden layers"):
        start_dbm_from_rbm(DBM([6, 4]).double(), data, rbm=random_rbm(6, 4))
    with pytest.raises(ValueError, match="upper_init_std must be a finite number ≥ 0, got -1"):
        start_dbm_from_rbm(DBM([6, 4, 3]).double(), data, rbm=random_rbm(6, 4), upper_init_std=-1)
    with pytest.raises(ValueError, match="rbm='nosuch' is neither a checkpoint file nor a zoo model"):
        start_dbm_from_rbm(DBM([6, 4, 3]).double(), data, rbm="nosuch")


def test_the_trainer_starts_a_dbm_from_a_saved_rbm_and_joint_training_goes_past_the_rbm(tmp_path):
    from pfzoo import zoo

    data = exact_samples(structured_dbm(), 500, seed=1)
    rbm = RBM(6, 4, init_std=0.01, generator=torch.Generator().manual_seed(2)).double()
    rbm.init_from_data(data)
    sgd(rbm, CD(k=1), data, updates=200, lr=0.1, seed=1)
    zoo.save(rbm, tmp_path / "rbm.pt")
    model = DBM([6, 4, 3]).double()
    objective = DBMPersistentMeanField(k=5, num_chains=50, pretrain=functools.partial(start_dbm_from_rbm, rbm=str(tmp_path / "rbm.pt")))
    Trainer(objective, epochs=1, batch_size=50, optimizer=functools.partial(torch.optim.SGD, lr=1e-9), seed=3, run_dir=tmp_path / "run",
            progress=False).fit(model, DataSplits("toy", train=data, test=data[:50]))
    start = mean_log_likelihood(rbm, data)
    assert abs(mean_log_likelihood(model, data) - start) < 1e-2  # the trainer's pretrain hook started it at the RBM
    # The second layer then models what the RBM's 4 hidden units cannot (measured: 0.32–0.38 nats over 4 seeds).
    sgd(model, DBMPersistentMeanField(k=5, num_chains=50), data, updates=300, lr=0.02, seed=4)
    assert mean_log_likelihood(model, data) > start + 0.2


def sgd(model, objective, data, *, updates, lr, seed, batch_size=50):
    """``updates`` SGD steps (momentum 0.5) of ``objective`` on random minibatches of ``data``."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.5)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(updates):
        optimizer.zero_grad()
        objective.loss(model, data[torch.randint(data.shape[0], (batch_size,), generator=generator)], generator=generator).backward()
        optimizer.step()


def test_pretraining_beats_base_rate_initialisation_in_exact_log_likelihood():
    data = exact_samples(structured_dbm(), 500, seed=1)
    baseline = mean_log_likelihood(base_rate_dbm([6, 4, 3], data), data)
    model = DBM([6, 4, 3]).double()
    pretrain_dbm(model, data, epochs_per_layer=10, batch_size=50, lr=0.05, k=1, generator=torch.Generator().manual_seed(4))
    assert mean_log_likelihood(model, data) > baseline + 0.5


def test_pretraining_is_deterministic_given_the_generator_and_reports_progress():
    data = random_batch(40, 6, seed=6)
    progress = []

    def pretrained(seed, report=None):
        model = DBM([6, 4, 3, 2]).double()
        pretrain_dbm(model, data, epochs_per_layer=2, batch_size=16, lr=0.05, k=1, generator=torch.Generator().manual_seed(seed), progress=report)
        return torch.cat([p.detach().flatten() for p in model.parameters()])

    first = pretrained(0, lambda done, total: progress.append((done, total)))
    assert torch.equal(first, pretrained(0)) and not torch.equal(first, pretrained(1))
    assert progress == [(i, 6) for i in range(1, 7)]


# ---- DBM metrics in the Trainer -------------------------------------------------------------------


def test_dbm_reconstruction_error_goes_through_the_first_mean_field_layer():
    model, v = random_dbm([6, 4, 3]), random_batch(30, 6)
    mu1 = model.mean_field(v, num_iterations=10)[0]
    expected = (v - torch.sigmoid(mu1 @ model.weights[0].T + model.biases[0])).pow(2).mean().item()
    assert reconstruction_error(model, v) == pytest.approx(expected, rel=1e-12)
    single = random_dbm([6, 4])  # one hidden layer: exactly the RBM's reconstruction error
    rbm = RBM.from_tensors(single.weights[0].detach(), single.biases[0].detach(), single.biases[1].detach())
    assert reconstruction_error(single, v) == pytest.approx(reconstruction_error(rbm, v), rel=1e-12)
    with pytest.raises(ValueError, match="v must be binary"):
        reconstruction_error(model, torch.full((3, 6), 0.5, dtype=torch.float64))


def test_pseudo_likelihood_only_where_the_free_energy_is_cheap():
    assert pseudo_likelihood_is_affordable(RBM(6, 30))
    assert pseudo_likelihood_is_affordable(DBM([6, 30, 10]))  # 2^10 terms per free energy
    assert not pseudo_likelihood_is_affordable(DBM([6, 3, 11]))  # 2^11: too slow for a per-epoch metric
    assert not pseudo_likelihood_is_affordable(DBM([6, 3, 4], max_enumeration_units=3))  # beyond the model's own limit

    class NoExactFreeEnergy(RBM):
        free_energy_cost = None

    assert not pseudo_likelihood_is_affordable(NoExactFreeEnergy(6, 3))


@pytest.mark.parametrize("sizes, has_pll", [([16, 6, 4], True), ([16, 3, 11], False)])
def test_trainer_logs_dbm_metrics(tmp_path, toy, sizes, has_pll):
    model = DBM(sizes, generator=torch.Generator().manual_seed(0))
    final = Trainer(DBMPersistentMeanField(k=1, num_chains=10), run_dir=tmp_path, epochs=1, batch_size=50, progress=False).fit(model, toy)
    keys = {"epoch", "loss", "seconds", "evaluation_seconds", "train_reconstruction_error", "test_reconstruction_error"}
    if has_pll:
        keys |= {"train_pseudo_log_likelihood", "test_pseudo_log_likelihood"}
    if len(sizes) >= 3:  # the top layer's share, watched while joint training (issue 48)
        keys |= {"train_top_layer_share", "test_top_layer_share"}
    keys |= {f"{split}_dead_units_h{layer}" for split in ("train", "test") for layer in range(1, len(sizes))}
    assert set(final) == keys
    assert final["test_reconstruction_error"] == pytest.approx(reconstruction_error(model, toy.test), rel=1e-6)
    if len(sizes) >= 3:
        assert final["test_top_layer_share"] == pytest.approx(model.top_layer_share(toy.test), rel=1e-6)
    means = model.mean_field(toy.test)
    for layer, layer_means in enumerate(means, start=1):
        dead = (layer_means.mean(0) < DEAD_UNIT_ACTIVITY).sum().item() / layer_means.shape[1]
        assert final[f"test_dead_units_h{layer}"] == pytest.approx(dead)


def test_dbm_pcd_config_instantiates_and_trains(tmp_path, toy):
    cfg = compose("train", ["trainer=dbm_pcd", "seed=3", "trainer.objective.pretrain.epochs_per_layer=1"])
    trainer = instantiate(cfg.trainer, run_dir=str(tmp_path), epochs=1, progress=False)
    objective = trainer.objective
    assert type(objective) is DBMPersistentMeanField and objective.k == 5 and objective.num_chains == 100
    assert isinstance(objective.pretrain, functools.partial) and objective.pretrain.func is pretrain_dbm
    assert trainer.settings.seed == 3
    model = DBM([16, 6, 4], generator=torch.Generator().manual_seed(0))
    initial = model.weights[1].detach().clone()
    final = trainer.fit(model, toy)
    assert bool(objective.pretrained) and final["epoch"] == 1
    assert (model.weights[1] - initial).abs().max() > 0.01


# ---- input validation -----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [dict(k=0), dict(num_chains=0), dict(mean_field_iterations=0), dict(k=1.5), dict(pretrain="yes")])
def test_objective_arguments_are_validated(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        DBMPersistentMeanField(**bad)


def test_objective_inputs_are_validated():
    model, objective = random_dbm([6, 4, 3]), DBMPersistentMeanField(num_chains=5)
    with pytest.raises(MissingCapability, match=r"needs a mean-field posterior over several hidden layers \(a DBM\); RBM has binary states"):
        objective.loss(RBM(6, 4), random_batch(4, 6).float())
    with pytest.raises(ValueError, match="batch must be binary"):
        objective.loss(model, torch.full((4, 6), 0.5, dtype=torch.float64))
    with pytest.raises(ValueError, match="batch must have 6 columns"):
        objective.loss(model, random_batch(4, 5))
    objective.loss(model, random_batch(4, 6))
    with pytest.raises(ValueError, match="persistent chains have 9 even units"):
        objective.loss(random_dbm([6, 4, 5]), random_batch(4, 6))


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(epochs_per_layer=0), "epochs_per_layer"),
        (dict(batch_size=0), "batch_size"),
        (dict(k=0), "k must"),
        (dict(lr=0.0), "lr"),
        (dict(lr=float("nan")), "lr"),
        (dict(momentum=1.0), "momentum"),
        (dict(progress="bar"), "progress"),
        (dict(lr=[0.05]), r"one per RBM \(2, bottom first\), got \[0.05\]"),
        (dict(lr=[0.05, -1.0]), "lr must be a positive finite number or a list of them"),
        (dict(lr=[0.05, True]), "lr must be a positive finite number or a list of them"),
    ],
)
def test_pretrain_arguments_are_validated(bad, match):
    arguments = dict(epochs_per_layer=1, batch_size=10, lr=0.05, k=1) | bad
    with pytest.raises(ValueError, match=match):
        pretrain_dbm(random_dbm([6, 4, 3]), random_batch(10, 6), **arguments)


def test_one_learning_rate_for_every_rbm_is_the_list_of_it_and_a_list_sets_each_rbms():
    data = (torch.rand(200, 8, generator=torch.Generator().manual_seed(0)) < 0.4).double()

    def pretrained(lr):
        model = DBM([8, 6, 7]).double()
        pretrain_dbm(model, data, epochs_per_layer=2, batch_size=50, lr=lr, generator=torch.Generator().manual_seed(1))
        return model.state_dict()

    one, listed, top_only = pretrained(0.05), pretrained([0.05, 0.05]), pretrained([0.05, 0.2])
    assert all(torch.equal(one[name], listed[name]) for name in one)
    assert torch.equal(one["weights.0"], top_only["weights.0"])  # the bottom RBM trains first, on the same stream
    assert not torch.equal(one["weights.1"], top_only["weights.1"])


def test_pretraining_warns_when_an_rbm_leaves_most_of_its_hidden_units_dead(caplog):
    """The top RBM's doubled hidden layer doubles its gradient; too large a step turns all its units off for good."""
    data = (torch.rand(500, 20, generator=torch.Generator().manual_seed(0)) < 0.4).double()
    for lr, dead in ((0.05, False), ([0.05, 1.0], True)):
        caplog.clear()
        with caplog.at_level("WARNING", logger="pfzoo.training.dbm"):
            pretrain_dbm(DBM([20, 16, 30]).double(), data, epochs_per_layer=5, batch_size=50, lr=lr,
                         generator=torch.Generator().manual_seed(1))
        warned = [record.getMessage() for record in caplog.records]
        assert bool(warned) == dead, warned
    assert warned == ["pretrained RBM 2/2 has 30 of its 30 hidden units dead (mean posterior probability below 0.01 over "
                      "its training inputs), and joint training rarely revives them: lower its learning rate (pretrain.lr, "
                      "now 1; a list gives one per RBM)"]


def test_pretrain_inputs_are_validated():
    with pytest.raises(MissingCapability, match=r"needs a mean-field posterior over several hidden layers \(a DBM\); RBM has binary states"):
        pretrain_dbm(RBM(6, 4), random_batch(10, 6).float())
    with pytest.raises(ValueError, match="data must be binary"):
        pretrain_dbm(random_dbm([6, 4, 3]), torch.full((10, 6), 0.5, dtype=torch.float64))
    with pytest.raises(ValueError, match="data must hold at least one example"):
        pretrain_dbm(random_dbm([6, 4, 3]), torch.zeros(0, 6, dtype=torch.float64))
    with pytest.raises(ValueError, match="stack must hold 2 RBMs"):
        random_dbm([6, 4, 3]).compose_from_stack([])
    with pytest.raises(ValueError, match=r"stack\[1\] must hold tensors"):
        DBM([6, 4, 3]).compose_from_stack([(torch.zeros(6, 4), torch.zeros(6), torch.zeros(4)), (torch.zeros(4, 2), torch.zeros(4), torch.zeros(2))])


def test_a_dbm_epoch_reports_its_diagnostics_time_as_evaluation_seconds(tmp_path, toy, monkeypatch):
    """The per-epoch pseudo-likelihood of a DBM (exact free energies) once hid ~95% of an epoch's wall time: it is now
    logged as ``evaluation_seconds`` beside the training ``seconds``. A diagnostic made to take 0.2 s per split must
    show up there, and not in ``seconds``."""
    import time

    from pfzoo.training import trainer as trainer_module

    exact = trainer_module.pseudo_log_likelihood

    def slow_pseudo_log_likelihood(*args, **kwargs):
        time.sleep(0.2)
        return exact(*args, **kwargs)

    monkeypatch.setattr(trainer_module, "pseudo_log_likelihood", slow_pseudo_log_likelihood)
    model = DBM([16, 6, 4], generator=torch.Generator().manual_seed(0))
    Trainer(DBMPersistentMeanField(k=1, num_chains=10), run_dir=tmp_path, epochs=2, batch_size=50, progress=False).fit(model, toy)
    for record in read_metrics(tmp_path):
        assert record["evaluation_seconds"] >= 0.4 > record["seconds"]
