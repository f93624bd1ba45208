"""Mean-covariance RBM: the energy against a transcription of Ranzato's released code, analytic gradients, the
hidden units by enumeration, the parameter projection, validation, checkpoints, and HAIS against exact log Z
(a Gaussian special case in closed form, a 2-D model by quadrature)."""

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from factories import random_mcrbm, random_mcrbm_parameters

from pfzoo import zoo
from pfzoo.estimators import HAIS, BoundKind
from pfzoo.models import MeanCovarianceRBM

K_SIGMA = 3.0
SIZES = {"num_visible": 5, "num_factors": 7, "num_covariance_hidden": 4, "num_mean_hidden": 3}
ARGUMENTS = ("factors", "pooling", "covariance_bias", "mean_weight", "mean_bias", "visible_bias")


def points(num=8, width=5, seed=1, scale=1.5, dtype=torch.float64):
    return scale * torch.randn(num, width, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def released_code_energy(data, VF, FH, bias_cov, bias_vis, w_mean, bias_mean, small):
    """``compute_energy_mcRBM`` of Ranzato's released code (mcRBM_04May2010), step by step in NumPy, without the kinetic
    term. Layout as there: ``data`` is D×P (one column per example), biases are column vectors."""
    num_vis = data.shape[0]
    t6 = data * data  # DxP
    lengthsq = t6.sum(axis=0, keepdims=True)  # 1xP
    energy = 0.5 * lengthsq  # energy of quadratic regularization term
    lengthsq = lengthsq * (1.0 / num_vis)
    lengthsq = lengthsq + small
    length = np.sqrt(lengthsq)
    normcoeff = 1.0 / length
    normdata = data * normcoeff  # mult_by_row
    feat = VF.T @ normdata  # FxP
    featsq = feat * feat
    t1 = FH.T @ featsq  # KxP
    t1 = t1 * -0.5
    t1 = t1 + bias_cov
    t1 = np.exp(t1)
    t2 = t1 + 1
    t2 = np.log(t2)
    t2 = t2 * -1
    energy = energy + t2.sum(axis=0, keepdims=True)
    feat_mean = w_mean.T @ data  # JxP
    feat_mean = feat_mean + bias_mean
    feat_mean = np.exp(feat_mean)
    feat_mean = feat_mean + 1
    feat_mean = np.log(feat_mean)
    feat_mean = feat_mean * -1
    energy = energy + feat_mean.sum(axis=0, keepdims=True)
    t6 = data * bias_vis  # mult_by_col
    t6 = t6 * -1
    energy = energy + t6.sum(axis=0, keepdims=True)
    return energy.ravel()


# ---- the energy ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("small", [0.5, 1e-3])
def test_energy_matches_released_code(seed, small):
    tensors = random_mcrbm_parameters(seed=seed)
    model = MeanCovarianceRBM.from_tensors(**tensors, normalization_eps=small)
    x = torch.cat(
        [points(seed=seed + 10), points(num=3, seed=seed + 20, scale=1e-2), points(num=3, seed=seed + 30, scale=15.0), torch.zeros(1, 5, dtype=torch.float64)]
    )
    assert (x @ tensors["mean_weight"] + tensors["mean_bias"]).max() > 20  # beyond F.softplus's switch to the identity
    n = {name: t.numpy() for name, t in tensors.items()}
    expected = released_code_energy(
        x.numpy().T,
        VF=n["factors"],
        FH=n["pooling"],
        bias_cov=n["covariance_bias"][:, None],
        bias_vis=n["visible_bias"][:, None],
        w_mean=n["mean_weight"],
        bias_mean=n["mean_bias"][:, None],
        small=small,
    )
    np.testing.assert_allclose(model.energy(x).detach().numpy(), expected, rtol=1e-13, atol=1e-12)


def test_energy_and_grad_agrees_with_energy_and_keeps_dtype():
    for dtype in (torch.float32, torch.float64):
        model = random_mcrbm(dtype=dtype)
        x = points(dtype=dtype)
        energy, grad = model.energy_and_grad(x)
        assert energy.dtype == grad.dtype == dtype and energy.shape == (8,) and grad.shape == (8, 5)
        assert torch.equal(energy, model.energy(x))
        assert torch.equal(grad, model.energy_grad(x))


def gradient_points():
    """Typical points, small-norm points (|x|²/D ≪ ε, where the normalisation is nearly linear), and x = 0."""
    return torch.cat([points(seed=3), points(num=4, seed=4, scale=1e-3), points(num=2, seed=5, scale=10.0), torch.zeros(1, 5, dtype=torch.float64)])


@pytest.mark.parametrize("normalization_eps", [0.5, 1e-2])
def test_analytic_grad_matches_central_differences(normalization_eps):
    model = random_mcrbm(seed=6, normalization_eps=normalization_eps)
    x, step = gradient_points(), 1e-6
    grad = model.energy_and_grad(x)[1]
    for i in range(5):
        shift = torch.zeros_like(x)
        shift[:, i] = step
        difference = (model.energy(x + shift) - model.energy(x - shift)) / (2 * step)
        assert torch.allclose(grad[:, i], difference.detach(), rtol=1e-7, atol=1e-7), i


@pytest.mark.parametrize("normalization_eps", [0.5, 1e-2])
def test_analytic_grad_matches_autograd(normalization_eps):
    model = random_mcrbm(seed=7, normalization_eps=normalization_eps)
    x = gradient_points().requires_grad_(True)
    (expected,) = torch.autograd.grad(model.energy(x).sum(), x)
    assert torch.allclose(model.energy_and_grad(x.detach())[1], expected, rtol=1e-12, atol=1e-12)


def test_covariance_gradient_is_orthogonal_to_x_when_eps_is_negligible():
    """As ε → 0 the covariance term depends on x only through its direction, so its gradient has no radial part."""
    tensors = random_mcrbm_parameters(seed=8)
    tensors["mean_weight"].zero_()
    model = MeanCovarianceRBM.from_tensors(**tensors, normalization_eps=1e-12)
    x = points(seed=9)
    covariance_grad = model.energy_and_grad(x)[1] - (x - tensors["visible_bias"])
    assert torch.allclose((covariance_grad * x).sum(-1), torch.zeros(8, dtype=torch.float64), atol=1e-8)


# ---- hidden units ----------------------------------------------------------------------------


def enumerate_hidden(model, x, beta=1.0):
    """Every hidden state ``(h^c, h^m)`` [S, K], [S, J] and ``-β E(x, h)`` [S, B] from :meth:`joint_energy`."""
    k, j = model.num_covariance_hidden, model.num_mean_hidden
    states = torch.tensor(list(itertools.product([0.0, 1.0], repeat=k + j)), dtype=x.dtype)
    h_c, h_m = states[:, :k], states[:, k:]
    num_rows = x.shape[0]
    joint = model.joint_energy(
        x.repeat(len(states), 1), h_c.repeat_interleave(num_rows, 0), h_m.repeat_interleave(num_rows, 0)
    ).reshape(len(states), num_rows)
    return h_c, h_m, -beta * joint


def test_summing_the_joint_over_hiddens_gives_the_energy():
    model = random_mcrbm(seed=10, num_factors=4, num_covariance_hidden=3, num_mean_hidden=3)
    x = torch.cat([points(seed=11), torch.zeros(1, 5, dtype=torch.float64)])
    _, _, log_terms = enumerate_hidden(model, x)
    assert torch.allclose(torch.logsumexp(log_terms, 0), -model.energy(x), rtol=1e-13, atol=1e-12)


@pytest.mark.parametrize("beta", [1.0, 0.3])
def test_hidden_conditionals_match_enumeration(beta):
    model = random_mcrbm(seed=12, num_factors=4, num_covariance_hidden=3, num_mean_hidden=3)
    x = points(seed=13)
    h_c, h_m, log_terms = enumerate_hidden(model, x, beta)
    posterior = torch.softmax(log_terms, 0)  # [S, B]
    assert torch.allclose(model.covariance_hidden_probs(x, beta=beta), posterior.T @ h_c, atol=1e-13)
    assert torch.allclose(model.mean_hidden_probs(x, beta=beta), posterior.T @ h_m, atol=1e-13)
    # and the closed forms of the docstrings
    t = -0.5 * (x / (x.square().mean(-1, keepdim=True) + 0.5).sqrt() @ model.factors).square() @ model.pooling + model.covariance_bias
    assert torch.allclose(model.covariance_hidden_probs(x, beta=beta), torch.sigmoid(beta * t), atol=1e-14)
    assert torch.allclose(model.mean_hidden_probs(x, beta=beta), torch.sigmoid(beta * (x @ model.mean_weight + model.mean_bias)), atol=1e-14)


def test_sample_hidden_is_reproducible_with_the_right_frequencies():
    model = random_mcrbm(seed=14)
    x = points(num=2, seed=15).repeat_interleave(4000, 0)
    h_c, h_m = model.sample_hidden(x, generator=torch.Generator().manual_seed(0))
    again = model.sample_hidden(x, generator=torch.Generator().manual_seed(0))
    assert torch.equal(h_c, again[0]) and torch.equal(h_m, again[1])
    assert h_c.shape == (8000, 4) and h_m.shape == (8000, 3) and ((h_c == 0) | (h_c == 1)).all() and ((h_m == 0) | (h_m == 1)).all()
    for h, probs in ((h_c, model.covariance_hidden_probs(x)), (h_m, model.mean_hidden_probs(x))):
        p = probs.reshape(2, 4000, -1)[:, 0]
        stderr = (p * (1 - p) / 4000).sqrt().clamp_min(1e-3)
        assert ((h.reshape(2, 4000, -1).mean(1) - p).abs() <= 5 * stderr).all()


def test_joint_energy_validates_hidden_states():
    model = random_mcrbm()
    x = points(num=2)
    h_c, h_m = torch.zeros(2, 4, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="^covariance_hidden .*binary"):
        model.joint_energy(x, h_c + 0.5, h_m)
    with pytest.raises(ValueError, match="^mean_hidden .*3 columns"):
        model.joint_energy(x, h_c, torch.zeros(2, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="^mean_hidden .*one row per row of x"):
        model.joint_energy(x, h_c, h_m[:1])
    with pytest.raises(ValueError, match="^x "):
        model.joint_energy(x[:, :4], h_c, h_m)


# ---- parameters, projection and validation ---------------------------------------------------


def test_constructor_follows_the_released_code_initialisation():
    model = MeanCovarianceRBM(6, 8, 4, 3, generator=torch.Generator().manual_seed(0))
    assert set(model.state_dict()) == set(ARGUMENTS)
    assert torch.equal(model.pooling, torch.eye(8, 4)) and (model.covariance_bias == 2).all() and (model.mean_bias == -2).all()
    assert torch.equal(model.visible_bias, torch.zeros(6)) and model.dtype == torch.float32
    assert model.binary_visible is False and model.normalization_eps == 0.5
    assert model.config() == {
        "num_visible": 6,
        "num_factors": 8,
        "num_covariance_hidden": 4,
        "num_mean_hidden": 3,
        "normalization_eps": 0.5,
        "factor_norm": None,
        "normalize_pooling": False,
    }
    with pytest.raises(NotImplementedError):
        model.log_partition()


def test_project_parameters_clamps_pooling_and_normalises_columns():
    model = random_mcrbm(seed=16)
    with torch.no_grad():
        model.pooling[0, :] = -0.3
    kept = model.pooling.detach().clone()
    factors = model.factors.detach().clone()
    model.project_parameters()
    assert (model.pooling >= 0).all() and torch.equal(model.pooling, kept.clamp(min=0))
    assert torch.equal(model.factors, factors)  # no factor_norm: C untouched

    model = MeanCovarianceRBM.from_tensors(**random_mcrbm_parameters(seed=17), factor_norm=2.0, normalize_pooling=True)
    with torch.no_grad():
        model.pooling[:, 1] = -1.0  # a column that the clamp zeroes must stay zero, not become NaN
        model.pooling[2, 0] = -5.0
        model.factors[:, 3] = 0.0
    model.project_parameters()
    assert (model.pooling >= 0).all() and torch.isfinite(model.pooling).all()
    sums = model.pooling.sum(0)
    assert sums[1] == 0 and torch.allclose(sums[[0, 2, 3]], torch.ones(3, dtype=torch.float64), atol=1e-14)
    norms = model.factors.norm(dim=0)
    assert norms[3] == 0 and torch.allclose(norms[[0, 1, 2, 4, 5, 6]], torch.full((6,), 2.0, dtype=torch.float64), atol=1e-14)


def test_project_parameters_after_an_optimiser_step():
    model = random_mcrbm(seed=18)
    model.energy(points(seed=19)).mean().backward()  # ∂E/∂P ≥ 0, so descent pushes P negative
    with torch.no_grad():
        for parameter in model.parameters():
            parameter -= 10.0 * parameter.grad
    assert (model.pooling < 0).any()
    model.project_parameters()
    assert (model.pooling >= 0).all()


@pytest.mark.parametrize("name", ARGUMENTS)
def test_from_tensors_rejects_wrong_shapes_naming_the_argument(name):
    tensors = random_mcrbm_parameters()
    tensors[name] = torch.ones(*(s + 1 for s in tensors[name].shape), dtype=torch.float64)
    blamed = "pooling" if name == "factors" else name  # factors define D and F; the first tensor disagreeing is blamed
    with pytest.raises(ValueError, match=f"^{blamed} must "):
        MeanCovarianceRBM.from_tensors(**tensors)
    tensors[name] = torch.ones(2, 2, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match=f"^{name} must "):
        MeanCovarianceRBM.from_tensors(**tensors)
    tensors[name] = [1.0]
    with pytest.raises(ValueError, match=f"^{name} must "):
        MeanCovarianceRBM.from_tensors(**tensors)


@pytest.mark.parametrize("name", ARGUMENTS)
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_from_tensors_rejects_non_finite_values_naming_the_argument(name, value):
    tensors = random_mcrbm_parameters()
    tensors[name].view(-1)[0] = value
    with pytest.raises(ValueError, match=f"^{name} contains NaN or infinite"):
        MeanCovarianceRBM.from_tensors(**tensors)


def test_from_tensors_rejects_negative_pooling_and_integer_tensors():
    tensors = random_mcrbm_parameters()
    tensors["pooling"][1, 2] = -1e-3
    with pytest.raises(ValueError, match="^pooling must be non-negative"):
        MeanCovarianceRBM.from_tensors(**tensors)
    tensors = random_mcrbm_parameters()
    tensors["mean_bias"] = torch.zeros(3, dtype=torch.long)
    with pytest.raises(ValueError, match="^mean_bias must be a floating-point"):
        MeanCovarianceRBM.from_tensors(**tensors)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_factors": 0}, "num_factors"),
        ({"num_mean_hidden": 2.5}, "num_mean_hidden"),
        ({"normalization_eps": 0.0}, "normalization_eps"),
        ({"normalization_eps": float("nan")}, "normalization_eps"),
        ({"init_std": -1.0}, "init_std"),
        ({"mean_init_std": -1.0}, "mean_init_std"),
        ({"factor_norm": 0.0}, "factor_norm"),
        ({"normalize_pooling": 1}, "normalize_pooling"),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        MeanCovarianceRBM(**{**SIZES, **kwargs})


def test_public_methods_validate_x():
    model = random_mcrbm()
    bad = torch.full((2, 5), float("nan"), dtype=torch.float64)
    for method in (model.energy, model.covariance_hidden_probs, model.mean_hidden_probs, model.sample_hidden):
        with pytest.raises(ValueError, match="^x .*NaN"):
            method(bad)
    with pytest.raises(ValueError, match="^beta"):
        model.mean_hidden_probs(points(), beta=1.5)


# ---- checkpoints -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_checkpoint_round_trip_keeps_hyperparameters(tmp_path, dtype):
    model = MeanCovarianceRBM.from_tensors(**random_mcrbm_parameters(dtype=dtype), normalization_eps=0.1, factor_norm=1.5, normalize_pooling=True)
    loaded = zoo.load(zoo.save(model, tmp_path / "mcrbm.pt"))
    assert type(loaded) is MeanCovarianceRBM and loaded.config() == model.config() and loaded.dtype == dtype
    assert loaded.normalization_eps == 0.1 and loaded.factor_norm == 1.5 and loaded.normalize_pooling
    x = points(dtype=dtype)
    assert torch.equal(loaded.energy(x), model.energy(x))
    assert all(torch.equal(a, b) for a, b in zip(loaded.energy_and_grad(x), model.energy_and_grad(x)))


# ---- Hamiltonian AIS -------------------------------------------------------------------------


def test_hais_matches_closed_form_log_z_of_the_gaussian_special_case():
    """With C = 0 and W = 0, E(x) = ½|x − b_v|² − ½|b_v|² − Σ_k softplus(c_k) − Σ_j softplus(b_j), so
    log Z = (D/2) log 2π + ½|b_v|² + Σ_k softplus(c_k) + Σ_j softplus(b_j)."""
    tensors = random_mcrbm_parameters(num_visible=4, seed=20)
    tensors["factors"].zero_()
    tensors["mean_weight"].zero_()
    tensors["visible_bias"] = torch.tensor([0.8, -0.5, 0.3, 1.0], dtype=torch.float64)
    model = MeanCovarianceRBM.from_tensors(**tensors)
    b_v = tensors["visible_bias"]
    constant = F.softplus(tensors["covariance_bias"]).sum() + F.softplus(tensors["mean_bias"]).sum()
    x = points(width=4, seed=21)
    assert torch.allclose(model.energy(x), 0.5 * (x - b_v).square().sum(-1) - 0.5 * b_v.square().sum() - constant, atol=1e-13)
    exact = (2 * math.log(2 * math.pi) + 0.5 * b_v.square().sum() + constant).item()
    estimate = HAIS(num_chains=200, num_steps=300, step_size=0.2)(model, generator=torch.Generator().manual_seed(0))
    assert estimate.kind is BoundKind.UNBIASED_Z and 0 < estimate.stderr < 0.1
    assert abs(estimate.log_z - exact) <= K_SIGMA * estimate.stderr, (estimate.log_z, estimate.stderr, exact)


def test_hais_matches_2d_quadrature():
    """A 2-D mcRBM with strong covariance and mean terms: log Z by the trapezoid rule on a fine grid (spectrally
    accurate for this smooth, Gaussian-tailed density; the 0.1 and 0.05 grids agree to 1e-12)."""
    g = torch.Generator().manual_seed(0)
    dt = torch.float64
    model = MeanCovarianceRBM.from_tensors(
        factors=1.5 * torch.randn(2, 3, generator=g, dtype=dt),
        pooling=2 * torch.rand(3, 2, generator=g, dtype=dt),
        covariance_bias=torch.randn(2, generator=g, dtype=dt),
        mean_weight=torch.randn(2, 2, generator=g, dtype=dt),
        mean_bias=torch.randn(2, generator=g, dtype=dt),
        visible_bias=0.5 * torch.randn(2, generator=g, dtype=dt),
    )
    log_z = []
    for spacing in (0.1, 0.05):
        axis = torch.arange(-12, 12 + spacing / 2, spacing, dtype=dt)
        with torch.no_grad():
            log_z.append((torch.logsumexp(-model.energy(torch.cartesian_prod(axis, axis)), 0) + 2 * math.log(spacing)).item())
    assert log_z[0] == pytest.approx(log_z[1], abs=1e-10)
    without_factors = MeanCovarianceRBM.from_tensors(**{**{name: getattr(model, name).detach() for name in ARGUMENTS}, "factors": torch.zeros(2, 3, dtype=dt)})
    with torch.no_grad():
        log_z_without_factors = (torch.logsumexp(-without_factors.energy(torch.cartesian_prod(axis, axis)), 0) + 2 * math.log(spacing)).item()
    assert abs(log_z_without_factors - log_z[1]) > 1.0  # the covariance term matters: a discriminating check
    estimate = HAIS(num_chains=200, num_steps=1000, step_size=0.2)(model, generator=torch.Generator().manual_seed(1))
    assert 0 < estimate.stderr < 0.05
    assert abs(estimate.log_z - log_z[1]) <= K_SIGMA * estimate.stderr, (estimate.log_z, estimate.stderr, log_z[1])


def test_hais_runs_on_a_patch_sized_model():
    """Smoke: the config's sizes (36-D patches, F = 72, K = J = 36) in float32, released-code initialisation."""
    model = MeanCovarianceRBM(36, 72, 36, 36, factor_norm=1.0, normalize_pooling=True, generator=torch.Generator().manual_seed(0))
    model.project_parameters()
    estimate = HAIS(num_chains=20, num_steps=50)(model, generator=torch.Generator().manual_seed(1))
    assert estimate.log_weights.shape == (20,) and torch.isfinite(estimate.log_weights).all()
    assert math.isfinite(estimate.log_z) and math.isfinite(estimate.stderr)
