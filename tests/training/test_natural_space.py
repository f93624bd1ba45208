"""Optimisation in the natural parameter space φ = G^½ θ (thesis §4.1.4, §4.2.7): the whitening and its inverse, the
thesis's Fig. 4.1 example in closed form (steepest descent in φ at rate 1 is the natural-gradient step and lands on θ*
in one step; L-BFGS in φ needs two iterations where L-BFGS in θ needs many), equivalence with the natural-gradient
preconditioner, and the Trainer's ``natural_parameter_space`` setting (L-BFGS in φ, resume, refusals)."""

from functools import partial

import pytest
import torch

from pfzoo.data import DataSplits
from pfzoo.models import LinearGenerative
from pfzoo.models.capabilities import MissingCapability
from pfzoo.models.ica import ICA
from pfzoo.studies.natural_gradient import FIGURE_DESIGN, random_mixing
from pfzoo.training import ExactMaximumLikelihood, Trainer
from pfzoo.training.natural_gradient import laplace_ica_fisher, linear_gaussian_fisher, measure_metric
from pfzoo.training.natural_space import NaturalParameterSpace, check_space_settings, natural_space_from_settings, whitening

DESIGN = torch.tensor(FIGURE_DESIGN, dtype=torch.float64)
FISHER = linear_gaussian_fisher(DESIGN)  # the thesis's G = [[3² + 1/3², 1], [1, 1/3²]] (§4.1.2)
LBFGS = partial(torch.optim.LBFGS, lr=1.0, max_iter=100, tolerance_grad=1e-14, tolerance_change=1e-20, line_search_fn="strong_wolfe")


def test_the_fisher_of_the_example_is_the_thesis_s():
    assert torch.allclose(FISHER, torch.tensor([[9 + 1 / 9, 1.0], [1.0, 1 / 9]], dtype=torch.float64))


@pytest.mark.parametrize("structure", ["full", "block", "diagonal"])
def test_whitening_squares_to_the_metric_and_inverts(structure):
    generator = torch.Generator().manual_seed(0)
    factor = torch.randn(5, 5, generator=generator, dtype=torch.float64)
    metric = factor @ factor.T
    root, inverse = whitening(metric, damping=0.1, sizes=[2, 3], structure=structure)
    kept = {"full": metric, "block": torch.block_diag(metric[:2, :2], metric[2:, 2:]), "diagonal": torch.diag(metric.diagonal())}[structure]
    assert torch.allclose(root.T @ root, kept + 0.1 * torch.eye(5, dtype=torch.float64), atol=1e-10)  # eq. 4.16
    assert torch.allclose(root, root.T) and torch.allclose(root @ inverse, torch.eye(5, dtype=torch.float64), atol=1e-10)


def test_whitening_refuses_a_singular_metric_without_damping():
    with pytest.raises(ValueError, match="positive definite.*raise damping") as error:
        whitening(torch.ones(3, 3, dtype=torch.float64))
    assert "\n" not in str(error.value)
    whitening(torch.ones(3, 3, dtype=torch.float64), damping=1e-3)


def example(start=(1.0, -1.0)):
    """θ (the thesis's θ_init = [1, −1], Fig. 4.1) and the closure of J(θ) − J(θ*) = ½‖A(θ − θ*)‖², θ* = 0 (eq. 4.2
    under exact expectations over data of θ*), which is also KL(p_θ* ‖ p_θ)."""
    theta = torch.nn.Parameter(torch.tensor(start, dtype=torch.float64))
    return theta


def run(theta, optimizer, steps, trace):
    def closure():
        optimizer.zero_grad()
        mean = DESIGN @ theta
        loss = 0.5 * mean @ mean
        loss.backward()
        trace.append(theta.detach().clone())
        return loss
    for _ in range(steps):
        optimizer.step(closure)
    return 0.5 * float((DESIGN @ theta.detach()).square().sum())


def test_the_maps_between_theta_and_phi_invert():
    theta = example((-2.0, 10.0))
    space = NaturalParameterSpace([theta], partial(torch.optim.SGD, lr=0.0), lambda: FISHER)
    run(theta, space, 1, [])  # lr 0: the step only goes θ → φ → θ
    assert torch.allclose(space.phi.detach(), space.root @ torch.tensor([-2.0, 10.0], dtype=torch.float64))  # eq. 4.18
    assert torch.allclose(theta.detach(), torch.tensor([-2.0, 10.0], dtype=torch.float64), atol=1e-12)
    with torch.no_grad():  # a change made outside the optimiser (a model's projection) is read back into φ
        theta.copy_(torch.tensor([0.5, 0.25], dtype=torch.float64))
    run(theta, space, 1, [])
    assert torch.allclose(theta.detach(), torch.tensor([0.5, 0.25], dtype=torch.float64), atol=1e-12)


