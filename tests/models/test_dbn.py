"""DBN: exact quantities against brute-force sums of the joint built from its definition, samplers as distributions."""

import math
from functools import partial

import pytest
import torch
from factories import all_binary_states, random_dbn, random_dbn_parameters
from scipy import stats

from pfzoo import zoo
from pfzoo.estimators import AIS
from pfzoo.logmath import summarize_log_weights
from pfzoo.models import DBN, RBM
from pfzoo.models.rbm import base_rate_visible_bias
from pfzoo.paths import RBMGeometricPath, build

P_VALUE_FLOOR = 1e-4  # fixed seeds; a correct sampler fails a χ² test with probability 1e-4
SHAPES = [[6, 4, 3], [5, 4, 3, 2]]


# This file's DBNs have N(0, 1) biases drawn in the model's dtype; its states list the first unit as the top bit.
random_parameters = partial(random_dbn_parameters, bias_scale=1.0, draw_dtype=None)
random_dbn = partial(random_dbn, bias_scale=1.0, draw_dtype=None)
all_states = partial(all_binary_states, msb_first=True)


def state_index(bits):
    """Row of {0,1} values → integer index, first column most significant (the order of ``all_states``)."""
    weights = 2 ** torch.arange(bits.shape[1] - 1, -1, -1)
    return (bits.long() * weights).sum(1)


def brute_log_joint(params, layers):
    """``log p*(x_0, …, x_L) = Σ_{i<L-1} log p(x_i | x_{i+1}) - E_top(x_{L-1}, x_L)`` from the definition (RAISE eq. 3)."""
    weights, visible_biases, hidden_biases = params
    total = torch.zeros(layers[0].shape[0], dtype=torch.float64)
    for i in range(len(weights) - 1):
        p = torch.sigmoid(layers[i + 1] @ weights[i].T + visible_biases[i])
        total += (layers[i] * torch.log(p) + (1 - layers[i]) * torch.log(1 - p)).sum(-1)
    lower, upper = layers[-2], layers[-1]
    total += ((lower @ weights[-1]) * upper).sum(-1) + lower @ visible_biases[-1] + upper @ hidden_biases[-1]
    return total


def joint_table(sizes, params):
    """All joint states (layers as a list of ``[M, n_i]``) and their unnormalised log probabilities ``[M]``."""
    states = all_states(sum(sizes))
    layers = list(torch.split(states, sizes, dim=1))
    return layers, brute_log_joint(params, layers)


def exact_marginal(sizes, params, layer):
    """Exact ``p(x_layer)`` over ``all_states(n_layer)``, by summing the joint."""
    layers, log_joint = joint_table(sizes, params)
    index = state_index(layers[layer])
    log_norm = torch.logsumexp(log_joint, 0)
    probs = torch.zeros(2 ** sizes[layer], dtype=torch.float64)
    probs.index_add_(0, index, torch.exp(log_joint - log_norm))
    return probs


def chi_square_p_value(samples, probabilities):
    counts = torch.bincount(state_index(samples), minlength=probabilities.numel()).double()
    expected = probabilities * samples.shape[0]
    keep = expected > 5  # pool rare cells so the χ² approximation holds
    observed = torch.cat([counts[keep], counts[~keep].sum()[None]])
    expected = torch.cat([expected[keep], expected[~keep].sum()[None]])
    if expected[-1] < 1e-12:
        observed, expected = observed[:-1], expected[:-1]
    return stats.chisquare(observed.numpy(), expected.numpy()).pvalue


# ---- construction ---------------------------------------------------------------------------


def test_layout_and_config():
    dbn = DBN([7, 5, 3, 2], generator=torch.Generator().manual_seed(0))
    assert dbn.num_visible == 7 and dbn.num_layers == 4 and len(dbn.rbms) == 3
    assert [(rbm.num_visible, rbm.num_hidden) for rbm in dbn.rbms] == [(7, 5), (5, 3), (3, 2)]
    assert dbn.top is dbn.rbms[2]
    assert dbn.config() == {"layer_sizes": [7, 5, 3, 2], "max_enumeration_units": 25}
    assert dbn.free_energy_cost == 8 and dbn.log_partition_cost == 2
    assert set(dbn.state_dict()) == {f"rbms.{i}.{name}" for i in range(3) for name in ("weight", "visible_bias", "hidden_bias")}


