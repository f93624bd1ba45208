"""MPF with bit-flip connectivity and pseudo-likelihood for binary models: objective and gradient against
finite differences and the state-space definition, stationarity at the generating model, consistency,
sampled connectivity, a general connectivity (eq. 2.21), the MPF router, and CD on Ising models."""

import math
from functools import partial

import pytest
import torch
from factories import all_binary_states, random_ising, random_rbm

from pfzoo.data import DataSplits
from pfzoo.models import RBM, EnergyModel, Ising
from pfzoo.training import CD, MPF, PCD, BitFlipMPF, PersistentMPF, PseudoLikelihood, Trainer
from pfzoo.training.mpf_theory import flow_matrix

LBFGS = partial(torch.optim.LBFGS, lr=1.0, max_iter=50, history_size=20, line_search_fn="strong_wolfe")


# This file's models are drawn in float64; its states list the first unit as the top bit.
random_ising = partial(random_ising, draw_dtype=None)
random_rbm = partial(random_rbm, draw_dtype=None)
all_states = partial(all_binary_states, msb_first=True)
small_ising = partial(random_ising, 6)  # the models of the tests run on both families
small_rbm = partial(random_rbm, 5, 3)


def exact_samples(model, num_samples, seed):
    """Independent exact draws from an enumerable binary model."""
    states = all_states(model.num_visible)
    probs = model.log_prob(states).exp()
    rows = torch.multinomial(probs, num_samples, replacement=True, generator=torch.Generator().manual_seed(seed))
    return states[rows]


def fit(objective, model, train, *, epochs=1):
    """``epochs`` full-batch L-BFGS steps of up to 50 iterations on ``objective``."""
    optimizer = LBFGS(model.parameters())

    def closure():
        optimizer.zero_grad()
        loss = objective.loss(model, train)
        loss.backward()
        return loss

    for _ in range(epochs):
        optimizer.step(closure)
    return model


def coupling_error(model, truth):
    upper = torch.triu_indices(truth.num_units, truth.num_units, 1)
    difference = (model.symmetric_coupling - truth.symmetric_coupling).detach()[upper[0], upper[1]]
    return difference.pow(2).mean().item()


