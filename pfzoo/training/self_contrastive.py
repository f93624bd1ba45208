"""Self-contrastive estimation (Goodfellow 2014, "On distinguishability criteria for estimating generative models"):
noise-contrastive estimation whose noise is a frozen copy of the model itself, drawn by the model's own sampler.

NCE (:mod:`pfzoo.training.nce`) contrasts the data with a noise ``q`` through the log-odds ``G = log p_θ − log(ν q)``,
so it needs ``log q`` normalised. Here ``q = p_θ'``, the model frozen at ``θ'`` (refreshed every epoch or every
``refresh_every`` updates), whose ``log Z(θ')`` is as unknown as the model's. Only the two normalisers' difference
enters, though:

    G(x) = log p_θ(x) − log(ν p_θ'(x)) = F_θ'(x) − F_θ(x) + [log Z(θ') − log Z(θ)] − log ν.

Writing the model as ``log p_θ = −F_θ + c`` (NCE's learned normaliser, eq. 18.28) and the copy as ``−F_θ' + c'`` with
``c'`` the value of c frozen with θ', the log-odds are

    G(x) = F_θ'(x) − F_θ(x) + (c − c') − log ν,

so the copy's absolute normaliser cancels and ``c − c'`` learns ``log Z(θ') − log Z(θ)``, the change of log Z since the
refresh. The loss is NCE's, ``L = −(1/B) [Σ_b log σ(G(x_b)) + Σ_s log σ(−G(y_s))]`` with ``S = ν B`` draws
``y_s ~ p_θ'`` (ν = S / B).

Right after a refresh (θ = θ', c = c') ``G ≡ −log ν`` and ``σ(G) = 1/(1 + ν)``, so

    ∇_θ L = ν/(1 + ν) · [ mean_b ∇F_θ(x_b) − mean_s ∇F_θ(y_s) ],       ∂L/∂c = ν/(1 + ν) · [−1 + 1] = 0:

ν/(1 + ν) times the maximum-likelihood gradient with the model expectation taken over the copy's samples (the PCD
surrogate's gradient; Goodfellow 2014's observation that self-contrastive estimation is maximum likelihood), and c has
nothing to learn until θ leaves θ'. Refreshing after every update (``refresh_every=1``) is therefore stochastic
maximum likelihood with the copy's chains; between refreshes the loss is NCE against a fixed noise, with c − c'
tracking the change of log Z. c itself thus accumulates those changes, ``c ≈ −log Z(θ) + (c₀ + log Z(θ₀))``: an
estimate of −log Z only up to the unknown normaliser of the initial model, which is why it is not reported as one.

The copy's samples come from chains, not exact draws, for most families (its Gibbs chain, or HMC), so ``q`` is the
copy only as far as the chains have mixed: the same approximation as PCD's negative phase.
"""

from __future__ import annotations

import copy
import math

import torch
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from pfzoo.kernels import HMCKernel, run_chain
from pfzoo.models.capabilities import Capability
from pfzoo.training.contrastive import owned_chains
from pfzoo.training.nce import contrastive_loss, normaliser
from pfzoo.training.objective import Objective
from pfzoo.validation import allocating, check_finite_number, check_positive_int


