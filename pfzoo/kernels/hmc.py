"""Hamiltonian Monte Carlo: leapfrog integration, partial momentum refresh, Metropolis accept/reject,
standard or reduced momentum flips, and reflection at lower bounds.

Every kernel follows one contract (:mod:`pfzoo.kernels.base`). For the
position-space kernels (HMC here, :mod:`pfzoo.kernels.metropolis`) the target is a
:class:`PositionTarget`: ``statistics(x)`` evaluates whatever per-state quantities give the energy at
any β (one energy-and-gradient evaluation), ``evaluation(stats, beta)`` turns them into the energy and
gradient of ``E_β``. The state carries the statistics of its positions, so each leapfrog step costs
exactly one evaluation and a change of β none. Hamiltonian ``H(x, p) = E_β(x) + ½|p|²`` with unit mass.
"""

from __future__ import annotations

import copy
import math
from typing import Any, NamedTuple, Protocol

import torch

from pfzoo.hamiltonian import Evaluation, acceptance, hamiltonian, leapfrog
from pfzoo.kernels.base import ENERGY_AND_GRADIENT, REAL_ENERGY_VALUES, TEMPERED_LOG_DENSITY, select_chains
from pfzoo.sampling import normal, uniform
from pfzoo.validation import check_positive_int, check_step_size


class PositionTarget(Protocol):
    """What a position-space kernel needs of the distribution ``p_β(x) ∝ exp(−E_β(x))`` it leaves invariant."""

    def statistics(self, x: torch.Tensor) -> Any:
        """Per-state quantities of positions ``x [N, D]`` from which the energy at any β follows."""

    def evaluation(self, stats: Any, beta: float) -> Evaluation:
        """Energy ``E_β [N]`` and gradient ``∇_x E_β [N, D]`` from ``stats``, with ``extras = stats``."""


class HMCState(NamedTuple):
    """position ``[N, D]``, momentum ``[N, D]`` and the target's statistics of the positions."""

    position: torch.Tensor
    momentum: torch.Tensor
    stats: Any


class HMCInfo(NamedTuple):
    """accept_prob ``[N]`` of the leapfrog proposal; accepted and flipped ``[N]`` booleans; the step size used at this β."""

    accept_prob: torch.Tensor
    accepted: torch.Tensor
    flipped: torch.Tensor
    step_size: float | torch.Tensor


def hais_momentum_refresh(step_size: float) -> float:
    """HAIS's refresh fraction ``γ = 1 − 0.5^ε``: half the momentum power is replaced per unit time (HAIS §2.3)."""
    return 1.0 - 0.5**step_size


class HMCNoise(NamedTuple):
    """The draws of one :class:`HMCKernel` transition, made before it (:meth:`HMCKernel.draw_noise`): momentum_noise
    ``[N, D]``, the refresh's standard normals; uniform ``[N]`` float64, the accept/reject uniforms."""

    momentum_noise: torch.Tensor
    uniform: torch.Tensor


def refresh_momentum(momentum: torch.Tensor, refresh: float | torch.Tensor, *, generator: torch.Generator | None = None,
                     noise: torch.Tensor | None = None) -> torch.Tensor:
    """Partial refresh ``p ← √(1−γ) p + √γ n``, ``n ~ N(0, I)`` (Horowitz 1991; HAIS eq. 22); γ = ``refresh`` ∈ (0, 1], a
    number or a 0-dim tensor on the momenta's device (then never read back to the host); ``noise`` the ``n`` drawn
    beforehand (else drawn here from ``generator``)."""
    if noise is None:
        noise = normal(momentum.shape, generator=generator, device=momentum.device, dtype=momentum.dtype)
    if isinstance(refresh, torch.Tensor):
        return torch.sqrt(1.0 - refresh) * momentum + torch.sqrt(refresh) * noise
    if refresh == 1.0:
        return noise
    return math.sqrt(1.0 - refresh) * momentum + math.sqrt(refresh) * noise


