"""Ising model / fully visible Boltzmann machine against enumeration and brute force.

Energies against a double loop over pairs, exact log Z against a sum over every state (and against
an RBM written as an Ising model over (v, h)), single-flip energy gaps against explicitly flipped
states, and the Gibbs sampler as a distribution (χ² against enumerated probabilities).
"""

import itertools
import math
from functools import partial

import pytest
import torch
from factories import all_binary_states, random_ising
from scipy import stats

from pfzoo import zoo
from pfzoo.models import RBM, EnergyModel, Hopfield, Ising
from pfzoo.models.ising import independent_sets
from pfzoo.paths import IsingGeometricPath, build

NUM_CHAINS = 40000
P_VALUE_FLOOR = 1e-4  # fixed seed; a correct sampler fails this with probability 1e-4


def symmetric_zero_diagonal(upper):
    """``U + Uᵀ`` with U the strict upper triangle of ``upper [D, D]``."""
    strict = torch.triu(upper, 1)
    return strict + strict.T


# A dense Ising model (couplings ``N(0, scale²)`` on every pair, biases ``N(0, 0.5²)``), drawn in the model's dtype.
random_ising = partial(random_ising, draw_dtype=None)


def grid_coupling(rows, cols, *, periodic, values=None):
    """Nearest-neighbour couplings of a ``rows × cols`` lattice (row-major units), ``[D, D]``.

    ``values`` (``[D, D]``, optional) gives each bond's strength (read from the upper triangle); default 1.
    """
    num_units = rows * cols
    coupling = torch.zeros(num_units, num_units, dtype=torch.float64)
    for r, c in itertools.product(range(rows), range(cols)):
        unit = r * cols + c
        neighbours = [(r + 1, c), (r, c + 1)]
        for nr, nc in neighbours:
            if periodic:
                nr, nc = nr % rows, nc % cols
            elif nr >= rows or nc >= cols:
                continue
            other = nr * cols + nc
            i, j = min(unit, other), max(unit, other)
            strength = 1.0 if values is None else values[i, j].item()
            coupling[unit, other] = coupling[other, unit] = strength
    return coupling


def grid_ising(rows, cols, seed=0):
    """An open-boundary lattice with random bond strengths ``N(0, 1)`` and biases ``N(0, 0.5²)``."""
    g = torch.Generator().manual_seed(seed)
    num_units = rows * cols
    values = torch.randn(num_units, num_units, generator=g, dtype=torch.float64)
    return Ising.from_tensors(grid_coupling(rows, cols, periodic=False, values=values), torch.randn(num_units, generator=g, dtype=torch.float64) * 0.5)


all_states = partial(all_binary_states, msb_first=True)  # first column most significant: state_index relies on it


def state_index(bits):
    """Row of {0,1} values → index into :func:`all_states`."""
    weights = 2 ** torch.arange(bits.shape[1] - 1, -1, -1)
    return (bits.long() * weights).sum(1)


def brute_force_energy(model, x):
    """``-Σ_{i<j} J_ij x_i x_j - Σ_i b_i x_i`` by explicit loops, ``[B]``."""
    coupling, bias = model.coupling.detach(), model.bias.detach()
    energies = []
    for row in x.tolist():
        energy = 0.0
        for i, j in itertools.combinations(range(len(row)), 2):
            energy -= coupling[i, j].item() * row[i] * row[j]
        energy -= sum(bias[i].item() * row[i] for i in range(len(row)))
        energies.append(energy)
    return torch.tensor(energies, dtype=torch.float64)


def probabilities(model, beta):
    """``p_β(x) ∝ exp(-β E(x))`` over :func:`all_states`."""
    states = all_states(model.num_units, dtype=model.dtype)
    return torch.softmax(-beta * model.energy(states).detach().double(), 0)


def chi_square_p_value(samples, probs):
    counts = torch.bincount(state_index(samples), minlength=probs.numel()).double()
    expected = probs * samples.shape[0]
    keep = expected > 5  # pool rare cells so the χ² approximation holds
    observed = torch.cat([counts[keep], counts[~keep].sum()[None]])
    expected = torch.cat([expected[keep], expected[~keep].sum()[None]])
    if observed[-1] == 0 and expected[-1] < 1e-12:
        observed, expected = observed[:-1], expected[:-1]
    return stats.chisquare(observed.numpy(), expected.numpy()).pvalue


