"""The thesis's statements about minimum probability flow, checked on our implementation against enumeration and closed
forms (issue 52; Sohl-Dickstein 2012):

- appendix B: K(θ) is convex for exponential-family models (energy linear in θ), its Hessian being eq. B.4's first term;
- appendix C: ``log p_i ≥ log max[0, 1 − Γ_ii / λ_2]`` (C.17) and the bound on λ_2 (C.25);
- appendix D: MPF with connections inside a small cube of side ε, rescaled, tends to score matching with an O(ε²) error;
- eq. 2.25: persistent MPF as written (``PersistentMPF(factored=True)``) and the paired variant the class minimises by
  default (eq. 2.21 sampled with a θ_old-reversible connectivity), against exact expectations.

Everything is float64. (Eq. 2.20's general connectivity in BitFlipMPF is tested in test_bit_flip_mpf.py.)
"""

import copy
import math
from functools import partial

import pytest
import torch
from factories import all_binary_states, random_ising, random_rbm
from torch.func import functional_call

from pfzoo.models import Gaussian, Ising, ProductOfExperts
from pfzoo.training import BitFlipMPF, PersistentMPF, ScoreMatching
from pfzoo.training.mpf_theory import (
    cube_mpf_excess,
    cube_mpf_score_matching_limit,
    flow_eigenvalues,
    flow_matrix,
    gauss_legendre,
    log_probability_lower_bound,
    second_eigenvalue_lower_bound,
)

random_ising = partial(random_ising, draw_dtype=None)
random_rbm = partial(random_rbm, draw_dtype=None)


def single_flips(num_units: int) -> torch.Tensor:
    """The symmetric 0/1 connectivity of eq. E.3 over all ``2^D`` states (rows in :func:`all_binary_states` order)."""
    states = all_binary_states(num_units)
    return ((states.unsqueeze(1) != states.unsqueeze(0)).sum(-1) == 1).double()


# ---- appendix B: convexity ---------------------------------------------------------------------------------------


class _Loss(torch.nn.Module):
    """``objective.loss(model, data)`` as a module, so ``functional_call`` can substitute the model's parameters."""

    def __init__(self, model, objective, data):
        super().__init__()
        self.model, self.objective, self.data = model, objective, data

    def forward(self):
        return self.objective.loss(self.model, self.data)


def as_function_of_parameters(model, function):
    """``(f(θ [P]), θ_0 [P])``: ``function(module)`` with the model's parameters replaced by the flat vector θ."""
    names, tensors = zip(*model.named_parameters())
    sizes = [t.numel() for t in tensors]

    def f(theta):
        pieces = torch.split(theta, sizes)
        return function({f"model.{n}": p.reshape(t.shape) for n, p, t in zip(names, pieces, tensors)})

    return f, torch.cat([t.detach().reshape(-1) for t in tensors])


def mpf_of_parameters(model, objective, data):
    wrapper = _Loss(model, objective, data)
    return as_function_of_parameters(model, lambda params: functional_call(wrapper, params, ()))


def b4_first_term(model, data, theta):
    """Eq. B.4's first term, ``¼ Σ Γ (∇Δ)(∇Δ)ᵀ p^(0)``, for single flips: ``¼ Jᵀ diag(w) J`` with ``Δ = F(x⁽ⁱ⁾) − F(x)``,
    ``J = ∂Δ/∂θ [N·D, P]`` and ``w = exp(−½ Δ) / N`` (PSD by construction)."""

    class Gaps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self):
            return self.model.flip_free_energy_gaps(data).reshape(-1)

    gaps_of, _ = as_function_of_parameters(model, lambda params: functional_call(Gaps(), params, ()))
    jacobian = torch.autograd.functional.jacobian(gaps_of, theta)
    weights = torch.exp(-0.5 * gaps_of(theta)) / data.shape[0]
    return 0.25 * jacobian.T @ (weights.unsqueeze(1) * jacobian)


