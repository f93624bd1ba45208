"""Swendsen–Wang cluster moves tested as distributions: χ² against enumeration (ferromagnets and mixed-sign spin glasses,
with and without fields, β = 1 and 0.3), detailed balance from exact draws, agreement with Gibbs on a lattice, and the
decorrelation of a cold ferromagnet that single-site sweeps cannot match."""

import pytest
import torch
from factories import all_binary_states, chi_square_p_value
from host_reads import DEVICES
from scipy import stats
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from pfzoo.data import lattice_couplings, sample_spin_glass
from pfzoo.estimators import AIS
from pfzoo.kernels import (
    PAIRWISE_BINARY, ParallelTempering, SwendsenWang, check_kernel, cluster_labels, run_chain, temperature_ladder,
)
from pfzoo.models import Ising
from pfzoo.sampling import ChainStreams
from pfzoo.training import PCD

P_VALUE_FLOOR = 1e-4  # fixed seeds; a correct sampler fails with probability 1e-4
NUM_UNITS = 6
NUM_CHAINS = 12_000
NUM_STEPS = 40  # from all-zeros: the strongly coupled glass at β = 1 needs about 30 (the ferromagnets under 10)


def pairwise_model(kind: str, fields: bool, seed: int = 0, num_units: int = NUM_UNITS) -> Ising:
    """A dense model in 0/1 units: ``"ferromagnet"`` couplings U(0.5, 2.5) (±1 units: a quarter of that), ``"spin_glass"``
    N(0, 2²) of mixed signs. ``fields``: biases N(0, 1); else ``b = −J𝟙/2``, no field at all in ±1 units (h = J𝟙/4 + b/2),
    so the ghost spin is never bonded."""
    g = torch.Generator().manual_seed(seed)
    if kind == "ferromagnet":
        upper = torch.rand(num_units, num_units, generator=g, dtype=torch.float64) * 2 + 0.5
    else:
        upper = torch.randn(num_units, num_units, generator=g, dtype=torch.float64) * 2.0
    coupling = torch.triu(upper, 1) + torch.triu(upper, 1).T
    bias = torch.randn(num_units, generator=g, dtype=torch.float64) if fields else -coupling.sum(0) / 2
    return Ising.from_tensors(coupling, bias)


def probabilities_at(model: Ising, beta: float) -> torch.Tensor:
    """Exact ``p_β`` of every state ``[2^D]`` (first unit most significant), by enumeration of the model ``(βJ, βb)``."""
    tempered = Ising.from_tensors(beta * model.symmetric_coupling.detach(), beta * model.bias.detach())
    with torch.no_grad():
        return tempered.log_prob(all_binary_states(model.num_units, msb_first=True)).exp()


def exact_draws(probabilities: torch.Tensor, num_units: int, num_samples: int, seed: int) -> torch.Tensor:
    rows = torch.multinomial(probabilities, num_samples, replacement=True, generator=torch.Generator().manual_seed(seed))
    return all_binary_states(num_units, msb_first=True)[rows]


@pytest.mark.parametrize("beta", [1.0, 0.3])
@pytest.mark.parametrize("fields", [False, True], ids=["no_field", "field"])
@pytest.mark.parametrize("kind", ["ferromagnet", "spin_glass"])
def test_swendsen_wang_samples_the_enumerated_distribution(kind, fields, beta):
    model = pairwise_model(kind, fields)
    if kind == "spin_glass":
        signs = torch.sign(torch.triu(model.symmetric_coupling, 1)).flatten().tolist()
        assert 1.0 in signs and -1.0 in signs  # frustrated: couplings of both signs
    kernel, target = SwendsenWang(), model.gibbs_chain()[1]
    start = torch.zeros(NUM_CHAINS, NUM_UNITS, dtype=torch.float64)  # a bad start: the chains must mix to pass
    state, info = run_chain(kernel, target, start, NUM_STEPS, beta=beta, generator=torch.Generator().manual_seed(1))
    assert info.accept_prob is None and info.rounds >= 1
    assert chi_square_p_value(state.position, probabilities_at(model, beta)) > P_VALUE_FLOOR
    assert chi_square_p_value(state.position, probabilities_at(model, 1.3 * beta)) < 1e-10  # the test has power