# ---- energies and parameters -----------------------------------------------------------------


def test_energy_equals_double_loop_over_pairs():
    model = random_ising(7, seed=1)
    x = (torch.rand(20, 7, generator=torch.Generator().manual_seed(2)) < 0.5).double()
    assert torch.allclose(model.energy(x).detach(), brute_force_energy(model, x), atol=1e-12)
    assert torch.equal(model.free_energy(x), model.energy(x))
    assert torch.equal(model.unnormalized_log_prob(x), -model.energy(x))


def test_symmetric_coupling_is_symmetric_with_zero_diagonal_even_for_an_asymmetric_parameter():
    model = Ising(5, init_std=1.0, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        model.coupling.copy_(torch.randn(5, 5, generator=torch.Generator().manual_seed(1)))  # asymmetric, non-zero diagonal
    coupling = model.symmetric_coupling
    assert torch.equal(coupling, coupling.T)
    assert torch.equal(coupling.diagonal(), torch.zeros(5))
    expected = (model.coupling + model.coupling.T) / 2
    off_diagonal = ~torch.eye(5, dtype=torch.bool)
    assert torch.equal(coupling[off_diagonal], expected[off_diagonal])


def test_initial_coupling_is_symmetric_with_zero_diagonal():
    model = Ising(6, init_std=1.0, generator=torch.Generator().manual_seed(0))
    assert torch.equal(model.coupling, model.coupling.T)
    assert torch.equal(model.coupling.diagonal(), torch.zeros(6))
    assert torch.equal(model.bias, torch.zeros(6))


def test_energy_gradient_is_symmetric_with_zero_diagonal_so_training_keeps_symmetry():
    model = random_ising(6, seed=3, dtype=torch.float32)
    x = (torch.rand(50, 6, generator=torch.Generator().manual_seed(4)) < 0.5).float()
    for _ in range(3):
        model.coupling.grad = None
        model.energy(x).mean().backward()
        grad = model.coupling.grad
        assert grad.abs().sum() > 0
        assert torch.equal(grad, grad.T)
        assert torch.equal(grad.diagonal(), torch.zeros(6))
        with torch.no_grad():
            model.coupling -= 0.1 * grad  # a plain gradient step
    assert torch.equal(model.coupling, model.coupling.T)
    assert torch.equal(model.coupling.diagonal(), torch.zeros(6))


@pytest.mark.parametrize(
    "coupling, bias, message",
    [
        (torch.tensor([[0.0, 1.0], [2.0, 0.0]]), torch.zeros(2), "symmetric"),
        (torch.tensor([[0.5, 1.0], [1.0, 0.0]]), torch.zeros(2), "zero diagonal"),
        (torch.zeros(2, 2), torch.zeros(3), "bias must have shape"),
        (torch.zeros(2, 2), torch.zeros(1, 2), "bias must have shape"),
        (torch.zeros(2, 3), torch.zeros(2), "square"),
        (torch.zeros(4), torch.zeros(2), "square"),
        (torch.tensor([[0.0, float("nan")], [float("nan"), 0.0]]), torch.zeros(2), "coupling contains NaN"),
        (torch.zeros(2, 2), torch.tensor([0.0, float("inf")]), "bias contains NaN"),
    ],
)
def test_from_tensors_rejects_bad_parameters(coupling, bias, message):
    with pytest.raises(ValueError, match=message):
        Ising.from_tensors(coupling, bias)


def test_from_tensors_copies_and_keeps_dtype():
    coupling = symmetric_zero_diagonal(torch.randn(4, 4, dtype=torch.float64))
    bias = torch.randn(4, dtype=torch.float64)
    model = Ising.from_tensors(coupling, bias)
    assert model.dtype == torch.float64
    assert torch.equal(model.symmetric_coupling, coupling) and torch.equal(model.bias, bias)
    coupling.zero_()
    assert model.coupling.abs().sum() > 0


def test_num_units_and_num_visible():
    assert Ising(5).num_units == Ising(5).num_visible == 5
    assert Ising(num_visible=7).num_units == 7  # how the app builds it from the data width
    assert Ising(3, num_visible=3).num_units == 3
    assert Ising(num_visible=4).config() == {"num_units": 4, "max_enumeration_units": 25}
    with pytest.raises(ValueError, match="disagree"):
        Ising(3, num_visible=4)
    with pytest.raises(ValueError, match="num_units"):
        Ising()
    with pytest.raises(ValueError, match="num_units"):
        Ising(0)
    with pytest.raises(ValueError, match="init_std"):
        Ising(3, init_std=-1.0)


@pytest.mark.parametrize(
    "bad, message",
    [
        (torch.ones(3, 5), "4 columns"),
        (torch.full((3, 4), 0.5), "binary"),
        (torch.tensor([[0.0, 1.0, float("nan"), 0.0]]), "NaN"),
        (torch.ones(2, 4, dtype=torch.long), "floating"),
    ],
)
def test_bad_states_raise_value_error_naming_argument(bad, message):
    with pytest.raises(ValueError, match=f"^x .*{message}|^x must.*{message}"):
        Ising(4).energy(bad)


# ---- exact partition function -----------------------------------------------------------------


def test_log_partition_equals_brute_force_sum_over_all_states():
    model = random_ising(8, scale=1.5, seed=5)
    states = all_states(8)
    brute_force = torch.logsumexp(-brute_force_energy(model, states), 0)
    assert model.log_partition().dtype == torch.float64
    assert abs(model.log_partition().item() - brute_force.item()) < 1e-9
    assert torch.logsumexp(model.log_prob(states), 0).item() == pytest.approx(0.0, abs=1e-10)


def test_log_partition_refuses_to_enumerate_past_the_limit():
    with pytest.raises(ValueError, match="max_enumeration_units=10"):
        Ising(30, max_enumeration_units=10).log_partition()
    assert Ising(10, init_std=0.0, max_enumeration_units=10).log_partition().item() == pytest.approx(10 * math.log(2))


def test_rbm_written_as_ising_model_has_the_rbm_log_partition():
    """Block coupling ``[[0, W], [Wᵀ, 0]]`` over (v, h) and bias ``[b; c]``: the RBM's joint energy exactly."""
    g = torch.Generator().manual_seed(6)
    weight = torch.randn(5, 4, generator=g, dtype=torch.float64) * 1.5
    visible_bias, hidden_bias = torch.randn(5, generator=g, dtype=torch.float64), torch.randn(4, generator=g, dtype=torch.float64)
    rbm = RBM.from_tensors(weight, visible_bias, hidden_bias)
    coupling = torch.zeros(9, 9, dtype=torch.float64)
    coupling[:5, 5:] = weight
    coupling[5:, :5] = weight.T
    ising = Ising.from_tensors(coupling, torch.cat([visible_bias, hidden_bias]))
    assert ising.log_partition().item() == pytest.approx(rbm.log_partition().item(), abs=1e-9)
    states = all_states(9)
    assert torch.allclose(ising.energy(states), rbm.energy(states[:, :5], states[:, 5:]), atol=1e-12)
    # a bipartite graph is two-colourable: one block per layer
    assert sorted(sorted(block.tolist()) for block in independent_sets(coupling)) == [[0, 1, 2, 3, 4], [5, 6, 7, 8]]


# ---- single flips -----------------------------------------------------------------------------


def test_flip_free_energy_gaps_equal_energies_of_explicitly_flipped_states():
    model = random_ising(6, seed=7)
    x = all_states(6)
    gaps = model.flip_free_energy_gaps(x)
    assert gaps.shape == (64, 6)
    for i in range(6):
        flipped = x.clone()
        flipped[:, i] = 1 - flipped[:, i]
        assert torch.allclose(gaps[:, i], model.energy(flipped) - model.energy(x), atol=1e-12)


def test_flip_free_energy_gaps_of_chosen_units_match_all_units_and_the_generic_default():
    model = random_ising(6, seed=7)
    x = all_states(6)
    units = torch.randint(0, 6, (64, 3), generator=torch.Generator().manual_seed(8))
    chosen = model.flip_free_energy_gaps(x, units)
    assert chosen.shape == (64, 3)
    assert torch.allclose(chosen, model.flip_free_energy_gaps(x).gather(1, units), atol=1e-12)
    generic = EnergyModel.flip_free_energy_gaps(model, x, units)  # flips every copy and re-evaluates F
    assert torch.allclose(chosen, generic, atol=1e-12)


def test_local_fields_are_conditional_logits():
    model = random_ising(5, seed=8)
    x = all_states(5)
    fields = model.local_fields(x)
    for i in range(5):
        on, off = x.clone(), x.clone()
        on[:, i], off[:, i] = 1.0, 0.0
        assert torch.allclose(fields[:, i], model.energy(off) - model.energy(on), atol=1e-12)


# ---- independent sets -------------------------------------------------------------------------


def assert_valid_colouring(coupling, blocks):
    num_units = coupling.shape[0]
    assert sorted(torch.cat(blocks).tolist()) == list(range(num_units))  # a partition of the units
    for block in blocks:
        inside = coupling[block][:, block]
        assert torch.all(inside == 0), f"coupled units share the block {block.tolist()}"


def test_independent_sets_is_a_valid_colouring_of_a_random_sparse_graph():
    g = torch.Generator().manual_seed(9)
    mask = symmetric_zero_diagonal((torch.rand(30, 30, generator=g) < 0.15).double())
    coupling = mask * symmetric_zero_diagonal(torch.randn(30, 30, generator=g, dtype=torch.float64))
    blocks = independent_sets(coupling)
    assert_valid_colouring(coupling, blocks)
    assert 1 < len(blocks) < 30


def test_periodic_4x4_lattice_gets_two_checkerboard_sets():
    coupling = grid_coupling(4, 4, periodic=True)
    assert (coupling != 0).sum(1).tolist() == [4] * 16  # every site has four neighbours
    blocks = independent_sets(coupling)
    assert len(blocks) == 2
    assert_valid_colouring(coupling, blocks)
    parity = [(unit // 4 + unit % 4) % 2 for unit in range(16)]
    assert {tuple(block.tolist()) for block in blocks} == {
        tuple(u for u in range(16) if parity[u] == 0),
        tuple(u for u in range(16) if parity[u] == 1),
    }


def test_dense_model_gets_singleton_sets_and_independent_model_one_set():
    assert [block.tolist() for block in independent_sets(random_ising(5).symmetric_coupling)] == [[0], [1], [2], [3], [4]]
    assert [block.tolist() for block in independent_sets(torch.zeros(4, 4))] == [[0, 1, 2, 3]]


# ---- sampling as a distribution ---------------------------------------------------------------


MODELS = {
    "dense-6": lambda: random_ising(6, scale=1.0, seed=10),
    "grid-3x3": lambda: grid_ising(3, 3, seed=11),
}


@pytest.mark.parametrize("beta", [1.0, 0.5])
@pytest.mark.parametrize("name", list(MODELS))
def test_sample_follows_enumerated_distribution(name, beta):
    model = MODELS[name]()
    blocks = independent_sets(model.symmetric_coupling)
    if name.startswith("grid"):
        assert len(blocks) == 2 and min(len(block) for block in blocks) >= 4  # several units per block
    else:
        assert len(blocks) == model.num_units
    samples = model.sample(NUM_CHAINS, num_steps=40, beta=beta, generator=torch.Generator().manual_seed(12))
    assert samples.shape == (NUM_CHAINS, model.num_units)
    assert chi_square_p_value(samples, probabilities(model, beta)) > P_VALUE_FLOOR


@pytest.mark.parametrize("name", list(MODELS))
def test_one_gibbs_sweep_leaves_the_distribution_invariant(name):
    """Exact samples of p_β (drawn from the enumerated table) stay exact after one sweep."""
    model = MODELS[name]()
    probs = probabilities(model, 0.5)
    g = torch.Generator().manual_seed(13)
    start = all_states(model.num_units)[torch.multinomial(probs, NUM_CHAINS, replacement=True, generator=g)]
    swept = model.gibbs_sweep(start, beta=0.5, generator=g)
    assert not torch.equal(swept, start)
    assert chi_square_p_value(swept, probs) > P_VALUE_FLOOR


@pytest.mark.parametrize("name", list(MODELS))
def test_chi_square_rejects_the_wrong_distribution(name):
    """Power check: samples at β = 1 must fail the test against the β = 0.5 distribution."""
    model = MODELS[name]()
    samples = model.sample(NUM_CHAINS, num_steps=40, beta=1.0, generator=torch.Generator().manual_seed(12))
    assert chi_square_p_value(samples, probabilities(model, 0.5)) < 1e-10


def test_same_seed_same_samples():
    model = random_ising(8, seed=14, dtype=torch.float32)
    run = lambda seed: model.sample(20, num_steps=5, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(run(3), run(3))
    assert not torch.equal(run(3), run(4))
    x = torch.zeros(20, 8)
    assert torch.equal(
        model.gibbs_sweep(x, beta=0.3, generator=torch.Generator().manual_seed(5)),
        model.gibbs_sweep(x, beta=0.3, generator=torch.Generator().manual_seed(5)),
    )


def test_sample_arguments_are_checked():
    model = Ising(4)
    with pytest.raises(ValueError, match="num_samples"):
        model.sample(0)
    with pytest.raises(ValueError, match="num_steps"):
        model.sample(3, num_steps=0)
    with pytest.raises(ValueError, match="beta"):
        model.sample(3, beta=1.5)
    with pytest.raises(ValueError, match="initial must have num_samples=3"):
        model.sample(3, initial=torch.zeros(2, 4))
    with pytest.raises(ValueError, match="^initial"):
        model.sample(3, initial=torch.full((3, 4), 0.5))
    start = torch.ones(3, 4)
    assert model.sample(3, num_steps=1, initial=start).shape == (3, 4)
    assert torch.equal(start, torch.ones(3, 4))  # not modified in place


# ---- annealing base and checkpoints -----------------------------------------------------------


def test_annealing_bases():
    model = random_ising(5, seed=15)
    uniform = model.annealing_base("uniform")
    assert torch.equal(uniform.symmetric_coupling, torch.zeros(5, 5, dtype=torch.float64))
    assert uniform.log_partition().item() == pytest.approx(5 * math.log(2))
    data = torch.tensor([[1.0, 0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 1.0, 0.0]], dtype=torch.float64)
    base = model.annealing_base("base_rate", data, smoothing=1.0)
    assert torch.allclose(torch.sigmoid(base.bias), torch.tensor([3, 1, 2, 3, 1], dtype=torch.float64) / 4)
    with pytest.raises(ValueError, match="needs data"):
        model.annealing_base("base_rate")
    with pytest.raises(ValueError, match="kind"):
        model.annealing_base("gaussian")
    with pytest.raises(ValueError, match="kernel must be a pfzoo kernel with init, step and needs"):
        build(model, base="uniform", kernel=object())
    with pytest.raises(ValueError, match="zero couplings"):
        IsingGeometricPath(target=model, base=model)


@pytest.mark.parametrize("cls", [Ising, Hopfield])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_zoo_round_trip(tmp_path, cls, dtype):
    model = random_ising(6, seed=16, dtype=dtype, cls=cls)
    zoo.save(model, tmp_path / "model.pt")
    loaded = zoo.load(tmp_path / "model.pt")
    assert type(loaded) is cls and loaded.config() == model.config() and loaded.dtype == dtype
    x = all_states(6, dtype=dtype)
    assert torch.equal(loaded.energy(x), model.energy(x))
    assert set(torch.load(tmp_path / "model.pt", weights_only=True)["state_dict"]) == {"coupling", "bias"}


def test_spin_parameters_round_trip_and_give_the_same_distribution():
    """``from_spins`` / ``spin_parameters``: J = 4K, b = 2h − 2K𝟙, so ``½ xᵀJx + b·x − (Σ_{i<j} K_ij s_i s_j + h·s)`` is
    the same constant on all 2^D states (s = 2x − 1), and the round trip returns the parameters."""
    model = random_ising(6, scale=1.5, seed=7)
    coupling, field = model.spin_parameters()
    back = Ising.from_spins(coupling, field)
    assert torch.allclose(back.symmetric_coupling, model.symmetric_coupling, atol=1e-12)
    assert torch.allclose(back.bias, model.bias, atol=1e-12)
    x = all_binary_states(6)
    s = 2 * x - 1
    spin_log_f = 0.5 * ((s @ coupling) * s).sum(-1) + s @ field  # K has a zero diagonal: ½ sᵀKs = Σ_{i<j}
    difference = -model.energy(x) - spin_log_f
    assert difference.max() - difference.min() < 1e-10
    assert torch.allclose(coupling, model.symmetric_coupling / 4)