def test_steepest_descent_in_phi_at_rate_one_lands_on_the_optimum_in_one_step():
    theta = example()
    kl = run(theta, NaturalParameterSpace([theta], partial(torch.optim.SGD, lr=1.0), lambda: FISHER), 1, [])
    assert kl < 1e-24
    # the same rate in θ diverges (stable only below 2/λ_max(G) = 0.217)
    plain = example()
    assert run(plain, torch.optim.SGD([plain], lr=1.0), 1, []) > 10


def test_a_step_in_phi_is_the_natural_gradient_step_in_theta():
    """Eq. 4.24 on a non-quadratic objective: SGD in φ at rate η moves θ by −η (G + λI)⁻¹ ∇_θ J."""
    generator = torch.Generator().manual_seed(1)
    model = ICA.from_tensors(random_mixing(3, 4.0, generator=generator))
    batch = ICA.from_tensors(random_mixing(3, 4.0, generator=generator)).sample(200, generator=generator)
    metric = laplace_ica_fisher(model.filters.detach())
    model.zero_grad()
    ExactMaximumLikelihood().loss(model, batch).backward()
    gradient = model.filters.grad.reshape(-1).clone()
    expected = model.filters.detach().reshape(-1) - 0.3 * torch.linalg.solve(metric + 0.01 * torch.eye(9, dtype=torch.float64), gradient)
    space = NaturalParameterSpace(model.parameters(), partial(torch.optim.SGD, lr=0.3), lambda: metric, damping=0.01)

    def closure():
        space.zero_grad()
        loss = ExactMaximumLikelihood().loss(model, batch)
        loss.backward()
        return loss
    space.step(closure)
    assert torch.allclose(model.filters.detach().reshape(-1), expected, atol=1e-12)


def test_lbfgs_in_phi_needs_two_iterations_where_lbfgs_in_theta_needs_many():
    """In φ the gradient points straight at φ* (Fig. 4.1d): the first line search moves along the line to θ* and the
    first curvature pair then gives the exact (identity) Hessian; in θ (condition number 6.9·10³) it does not."""
    theta, trace = example(), []
    space = NaturalParameterSpace([theta], LBFGS, lambda: FISHER)
    assert run(theta, space, 1, trace) < 1e-24
    assert space.inner.state[space.phi]["n_iter"] == 2
    start, first = torch.tensor([1.0, -1.0], dtype=torch.float64), trace[1]
    assert abs(float(start[0] * first[1] - start[1] * first[0])) < 1e-12  # θ₁ on the segment from θ₀ to θ* = 0
    plain, trace = example(), []
    optimizer = LBFGS([plain])
    run(plain, optimizer, 1, trace)
    assert optimizer.state[plain]["n_iter"] >= 6


def test_the_metric_is_measured_again_every_refresh_every_steps():
    calls = []

    def metric():
        calls.append(1)
        return FISHER
    theta = example()
    space = NaturalParameterSpace([theta], partial(torch.optim.SGD, lr=0.1, momentum=0.9), metric, refresh_every=3)
    run(theta, space, 7, [])
    assert len(calls) == space.refreshes == 3  # steps 1, 4, 7
    fixed = NaturalParameterSpace([example()], partial(torch.optim.SGD, lr=0.1), metric)
    run(fixed.theta[0], fixed, 5, [])
    assert fixed.refreshes == 1  # θ_fixed = the initial θ (§4.2.7)


# through the Trainer -------------------------------------------------------------------------------------------------

def ica_problem(count=400):
    generator = torch.Generator().manual_seed(2)
    truth = ICA.from_tensors(torch.linalg.inv(random_mixing(3, 10.0, generator=generator)))
    rows = truth.sample(count, generator=generator)
    return DataSplits("ica", train=rows, test=rows[:10])


