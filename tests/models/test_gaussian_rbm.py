"""Gaussian–Bernoulli RBM: energies, log Z, samplers and its annealing path against exact oracles."""

import math
import pathlib
from functools import partial

import pytest
import torch
from factories import all_binary_states, random_gbrbm
from scipy import integrate

from pfzoo.estimators import AIS
from pfzoo.kernels import run_chain
from pfzoo.models import GaussianBernoulliRBM, model_class
from pfzoo.paths import build
from pfzoo.paths.gaussian_rbm import GaussianRBMGeometricPath

NUM_SAMPLES = 40000  # independent draws per conditional-sampler test
NUM_CHAINS = 20000  # Markov chains per stationarity test
Z_TOLERANCE = 5.0  # standard errors; a correct sampler fails a single comparison with probability ~6e-7


all_states = partial(all_binary_states, msb_first=True)  # first unit = top bit, as these tests were written


def exact_visible_moments(model, beta=1.0):
    """``E[v]`` and ``E[v²]`` under ``p_β(v) ∝ Σ_h exp(-β E(v, h))``, ``[V]`` each, by enumerating ``h``.

    ``p_β(h) ∝ exp(β [c·h + Σ_i (b_i u_i/σ_i + u_i²/2)])`` with ``u = W h``, and ``v | h ~ N(b + σ u, σ²/β)``.
    """
    h = all_states(model.num_hidden)
    w, b, c, sigma = (t.detach().double() for t in (model.weight, model.visible_bias, model.hidden_bias, model.sigma))
    u = h @ w.T
    p_h = torch.softmax(beta * (h @ c + u @ (b / sigma) + u.square().sum(-1) / 2), 0)
    mean_given_h = b + sigma * u
    return p_h @ mean_given_h, p_h @ (mean_given_h.square() + sigma.square() / beta)


def moments_match(samples, model, beta=1.0):
    """Whether each visible unit's sample mean and mean square lie within Z_TOLERANCE standard errors of ``p_β``'s."""
    samples = samples.double()
    mean, second = exact_visible_moments(model, beta)
    n = samples.shape[0]
    squares = samples.square()
    close_mean = (samples.mean(0) - mean).abs() <= Z_TOLERANCE * samples.std(0) / math.sqrt(n)
    close_second = (squares.mean(0) - second).abs() <= Z_TOLERANCE * squares.std(0) / math.sqrt(n)
    return bool(close_mean.all() and close_second.all())


# ---- energies and the partition function ------------------------------------------------------


def test_energy_formula():
    model = random_gbrbm(3, 2, scale=1.0)
    v = torch.tensor([[0.3, -1.2, 2.0]], dtype=torch.float64)
    h = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    w, b, c, s = model.weight, model.visible_bias, model.hidden_bias, model.sigma
    expected = sum((v[0, i] - b[i]) ** 2 / (2 * s[i] ** 2) for i in range(3))
    expected -= sum(v[0, i] / s[i] * w[i, j] * h[0, j] for i in range(3) for j in range(2))
    expected -= sum(c[j] * h[0, j] for j in range(2))
    assert model.energy(v, h).item() == pytest.approx(expected.item(), abs=1e-12)