def test_one_step_from_exact_draws_is_invariant_and_reversible():
    """From exact draws ``s ~ p`` one step gives ``s' ~ p`` (invariance), and the pairs ``(s, s')`` are exchangeable
    (detailed balance ``p(s) T(s, s') = p(s') T(s', s)``): ``n(a→b)`` given ``n(a→b) + n(b→a)`` is Binomial(·, ½)."""
    model = pairwise_model("spin_glass", fields=True, seed=3, num_units=4)
    probabilities = probabilities_at(model, 1.0)
    before = exact_draws(probabilities, 4, 100_000, seed=5)
    target = model.gibbs_chain()[1]
    after = SwendsenWang().step(SwendsenWang().init(before, target), target, generator=torch.Generator().manual_seed(6))[0].position
    assert chi_square_p_value(after, probabilities) > P_VALUE_FLOOR
    index = 2 ** torch.arange(3, -1, -1)
    pairs = torch.bincount((before.long() @ index) * 16 + after.long() @ index, minlength=256).view(16, 16).double()
    forward, backward = pairs.triu(1), pairs.tril(-1).T
    moved = (forward + backward) > 0
    statistic = ((forward - backward)[moved] ** 2 / (forward + backward)[moved]).sum().item()
    assert moved.sum() > 60  # the step mixes: most pairs of states are joined in one step
    assert stats.chi2.sf(statistic, int(moved.sum())) > P_VALUE_FLOOR
    assert (pairs.diagonal().sum() / pairs.sum()).item() < 0.9