class HMCKernel:
    """HMC transition: partial momentum refresh, L leapfrog steps, Metropolis accept/reject, momentum flip on reject.

    The kernel holds settings only; :meth:`step` takes ``step_size`` per call too (a number, or a 0-dim tensor adapted
    on the device between calls by :func:`pfzoo.kernels.adaptation.adaptive_chain`), so one kernel serves every
    transition of a run.

    Args:
        step_size: leapfrog step ε: a number, or a 0-dim floating-point tensor on the chains' device, whose value the
            host then never reads (it is not checked).
        num_leapfrog: leapfrog steps per transition (HAIS uses 1).
        momentum_refresh: γ ∈ (0, 1], the fraction of momentum power replaced before each
            transition; ``None`` = HAIS's ``1 − 0.5^ε``; 1 = full resampling (standard HMC).
        flip: ``"standard"`` — negate the momentum on every rejection; ``"reduced"`` — Sohl-Dickstein's
            reduced momentum flips (thesis eq. 6.11): on rejection flip only with probability
            ``max(0, P_leap(Fζ) − P_leap(ζ)) / (1 − P_leap(ζ))``, which keeps the same net probability
            exchange between ζ and Fζ; costs one more leapfrog trajectory per transition.
        lower: optional lower bounds (a number or ``[D]``) at which trajectories reflect, e.g. 0 for x ≥ 0.
        stiffness: s ≥ 0, for annealing: at inverse temperature β the kernel steps (:meth:`step_size_at`)
            ``ε_β = ε / √(1 + β s)``. Set s so that the largest curvature of ``E_β`` grows as ``1 + β s`` (e.g.
            s = λ_max(ΦᵀΦ) / σ_n² for a linear generative model's posterior over its latents). The leapfrog is
            stable while ε·√curvature < 2, so one ε then keeps the same stability margin at every β. An ε that
            is good for the prior would otherwise be rejected nearly always near β = 1. 0 (default) = one ε
            everywhere.
    """

    needs = ENERGY_AND_GRADIENT

    def __init__(
        self,
        step_size: float | torch.Tensor,
        *,
        num_leapfrog: int = 1,
        momentum_refresh: float | None = None,
        flip: str = "standard",
        lower: float | list[float] | torch.Tensor | None = None,
        stiffness: float = 0.0,
    ) -> None:
        step_size = check_step_size(step_size)
        if not (isinstance(stiffness, (int, float)) and math.isfinite(stiffness) and stiffness >= 0):
            raise ValueError(f"stiffness must be a finite number >= 0, got {stiffness!r}")
        if momentum_refresh is not None and not 0.0 < float(momentum_refresh) <= 1.0:
            raise ValueError(f"momentum_refresh must lie in (0, 1] or be None (HAIS's 1 − 0.5^ε), got {momentum_refresh}")
        self.step_size = step_size
        self.stiffness = float(stiffness)
        self.momentum_refresh = None if momentum_refresh is None else float(momentum_refresh)
        self.num_leapfrog = check_positive_int(num_leapfrog, "num_leapfrog")
        if flip not in ("standard", "reduced"):
            raise ValueError(f"flip must be 'standard' or 'reduced', got {flip!r}")
        self.flip = flip
        self.lower = None if lower is None else torch.as_tensor(lower, dtype=torch.float64)

    def step_size_at(self, beta: float, step_size: float | torch.Tensor | None = None) -> float | torch.Tensor:
        """The leapfrog step at inverse temperature ``beta``: ``ε / √(1 + β s)`` with ε = ``step_size`` or the kernel's."""
        step_size = self.step_size if step_size is None else step_size
        if self.stiffness == 0.0:
            return step_size
        return step_size / math.sqrt(1.0 + beta * self.stiffness)

    def refresh_at(self, step_size: float | torch.Tensor) -> float | torch.Tensor:
        """γ for a transition of step ``step_size``: the setting, or HAIS's ``1 − 0.5^ε`` following the step."""
        return hais_momentum_refresh(step_size) if self.momentum_refresh is None else self.momentum_refresh

    def reflecting_at(self, lower: float | list[float] | torch.Tensor) -> HMCKernel:
        """The same kernel (a shallow copy) with trajectories reflecting at ``lower`` (a number or ``[D]``)."""
        kernel = copy.copy(self)
        kernel.lower = torch.as_tensor(lower, dtype=torch.float64)
        return kernel

    def init(self, position: torch.Tensor, target: PositionTarget, *, generator: torch.Generator | None = None,
             momentum: torch.Tensor | None = None) -> HMCState:
        """Chains at ``position [N, D]`` with the target's statistics and ``momentum [N, D]``, by default drawn from
        N(0, I). A kernel with full refresh (γ = 1) replaces the momenta at its first step, so its callers pass zeros
        and spend no draws."""
        if momentum is None:
            momentum = normal(position.shape, generator=generator, device=position.device, dtype=position.dtype)
        return HMCState(position, momentum, target.statistics(position))

    def draw_noise(self, state: HMCState, *, generator: torch.Generator | None = None) -> HMCNoise:
        """The draws :meth:`step` makes from ``generator``, in its order: the refresh's normals like the momenta, then the
        accept/reject uniforms ``[N]`` float64. Drawn eagerly before a compiled step and passed to it as ``noise``, they
        keep the draws (host-side streams, explicit generators) out of the graph with the numbers of an eager step."""
        momentum = state.momentum
        return HMCNoise(normal(momentum.shape, generator=generator, device=momentum.device, dtype=momentum.dtype),
                        uniform(momentum.shape[:1], generator=generator, device=momentum.device, dtype=torch.float64))

    def step(
        self, state: HMCState, target: PositionTarget, *, beta: float = 1.0, generator: torch.Generator | None = None,
        step_size: float | torch.Tensor | None = None, noise: HMCNoise | None = None,
    ) -> tuple[HMCState, HMCInfo]:
        """One transition leaving ``p(x, p) ∝ exp(−E_β(x) − ½|p|²)`` invariant → ``(state, info)``; ``step_size``
        replaces the kernel's ε for this call (a number or a 0-dim tensor on the chains' device); ``noise``: the step's
        draws made beforehand (:meth:`draw_noise`), else drawn here from ``generator``, the same numbers."""
        noise = self.draw_noise(state, generator=generator) if noise is None else noise
        step_size = self.step_size_at(beta, step_size)
        momentum = refresh_momentum(state.momentum, self.refresh_at(step_size), noise=noise.momentum_noise)
        lower = None if self.lower is None else self.lower.to(device=state.position.device, dtype=state.position.dtype, non_blocking=True)  # no stall
        current = target.evaluation(state.stats, beta)
        evaluate = lambda x: target.evaluation(target.statistics(x), beta)  # noqa: E731
        integrate = lambda p: leapfrog(  # noqa: E731
            state.position, p, current, evaluate, step_size=step_size, num_steps=self.num_leapfrog, lower=lower
        )
        proposal, proposal_momentum, proposal_eval = integrate(momentum)
        start = hamiltonian(current, momentum)
        accept_prob = acceptance(start, hamiltonian(proposal_eval, proposal_momentum))
        draw = noise.uniform
        accepted = draw < accept_prob
        if self.flip == "standard":
            flipped = ~accepted
        else:
            _, reverse_momentum, reverse_eval = integrate(-momentum)
            reverse_prob = acceptance(start, hamiltonian(reverse_eval, reverse_momentum))
            flip_prob = torch.clamp(reverse_prob - accept_prob, min=0.0)
            flipped = ~accepted & (draw < accept_prob + flip_prob)
        new_momentum = torch.where(flipped[:, None], -momentum, momentum)
        new_state = HMCState(
            select_chains(accepted, proposal, state.position),
            select_chains(accepted, proposal_momentum, new_momentum),
            select_chains(accepted, proposal_eval.extras, state.stats),
        )
        return new_state, HMCInfo(accept_prob, accepted, flipped, step_size)