def test_app_style_construction_from_num_visible_and_hidden_sizes():
    """The app instantiates models with ``num_visible`` from the data set (conf/model/dbn.yaml gives ``hidden_sizes``)."""
    a = DBN(num_visible=12, hidden_sizes=[5, 3], init_std=0.1, generator=torch.Generator().manual_seed(3))
    b = DBN([12, 5, 3], init_std=0.1, generator=torch.Generator().manual_seed(3))
    assert a.layer_sizes == [12, 5, 3]
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert DBN([12, 5, 3], num_visible=12).layer_sizes == [12, 5, 3]


def test_from_rbms_copies_and_from_tensors_round_trip():
    weights, visible_biases, hidden_biases = random_parameters([5, 4, 3])
    rbms = [RBM.from_tensors(w, b, c) for w, b, c in zip(weights, visible_biases, hidden_biases)]
    dbn = DBN.from_rbms(rbms)
    with torch.no_grad():
        rbms[0].weight.add_(1.0)
    assert torch.equal(dbn.rbms[0].weight, weights[0]) and torch.equal(dbn.top.hidden_bias, hidden_biases[1])
    assert dbn.dtype == torch.float64


# ---- exact quantities against brute force ---------------------------------------------------


@pytest.mark.parametrize("sizes", SHAPES)
def test_free_energy_and_log_partition_equal_brute_force(sizes):
    params = random_parameters(sizes, scale=1.0, seed=1)
    dbn = DBN.from_tensors(*params)
    layers, log_joint = joint_table(sizes, params)
    v_index = state_index(layers[0])
    expected_log_f = torch.stack([torch.logsumexp(log_joint[v_index == k], 0) for k in range(2 ** sizes[0])])
    with torch.no_grad():
        free_energy = dbn.free_energy(all_states(sizes[0]))
    assert free_energy.dtype == torch.float64
    assert torch.allclose(-free_energy, expected_log_f, atol=1e-10, rtol=0)
    assert dbn.log_partition().item() == pytest.approx(torch.logsumexp(log_joint, 0).item(), abs=1e-10)


@pytest.mark.parametrize("sizes", SHAPES)
def test_energy_is_negative_log_unnormalised_joint_and_normalises_with_top_z(sizes):
    params = random_parameters(sizes, seed=2)
    dbn = DBN.from_tensors(*params)
    layers, log_joint = joint_table(sizes, params)
    energy = dbn.energy(*layers)
    assert torch.allclose(-energy, log_joint, atol=1e-10, rtol=0)
    assert torch.logsumexp(-energy - dbn.log_partition(), 0).item() == pytest.approx(0.0, abs=1e-10)


@pytest.mark.parametrize("sizes", SHAPES)
def test_log_prob_normalises_over_all_visible_vectors(sizes):
    dbn = random_dbn(sizes, scale=1.5, seed=3)
    with torch.no_grad():
        log_p = dbn.log_prob(all_states(sizes[0]))
    assert torch.logsumexp(log_p, 0).item() == pytest.approx(0.0, abs=1e-10)


def test_float32_model_free_energy_matches_float64():
    sizes = [6, 4, 3]
    dbn32 = random_dbn(sizes, seed=4).float()
    dbn64 = random_dbn(sizes, seed=4).float().double()  # the same float32-rounded parameters
    v = all_states(6)
    with torch.no_grad():
        assert torch.allclose(dbn32.free_energy(v.float()), dbn64.free_energy(v), atol=1e-4)


def test_free_energy_refuses_large_enumeration_and_points_to_estimators():
    dbn = DBN([4, 10, 8, 2], max_enumeration_units=16)
    with pytest.raises(ValueError, match="2\\^18.*max_enumeration_units=16.*propose_path_state"):
        dbn.free_energy(torch.zeros(1, 4))
    assert torch.isfinite(dbn.log_partition())


# ---- conditionals used by the CSL estimator ------------------------------------------------


def test_log_prob_visible_given_hidden_matches_direct_computation():
    sizes = [6, 4, 3]
    params = random_parameters(sizes, seed=5)
    dbn = DBN.from_tensors(*params)
    g = torch.Generator().manual_seed(0)
    v = torch.bernoulli(torch.full((7, 6), 0.5, dtype=torch.float64), generator=g)
    hidden = torch.bernoulli(torch.full((9, 4), 0.5, dtype=torch.float64), generator=g)
    result = dbn.log_prob_visible_given_hidden(v, hidden)
    assert result.shape == (7, 9) and result.dtype == torch.float64
    for b in range(7):
        for s in range(9):
            p = torch.sigmoid(params[0][0] @ hidden[s] + params[1][0])
            expected = (v[b] * torch.log(p) + (1 - v[b]) * torch.log(1 - p)).sum()
            assert result[b, s].item() == pytest.approx(expected.item(), abs=1e-10)