def test_free_energy_sums_out_hidden_units():
    model = random_gbrbm(4, 5, scale=1.0)
    h = all_states(5)
    v = torch.randn(6, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 2
    for row in v:
        expected = -torch.logsumexp(-model.energy(row.expand(h.shape[0], -1), h), 0)
        assert torch.allclose(model.free_energy(row[None]), expected[None], atol=1e-10)


def test_log_partition_one_visible_unit_equals_quadrature():
    model = random_gbrbm(1, 4, scale=1.5, seed=2)

    def density(x):
        return math.exp(-model.free_energy(torch.tensor([[x]], dtype=torch.float64)).item())

    value, error = integrate.quad(density, -math.inf, math.inf, epsabs=0, epsrel=1e-12, limit=200)
    assert error < 1e-9 * value
    assert model.log_partition().item() == pytest.approx(math.log(value), abs=1e-9)


def test_log_partition_two_visible_units_equals_grid_integral():
    """A fine Riemann sum of a smooth, fast-decaying density is accurate far beyond the tolerance."""
    model = random_gbrbm(2, 3, scale=1.0, seed=3)
    step = 0.02
    axis = torch.arange(-15.0, 15.0, step, dtype=torch.float64)
    grid = torch.cartesian_prod(axis, axis)
    log_z_grid = torch.logsumexp(-model.free_energy(grid).detach(), 0) + 2 * math.log(step)
    assert model.log_partition().item() == pytest.approx(log_z_grid.item(), abs=1e-8)


def test_log_partition_of_base_is_closed_form():
    model = random_gbrbm(5, 3, scale=1.0)
    base = model.annealing_base("uniform")
    expected = 5 * 0.5 * math.log(2 * math.pi) + model.log_sigma.sum().item() + 3 * math.log(2)
    assert base.log_partition().item() == pytest.approx(expected, abs=1e-10)


def test_enumeration_limit_is_configurable_and_clear():
    with pytest.raises(ValueError, match="max_enumeration_units=10"):
        GaussianBernoulliRBM(3, 12, max_enumeration_units=10).log_partition()
    assert torch.isfinite(GaussianBernoulliRBM(3, 10, max_enumeration_units=10).log_partition())


# ---- conditional samplers ---------------------------------------------------------------------


@pytest.mark.parametrize("beta", [1.0, 0.3])
def test_hidden_sampler_matches_probabilities(beta):
    model = random_gbrbm(4, 3, scale=1.0, dtype=torch.float32)
    v = torch.tensor([[0.5, -1.0, 2.0, 0.0]]).expand(NUM_SAMPLES, -1)
    h = model.sample_h_given_v(v, beta=beta, generator=torch.Generator().manual_seed(1))
    p = torch.sigmoid(beta * ((v[0] / model.sigma) @ model.weight + model.hidden_bias)).detach()
    assert torch.allclose(model.hidden_probs(v[:1], beta=beta)[0], p)
    se = torch.sqrt(p * (1 - p) / NUM_SAMPLES)
    assert ((h.mean(0) - p).abs() <= Z_TOLERANCE * se + 1e-6).all()


@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_visible_sampler_matches_gaussian_moments(beta):
    model = random_gbrbm(4, 3, scale=1.0, dtype=torch.float32)
    h = torch.tensor([[0.0, 1.0, 1.0]]).expand(NUM_SAMPLES, -1)
    v = model.sample_v_given_h(h, beta=beta, generator=torch.Generator().manual_seed(2)).double()
    mean = (model.visible_bias + model.sigma * (model.weight @ h[0])).detach().double()
    variance = (model.sigma.square() / beta).detach().double()
    assert torch.allclose(model.visible_mean(h[:1])[0].double(), mean, atol=1e-6)
    assert ((v.mean(0) - mean).abs() <= Z_TOLERANCE * torch.sqrt(variance / NUM_SAMPLES)).all()
    variance_se = variance * math.sqrt(2 / (NUM_SAMPLES - 1))  # sd of the sample variance of a Gaussian
    assert ((v.var(0) - variance).abs() <= Z_TOLERANCE * variance_se).all()


@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_block_gibbs_reaches_the_tempered_marginal(beta):
    """``pfzoo.kernels`` drives the model's draws; after mixing, moments match ``p_β(v)`` by enumeration."""
    model = random_gbrbm(2, 3, scale=1.0, seed=4)
    start = torch.zeros(NUM_CHAINS, 2, dtype=torch.float64)  # a bad start: the chains must mix to pass
    state, _ = run_chain(*model.gibbs_chain(), start, 50, beta=beta, generator=torch.Generator().manual_seed(3))
    assert moments_match(state.visible, model, beta)
    assert not moments_match(state.visible, model, 1.5 - beta)  # power: the other temperature is rejected


def test_same_seed_same_samples():
    model = random_gbrbm(6, 4, scale=1.0, dtype=torch.float32)
    h = torch.ones(10, 4)
    a = model.sample_v_given_h(h, generator=torch.Generator().manual_seed(3))
    b = model.sample_v_given_h(h, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b)


# ---- annealing path and AIS -------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["uniform", "base_rate"])
def test_path_endpoints_increments_and_base(kind):
    model = random_gbrbm(5, 4, scale=0.8)
    data = torch.randn(30, 5, generator=torch.Generator().manual_seed(5), dtype=torch.float64) + 1.0
    base = model.annealing_base(kind, data)
    path, name = build(model, base=kind, data=data)
    assert isinstance(path, GaussianRBMGeometricPath) and name == kind
    v = path.draw_base(7, generator=torch.Generator().manual_seed(6)) * 1.5
    stats = path.target.statistics(v)
    assert torch.allclose(path.log_f(v, stats, 0.0), -base.free_energy(v).detach(), atol=1e-10)
    assert torch.allclose(path.log_f(v, stats, 1.0), -model.free_energy(v).detach(), atol=1e-10)
    for beta_from, beta_to in [(0.0, 0.1), (0.37, 0.38), (0.9, 1.0), (0.6, 0.2)]:
        expected = path.log_f(v, stats, beta_to) - path.log_f(v, stats, beta_from)
        assert torch.allclose(path.log_weight_increment(stats, beta_from, beta_to), expected, atol=1e-10)
    assert path.base_log_partition().item() == pytest.approx(base.log_partition().item(), abs=1e-10)


def test_path_transition_leaves_intermediate_model_invariant():
    """At β the path's model is the GBRBM with parameters (βW, (1-β) b_0 + βb, βc) and the shared σ."""
    model = random_gbrbm(2, 3, scale=1.0, seed=7)
    base = model.annealing_base("base_rate", torch.full((4, 2), 2.0, dtype=torch.float64), smoothing=0.0)
    path = GaussianRBMGeometricPath(target=model, base=base)
    beta = 0.6
    intermediate = GaussianBernoulliRBM.from_tensors(
        beta * model.weight.detach(),
        (1 - beta) * base.visible_bias + beta * model.visible_bias.detach(),
        beta * model.hidden_bias.detach(),
        model.log_sigma,
    )
    g = torch.Generator().manual_seed(8)
    state = path.sample_base(NUM_CHAINS, generator=g)
    for _ in range(50):
        state, _ = path.transition(state, beta, generator=g)
    assert moments_match(state.position, intermediate)
    assert not moments_match(state.position, model)  # power: the target itself is rejected


@pytest.fixture(scope="module")
def ais_problem():
    g = torch.Generator().manual_seed(0)
    model = GaussianBernoulliRBM.from_tensors(
        torch.randn(10, 8, generator=g) * 0.5,
        torch.randn(10, generator=g),
        torch.randn(8, generator=g) * 0.5,
        torch.randn(10, generator=g) * 0.3,
    )
    data = run_chain(*model.gibbs_chain(), torch.zeros(500, 10), 100, generator=torch.Generator().manual_seed(5))[0].visible
    return model, data


@pytest.mark.parametrize("base", ["uniform", "base_rate"])
def test_ais_matches_exact_log_partition(ais_problem, base):
    model, data = ais_problem
    exact = model.log_partition().item()
    estimate = AIS(num_chains=200, num_steps=2000, base=base)(model, data=data, generator=torch.Generator().manual_seed(1))
    assert estimate.log_weights.dtype == torch.float64
    assert abs(estimate.log_z - exact) <= 3 * estimate.stderr


def test_ais_same_seed_same_log_weights(ais_problem):
    model, data = ais_problem
    ais = AIS(num_chains=20, num_steps=50, base="base_rate")
    a = ais(model, data=data, generator=torch.Generator().manual_seed(9)).log_weights
    b = ais(model, data=data, generator=torch.Generator().manual_seed(9)).log_weights
    assert torch.equal(a, b)


def test_base_rate_base_shares_sigma_and_takes_smoothed_data_mean():
    model = random_gbrbm(3, 2, scale=1.0)
    data = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, -1.0]], dtype=torch.float64)
    base = model.annealing_base("base_rate", data, smoothing=1.0)
    assert torch.equal(base.weight, torch.zeros(3, 2, dtype=torch.float64))
    assert torch.equal(base.hidden_bias, torch.zeros(2, dtype=torch.float64))
    assert torch.equal(base.log_sigma, model.log_sigma)
    assert torch.allclose(base.visible_bias, (data.sum(0) + model.visible_bias) / 3)
    assert torch.allclose(model.annealing_base("base_rate", data, smoothing=0.0).visible_bias, data.mean(0))
    assert torch.equal(model.annealing_base("uniform").visible_bias, model.visible_bias)


