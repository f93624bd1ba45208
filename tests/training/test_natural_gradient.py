"""The natural gradient (Sohl-Dickstein thesis ch. 4): closed-form Fisher matrices against their sample estimates,
Amari's WᵀW form against the natural gradient under its metric, damping's limit, the structures, reproducibility,
refusals, and the race against plain gradient descent (after Fig. 4.1, and exact-ML ICA through the Trainer)."""

import json
from pathlib import Path

import pytest
import torch
from factories import all_binary_states, random_rbm

from pfzoo.data import DataSplits
from pfzoo.models import RBM, Gaussian
from pfzoo.models.capabilities import MissingCapability
from pfzoo.models.ica import ICA
from pfzoo.studies.natural_gradient import figure_4_1, fisher_checks, fisher_z_scores, ica_race, random_mixing
from pfzoo.training import PCD, ExactMaximumLikelihood, NaturalGradient, Trainer
from pfzoo.training.natural_gradient import (
    energy_gradients, laplace_ica_fisher, precondition_direction, relative_gradient,
)


def ica_with_data(seed: int = 0, size: int = 3, count: int = 500):
    generator = torch.Generator().manual_seed(seed)
    model = ICA.from_tensors(random_mixing(size, 4.0, generator=generator))
    truth = ICA.from_tensors(random_mixing(size, 4.0, generator=generator))
    return model, truth.sample(count, generator=generator)


def ml_gradient(model, batch):
    model.zero_grad()
    ExactMaximumLikelihood().loss(model, batch).backward()
    return model.filters.grad.clone()


# (b) closed forms against Monte Carlo ------------------------------------------------------------------------------

def test_closed_form_fisher_matches_its_sample_estimate_within_monte_carlo_error():
    scores = fisher_checks(num_samples=5000, seed=3)
    assert scores["ica"] < 5 and scores["gaussian_mean"] < 5, scores


def test_the_fisher_check_rejects_a_wrong_closed_form():
    model, _ = ica_with_data(seed=4)
    gradients = energy_gradients(model, model.sample(5000, generator=torch.Generator().manual_seed(5)))
    mixing = torch.linalg.inv(model.filters.detach()).contiguous()
    transform = torch.kron(torch.eye(3, dtype=torch.float64), mixing)
    wrong = transform @ (2 * torch.eye(9, dtype=torch.float64)) @ transform.T  # no (ij, ji) correlations, Var|s| = 2
    assert fisher_z_scores(gradients, laplace_ica_fisher(model.filters.detach())).max() < 5
    assert fisher_z_scores(gradients, wrong).max() > 10


def test_data_fisher_at_the_truth_estimates_the_fisher():
    model, _ = ica_with_data(seed=6)
    samples = model.sample(20000, generator=torch.Generator().manual_seed(7))
    measured = NaturalGradient(ExactMaximumLikelihood(), "data_fisher").measure(model, samples)
    closed = laplace_ica_fisher(model.filters.detach())
    assert (measured - closed).abs().max() < 0.05 * closed.abs().max()


def test_rbm_fisher_from_gibbs_samples_matches_enumeration():
    """A binary model (no closed-form log Z): the Fisher of its visible marginal, exact by enumeration of its 2⁵
    states, against the sampled estimate; and the data Fisher's model mean, from samples, against the exact one."""
    model = random_rbm(5, 3, seed=1, scale=0.7)
    states = all_binary_states(5)
    with torch.no_grad():
        probs = torch.softmax(-model.free_energy(states), 0).double()
    gradients = energy_gradients(model, states)
    mean = probs @ gradients
    exact = (gradients - mean).T @ ((gradients - mean) * probs[:, None])
    samples = model.sample(4000, num_steps=50, generator=torch.Generator().manual_seed(2))
    # pooled over the 23² entries, ‖Ĝ − G‖² / Σ se² (about 1 for a right sampler; 0.5–2.7 over 40 seeds): the largest
    # single z-score (fisher_z_scores) is a poor test here, its entries' standard errors estimated from a few rare states
    # (above 5 for one seed in twenty)
    centered = energy_gradients(model, samples) - energy_gradients(model, samples).mean(0)
    products = centered[:, :, None] * centered[:, None, :]
    assert (products.mean(0) - exact).pow(2).sum() / (products.var(0).sum() / samples.shape[0]) < 5
    data = states[torch.multinomial(probs, 300, replacement=True, generator=torch.Generator().manual_seed(3))]
    scores = energy_gradients(model, data) - mean
    wrapper = NaturalGradient(ExactMaximumLikelihood(), "data_fisher", num_samples=4000)
    measured = wrapper.measure(model, data, generator=torch.Generator().manual_seed(4))
    assert (measured - scores.T @ scores / 300).abs().max() < 0.05 * exact.abs().max()


