"""DBM learning with a parallel-tempering negative phase: its particles are the β = 1 replica of tempered odd/even
chains and sample a bimodal DBM's exact marginal (χ² against enumeration) where the plain particles stay in one mode;
its gradient is mean-field minus particle statistics; its state resumes bit for bit; it trains through the Trainer."""

from functools import partial

import pytest
import torch
from factories import all_binary_states, chi_square_p_value, random_dbm

from pfzoo.data import DataSplits
from pfzoo.kernels import ParallelTempering
from pfzoo.models import DBM, RBM, MissingCapability
from pfzoo.sampling import bernoulli
from pfzoo.training import DBMParallelTempering, DBMPersistentMeanField, Trainer, pretrain_dbm
from pfzoo.training.dbm import particle_layers

P_VALUE_FLOOR = 1e-4  # fixed seeds; a correct sampler fails with probability 1e-4


def bimodal_dbm(num_visible=8, strength=3.0, tilt=0.5) -> DBM:
    """A 3-layer DBM with two visible modes (all off, all on; masses about 1 : e^tilt): first-layer hidden unit 0
    switches every visible unit (as tests/kernels' bimodal RBM), so block Gibbs must turn on half of them at once while
    it is off; its other unit and the top unit are weak random features."""
    g = torch.Generator().manual_seed(0)
    first = torch.stack([torch.full((num_visible,), 2 * strength, dtype=torch.float64),
                         0.5 * torch.randn(num_visible, generator=g, dtype=torch.float64)], 1)
    top = torch.tensor([[0.3], [-0.4]], dtype=torch.float64)
    biases = [torch.full((num_visible,), -strength, dtype=torch.float64), torch.tensor([-strength * num_visible + tilt, 0.0], dtype=torch.float64),
              torch.zeros(1, dtype=torch.float64)]
    return DBM.from_tensors([first, top], biases)


def even_marginal(model):
    """p(x_even) of every even state (v, h²), first unit most significant: the even/odd RBM's visible marginal."""
    rbm = model.even_odd_rbm()
    states = all_binary_states(model.num_even_units, msb_first=True)
    return torch.softmax(-rbm.free_energy(states).detach(), 0)


def test_tempered_particles_sample_the_exact_even_marginal_where_plain_particles_stay_in_one_mode():
    model = bimodal_dbm()
    probabilities = even_marginal(model)
    lower_mode = torch.zeros(20, model.num_visible, dtype=torch.float64)  # every particle starts near all-off
    plain = DBMPersistentMeanField(k=150, num_chains=3000)
    plain.loss(model, lower_mode, generator=torch.Generator().manual_seed(1))
    assert chi_square_p_value(plain.chains, probabilities) < 1e-10
    tempered = DBMParallelTempering(k=150, num_chains=3000, num_replicas=8, min_beta=0.1)
    tempered.loss(model, lower_mode, generator=torch.Generator().manual_seed(1))
    assert tempered.chains.shape == (8 * 3000, model.num_even_units)
    assert chi_square_p_value(tempered.chains[-3000:], probabilities) > P_VALUE_FLOOR
    assert 0.0 < tempered.epoch_metrics()["swap_acceptance_min"] <= 1.0


def test_the_gradient_is_mean_field_minus_the_target_replica_statistics():
    model, batch = random_dbm([6, 4, 3]), torch.bernoulli(torch.full((40, 6), 0.5, dtype=torch.float64), generator=torch.Generator().manual_seed(1))
    objective = DBMParallelTempering(k=3, num_chains=30, num_replicas=4, min_beta=0.3, mean_field_iterations=7)
    loss = objective.loss(model, batch, generator=torch.Generator().manual_seed(5))

    replay = torch.Generator().manual_seed(5)
    rows = torch.randint(40, (30,), generator=replay)
    hidden = bernoulli(torch.full((30, model.num_even_units - 6), 0.5, dtype=torch.float64), generator=replay)
    kernel, target = model.even_odd_rbm().gibbs_chain()
    tempering = ParallelTempering(kernel, objective.betas)
    state = tempering.init(torch.cat([batch[rows], hidden], 1), target)
    for _ in range(3):
        state, _ = tempering.step(state, target, generator=replay)
    assert torch.equal(objective.chains, state.replicas.position)

    particles = particle_layers(model, state.position, model.even_odd_rbm().hidden_probs(state.position).detach())
    data_layers = [batch, *model.mean_field(batch, num_iterations=7)]
    model.zero_grad()
    loss.backward()
    for i in range(2):
        expected = -(data_layers[i].T @ data_layers[i + 1] / 40 - particles[i].T @ particles[i + 1] / 30)
        torch.testing.assert_close(model.weights[i].grad, expected.detach(), rtol=1e-10, atol=1e-12)
    for i in range(3):
        torch.testing.assert_close(model.biases[i].grad, -(data_layers[i].mean(0) - particles[i].mean(0)).detach(), rtol=1e-10, atol=1e-12)


@pytest.fixture
def toy():
    g = torch.Generator().manual_seed(0)
    rates = torch.linspace(0.1, 0.9, 8, dtype=torch.float64)
    return DataSplits("toy", train=torch.bernoulli(rates.expand(200, 8), generator=g), test=torch.bernoulli(rates.expand(40, 8), generator=g))


def trainer(run_dir, epochs):
    objective = DBMParallelTempering(k=2, num_chains=20, num_replicas=3, min_beta=0.3, adapt_ladder=True,
                                     pretrain=partial(pretrain_dbm, epochs_per_layer=2, batch_size=50))
    return Trainer(objective, partial(torch.optim.SGD, lr=0.05, momentum=0.5), run_dir=run_dir, epochs=epochs, batch_size=50, progress=False)


def test_training_resumes_bit_for_bit_without_pretraining_again_and_logs_the_swap_acceptance(tmp_path, toy):
    in_one_go = DBM([8, 4, 3], generator=torch.Generator().manual_seed(0)).double()
    trainer(tmp_path / "whole", 4).fit(in_one_go, toy)
    resumed = DBM([8, 4, 3], generator=torch.Generator().manual_seed(0)).double()
    trainer(tmp_path / "split", 2).fit(resumed, toy)
    again = DBM([8, 4, 3], generator=torch.Generator().manual_seed(0)).double()
    trainer(tmp_path / "split", 4).fit(again, toy, resume=True)
    for a, b in zip(in_one_go.parameters(), again.parameters()):
        assert torch.equal(a, b)
    metrics = (tmp_path / "whole" / "metrics.jsonl").read_text()
    assert "swap_acceptance_min" in metrics


def test_models_without_a_mean_field_posterior_are_refused_in_one_line():
    with pytest.raises(MissingCapability, match="mean"):
        DBMParallelTempering().loss(RBM(4, 2), torch.zeros(3, 4), generator=torch.Generator())
