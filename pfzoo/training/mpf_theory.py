"""The theory of minimum probability flow (MPF) as computable quantities: the flow matrix Γ of a small state space, its
spectrum and the log-likelihood bound of appendix C, and the small-cube MPF objective of appendix D whose limit is score
matching (Sohl-Dickstein's thesis, ch. 2 and appendices C–D).

These are reference computations for tests and studies, not training objectives: the flow matrix enumerates every
state (``S × S``), and the cube objective integrates by a tensor-product quadrature (``num_nodes^M`` points per example).

**Flow matrix (eqs. 2.6, 2.20).** For states ``i ≠ j`` with energies ``E`` and a connectivity ``g`` (``g_ij`` the weight
of a connection from state j to state i; symmetric 0/1 in eq. 2.7, a proposal distribution in §2.8),

    Γ_ij = g_ij (g_ji / g_ij)^½ exp(½ [E_j − E_i]) = (g_ij g_ji)^½ exp(½ [E_j − E_i]),    Γ_jj = −Σ_{k ≠ j} Γ_kj,

which satisfies detailed balance ``Γ_ij p_j = Γ_ji p_i`` with ``p ∝ exp(−E)`` for every g with ``g_ij > 0 ⇔ g_ji > 0``.
``−Γ_jj`` is the rate at which probability leaves state j: MPF's per-example flow
(:meth:`~pfzoo.training.BitFlipMPF.log_flows` is its log for bit-flip connectivity), and ``K = (1/|D|) Σ_{j ∈ D} −Γ_jj``
when no data state is connected to another (eq. 2.12).

**Spectrum (eqs. C.1–C.4).** With ``V = diag(exp(−½ E))``, ``B = V⁻¹ Γ V`` is symmetric: ``B_ij = (g_ij g_ji)^½`` off
the diagonal and ``B_ii = Γ_ii``. It has Γ's eigenvalues, ``0 = λ_1 > λ_2 ≥ … ≥ λ_S`` for an ergodic connectivity, and
its unit eigenvector for λ_1 is ``U_i1 = p_i^½`` (eqs. C.7, C.11).

**Bound (eqs. C.14–C.17).** ``Γ_ii = B_ii = Σ_k λ_k U_ik² ≤ λ_2 (1 − U_i1²) = λ_2 (1 − p_i)``, so for every state i

    log p_i ≥ log max[0, 1 − Γ_ii / λ_2] = log max[0, 1 − outflow_i / |λ_2|]                      (C.17)

and, read the other way, ``λ_2 ≥ Γ_ii / (1 − p_i) ≥ Γ_ii / (1 − p̄_i)`` for any upper bound ``p̄_i ≥ p_i`` (C.21–C.25).
The thesis writes C.17 with ``(∂p_i^(0)/∂t) / p_i^(0)`` in place of ``Γ_ii``, equal under its assumption that no data
state flows into another (C.12); stated with ``Γ_ii`` the bound needs no assumption on the data. It is informative only
for a state whose outflow is below ``|λ_2|``, which takes a large ``p_i`` (the bound never exceeds ``p_i``); for a
two-state system it is an equality. (§2.3 calls it an *upper* bound on the log-likelihood; appendix C derives, and this
module implements, a lower bound.)

**Score matching limit (appendix D).** Connecting each x to every ``y = x + α`` in the cube ``C_ε = [−ε/2, ε/2]^M`` (g = 1
there) gives, with the exponent of eq. 2.13,

    K_ε = (1/N) Σ_{x ∈ D} ∫_{C_ε} d^Mα exp(½ [E(x) − E(x + α)])                                   (D.2)

and a Taylor expansion to second order in α (odd moments vanish on the cube, ``∫ α_i α_j = δ_ij ε^{M+2}/12``) gives
``K_ε = ε^M [1 + (ε²/48) K_SM + O(ε⁴)]`` with ``K_SM = (1/N) Σ_x [½ |∇E(x)|² − ∇²E(x)]`` (eqs. D.4–D.6), so

    48 (K_ε / ε^M − 1) / ε² = K_SM + O(ε²).

The thesis's D.1 writes the exponent as ``E(y) − E(x)`` (no ½, opposite sign) but expands the eq. 2.13 form in D.3; D.4
pairs the volume ε^M of the side-ε cube with the second moment ``(2/3) ε^{M+2}``, that of ``[−ε, ε]`` in one dimension
(the side-ε cube's is ``ε^{M+2}/12``), and writes ``[Σ_i ∇_i E]²`` for ``Σ_i (∇_i E)²`` (the cross terms vanish by
symmetry). None of these changes the limit "up to a constant offset and scaling factor"; the constants above are those
of the side-ε cube.
"""

from __future__ import annotations

import torch

from pfzoo.validation import check_finite_number, check_positive_int

_MAX_QUADRATURE_POINTS = 10**7  # energy evaluations of one cube_mpf_excess call: ~1 GB of float64 states at M = 10