# ---- flip gaps ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [small_ising, small_rbm], ids=["ising", "rbm"])
def test_flip_free_energy_gaps_match_flipped_free_energies(make):
    model = make()
    x = all_states(model.num_visible)
    fast = model.flip_free_energy_gaps(x)
    generic = EnergyModel.flip_free_energy_gaps(model, x)
    torch.testing.assert_close(fast, generic)
    units = torch.randint(model.num_visible, (x.shape[0], 3), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(model.flip_free_energy_gaps(x, units), generic.gather(1, units))
    flipped = x.clone()
    flipped[:, 2] = 1 - flipped[:, 2]
    torch.testing.assert_close(fast[:, 2], model.free_energy(flipped) - model.free_energy(x))


# ---- the objective ------------------------------------------------------------------------------------


@pytest.mark.parametrize("all_bits_flipped", [False, True])
def test_mpf_objective_equals_the_state_space_definition(all_bits_flipped):
    """K = Σ_{j ∈ D} Σ_{i ∉ D} Γ_ij p_j^(0) with Γ_ij = g_ij exp(½(E_j − E_i)) (thesis eqs. 2.5, 2.11), built from the
    full 2^D × 2^D connectivity matrix, when no data state neighbours another (Hamming distance ≥ 3 apart)."""
    model = random_ising(5, seed=2)
    states = all_states(5)
    data = torch.tensor([[0, 0, 0, 0, 0], [1, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 1, 0, 1, 1]], dtype=torch.float64)
    hamming = (states.unsqueeze(1) != states.unsqueeze(0)).sum(-1)
    connected = hamming == 1
    if all_bits_flipped:
        connected |= hamming == 5
    energies = model.energy(states)
    rates = connected * torch.exp(0.5 * (energies.unsqueeze(0) - energies.unsqueeze(1)))  # rates[i, j]: j → i
    is_data = (states.unsqueeze(1) == data.unsqueeze(0)).all(-1).any(-1)
    empirical = is_data.double() / is_data.sum()
    definition = (rates[~is_data] @ empirical).sum()
    objective = BitFlipMPF(all_bits_flipped=all_bits_flipped)
    assert objective.loss(model, data).item() == pytest.approx(definition.item(), rel=1e-12)
    # and the Ising closed form of appendix E.1: K = (1/N) Σ_n Σ_i exp(½ (1 − 2x_i)(Jx + b)_i)
    closed = torch.exp(0.5 * (1 - 2 * data) * (data @ model.symmetric_coupling + model.bias)).sum(1)
    if all_bits_flipped:
        closed = closed + torch.exp(0.5 * (model.energy(data) - model.energy(1 - data)))
    assert objective.loss(model, data).item() == pytest.approx(closed.mean().item(), rel=1e-12)


class WeightedFlips:
    """A proposal over single flips that depends on the state, ``g(x⁽ⁿ⁾|x) = softmax_n(a_n + c (2x_n − 1))`` (columns sum
    to one, eq. 2.18), so ``g(x⁽ⁿ⁾|x) ≠ g(x|x⁽ⁿ⁾)``: a connectivity for ``BitFlipMPF(connectivity=...)``."""

    def __init__(self, logits: torch.Tensor, contrast: float) -> None:
        self.logits, self.contrast = logits, contrast

    def log_probs(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.logits + self.contrast * (2 * x - 1), -1)

    def __call__(self, x: torch.Tensor):
        num_rows, num_units = x.shape
        connected = x.unsqueeze(1) + torch.eye(num_units, dtype=x.dtype) * (1 - 2 * x).unsqueeze(1)  # row n: unit n flipped
        back = self.log_probs(connected.reshape(-1, num_units)).reshape(num_rows, num_units, num_units)
        return connected, self.log_probs(x), back.diagonal(dim1=1, dim2=2)  # g(x|x⁽ⁿ⁾): flipping n back

    def matrix(self, states: torch.Tensor) -> torch.Tensor:
        """``g [S, S]`` over ``states`` (msb first), ``g[i, j] = g(state i | state j)``."""
        connected, log_forward, _ = self(states)
        weights = 2 ** torch.arange(states.shape[1] - 1, -1, -1, dtype=states.dtype)
        rows = (connected @ weights).long()  # [S, D]: the index of each flipped state
        g = torch.zeros(states.shape[0], states.shape[0], dtype=states.dtype)
        g[rows, torch.arange(states.shape[0]).unsqueeze(1).expand_as(rows)] = log_forward.exp()
        return g


@pytest.mark.parametrize("make", [partial(random_ising, 5, seed=2), partial(random_rbm, 5, 3, seed=2)], ids=["ising", "rbm"])
def test_general_connectivity_is_eq_2_21_by_enumeration(make):
    """``BitFlipMPF(connectivity=g)`` is eq. 2.21: ``(1/|D|) Σ_{j ∈ D} Σ_{i ∉ D} g_ij (g_ji/g_ij)^½ exp(½ (E_j − E_i))``,
    built from the full ``2^D × 2^D`` matrices of eq. 2.20 (:func:`~pfzoo.training.mpf_theory.flow_matrix`), for an
    asymmetric g and data states that connect to no other (so ``i ∉ D`` and ``i ≠ j`` agree); with g = 1 on every single
    flip it is the default bit-flip objective."""
    model = make()
    states = all_states(5)
    data = torch.tensor([[0, 0, 0, 0, 0], [1, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 1, 0, 1, 1]], dtype=torch.float64)
    connectivity = WeightedFlips(torch.tensor([0.5, -1.0, 0.0, 1.5, 0.2], dtype=torch.float64), contrast=0.8)
    g = connectivity.matrix(states)
    torch.testing.assert_close(g.sum(0), torch.ones(32, dtype=torch.float64))
    assert (g - g.T).abs().max() > 0.1
    rates = flow_matrix(model.free_energy(states).detach(), g)
    is_data = (states.unsqueeze(1) == data.unsqueeze(0)).all(-1).any(-1)
    eq_2_21 = rates[~is_data][:, is_data].sum() / is_data.sum()
    objective = BitFlipMPF(connectivity=connectivity)
    assert objective.loss(model, data).item() == pytest.approx(eq_2_21.item(), rel=1e-12)
    torch.testing.assert_close(BitFlipMPF(connectivity=connectivity, log_flow=True).loss(model, data), eq_2_21.log())

    def every_flip(x):
        connected, log_forward, log_backward = connectivity(x)
        return connected, torch.zeros_like(log_forward), torch.zeros_like(log_backward)

    torch.testing.assert_close(BitFlipMPF(connectivity=every_flip).loss(model, data), BitFlipMPF().loss(model, data), rtol=1e-13, atol=0)
    with pytest.raises(ValueError, match="connectivity"):
        BitFlipMPF(connectivity=every_flip, all_bits_flipped=True)
    with pytest.raises(ValueError, match="connectivity"):
        BitFlipMPF(connectivity="single flips")
    with pytest.raises(ValueError, match="connectivity must return"):
        BitFlipMPF(connectivity=lambda x: (x, x, x)).loss(model, data)


@pytest.mark.parametrize(
    "objective", [BitFlipMPF(), BitFlipMPF(all_bits_flipped=True), PseudoLikelihood()], ids=["mpf", "mpf_all_bits", "pl"]
)
@pytest.mark.parametrize("make", [small_ising, small_rbm], ids=["ising", "rbm"])
def test_gradient_matches_finite_differences(objective, make):
    model = make(seed=3)
    data = exact_samples(model, 40, seed=4)
    loss = objective.loss(model, data)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    step = 1e-6
    for parameter, grad in zip(model.parameters(), grads):
        for index in [(0,) * parameter.dim(), tuple(s - 1 for s in parameter.shape)]:
            if parameter is getattr(model, "coupling", None):
                index = (0, parameter.shape[1] - 1)
            with torch.no_grad():
                parameter[index] += step
                up = objective.loss(model, data).item()
                parameter[index] -= 2 * step
                down = objective.loss(model, data).item()
                parameter[index] += step
            assert grad[index].item() == pytest.approx((up - down) / (2 * step), rel=1e-5, abs=1e-7)


@pytest.mark.parametrize(
    "objective", [BitFlipMPF(), BitFlipMPF(all_bits_flipped=True), PseudoLikelihood()], ids=["mpf", "mpf_all_bits", "pl"]
)
@pytest.mark.parametrize("make", [small_ising, small_rbm], ids=["ising", "rbm"])
def test_generating_model_is_a_stationary_point_of_the_expected_objective(objective, make):
    """With the data distribution equal to the model (all states, weighted by exact p), the gradient of the
    expected objective vanishes: MPF and pseudo-likelihood are consistent estimators (thesis §2.4)."""
    model = make(seed=5)
    states = all_states(model.num_visible)
    probs = model.log_prob(states).exp().detach()
    if isinstance(objective, BitFlipMPF):
        expected = (probs * objective.log_flows(model, states).exp()).sum()
    else:
        expected = (probs * torch.nn.functional.softplus(-model.flip_free_energy_gaps(states)).sum(1)).sum()
    grads = torch.autograd.grad(expected, list(model.parameters()))
    for grad in grads:
        assert grad.abs().max().item() < 1e-10
    # power check: a perturbed model is not stationary
    with torch.no_grad():
        next(model.parameters()).add_(0.3)
    if isinstance(objective, BitFlipMPF):
        moved = (probs * objective.log_flows(model, states).exp()).sum()
    else:
        moved = (probs * torch.nn.functional.softplus(-model.flip_free_energy_gaps(states)).sum(1)).sum()
    assert max(g.abs().max().item() for g in torch.autograd.grad(moved, list(model.parameters()))) > 1e-3


@pytest.mark.parametrize("objective", [BitFlipMPF(), PseudoLikelihood()], ids=["mpf", "pl"])
def test_estimator_is_consistent_recovering_the_generating_couplings(objective):
    truth = random_ising(8, scale=0.7, seed=6)
    errors = {}
    for num_samples in (500, 50000):
        data = exact_samples(truth, num_samples, seed=7)
        model = Ising(8, init_std=0.0).double()
        fit(objective, model, data, epochs=3)
        errors[num_samples] = coupling_error(model, truth)
    # ε_J ∝ 1/N for a consistent estimator; 100x the data should cut it by far more than 5x
    assert errors[50000] < errors[500] / 5, errors
    assert errors[50000] < 2e-3, errors


def test_sampled_flips_are_unbiased_for_the_flow():
    model = random_ising(6, seed=8)
    data = exact_samples(model, 5, seed=9)
    full = BitFlipMPF().log_flows(model, data).exp()
    sampled = BitFlipMPF(num_flips=2)
    g = torch.Generator().manual_seed(10)
    draws = torch.stack([sampled.log_flows(model, data, generator=g).exp() for _ in range(4000)])
    stderr = draws.std(0) / math.sqrt(draws.shape[0])
    assert ((draws.mean(0) - full).abs() < 4 * stderr).all()
    pl_full = PseudoLikelihood().loss(model, data)
    pl_draws = torch.stack([PseudoLikelihood(num_units=2).loss(model, data, generator=g) for _ in range(4000)])
    assert abs(pl_draws.mean() - pl_full) < 4 * pl_draws.std() / math.sqrt(4000)


def test_sampled_connectivity_trains_an_rbm_with_minibatches():
    truth = random_rbm(6, 3, seed=11)
    data = exact_samples(truth, 4000, seed=12).float()
    model = RBM(6, 3, init_std=0.1, generator=torch.Generator().manual_seed(0))
    start = -model.free_energy(data).mean().item() - model.log_partition().item()
    objective = BitFlipMPF(num_flips=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    g = torch.Generator().manual_seed(13)
    for epoch in range(40):
        for group in optimizer.param_groups:
            group["lr"] = 0.1 if epoch < 30 else 0.02
        for batch in data.split(100):
            optimizer.zero_grad()
            objective.loss(model, batch, generator=g).backward()
            optimizer.step()
    with torch.no_grad():
        end = model.log_prob(data).mean().item()
        best = truth.log_prob(data.double()).mean().item()
    assert end > start + 0.1 and end > best - 0.1, (start, end, best)


# ---- the router and the Trainer ------------------------------------------------------------------------


def test_mpf_routes_binary_models_to_bit_flips_and_trains_through_the_trainer(tmp_path):
    truth = random_ising(8, scale=0.7, seed=14)
    data = DataSplits("ising", train=exact_samples(truth, 5000, seed=15).float(), test=exact_samples(truth, 500, seed=16).float())
    objective = MPF()
    model = Ising(8, init_std=0.0)
    assert objective.prepare(model, data.train) is False
    torch.testing.assert_close(objective.loss(model, data.train), BitFlipMPF().loss(model, data.train))
    trainer = Trainer(objective, partial(torch.optim.LBFGS, lr=1.0, max_iter=20, line_search_fn="strong_wolfe"), run_dir=tmp_path,
                      epochs=5, batch_size=10**6, progress=False)
    before = coupling_error(model, truth)
    trainer.fit(model, data)
    assert coupling_error(model, truth) < before / 20
    torch.testing.assert_close(model.coupling, model.coupling.T)  # gradient steps keep the couplings symmetric


@pytest.mark.parametrize("objective", [CD(k=1), CD(k=5), PCD(k=1, num_chains=200)], ids=["cd1", "cd5", "pcd1"])
def test_contrastive_divergence_trains_ising_models(objective, tmp_path):
    truth = random_ising(8, scale=0.7, seed=17)
    data = DataSplits("ising", train=exact_samples(truth, 5000, seed=18).float(), test=exact_samples(truth, 500, seed=19).float())
    model = Ising(8, init_std=0.0)
    model.init_from_data(data.train)
    before = coupling_error(model, truth)
    trainer = Trainer(objective, partial(torch.optim.SGD, lr=0.05), run_dir=tmp_path, epochs=10, batch_size=50, progress=False)
    trainer.fit(model, data)
    assert coupling_error(model, truth) < before / 4, (before, coupling_error(model, truth))


def test_bad_arguments_raise_value_error_naming_them():
    with pytest.raises(ValueError, match="num_flips"):
        BitFlipMPF(num_flips=0)
    with pytest.raises(ValueError, match="num_units"):
        PseudoLikelihood(num_units=0)
    with pytest.raises(ValueError, match="batch"):
        BitFlipMPF().loss(random_ising(4), torch.full((3, 4), 0.5, dtype=torch.float64))
    with pytest.raises(ValueError, match="batch"):
        PseudoLikelihood().loss(random_ising(4), torch.zeros(3, 5, dtype=torch.float64))


def test_log_flow_is_the_log_of_the_flow_with_the_same_minimiser():
    model = random_ising(5, seed=20)
    data = exact_samples(model, 30, seed=21)
    torch.testing.assert_close(BitFlipMPF(log_flow=True).loss(model, data), BitFlipMPF().loss(model, data).log())
    fitted = {log_flow: fit(BitFlipMPF(log_flow=log_flow), Ising(5, init_std=0.0).double(), data, epochs=3) for log_flow in (False, True)}
    torch.testing.assert_close(fitted[True].symmetric_coupling, fitted[False].symmetric_coupling, atol=1e-4, rtol=0)


def sharp_rbm(seed):
    """An 8×3 RBM with doubled random weights: 0.15 nats of structure beyond the independent-units fit."""
    model = random_rbm(8, 3, seed=seed)
    with torch.no_grad():
        model.weight.mul_(2.0)
    return model


@pytest.mark.parametrize("make", [small_ising, sharp_rbm], ids=["ising", "rbm"])
def test_persistent_mpf_with_gibbs_connectivity_approaches_maximum_likelihood(make, tmp_path):
    """Persistent MPF for binary models (particles advanced by reversible block Gibbs under θ_old, free energies with
    the hidden units summed out) climbs to within a few hundredths of a nat of the generating model's likelihood."""
    truth = make(seed=22)
    data = DataSplits("binary", train=exact_samples(truth, 5000, seed=23), test=exact_samples(truth, 500, seed=24))
    if isinstance(truth, Ising):
        model = Ising(truth.num_visible, init_std=0.0).double()
    else:
        model = RBM(truth.num_visible, truth.num_hidden, init_std=0.1, generator=torch.Generator().manual_seed(0)).double()
    model.init_from_data(data.train)
    start = model.log_prob(data.train).mean().item()
    trainer = Trainer(PersistentMPF(num_gibbs_sweeps=2), partial(torch.optim.LBFGS, lr=1.0, max_iter=10, line_search_fn="strong_wolfe"),
                      run_dir=tmp_path, epochs=30, batch_size=10**6, progress=False)
    trainer.fit(model, data)
    end, best = model.log_prob(data.train).mean().item(), truth.log_prob(data.train).mean().item()
    assert end > start + 0.1 and end > best - 0.03, (start, end, best)
    with pytest.raises(ValueError, match="num_gibbs_sweeps"):
        PersistentMPF(num_gibbs_sweeps=0)
