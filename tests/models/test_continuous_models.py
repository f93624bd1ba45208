"""Behaviour shared by every continuous model: gradients, validation, annealing bases and checkpoints.

Table-driven: a new continuous model adds a row to ``MODELS``.
"""

import math
from functools import partial

import pytest
import torch
from factories import random_gaussian, random_ica, random_mcrbm, random_poe

from pfzoo import zoo
from pfzoo.models import ICA, ContinuousModel, Gaussian, MeanCovarianceRBM, ProductOfExperts
from pfzoo.paths import build
from pfzoo.paths.continuous import gaussian_base

NUM_VISIBLE = 4


NUM_EXPERTS = 7  # overcomplete products of experts

MODELS = {  # each takes seed= and dtype= keywords
    "gaussian": partial(random_gaussian, NUM_VISIBLE),
    "poe_laplace": partial(random_poe, NUM_VISIBLE, NUM_EXPERTS, "laplace"),
    "poe_student_t": partial(random_poe, NUM_VISIBLE, NUM_EXPERTS, "student_t"),
    "poe_student_t_complete": partial(random_poe, NUM_VISIBLE, NUM_VISIBLE, "student_t"),
    "ica": partial(random_ica, NUM_VISIBLE),
    "mcrbm": partial(random_mcrbm, NUM_VISIBLE, 6, 3, 2, covariance_bias_shift=0.0, visible_bias_scale=1.0),
}
OVERCOMPLETE = {"poe_laplace", "poe_student_t", "mcrbm"}  # no closed-form log Z
STATE_KEYS = {
    "gaussian": {"mean", "precision_log_cholesky"},
    "poe_laplace": {"filters"},
    "poe_student_t": {"filters", "log_shape"},
    "poe_student_t_complete": {"filters", "log_shape"},
    "ica": {"filters"},
    "mcrbm": {"factors", "pooling", "covariance_bias", "mean_weight", "mean_bias", "visible_bias"},
}


def points(num=9, seed=1, dtype=torch.float64):
    return 1.5 * torch.randn(num, NUM_VISIBLE, generator=torch.Generator().manual_seed(seed), dtype=dtype)


class Quartic(ContinuousModel):
    """``E(x) = (s/4) Σ_i x_i⁴`` with no analytic gradient: exercises the autograd fallback."""

    def __init__(self, num_visible):
        super().__init__()
        self.num_visible = num_visible
        self.scale = torch.nn.Parameter(torch.tensor(1.7, dtype=torch.float64))

    def energy(self, x):
        self.check_visible(x, "x")
        return self.scale * x.pow(4).sum(-1) / 4