def test_sgd_in_phi_refreshed_every_step_is_the_natural_gradient_trainer(tmp_path):
    """§4.1.4's algorithm (re-whiten at every step, steepest descent in φ) equals the preconditioner, full batch."""
    data = ica_problem()
    models = [ICA(3, generator=torch.Generator().manual_seed(3)).double() for _ in range(2)]
    settings = {"metric": "data_fisher", "damping": 1e-3}
    Trainer(ExactMaximumLikelihood(), partial(torch.optim.SGD, lr=0.5), run_dir=tmp_path / "a", epochs=4, batch_size=400,
            progress=False, natural_parameter_space={**settings, "refresh_every": 1}).fit(models[0], data)
    Trainer(ExactMaximumLikelihood(), partial(torch.optim.SGD, lr=0.5), run_dir=tmp_path / "b", epochs=4, batch_size=400,
            progress=False, natural_gradient=settings).fit(models[1], data)
    assert torch.allclose(models[0].filters, models[1].filters, atol=1e-10)
    assert not torch.allclose(models[0].filters, ICA(3, generator=torch.Generator().manual_seed(3)).double().filters, atol=1e-3)


def lbfgs_trainer(run_dir, epochs, space):
    return Trainer(ExactMaximumLikelihood(), partial(torch.optim.LBFGS, lr=1.0, max_iter=1, max_eval=25, line_search_fn="strong_wolfe"),
                   run_dir=run_dir, epochs=epochs, batch_size=400, progress=False, natural_parameter_space=space)


def test_trainer_runs_lbfgs_in_phi_and_resumes_bit_for_bit(tmp_path):
    data = ica_problem()
    space = {"metric": "energy", "damping": 1e-4, "refresh_every": 2}
    model = ICA(3, generator=torch.Generator().manual_seed(3)).double()
    lbfgs_trainer(tmp_path / "resumed", 3, space).fit(model, data)
    lbfgs_trainer(tmp_path / "resumed", 5, space).fit(model, data, resume=True)
    straight = ICA(3, generator=torch.Generator().manual_seed(3)).double()
    lbfgs_trainer(tmp_path / "straight", 5, space).fit(straight, data)
    assert torch.equal(model.filters, straight.filters)
    # and it fits: the ML loss falls below the initial one
    start = ICA(3, generator=torch.Generator().manual_seed(3)).double()
    assert ExactMaximumLikelihood().loss(straight, data.train) < ExactMaximumLikelihood().loss(start, data.train) - 0.05


def test_the_setting_composes_from_the_command_line(tmp_path):
    from hydra.utils import instantiate

    from pfzoo.cli import compose

    cfg = compose("train", ["model=ica", "trainer=ml", "+trainer.natural_parameter_space.metric=energy",
                            "+trainer.natural_parameter_space.refresh_every=5"])
    trainer = instantiate(cfg.trainer, run_dir=tmp_path, estimator=None)
    assert trainer.natural_space["metric"] == "energy" and trainer.natural_space["refresh_every"] == 5


@pytest.mark.parametrize("settings, named", [
    (True, "natural_parameter_space must be null"), ({"metric": "relative"}, "natural_parameter_space.metric"),
    ({"lr": 1}, "unknown settings lr"), ({"refresh_every": 0}, "refresh_every"), ({"damping": -1.0}, "damping"),
])
def test_trainer_refuses_bad_settings_in_one_line(tmp_path, settings, named):
    with pytest.raises(ValueError, match=named) as error:
        Trainer(ExactMaximumLikelihood(), run_dir=tmp_path, natural_parameter_space=settings)
    assert "\n" not in str(error.value)


def test_trainer_refuses_both_natural_settings_and_a_model_without_a_free_energy(tmp_path):
    with pytest.raises(ValueError, match="set one of them"):
        Trainer(ExactMaximumLikelihood(), run_dir=tmp_path, natural_gradient={"metric": "energy"}, natural_parameter_space={})
    with pytest.raises(MissingCapability, match="natural_parameter_space") as error:
        natural_space_from_settings(torch.optim.SGD, check_space_settings({}), LinearGenerative(4, 4), [], torch.randn(20, 4))
    assert "\n" not in str(error.value)


def test_the_trainer_measures_the_metric_over_the_training_rows(tmp_path):
    data = ica_problem()
    model = ICA(3, generator=torch.Generator().manual_seed(3)).double()
    trainer = lbfgs_trainer(tmp_path, 1, {"metric": "energy", "damping": 0.0})
    expected = measure_metric(model, data.train.double(), "energy")
    trainer.fit(model, data)
    root = torch.load(tmp_path / "checkpoint.pt", weights_only=False)["trainer_state"]["optimizer"]["root"]
    assert torch.allclose(root @ root, expected, atol=1e-10)