# (c) Amari's WᵀW is the natural gradient under the invariant metric ‖δW W⁻¹‖² --------------------------------------

def test_relative_gradient_is_the_natural_gradient_of_ica_filters():
    model, batch = ica_with_data(seed=1)
    gradient, filters = ml_gradient(model, batch), model.filters.detach()
    # the metric ‖δW W⁻¹‖²_F = vec(δW)ᵀ (I ⊗ (WᵀW)⁻¹) vec(δW), row-major: its natural gradient by the general solver
    metric = torch.kron(torch.eye(3, dtype=torch.float64), torch.linalg.inv(filters.T @ filters).contiguous())
    natural = precondition_direction(gradient.reshape(-1), metric, damping=0.0).reshape(3, 3)
    relative = relative_gradient(gradient, filters)
    assert torch.allclose(relative, natural, atol=1e-10)
    # Amari, Cichocki & Yang (1996): ΔW ∝ (I − ⟨φ(y) yᵀ⟩) W, y = W x, φ = sign for Laplace sources
    y = batch @ filters.T
    amari = (torch.eye(3, dtype=torch.float64) - y.sign().T @ y / batch.shape[0]) @ filters
    assert torch.allclose(relative, -amari, atol=1e-10)
    # and it is what the wrapper leaves in .grad
    wrapper = NaturalGradient(ExactMaximumLikelihood(), "relative")
    model.zero_grad()
    wrapper.loss(model, batch).backward()
    wrapper.precondition(model)
    assert torch.allclose(model.filters.grad, relative, atol=1e-12)


# (d) damping → ∞ and the structures ---------------------------------------------------------------------------------

@pytest.mark.parametrize("structure", ["full", "block", "diagonal"])
def test_huge_damping_recovers_the_plain_gradient_up_to_scale(structure):
    model, batch = ica_with_data(seed=2)
    plain = ml_gradient(model, batch)
    damping = 1e9
    wrapper = NaturalGradient(ExactMaximumLikelihood(), "model_fisher", damping=damping, structure=structure, num_samples=200)
    model.zero_grad()
    wrapper.loss(model, batch, generator=torch.Generator().manual_seed(0)).backward()
    wrapper.precondition(model)
    assert torch.allclose(model.filters.grad * damping, plain, rtol=1e-6, atol=1e-9)
    assert not torch.allclose(precondition_direction(plain.reshape(-1), wrapper.measure(
        model, batch, generator=torch.Generator().manual_seed(0)), damping=1e-3, structure=structure) * 1e-3, plain.reshape(-1), rtol=1e-2)


def test_block_and_diagonal_structures_solve_the_block_and_diagonal_metrics():
    generator = torch.Generator().manual_seed(0)
    factor = torch.randn(5, 5, generator=generator, dtype=torch.float64)
    metric, gradient = factor @ factor.T + torch.eye(5, dtype=torch.float64), torch.randn(5, generator=generator, dtype=torch.float64)
    block = torch.zeros_like(metric)
    block[:2, :2], block[2:, 2:] = metric[:2, :2], metric[2:, 2:]
    damped = 0.1 * torch.eye(5, dtype=torch.float64)
    assert torch.allclose(precondition_direction(gradient, metric, damping=0.1), torch.linalg.solve(metric + damped, gradient))
    assert torch.allclose(precondition_direction(gradient, metric, damping=0.1, sizes=[2, 3], structure="block"),
                          torch.linalg.solve(block + damped, gradient))
    assert torch.allclose(precondition_direction(gradient, metric, damping=0.1, structure="diagonal"),
                          gradient / (metric.diagonal() + 0.1))


