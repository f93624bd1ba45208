"""The one kernel contract: every kernel is pure, composites are kernels, scans and perfect draws sample their targets."""

import copy
import itertools

import pytest
import torch
from scipy import stats

from pfzoo.kernels import (
    BLOCK_CONDITIONALS, BitFlipMetropolis, BlockGibbs, Cycle, EnergyTarget, HMCKernel, Kernel, PerfectTransition, RandomWalkMetropolis,
    Repeat, ScanGibbs, adaptive_chain, check_kernel, run_chain,
)
from pfzoo.models import RBM, Gaussian, Ising
from pfzoo.models.capabilities import Capability

P_VALUE_FLOOR = 1e-4  # fixed seeds; a correct sampler fails with probability 1e-4


def enumerated_ising_probabilities(model: Ising, beta: float) -> torch.Tensor:
    states = torch.tensor(list(itertools.product([0.0, 1.0], repeat=model.num_units)), dtype=model.dtype)
    return torch.softmax(-beta * model.energy(states).detach().double(), 0), states


def chi_square_p_value(samples: torch.Tensor, probabilities: torch.Tensor) -> float:
    weights = 2 ** torch.arange(samples.shape[1] - 1, -1, -1)
    counts = torch.bincount((samples.long() * weights).sum(1), minlength=probabilities.numel()).double()
    expected = probabilities * samples.shape[0]
    keep = expected > 5  # pool rare cells so the χ² approximation holds
    if not keep.all():
        counts = torch.cat([counts[keep], counts[~keep].sum()[None]])
        expected = torch.cat([expected[keep], expected[~keep].sum()[None]])
    observed = counts
    return stats.chisquare(observed.numpy(), expected.numpy()).pvalue


def small_ising(seed: int = 0, num_units: int = 5) -> Ising:
    g = torch.Generator().manual_seed(seed)
    coupling = torch.randn(num_units, num_units, generator=g, dtype=torch.float64)
    symmetric = (coupling + coupling.T) / 2
    return Ising.from_tensors(symmetric - torch.diag(symmetric.diagonal()), torch.randn(num_units, generator=g, dtype=torch.float64) * 0.5)


@pytest.mark.parametrize("beta, reversible", [(1.0, False), (0.4, True)])
def test_scan_gibbs_samples_the_enumerated_ising_distribution(beta, reversible):
    model = small_ising()
    probabilities, _ = enumerated_ising_probabilities(model, beta)
    kernel, target = model.gibbs_chain(reversible=reversible)
    start = torch.zeros(40_000, model.num_units, dtype=torch.float64)
    state, info = run_chain(kernel, target, start, 20, beta=beta, generator=torch.Generator().manual_seed(3))
    assert info.accept_prob is None  # exact draws always accept
    assert chi_square_p_value(state.position, probabilities) > P_VALUE_FLOOR
    wrong, _ = enumerated_ising_probabilities(model, beta * 1.5)  # the test has power
    assert chi_square_p_value(state.position, wrong) < 1e-10


def test_composite_kernels_are_kernels_and_sample_the_same_distribution():
    model = small_ising(seed=1)
    probabilities, _ = enumerated_ising_probabilities(model, 1.0)
    kernel, target = model.gibbs_chain()
    for composite in (Repeat(kernel, 3), Cycle([kernel, ScanGibbs(), kernel])):
        assert isinstance(composite, Kernel) and composite.needs == kernel.needs
        state, info = run_chain(composite, target, torch.ones(30_000, 5, dtype=torch.float64), 8, generator=torch.Generator().manual_seed(4))
        assert len(info.infos) == 3 and info.accept_prob is None
        assert chi_square_p_value(state.position, probabilities) > P_VALUE_FLOOR


def test_repeat_equals_the_same_steps_one_by_one():
    rbm = RBM.from_tensors(torch.randn(6, 3, dtype=torch.float64), torch.zeros(6, dtype=torch.float64), torch.zeros(3, dtype=torch.float64))
    kernel, target = rbm.gibbs_chain()
    start = torch.zeros(10, 6, dtype=torch.float64)
    once, _ = run_chain(Repeat(kernel, 4), target, start, 1, generator=torch.Generator().manual_seed(5))
    stepwise, _ = run_chain(kernel, target, start, 4, generator=torch.Generator().manual_seed(5))
    assert torch.equal(once.position, stepwise.position) and torch.equal(once.hidden, stepwise.hidden)


