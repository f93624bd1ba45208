"""BilinearGenerative and ProductPrior: the joint energy, its gradient, the product prior (energies, samples,
reflection bounds), ancestral sampling's exact moments, constraints, checkpoints and argument checks."""

import math
from functools import partial

import pytest
import torch
from factories import random_bilinear_generative, random_bilinear_parameters
from torch.distributions import Exponential, Laplace, MultivariateNormal, Normal

from pfzoo import zoo
from pfzoo.kernels.hmc import Evaluation, HMCKernel, leapfrog
from pfzoo.models import BilinearGenerative, model_class
from pfzoo.models.latent import ExponentialPrior, GaussianPrior, LaplacePrior, ProductPrior
from pfzoo.training import EMHMC

M, K, LC, LD = 5, 4, 3, 2
random_weights = partial(random_bilinear_parameters, M, K, LC, LD)  # Φ, Θ ~ N(0, 1), Ψ ~ N(0, 0.5²); call with the seed
random_model = partial(random_bilinear_generative, M, K, LC, LD)  # those weights, σ_n = 0.3


def random_latents(num_rows, seed=1):
    g = torch.Generator().manual_seed(seed)
    content = torch.randn(num_rows, LC, generator=g, dtype=torch.float64)
    style = torch.rand(num_rows, LD, generator=g, dtype=torch.float64) * 2
    return torch.cat((content, style), dim=1)


# ---- the joint ----------------------------------------------------------------------------