# (e) reproducibility, through the Trainer ------------------------------------------------------------------------------

def train_ica(tmp_path, seed: int, metric: str = "model_fisher") -> torch.Tensor:
    model, batch = ica_with_data(seed=0, count=300)
    trainer = Trainer(ExactMaximumLikelihood(), lambda params: torch.optim.SGD(params, lr=0.2), run_dir=tmp_path / f"{seed}",
                      epochs=3, batch_size=100, progress=False, seed=seed,
                      natural_gradient={"metric": metric, "damping": 1e-3, "num_samples": 100})
    trainer.fit(model, DataSplits("ica", train=batch, test=batch[:10]))
    return model.filters.detach().clone()


def test_same_seed_same_numbers(tmp_path):
    first, again, other = train_ica(tmp_path / "a", 0), train_ica(tmp_path / "b", 0), train_ica(tmp_path / "c", 1)
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


def test_resumed_run_continues_bit_for_bit(tmp_path):
    def trainer(epochs):
        return Trainer(ExactMaximumLikelihood(), lambda params: torch.optim.SGD(params, lr=0.2, momentum=0.5),
                       run_dir=tmp_path / "resumed", epochs=epochs, batch_size=100, progress=False, seed=0,
                       natural_gradient={"metric": "model_fisher", "num_samples": 100, "structure": "block"})

    model, batch = ica_with_data(seed=0, count=300)
    data = DataSplits("ica", train=batch, test=batch[:10])
    trainer(2).fit(model, data)
    trainer(4).fit(model, data, resume=True)
    straight, _ = ica_with_data(seed=0, count=300)
    Trainer(ExactMaximumLikelihood(), lambda params: torch.optim.SGD(params, lr=0.2, momentum=0.5), run_dir=tmp_path / "straight",
            epochs=4, batch_size=100, progress=False, seed=0,
            natural_gradient={"metric": "model_fisher", "num_samples": 100, "structure": "block"}).fit(straight, data)
    assert torch.equal(model.filters, straight.filters)


def test_the_setting_composes_from_the_command_line(tmp_path):
    from hydra.utils import instantiate

    from pfzoo.cli import compose

    cfg = compose("train", ["model=ica", "trainer=ml", "+trainer.natural_gradient.metric=energy",
                            "+trainer.natural_gradient.structure=diagonal"])
    objective = instantiate(cfg.trainer, run_dir=tmp_path, estimator=None).objective
    assert isinstance(objective, NaturalGradient) and (objective.metric, objective.structure) == ("energy", "diagonal")
    assert "natural_gradient" not in compose("train", ["model=ica", "trainer=ml"]).trainer  # off unless asked for


# (f) refusals in one line ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, named", [
    ({"metric": "hessian"}, "metric"), ({"structure": "kronecker"}, "structure"), ({"damping": -1.0}, "damping"),
    ({"damping": float("nan")}, "damping"), ({"num_samples": 0}, "num_samples"),
])
def test_bad_settings_are_refused_naming_the_argument(kwargs, named):
    with pytest.raises(ValueError, match=named) as error:
        NaturalGradient(ExactMaximumLikelihood(), **kwargs)
    assert "\n" not in str(error.value)


def test_trainer_refuses_bad_natural_gradient_settings(tmp_path):
    for settings, named in ((True, "natural_gradient"), ({"metric": "relative", "lr": 1}, "natural_gradient has unknown settings lr")):
        with pytest.raises(ValueError, match=named):
            Trainer(ExactMaximumLikelihood(), run_dir=tmp_path, natural_gradient=settings)
    with pytest.raises(ValueError, match="NaturalGradient"):
        NaturalGradient(NaturalGradient(ExactMaximumLikelihood()))
    model, batch = ica_with_data()
    lbfgs = Trainer(ExactMaximumLikelihood(), lambda params: torch.optim.LBFGS(params), run_dir=tmp_path, progress=False,
                    natural_gradient={"metric": "relative"})
    with pytest.raises(ValueError, match="optimizer must take preconditioned steps"):
        lbfgs.fit(model, DataSplits("ica", train=batch, test=batch[:10]))


