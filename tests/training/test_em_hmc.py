"""EM with HMC E-steps: the E-step samples the posterior, the M-step reaches the maximum-likelihood fit of a
linear-Gaussian model (closed form), constraints are applied, and state survives checkpoints."""

from functools import partial

import pytest
import torch
from torch.distributions import MultivariateNormal

from pfzoo.data import DataSplits
from pfzoo.models import LinearGenerative
from pfzoo.training import EMHMC, Trainer


def make_data(seed=0, num_train=2000):
    g = torch.Generator().manual_seed(seed)
    truth = LinearGenerative.from_tensors(torch.randn(4, 4, generator=g, dtype=torch.float64), prior="gaussian", noise_std=0.3)
    return truth, DataSplits("linear", train=truth.sample(num_train, generator=g), test=truth.sample(500, generator=g))


def test_e_step_draws_from_the_exact_posterior_of_a_linear_gaussian_model():
    truth, data = make_data()
    x = data.train[:1].expand(4000, -1).contiguous()
    objective = EMHMC(num_hmc_steps=30, step_size=0.1, num_leapfrog=10)
    objective.prepare(truth, x, generator=torch.Generator().manual_seed(1))
    basis, precision_noise = truth.basis.detach(), 1 / 0.09
    posterior_precision = torch.eye(4, dtype=torch.float64) + precision_noise * basis.T @ basis
    posterior_covariance = torch.linalg.inv(posterior_precision)
    posterior_mean = posterior_covariance @ (precision_noise * basis.T @ x[0])
    samples = objective.latents
    stderr = posterior_covariance.diagonal().sqrt() / 4000**0.5
    assert ((samples.mean(0) - posterior_mean).abs() < 5 * stderr).all()
    torch.testing.assert_close(torch.cov(samples.T), posterior_covariance, atol=0.1 * posterior_covariance.diagonal().max().item(), rtol=0)


def test_em_reaches_the_maximum_likelihood_fit_of_a_linear_gaussian_model(tmp_path):
    truth, data = make_data()
    sample_covariance = data.train.T @ data.train / data.train.shape[0]
    best = MultivariateNormal(torch.zeros(4, dtype=torch.float64), sample_covariance).log_prob(data.train).mean().item()
    model = LinearGenerative(4, prior="gaussian", noise_std=0.3, init_std=0.5, generator=torch.Generator().manual_seed(2)).double()
    start = model.log_prob(data.train).mean().item()
    trainer = Trainer(EMHMC(num_hmc_steps=5, step_size=0.1), partial(torch.optim.Adam, lr=0.01), run_dir=tmp_path, epochs=80,
                      batch_size=200, progress=False)
    trainer.fit(model, data)
    end = model.log_prob(data.train).mean().item()
    # one persistent posterior sample per example leaves a small stochastic-EM noise floor: measured 0.05 nats below
    assert end > start + 1.0 and end > best - 0.1, (start, end, best)


def test_basis_norm_constraint_is_applied_after_every_step(tmp_path):
    _, data = make_data(num_train=300)
    model = LinearGenerative(4, prior="laplace", noise_std=0.3, init_std=1.0, max_basis_norm=0.5, generator=torch.Generator().manual_seed(3)).double()
    Trainer(EMHMC(num_hmc_steps=2), partial(torch.optim.SGD, lr=0.1), run_dir=tmp_path, epochs=2, batch_size=100, progress=False).fit(model, data)
    assert (model.basis.norm(dim=0) <= 0.5 + 1e-12).all()