def test_recognize_is_the_deterministic_bottom_up_pass():
    params = random_parameters([5, 4, 3, 2], seed=6)
    dbn = DBN.from_tensors(*params)
    v = all_states(5)
    means = dbn.recognize(v)
    expected = v
    for i, mean in enumerate(means):
        expected = torch.sigmoid(expected @ params[0][i] + params[2][i])
        assert torch.allclose(mean, expected, atol=1e-12)
    assert [m.shape[1] for m in means] == [4, 3, 2]


@pytest.mark.parametrize("sizes", SHAPES)
def test_hidden_chain_samples_the_first_hidden_marginal(sizes):
    """χ² of h¹ after 40 sweeps from a bad start (many independent chains) against the enumerated p(h¹)."""
    params = random_parameters(sizes, seed=7)
    dbn = DBN.from_tensors(*params).float()
    exact = exact_marginal(sizes, params, 1)
    start = torch.zeros(20000, sizes[0])
    chain = dbn.hidden_chain(start, generator=torch.Generator().manual_seed(1))
    for _ in range(40):
        h1 = next(chain)
    assert h1.shape == (20000, sizes[1]) and set(h1.unique().tolist()) <= {0.0, 1.0}
    assert chi_square_p_value(h1, exact) > P_VALUE_FLOOR
    # Power: the same samples must fail against the h¹ marginal of a DBN whose top RBM is perturbed.
    wrong_params = (params[0][:-1] + [params[0][-1] * 0.7], params[1], params[2])
    wrong = exact_marginal(sizes, wrong_params, 1)
    assert 0.5 * (wrong - exact).abs().sum() < 0.1  # a modest error the test must still catch
    assert chi_square_p_value(h1, wrong) < 1e-8


def test_hidden_chain_validates_eagerly_and_leaves_grad_mode_alone():
    dbn = DBN([6, 4, 3])
    with pytest.raises(ValueError, match="initial_visible"):
        dbn.hidden_chain(torch.full((3, 6), 0.5))  # raised at the call, not at the first next()
    chain = dbn.hidden_chain(torch.ones(3, 6))
    assert next(chain).shape == (3, 4)
    assert torch.is_grad_enabled()


def test_sample_draws_visible_vectors_from_the_model():
    sizes = [5, 4, 3, 2]
    params = random_parameters(sizes, seed=8)
    dbn = DBN.from_tensors(*params).float()
    layers = dbn.sample_layers(20000, 40, generator=torch.Generator().manual_seed(2))
    assert [tuple(x.shape) for x in layers] == [(20000, n) for n in sizes]
    assert chi_square_p_value(layers[0], exact_marginal(sizes, params, 0)) > P_VALUE_FLOOR
    assert chi_square_p_value(torch.cat(layers[2:], 1), exact_marginal_pair(sizes, params)) > P_VALUE_FLOOR


def exact_marginal_pair(sizes, params):
    """Exact ``p(h^{L-1}, h^L)`` (the top RBM's distribution) indexed as ``state_index([h^{L-1}, h^L])``."""
    layers, log_joint = joint_table(sizes, params)
    top_states = torch.cat(layers[-2:], 1)
    probs = torch.zeros(2 ** top_states.shape[1], dtype=torch.float64)
    probs.index_add_(0, state_index(top_states), torch.softmax(log_joint, 0))
    return probs


def test_sample_from_initial_visible_is_reproducible():
    dbn = random_dbn([5, 4, 3, 2], seed=9)
    start = torch.ones(6, 5, dtype=torch.float64)
    a = dbn.sample_layers(6, 3, initial_visible=start, generator=torch.Generator().manual_seed(4))
    b = dbn.sample_layers(6, 3, initial_visible=start, generator=torch.Generator().manual_seed(4))
    assert all(torch.equal(x, y) for x, y in zip(a, b))


# ---- importance sampling and annealing ------------------------------------------------------


