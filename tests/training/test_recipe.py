"""fit_recipe: a composed recipe's trainer on given data, a given model or dtype, burn-in of stateful objectives."""

import pytest
import torch

from pfzoo.cli import compose
from pfzoo.data import DataSplits
from pfzoo.models import LinearGenerative, ProductOfExperts
from pfzoo.training import EMHMC, ExactMaximumLikelihood
from pfzoo.training.recipe import fit_recipe


def laplace_data(num_visible: int = 4, seed: int = 0) -> DataSplits:
    """Rows x = A s with Laplace sources s: a complete Laplace POE with filters A⁻¹ is the true model."""
    g = torch.Generator().manual_seed(seed)
    mixing = torch.randn(num_visible, num_visible, generator=g)
    u = torch.rand(600, num_visible, generator=g) - 0.5
    sources = -u.sign() * torch.log1p(-2 * u.abs())  # Laplace(0, 1) by the inverse CDF
    x = sources @ mixing.T
    return DataSplits("laplace", x[:500], x[500:])


def oracle_cfg(*overrides):
    return compose("train", ["+experiment=hais_poe_laplace", "model.num_experts=4", "trainer.epochs=6", "trainer.progress=false", "trainer.optimizer.max_iter=20", *overrides])


def test_builds_the_recipe_model_and_trains_it_in_the_asked_dtype_until_the_loss_settles():
    data = laplace_data()
    fit = fit_recipe(oracle_cfg("trainer.stop_tolerance=1e-4"), data, dtype=torch.float64)
    assert isinstance(fit.model, ProductOfExperts) and fit.model.dtype == torch.float64 and fit.model.num_visible == 4
    losses = [r["loss"] for r in fit.records]
    assert losses[-1] < losses[0] - 0.5 and fit.error is None and fit.seconds > 0
    assert fit.stop_reason is not None and len(fit.records) < 6  # converged: the trainer's stop_tolerance ended the run
    assert 0 < fit.optimizer_state["state"][0]["n_iter"] <= 20 * len(fit.records)
    exact = ExactMaximumLikelihood().loss(fit.model, data.train.double()).item()
    assert exact == pytest.approx(losses[-1], abs=1e-3)


def test_same_seed_same_model_and_the_seed_draws_the_initial_filters():
    data = laplace_data()
    first, second = (fit_recipe(oracle_cfg("trainer.epochs=1", "seed=4"), data).model for _ in range(2))
    assert torch.equal(first.filters, second.filters)
    untrained = ProductOfExperts(4, 4, generator=torch.Generator().manual_seed(4))
    fit = fit_recipe(oracle_cfg("trainer.epochs=1", "trainer.optimizer.max_iter=1", "trainer.optimizer.lr=1e-12", "seed=4"), data)
    assert torch.allclose(fit.model.filters, untrained.filters, atol=1e-6)


def test_trains_a_model_passed_in_place_and_records_no_stop_when_epochs_run_out():
    model = ProductOfExperts(4, 4, generator=torch.Generator().manual_seed(1))
    before = model.filters.detach().clone()
    fit = fit_recipe(oracle_cfg("trainer.epochs=2"), laplace_data(), model=model)
    assert fit.model is model and not torch.equal(model.filters, before)
    assert fit.stop_reason is None and len(fit.records) == 2


def test_burn_in_runs_the_objective_prepare_before_the_first_epoch(monkeypatch):
    calls = []
    original = EMHMC.prepare

    def spy(self, model, data, *, generator=None):
        calls.append(model.basis.detach().clone())
        return original(self, model, data, generator=generator)

    monkeypatch.setattr(EMHMC, "prepare", spy)
    model = LinearGenerative.from_tensors(torch.eye(4), prior="laplace", noise_std=0.1)
    cfg = compose("train", ["+experiment=models_sparse_coding", "trainer.epochs=1", "trainer.progress=false", "trainer.batch_size=250",
                            "trainer.objective.num_hmc_steps=1", "trainer.objective.batch_hmc_steps=1"])
    fit = fit_recipe(cfg, laplace_data(), model=model, burn_in=3, generator=torch.Generator().manual_seed(0))
    assert len(calls) == 4 and all(torch.equal(c, torch.eye(4)) for c in calls[:4])  # 3 burn-in sweeps, then epoch 1's
    assert fit.error is None and len(fit.records) == 1
    assert isinstance(fit.objective, EMHMC) and fit.objective.latents.shape == (500, 4)  # the trained objective's state


def test_burn_in_needs_a_stateful_objective_and_a_count():
    with pytest.raises(ValueError, match="prepare"):
        fit_recipe(oracle_cfg(), laplace_data(), burn_in=2)
    with pytest.raises(ValueError, match="burn_in"):
        fit_recipe(oracle_cfg(), laplace_data(), burn_in=-1)


def test_a_non_finite_loss_is_reported_not_raised(monkeypatch):
    monkeypatch.setattr(ExactMaximumLikelihood, "loss", lambda self, model, batch, generator=None: model.filters.sum() * float("nan"))
    fit = fit_recipe(oracle_cfg(), laplace_data())
    assert fit.error is not None and "loss is nan" in fit.error and fit.optimizer_state is None and fit.stop_reason is None