def test_likelihood_energy_is_minus_log_normal_of_the_bilinear_mean():
    model = random_model()
    basis, content_weight, style_weight = random_weights()
    z = random_latents(7)
    x = torch.randn(7, M, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    coefficients = (z[:, :LC] @ content_weight.T) * (z[:, LC:] @ style_weight.T)  # a = (Θc) ⊙ (Ψd), HAIS eq. 33
    covariance = 0.09 * torch.eye(M, dtype=torch.float64)
    expected = -MultivariateNormal(coefficients @ basis.T, covariance).log_prob(x)
    torch.testing.assert_close(model.likelihood_energy_and_grad(x, z)[0], expected)
    prior_log = Laplace(0.0, 1.0).log_prob(z[:, :LC]).sum(-1) + Exponential(1.0).log_prob(z[:, LC:]).sum(-1)
    torch.testing.assert_close(model.joint_energy(x, z), expected - prior_log)
    torch.testing.assert_close(model.energy(x, z), model.joint_energy(x, z))


@pytest.mark.parametrize("style_scale", [1.0, 1e-9, 0.0], ids=["interior", "near-zero-style", "zero-style"])
def test_likelihood_gradient_matches_autograd(style_scale):
    model = random_model(seed=3)
    x = torch.randn(6, M, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    z = random_latents(6, seed=5)
    z[:, LC:] *= style_scale
    z[0, 0] = 0.0  # a content latent at the Laplace kink
    z.requires_grad_(True)
    energy, grad = model.likelihood_energy_and_grad(x, z)
    (auto,) = torch.autograd.grad(energy.sum(), z)
    torch.testing.assert_close(grad, auto)
    # the joint energy's gradient (prior + likelihood) as the posterior path uses it
    prior_energy, prior_grad = model.prior.energy_and_grad(z)
    (auto,) = torch.autograd.grad((prior_energy + model.likelihood_energy_and_grad(x, z)[0]).sum(), z)
    torch.testing.assert_close(prior_grad + grad, auto)


def test_parameter_gradients_flow_through_the_joint_energy():
    model = random_model()
    x = torch.randn(4, M, dtype=torch.float64)
    model.joint_energy(x, random_latents(4)).sum().backward()
    for parameter in (model.basis, model.content_weight, model.style_weight):
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0


def test_sampling_matches_the_exact_moments():
    """E[x] = 0 and Cov(x) = Φ[(2ΘΘᵀ) ⊙ (Ψ(I + 11ᵀ)Ψᵀ)]Φᵀ + σ²I: E[ccᵀ] = 2I (Laplace), E[ddᵀ] = I + 11ᵀ (Exp(1)), c ⟂ d."""
    model = random_model(seed=6)
    basis, content_weight, style_weight = random_weights(seed=6)
    second_moment_a = (2 * content_weight @ content_weight.T) * (style_weight @ (torch.eye(LD, dtype=torch.float64) + 1) @ style_weight.T)
    covariance = basis @ second_moment_a @ basis.T + 0.09 * torch.eye(M, dtype=torch.float64)
    samples = model.sample(200000, generator=torch.Generator().manual_seed(7))
    assert samples.shape == (200000, M) and samples.dtype == torch.float64
    stderr = (covariance.diagonal() / samples.shape[0]).sqrt()
    assert (samples.mean(0).abs() < 5 * stderr).all()
    # heavy-tailed products: a loose relative tolerance on the second moments
    torch.testing.assert_close(samples.T @ samples / samples.shape[0], covariance, atol=0.05 * covariance.abs().max().item(), rtol=0)
    first, again = (model.sample(100, generator=torch.Generator().manual_seed(8)) for _ in range(2))
    assert torch.equal(first, again)


def test_prior_samples_respect_the_positive_style_latents():
    model = random_model()
    z = model.sample_prior(50000, generator=torch.Generator().manual_seed(8))
    assert z.shape == (50000, LC + LD)
    assert (z[:, LC:] >= 0).all() and (z[:, :LC] < 0).any()
    assert model.latent_lower == [-math.inf] * LC + [0.0] * LD


def test_model_class_is_registered_and_the_marginal_says_what_to_use():
    assert model_class("bilinear") is BilinearGenerative
    model = random_model()
    assert model.free_energy_cost is None and model.num_latent == LC + LD
    with pytest.raises(NotImplementedError, match="HAIS"):
        model.log_prob(torch.zeros(1, M, dtype=torch.float64))


# ---- the product prior ---------------------------------------------------------------------

PARTS = [(LaplacePrior(), 2), (ExponentialPrior(), 3), (GaussianPrior(), 1)]


def test_product_prior_energy_is_the_sum_of_the_parts_and_its_gradient_matches_autograd():
    prior = ProductPrior(PARTS)
    assert prior.num_latent == 6 and prior.name == "product(laplace:2,exponential:3,gaussian:1)"
    z = torch.randn(40, 6, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    z[:, 2:5] = z[:, 2:5].abs() + 1e-3
    energy, grad = prior.energy_and_grad(z)
    expected = -(Laplace(0.0, 1.0).log_prob(z[:, :2]).sum(-1) + Exponential(1.0).log_prob(z[:, 2:5]).sum(-1) + Normal(0.0, 1.0).log_prob(z[:, 5:]).sum(-1))
    torch.testing.assert_close(energy, expected)
    z.requires_grad_(True)
    (auto,) = torch.autograd.grad(prior.energy_and_grad(z)[0].sum(), z)
    torch.testing.assert_close(grad, auto)


def test_product_prior_is_normalised_one_latent_at_a_time():
    """``exp(-E(z₀)) · Π_l ∫ exp(-(E(z₀ with z_l = t) - E(z₀))) dt = Π_l ∫ p_l = 1`` for a separable energy (1-D trapezoids)."""
    prior = ProductPrior(PARTS)
    reference = torch.tensor([[0.3, -1.2, 0.5, 2.0, 0.1, -0.7]], dtype=torch.float64)
    log_total = -prior.energy_and_grad(reference)[0].item()
    for latent, lower in enumerate(prior.lower):
        points = torch.linspace(max(lower, -30.0), 30.0, 600001, dtype=torch.float64)  # from the bound itself where there is one
        z = reference.repeat(points.numel(), 1)
        z[:, latent] = points
        relative = torch.exp(-(prior.energy_and_grad(z)[0] - prior.energy_and_grad(reference)[0]))
        log_total += math.log(torch.trapezoid(relative, points).item())
    assert log_total == pytest.approx(0.0, abs=1e-4)


def test_product_prior_samples_concatenate_the_parts():
    prior = ProductPrior(PARTS)
    samples = prior.sample(200000, 6, dtype=torch.float64, device=torch.device("cpu"), generator=torch.Generator().manual_seed(10))
    assert samples.shape == (200000, 6) and (samples[:, 2:5] >= 0).all()
    for block, (mean, variance) in ((slice(0, 2), (0.0, 2.0)), (slice(2, 5), (1.0, 1.0)), (slice(5, 6), (0.0, 1.0))):
        part = samples[:, block]
        assert abs(part.mean().item() - mean) < 5 * math.sqrt(variance / part.numel())
        assert abs(part.var().item() - variance) < 0.03 * variance
    torch.testing.assert_close(torch.corrcoef(samples.T), torch.eye(6, dtype=torch.float64), atol=0.02, rtol=0)


def test_product_prior_lower_bounds():
    assert ProductPrior(PARTS).lower == [-math.inf] * 2 + [0.0] * 3 + [-math.inf]
    assert ProductPrior([(LaplacePrior(), 2), (GaussianPrior(), 1)]).lower is None
    assert ProductPrior([(ExponentialPrior(), 2)]).lower == [0.0, 0.0]
    nested = ProductPrior([(ProductPrior([(LaplacePrior(), 1), (ExponentialPrior(), 1)]), 2), (GaussianPrior(), 1)])
    assert nested.lower == [-math.inf, 0.0, -math.inf] and nested.num_latent == 3


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hmc_reflection_at_minus_infinity_leaves_unbounded_latents_untouched(dtype):
    """HMCKernel's ``where(x < lower, 2·lower − x, x)`` with lower = -inf: no NaN/inf, same trajectory as no bound."""
    lower_bounds = ProductPrior([(LaplacePrior(), 2), (ExponentialPrior(), 2)]).lower
    lower = HMCKernel(0.1, lower=lower_bounds).lower.to(dtype)
    assert torch.isneginf(lower[:2]).all() and (lower[2:] == 0).all()
    target = torch.tensor([-50.0, 3.0, -2.0, 1.0], dtype=dtype)  # pulls c far down and d through its bound

    def evaluate(x):
        return Evaluation(0.5 * (x - target).square().sum(-1), x - target)

    g = torch.Generator().manual_seed(11)
    x0 = torch.rand(64, 4, generator=g, dtype=dtype)
    p0 = 3 * torch.randn(64, 4, generator=g, dtype=dtype)
    x_bounded, p_bounded, e_bounded = leapfrog(x0, p0, evaluate(x0), evaluate, step_size=0.2, num_steps=40, lower=lower)
    x_free, p_free, _ = leapfrog(x0, p0, evaluate(x0), evaluate, step_size=0.2, num_steps=40)
    assert torch.isfinite(x_bounded).all() and torch.isfinite(p_bounded).all() and torch.isfinite(e_bounded.grad).all()
    assert (x_bounded[:, 2:] >= 0).all() and (x_free[:, 2:] < 0).any()
    # the energy is separable, so the unbounded coordinates follow exactly the unconstrained trajectory
    assert torch.equal(x_bounded[:, :2], x_free[:, :2]) and torch.equal(p_bounded[:, :2], p_free[:, :2])


@pytest.mark.parametrize(
    "parts, match",
    [([], "non-empty"), ([(LaplacePrior(), 0)], r"parts\[0\]'s size"), ([("laplace", 2)], r"parts\[0\]"), ([(LaplacePrior(), 2.0)], "size")],
)
def test_product_prior_bad_parts_name_themselves(parts, match):
    with pytest.raises(ValueError, match=match):
        ProductPrior(parts)


def test_product_prior_rejects_the_wrong_width():
    prior = ProductPrior([(LaplacePrior(), 2), (ExponentialPrior(), 2)])
    with pytest.raises(ValueError, match="last dimension must be 4"):
        prior.energy_and_grad(torch.zeros(3, 5))
    with pytest.raises(ValueError, match="num_latent must be 4"):
        prior.sample(3, 5, dtype=torch.float64, device=torch.device("cpu"))


# ---- training support, checkpoints, arguments ----------------------------------------------


def test_constructor_sizes_defaults_and_init_scale():
    model = BilinearGenerative(36, num_style=8, init_std=0.17, generator=torch.Generator().manual_seed(12))
    assert (model.num_components, model.num_content, model.num_style, model.num_latent) == (36, 36, 8, 44)
    assert model.basis.shape == (36, 36) and model.content_weight.shape == (36, 36) and model.style_weight.shape == (36, 8)
    # the config's init_std: x has about unit variance per dimension under the prior (4 K Lc Ld s⁶ + σ² ≈ 1)
    assert 0.5 < model.sample(20000, generator=torch.Generator().manual_seed(13)).var(0).mean().item() < 2.0


def test_project_parameters_bounds_every_column_of_all_three_matrices():
    model = BilinearGenerative(4, 3, 2, 2, init_std=2.0, max_basis_norm=0.5, generator=torch.Generator().manual_seed(14)).double()
    model.project_parameters()
    for weight in (model.basis, model.content_weight, model.style_weight):
        assert (weight.norm(dim=0) <= 0.5 + 1e-12).all()
    free = random_model()
    before = [p.detach().clone() for p in free.parameters()]
    free.project_parameters()
    assert all(torch.equal(b, p) for b, p in zip(before, free.parameters()))


def test_em_hmc_e_step_reflects_the_style_latents_and_the_m_step_has_gradients():
    model = random_model(seed=15)
    data = model.sample(30, generator=torch.Generator().manual_seed(16))
    objective = EMHMC(num_hmc_steps=5, step_size=0.05, num_leapfrog=5)
    objective.prepare(model, data, generator=torch.Generator().manual_seed(17))
    assert (objective.latents[:, LC:] >= 0).all() and torch.isfinite(objective.latents).all()
    objective.loss(model, data).backward()
    assert all(torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0 for p in model.parameters())


def test_checkpoint_round_trip(tmp_path):
    model = BilinearGenerative.from_tensors(*random_weights(), noise_std=0.2, max_basis_norm=3.0)
    zoo.save(model, tmp_path / "m.pt")
    loaded = zoo.load(tmp_path / "m.pt")
    assert isinstance(loaded, BilinearGenerative) and loaded.config() == model.config()
    for name in ("basis", "content_weight", "style_weight"):
        torch.testing.assert_close(getattr(loaded, name), getattr(model, name))
    x, z = torch.randn(3, M, dtype=torch.float64), random_latents(3)
    torch.testing.assert_close(loaded.joint_energy(x, z), model.joint_energy(x, z))


@pytest.mark.parametrize(
    "kwargs, name",
    [(dict(num_visible=0), "num_visible"), (dict(num_visible=3, num_components=0), "num_components"),
     (dict(num_visible=3, num_content=0), "num_content"), (dict(num_visible=3, num_style=0), "num_style"),
     (dict(num_visible=3, noise_std=0.0), "noise_std"), (dict(num_visible=3, noise_std=float("nan")), "noise_std"),
     (dict(num_visible=3, init_std=-1.0), "init_std"), (dict(num_visible=3, max_basis_norm=0.0), "max_basis_norm")],
)
def test_bad_arguments_name_themselves(kwargs, name):
    with pytest.raises(ValueError, match=name):
        BilinearGenerative(**kwargs)


def test_bad_tensors_and_inputs_name_themselves():
    basis, content_weight, style_weight = random_weights()
    with pytest.raises(ValueError, match="content_weight must have K = 4 rows"):
        BilinearGenerative.from_tensors(basis, content_weight[:3], style_weight)
    with pytest.raises(ValueError, match="style_weight must have K = 4 rows"):
        BilinearGenerative.from_tensors(basis, content_weight, style_weight[:2])
    with pytest.raises(ValueError, match="basis contains NaN"):
        BilinearGenerative.from_tensors(torch.full_like(basis, float("nan")), content_weight, style_weight)
    with pytest.raises(ValueError, match="style_weight must be a 2-D"):
        BilinearGenerative.from_tensors(basis, content_weight, style_weight[:, 0])
    with pytest.raises(ValueError, match="content_weight must have basis's dtype"):
        BilinearGenerative.from_tensors(basis, content_weight.float(), style_weight)
    model = random_model()
    with pytest.raises(ValueError, match="z must have shape"):
        model.joint_energy(torch.zeros(2, M, dtype=torch.float64), torch.zeros(2, LC + LD + 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="x"):
        model.joint_energy(torch.zeros(2, M + 1, dtype=torch.float64), torch.zeros(2, LC + LD, dtype=torch.float64))
    with pytest.raises(ValueError, match="num_samples"):
        model.sample(0)