def test_latents_are_checkpointed_and_resume_exactly(tmp_path):
    _, data = make_data(num_train=200)

    def run(epochs, resume):
        model = LinearGenerative(4, prior="laplace", noise_std=0.3, generator=torch.Generator().manual_seed(4)).double()
        trainer = Trainer(EMHMC(num_hmc_steps=2), partial(torch.optim.Adam, lr=0.01), run_dir=tmp_path / "run", epochs=epochs, batch_size=50, progress=False)
        trainer.fit(model, data, resume=resume)
        return model.basis.detach().clone(), trainer.objective.latents.clone()

    straight = run(4, resume=False)
    (tmp_path / "run").rename(tmp_path / "straight")
    run(2, resume=False)
    resumed = run(4, resume=True)
    torch.testing.assert_close(resumed[0], straight[0])
    torch.testing.assert_close(resumed[1], straight[1])


def test_bad_arguments_and_calls():
    for kwargs, name in [(dict(num_hmc_steps=0), "num_hmc_steps"), (dict(step_size=0.0), "step_size"), (dict(target_acceptance=1.5), "target_acceptance")]:
        with pytest.raises(ValueError, match=name):
            EMHMC(**kwargs)
    with pytest.raises(ValueError, match="prepare"):
        EMHMC().loss(LinearGenerative(3), torch.zeros(2, 3))
    from pfzoo.models import RBM

    with pytest.raises(ValueError, match="latent-variable"):
        EMHMC().prepare(RBM(3, 2), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="max_basis_norm"):
        LinearGenerative(3, max_basis_norm=0.0)


def test_each_e_step_records_its_mean_acceptance_and_the_adapted_step_size():
    truth, data = make_data(num_train=50)
    objective, generator = EMHMC(num_hmc_steps=2, step_size=0.5, target_acceptance=0.8), torch.Generator().manual_seed(3)
    steps = []
    for _ in range(3):
        objective.prepare(truth, data.train, generator=generator)
        steps.append(objective.step_size.item())
    assert [step for _, step in objective.adaptation] == steps and len(set(steps)) == 3
    assert all(0.0 <= acceptance <= 1.0 for acceptance, _ in objective.adaptation)


def test_batch_e_steps_refresh_only_the_batch_latents_and_can_be_switched_off():
    truth, data = make_data(num_train=50)
    for steps in (0, 3):
        objective = EMHMC(num_hmc_steps=1, batch_hmc_steps=steps)
        objective.prepare(truth, data.train, generator=torch.Generator().manual_seed(5))
        before = objective.latents.clone()
        rows = torch.arange(10, 20)
        objective.loss(truth, data.train[rows], generator=torch.Generator().manual_seed(6), indices=rows)
        changed = (objective.latents != before).any(-1)
        assert not changed[:10].any() and not changed[20:].any()
        assert changed[10:20].any() == (steps > 0)
    with pytest.raises(ValueError, match="batch_hmc_steps"):
        EMHMC(batch_hmc_steps=-1)


def test_the_e_step_starts_each_example_from_the_rank_whose_minibatches_advanced_it(monkeypatch):
    """Under a process group a minibatch shard's transitions stay on its rank: the merge takes each example's latent
    from the rank that advanced it since the last E-step, and the common copy (rank 0's) for the others."""
    from pfzoo import distributed

    objective = EMHMC()
    objective.latents = torch.arange(8.0).view(4, 2)
    objective.batch_advanced = torch.tensor([True, False, False, False])
    other = (-torch.arange(8.0).view(4, 2), torch.tensor([False, True, True, False]))
    monkeypatch.setattr(distributed, "all_gather", lambda item: [item, other])  # this rank is rank 0 of two
    objective._merge_rank_copies()
    assert objective.latents.tolist() == [[0.0, 1.0], [-2.0, -3.0], [-4.0, -5.0], [6.0, 7.0]]


def test_a_state_saved_before_batch_advanced_existed_still_loads():
    saved = {"step_size": torch.tensor(0.1, dtype=torch.float64), "latents": torch.ones(5, 3)}
    objective = EMHMC()
    objective.load_state_dict(saved)
    assert torch.equal(objective.latents, torch.ones(5, 3)) and objective.batch_advanced.tolist() == [False] * 5
