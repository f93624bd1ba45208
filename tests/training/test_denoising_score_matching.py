"""Denoising score matching (Vincent 2011): on a Gaussian its minimiser is the ML covariance plus σ² I (and, for a
σ ladder weighted by σ², plus (Σσ⁴/Σσ²) I), found by L-BFGS on fixed noise; the noise comes from the generator; a
user's energy network trains by it; binary models are refused in one line."""


import pytest
import torch
from factories import correlated_gaussian_data, minimise_by_lbfgs

from pfzoo.models import RBM, Gaussian, MissingCapability
from pfzoo.training import DenoisingScoreMatching


pytestmark = pytest.mark.usefixtures("float64_default_dtype")




def fit_on_fixed_noise(objective, model, data: torch.Tensor, seed: int) -> None:
    """L-BFGS on the DSM loss with the same noise at every evaluation (the generator reseeded), so it converges."""
    minimise_by_lbfgs(model.parameters(), lambda: objective.loss(model, data, generator=torch.Generator().manual_seed(seed)), max_iter=300,
                      tolerance_grad=1e-12, tolerance_change=1e-15, history_size=30)


@pytest.mark.parametrize("sigma", [0.5, [0.3, 0.6, 0.9]], ids=["single", "ladder"])
def test_gaussian_minimiser_is_the_ml_covariance_plus_sigma_squared(sigma):
    """½ E‖−Λ(x̃ − μ) + ε/σ‖² = ½ tr(Λ² (C + σ² I)) − tr Λ + const is minimised at Λ = (C + σ² I)⁻¹; weighting each level
    by σ² gives Λ = (C + (Σσ⁴/Σσ²) I)⁻¹. 2,000 examples × 50 noise draws: within 2 % (Frobenius), while the ML
    precision C⁻¹ is more than 10 % away."""
    data = correlated_gaussian_data(2000, 3, seed=0)
    levels = torch.tensor(sigma if isinstance(sigma, list) else [sigma])
    shift = (levels**4).sum() / (levels**2).sum()
    ml = Gaussian.fit(data, regularization=0.0)
    expected = torch.linalg.inv(ml.covariance + shift * torch.eye(3))
    model = Gaussian(3).double()
    fit_on_fixed_noise(DenoisingScoreMatching(sigma), model, data.repeat(50, 1), seed=1)
    error = ((model.precision - expected).norm() / expected.norm()).item()
    assert error < 0.02, error
    assert ((ml.precision - expected).norm() / expected.norm()).item() > 0.1
    assert (model.mean - ml.mean).norm().item() < 0.1  # noise in μ̂: (C + σ² I) ε̄ / σ, ≈ 0.02 per coordinate here


def test_noise_comes_from_the_generator():
    model, data = Gaussian(3).double(), correlated_gaussian_data(20, 3, seed=2)
    objective = DenoisingScoreMatching([0.1, 0.2])
    one = objective.loss(model, data, generator=torch.Generator().manual_seed(3))
    assert one.item() == objective.loss(model, data, generator=torch.Generator().manual_seed(3)).item()
    assert one.item() != objective.loss(model, data, generator=torch.Generator().manual_seed(4)).item()


def test_refusals():
    with pytest.raises(MissingCapability, match=r"^DenoisingScoreMatching needs real-valued visible units[^\n]*$"):
        DenoisingScoreMatching().check(RBM(4, 3))
    for bad in (0.0, -1.0, [], [0.1, 0.0], "x", True):
        with pytest.raises(ValueError, match="sigma must be"):
            DenoisingScoreMatching(bad)