def binary_data(num_rows, num_units, seed):
    return torch.randint(0, 2, (num_rows, num_units), generator=torch.Generator().manual_seed(seed)).double()


@pytest.mark.parametrize(
    "objective", [BitFlipMPF(), BitFlipMPF(all_bits_flipped=True), BitFlipMPF(log_flow=True)], ids=["K", "K_all_bits", "log_K"]
)
def test_mpf_is_convex_for_an_ising_model(objective):
    """Appendix B: for a fully visible Boltzmann machine (E = −½ xᵀJx − b·x, linear in (J, b)) the Hessian of K at random
    θ is positive semidefinite, and K has non-negative second differences along random lines. (The all-bits-flipped
    connectivity of E.2 is covered by the same argument; log K is a log-sum-exp of affine functions, convex too.)"""
    model = random_ising(5, seed=0)
    data = binary_data(30, 5, seed=1)
    f, theta0 = mpf_of_parameters(model, objective, data)
    g = torch.Generator().manual_seed(2)
    for _ in range(3):
        theta = theta0 + torch.randn(theta0.shape, generator=g, dtype=torch.float64)
        hessian = torch.autograd.functional.hessian(f, theta)
        eigenvalues = torch.linalg.eigvalsh(0.5 * (hessian + hessian.T))
        assert eigenvalues[0] >= -1e-12 * eigenvalues[-1], eigenvalues[:3]
        direction = torch.randn(theta0.shape, generator=g, dtype=torch.float64)
        steps = torch.linspace(-2.0, 2.0, 41, dtype=torch.float64)
        with torch.no_grad():
            values = torch.stack([f(theta + t * direction) for t in steps])
        second = values[2:] - 2 * values[1:-1] + values[:-2]
        assert second.min() >= -1e-12 * values.abs().max(), second.min()
        assert second.max() > 0  # K actually curves along the line


def test_ising_hessian_is_the_first_term_of_b4_and_the_rbm_hessian_is_not():
    """Eq. B.4: the Hessian of K is ``¼ Σ Γ ∇Δ ∇Δᵀ p^(0)`` (PSD) plus ``½ Σ Γ ∇²Δ p^(0)``, and the second term vanishes
    when the energy is linear in θ. For an Ising model the autograd Hessian equals the first term; for an RBM (whose free
    energy is not linear in W) it does not, and — not a claim of the thesis, but a check that the convexity test above
    can fail — the RBM's K has negative curvature at these random parameters."""
    data = binary_data(30, 5, seed=3)
    ising = random_ising(5, seed=4)
    f, theta = mpf_of_parameters(ising, BitFlipMPF(), data)
    torch.testing.assert_close(torch.autograd.functional.hessian(f, theta), b4_first_term(ising, data, theta), rtol=1e-10, atol=1e-12)

    rbm = random_rbm(5, 3, seed=5)
    f, theta = mpf_of_parameters(rbm, BitFlipMPF(), data)
    hessian = torch.autograd.functional.hessian(f, theta)
    first = b4_first_term(rbm, data, theta)
    assert torch.linalg.eigvalsh(first)[0] >= -1e-12 * torch.linalg.eigvalsh(first)[-1]
    assert (hessian - first).abs().max() > 1e-2 * first.abs().max()
    eigenvalues = torch.linalg.eigvalsh(0.5 * (hessian + hessian.T))
    assert eigenvalues[0] < -0.05 * eigenvalues[-1], eigenvalues[[0, -1]]


# ---- appendix C: the λ_2 bound -----------------------------------------------------------------------------------