def test_samples_an_ising_path_at_an_intermediate_beta():
    """On the geometric path from a base with its own biases b_0, ``f_β`` has couplings βJ and biases (1 − β) b_0 + βb."""
    from pfzoo.paths import IsingGeometricPath

    model = pairwise_model("spin_glass", fields=True, seed=4)
    base_bias = torch.randn(NUM_UNITS, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    base = Ising.from_tensors(torch.zeros(NUM_UNITS, NUM_UNITS, dtype=torch.float64), base_bias)
    path = IsingGeometricPath(model, base, kernel=SwendsenWang())
    beta = 0.6
    generator = torch.Generator().manual_seed(6)
    state = path.init(path.draw_base(NUM_CHAINS, generator=generator))
    for _ in range(NUM_STEPS):
        state, _info = path.transition(state, beta, generator=generator)
    intermediate = Ising.from_tensors(beta * model.symmetric_coupling.detach(), (1 - beta) * base_bias + beta * model.bias.detach())
    assert chi_square_p_value(state.position, probabilities_at(intermediate, 1.0)) > P_VALUE_FLOOR
    torch.testing.assert_close(path.statistics(state)[1], -model.energy(state.position).detach())  # the state keeps its statistics
    target_only = Ising.from_tensors(beta * model.symmetric_coupling.detach(), beta * model.bias.detach())
    assert chi_square_p_value(state.position, probabilities_at(target_only, 1.0)) < 1e-10  # the base's biases matter


def test_chain_betas_and_parallel_tempering_sample_each_temperature():
    """β as an ``[N, 1]`` column (half the chains at 1, half at 0.3) and replica exchange with SW inside, via ``sample``."""
    model = pairwise_model("ferromagnet", fields=True, seed=2)
    target = model.gibbs_chain()[1]
    column = torch.cat([torch.ones(NUM_CHAINS // 2, 1), torch.full((NUM_CHAINS // 2, 1), 0.3)]).double()
    state, _ = run_chain(SwendsenWang(), target, torch.ones(NUM_CHAINS, NUM_UNITS, dtype=torch.float64), 20, beta=column,
                         generator=torch.Generator().manual_seed(7))
    cold, hot = state.position.chunk(2)
    assert chi_square_p_value(cold, probabilities_at(model, 1.0)) > P_VALUE_FLOOR
    assert chi_square_p_value(hot, probabilities_at(model, 0.3)) > P_VALUE_FLOOR
    tempering = ParallelTempering(SwendsenWang(), temperature_ladder(3, min_beta=0.3))
    samples = model.sample(10_000, num_steps=10, kernel=tempering, generator=torch.Generator().manual_seed(8))
    assert chi_square_p_value(samples, probabilities_at(model, 1.0)) > P_VALUE_FLOOR


def test_cluster_labels_are_the_connected_components():
    g = torch.Generator().manual_seed(0)
    num_nodes, num_edges = 30, 40
    first, second = torch.randint(num_nodes, (2, num_edges), generator=g)
    bonds = torch.rand(50, num_edges, generator=g) < 0.6
    labels, rounds = cluster_labels(bonds, (first, second), num_nodes)
    assert rounds >= 2
    for row, label in zip(bonds, labels):
        graph = coo_matrix((torch.ones(int(row.sum())).numpy(), (first[row].numpy(), second[row].numpy())), shape=(num_nodes, num_nodes))
        _, components = connected_components(graph, directed=False)
        components = torch.from_numpy(components)
        same = components[:, None] == components[None, :]
        assert torch.equal(same, label[:, None] == label[None, :])
        smallest = torch.tensor([int(torch.nonzero(components == components[node])[0]) for node in range(num_nodes)])
        assert torch.equal(label, smallest)


@pytest.mark.parametrize("device", DEVICES)
def test_same_seed_same_numbers_and_chain_streams_blocks_draw_as_alone(device):
    model = pairwise_model("spin_glass", fields=True).to(device)
    target = model.gibbs_chain()[1]
    start = torch.zeros(12, NUM_UNITS, dtype=torch.float64, device=device)

    def run(generator):
        return run_chain(SwendsenWang(), target, start, 5, generator=generator)[0].position

    seeded = [torch.Generator(device).manual_seed(seed) for seed in (1, 1, 2)]
    first, again, other = (run(g) for g in seeded)
    assert torch.equal(first, again) and not torch.equal(first, other)
    streams = [torch.Generator(device).manual_seed(seed) for seed in (3, 4)]
    batch = run(ChainStreams(streams, [5, 7]))
    alone = [run_chain(SwendsenWang(), target, start[:size], 5, generator=ChainStreams([torch.Generator(device).manual_seed(seed)], [size]))[0].position
             for seed, size in ((3, 5), (4, 7))]
    assert torch.equal(batch, torch.cat(alone))


def lattice_model(side: int, coupling: torch.Tensor, *, field: float = 0.0) -> Ising:
    """A periodic ``side × side`` lattice with the given ``coupling [D, D]`` (0/1 units) and spin field ``field`` at every
    site (the biases ``b = 2 field − J𝟙/2``)."""
    return Ising.from_tensors(coupling.double(), 2 * field - coupling.double().sum(0) / 2)


def test_agrees_with_gibbs_on_a_warm_spin_glass_lattice():
    """Unit means and nearest-neighbour products of a 6 × 6 glass (N(0, 1) couplings, random biases) from SW and from
    Gibbs: two-sample z-scores of 108 statistics, all below 4.5 (a correct pair fails with probability ~1e-3)."""
    coupling = lattice_couplings(6, coupling_std=1.5, generator=torch.Generator().manual_seed(0)).double()
    model = Ising.from_tensors(coupling, torch.randn(36, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 0.5)
    start = torch.zeros(4000, 36, dtype=torch.float64)
    gibbs = model.sample(4000, num_steps=100, initial=start, generator=torch.Generator().manual_seed(2))
    cluster = model.sample(4000, num_steps=30, initial=start, kernel=SwendsenWang(), generator=torch.Generator().manual_seed(3))
    first, second = torch.nonzero(torch.triu(coupling != 0, 1), as_tuple=True)

    def statistics(x):
        return torch.cat([x, x[:, first] * x[:, second]], 1)

    a, b = statistics(gibbs), statistics(cluster)
    z = (a.mean(0) - b.mean(0)) / (a.var(0) / a.shape[0] + b.var(0) / b.shape[0]).sqrt()
    assert a.shape[1] == 108 and z.abs().max() < 4.5
    wrong = statistics(Ising.from_tensors(1.3 * coupling, model.bias.detach()).sample(
        4000, num_steps=30, initial=start, kernel=SwendsenWang(), generator=torch.Generator().manual_seed(3)))
    assert ((a.mean(0) - wrong.mean(0)).abs() / (a.var(0) / 4000 + wrong.var(0) / 4000).sqrt()).max() > 6  # power


def test_decorrelates_a_cold_ferromagnet_where_gibbs_does_not():
    """A 16 × 16 ferromagnet at K = 0.6 in ±1 units (T_c: K = 0.4407), no field, started fully magnetised: after 10 sweeps
    SW chains have forgotten the sign of the magnetisation (mean m near 0, half the chains negative) while single-site
    Gibbs chains still hold it (m ≈ 0.95 in every chain); the lag-1 autocorrelation of m in equilibrium is far lower."""
    coupling = lattice_couplings(16, generator=torch.Generator().manual_seed(0)).ne(0).double() * 2.4  # K = J / 4 = 0.6
    model = lattice_model(16, coupling)
    start = torch.ones(400, 256, dtype=torch.float64)
    magnetisation = {}
    for name, kernel in (("gibbs", None), ("swendsen_wang", SwendsenWang())):
        x = model.sample(400, num_steps=10, initial=start, kernel=kernel, generator=torch.Generator().manual_seed(4))
        magnetisation[name] = (2 * x - 1).mean(1)
    assert magnetisation["gibbs"].min() > 0.7 and magnetisation["gibbs"].mean() > 0.9
    assert magnetisation["swendsen_wang"].abs().min() > 0.7  # still ordered: the phase is right, only its sign moves
    assert 0.35 < (magnetisation["swendsen_wang"] < 0).double().mean() < 0.65
    # lag-1 autocorrelation of m over the 400 chains, from the SW equilibrium draws: SW's m flips sign, Gibbs's does not
    equilibrium = model.sample(400, num_steps=10, initial=start, kernel=SwendsenWang(), generator=torch.Generator().manual_seed(5))
    kernel, target = SwendsenWang(), model.gibbs_chain()[1]
    autocorrelation = {}
    for name, (step_kernel, step_target) in (("gibbs", model.gibbs_chain()), ("swendsen_wang", (kernel, target))):
        m0 = (2 * equilibrium - 1).mean(1)
        x = run_chain(step_kernel, step_target, equilibrium, 1, generator=torch.Generator().manual_seed(6))[0].position
        m1 = (2 * x - 1).mean(1)
        autocorrelation[name] = ((m0 * m1).mean() / (m0 * m0).mean()).item()
    assert autocorrelation["gibbs"] > 0.95 and abs(autocorrelation["swendsen_wang"]) < 0.2


def test_usable_by_sample_data_generation_pcd_and_ais():
    """The kernel option of ``Ising.sample`` (above), ``sample_spin_glass``, ``PCD`` and ``AIS`` (through the Ising path)."""
    model = pairwise_model("ferromagnet", fields=True, seed=1)
    data = sample_spin_glass(model, 10_000, num_chains=2000, burn_in=10, thin=3, kernel=SwendsenWang(),
                             generator=torch.Generator().manual_seed(9))
    assert chi_square_p_value(data, probabilities_at(model, 1.0)) > P_VALUE_FLOOR
    estimator = AIS(num_chains=200, num_steps=100, kernel=SwendsenWang())
    assert isinstance(estimator.build_path(model, None, None)[0].kernel, SwendsenWang)
    estimate = estimator(model, generator=torch.Generator().manual_seed(11))
    exact = model.log_partition().item()
    assert abs(estimate.log_z - exact) < 4 * estimate.stderr + 1e-3, (estimate.log_z, exact)
    # PCD's chains on a cold ferromagnet, started magnetised: two SW steps flip about half, two Gibbs sweeps none
    coupling = lattice_couplings(8, generator=torch.Generator().manual_seed(0)).ne(0).double() * 2.4
    ferromagnet = lattice_model(8, coupling)
    batch = torch.ones(200, 64, dtype=torch.float64)
    for kernel, low, high in ((None, 0.0, 0.0), (SwendsenWang(), 0.3, 0.7)):
        objective = PCD(k=2, num_chains=200, kernel=kernel)
        objective.loss(ferromagnet, batch, generator=torch.Generator().manual_seed(10)).backward()
        negative = ((2 * objective.chains - 1).mean(1) < 0).double().mean().item()
        assert low <= negative <= high and ferromagnet.coupling.grad is not None


def test_refused_by_targets_without_pairwise_couplings():
    from factories import random_rbm

    from pfzoo.paths import build

    rbm = random_rbm(4, 3)
    assert SwendsenWang().needs == PAIRWISE_BINARY
    with pytest.raises(ValueError, match=r"^kernel=SwendsenWang needs pairwise couplings and biases over binary vectors; an RBM path"):
        build(rbm, base="uniform", kernel=SwendsenWang())
    with pytest.raises(ValueError, match="^kernel=SwendsenWang needs pairwise couplings"):
        check_kernel(SwendsenWang(), rbm.gibbs_chain()[1].offers, "an RBM's conditionals")