@pytest.mark.parametrize("sizes", SHAPES)
def test_propose_path_state_weights_are_unbiased_for_f_and_obey_jensen(sizes):
    dbn = random_dbn(sizes, scale=1.0, seed=10)
    v_rows = all_states(sizes[0])[[0, 5, 17, -1]]
    num = 20000
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        log_f = -dbn.free_energy(v_rows)
    for row, target in zip(v_rows, log_f):
        proposal = dbn.propose_path_state(row.expand(num, -1), generator=g)
        assert proposal.state.shape == (num, sizes[-2]) and proposal.log_weight.dtype == torch.float64
        summary = summarize_log_weights(proposal.log_weight)
        assert abs(summary.log_mean.item() - target.item()) < 5 * summary.stderr.item()
        mean_log_w = proposal.log_weight.mean().item()
        sd_log_w = proposal.log_weight.std().item()
        assert mean_log_w <= target.item() + 5 * sd_log_w / math.sqrt(num)


def test_propose_path_state_weight_for_two_layers_is_exact_per_state():
    """For L = 2 the state is h¹ itself: log w = log p(v | h¹) - F_top(h¹) - log q(h¹ | v)."""
    params = random_parameters([6, 4, 3], seed=11)
    dbn = DBN.from_tensors(*params)
    v = all_states(6)[[3, 40]].repeat_interleave(50, 0)
    proposal = dbn.propose_path_state(v, generator=torch.Generator().manual_seed(0))
    h = proposal.state
    p = torch.sigmoid(h @ params[0][0].T + params[1][0])
    q = torch.sigmoid(v @ params[0][0] + params[2][0])
    top = RBM.from_tensors(params[0][1], params[1][1], params[2][1])
    expected = (
        (v * p.log() + (1 - v) * (1 - p).log()).sum(-1)
        - top.free_energy(h).detach()
        - (h * q.log() + (1 - h) * (1 - q).log()).sum(-1)
    )
    assert torch.allclose(proposal.log_weight, expected, atol=1e-10)


def test_annealing_bases_and_path():
    params = random_parameters([5, 4, 3, 2], seed=12)
    dbn = DBN.from_tensors(*params)
    uniform = dbn.annealing_base("uniform")
    assert isinstance(uniform, RBM) and uniform.weight.shape == (3, 2)
    assert all((p == 0).all() for p in uniform.parameters())
    data = all_states(5)[::3]
    base = dbn.annealing_base("base_rate", data, smoothing=0.5)
    means = torch.sigmoid(torch.sigmoid(data @ params[0][0] + params[2][0]) @ params[0][1] + params[2][1])
    assert torch.allclose(base.visible_bias, base_rate_visible_bias(means, 0.5), atol=1e-12)
    assert (base.weight == 0).all() and (base.hidden_bias == 0).all()
    path, name = build(dbn, base="base_rate", data=data, smoothing=0.5)
    assert isinstance(path, RBMGeometricPath) and name == "base_rate"
    assert torch.equal(path.target.base_visible_bias, base.visible_bias.detach())
    state = path.draw_base(7, generator=torch.Generator().manual_seed(0))
    assert state.shape == (7, 3)
    assert torch.allclose(path.log_f(state, path.target.statistics(state), 1.0), -dbn.top.free_energy(state).detach().double())


@pytest.mark.parametrize("base", ["uniform", "base_rate"])
def test_ais_estimates_top_log_partition(base):
    sizes = [6, 5, 4]
    dbn = random_dbn(sizes, scale=1.0, seed=13, dtype=torch.float32)
    data = dbn.sample_layers(300, 50, generator=torch.Generator().manual_seed(5))[0]
    estimate = AIS(num_chains=200, num_steps=300, base=base)(dbn, data=data, generator=torch.Generator().manual_seed(6))
    exact = dbn.log_partition().item()
    assert estimate.stderr < 0.05, "stderr too large to make this a useful check"
    assert abs(estimate.log_z - exact) < 3 * estimate.stderr, (estimate.log_z, estimate.stderr, exact)


