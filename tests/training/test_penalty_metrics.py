"""The natural gradient of non-probabilistic models (thesis §4.2.8): the output Jacobians against finite differences, the
closed form of eq. 4.41 for the L2 penalty against a Monte Carlo average over y ~ q(y|x; θ) (and a wrong variance
rejected), eq. 4.39 against its closed form for linear least squares, and the natural step under eq. 4.41 solving
least squares in one step."""

from functools import partial

import pytest
import torch
from torch import nn

from pfzoo.training.natural_space import NaturalParameterSpace
from pfzoo.training.penalty_metrics import (
    output_jacobians, penalty_gradients, penalty_metric, squared_error, squared_error_fisher,
)


def autoencoder(seed=0, sizes=(3, 2)):
    torch.manual_seed(seed)  # nn.Linear's initialisation draws from the global generator
    return nn.Sequential(nn.Linear(sizes[0], sizes[1]), nn.Tanh(), nn.Linear(sizes[1], sizes[0])).double()


def rows(count, width=3, seed=1):
    return torch.randn(count, width, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_output_jacobians_match_central_finite_differences():
    function, x = autoencoder(), rows(5)
    jacobian = output_jacobians(function, x)
    flat = torch.cat([p.detach().reshape(-1) for p in function.parameters()])
    step = 1e-6
    for index in range(flat.numel()):
        outputs = []
        for sign in (1.0, -1.0):
            moved = flat.clone()
            moved[index] += sign * step
            torch.nn.utils.vector_to_parameters(moved, function.parameters())
            outputs.append(function(x).detach())
        torch.nn.utils.vector_to_parameters(flat, function.parameters())
        assert torch.allclose(jacobian[:, :, index], (outputs[0] - outputs[1]) / (2 * step), atol=1e-8)


def test_eq_4_41_closed_form_matches_its_monte_carlo_average():
    """Eq. 4.41 is the average of ∇ log q ∇ log qᵀ with y drawn from q(y|x) = N(f(x), ½ I); ∇ log q = −∇l, so the
    Monte Carlo estimate is eq. 4.39's average over pairs whose y comes from the model."""
    function, x = autoencoder(), rows(200)
    draws = 100
    inputs = x.repeat(draws, 1)
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        y = function(inputs) + torch.randn(inputs.shape, generator=generator, dtype=torch.float64) * 0.5 ** 0.5
    scores = penalty_gradients(function, inputs, y)
    products = scores[:, :, None] * scores[:, None, :]
    estimate, stderr = products.mean(0), products.std(0) / products.shape[0] ** 0.5
    closed = squared_error_fisher(function, x)
    assert torch.allclose(estimate, penalty_metric(scores))
    assert ((estimate - closed).abs() / stderr).max() < 5
    assert ((estimate - 2 * closed).abs() / stderr).max() > 10  # q with unit variance (G doubled) is rejected


def test_eq_4_39_for_linear_least_squares_is_its_closed_form():
    x, y = rows(50, 4), rows(50, 1, seed=3)
    function = nn.Linear(4, 1).double()
    residual = (y - function(x)).detach()[:, 0]
    design = torch.cat([x, torch.ones(50, 1, dtype=torch.float64)], 1)  # weight, then bias
    closed = 4 * (design * residual[:, None] ** 2).T @ design / 50
    assert torch.allclose(penalty_metric(penalty_gradients(function, x, y)), closed, atol=1e-12)
    assert torch.allclose(squared_error_fisher(function, x), 2 * design.T @ design / 50, atol=1e-12)


def test_natural_step_under_eq_4_41_solves_least_squares_in_one_step():
    """For f = Xθ, J = ⟨‖y − Xθ‖²⟩ has Hessian 2XᵀX/N = G (eq. 4.41): steepest descent in φ at rate 1 is Newton's step."""
    scales = torch.tensor([30.0, 1.0, 0.03], dtype=torch.float64)  # a badly conditioned design
    x, y = rows(80) * scales, rows(80, 2, seed=4)
    function = nn.Linear(3, 2).double()
    design = torch.cat([x, torch.ones(80, 1, dtype=torch.float64)], 1)
    solution = torch.linalg.lstsq(design, y).solution  # [4, 2]

    def closure():
        space.zero_grad()
        loss = squared_error(function, x, y).mean()
        loss.backward()
        return loss
    space = NaturalParameterSpace(function.parameters(), partial(torch.optim.SGD, lr=1.0), lambda: squared_error_fisher(function, x))
    space.step(closure)
    assert torch.allclose(function.weight.detach(), solution[:3].T, atol=1e-8)
    assert torch.allclose(function.bias.detach(), solution[3], atol=1e-8)


@pytest.mark.parametrize("call, named", [
    (lambda f: output_jacobians(f, torch.zeros(3)), "x must be a matrix"),
    (lambda f: squared_error(f, torch.zeros(4, 3), torch.zeros(5, 3)), "y must be a matrix"),
    (lambda f: penalty_metric(torch.zeros(0, 3)), "gradients must be a matrix"),
])
def test_bad_inputs_are_refused_in_one_line(call, named):
    with pytest.raises(ValueError, match=named) as error:
        call(autoencoder())
    assert "\n" not in str(error.value)