# ---- construction, checkpoints, configs ---------------------------------------------------------


@pytest.mark.parametrize("learn_sigma", [False, True])
def test_config_and_state_dict_rebuild_the_model(learn_sigma):
    model = random_gbrbm(4, 3, scale=1.0, dtype=torch.float32)
    model = GaussianBernoulliRBM.from_tensors(
        model.weight, model.visible_bias, model.hidden_bias, model.log_sigma, learn_sigma=learn_sigma
    )
    assert ("log_sigma" in dict(model.named_parameters())) == learn_sigma
    rebuilt = model_class("gaussian_rbm")(**model.config())
    rebuilt.load_state_dict(model.state_dict())
    v = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    assert torch.equal(rebuilt.free_energy(v), model.free_energy(v))
    assert not GaussianBernoulliRBM.binary_visible


def test_hydra_config_instantiates():
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    # composed as the app composes it: the model config carries a Hydra defaults list (its default data set)
    with initialize_config_dir(config_dir=str(pathlib.Path(__file__).resolve().parents[2] / "conf"), version_base="1.3"):
        cfg = compose(config_name="train", overrides=["model=gaussian_rbm"])
    model = instantiate(cfg.model, num_visible=7)
    assert isinstance(model, GaussianBernoulliRBM)
    assert (model.num_visible, model.num_hidden, model.learn_sigma) == (7, 64, False)


