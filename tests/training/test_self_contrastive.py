"""Self-contrastive estimation: its log-odds and its gradient at a refresh (maximum likelihood's, scaled by ν/(1+ν)), the
copy's chains and refreshes, exact resume, recovery of a known model (KL by enumeration; a Gaussian in closed form), and
its refusals."""

import copy
import math
from functools import partial

import pytest
import torch
from factories import enumerated_samples, random_dbm, random_gaussian, random_ica, random_rbm
from torch.nn import functional as F

from pfzoo.data import DataSplits
from pfzoo.kernels import run_chain
from pfzoo.models import ICA, RBM, Gaussian, MissingCapability
from pfzoo.training import SelfContrastive, Trainer


def random_batch(rows, width, seed=1):
    return torch.bernoulli(torch.full((rows, width), 0.4, dtype=torch.float64), generator=torch.Generator().manual_seed(seed))


def test_at_a_refresh_the_gradient_is_the_maximum_likelihood_gradient_scaled_by_nu_over_one_plus_nu():
    """Right after a refresh G ≡ −log ν, so ∇_θ L = ν/(1+ν) [mean ∇F(data) − mean ∇F(copy's samples)] (the PCD surrogate's
    gradient with the copy's chains) and c's gradient is exactly 0."""
    model, batch = random_rbm(7, 4, seed=3), random_batch(40, 7)
    objective = SelfContrastive(k=2, num_chains=30)
    loss = objective.loss(model, batch, generator=torch.Generator().manual_seed(5))
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    negatives, nu = objective.chains, 30 / 40
    model.zero_grad()
    surrogate = nu / (1 + nu) * (model.free_energy(batch).mean() - model.free_energy(negatives).mean())
    surrogate.backward()
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(grads[name], parameter.grad, rtol=1e-10, atol=1e-12, msg=name)
    assert objective.c.grad.abs().item() < 1e-15


def test_the_log_odds_contrast_the_model_with_its_frozen_copy_and_the_chains_move_under_the_copy():
    model, batch = random_rbm(6, 3, seed=1), random_batch(20, 6)
    objective = SelfContrastive(k=1, num_chains=10)
    objective.loss(model, batch, generator=torch.Generator().manual_seed(0))  # refreshes: the copy is the model now
    frozen = copy.deepcopy(model)
    with torch.no_grad():
        model.weight.add_(0.3)
        objective.c.fill_(0.7)
    chains = objective.chains.clone()
    generator, replay = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    objective.loss(model, batch, generator=generator)  # no refresh (refresh_every=0 and no prepare): the copy stays
    expected, _ = run_chain(*frozen.gibbs_chain(), chains, 1, generator=replay)
    assert torch.equal(objective.chains, expected.position)
    x = batch[:5]
    direct = frozen.free_energy(x) - model.free_energy(x) + 0.7 - math.log(10 / 20)
    torch.testing.assert_close(objective.log_odds(model, x, 10 / 20), direct.detach())


def test_the_copy_is_refreshed_every_epoch_or_every_k_updates():
    model, batch = random_rbm(5, 2, seed=0), random_batch(10, 5)
    per_epoch = SelfContrastive(num_chains=10)
    per_epoch.prepare(model, batch)
    with torch.no_grad():
        model.visible_bias.add_(1.0)
    per_epoch.loss(model, batch)
    assert not torch.equal(per_epoch.frozen, torch.nn.utils.parameters_to_vector(model.parameters()))
    per_epoch.prepare(model, batch)
    assert torch.equal(per_epoch.frozen, torch.nn.utils.parameters_to_vector(model.parameters()))
    every_two = SelfContrastive(num_chains=10, refresh_every=2)
    snapshots = []
    for step in range(5):
        with torch.no_grad():
            model.visible_bias.add_(1.0)
        every_two.loss(model, batch)
        snapshots.append(every_two.frozen[-7:-2].clone())  # the visible biases' place in the flat vector (weight first)
    assert [snapshot[0].item() for snapshot in snapshots] == [snapshots[0][0].item()] * 2 + [snapshots[2][0].item()] * 2 + [snapshots[4][0].item()]
    assert snapshots[2][0].item() == snapshots[0][0].item() + 2
    assert every_two.updates.item() == 5


@pytest.mark.parametrize("refresh_every", [0, 3])
def test_resumed_training_is_bit_identical_to_training_in_one_go(tmp_path, refresh_every):
    data = DataSplits("binary", train=random_batch(60, 6), test=random_batch(10, 6, seed=2))

    def trainer(run_dir, epochs):
        return Trainer(SelfContrastive(k=1, num_chains=15, refresh_every=refresh_every), run_dir=run_dir, epochs=epochs,
                       batch_size=20, progress=False)

    one_go = random_rbm(6, 3, seed=3)
    whole = trainer(tmp_path / "one_go", 4)
    whole.fit(one_go, data)
    trainer(tmp_path / "resumed", 2).fit(random_rbm(6, 3, seed=3), data)
    resumed = random_rbm(6, 3, seed=4)
    second = trainer(tmp_path / "resumed", 4)
    second.fit(resumed, data, resume=True)
    for name, parameter in one_go.named_parameters():
        assert torch.equal(parameter, dict(resumed.named_parameters())[name]), name
    assert second.objective.c.item() == whole.objective.c.item()
    assert torch.equal(second.objective.chains, whole.objective.chains)