class SelfContrastive(Objective):
    """Self-contrastive estimation (module docstring) for models with an exact free energy and a sampler: RBMs, Ising and
    Hopfield models and Gaussian–Bernoulli RBMs draw the copy's samples by its Gibbs chain over the visible units, models
    that sample exactly (Gaussians, complete ICA and products of experts) by its exact sampler, the other energies over
    real vectors (mcRBM, overcomplete products of experts, a user's :class:`~pfzoo.models.EnergyFunction`) by HMC.

    Chains persist across updates as PCD's do (a buffer ``[num_chains, V]``, started from rows of the first batch) and
    move under the copy: ``k`` Gibbs sweeps, or ``k`` HMC transitions (full momentum refresh, ``num_leapfrog`` steps of
    ``step_size``), per update. The copy is kept as a flat vector of its parameters (a buffer, like c' and the update
    count), so a resumed run contrasts with the very same copy. With ``refresh_every`` > 0 the count is of loss
    evaluations (an L-BFGS step makes several). Whether the copy samples exactly is read from the model once per copy
    (a product of experts' exact sampler itself reads its filters at every draw, a wait per step on a GPU).

    Args:
        k: Gibbs sweeps or HMC transitions of the chains per update (≥ 1).
        num_chains: the copy's draws per update, over all ranks (ν = num_chains / batch size).
        refresh_every: refresh the copy (θ' ← θ, c' ← c) every this many updates; 0 = at the start of every epoch.
        step_size, num_leapfrog: the HMC transition's leapfrog step and count (energies over real vectors only).
    """

    lazy_buffers = ("chains", "frozen")

    config_name = "self_contrastive"
    chains: torch.Tensor
    frozen: torch.Tensor
    frozen_c: torch.Tensor
    updates: torch.Tensor

    def __init__(self, k: int = 1, num_chains: int = 100, refresh_every: int = 0, step_size: float = 0.1, num_leapfrog: int = 10) -> None:
        super().__init__()
        self.k = check_positive_int(k, "k")
        self.num_chains = check_positive_int(num_chains, "num_chains")
        if isinstance(refresh_every, bool) or not isinstance(refresh_every, int) or refresh_every < 0:
            raise ValueError(f"refresh_every must be a non-negative integer (0 = every epoch), got {refresh_every!r}")
        self.refresh_every = refresh_every
        self.step_size = check_finite_number(step_size, "step_size", minimum=0.0, exclusive=True)
        self.num_leapfrog = check_positive_int(num_leapfrog, "num_leapfrog")
        self.c = normaliser()
        self.register_buffer("chains", torch.empty(0))
        self.register_buffer("frozen", torch.empty(0))
        self.register_buffer("frozen_c", torch.zeros((), dtype=torch.float64))
        self.register_buffer("updates", torch.zeros((), dtype=torch.long))
        self._updates = 0  # the count as a Python number: deciding a refresh must not read a tensor inside a step
        self._sampler = "gibbs"  # how the copy is drawn: "gibbs", "exact" or "hmc", set with each copy (frozen_copy)
        self._set_copy(None)

    def missing(self, model) -> str | None:
        offered = model.capabilities
        if Capability.EXACT_FREE_ENERGY in offered and (Capability.VISIBLE_GIBBS_CHAIN in offered or Capability.REAL_ENERGY in offered):
            return None
        return f"{Capability.EXACT_FREE_ENERGY.value} and either {Capability.VISIBLE_GIBBS_CHAIN.value} or {Capability.REAL_ENERGY.value}"

    def prepare(self, model, train: torch.Tensor, *, generator: torch.Generator | None = None) -> bool:
        """With ``refresh_every=0``, refresh the copy at the start of the epoch. Returns ``False``: right after a refresh
        the gradient is maximum likelihood's, as it was before (module docstring), so the optimiser's state still applies."""
        if self.refresh_every == 0:
            self.refresh(model)
        return False

    def refresh(self, model) -> None:
        """Freeze the copy at the model's current parameters and c' at c."""
        with torch.no_grad():
            self.frozen = parameters_to_vector(model.parameters()).detach().clone()
            self.frozen_c = self.c.detach().clone()
        self._set_copy(None)
        self.frozen_copy(model)

    def frozen_copy(self, model):
        """The model frozen at θ' (rebuilt from ``frozen`` after a refresh or a restore; no gradients), and how its samples
        are drawn, decided once per copy: whether a product of experts samples exactly depends on its filters, and
        reading them inside every step would stall a GPU."""
        if self._copy is None:
            frozen = copy.deepcopy(model).requires_grad_(False)
            vector_to_parameters(self.frozen.clone(), frozen.parameters())
            self._set_copy(frozen)
            if Capability.VISIBLE_GIBBS_CHAIN in frozen.capabilities:
                self._sampler = "gibbs"
            else:
                self._sampler = "exact" if frozen.samples_exactly else "hmc"
        return self._copy

    def _set_copy(self, frozen) -> None:
        self.__dict__["_copy"] = frozen  # not a submodule: the copy's parameters are never trained; ``frozen`` holds them

    def draw(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """The copy's samples ``[num_chains, V]`` for this update (module docstring), without grad."""
        frozen = self.frozen_copy(model)
        with torch.no_grad(), allocating("num_chains", self.num_chains):
            if self._sampler == "exact":
                return frozen.sample(owned_chains(self.num_chains), generator=generator)
            if self.chains.numel() == 0:
                rows = torch.randint(batch.shape[0], (owned_chains(self.num_chains),), generator=generator, device=batch.device)
                self.chains = batch[rows]
            elif self.chains.shape[1] != batch.shape[1]:
                raise ValueError(f"batch must have {self.chains.shape[1]} columns like the persistent chains, got shape {tuple(batch.shape)}")
            if self._sampler == "gibbs":
                state, _ = run_chain(*frozen.gibbs_chain(), self.chains, self.k, generator=generator)
            else:
                kernel = HMCKernel(self.step_size, num_leapfrog=self.num_leapfrog, momentum_refresh=1.0)
                target = frozen.energy_target()
                state = kernel.init(self.chains, target, momentum=torch.zeros_like(self.chains))  # replaced at the first step
                for _ in range(self.k):
                    state, _ = kernel.step(state, target, generator=generator)
            self.chains = state.position
        return self.chains

    def log_odds(self, model, x: torch.Tensor, noise_ratio: float) -> torch.Tensor:
        """``G(x) = F_θ'(x) − F_θ(x) + (c − c') − log ν`` for ``x [B, V]`` → float64 ``[B]`` (module docstring)."""
        with torch.no_grad():
            frozen_free_energy = self.frozen_copy(model).free_energy(x).double()
        return frozen_free_energy - model.free_energy(x).double() + (self.c - self.frozen_c) - math.log(noise_ratio)

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None, indices: torch.Tensor | None = None) -> torch.Tensor:
        """NCE's loss of ``batch [B, V]`` against the copy's ``num_chains`` draws (float64 scalar); refreshes the copy
        first when due (every ``refresh_every`` updates, or before the first update ever) and advances the chains.
        ``indices`` (the Trainer passes them to objectives with a ``prepare``) are not needed."""
        self.check_outside_fit(model)
        model.check_visible(batch, "batch")
        if self.frozen.numel() == 0 or (self.refresh_every and self._updates % self.refresh_every == 0):
            self.refresh(model)
        self._updates += 1
        self.updates.add_(1)
        noise = self.draw(model, batch, generator=generator)
        noise_ratio = noise.shape[0] / batch.shape[0]
        return contrastive_loss(self.log_odds(model, batch, noise_ratio), self.log_odds(model, noise, noise_ratio))

    def _apply(self, fn, *args, **kwargs):
        self._set_copy(None)  # moved or cast: rebuild the copy from the moved buffer
        return super()._apply(fn, *args, **kwargs)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._updates = int(self.updates)
        self._set_copy(None)

    def extra_repr(self) -> str:
        return f"k={self.k}, num_chains={self.num_chains}, refresh_every={self.refresh_every}"