def test_flow_matrix_satisfies_detailed_balance_and_its_spectrum_is_b_s():
    """Eq. 2.20 with an asymmetric connectivity (a proposal distribution, columns summing to one, eq. 2.18): detailed
    balance Γ_ij p_j = Γ_ji p_i (eq. 2.4), columns summing to zero, p in Γ's null space, and the eigenvalues of the
    symmetric B = V⁻¹ΓV (C.2) equal to Γ's, with λ_1 = 0 > λ_2."""
    g = torch.Generator().manual_seed(6)
    energies = torch.randn(8, generator=g, dtype=torch.float64)
    connectivity = torch.rand(8, 8, generator=g, dtype=torch.float64) * (torch.rand(8, 8, generator=g) < 0.5)
    connectivity = (connectivity + connectivity.T > 0) * (connectivity + 0.1)  # connected both ways, g_ij ≠ g_ji
    connectivity = connectivity / connectivity.sum(0, keepdim=True)
    rates = flow_matrix(energies, connectivity)
    p = torch.softmax(-energies, 0)
    flows = rates * p.unsqueeze(0)  # flows[i, j] = Γ_ij p_j
    off = ~torch.eye(8, dtype=torch.bool)
    torch.testing.assert_close(flows[off], flows.T[off], rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(rates.sum(0), torch.zeros(8, dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(rates @ p, torch.zeros(8, dtype=torch.float64), rtol=0, atol=1e-12)
    spectrum = flow_eigenvalues(energies, connectivity)
    direct = torch.linalg.eigvals(rates).real.sort(descending=True).values
    torch.testing.assert_close(spectrum, direct, rtol=1e-9, atol=1e-12)
    assert abs(spectrum[0]) < 1e-12 and spectrum[1] < -1e-3


def peaked_model(family, seed):
    """Strong biases make one state carry much of the mass, the regime where C.17 says something."""
    if family == "ising":
        return random_ising(4, scale=1.0, bias_scale=3.0, seed=seed)
    return random_rbm(4, 3, scale=1.0, bias_scale=3.0, seed=seed)


@pytest.mark.parametrize("family", ["ising", "rbm"])
def test_log_probability_lower_bound_of_c17_holds_for_every_state(family):
    """C.17 with Γ from single-bit flips and exact log p by enumeration: the bound holds for every state of every model
    (10 random models), also with a λ between λ_2 and 0 (looser), and is informative (> 1% of p) for the dominant
    state of several. The outflow −Γ_ii is BitFlipMPF's per-example flow."""
    states = all_binary_states(4)
    informative = 0
    for seed in range(10):
        model = peaked_model(family, seed)
        energies = model.free_energy(states).detach()
        log_p = model.log_prob(states).detach()
        rates = flow_matrix(energies, single_flips(4))
        outflow = BitFlipMPF().log_flows(model, states).exp().detach()
        torch.testing.assert_close(outflow, -rates.diagonal(), rtol=1e-12, atol=0)
        second = flow_eigenvalues(energies, single_flips(4))[1]
        for lam in (second, 0.5 * second):
            bound = log_probability_lower_bound(outflow, lam)
            assert (bound <= log_p + 1e-12).all(), (seed, (bound - log_p).max())
        bound = log_probability_lower_bound(outflow, second)
        informative += int((bound.exp() > 0.01 * log_p.exp()).any())
        # C.21–C.25: λ_2 ≥ max_i Γ_ii / (1 − p̄_i), with p̄ = p exactly and with a looser upper bound
        p = log_p.exp()
        for upper in (p, torch.clamp(1.5 * p, max=0.999)):
            assert second >= second_eigenvalue_lower_bound(outflow, upper) - 1e-12
    assert informative >= 3, informative


def test_log_probability_lower_bound_is_exact_for_two_states():
    """One unit: Γ = [[−a, b], [a, −b]] with λ_2 = −(a + b), and C.17 gives p_0 ≥ 1 − a/(a + b) = p_0: equality."""
    model = Ising.from_tensors(torch.zeros(1, 1, dtype=torch.float64), torch.tensor([0.7], dtype=torch.float64))
    states = all_binary_states(1)
    second = flow_eigenvalues(model.free_energy(states).detach(), single_flips(1))[1]
    bound = log_probability_lower_bound(BitFlipMPF().log_flows(model, states).exp().detach(), second)
    torch.testing.assert_close(bound, model.log_prob(states).detach(), rtol=1e-12, atol=1e-14)


def test_theory_functions_refuse_bad_arguments():
    with pytest.raises(ValueError, match="second_eigenvalue"):
        log_probability_lower_bound(torch.ones(2, dtype=torch.float64), 0.5)
    with pytest.raises(ValueError, match="outflow"):
        log_probability_lower_bound(-torch.ones(2, dtype=torch.float64), -1.0)
    with pytest.raises(ValueError, match="probability_upper_bound"):
        second_eigenvalue_lower_bound(torch.ones(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="connect both ways"):
        flow_matrix(torch.zeros(2, dtype=torch.float64), torch.tensor([[0.0, 1.0], [0.0, 0.0]], dtype=torch.float64))
    gaussian, data = continuous_models()["gaussian"], torch.zeros(3, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="side"):
        cube_mpf_excess(gaussian, data, 0.0)
    with pytest.raises(ValueError, match="quadrature points"):
        cube_mpf_excess(gaussian, data, 0.1, num_nodes=10**4)


# ---- appendix D: the score matching limit ------------------------------------------------------------------------


def continuous_models():
    g = torch.Generator().manual_seed(7)
    precision = torch.tensor([[2.0, 0.6], [0.6, 1.0]], dtype=torch.float64)
    gaussian = Gaussian.from_tensors(precision, torch.tensor([0.3, -0.2], dtype=torch.float64))
    filters = torch.randn(3, 2, generator=g, dtype=torch.float64)
    student_t = ProductOfExperts.from_tensors(filters, torch.tensor([0.8, 1.5, 2.5], dtype=torch.float64), expert="student_t")
    return {"gaussian": gaussian, "student_t_poe": student_t}


def test_gauss_legendre_integrates_polynomials_of_degree_2n_minus_1_exactly():
    nodes, weights = gauss_legendre(4)
    for degree in range(8):
        exact = (1 + (-1) ** degree) / (2 * (degree + 1))  # ½ ∫_{-1}^{1} u^k du
        assert (weights * nodes**degree).sum().item() == pytest.approx(exact, abs=1e-14)


@pytest.mark.parametrize("name", ["gaussian", "student_t_poe"])
def test_cube_mpf_tends_to_score_matching_with_an_order_eps_squared_error(name):
    """Appendix D: 48 (K_ε/ε^M − 1)/ε² → K_SM (ScoreMatching's loss) as ε → 0, the error falling 4× per halving of ε
    (O(ε²)), and the same for the parameter gradients, so the two objectives share their minimiser in the limit."""
    model = continuous_models()[name]
    data = torch.randn(20, 2, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    score_matching = ScoreMatching().loss(model, data)
    sm_grads = torch.cat([g.reshape(-1) for g in torch.autograd.grad(score_matching, list(model.parameters()))])
    errors, grad_errors = [], []
    for side in (0.2, 0.1, 0.05, 0.025):
        limit = cube_mpf_score_matching_limit(model, data, side)
        grads = torch.cat([g.reshape(-1) for g in torch.autograd.grad(limit, list(model.parameters()))])
        errors.append(abs(limit.item() - score_matching.item()))
        grad_errors.append((grads - sm_grads).norm().item())
    for series in (errors, grad_errors):
        ratios = [a / b for a, b in zip(series[:-1], series[1:])]
        assert all(3.8 < r < 4.2 for r in ratios), (series, ratios)
    assert errors[-1] < 1e-3 * abs(score_matching.item())
    # without the rescaling the objective itself tends to ε^M: the offset and scale the appendix removes
    assert abs(cube_mpf_excess(model, data, 0.025).item()) < 1e-3


# ---- eq. 2.25: persistent MPF --------------------------------------------------------------------------------------


def gibbs_transition(model) -> torch.Tensor:
    """``T [S, S]``, ``T[i, j] = P(v' = state i | v = state j)`` for one RBM sweep v → h → v, by enumeration."""
    visible, hidden = all_binary_states(model.num_visible), all_binary_states(model.num_hidden)
    with torch.no_grad():
        ph = model.hidden_probs(visible)  # [S, H]
        h_given_v = (ph.unsqueeze(1) ** hidden * (1 - ph.unsqueeze(1)) ** (1 - hidden)).prod(-1)  # [S_v, S_h]
        pv = model.visible_probs(hidden)
        v_given_h = (pv.unsqueeze(1) ** visible * (1 - pv.unsqueeze(1)) ** (1 - visible)).prod(-1)  # [S_h, S_v]
    return (h_given_v @ v_given_h).T


def state_index(x: torch.Tensor) -> torch.Tensor:
    return (x * (2 ** torch.arange(x.shape[1], dtype=x.dtype))).sum(1).long()  # all_binary_states order: unit i = bit i


def prepared(objective, model, data, seed):
    objective.prepare(model, data, generator=torch.Generator().manual_seed(seed))
    reference = copy.deepcopy(model)
    with torch.no_grad():  # θ ≠ θ_old: move every parameter
        for parameter in model.parameters():
            parameter.add_(0.3 * torch.randn(parameter.shape, generator=torch.Generator().manual_seed(seed + 1), dtype=parameter.dtype))
    return reference


def test_factored_persistent_mpf_is_eq_2_25_as_written_and_matches_2_26_at_theta_old():
    """``PersistentMPF(factored=True)`` is log of eq. 2.25 from the free energies under θ and θ_old, over all rows or any
    ``indices``; at θ = θ_old both forms are 0 with eq. 2.26's gradient ½ (⟨∇E⟩_D − ⟨∇E⟩_S)."""
    model = random_rbm(4, 2, seed=9)
    data = binary_data(25, 4, seed=10)
    for factored in (False, True):
        objective = PersistentMPF(num_gibbs_sweeps=3, factored=factored)
        objective.prepare(model, data, generator=torch.Generator().manual_seed(11))
        assert abs(objective.loss(model, data).item()) < 1e-14
        loss_grads = torch.autograd.grad(objective.loss(model, data), list(model.parameters()))
        mean_gap = 0.5 * (model.free_energy(data).mean() - model.free_energy(objective.connected).mean())
        for got, want in zip(loss_grads, torch.autograd.grad(mean_gap, list(model.parameters()))):
            torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-14)
    objective = PersistentMPF(num_gibbs_sweeps=3, factored=True)
    reference = prepared(objective, model, data, seed=12)
    particles = objective.connected
    with torch.no_grad():
        data_change = model.free_energy(data) - reference.free_energy(data)
        particle_change = model.free_energy(particles) - reference.free_energy(particles)
        eq_2_25 = torch.exp(0.5 * data_change).mean() * torch.exp(-0.5 * particle_change).mean()
        assert objective.loss(model, data).exp().item() == pytest.approx(eq_2_25.item(), rel=1e-12)
        rows = torch.tensor([3, 0, 7, 7, 20])
        batch_2_25 = torch.exp(0.5 * data_change[rows]).mean() * torch.exp(-0.5 * particle_change[rows]).mean()
        assert objective.loss(model, data[rows], indices=rows).exp().item() == pytest.approx(batch_2_25.item(), rel=1e-12)
    assert "reference_free_energies" in objective.state_dict() and "reference_free_energies" not in PersistentMPF().state_dict()


def test_paired_persistent_mpf_is_eq_2_21_sampled_with_the_gibbs_connectivity():
    """The default (paired) form after one reversible sweep v → h → v from the data is, in expectation over the sweep,
    eq. 2.21 with g = T (the sweep's transition matrix, asymmetric, columns summing to one) plus the θ-independent mass
    T_jj of particles that stay at their data point: checked against enumeration within 4 standard errors."""
    model = random_rbm(3, 2, seed=13)
    distinct = torch.tensor([[0, 0, 0], [1, 1, 0], [1, 0, 1]], dtype=torch.float64)
    data = distinct.repeat(4000, 1)
    transition = gibbs_transition(model)
    torch.testing.assert_close(transition.sum(0), torch.ones(8, dtype=torch.float64))
    objective = PersistentMPF(num_gibbs_sweeps=1)
    reference = prepared(objective, model, data, seed=14)
    with torch.no_grad():
        energies = model.free_energy(all_binary_states(3))
        reference_energies = reference.free_energy(all_binary_states(3))
        # eq. 2.20 with g = T: its (g_ji/g_ij)^½ = exp(½ [E_old(i) − E_old(j)]) by detailed balance, the θ_old term
        log_ratio = 0.5 * (reference_energies.unsqueeze(1) - reference_energies.unsqueeze(0))
        torch.testing.assert_close(transition.T.log() - transition.log(), 2 * log_ratio, rtol=1e-9, atol=1e-12)
        rates = flow_matrix(energies, transition)
        # Σ_{i ≠ j} Γ_ij = −Γ_jj per data column j, plus the particles that stayed put
        expected = (transition.diagonal() - rates.diagonal())[state_index(distinct)].mean()
        terms = torch.exp(0.5 * (model.free_energy(data) - model.free_energy(objective.connected) - objective.reference_gap))
        assert objective.loss(model, data).exp().item() == pytest.approx(terms.mean().item(), rel=1e-12)
    stderr = terms.std() / math.sqrt(terms.shape[0])
    assert abs(terms.mean() - expected) < 4 * stderr, (terms.mean().item(), expected.item(), stderr.item())
    assert stderr < 0.01 * expected


@pytest.mark.parametrize("factored", [True, False], ids=["eq_2_25", "paired"])
def test_persistent_mpf_with_mixed_particles_has_eq_2_24s_expectation(factored):
    """With the particles mixed (30 sweeps: T³⁰ equals p(θ_old) in every column to 1e-10), both forms have the
    expectation of eq. 2.24 with g^n = p(θ_old), summed over every state:
    ``(1/|D|) Σ_D exp(½ [E − E_old]) · Σ_i p_old(i) exp(−½ [E(i) − E_old(i)])``, within 4 standard errors."""
    model = random_rbm(3, 2, seed=15)
    data = binary_data(6, 3, seed=16).repeat(2000, 1)
    mixed = torch.linalg.matrix_power(gibbs_transition(model), 30)
    p_old = model.log_prob(all_binary_states(3)).exp().detach()
    assert (mixed - p_old.unsqueeze(1)).abs().max() < 1e-10
    objective = PersistentMPF(num_gibbs_sweeps=30, factored=factored)
    reference = prepared(objective, model, data, seed=17)
    with torch.no_grad():
        states = all_binary_states(3)
        change = model.free_energy(states) - reference.free_energy(states)
        data_factor = torch.exp(0.5 * (model.free_energy(data) - reference.free_energy(data)))
        expected = data_factor.mean() * (p_old * torch.exp(-0.5 * change)).sum()
        particle_terms = torch.exp(-0.5 * (model.free_energy(objective.connected) - reference.free_energy(objective.connected)))
        terms = data_factor.mean() * particle_terms if factored else data_factor * particle_terms
        assert objective.loss(model, data).exp().item() == pytest.approx(
            (data_factor.mean() * particle_terms.mean() if factored else terms.mean()).item(), rel=1e-12)
    stderr = terms.std() / math.sqrt(terms.shape[0])
    assert abs(terms.mean() - expected) < 4 * stderr, (terms.mean().item(), expected.item(), stderr.item())
