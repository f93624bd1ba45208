"""Parallel tempering as a kernel: its β = 1 replica samples bimodal targets (χ² against enumeration) that plain Gibbs
from one mode does not, on an RBM, an Ising model and (with HMC) an energy over the reals; exchanges and ladders."""

import math

import pytest
import torch
from factories import all_binary_states, chi_square_p_value, random_gbrbm, random_rbm
from torch import nn

from pfzoo.kernels import (
    BLOCK_CONDITIONALS, BlockGibbs, GibbsInfo, GibbsState, HMCKernel, ParallelTempering, Repeat, ScanGibbs, TemperingState, adapt_ladder,
    check_ladder, run_chain, temperature_ladder,
)
from pfzoo.models import RBM, EnergyFunction, Ising

P_VALUE_FLOOR = 1e-4  # fixed seeds; a correct sampler fails with probability 1e-4
NUM_CHAINS = 3000
NUM_STEPS = 150


def visible_probabilities(log_f, num_units: int) -> torch.Tensor:
    """``p(x) ∝ exp(log_f(x))`` over every state, indexed as :func:`chi_square_p_value` counts them."""
    states = all_binary_states(num_units, msb_first=True)
    return torch.softmax(log_f(states).detach().double(), 0)


def bimodal_rbm(num_visible: int = 10, strength: float = 3.0, tilt: float = 0.7) -> RBM:
    """Two modes, near all-off and all-on, with masses about 1 : e^tilt: hidden unit 0 switches every visible unit
    (weights 2a, visible biases −a, hidden bias −aV + tilt), so block Gibbs must turn on half the units at once while it
    is off; hidden unit 1 is a weak random feature."""
    g = torch.Generator().manual_seed(0)
    weight = torch.stack([torch.full((num_visible,), 2 * strength, dtype=torch.float64),
                          0.5 * torch.randn(num_visible, generator=g, dtype=torch.float64)], 1)
    visible_bias = torch.full((num_visible,), -strength, dtype=torch.float64)
    return RBM.from_tensors(weight, visible_bias, torch.tensor([-strength * num_visible + tilt, 0.0], dtype=torch.float64))


def ferromagnet(num_units: int = 8, coupling: float = 1.5, tilt: float = 0.08) -> Ising:
    """All pairs coupled by J > 0, biases ``−J(D−1)/2 + tilt``: two modes (all off, all on) ``JD²/8`` nats apart."""
    couplings = torch.full((num_units, num_units), coupling, dtype=torch.float64).fill_diagonal_(0.0)
    return Ising.from_tensors(couplings, torch.full((num_units,), -coupling * (num_units - 1) / 2 + tilt, dtype=torch.float64))


@pytest.mark.parametrize("batch_replicas", [True, False])
def test_tempering_samples_a_bimodal_rbm_that_block_gibbs_does_not_mix(batch_replicas):
    rbm = bimodal_rbm()
    probabilities = visible_probabilities(lambda v: -rbm.free_energy(v), rbm.num_visible)
    assert 0.3 < probabilities[all_binary_states(10, msb_first=True).sum(1) > 5].sum() < 0.7  # both modes carry mass
    kernel, target = rbm.gibbs_chain()
    start = torch.zeros(NUM_CHAINS, rbm.num_visible, dtype=torch.float64)  # every chain in the lower mode
    plain, _ = run_chain(kernel, target, start, NUM_STEPS, generator=torch.Generator().manual_seed(1))
    assert chi_square_p_value(plain.position, probabilities) < 1e-10
    tempering = ParallelTempering(kernel, temperature_ladder(8, min_beta=0.1), batch_replicas=batch_replicas)
    state, info = run_chain(tempering, target, start, NUM_STEPS, generator=torch.Generator().manual_seed(1))
    assert state.position.shape == (NUM_CHAINS, rbm.num_visible)
    assert chi_square_p_value(state.position, probabilities) > P_VALUE_FLOOR
    assert info.swap_accept_prob.shape == (7, NUM_CHAINS) and info.accept_prob.shape == (NUM_CHAINS,)
    assert len(info.inner) == 8


