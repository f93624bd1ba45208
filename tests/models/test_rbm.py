import math
from functools import partial

import pytest
import torch
from factories import all_binary_states, chi_square_p_value, random_rbm
from torch.nn import functional as F

from pfzoo.models import RBM
from pfzoo.models.rbm import base_rate_visible_bias

# This file's RBMs have N(0, 1) biases drawn in the model's dtype; its states list the first unit as the top bit.
random_rbm = partial(random_rbm, bias_scale=1.0, draw_dtype=None)
all_states = partial(all_binary_states, msb_first=True)


def brute_force_log_z(rbm):
    v, h = all_states(rbm.num_visible), all_states(rbm.num_hidden)
    vv = v.repeat_interleave(h.shape[0], 0)
    hh = h.repeat(v.shape[0], 1)
    return torch.logsumexp(-rbm.energy(vv, hh), 0)


@pytest.mark.parametrize("shape", [(6, 4), (4, 7), (5, 5)])
def test_log_partition_equals_joint_enumeration(shape):
    rbm = random_rbm(*shape, scale=1.5)
    assert abs(rbm.log_partition().item() - brute_force_log_z(rbm).item()) < 1e-8


def test_free_energy_sums_out_hidden_units():
    rbm = random_rbm(5, 4, scale=1.0)
    v, h = all_states(5), all_states(4)
    for row in v:
        energies = rbm.energy(row.expand(h.shape[0], -1), h)
        expected = -torch.logsumexp(-energies, 0)
        assert torch.allclose(rbm.free_energy(row[None]), expected[None], atol=1e-10)


def test_energy_formula():
    rbm = random_rbm(3, 2, scale=1.0)
    v = torch.tensor([[1.0, 0.0, 1.0]], dtype=torch.float64)
    h = torch.tensor([[0.0, 1.0]], dtype=torch.float64)
    expected = -(v @ rbm.weight @ h.T).item() - (v @ rbm.visible_bias).item() - (h @ rbm.hidden_bias).item()
    assert rbm.energy(v, h).item() == pytest.approx(expected, abs=1e-12)


def test_log_prob_normalises():
    rbm = random_rbm(6, 3, scale=1.0)
    assert torch.logsumexp(rbm.log_prob(all_states(6)), 0).item() == pytest.approx(0.0, abs=1e-10)


def test_enumeration_limit_is_configurable_and_clear():
    rbm = RBM(30, 12, max_enumeration_units=10)
    with pytest.raises(ValueError, match="max_enumeration_units=10"):
        rbm.log_partition()
    assert torch.isfinite(RBM(30, 10, max_enumeration_units=10).log_partition())


def test_conditional_samplers_match_probabilities():
    rbm = random_rbm(4, 3, scale=1.0, dtype=torch.float32)
    v = torch.tensor([[1.0, 0.0, 1.0, 1.0]]).expand(40000, -1)
    g = torch.Generator().manual_seed(1)
    for beta in (1.0, 0.3):
        h = rbm.sample_h_given_v(v, beta=beta, generator=g)
        p = torch.sigmoid(beta * (v[0] @ rbm.weight + rbm.hidden_bias))
        se = torch.sqrt(p * (1 - p) / v.shape[0])
        assert ((h.mean(0) - p).abs() <= 5 * se + 1e-6).all()
    hidden = torch.tensor([[0.0, 1.0, 1.0]]).expand(40000, -1)
    v = rbm.sample_v_given_h(hidden, beta=0.5, generator=g)
    p = torch.sigmoid(0.5 * (rbm.weight @ hidden[0] + rbm.visible_bias))
    assert ((v.mean(0) - p).abs() <= 5 * torch.sqrt(p * (1 - p) / 40000) + 1e-6).all()


def test_same_seed_same_samples():
    rbm = random_rbm(8, 5, scale=1.0, dtype=torch.float32)
    v = torch.ones(10, 8)
    a = rbm.sample_h_given_v(v, generator=torch.Generator().manual_seed(3))
    b = rbm.sample_h_given_v(v, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b)


@pytest.mark.parametrize(
    "bad, message",
    [
        (torch.ones(3, 5), "5 columns|shape"),
        (torch.ones(5), "shape"),
        (torch.full((3, 4), 0.5), "binary"),
        (torch.tensor([[0.0, 1.0, float("nan"), 0.0]]), "NaN"),
        (torch.ones(2, 4, dtype=torch.long), "floating"),
        (torch.ones(2, 4, device="meta"), "device"),
    ],
)
def test_bad_visible_input_raises_value_error_naming_argument(bad, message):
    rbm = RBM(4, 3)
    with pytest.raises(ValueError, match=message):
        rbm.sample_h_given_v(bad)
    with pytest.raises(ValueError, match="^v "):
        rbm.free_energy(bad)


def test_bad_beta_and_sizes():
    rbm = RBM(4, 3)
    with pytest.raises(ValueError, match="beta"):
        rbm.sample_h_given_v(torch.ones(1, 4), beta=1.5)
    with pytest.raises(ValueError, match="num_hidden"):
        RBM(4, 0)
    with pytest.raises(ValueError, match="visible_bias"):
        RBM.from_tensors(torch.zeros(4, 3), torch.zeros(3), torch.zeros(3))


def test_base_rate_model():
    data = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    bias = base_rate_visible_bias(data, smoothing=1.0)
    assert torch.allclose(torch.sigmoid(bias), torch.tensor([3 / 5, 1 / 5]))
    rbm = RBM(2, 3)
    base = rbm.annealing_base("base_rate", data)
    assert torch.equal(base.weight, torch.zeros(2, 3))
    expected = F.softplus(bias.double()).sum() + 3 * math.log(2)
    assert base.log_partition().item() == pytest.approx(expected.item(), abs=1e-6)
    with pytest.raises(ValueError, match="needs data"):
        rbm.annealing_base("base_rate")
    with pytest.raises(ValueError, match="kind"):
        rbm.annealing_base("gaussian")


def test_log_prob_accepts_a_precomputed_log_z():
    rbm = random_rbm(6, 3, scale=1.0)
    v = all_states(6)[:5]
    assert torch.equal(rbm.log_prob(v, log_z=rbm.log_partition()), rbm.log_prob(v))


@pytest.mark.parametrize("shape", [(8, 5), (5, 8)])
def test_exact_samples_follow_the_enumerated_distribution(shape):
    """Enumerating the smaller layer (hidden or visible): the visible draws pass a χ² test against p(v) by enumeration."""
    model = random_rbm(*shape, 1.0, 0)
    samples = model.exact_samples(20000, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        probabilities = torch.softmax(-model.free_energy(all_binary_states(shape[0], msb_first=True)).double(), 0)
    assert samples.shape == (20000, shape[0]) and chi_square_p_value(samples, probabilities) > 1e-3


def test_exact_samples_refuse_to_enumerate_a_large_layer():
    assert random_rbm(30, 21, 1.0, 0).exact_samples(5) is None  # 2^21 states: MCMC (model.sample) instead