def test_composite_acceptance_is_the_mean_of_its_kernels():
    target = EnergyTarget(Gaussian(2).double())
    kernel = Cycle([HMCKernel(0.5, momentum_refresh=1.0), HMCKernel(3.0, momentum_refresh=1.0)])
    state = kernel.init(torch.zeros(200, 2, dtype=torch.float64), target)
    _, info = kernel.step(state, target, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(info.accept_prob, (info.infos[0].accept_prob + info.infos[1].accept_prob) / 2)


def test_hmc_kernel_is_pure_and_takes_its_step_size_per_call():
    kernel = HMCKernel(0.3, lower=0.0)
    before = copy.deepcopy(kernel.__dict__)
    target = EnergyTarget(Gaussian(3).double())
    g = torch.Generator().manual_seed(0)
    state = kernel.init(torch.rand(50, 3, dtype=torch.float64, generator=g), target, generator=g)
    _, info = kernel.step(state, target, generator=g, step_size=torch.tensor(0.05, dtype=torch.float64))
    assert float(info.step_size) == pytest.approx(0.05)
    _, info = kernel.step(state, target, generator=g)
    assert info.step_size == 0.3
    after = kernel.__dict__
    assert before.keys() == after.keys()
    for name, value in before.items():
        assert (torch.equal(value, after[name]) if isinstance(value, torch.Tensor) else value == after[name]), name


def test_adaptive_chain_moves_the_step_towards_the_target_acceptance():
    target = EnergyTarget(Gaussian(10).double())
    kernel = HMCKernel(3.0, num_leapfrog=5, momentum_refresh=1.0)
    state = kernel.init(torch.zeros(100, 10, dtype=torch.float64), target, generator=torch.Generator().manual_seed(2))
    chain = adaptive_chain(kernel, target, state, 200, step_size=torch.tensor(3.0, dtype=torch.float64), target_acceptance=0.8,
                           generator=torch.Generator().manual_seed(0))
    assert float(chain.step_size) < 1.5  # ε = 3 rejects nearly everything on a unit Gaussian; adaptation shrinks it
    with torch.no_grad():
        last = kernel.step(chain.state, target, generator=torch.Generator().manual_seed(1), step_size=chain.step_size)[1].accept_prob.mean()
    assert 0.6 < float(last) < 0.97
    fixed = adaptive_chain(kernel, target, state, 3, step_size=torch.tensor(3.0, dtype=torch.float64), target_acceptance=None)
    assert float(fixed.step_size) == 3.0


def test_perfect_transition_draws_the_gaussian_path_exactly():
    from pfzoo.paths import build

    model = Gaussian(2).double()
    with torch.no_grad():
        model.mean.copy_(torch.tensor([1.0, -2.0]))
    path, _ = build(model, base="isotropic")
    assert isinstance(path.kernel, PerfectTransition)
    g = torch.Generator().manual_seed(0)
    state = path.sample_base(100_000, generator=g)
    state, info = path.transition(state, 1.0, generator=g)
    assert info.accept_prob is None
    torch.testing.assert_close(state.position.mean(0), torch.tensor([1.0, -2.0], dtype=torch.float64), atol=0.02, rtol=0)


def test_paths_refuse_a_kernel_for_another_kind_of_target_in_one_line():
    from pfzoo.paths import build

    rbm = RBM.from_tensors(torch.randn(4, 3), torch.zeros(4), torch.zeros(3))
    for wrong in (HMCKernel(0.1), RandomWalkMetropolis(), BitFlipMetropolis(), PerfectTransition()):
        with pytest.raises(ValueError, match=rf"^kernel={type(wrong).__name__} needs .*; an RBM path offers .*{BLOCK_CONDITIONALS}") as error:
            build(rbm, base="uniform", kernel=wrong)
        assert "\n" not in str(error.value)
    path, _ = build(rbm, base="uniform", kernel=Repeat(BlockGibbs(), 2))  # a Gibbs kernel of any composition is taken
    assert isinstance(path.kernel, Repeat)
    with pytest.raises(ValueError, match="kernel must be a pfzoo kernel"):
        check_kernel(object(), {BLOCK_CONDITIONALS}, "an RBM path")
    with pytest.raises(ValueError, match="kernels must all act on the same kind of target"):
        Cycle([BlockGibbs(), HMCKernel(0.1)])


def test_every_family_with_a_visible_gibbs_chain_offers_it_as_a_kernel():
    from pfzoo.models import registry
    from pfzoo.models.base import EnergyModel

    for name in registry.registered_models():
        model_class = registry.model_class(name)
        if Capability.VISIBLE_GIBBS_CHAIN in model_class.family_capabilities:
            assert model_class.gibbs_chain is not EnergyModel.gibbs_chain, name


def test_ais_takes_any_kernel_on_the_paths_target_and_stays_exact():
    """A path's default transition replaced by a composite of Gibbs kernels: AIS still lands on the enumerated log Z."""
    from pfzoo.estimators import AIS

    g = torch.Generator().manual_seed(7)
    rbm = RBM.from_tensors(torch.randn(10, 6, generator=g, dtype=torch.float64), torch.randn(10, generator=g, dtype=torch.float64),
                           torch.randn(6, generator=g, dtype=torch.float64))
    estimate = AIS(500, 200, base="uniform", kernel=Repeat(BlockGibbs(), 2))(rbm, generator=torch.Generator().manual_seed(8))
    exact = rbm.log_partition().item()
    assert abs(float(estimate.log_z) - exact) < 3 * float(estimate.stderr) + 1e-9
    assert float(estimate.stderr) < 0.1


def test_select_chains_merges_the_chains_row_by_row_and_keeps_other_leaves():
    """A restart from an earlier state: rows where the mask holds come from ``if_true``, whole state by state; a leaf
    that is not one row per chain (a step size, a hidden layer not drawn yet) is ``if_false``'s."""
    from typing import NamedTuple

    from pfzoo.kernels import select_chains

    class State(NamedTuple):
        position: torch.Tensor
        stats: tuple
        step_size: torch.Tensor
        hidden: torch.Tensor

    earlier = State(torch.zeros(3, 2), (torch.zeros(3),), torch.tensor(0.1), torch.empty(0))
    later = State(torch.ones(3, 2), (torch.ones(3),), torch.tensor(0.2), torch.ones(3, 4))
    merged = select_chains(torch.tensor([True, False, True]), earlier, later, 3)
    assert isinstance(merged, State)
    assert torch.equal(merged.position, torch.tensor([[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]))
    assert torch.equal(merged.stats[0], torch.tensor([0.0, 1.0, 0.0]))
    assert merged.step_size.item() == pytest.approx(0.2) and torch.equal(merged.hidden, later.hidden)