def test_tempering_samples_a_bimodal_ising_model_that_scan_gibbs_does_not_mix():
    model = ferromagnet()
    probabilities = visible_probabilities(lambda x: -model.energy(x), model.num_units)
    kernel, target = model.gibbs_chain()
    start = torch.zeros(NUM_CHAINS, model.num_units, dtype=torch.float64)
    plain, _ = run_chain(kernel, target, start, NUM_STEPS, generator=torch.Generator().manual_seed(2))
    assert chi_square_p_value(plain.position, probabilities) < 1e-10
    tempering = ParallelTempering(kernel, temperature_ladder(6, min_beta=0.15))
    state, _ = run_chain(tempering, target, start, NUM_STEPS, generator=torch.Generator().manual_seed(2))
    assert chi_square_p_value(state.position, probabilities) > P_VALUE_FLOOR


class TwoWells(nn.Module):
    """``E(x) = −log(½ N(x; −4, 1) + ½ N(x; 4, 1))`` over the reals, up to a constant: a barrier of 8 nats."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return -torch.logaddexp(-0.5 * (x[:, 0] + 4) ** 2, -0.5 * (x[:, 0] - 4) ** 2)


def test_tempering_runs_hmc_replica_by_replica_on_an_energy_target():
    model = EnergyFunction(TwoWells(), num_visible=1).double()
    target = model.energy_target()
    kernel = HMCKernel(0.5, num_leapfrog=5, momentum_refresh=1.0)
    num_chains = 1000
    start = torch.full((num_chains, 1), -4.0, dtype=torch.float64)
    plain, _ = run_chain(kernel, target, start, 150, generator=torch.Generator().manual_seed(3))
    assert (plain.position > 0).double().mean() < 0.1  # HMC seldom crosses the barrier
    tempering = ParallelTempering(kernel, temperature_ladder(5, min_beta=0.05))
    state, info = run_chain(tempering, target, start, 150, generator=torch.Generator().manual_seed(3))
    # one independent draw per chain: the right well's share is binomial, |x| has mean 4 and variance about 1
    assert abs((state.position > 0).double().mean().item() - 0.5) < 4 * math.sqrt(0.25 / num_chains)
    assert abs(state.position.abs().mean().item() - 4.0) < 4 / math.sqrt(num_chains)
    assert len(info.inner) == 5 and info.inner[0].accept_prob.shape == (num_chains,)  # the inner HMC infos, replica by replica


def test_exchanges_are_reproducible_and_their_acceptance_is_a_probability():
    rbm = bimodal_rbm()
    kernel, target = rbm.gibbs_chain()
    tempering = ParallelTempering(Repeat(kernel, 2), temperature_ladder(5, min_beta=0.2, spacing="linear"))
    start = torch.zeros(50, rbm.num_visible, dtype=torch.float64)
    runs = [run_chain(tempering, target, start, 7, generator=torch.Generator().manual_seed(seed)) for seed in (4, 4, 5)]
    assert torch.equal(runs[0][0].replicas.position, runs[1][0].replicas.position)
    assert torch.equal(runs[0][1].swap_accept_prob, runs[1][1].swap_accept_prob)
    assert not torch.equal(runs[0][0].replicas.position, runs[2][0].replicas.position)
    state, info = runs[0]
    assert state.swap_round == 7 and state.replica_positions.shape == (5, 50, rbm.num_visible)
    assert torch.all((info.swap_accept_prob >= 0) & (info.swap_accept_prob <= 1))
    assert info.attempted.tolist() == [True, False, True, False]  # the seventh round (round 6) proposes the even pairs
    assert torch.all(info.swap_accept_prob[~info.attempted] == 0)
    torch.testing.assert_close(info.accept_prob, info.swap_accept_prob[info.attempted].mean(0))


class Stay:
    """A kernel on block conditionals that leaves every state where it is: exchanges alone then move the chains."""

    needs = BLOCK_CONDITIONALS

    def init(self, position, target, *, generator=None):
        return GibbsState(position, position.new_empty(0))

    def step(self, state, target, *, beta=1.0, generator=None):
        return state, GibbsInfo()


def test_an_exchange_is_accepted_with_the_metropolis_ratio_of_the_tempered_densities():
    """Two replicas in known states, hot y and cold x: the exchange is accepted with min(1, f_hot(x) f_cold(y) / (f_hot(y)
    f_cold(x))), here about 0.61, as its reported probability and as the frequency of swaps over many chains."""
    rbm = bimodal_rbm(num_visible=4, strength=1.0)
    x, y = torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64), torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    num_chains = 4000
    tempering = ParallelTempering(Stay(), (0.3, 1.0))
    state = tempering.init_replicas(torch.stack([y.expand(num_chains, 4), x.expand(num_chains, 4)]), rbm.gibbs_chain()[1])
    state, info = tempering.step(state, rbm.gibbs_chain()[1], generator=torch.Generator().manual_seed(5))
    log_f = lambda v, beta: rbm.tempered_log_density(v[None], beta=beta).item()
    expected = min(1.0, math.exp(log_f(x, 0.3) + log_f(y, 1.0) - log_f(y, 0.3) - log_f(x, 1.0)))
    assert 0.2 < expected < 0.8
    torch.testing.assert_close(info.swap_accept_prob, torch.full((1, num_chains), expected, dtype=torch.float64), rtol=1e-12, atol=0)
    swapped = torch.all(state.position == y, 1)
    assert torch.all(swapped | torch.all(state.position == x, 1))
    assert torch.equal(state.replica_positions[0][swapped], x.expand(int(swapped.sum()), 4))  # the pair's states traded places
    assert abs(swapped.double().mean().item() - expected) < 4 * math.sqrt(expected * (1 - expected) / num_chains)


def test_tempered_log_densities_of_the_targets_are_the_marginals_of_the_tempered_joints():
    """``log f_β(v) = log Σ_h exp(−β E(v, h))`` by enumerating h, for a β per row and K = 2 of them per row."""
    states = all_binary_states(5)
    beta = torch.stack([torch.linspace(0.1, 1.0, 32, dtype=torch.float64), torch.linspace(1.0, 0.3, 32, dtype=torch.float64)], 1)  # [32, 2]
    hidden = all_binary_states(2)
    rbm = bimodal_rbm(num_visible=5)
    gbrbm = random_gbrbm(5, 2)
    real = torch.randn(32, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for model, v in ((rbm, states), (gbrbm, real)):
        energies = torch.stack([model.energy(v, h.expand(32, 2)) for h in hidden], 1).detach()  # [32, 4]
        expected = torch.logsumexp(-beta[:, :, None] * energies[:, None, :], 2)
        torch.testing.assert_close(model.gibbs_chain()[1].log_density(v, beta=beta), expected)
        torch.testing.assert_close(model.tempered_log_density(v, beta=0.7), torch.logsumexp(-0.7 * energies, 1))
        torch.testing.assert_close(model.tempered_log_density(v, beta=1.0), -model.free_energy(v).detach())
    model = ferromagnet(num_units=5)
    torch.testing.assert_close(model.gibbs_chain()[1].log_density(states, beta=beta), -beta * model.energy(states).detach()[:, None])
    torch.testing.assert_close(model.gibbs_chain()[1].log_density(states, beta=0.5), -0.5 * model.energy(states).detach())
    wells = EnergyFunction(TwoWells(), num_visible=1).double()
    torch.testing.assert_close(wells.energy_target().log_density(real[:, :1], beta=beta), -beta * wells.energy(real[:, :1]).detach()[:, None])


def test_a_target_without_a_tempered_density_is_refused_in_one_line():
    from pfzoo.paths import build

    rbm = bimodal_rbm(num_visible=4)
    path, _ = build(rbm, kind="geometric", base="uniform")
    tempering = ParallelTempering(BlockGibbs(), (0.5, 1.0))
    with pytest.raises(ValueError, match=r"^ParallelTempering needs a target with its unnormalised log density at any β") as error:
        tempering.init(torch.zeros(3, 4, dtype=torch.float64), path.target)
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="kernel=ScanGibbs needs exact conditionals of blocks of units; BipartiteConditionals offers"):
        ParallelTempering(ScanGibbs(), (0.5, 1.0)).init(torch.zeros(3, 4, dtype=torch.float64), rbm.gibbs_chain()[1])
    with pytest.raises(ValueError, match="ParallelTempering needs a target with"):
        ParallelTempering(HMCKernel(0.1), (0.5, 1.0)).init(torch.zeros(3, 2, dtype=torch.float64), object())
    with pytest.raises(ValueError, match="kernel=ParallelTempering needs exact block conditionals of two layers; Ising's Gibbs target offers"):
        Ising(3).sample(2, kernel=ParallelTempering(BlockGibbs(), (0.5, 1.0)))  # a kernel for another target, refused


def test_models_sample_through_a_tempering_kernel():
    rbm = bimodal_rbm()
    probabilities = visible_probabilities(lambda v: -rbm.free_energy(v), rbm.num_visible)
    tempering = ParallelTempering(BlockGibbs(), temperature_ladder(8, min_beta=0.1))
    samples = rbm.sample(NUM_CHAINS, num_steps=NUM_STEPS, kernel=tempering, generator=torch.Generator().manual_seed(6))
    assert chi_square_p_value(samples, probabilities) > P_VALUE_FLOOR
    model = ferromagnet(num_units=6)
    samples = model.sample(NUM_CHAINS, num_steps=NUM_STEPS, kernel=ParallelTempering(ScanGibbs(), temperature_ladder(4, min_beta=0.2)),
                           generator=torch.Generator().manual_seed(7))
    assert chi_square_p_value(samples, visible_probabilities(lambda x: -model.energy(x), 6)) > P_VALUE_FLOOR


def test_tempering_samples_a_gaussian_bernoulli_rbm_with_a_beta_per_chain():
    """Visible means and variances of a GB-RBM sampled by PT (its Gaussian draws at a β per chain) against their exact
    values by enumerating h: ``p(h) ∝ exp(c·h + Σ_i (b_i u_i/σ_i + u_i²/2))`` with ``u = W h``, ``v | h ~ N(b + σ u, σ²)``."""
    model = random_gbrbm(3, 4, scale=1.0, seed=3)
    hidden = all_binary_states(4)
    u = hidden @ model.weight.detach().T
    log_p = hidden @ model.hidden_bias.detach() + u @ (model.visible_bias / model.sigma).detach() + u.square().sum(1) / 2
    p = torch.softmax(log_p, 0)
    means = model.visible_bias.detach() + model.sigma.detach() * u  # [16, 3]
    mean = p @ means
    variance = p @ (means - mean) ** 2 + model.sigma.detach() ** 2
    samples = model.sample(NUM_CHAINS, num_steps=50, kernel=ParallelTempering(BlockGibbs(), temperature_ladder(4, min_beta=0.3)),
                           generator=torch.Generator().manual_seed(11))
    assert torch.all((samples.mean(0) - mean).abs() < 4 * (variance / NUM_CHAINS).sqrt())
    torch.testing.assert_close(samples.var(0), variance, rtol=0.1, atol=0)


@pytest.mark.parametrize("family", ["rbm", "gbrbm"])
def test_kept_hidden_inputs_spare_the_exchange_its_product_and_change_no_draw(family, monkeypatch):
    """With ``gibbs_chain(keep_statistics=True)`` the exchange reads the hidden input the sweep kept: the same replicas,
    bit for bit, from one ``hidden_input`` product per step instead of two (the hidden draw's and the exchange's)."""
    model = random_gbrbm(5, 4, seed=2) if family == "gbrbm" else random_rbm(6, 4, scale=1.5, seed=2)
    calls = {"count": 0}
    product = type(model).hidden_input

    def counted(self, v):
        calls["count"] += 1
        return product(self, v)

    monkeypatch.setattr(type(model), "hidden_input", counted)
    ladder = temperature_ladder(5, min_beta=0.2)
    start = torch.randn(5, 16, model.num_visible, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    if family == "rbm":
        start = (start > 0).double()
    runs = {}
    for keep in (False, True):
        kernel, target = model.gibbs_chain(keep_statistics=keep)
        tempering = ParallelTempering(kernel, ladder)
        generator = torch.Generator().manual_seed(3)
        state = tempering.init_replicas(start, target, generator=generator)
        calls["count"] = 0
        swapped = 0
        for _ in range(40):
            state, info = tempering.step(state, target, generator=generator)
            swapped += int(info.swapped.sum())
        runs[keep] = (state.replicas.position, calls["count"], swapped)
    assert runs[True][2] > 0  # exchanges happened, so the kept inputs were permuted with their rows
    assert torch.equal(runs[True][0], runs[False][0])
    assert (runs[False][1], runs[True][1]) == (80, 40)
    kernel, target = model.gibbs_chain(keep_statistics=True)
    betas = torch.tensor([[0.3, 1.0]], dtype=torch.float64).expand(16, 2)
    torch.testing.assert_close(target.log_density(start[0], beta=betas, stats=target.statistics(start[0])),
                               target.log_density(start[0], beta=betas), rtol=0, atol=1e-12)


def test_ladders_are_checked_made_and_adapted_towards_equal_acceptance():
    geometric = temperature_ladder(5, min_beta=0.01)
    torch.testing.assert_close(geometric, torch.tensor([0.01, 0.01 ** 0.75, 0.1, 0.01 ** 0.25, 1.0], dtype=torch.float64))
    torch.testing.assert_close(temperature_ladder(3, min_beta=0.5, spacing="linear"), torch.tensor([0.5, 0.75, 1.0], dtype=torch.float64))
    for bad in ([1.0], [0.5, 0.9], [0.5, 0.5, 1.0], [0.0, 1.0], [0.5, 1.2]):
        with pytest.raises(ValueError, match="betas"):
            check_ladder(bad)
    with pytest.raises(ValueError, match="num_replicas must be at least 2"):
        temperature_ladder(1)
    with pytest.raises(ValueError, match="swaps must be one of 'alternate', 'random'"):
        ParallelTempering(BlockGibbs(), (0.5, 1.0), swaps="all")
    ladder = [0.1, 0.2, 0.4, 1.0]
    torch.testing.assert_close(adapt_ladder(ladder, [0.5, 0.5, 0.5]), torch.tensor(ladder, dtype=torch.float64))  # already equal
    adapted = adapt_ladder(ladder, [0.9, 0.9, 0.0])  # the top pair never swaps: the ladder crowds towards it
    assert adapted[0] == 0.1 and adapted[-1] == 1.0 and torch.all(adapted[1:] > adapted[:-1])
    assert adapted[2] > 0.4 and (adapted[3] - adapted[2]) < 0.6
    # Λ = [0, 0.1, 0.2, 1.2]: the new β_k sit where Λ reaches 0.4 and 0.8, on the top segment
    torch.testing.assert_close(adapted, torch.tensor([0.1, 0.4 + 0.6 * 0.2, 0.4 + 0.6 * 0.6, 1.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="acceptance must hold 3 rates"):
        adapt_ladder(ladder, [0.5, 0.5])


def test_the_tempering_state_resumes_persistent_replicas():
    rbm = bimodal_rbm(num_visible=4)
    kernel, target = rbm.gibbs_chain()
    tempering = ParallelTempering(kernel, (0.25, 0.5, 1.0))
    state, _ = run_chain(tempering, target, torch.zeros(6, 4, dtype=torch.float64), 3, generator=torch.Generator().manual_seed(8))
    resumed = tempering.init_replicas(state.replica_positions, target, swap_round=state.swap_round)
    assert isinstance(resumed, TemperingState) and torch.equal(resumed.position, state.position)
    steps = [tempering.step(s, target, generator=torch.Generator().manual_seed(9))[0] for s in (state, resumed)]
    assert torch.equal(steps[0].replicas.position, steps[1].replicas.position)
    with pytest.raises(ValueError, match=r"positions must have shape \[3, N, ...\]"):
        tempering.init_replicas(state.replica_positions[:2], target)
    with pytest.raises(ValueError, match="betas must hold 3"):
        tempering.step(state, target, betas=(0.5, 1.0))