class EnergyTarget:
    """A model's own density tempered by β, ``E_β = β E``, as a :class:`PositionTarget`; statistics ``(E [N], ∇E [N, D])``.

    ``model`` offers ``energy_and_grad(x) -> (energy [N], grad [N, D])`` and ``energy(x) -> [N]`` (every continuous model
    does). Its statistics do not depend on β, and it offers ``log f_β = −β E`` (:meth:`log_density`), so
    :class:`~pfzoo.kernels.ParallelTempering` runs HMC or Metropolis replicas on it (one replica at a time: its
    evaluation takes β as a number).
    """

    offers = frozenset({ENERGY_AND_GRADIENT, REAL_ENERGY_VALUES, TEMPERED_LOG_DENSITY})

    def __init__(self, model) -> None:
        self.model = model

    def log_density(self, x: torch.Tensor, *, beta: float | torch.Tensor) -> torch.Tensor:
        """``log f_β(x) = −β E(x)`` of ``x [N, D]``: float64 ``[N]`` for β a number, ``[N, K]`` for β an ``[N, K]`` tensor."""
        energy = self.model.energy(x).double()
        return -beta * (energy[:, None] if torch.is_tensor(beta) else energy)

    def statistics(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.energy_and_grad(x)

    def evaluation(self, stats: tuple[torch.Tensor, torch.Tensor], beta: float) -> Evaluation:
        energy, grad = stats
        return Evaluation(beta * energy, beta * grad, stats)