# ---- bad inputs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, message",
    [
        (torch.ones(3, 5), "4 columns|shape"),
        (torch.ones(4), "shape"),
        (torch.tensor([[0.0, 1.0, float("nan"), 0.0]]), "NaN"),
        (torch.tensor([[0.0, float("inf"), 0.5, 0.0]]), "NaN or infinite"),
        (torch.ones(2, 4, dtype=torch.long), "floating"),
        (torch.ones(2, 4, device="meta"), "device"),
    ],
)
def test_bad_visible_input_raises_value_error_naming_argument(bad, message):
    model = GaussianBernoulliRBM(4, 3)
    with pytest.raises(ValueError, match=message):
        model.sample_h_given_v(bad)
    with pytest.raises(ValueError, match="^v "):
        model.free_energy(bad)
    with pytest.raises(ValueError, match="^data "):
        model.annealing_base("base_rate", bad)


def test_real_visible_values_are_accepted_but_hidden_must_be_binary():
    model = GaussianBernoulliRBM(4, 3)
    assert model.free_energy(torch.full((2, 4), -3.7)).shape == (2,)
    with pytest.raises(ValueError, match="^h .*binary"):
        model.sample_v_given_h(torch.full((2, 3), 0.5))
    with pytest.raises(ValueError, match="^h .*3 columns"):
        model.energy(torch.zeros(1, 4), torch.zeros(1, 2))


@pytest.mark.parametrize("beta", [0.0, -0.5, 1.5, float("nan")])
def test_beta_outside_open_closed_unit_interval_raises(beta):
    model = GaussianBernoulliRBM(4, 3)
    with pytest.raises(ValueError, match="beta"):
        model.sample_v_given_h(torch.ones(1, 3), beta=beta)
    with pytest.raises(ValueError, match="beta"):
        model.sample_h_given_v(torch.ones(1, 4), beta=beta)


def test_bad_constructor_and_annealing_arguments():
    with pytest.raises(ValueError, match="num_hidden"):
        GaussianBernoulliRBM(4, 0)
    with pytest.raises(ValueError, match="init_std"):
        GaussianBernoulliRBM(4, 3, init_std=-1.0)
    with pytest.raises(ValueError, match="learn_sigma"):
        GaussianBernoulliRBM(4, 3, learn_sigma="yes")
    with pytest.raises(ValueError, match="visible_bias"):
        GaussianBernoulliRBM.from_tensors(torch.zeros(4, 3), torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match="log_sigma must have shape"):
        GaussianBernoulliRBM.from_tensors(torch.zeros(4, 3), torch.zeros(4), torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match="log_sigma contains NaN"):
        GaussianBernoulliRBM.from_tensors(torch.zeros(4, 3), torch.zeros(4), torch.zeros(3), torch.full((4,), math.nan))
    model = GaussianBernoulliRBM(4, 3)
    with pytest.raises(ValueError, match="needs data"):
        model.annealing_base("base_rate")
    with pytest.raises(ValueError, match="kind"):
        model.annealing_base("gaussian")
    with pytest.raises(ValueError, match="smoothing"):
        model.annealing_base("base_rate", torch.zeros(2, 4), smoothing=-1.0)
    with pytest.raises(ValueError, match="at least one row"):
        model.annealing_base("base_rate", torch.zeros(0, 4), smoothing=0.0)


def test_path_rejects_incompatible_base():
    model = random_gbrbm(4, 3, scale=1.0)
    with pytest.raises(ValueError, match="zero weights"):
        GaussianRBMGeometricPath(target=model, base=model)
    other_sigma = GaussianBernoulliRBM.from_tensors(
        torch.zeros(4, 3, dtype=torch.float64), model.visible_bias, torch.zeros(3, dtype=torch.float64), model.log_sigma + 0.1
    )
    with pytest.raises(ValueError, match="log_sigma"):
        GaussianRBMGeometricPath(target=model, base=other_sigma)
    with pytest.raises(ValueError, match="shape"):
        GaussianRBMGeometricPath(target=model, base=GaussianBernoulliRBM(4, 2).double())
