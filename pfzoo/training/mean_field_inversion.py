"""Mean-field inversion: an Ising model fitted in closed form from the data's means and covariances (nMF and TAP).

The thesis's Table 3.1 row "MFT+TAP" (Sohl-Dickstein 2012, ch. 3; it reports the method failing on the cold 10×10 glass).
Stated for ±1 spins ``s = 2x - 1`` with ``p(s) ∝ exp(Σ_{i<j} K_ij s_i s_j + h·s)``, magnetisations ``m = ⟨s⟩`` and
connected correlations ``C = ⟨s sᵀ⟩ - m mᵀ``. Linear response relates ``C⁻¹`` to the couplings:

- naive mean field (nMF; Kappen & Rodríguez 1998, eq. 13): ``(C⁻¹)_ij = -K_ij`` for ``i ≠ j``, the biases from the
  mean-field equations ``m_i = tanh(h_i + Σ_j K_ij m_j)``;
- TAP (Kappen & Rodríguez 1998, eq. 17; Tanaka 1998): ``(C⁻¹)_ij = -K_ij - 2 K_ij² m_i m_j``, solved pair by pair for
  the root that tends to nMF's as ``K → 0``, ``K_ij = -2 (C⁻¹)_ij / (1 + √(1 - 8 (C⁻¹)_ij m_i m_j))`` (the quadratic
  formula rationalised, finite at ``m_i m_j = 0``); the biases from the TAP equations
  ``m_i = tanh(h_i + Σ_j K_ij m_j - m_i Σ_j K_ij² (1 - m_j²))``.

Both are expansions in small couplings: nMF is exact to first order in K, TAP to second, so on a weakly coupled model
TAP's error is the smaller. TAP's term is second order in the magnetisations too: at zero field (``m = 0``) TAP is nMF.
Where ``1 - 8 (C⁻¹)_ij m_i m_j < 0`` the TAP equation has no real root: the fit refuses.
The result is converted to 0/1 units by :meth:`Ising.from_spins <pfzoo.models.Ising.from_spins>`.

This is a closed-form fit from data moments, not an objective to descend: it sits in ``training`` (a way to fit a model
from data, beside the Hopfield storage rules) as plain functions, with no :class:`~pfzoo.training.Objective` or trainer
config, since there is no loss whose gradient it follows.
"""

from __future__ import annotations

import torch

from pfzoo.models.ising import Ising
from pfzoo.validation import check_binary, check_choice

CORRECTIONS = ("naive", "tap")


def mean_field_ising(mean: torch.Tensor, covariance: torch.Tensor, *, correction: str = "tap") -> Ising:
    """The Ising model that mean-field inversion assigns to 0/1 moments: ``mean [D]`` (``⟨x⟩``, strictly inside (0, 1))
    and ``covariance [D, D]`` (``⟨x xᵀ⟩ - ⟨x⟩⟨x⟩ᵀ``, positive definite); ``correction`` ``"naive"`` (nMF) or ``"tap"``
    (module docstring). Computed in float64; the model has ``mean``'s dtype.

    In spins ``m = 2⟨x⟩ - 1`` and ``C = 4 cov(x)``. Raises ``ValueError`` when a unit is constant, the covariance is not
    invertible, or (TAP) a pair's quadratic has no real root.
    """
    check_choice(correction, "correction", CORRECTIONS)
    if mean.dim() != 1 or covariance.shape != (mean.shape[0], mean.shape[0]):
        raise ValueError(f"mean must be [D] and covariance [D, D], got shapes {tuple(mean.shape)} and {tuple(covariance.shape)}")
    magnetisation = 2 * mean.double() - 1
    if not bool(((magnetisation > -1) & (magnetisation < 1)).all()):
        raise ValueError("mean must lie strictly between 0 and 1 for every unit (a constant unit has no mean-field coupling)")
    spin_covariance = 4 * covariance.double()
    eigenvalues = torch.linalg.eigvalsh(spin_covariance)
    # singular to float64 precision, e.g. two units always equal (or opposite) in the data: C⁻¹ would be rounding noise
    if not bool(eigenvalues[0] > eigenvalues[-1] * mean.shape[0] * torch.finfo(torch.float64).eps):
        raise ValueError("covariance must be invertible (mean-field inversion needs C⁻¹; is a unit a copy of another "
                         f"in the data?), its eigenvalues span {eigenvalues[0].item():.2e} to {eigenvalues[-1].item():.2e}")
    precision = torch.linalg.inv(spin_covariance)
    precision.fill_diagonal_(0)  # only the off-diagonal entries of C⁻¹ fix couplings
    outer = magnetisation[:, None] * magnetisation[None, :]  # m_i m_j
    if correction == "naive":
        coupling = -precision
        field = torch.atanh(magnetisation) - coupling @ magnetisation
    else:
        discriminant = 1 - 8 * precision * outer
        if bool((discriminant < 0).any()):
            pairs = int((discriminant < 0).sum()) // 2
            raise ValueError(f"TAP: (C⁻¹)_ij = -K_ij - 2 K_ij² m_i m_j has no real root for {pairs} of "
                             f"{mean.shape[0] * (mean.shape[0] - 1) // 2} pairs (correlations too strong for the expansion)")
        coupling = -2 * precision / (1 + discriminant.sqrt())
        field = torch.atanh(magnetisation) - coupling @ magnetisation + magnetisation * ((coupling**2) @ (1 - magnetisation**2))
    coupling = (coupling + coupling.T) / 2  # C⁻¹ is symmetric only to rounding
    return Ising.from_spins(coupling, field).to(mean.dtype)


def fit_mean_field(data: torch.Tensor, *, correction: str = "tap") -> Ising:
    """:func:`mean_field_ising` of the sample moments of ``data [N, D]`` (0/1): the maximum-likelihood covariance
    (divided by N), as the moments a model matches."""
    check_binary(data, "data")
    if data.dim() != 2:
        raise ValueError(f"data must be [N, D], got shape {tuple(data.shape)}")
    x = data.double()
    mean = x.mean(0)
    centred = x - mean
    return mean_field_ising(mean, centred.T @ centred / x.shape[0], correction=correction).to(data.dtype)