def _check_square(connectivity: torch.Tensor, num_states: int) -> None:
    if not isinstance(connectivity, torch.Tensor) or connectivity.shape != (num_states, num_states):
        shape = tuple(connectivity.shape) if isinstance(connectivity, torch.Tensor) else type(connectivity).__name__
        raise ValueError(f"connectivity must be a [{num_states}, {num_states}] tensor (one row and column per state), got {shape}")
    if not (torch.isfinite(connectivity).all() and (connectivity >= 0).all()):
        raise ValueError("connectivity must be finite and non-negative (g_ij ≥ 0, eq. 2.19)")
    if not torch.equal(connectivity > 0, connectivity.T > 0):
        raise ValueError("connectivity must connect both ways: g_ij > 0 exactly when g_ji > 0 (§2.8)")


def _check_energies(energies: torch.Tensor) -> None:
    if not isinstance(energies, torch.Tensor) or energies.dim() != 1 or energies.numel() < 2:
        raise ValueError(f"energies must be a 1-D tensor with one entry per state (at least 2), got {energies!r}")
    if not torch.isfinite(energies).all():
        raise ValueError("energies contains NaN or infinite values")


def flow_matrix(energies: torch.Tensor, connectivity: torch.Tensor) -> torch.Tensor:
    """The transition-rate matrix ``Γ [S, S]`` of eq. 2.20 for ``energies [S]`` and ``connectivity [S, S]`` (``g_ij``: from
    state j to state i; its diagonal is ignored): ``Γ_ij = (g_ij g_ji)^½ exp(½ [E_j − E_i])`` for ``i ≠ j`` and columns
    that sum to zero. A symmetric 0/1 ``g`` gives eq. 2.6. Float64, differentiable in ``energies``."""
    _check_energies(energies)
    _check_square(connectivity, energies.shape[0])
    energies = energies.double()
    off_diagonal = 1 - torch.eye(energies.shape[0], dtype=torch.float64, device=energies.device)
    # (g_ij g_ji)^½ = g_ij (g_ji / g_ij)^½ (eq. 2.20) without dividing by the zeros of unconnected pairs
    symmetric = (connectivity.double() * connectivity.double().T).sqrt() * off_diagonal
    rates = symmetric * torch.exp(0.5 * (energies.unsqueeze(0) - energies.unsqueeze(1)))
    return rates - torch.diag_embed(rates.sum(0))


def flow_eigenvalues(energies: torch.Tensor, connectivity: torch.Tensor) -> torch.Tensor:
    """The eigenvalues of Γ (eq. 2.20) in decreasing order, ``[S]`` float64: those of the symmetric ``B = V⁻¹ Γ V``,
    ``V = diag(exp(−½ E))`` (eqs. C.1–C.4), which has ``(g_ij g_ji)^½`` off the diagonal and ``Γ_ii`` on it, so a
    symmetric eigensolver applies. The first is 0 up to rounding; the second is λ_2 of appendix C."""
    rates = flow_matrix(energies, connectivity)
    symmetric = (connectivity.double() * connectivity.double().T).sqrt()
    symmetric = symmetric - torch.diag_embed(symmetric.diagonal()) + torch.diag_embed(rates.diagonal())
    return torch.linalg.eigvalsh(symmetric).flip(0)


def _check_outflow(outflow: torch.Tensor) -> None:
    if not isinstance(outflow, torch.Tensor) or not (torch.isfinite(outflow).all() and (outflow >= 0).all()):
        raise ValueError(f"outflow must be a tensor of finite, non-negative rates (−Γ_ii), got {outflow!r}")


def log_probability_lower_bound(outflow: torch.Tensor, second_eigenvalue: torch.Tensor | float) -> torch.Tensor:
    """The lower bound of eq. C.17 on ``log p_i``: ``log max[0, 1 − Γ_ii / λ_2]`` with ``Γ_ii = −outflow_i``.

    Args:
        outflow: ``[B]``, the rate at which probability leaves each state, ``−Γ_ii = Σ_{j ≠ i} Γ_ji`` (for bit-flip
            connectivity ``BitFlipMPF().log_flows(model, x).exp()``).
        second_eigenvalue: λ_2 < 0 of the same Γ (:func:`flow_eigenvalues`), or any number between λ_2 and 0 (C.15 holds
            for it too, so the bound stays valid; it only loosens).

    Returns ``[B]`` float64; ``-inf`` where the bound is vacuous (``outflow_i ≥ |λ_2|``).
    """
    _check_outflow(outflow)
    second = torch.as_tensor(second_eigenvalue, dtype=torch.float64, device=outflow.device)
    if not (torch.isfinite(second) and second < 0):
        raise ValueError(f"second_eigenvalue must be a finite negative number (λ_2 < 0 of an ergodic Γ), got {second_eigenvalue}")
    # log(1 − outflow/|λ_2|) by log1p: accurate when the outflow is much smaller than the gap
    return torch.log1p(-(outflow.double() / -second).clamp(max=1.0))


