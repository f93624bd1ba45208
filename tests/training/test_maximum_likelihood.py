import math

import pytest
import torch

from pfzoo.models import ICA, RBM, Gaussian
from pfzoo.training import ExactMaximumLikelihood
from pfzoo.models import MissingCapability


def test_maximum_likelihood_recovers_a_gaussian():
    g = torch.Generator().manual_seed(0)
    truth = Gaussian.from_tensors(torch.tensor([[2.0, 0.6], [0.6, 1.0]], dtype=torch.float64), mean=torch.tensor([1.0, -2.0], dtype=torch.float64))
    data = truth.sample(20000, generator=g)
    model = Gaussian(2).double()
    objective = ExactMaximumLikelihood()
    optimizer = torch.optim.LBFGS(model.parameters(), max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = objective.loss(model, data)
        loss.backward()
        return loss

    optimizer.step(closure)
    assert torch.allclose(model.mean.detach(), data.mean(0), atol=1e-4)
    assert torch.allclose(model.covariance.detach(), torch.cov(data.T, correction=0), atol=1e-4)


def test_loss_is_the_negative_mean_log_likelihood():
    model = ICA(3, generator=torch.Generator().manual_seed(0))
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(1))
    loss = ExactMaximumLikelihood().loss(model, x)
    assert loss.item() == pytest.approx(-model.log_prob(x).mean().item(), abs=1e-5)
    assert math.isfinite(loss.item())


def test_models_without_closed_form_are_refused():
    with pytest.raises(MissingCapability, match="closed-form, differentiable log Z; RBM has binary states"):
        ExactMaximumLikelihood().loss(RBM(4, 3), torch.ones(2, 4))
