"""Sliced score matching (Song et al. 2019): unbiased for score matching's loss (Rademacher and Gaussian directions,
plain and variance-reduced); and a user's EnergyFunction (quartic plus a small MLP) trained through autograd: SSM
reaches the optimum of SM with the exact Hessian, and SSM, DSM and Hutchinson SM lower the loss under Adam."""

import math

import pytest
import torch
from factories import minimise_by_lbfgs
from torch import nn

from pfzoo.models import ICA, RBM, EnergyFunction, MissingCapability, ProductOfExperts
from pfzoo.training import DenoisingScoreMatching, ScoreMatching, SlicedScoreMatching


pytestmark = pytest.mark.usefixtures("float64_default_dtype")


@pytest.mark.parametrize("projection", ["rademacher", "gaussian"])
@pytest.mark.parametrize("variance_reduced", [False, True], ids=["ssm", "ssm_vr"])
def test_sliced_loss_is_unbiased_for_score_matching(projection, variance_reduced):
    """Per example, the mean of 20,000 one-direction estimates is within 4 standard errors of the exact SM term."""
    generator = torch.Generator().manual_seed(0)
    model = ProductOfExperts.from_tensors(torch.randn(6, 4, generator=generator) + torch.eye(6, 4), 1 + torch.rand(6, generator=generator),
                                          expert="student_t")
    x = torch.randn(3, 4, generator=generator)
    exact = ScoreMatching().example_losses(model, x).detach()
    repeats = 20000
    objective = SlicedScoreMatching(num_projections=1, projection=projection, variance_reduced=variance_reduced)
    estimates = objective.example_losses(model, x.repeat(repeats, 1), generator=torch.Generator().manual_seed(1))
    estimates = estimates.detach().reshape(repeats, 3)
    mean, stderr = estimates.mean(0), estimates.std(0) / math.sqrt(repeats)
    assert ((mean - exact).abs() < 4 * stderr).all(), (mean, exact, stderr)
    many = SlicedScoreMatching(num_projections=repeats, projection=projection, variance_reduced=variance_reduced)
    assert torch.allclose(many.example_losses(model, x, generator=torch.Generator().manual_seed(1)).detach(), mean, rtol=1e-10)


class QuarticMLP(nn.Module):
    """A user's energy ``E(x) = ¼ a Σ_i x_i⁴ + ½ |x L|² + MLP(x)`` (a > 0 and the quadratic keep Z finite), the MLP
    ``c · tanh(W x + b)`` with its hidden layer fixed: with it trained too, score matching on a finite sample has no
    minimum (the energy sharpens into spikes at the data points, its Laplacian falling without bound; measured
    J → −10⁷ by L-BFGS), while with fixed features J is a convex quadratic in (L Lᵀ, c) and a smooth function of a."""

    def __init__(self, width: int, seed: int) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.log_quartic = nn.Parameter(torch.tensor(-1.0))
        self.factor = nn.Parameter(torch.eye(width))
        self.hidden = nn.Linear(width, 8)
        self.out = nn.Linear(8, 1)
        with torch.no_grad():
            for parameter in (*self.hidden.parameters(), *self.out.parameters()):
                parameter.copy_(torch.randn(parameter.shape, generator=generator))
        self.hidden.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        quartic = 0.25 * self.log_quartic.exp() * x.pow(4).sum(-1)
        return quartic + 0.5 * (x @ self.factor).square().sum(-1) + self.out(torch.tanh(self.hidden(x))).squeeze(-1)


def bimodal_data(num_samples: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    centres = torch.tensor([[1.5, 0.0, 0.5], [-1.0, 1.0, -0.5]])
    which = torch.randint(2, (num_samples,), generator=generator)
    return centres[which] + 0.6 * torch.randn(num_samples, 3, generator=generator)


def adam(objective, model, data, steps: int, seed: int) -> list[float]:
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = objective.loss(model, data, generator=generator)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def lbfgs(objective, model, data, seed: int) -> None:
    """L-BFGS with the same random directions at every evaluation (the generator reseeded), so it converges."""
    minimise_by_lbfgs(model.parameters(), lambda: objective.loss(model, data, generator=torch.Generator().manual_seed(seed)), max_iter=200,
                      tolerance_grad=1e-10, tolerance_change=1e-14, history_size=30)


def test_energy_function_trains_by_sm_and_ssm_to_the_same_optimum():
    """500 points of a 3-d bimodal mixture: exact-Hessian SM by autograd (M ≤ 64) and SSM-VR with 32 Rademacher
    directions per point, each minimised by L-BFGS; SSM's minimiser has an exact SM loss within 0.005 of SM's minimum
    (measured −3.6022 vs −3.6030, from 1.74 at the start)."""
    data = bimodal_data(500, seed=2)
    exact = ScoreMatching(analytic=False)
    start = exact.loss(EnergyFunction(QuarticMLP(3, seed=3), 3), data).item()
    by_sm, by_ssm = EnergyFunction(QuarticMLP(3, seed=3), 3), EnergyFunction(QuarticMLP(3, seed=3), 3)
    lbfgs(exact, by_sm, data, seed=4)
    lbfgs(SlicedScoreMatching(32, variance_reduced=True), by_ssm, data, seed=4)
    optimum, sliced = exact.loss(by_sm, data).item(), exact.loss(by_ssm, data).item()
    assert optimum < start - 4 and optimum <= sliced + 1e-9 < optimum + 0.005, (start, optimum, sliced)


@pytest.mark.parametrize("name", ["ssm", "dsm", "hutchinson_sm"])
def test_energy_function_losses_fall_under_adam(name):
    """100 Adam steps of each stochastic objective on the user's energy: the last 10 losses' mean is below the first 10's,
    and the exact SM loss falls too."""
    data = bimodal_data(500, seed=5)
    objective = {"ssm": SlicedScoreMatching(2), "dsm": DenoisingScoreMatching([0.1, 0.3]),
                 "hutchinson_sm": ScoreMatching(exact_hessian_max_dim=2, num_probes=2)}[name]
    model = EnergyFunction(QuarticMLP(3, seed=6), 3)
    exact = ScoreMatching(analytic=False)
    before = exact.loss(model, data).item()
    losses = adam(objective, model, data, steps=100, seed=7)
    assert sum(losses[-10:]) < sum(losses[:10])
    assert exact.loss(model, data).item() < before - 1


def test_refusals():
    with pytest.raises(MissingCapability, match=r"^SlicedScoreMatching needs real-valued visible units[^\n]*$"):
        SlicedScoreMatching().check(RBM(4, 3))
    with pytest.raises(ValueError, match="projection"):
        SlicedScoreMatching(projection="sphere")
    with pytest.raises(ValueError, match="num_projections"):
        SlicedScoreMatching(num_projections=0)


def test_models_with_kinks_are_refused():
    """Laplace experts' curvature is a delta that autograd sees as zero: SSM and autograd SM refuse them (naming the
    trainers that apply), score matching's analytic path, which smooths the kinks, and DSM take them."""
    ica = ICA(3)
    for objective in (SlicedScoreMatching(), ScoreMatching(analytic=False)):
        with pytest.raises(MissingCapability, match=r"twice-differentiable[^\n]*trainer=[^\n]*denoising_score_matching[^\n]*score_matching"):
            objective.check(ica)
    ScoreMatching().check(ica)
    DenoisingScoreMatching().check(ica)
    SlicedScoreMatching().check(ProductOfExperts(3, 4, "student_t"))