def test_relative_metric_refuses_a_model_without_filters():
    with pytest.raises(MissingCapability, match="filter matrix") as error:
        NaturalGradient(ExactMaximumLikelihood(), "relative").check(Gaussian(2))
    assert "\n" not in str(error.value)


def test_fisher_metrics_refuse_a_model_without_an_exact_free_energy():
    from pfzoo.models import LinearGenerative
    from pfzoo.training import EMHMC

    model = LinearGenerative(4, 2)
    NaturalGradient(EMHMC(), "relative").objective.check(model)  # the inner objective applies ...
    with pytest.raises(MissingCapability, match="exact free energy") as error:
        NaturalGradient(EMHMC(), "energy").check(model)  # ... the Fisher of its visible marginal needs F(v)
    assert "\n" not in str(error.value)


# (a) the race: natural gradient needs fewer steps, each method at its best rate --------------------------------------

def test_after_figure_4_1_natural_descent_goes_straight_and_is_faster():
    races = figure_4_1(max_steps=20000)
    assert races["natural"].best_steps == 1 and races["steepest"].best_steps > 5000
    straight = figure_4_1(rates={"natural": (0.3,)})["natural"]
    # every natural step moves along θ₀ − θ*: the path is a straight line (no zig-zag)
    for _, t1, t2 in straight.path:
        assert abs(t1 * 10.0 - t2 * -2.0) < 1e-9


def test_on_ica_natural_gradient_reaches_the_kl_in_fewer_steps(tmp_path):
    races = ica_race(run_dir=tmp_path, num_test=5000, max_steps=150,
                     rates={"gradient": (0.03, 0.1, 0.2), "relative": (0.3, 0.5), "model_fisher": (0.3,)}, num_samples=200)
    plain = races["gradient"].best_steps
    assert plain is not None
    for method in ("relative", "model_fisher"):
        assert races[method].best_steps is not None and races[method].best_steps * 3 < plain, (method, races[method].steps, plain)


# under torch.distributed: the ranks average their metrics, so they take the same steps -------------------------------

TWO_RANK_RUN = """
import json, sys, torch
sys.path.insert(0, {tests!r})
from pfzoo import distributed
from pfzoo.data import DataSplits
from pfzoo.training import ExactMaximumLikelihood, Trainer
from training.test_natural_gradient import ica_with_data
distributed.initialize()
try:
    results = {{}}
    for rows in (40, 21):  # 21 rows in minibatches of 20: the last one (1 row) leaves a rank without rows
        model, batch = ica_with_data(seed=0, count=rows)
        Trainer(ExactMaximumLikelihood(), lambda params: torch.optim.SGD(params, lr=0.2), run_dir={out!r} + f"/{{rows}}",
                epochs=2, batch_size=20, progress=False, seed=0,
                natural_gradient={{"metric": "model_fisher", "num_samples": 50}}).fit(model, DataSplits("ica", train=batch, test=batch[:5]))
        results[rows] = model.filters.detach().flatten().tolist()
    open({out!r} + f"/rank{{distributed.rank()}}.json", "w").write(json.dumps(results))
finally:
    distributed.shutdown()
"""


@pytest.mark.slow
def test_two_ranks_take_the_same_natural_steps(tmp_path):
    from test_distributed import run_two_ranks  # the gloo launcher of tests/test_distributed.py

    tests = str(Path(__file__).resolve().parents[1])
    run_two_ranks(TWO_RANK_RUN.format(tests=tests, out=str(tmp_path)))
    first, second = (json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2))
    assert first == second
    model, batch = ica_with_data(seed=0, count=40)
    assert first["40"] != model.filters.detach().flatten().tolist()  # it trained


def test_a_metric_that_does_not_apply_is_refused_naming_the_metrics_that_do():
    with pytest.raises(MissingCapability, match=r"^NaturalGradient\(metric='relative'\) needs a filter matrix .* — use "
                                                 r"trainer\.natural_gradient\.metric=model_fisher or data_fisher or energy$"):
        NaturalGradient(PCD(), "relative").check(RBM(6, 3))
    with pytest.raises(MissingCapability, match=r"^PCD needs"):  # the inner objective's refusal names the inner objective
        NaturalGradient(PCD(), "energy").check(ICA(4))
