"""Persistent minimum probability flow (MPF), with connectivity sampled by HMC (continuous models) or block Gibbs (binary).

Sohl-Dickstein's thesis §2.9 (eqs. 2.25–2.26); Sohl-Dickstein, Battaglino & DeWeese 2011, "persistent
MPF". MPF minimises the probability that flows, in an infinitesimal time, out of the data states
under a dynamics Γ whose equilibrium is the model: ``K = Σ_{j ∈ D} Σ_{i ∉ D} Γ_ij p_j^(0)``. In a
continuous space the connectivity is sampled: take a transition density ``g(x'|x)`` that satisfies
detailed balance with respect to a *fixed* reference model ``p(x; θ_old)``,
``g(x'|x) p(x; θ_old) = g(x|x') p(x'; θ_old)``. Then the rates

    Γ(x' ← x) = g(x'|x) exp( ½ [E(x; θ) − E(x'; θ)] − ½ [E(x; θ_old) − E(x'; θ_old)] )

satisfy detailed balance with respect to ``p(x; θ)`` for every θ (the θ_old terms cancel the
asymmetry of g), and one connected state ``x'_n ~ g(·|x_n)`` per data point ``x_n`` gives the
Monte Carlo objective

    K(θ) = (1/N) Σ_n exp( ½ [E(x_n; θ) − E(x'_n; θ)] − ½ [E(x_n; θ_old) − E(x'_n; θ_old)] ).

Consistency: ``K(θ_old) = 1`` and ``∇K(θ_old) = (1/2N) Σ_n [∇_θ E(x_n; θ) − ∇_θ E(x'_n; θ)]``. When the
data come from ``p(x; θ_old)`` so do the ``x'_n`` (g leaves ``p(x; θ_old)`` invariant), so this
gradient vanishes in expectation: the model that generated the data is a stationary point. The
expected Hessian there is ``¼ E[∇_θ Δ ∇_θ Δᵀ]`` with ``Δ = E(x; θ) − E(x'; θ)``, positive semidefinite
(the ``½ E[∇²_θ Δ]`` term vanishes for the same reason). When the ``x'_n`` are draws from
``p(x; θ_old)`` itself (the independence connectivity ``g(x'|x) = p(x'; θ_old)``, which satisfies
detailed balance trivially), ``∇K(θ_old)`` is minus half the log-likelihood gradient,
``½ (⟨∇_θ E⟩_data − ⟨∇_θ E⟩_model)``, so the fixed point of refreshing θ_old ← θ is the
maximum-likelihood fit even when the model family does not contain the data distribution.

Relation to the thesis's eq. 2.25. §2.9.4 takes a connectivity ``g_i = p(x_i; θ_old)`` that does not depend on the
source state (eq. 2.22), which factors the objective into a product of two separate averages, over the data and over
the samples ``S`` (all ``N·|S|`` pairs):

    K^n(θ) = ( (1/N) Σ_{x ∈ D} exp(½ [E(x; θ) − E(x; θ_old)]) ) · ( (1/|S|) Σ_{x ∈ S} exp(−½ [E(x; θ) − E(x; θ_old)]) ).   (2.25)

:class:`PersistentMPF` by default minimises a variant: the mean over the N pairs ``(x_n, x'_n)`` of the product of the
two terms (the K above), which is eq. 2.21 sampled with one connected state per data point from a connectivity
``g(x'|x)`` reversible under ``p(x; θ_old)`` (its ``(g_ji/g_ij)^½`` is the θ_old term). The two agree at θ = θ_old
(both 1, with the gradient of eq. 2.26) and have the same expectation, eq. 2.24 summed over every state, when the
``x'_n`` are independent exact draws from ``p(x; θ_old)``; they differ away from θ_old (so in the steps an optimiser takes
between refreshes), and while the particles are still k moves of one reversible kernel T from the data (the first
refresh) only the paired form is a flow objective: in expectation eq. 2.21 with ``g = T^k``, plus the θ-independent mass
``T^k(x_n|x_n)`` of particles that stay at their data point, outside eq. 2.20's ``i ≠ j``. ``factored=True`` minimises ``log`` of eq. 2.25 as written. Two
more departures from §2.9.4: the particles start at the data rather than at draws from a Gaussian (its step 2), and the
loss is ``log K`` (same minimiser).
"""

