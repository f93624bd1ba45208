"""Fast persistent contrastive divergence (FPCD; Tieleman & Hinton 2009, *Deep Learning* §18.2).

PCD's surrogate ``L(θ) = mean_n F_θ(v_n) − mean_m F_θ(ṽ_m)`` (:mod:`pfzoo.training.contrastive`), whose negatives
``ṽ`` are persistent chains advanced under ``θ + θ_f`` rather than θ. The *fast weights* ``θ_f`` (one per parameter,
starting at 0) follow the same gradient estimate with their own, larger step and shrink quickly:

    θ_f ← λ θ_f − η_f ∂L/∂θ        (λ = 19/20 and η_f = the regular initial learning rate in the paper)

so they raise the energy wherever the chains have lingered lately, pushing them on to other modes (fast mixing), while
they decay before they can bias the model: the statistics of ``L`` are taken under the regular θ alone.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call

from pfzoo.kernels import run_chain
from pfzoo.training.contrastive import _free_energy_gap, _missing_gibbs_chain, persistent_chains
from pfzoo.training.objective import Objective
from pfzoo.validation import check_finite_number, check_positive_int


class _Chains(nn.Module):
    """``k`` steps of ``model``'s own Gibbs chain from ``chains [C, V]`` → ``[C, V]``, as a module so that
    :func:`torch.func.functional_call` runs it with the model's parameters replaced by ``θ + θ_f``."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, chains: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
        return run_chain(*self.model.gibbs_chain(), chains, k, generator=generator)[0].position


class FPCD(Objective):
    """FPCD-k: negatives from persistent chains advanced ``k`` Gibbs sweeps per update under ``θ + θ_f``.

    The fast weights live in the buffer ``fast [P]`` (float, one entry per element of ``model.parameters()`` in their
    order, created at 0 on the first batch) beside the chains ``[num_chains, V]`` (started as PCD's, from rows of the
    first batch), so both are checkpointed. Each update: the chains take ``k`` sweeps of the model's own Gibbs chain
    with the parameters ``θ + θ_f`` (:func:`torch.func.functional_call`, which works for any family); the surrogate ``L``
    and its gradient ``g = ∂L/∂θ`` are computed at θ; then ``θ_f ← fast_decay · θ_f − fast_learning_rate · g``.

    ``loss`` returns ``L`` as a linear surrogate ``L + Σ_p (p − p̄)·g`` (``p̄`` the parameters held constant): its value
    is ``L`` and its gradient ``g``, so the Trainer's backward pass costs nothing more, the gradient having been computed
    once here for both the fast and the regular weights. The regular weights' weight decay (the Trainer's) does not
    reach the fast weights, whose only decay is ``fast_decay``. With ``fast_learning_rate = 0`` FPCD is PCD. Under a
    ``torch.distributed`` process group each rank holds its share of the chains, as PCD, and its own fast weights,
    which follow its own shard's gradient (they only steer its chains).

    Works with any model whose visible Gibbs chain and free energy are exact: RBMs, Gaussian–Bernoulli RBMs, Ising
    models, Hopfield networks.

    Args:
        k: Gibbs sweeps per update (≥ 1).
        num_chains: persistent chains over all ranks.
        fast_learning_rate: η_f ≥ 0; the paper takes the regular initial learning rate (``conf/trainer/fpcd.yaml`` sets it
            to the optimiser's ``lr``).
        fast_decay: λ ∈ [0, 1), the factor the fast weights shrink by at every update (paper: 19/20).
    """

    lazy_buffers = ("chains", "fast")

    chains: torch.Tensor
    fast: torch.Tensor
    config_name = "fpcd"
    missing = staticmethod(_missing_gibbs_chain)

    def __init__(self, k: int = 1, num_chains: int = 100, fast_learning_rate: float = 0.05, fast_decay: float = 19 / 20) -> None:
        super().__init__()
        self.k = check_positive_int(k, "k")
        self.num_chains = check_positive_int(num_chains, "num_chains")
        self.fast_learning_rate = check_finite_number(fast_learning_rate, "fast_learning_rate", minimum=0.0)
        self.fast_decay = check_finite_number(fast_decay, "fast_decay", minimum=0.0)
        if self.fast_decay >= 1.0:
            raise ValueError(f"fast_decay must lie in [0, 1) (the fast weights must decay), got {fast_decay}")
        self.register_buffer("chains", torch.empty(0))
        self.register_buffer("fast", torch.empty(0))

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """The linear surrogate (scalar) for ``batch [B, V]`` whose value is ``L`` and gradient the FPCD update; advances
        the chains under ``θ + θ_f`` and then updates ``θ_f``."""
        self.check_outside_fit(model)
        model.check_visible(batch, "batch")
        names, parameters = zip(*model.named_parameters())
        sizes = [parameter.numel() for parameter in parameters]
        if self.fast.numel() == 0:
            self.fast = torch.zeros(sum(sizes), dtype=model.dtype, device=model.device)
        elif self.fast.numel() != sum(sizes):
            raise ValueError(f"model has {sum(sizes)} parameters but the fast weights hold {self.fast.numel()}; use a fresh FPCD per model")
        self.chains = persistent_chains(self.chains, batch, self.num_chains, generator=generator)
        with torch.no_grad():
            shifted = {f"model.{name}": parameter + offset.view_as(parameter)
                       for name, parameter, offset in zip(names, parameters, self.fast.split(sizes))}
            self.chains = functional_call(_Chains(model), shifted, (self.chains, self.k, generator))
        surrogate = _free_energy_gap(model, batch, self.chains)
        gradients = torch.autograd.grad(surrogate, parameters, allow_unused=True)
        with torch.no_grad():
            flat = torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for p, g in zip(parameters, gradients)])
            self.fast.mul_(self.fast_decay).sub_(flat, alpha=self.fast_learning_rate)
        linear = [(p * g).sum() - (p.detach() * g).sum() for p, g in zip(parameters, gradients) if g is not None]
        return surrogate.detach() + sum(linear)

    def extra_repr(self) -> str:
        return f"k={self.k}, num_chains={self.num_chains}, fast_learning_rate={self.fast_learning_rate}, fast_decay={self.fast_decay}"