@pytest.mark.slow
def test_self_contrastive_estimation_recovers_an_rbm_from_its_samples(tmp_path):
    """Consistency: the 8×3 RBM of the NCE recovery test, trained by self-contrastive estimation (copy refreshed every
    epoch, 1000 persistent chains advanced one Gibbs sweep per update, Adam, 20 epochs) on 10⁵ exact samples, reaches
    KL(true ‖ learned) < 0.01 nats (measured 0.0043; the initial model's 0.22)."""
    truth = random_rbm(8, 3, scale=2.0, seed=2)
    data, states, log_p = enumerated_samples(truth, 100_000, 1)
    model = RBM(8, 3, init_std=0.1, generator=torch.Generator().manual_seed(0)).double()
    model.init_from_data(data)

    def kl():
        with torch.no_grad():
            return (log_p.exp() * (log_p - model.log_prob(states))).sum().item()

    initial = kl()
    Trainer(SelfContrastive(k=1, num_chains=1000), partial(torch.optim.Adam, lr=0.05), run_dir=tmp_path, epochs=20, batch_size=1000,
            learning_rate_decay=0.3, progress=False, checkpoint_every=100).fit(model, DataSplits("rbm", train=data, test=data[:10]))
    assert kl() < 0.01 < initial / 10, (kl(), initial)


@pytest.mark.parametrize("family", ["ica", pytest.param("gaussian", marks=pytest.mark.slow)])
def test_continuous_models_are_recovered_with_the_copys_exact_sampler_or_hmc_chains(tmp_path, family):
    """Complete ICA samples exactly, so the copy's draws are fresh exact samples (no chains); a Gaussian told not to
    use its exact sampler (``samples_exactly = False`` on the instance) is drawn by persistent HMC chains. Each, fitted by self-contrastive estimation to
    20,000 draws of a known model of its family, reaches KL(true ‖ learned) < 0.02 nats, the two exact log-densities
    averaged over 10⁵ draws of the truth (measured: ICA 0.0037, Gaussian 0.0070)."""
    truth = random_ica(3, seed=0) if family == "ica" else random_gaussian(3, seed=0)
    model = (ICA(3, generator=torch.Generator().manual_seed(0)) if family == "ica" else Gaussian(3)).double()
    if family == "gaussian":
        model.samples_exactly = False
    data = truth.sample(20_000, generator=torch.Generator().manual_seed(1))
    objective = SelfContrastive(num_chains=200)
    Trainer(objective, partial(torch.optim.Adam, lr=0.05), run_dir=tmp_path, epochs=10, batch_size=200, learning_rate_decay=0.5,
            progress=False, checkpoint_every=100).fit(model, DataSplits(family, train=data, test=data[:10]))
    assert (objective.chains.numel() == 0) == (family == "ica")
    x = truth.sample(100_000, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        kl = (truth.log_prob(x) - model.log_prob(x)).mean().item()
    assert kl < 0.02, kl


def test_refusals_are_one_line_and_name_what_applies():
    with pytest.raises(MissingCapability) as refused:
        SelfContrastive().check(random_dbm([4, 3, 2]))
    message = str(refused.value)
    assert message.startswith("SelfContrastive needs an exact free energy at its size and either a Gibbs chain over its visible units")
    assert "DBM has binary states — use trainer=" in message and "\n" not in message


@pytest.mark.parametrize("arguments, match", [
    ({"k": 0}, "k must be a positive integer"),
    ({"num_chains": 0}, "num_chains must be a positive integer"),
    ({"refresh_every": -1}, "refresh_every must be a non-negative integer"),
    ({"step_size": 0.0}, "step_size must be greater than 0"),
])
def test_bad_arguments_are_refused_naming_them(arguments, match):
    with pytest.raises(ValueError, match=match):
        SelfContrastive(**arguments)


def test_the_loss_value_at_a_refresh_is_the_logistic_loss_of_constant_log_odds():
    """With G ≡ −log ν at a refresh: L = −[log σ(−log ν) + ν log σ(log ν)] = log(1 + ν) + ν log(1 + 1/ν)."""
    model, batch = random_rbm(5, 3, seed=0), random_batch(10, 5)
    loss = SelfContrastive(num_chains=30).loss(model, batch, generator=torch.Generator().manual_seed(0))
    nu = 3.0
    expected = F.softplus(torch.tensor(math.log(nu), dtype=torch.float64)) + nu * F.softplus(torch.tensor(-math.log(nu), dtype=torch.float64))
    torch.testing.assert_close(loss, expected, rtol=1e-12, atol=1e-12)