from __future__ import annotations

import logging
import math

import torch

from pfzoo import distributed
from pfzoo.kernels import HMCKernel, adaptive_chain, run_chain
from pfzoo.models.capabilities import Capability, require
from pfzoo.training.objective import Objective
from pfzoo.validation import check_bool, check_finite_number, check_generator, check_positive_int, checking_values

logger = logging.getLogger(__name__)


def reversible_gibbs(model, start: torch.Tensor, num_sweeps: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """``num_sweeps`` reversible Gibbs steps of binary chains ``start [N, V]`` under ``model`` → ``[N, V]``: the
    model's own reversible visible chain (``model.gibbs_chain(reversible=True)``: ``v → h → v`` for RBMs, the
    palindromic scan ``B_1 … B_m … B_1`` for Ising models)."""
    kernel, target = model.gibbs_chain(reversible=True)
    return run_chain(kernel, target, start, num_sweeps, generator=generator)[0].position


class PersistentMPF(Objective):
    """Persistent MPF: minimise ``log K(θ)`` (module docstring) with θ_old and the connected states held
    fixed, then set ``θ_old ← θ``, advance the connected states under the new θ_old, and repeat.

    The connected states are persistent HMC particles, one per training example (``x'_n`` is particle
    ``n``), as in persistent contrastive divergence: they start at the data and, at every refresh of
    θ_old, advance ``num_hmc_steps`` HMC transitions under ``p(x; θ_old)``, each with a fully resampled
    momentum, ``num_leapfrog`` leapfrog steps and a Metropolis accept/reject. Every transition leaves
    ``p(x; θ_old)`` invariant and is reversible in x, so the first refresh is the connectivity
    "``num_hmc_steps`` HMC transitions from the data point", and once the particles have mixed they are
    draws from ``p(x; θ_old)``, the independence connectivity, whose fixed point is maximum likelihood.
    Restarting the particles at the data at every refresh (a CD-like connectivity) makes the fit
    wander far from maximum likelihood on natural image patches, hence the persistence.

    Binary models (RBM, Ising, Hopfield) take ``num_gibbs_sweeps`` block-Gibbs sweeps under θ_old instead:
    an RBM's ``v → h → v`` sweep is reversible in v, and an Ising model sweeps its independent sets in the
    palindromic order ``B_1 … B_m … B_1``, which is reversible too; E is then the free energy F (hidden units
    summed out), as in the thesis's persistent MPF for RBMs.

    The step size ε adapts after every transition, ``ε ← ε exp(ā − target_acceptance)`` with ā the
    acceptance probability averaged over all N particles, so HMC keeps moving as the model sharpens
    (a product of Student-t experts on patches does). ā pools N chains, so each transition is, to
    within that shared statistic, a fixed kernel that leaves ``p(x; θ_old)`` invariant.

    The loss (by default; ``factored`` gives eq. 2.25's, module docstring) is ``log K(θ) = log (1/B) Σ_n exp(a_n)``,
    ``a_n = ½ [E(x_n; θ) − E(x'_n; θ)] − ½ [E(x_n; θ_old) − E(x'_n; θ_old)]``, computed with ``logsumexp``: it has the same minimiser as K and, at θ = θ_old where
    ``K = 1``, the same gradient, and unlike K it cannot overflow when a line search tries a long step.
    At the start of each refresh θ = θ_old, so the loss is 0 exactly: the loss an L-BFGS Trainer logs
    (its first evaluation) is 0, and progress shows in an estimator's test log-likelihood instead.

    :meth:`prepare` refreshes θ_old for the full data set; the :class:`~pfzoo.training.Trainer` calls it
    at the start of every epoch, and it refreshes on every ``resample_every``-th call (θ_old stays
    fixed in between). :meth:`loss` evaluates ``log K`` on any rows of that data set and draws
    nothing, so it is deterministic and ``torch.optim.LBFGS`` can call it many times per step.

    Buffers (in ``state_dict()``, so checkpoint / resume is exact): ``connected [N, M]`` (the particles
    ``x'_n``), ``reference_gap [N]`` (``E(x_n; θ_old) − E(x'_n; θ_old)``, all that K needs of θ_old),
    ``step_size`` (the adapted ε) and ``num_prepared`` (calls of :meth:`prepare` so far). Under a ``torch.distributed``
    process group each rank advances a contiguous share of the particles (its own stream and ε) and the shares are
    gathered. ``adaptation`` (not checkpointed) holds one (mean HMC acceptance probability, ε after it adapted) pair
    per HMC refresh of this rank, oldest first: what a report shows of the sampler.

    Args:
        num_hmc_steps: HMC transitions of the particles per refresh of θ_old (≥ 1).
        step_size: initial leapfrog step ε > 0. Laplace experts have a kink at 0 that costs O(ε) energy
            error per crossing, so ICA on whitened patches needs ε ≈ 0.05 for a high acceptance rate.
        num_leapfrog: leapfrog steps per HMC transition (≥ 1).
        resample_every: calls of :meth:`prepare` (Trainer epochs) between refreshes of θ_old (≥ 1).
        target_acceptance: mean acceptance probability ε adapts to, in (0, 1); ``None`` keeps ε fixed.
        num_gibbs_sweeps: block-Gibbs sweeps of the particles per refresh, for binary models (≥ 1).
        factored: minimise ``log`` of eq. 2.25 as written (module docstring), the product of the data average and the
            particle average, instead of the paired mean; adds the buffer ``reference_free_energies [N, 2]``
            (``E(x_n; θ_old)``, ``E(x'_n; θ_old)``).
    """

    lazy_buffers = ("connected", "reference_gap", "reference_free_energies")

    connected: torch.Tensor
    reference_gap: torch.Tensor
    num_prepared: torch.Tensor

    def __init__(
        self,
        num_hmc_steps: int = 5,
        step_size: float = 0.05,
        num_leapfrog: int = 10,
        resample_every: int = 1,
        target_acceptance: float | None = 0.8,
        num_gibbs_sweeps: int = 1,
        factored: bool = False,
    ) -> None:
        super().__init__()
        self.num_gibbs_sweeps = check_positive_int(num_gibbs_sweeps, "num_gibbs_sweeps")
        self.factored = check_bool(factored, "factored")
        self.num_hmc_steps = check_positive_int(num_hmc_steps, "num_hmc_steps")
        check_finite_number(step_size, "step_size", minimum=0.0, exclusive=True)
        self.num_leapfrog = check_positive_int(num_leapfrog, "num_leapfrog")
        self.resample_every = check_positive_int(resample_every, "resample_every")
        if target_acceptance is not None and not 0.0 < check_finite_number(target_acceptance, "target_acceptance") < 1.0:
            raise ValueError(f"target_acceptance must lie in (0, 1) or be None, got {target_acceptance}")
        self.target_acceptance = target_acceptance
        self.register_buffer("step_size", torch.tensor(float(step_size), dtype=torch.float64))
        self.register_buffer("connected", torch.empty(0))
        self.register_buffer("reference_gap", torch.empty(0))
        self.register_buffer("num_prepared", torch.zeros((), dtype=torch.long))
        if self.factored:  # only then, so the default's state_dict keeps its keys
            self.register_buffer("reference_free_energies", torch.empty(0))
        self.adaptation: list[tuple[float, float]] = []

    @torch.no_grad()
    def prepare(self, model, data: torch.Tensor, *, generator: torch.Generator | None = None) -> bool:
        """When due, take θ_old = the model's current parameters, advance the particles ``connected [N, M]``
        under it, and store ``reference_gap [N]`` for ``data [N, M]``; returns whether it did.

        Due on the first call, every ``resample_every``-th call after it, and whenever ``data`` has a
        different shape from the particles, which then restart at ``data``. A refresh makes ``log K`` a
        new function, so the Trainer then discards its optimiser's state (L-BFGS's curvature pairs).
        Continuous models need the unchecked ``energy_and_grad(x) -> (E [N], ∇_x E [N, M])`` that drives HMC;
        binary models the block-Gibbs draws of an RBM or an Ising model's ``gibbs_sweep``.
        """
        binary = model.binary_visible
        require(model, Capability.VISIBLE_GIBBS_CHAIN if binary else Capability.REAL_ENERGY, by="persistent MPF",
                alternatives=["trainer=mpf"])
        model.check_visible(data, "data")
        check_generator(generator, model.device)
        restart = self.connected.shape != data.shape
        due = restart or self.num_prepared.item() % self.resample_every == 0
        self.num_prepared += 1
        if not due:
            return False
        start = data if restart else self.connected
        # Under a process group each rank advances a contiguous share of the particles and the shares are gathered, so
        # the work is split and every rank holds every particle.
        share = distributed.owned_share(data.shape[0])
        mine = start[share.start : share.stop]
        if len(share):
            mine = reversible_gibbs(model, mine, self.num_gibbs_sweeps, generator=generator) if binary else self._advance_hmc(model, mine, generator)
        self.connected = distributed.gather_rows(mine) if distributed.is_active() else mine
        data_energy, connected_energy = model.free_energy(data), model.free_energy(self.connected)
        self.reference_gap = data_energy - connected_energy
        if self.factored:
            self.reference_free_energies = torch.stack([data_energy, connected_energy], 1)
        return True

    def _advance_hmc(self, model, start: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """``num_hmc_steps`` HMC transitions of the particles ``start [N, M]`` under the current model; adapts ε."""
        target = model.energy_target()
        kernel = HMCKernel(self.step_size, num_leapfrog=self.num_leapfrog, momentum_refresh=1.0)
        # ε adapts on the device: one read for the record and the log line, not one per step
        chain = adaptive_chain(kernel, target, kernel.init(start, target, momentum=torch.zeros_like(start)), self.num_hmc_steps,
                               step_size=self.step_size, target_acceptance=self.target_acceptance, generator=generator)
        self.step_size.copy_(chain.step_size)
        self.adaptation.append((chain.acceptance.item(), self.step_size.item()))
        logger.info(
            "persistent MPF: advanced %d particles under θ_old (mean HMC acceptance probability %.3f; step size now %.4g)",
            start.shape[0], *self.adaptation[-1],
        )
        return chain.state.position

    def loss(
        self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None, indices: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``log K(θ)`` (scalar, class docstring; with ``factored``, eq. 2.25 over the batch's rows and their particles) over
        ``batch [B, M]``, rows ``indices [B]`` of the data given to :meth:`prepare`.

        ``indices=None`` means the whole prepared data set in order (B = N). Draws nothing: the
        ``x'_n`` and θ_old terms are the stored buffers, and ``generator`` is accepted only for the
        Trainer's objective interface.
        """
        model.check_visible(batch, "batch")
        if self.connected.numel() == 0:
            raise ValueError("PersistentMPF has no connected states yet: call prepare(model, data, generator=...) first (the Trainer does)")
        num_prepared = self.connected.shape[0]
        if indices is None:
            if batch.shape[0] != num_prepared:
                raise ValueError(f"batch must hold all {num_prepared} prepared examples when indices is None, got shape {tuple(batch.shape)}")
            connected, reference_gap = self.connected, self.reference_gap
        else:
            if not isinstance(indices, torch.Tensor) or indices.dim() != 1 or indices.is_floating_point() or indices.dtype == torch.bool:
                raise ValueError(f"indices must be a 1-D integer tensor of row numbers, got {indices!r}")
            if indices.shape[0] != batch.shape[0]:
                raise ValueError(f"indices must have one entry per batch row ({batch.shape[0]}), got {indices.shape[0]}")
            if indices.numel() and checking_values() and (indices.min() < 0 or indices.max() >= num_prepared):
                raise ValueError(f"indices must lie in [0, {num_prepared}) (rows of the prepared data)")
            connected, reference_gap = self.connected[indices], self.reference_gap[indices]
        if self.factored:
            reference = self.reference_free_energies if indices is None else self.reference_free_energies[indices]
            log_n = math.log(batch.shape[0])
            data_average = torch.logsumexp(0.5 * (model.free_energy(batch) - reference[:, 0]), 0) - log_n
            particle_average = torch.logsumexp(-0.5 * (model.free_energy(connected) - reference[:, 1]), 0) - log_n
            return data_average + particle_average  # log of eq. 2.25's product
        exponents = 0.5 * (model.free_energy(batch) - model.free_energy(connected) - reference_gap)
        return torch.logsumexp(exponents, 0) - math.log(batch.shape[0])

    def extra_repr(self) -> str:
        return (
            f"num_hmc_steps={self.num_hmc_steps}, step_size={self.step_size.item():.4g}, num_leapfrog={self.num_leapfrog}, "
            f"resample_every={self.resample_every}, target_acceptance={self.target_acceptance}"
        ) + (", factored=True" if self.factored else "")
