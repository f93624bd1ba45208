"""Block Gibbs and the RBM path's transition, tested as distributions (χ² against enumeration)."""

import itertools
from functools import partial

import pytest
import torch
from factories import random_rbm
from scipy import stats

from pfzoo.kernels import BlockGibbs, GibbsState, run_chain

NUM_CHAINS = 40000
P_VALUE_FLOOR = 1e-4  # fixed seed; a correct sampler fails this with probability 1e-4

small_rbm = partial(random_rbm, 4, 3, 1.5, dtype=torch.float32, bias_scale=1.0)  # float32: weights N(0, 1.5²), biases N(0, 1)


def state_index(bits):
    """Row of {0,1} values → integer index, first column most significant."""
    weights = 2 ** torch.arange(bits.shape[1] - 1, -1, -1)
    return (bits.long() * weights).sum(1)


def chi_square_p_value(samples, probabilities):
    counts = torch.bincount(state_index(samples), minlength=probabilities.numel()).double()
    expected = probabilities * samples.shape[0]
    keep = expected > 5  # pool rare cells so the χ² approximation holds
    observed = torch.cat([counts[keep], counts[~keep].sum()[None]])
    expected = torch.cat([expected[keep], expected[~keep].sum()[None]])
    if observed[-1] == 0 and expected[-1] < 1e-12:
        observed, expected = observed[:-1], expected[:-1]
    return stats.chisquare(observed.numpy(), expected.numpy()).pvalue


def joint_probabilities(rbm, beta):
    """``p_β(v, h) ∝ exp(-β E(v, h))`` over all states, indexed as ``state_index([v, h])``."""
    v_all = torch.tensor(list(itertools.product([0.0, 1.0], repeat=rbm.num_visible)))
    h_all = torch.tensor(list(itertools.product([0.0, 1.0], repeat=rbm.num_hidden)))
    vv, hh = v_all.repeat_interleave(h_all.shape[0], 0), h_all.repeat(v_all.shape[0], 1)
    return torch.softmax(-beta * rbm.energy(vv, hh).detach().double(), 0)


@pytest.mark.parametrize("beta", [1.0, 0.3])
def test_block_gibbs_samples_joint_distribution(beta):
    rbm = small_rbm()
    joint = joint_probabilities(rbm, beta)
    g = torch.Generator().manual_seed(1)
    start = torch.zeros(NUM_CHAINS, 4)  # a bad start: the chains must mix to pass
    state, _ = run_chain(*rbm.gibbs_chain(), start, 30, beta=beta, generator=g)
    assert chi_square_p_value(torch.cat([state.visible, state.hidden], 1), joint) > P_VALUE_FLOOR


def test_block_gibbs_step_detects_wrong_temperature():
    """Power check: samples at β = 1 must fail the test against the β = 0.3 distribution."""
    rbm = small_rbm()
    wrong = joint_probabilities(rbm, 0.3)
    state, _ = run_chain(*rbm.gibbs_chain(), torch.zeros(NUM_CHAINS, 4), 30, beta=1.0, generator=torch.Generator().manual_seed(2))
    assert chi_square_p_value(torch.cat([state.visible, state.hidden], 1), wrong) < 1e-10


def test_block_gibbs_step_keeps_state_shapes():
    rbm = small_rbm()
    _, target = rbm.gibbs_chain()
    state, info = BlockGibbs().step(GibbsState(torch.ones(5, 4), torch.empty(0)), target, beta=0.5)
    assert state.visible.shape == (5, 4) and state.hidden.shape == (5, 3)
    assert set(state.visible.unique().tolist()) <= {0.0, 1.0}
