"""Products of Laplace / Student-t experts and complete Laplace ICA: energies and closed-form log Z against
explicit formulas and numerical integration."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate

from pfzoo.models import ICA, ProductOfExperts

NUM_SAMPLES = 20000
Z_TOLERANCE = 5.0  # standard errors; a correct sampler fails a single comparison with probability ~6e-7


def random_filters(num_experts, num_visible, seed=0, dtype=torch.float64):
    return torch.randn(num_experts, num_visible, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def expert_density(expert, shape):
    """``u ↦ exp(-E_l(u))`` for expert l, as a Python function of a float."""
    if expert == "laplace":
        return lambda u: math.exp(-abs(u))
    return lambda u: (1 + u * u) ** -shape


def expert_log_normaliser_closed_form(expert, shape):
    """``log ∫ exp(-E_l(u)) du``: log 2 for Laplace, ``½ log π + lnΓ(λ − ½) − lnΓ(λ)`` for Student-t."""
    if expert == "laplace":
        return math.log(2)
    return 0.5 * math.log(math.pi) + math.lgamma(shape - 0.5) - math.lgamma(shape)


def log_integral_2d(model):
    """``log ∫_ℝ² exp(-E(x)) dx`` by nested adaptive quadrature in polar coordinates.

    The energy is evaluated from the explicit formula, not through the model. The radial integral
    runs over [0, ∞); the angular one is split where a filter response changes sign (the Laplace kinks).
    """
    phi = model.filters.detach().tolist()
    shape = model.shape.detach().tolist()
    experts = [expert_density(model.expert, shape[l]) for l in range(len(phi))]

    def density(x, y):
        return math.prod(f(p[0] * x + p[1] * y) for f, p in zip(experts, phi))

    kinks = sorted((math.atan2(-p[0], p[1]) + k * math.pi) % (2 * math.pi) for p in phi for k in (0, 1))

    def radial(angle):
        c, s = math.cos(angle), math.sin(angle)
        return integrate.quad(lambda r: r * density(r * c, r * s), 0, math.inf, epsabs=0, epsrel=1e-10, limit=200)[0]

    return math.log(integrate.quad(radial, 0, 2 * math.pi, points=kinks, epsabs=0, epsrel=1e-10, limit=200)[0])


# ---- energies --------------------------------------------------------------------------------


@pytest.mark.parametrize("expert", ["laplace", "student_t"])
def test_energy_formula(expert):
    filters = random_filters(5, 3)
    shape = torch.tensor([0.7, 1.0, 1.5, 2.0, 4.0], dtype=torch.float64) if expert == "student_t" else None
    model = ProductOfExperts.from_tensors(filters, shape, expert=expert)
    x = torch.tensor([[0.3, -1.2, 2.0], [0.0, 0.5, -0.7]], dtype=torch.float64)
    for row, energy in zip(x.tolist(), model.energy(x).tolist()):
        expected = 0.0
        for l in range(5):
            u = sum(filters[l, m].item() * row[m] for m in range(3))
            expected += abs(u) if expert == "laplace" else shape[l].item() * math.log(1 + u * u)
        assert energy == pytest.approx(expected, abs=1e-12)


def test_laplace_gradient_is_sign_of_responses_times_filters():
    filters = random_filters(6, 4)
    model = ProductOfExperts.from_tensors(filters)
    x = random_filters(3, 4, seed=1)
    assert torch.allclose(model.energy_grad(x), torch.sign(x @ filters.T) @ filters, atol=1e-14)


# ---- partition function ----------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("expert", ["laplace", "student_t"])
def test_complete_log_partition_equals_2d_numerical_integral(expert, seed):
    filters = random_filters(2, 2, seed=seed)  # random, non-orthogonal
    shape = torch.tensor([1.5, 2.5], dtype=torch.float64) if expert == "student_t" else None
    model = ProductOfExperts.from_tensors(filters, shape, expert=expert)
    assert model.log_partition().item() == pytest.approx(log_integral_2d(model), abs=1e-8)


@pytest.mark.parametrize("shape", [0.55, 0.75, 1.0, 1.5, 3.7])
def test_student_t_expert_normaliser_equals_1d_integral(shape):
    integral = integrate.quad(expert_density("student_t", shape), -math.inf, math.inf, epsabs=0, epsrel=1e-10, limit=200)[0]
    assert expert_log_normaliser_closed_form("student_t", shape) == pytest.approx(math.log(integral), abs=1e-9)


def test_laplace_expert_normaliser_equals_1d_integral():
    halves = [integrate.quad(expert_density("laplace", None), a, b, epsabs=0, epsrel=1e-12)[0] for a, b in ((-math.inf, 0), (0, math.inf))]
    assert expert_log_normaliser_closed_form("laplace", None) == pytest.approx(math.log(sum(halves)), abs=1e-12)


@pytest.mark.parametrize("expert", ["laplace", "student_t"])
def test_36_dimensional_log_partition_is_change_of_variables_of_1d_integrals(expert):
    num = 36
    g = torch.Generator().manual_seed(3)
    filters = torch.randn(num, num, generator=g, dtype=torch.float64)
    shape = 0.75 + 3 * torch.rand(num, generator=g, dtype=torch.float64) if expert == "student_t" else None
    model = ProductOfExperts.from_tensors(filters, shape, expert=expert)
    identity = ProductOfExperts.from_tensors(torch.eye(num, dtype=torch.float64), shape, expert=expert)
    _, log_abs_det = np.linalg.slogdet(filters.numpy())
    assert (model.log_partition() - identity.log_partition()).item() == pytest.approx(-log_abs_det, abs=1e-10)
    lambdas = model.shape.tolist()
    one_dimensional = sum(
        math.log(integrate.quad(expert_density(expert, lam), -math.inf, math.inf, epsabs=0, epsrel=1e-10, limit=200)[0])
        if expert == "student_t"
        else math.log(2.0)
        for lam in lambdas
    )
    assert identity.log_partition().item() == pytest.approx(one_dimensional, abs=1e-8)


def test_log_partition_gradient_is_minus_inverse_transpose():
    filters = random_filters(3, 3, seed=4)
    model = ProductOfExperts.from_tensors(filters, torch.tensor([1.2, 2.0, 3.0], dtype=torch.float64), expert="student_t")
    model.log_partition().backward()
    assert torch.allclose(model.filters.grad, -torch.linalg.inv(filters).T, atol=1e-12)
    shape = model.shape.detach()
    expected_shape_grad = (torch.special.digamma(shape - 0.5) - torch.special.digamma(shape)) * shape  # d/d log λ
    assert torch.allclose(model.log_shape.grad, expected_shape_grad, atol=1e-12)


def test_log_partition_refuses_when_no_closed_form_or_z_is_infinite():
    with pytest.raises(NotImplementedError, match="complete"):
        ProductOfExperts.from_tensors(random_filters(5, 3)).log_partition()
    with pytest.raises(ValueError, match="infinite.*null space"):
        ProductOfExperts.from_tensors(random_filters(2, 3)).log_partition()
    with pytest.raises(ValueError, match="exceed 1/2"):
        shape = torch.tensor([0.5, 2.0], dtype=torch.float64)
        ProductOfExperts.from_tensors(random_filters(2, 2), shape, expert="student_t").log_partition()
    with pytest.raises(ValueError, match="singular"):
        ProductOfExperts.from_tensors(torch.ones(2, 2)).log_partition()


# ---- construction ----------------------------------------------------------------------------


def test_default_student_t_shape_gives_finite_log_partition():
    model = ProductOfExperts(4, 4, "student_t", generator=torch.Generator().manual_seed(0))
    assert torch.allclose(model.shape, torch.full((4,), 1.5))
    assert torch.isfinite(model.log_partition())
    assert model.config() == {"num_visible": 4, "num_experts": 4, "expert": "student_t"}
    assert not hasattr(ProductOfExperts(4, 8), "log_shape") and torch.equal(ProductOfExperts(4, 8).shape, torch.ones(8))


def test_bad_arguments_raise_value_error():
    with pytest.raises(ValueError, match="expert"):
        ProductOfExperts(3, 3, "gaussian")
    with pytest.raises(ValueError, match="num_experts"):
        ProductOfExperts(3, 0)
    with pytest.raises(ValueError, match="init_std"):
        ProductOfExperts(3, 3, init_std=-1.0)
    with pytest.raises(ValueError, match="filters must have shape"):
        ProductOfExperts.from_tensors(torch.ones(3))
    with pytest.raises(ValueError, match="filters contains NaN"):
        ProductOfExperts.from_tensors(torch.full((2, 2), float("nan")))
    with pytest.raises(ValueError, match="only to expert='student_t'"):
        ProductOfExperts.from_tensors(torch.eye(2), torch.ones(2))
    with pytest.raises(ValueError, match=r"shape must have shape \[2\]"):
        ProductOfExperts.from_tensors(torch.eye(2), torch.ones(3), expert="student_t")
    with pytest.raises(ValueError, match="positive"):
        ProductOfExperts.from_tensors(torch.eye(2), torch.tensor([1.0, 0.0]), expert="student_t")


# ---- ICA -------------------------------------------------------------------------------------


def test_ica_log_prob_is_exact_laplace_source_density():
    w = random_filters(5, 5, seed=5)
    model = ICA.from_tensors(w)
    x = random_filters(7, 5, seed=6) * 2
    expected = torch.linalg.slogdet(w).logabsdet - 5 * math.log(2) - (x @ w.T).abs().sum(-1)
    assert torch.allclose(model.log_prob(x), expected, atol=1e-12)
    poe = ProductOfExperts.from_tensors(w)
    assert torch.equal(model.energy(x), poe.energy(x))
    assert model.log_partition().item() == pytest.approx(poe.log_partition().item(), abs=1e-13)


def test_ica_starts_orthogonal():
    model = ICA(6, generator=torch.Generator().manual_seed(1))
    w = model.filters.detach().double()
    assert torch.allclose(w @ w.T, torch.eye(6, dtype=torch.float64), atol=1e-5)
    assert model.log_partition().item() == pytest.approx(6 * math.log(2), abs=1e-5)
    assert model.config() == {"num_visible": 6}


def test_ica_samples_have_independent_laplace_sources():
    model = ICA.from_tensors(random_filters(3, 3, seed=7))
    x = model.sample(NUM_SAMPLES, generator=torch.Generator().manual_seed(8))
    assert x.shape == (NUM_SAMPLES, 3)
    sources = x @ model.filters.detach().T
    # Laplace(0, 1): E s = 0, E s² = 2, E|s| = 1, and independent sources have E[s_i s_j] = 0.
    for statistic, expected in ((sources, 0.0), (sources.square(), 2.0), (sources.abs(), 1.0), (sources[:, 0] * sources[:, 1], 0.0)):
        stderr = statistic.std(0) / math.sqrt(NUM_SAMPLES)
        assert ((statistic.mean(0) - expected).abs() <= Z_TOLERANCE * stderr).all()


def test_ica_bad_arguments():
    with pytest.raises(ValueError, match="square"):
        ICA.from_tensors(torch.ones(2, 3))
    with pytest.raises(ValueError, match="NaN"):
        ICA.from_tensors(torch.full((2, 2), float("nan")))
    with pytest.raises(ValueError, match="num_samples"):
        ICA(2).sample(-1)