def test_ais_log_likelihood_of_a_dbn_uses_exact_free_energies():
    dbn = random_dbn([6, 4, 3], seed=14, dtype=torch.float32)
    data = all_states(6, dtype=torch.float32)[::5]
    estimate = AIS(num_chains=100, num_steps=200).log_likelihood(dbn, data, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        exact = dbn.log_prob(data).mean().item()
    assert abs(estimate.mean - exact) < 3 * estimate.stderr + 1e-5


# ---- validation and checkpoints ------------------------------------------------------------


def test_bad_inputs_raise_value_errors_naming_the_argument():
    dbn = DBN([6, 4, 3])
    half = torch.full((2, 6), 0.5)
    with pytest.raises(ValueError, match="v must be binary"):
        dbn.free_energy(half)
    with pytest.raises(ValueError, match="v must have 6 columns"):
        dbn.propose_path_state(torch.zeros(2, 5))
    with pytest.raises(ValueError, match="hidden must have 4 columns"):
        dbn.log_prob_visible_given_hidden(torch.zeros(2, 6), torch.zeros(3, 3))
    with pytest.raises(ValueError, match="data must be binary"):
        dbn.annealing_base("base_rate", half)
    with pytest.raises(ValueError, match="needs data"):
        dbn.annealing_base("base_rate")
    with pytest.raises(ValueError, match="kind must be"):
        dbn.annealing_base("gaussian")
    with pytest.raises(ValueError, match="initial_visible must have 5 rows"):
        dbn.sample_layers(5, 2, initial_visible=torch.zeros(4, 6))
    with pytest.raises(ValueError, match="num_samples"):
        dbn.sample_layers(0)
    with pytest.raises(ValueError, match="layer 2"):
        dbn.energy(torch.zeros(2, 6), torch.zeros(2, 4), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="expected 3 layer states"):
        dbn.energy(torch.zeros(2, 6), torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"base RBM has shape \(6, 4\), target \(4, 3\)"):
        RBMGeometricPath(target=dbn.top, base=RBM(6, 4))
    with pytest.raises(ValueError, match="generator"):
        dbn.propose_path_state(torch.zeros(2, 6), generator=1)


def test_bad_constructor_arguments_raise_value_errors_naming_the_argument():
    with pytest.raises(ValueError, match="at least three layers"):
        DBN([6, 4])
    with pytest.raises(ValueError, match="layer_sizes\\[1\\]"):
        DBN([6, 0, 3])
    with pytest.raises(ValueError, match="num_visible=5 disagrees"):
        DBN([6, 4, 3], num_visible=5)
    with pytest.raises(ValueError, match="hidden_sizes"):
        DBN(num_visible=5)
    with pytest.raises(ValueError, match="init_std"):
        DBN([6, 4, 3], init_std=-1.0)
    weights, visible_biases, hidden_biases = random_parameters([6, 4, 3])
    with pytest.raises(ValueError, match="weights\\[1\\] has 3 rows"):
        DBN.from_tensors([weights[0], torch.zeros(3, 2)], visible_biases, hidden_biases)
    with pytest.raises(ValueError, match="visible_biases\\[1\\] must have shape \\[4\\]"):
        DBN.from_tensors(weights, [visible_biases[0], torch.zeros(5)], hidden_biases)
    with pytest.raises(ValueError, match="hidden_biases must hold 2"):
        DBN.from_tensors(weights, visible_biases, hidden_biases[:1])
    with pytest.raises(ValueError, match="weights\\[0\\] contains NaN"):
        DBN.from_tensors([weights[0] * math.nan, weights[1]], visible_biases, hidden_biases)
    with pytest.raises(ValueError, match="L ≥ 2"):
        DBN.from_tensors(weights[:1], visible_biases[:1], hidden_biases[:1])
    with pytest.raises(ValueError, match="rbms\\[1\\] has 5 visible units"):
        DBN.from_rbms([RBM(6, 4), RBM(5, 3)])
    with pytest.raises(ValueError, match="rbms\\[0\\] must be a binary"):
        DBN.from_rbms([DBN([6, 4, 3]), RBM(4, 3)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_checkpoint_round_trip(tmp_path, dtype):
    dbn = random_dbn([5, 4, 3, 2], seed=15, dtype=dtype)
    zoo.save(dbn, tmp_path / "dbn.pt")
    loaded = zoo.load(tmp_path / "dbn.pt")
    assert type(loaded) is DBN and loaded.config() == dbn.config() and loaded.dtype == dtype
    v = all_states(5, dtype=dtype)
    with torch.no_grad():
        assert torch.equal(loaded.free_energy(v), dbn.free_energy(v))
    assert loaded.log_partition().item() == dbn.log_partition().item()