def second_eigenvalue_lower_bound(outflow: torch.Tensor, probability_upper_bound: torch.Tensor) -> torch.Tensor:
    """The lower bound of eq. C.25 on λ_2: ``max_i [−outflow_i / (1 − p̄_i)]`` (float64 scalar) over states with
    ``outflow [B]`` (``−Γ_ii``) and upper bounds ``probability_upper_bound [B]`` on their probabilities, each in [0, 1)."""
    _check_outflow(outflow)
    upper = probability_upper_bound
    if not isinstance(upper, torch.Tensor) or upper.shape != outflow.shape or not ((upper >= 0) & (upper < 1)).all():
        raise ValueError(f"probability_upper_bound must be a tensor shaped like outflow {tuple(outflow.shape)} with entries in [0, 1)")
    return (-outflow.double() / (1 - upper.double())).max()


def gauss_legendre(num_nodes: int, *, device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Gauss–Legendre nodes on [−1, 1] and weights summing to 1, ``([n], [n])`` float64, by the Golub–Welsch
    eigenproblem; exact for polynomials of degree ≤ 2n − 1."""
    num_nodes = check_positive_int(num_nodes, "num_nodes")
    k = torch.arange(1, num_nodes, dtype=torch.float64, device=device)
    off = k / torch.sqrt(4 * k * k - 1)
    nodes, vectors = torch.linalg.eigh(torch.diag_embed(off, 1) + torch.diag_embed(off, -1))
    return nodes, vectors[0].square()


def cube_mpf_excess(model, data: torch.Tensor, side: float, *, num_nodes: int = 8) -> torch.Tensor:
    """``K_ε / ε^M − 1`` for the cube connectivity of appendix D (eq. D.2 with eq. 2.13's exponent; module docstring)
    over ``data [N, M]``, ``ε = side``: ``(1/N) Σ_x ∫_{C_ε} exp(½ [E(x) − E(x + α)]) d^Mα / ε^M − 1``, float64 scalar,
    differentiable in the model's parameters. ``48 · excess / ε² → K_SM`` as ε → 0 (the error is O(ε²)).

    The integral is a tensor product of ``num_nodes``-point Gauss–Legendre rules (``num_nodes^M`` energy evaluations per
    example), deterministic and, for a smooth energy and small ε, exact to rounding; it is summed as ``expm1`` so the
    O(ε²) excess keeps its digits. ``model`` needs ``free_energy(x [B, M]) -> [B]`` over real vectors (the energy of a
    fully visible model).
    """
    side = check_finite_number(side, "side", minimum=0.0, exclusive=True)
    model.check_visible(data, "data")
    dim = data.shape[1]
    if check_positive_int(num_nodes, "num_nodes") ** dim * data.shape[0] > _MAX_QUADRATURE_POINTS:
        raise ValueError(f"num_nodes^M × N = {num_nodes}^{dim} × {data.shape[0]} quadrature points exceed {_MAX_QUADRATURE_POINTS}; "
                         "use fewer nodes, examples or dimensions (the cube rule is for small M)")
    nodes, weights = gauss_legendre(num_nodes, device=data.device)
    grids = torch.meshgrid(*([nodes] * dim), indexing="ij")
    offsets = (0.5 * side) * torch.stack([grid.reshape(-1) for grid in grids], 1)  # α [Q, M] in the cube
    weight_grids = torch.meshgrid(*([weights] * dim), indexing="ij")
    point_weights = torch.stack([grid.reshape(-1) for grid in weight_grids], 1).prod(1)  # [Q], sums to 1
    moved = (data.unsqueeze(1) + offsets.to(data.dtype)).reshape(-1, dim)
    gaps = model.free_energy(data).double().unsqueeze(1) - model.free_energy(moved).double().reshape(data.shape[0], -1)
    return (torch.expm1(0.5 * gaps) @ point_weights).mean()


def cube_mpf_score_matching_limit(model, data: torch.Tensor, side: float, *, num_nodes: int = 8) -> torch.Tensor:
    """``48 (K_ε / ε^M − 1) / ε²`` (float64 scalar): appendix D's cube MPF objective with its constant offset and
    scale removed, which tends to the score matching objective ``K_SM`` (eq. D.5) as the side ε → 0, with an O(ε²)
    error. See :func:`cube_mpf_excess` for the arguments."""
    return 48.0 * cube_mpf_excess(model, data, side, num_nodes=num_nodes) / (side * side)


__all__ = [
    "cube_mpf_excess",
    "cube_mpf_score_matching_limit",
    "flow_eigenvalues",
    "flow_matrix",
    "gauss_legendre",
    "log_probability_lower_bound",
    "second_eigenvalue_lower_bound",
]