# ---- gradients -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_analytic_grad_matches_autograd(name):
    model = MODELS[name]()
    x = points().requires_grad_(True)
    (expected,) = torch.autograd.grad(model.energy(x).sum(), x)
    assert torch.allclose(model.energy_grad(x.detach()), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_analytic_grad_matches_central_differences(name):
    model = MODELS[name]()
    x, step = points(), 1e-6
    grad = model.energy_grad(x)
    for i in range(NUM_VISIBLE):
        shift = torch.zeros_like(x)
        shift[:, i] = step
        difference = (model.energy(x + shift) - model.energy(x - shift)) / (2 * step)
        assert torch.allclose(grad[:, i], difference, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", MODELS)
def test_energy_and_grad_agrees_with_energy_and_energy_grad(name):
    model = MODELS[name]()
    x = points()
    energy, grad = model.energy_and_grad(x)
    assert energy.shape == (x.shape[0],) and grad.shape == x.shape
    assert torch.allclose(energy, model.energy(x), rtol=1e-13, atol=1e-13)
    assert torch.allclose(grad, model.energy_grad(x), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("name", MODELS)
def test_free_energy_is_energy_and_log_prob_uses_it(name):
    model = MODELS[name]()
    x = points()
    assert torch.equal(model.free_energy(x), model.energy(x))
    assert torch.equal(model.unnormalized_log_prob(x), -model.energy(x))


def test_autograd_fallback_for_models_without_analytic_gradients():
    model = Quartic(NUM_VISIBLE)
    x = points()
    expected = model.scale.detach() * x.pow(3)
    assert torch.allclose(model.energy_grad(x), expected, rtol=1e-13)
    with torch.no_grad():
        energy, grad = model.energy_and_grad(x)
    assert torch.allclose(energy, model.scale.detach() * x.pow(4).sum(-1) / 4) and torch.allclose(grad, expected)
    with pytest.raises(ValueError, match="^x .*NaN"):
        model.energy_grad(torch.full((2, NUM_VISIBLE), float("nan"), dtype=torch.float64))


# ---- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize(
    "bad, message",
    [
        (torch.ones(3, NUM_VISIBLE + 1, dtype=torch.float64), "columns"),
        (torch.ones(NUM_VISIBLE, dtype=torch.float64), "shape"),
        (torch.tensor([[0.0, 1.0, float("nan"), 0.0]], dtype=torch.float64), "NaN"),
        (torch.tensor([[0.0, float("inf"), 0.0, 0.0]], dtype=torch.float64), "infinite"),
        (torch.ones(2, NUM_VISIBLE, dtype=torch.long), "floating"),
        (torch.ones(2, NUM_VISIBLE, device="meta"), "device"),
    ],
)
def test_public_energies_reject_bad_input_naming_x(name, bad, message):
    model = MODELS[name]()
    for method in (model.energy, model.free_energy, model.unnormalized_log_prob):
        with pytest.raises(ValueError, match=f"^x .*{message}"):
            method(bad)


# ---- annealing bases -------------------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_isotropic_annealing_base_is_standard_normal_on_the_models_dtype(name):
    model = MODELS[name]()
    base = gaussian_base(model, "isotropic", None, 1.0)
    assert isinstance(base, Gaussian) and base.dtype == model.dtype and base.device == model.device
    assert torch.equal(base.mean, torch.zeros(NUM_VISIBLE, dtype=torch.float64))
    assert torch.equal(base.precision, torch.eye(NUM_VISIBLE, dtype=torch.float64))
    assert base.log_partition().item() == pytest.approx(0.5 * NUM_VISIBLE * math.log(2 * math.pi), abs=1e-12)
    # the data-free default: N(0, I), unless a model of the continuous family draws exact samples to fit a base to (the
    # Gaussian family's own paths start from N(0, I) without data)
    fits_own_samples = model.samples_exactly and model.path_family == "continuous"
    # of those, only the Gaussian has Gaussian tails; ICA's and the complete products' experts have heavier ones
    assert build(model)[1] == ("isotropic" if not fits_own_samples else "fitted" if isinstance(model, Gaussian) else "student_t")


def test_fitted_annealing_base_is_the_regularised_maximum_likelihood_gaussian():
    model = MODELS["poe_student_t"]()
    data = points(num=50, seed=2) @ torch.randn(NUM_VISIBLE, NUM_VISIBLE, dtype=torch.float64) + 3.0
    base = gaussian_base(model, "fitted", data, 1.0)  # smoothing is accepted and ignored
    centered = data - data.mean(0)
    expected_covariance = centered.T @ centered / data.shape[0] + 1e-6 * torch.eye(NUM_VISIBLE, dtype=torch.float64)
    assert torch.allclose(base.mean, data.mean(0), atol=1e-12)
    assert torch.allclose(base.covariance, expected_covariance, rtol=1e-9, atol=1e-12)
    assert torch.equal(base.precision, gaussian_base(model, "fitted", data, 0.0).precision)
    assert gaussian_base(model, "fitted", data.float(), 1.0).dtype == model.dtype
    # base="auto": a Student-t base only for heavy-tailed experts it can fit to the model's own exact samples
    assert build(model, data=data)[1] == "fitted" and not model.samples_exactly  # overcomplete: the Gaussian
    assert build(MODELS["poe_student_t_complete"](), data=data)[1] == "student_t"
    assert build(MODELS["poe_laplace"](), data=data)[1] == "fitted"  # ... and for light tails in model and data


def test_annealing_base_rejects_bad_arguments():
    model = MODELS["poe_laplace"]()
    with pytest.raises(ValueError, match="needs data"):
        build(model, base="fitted")
    with pytest.raises(ValueError, match="^data "):
        build(model, base="fitted", data=torch.ones(5, NUM_VISIBLE + 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="base must be 'auto' or one of"):
        build(model, base="base_rate")


# ---- checkpoints -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_checkpoint_round_trip(tmp_path, name, dtype):
    model = MODELS[name](dtype=dtype)
    path = zoo.save(model, tmp_path / f"{name}.pt")
    loaded = zoo.load(path)
    assert type(loaded) is type(model) and loaded.config() == model.config() and loaded.dtype == dtype
    assert set(loaded.state_dict()) == STATE_KEYS[name]
    x = points(dtype=dtype)
    assert torch.equal(loaded.energy(x), model.energy(x))
    assert all(torch.equal(a, b) for a, b in zip(loaded.energy_and_grad(x), model.energy_and_grad(x)))
    if name not in OVERCOMPLETE:
        assert torch.equal(loaded.log_partition(), model.log_partition())


@pytest.mark.parametrize(
    "make",
    [
        lambda g: Gaussian(5, generator=g),
        lambda g: ProductOfExperts(5, 9, "student_t", generator=g),
        lambda g: ICA(5, generator=g),
        lambda g: MeanCovarianceRBM(5, 8, 4, 3, generator=g),
    ],
)
def test_constructor_initialisation_is_reproducible(make):
    a, b = make(torch.Generator().manual_seed(4)), make(torch.Generator().manual_seed(4))
    assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))
    assert a.num_visible == 5 and a.dtype == torch.float32
