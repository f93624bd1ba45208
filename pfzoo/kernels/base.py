"""The one contract every Markov transition in pfzoo follows, and the kernels built from other kernels.

A kernel is a pure transition rule (as in BlackJAX): it holds settings, never chains, and never changes
itself. Its state carries whatever the chains need between steps (positions, momenta, the target's
statistics of the positions); its info reports what happened in the step. A *target* is the distribution
the kernel leaves invariant, at any inverse temperature β: a model family or an annealing path exposes it
(block conditionals for Gibbs kernels, energy and gradient for HMC, energies for Metropolis) and kernels
act on targets only, so no kernel knows a model family.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple, Protocol, Sequence, runtime_checkable

import torch

from pfzoo.validation import check_positive_int


BLOCK_CONDITIONALS = "exact block conditionals of two layers"
SCAN_CONDITIONALS = "exact conditionals of blocks of units"
ENERGY_AND_GRADIENT = "an energy and its gradient over real vectors"
REAL_ENERGY_VALUES = "an energy over real vectors"
BINARY_ENERGY_VALUES = "an energy over binary vectors"
EXACT_DRAWS = "exact draws of each intermediate distribution"
PAIRWISE_BINARY = "pairwise couplings and biases over binary vectors"
"""What a kernel needs of its target (a kernel's ``needs``); a target offers one or more of these."""
TEMPERED_LOG_DENSITY = "its unnormalised log density at any β"
"""What replica exchange needs besides its kernel's needs: ``target.log_density(position [N, D], *, beta)``, float64
``log f_β`` of the positions: ``[N]`` for β a number, ``[N, K]`` for β an ``[N, K]`` tensor (K inverse temperatures per
row, so that a row's shared work, such as an RBM's ``vW + c``, is done once for all K)."""
STATISTICS_LOG_DENSITY = "its tempered log density from the statistics its states keep"
"""A target with :data:`TEMPERED_LOG_DENSITY` whose ``log_density`` also takes ``stats=``, the per-chain statistics a
kernel's state keeps (``GibbsState.stats``), and reads them instead of the positions' shared work: replica exchange then
reuses what the last Gibbs step computed (an RBM's ``vW + c``, kept by ``gibbs_chain(keep_statistics=True)``)."""
CHAIN_BETAS = "a β per chain in its conditionals"
"""A target whose draws (and statistics) take β as an ``[N, 1]`` tensor, one per chain, as well as a number: a kernel that
passes β through to it (the Gibbs kernels) then advances chains at several temperatures as one batch."""


@runtime_checkable
class Kernel(Protocol):
    """``init(position, target) -> state`` and ``step(state, target, *, beta, generator, **settings) -> (state, info)``.

    ``step`` leaves ``p_β ∝ f_β`` of ``target`` invariant. ``settings`` override the kernel's own per call (e.g. an
    HMC step size adapted on the device between calls); ``info.accept_prob`` is the ``[N]`` acceptance probability
    of the step's proposal, or ``None`` for moves that always accept (exact Gibbs draws). ``needs`` names what the
    kernel asks of its target (one of the module's constants), so a path can refuse a kernel in one line.
    """

    needs: str

    def init(self, position: Any, target: Any, *, generator: torch.Generator | None = None) -> Any:
        """Chains at ``position`` (``[N, D]``) as this kernel's state for ``target``."""

    def step(self, state: Any, target: Any, *, beta: float = 1.0, generator: torch.Generator | None = None, **settings) -> tuple[Any, Any]:
        """One transition leaving ``p_β`` invariant → ``(state, info)``."""


@runtime_checkable
class Target(Protocol):
    """What a kernel acts on: a distribution ``p_β`` at any β in one or more of the forms of this module's constants.
    ``offers`` declares which (a kernel's ``needs`` must be among them; :data:`TEMPERED_LOG_DENSITY` for replica exchange,
    :data:`CHAIN_BETAS` for a β per chain). The methods behind each form are the protocols of :mod:`pfzoo.kernels.gibbs`,
    :mod:`pfzoo.kernels.hmc` and :mod:`pfzoo.kernels.swendsen_wang`."""

    offers: frozenset[str]


@runtime_checkable
class ReflectingKernel(Kernel, Protocol):
    """A kernel whose trajectories can reflect at lower bounds of the position (HMC on a prior with support ``x ≥ 0``)."""

    lower: torch.Tensor | None
    """Where trajectories reflect: float64 ``[D]`` or a scalar; ``None``: nowhere."""

    def reflecting_at(self, lower: Any) -> ReflectingKernel:
        """The same kernel reflecting at ``lower`` (a number or ``[D]``)."""


@runtime_checkable
class NoiseFirstKernel(Kernel, Protocol):
    """A kernel whose step's draws can be made before it (all of them, from the state's shapes alone) and passed to
    ``step(..., noise=...)``: a compiled step then holds no draw (:func:`pfzoo.estimators.annealing.anneal`)."""

    def draw_noise(self, state: Any, *, generator: Any = None) -> Any:
        """The draws ``step`` would make from ``generator``, in its order."""


def draws_noise_first(kernel: Kernel) -> bool:
    """Whether ``kernel`` is a :class:`NoiseFirstKernel`, by its class: the protocol's ``isinstance`` inspects the
    protocol's members on every call (tens of microseconds), too slow for a check made at every annealing step."""
    return _class_draws_noise_first(type(kernel))


@functools.cache
def _class_draws_noise_first(kernel_class: type) -> bool:
    return callable(getattr(kernel_class, "draw_noise", None))


def reflection_bounds(kernel: Kernel) -> torch.Tensor | None:
    """The lower bounds ``kernel`` reflects at, or ``None`` for a kernel that reflects nowhere (or cannot reflect)."""
    return kernel.lower if isinstance(kernel, ReflectingKernel) else None


def check_kernel(kernel: Any, offered: frozenset[str] | set[str], where: str) -> Kernel:
    """``kernel`` if it is a kernel whose needs ``offered`` covers; else ``ValueError`` in one line naming both."""
    if not isinstance(kernel, Kernel):
        raise ValueError(f"kernel must be a pfzoo kernel with init, step and needs (pfzoo.kernels), got {type(kernel).__name__}")
    if kernel.needs not in offered:
        raise ValueError(f"kernel={type(kernel).__name__} needs {kernel.needs}; {where} offers {' and '.join(sorted(offered))} "
                         f"(leave kernel unset for its default)")
    return kernel


class CompositeInfo(NamedTuple):
    """infos: the inner kernels' infos in the order they ran; accept_prob ``[N]``: the mean of those that report one
    (``None`` when none does)."""

    infos: tuple
    accept_prob: torch.Tensor | None


def take_chains(tree: Any, index: Any, rows: int) -> Any:
    """``tensor[index]`` for every tensor of ``tree`` (a kernel state or info: tensors, nested (named) tuples, other
    leaves) whose first dimension is ``rows``, the chains; other leaves (an empty hidden layer before the first draw, a
    step size) as they are. How composite kernels split replicas and how resampling copies whole chains."""
    if torch.is_tensor(tree):
        return tree[index] if tree.dim() > 0 and tree.shape[0] == rows else tree
    if isinstance(tree, tuple):
        items = [take_chains(item, index, rows) for item in tree]
        return type(tree)(*items) if hasattr(tree, "_fields") else tuple(items)
    return tree


def select_chains(mask: torch.Tensor, if_true: Any, if_false: Any, rows: int | None = None) -> Any:
    """Chain by chain, ``if_true``'s where ``mask [rows]`` (bool) holds and ``if_false``'s elsewhere, for two kernel states
    (or infos, positions, evaluations) of the same structure: every pair of tensors whose first dimension is ``rows``
    (default ``mask``'s length) on both sides is merged by ``torch.where``; any other leaf (a step size, a hidden layer
    not drawn yet on one side, ``None``) is ``if_false``'s. How a Metropolis step keeps or rejects its proposals and a
    chain restarts from an earlier state, without recomputing the statistics the state carries."""
    rows = mask.shape[0] if rows is None else rows
    if torch.is_tensor(if_false):
        if torch.is_tensor(if_true) and if_true.dim() > 0 and if_false.dim() > 0 and if_true.shape[0] == if_false.shape[0] == rows:
            return torch.where(mask.reshape(-1, *(1,) * (if_false.dim() - 1)), if_true, if_false)
        return if_false
    if isinstance(if_false, tuple):
        items = [select_chains(mask, a, b, rows) for a, b in zip(if_true, if_false)]
        return type(if_false)(*items) if hasattr(if_false, "_fields") else tuple(items)
    return if_false


def _composite_info(infos: list) -> CompositeInfo:
    probs = [info.accept_prob for info in infos if info.accept_prob is not None]
    accept_prob = None if not probs else (probs[0] if len(probs) == 1 else torch.stack(probs).mean(0))
    return CompositeInfo(tuple(infos), accept_prob)


class Cycle:
    """The kernels one after another, each on the same target and state type: ``K_m ∘ … ∘ K_1``. Each leaves
    ``p_β`` invariant, hence so does the cycle (it is reversible when the sequence reads the same backwards).
    ``init`` is the first kernel's."""

    def __init__(self, kernels: Sequence[Kernel]) -> None:
        if not kernels:
            raise ValueError("kernels must be a non-empty sequence of kernels, got an empty one")
        for kernel in kernels:
            if not isinstance(kernel, Kernel):
                raise ValueError(f"kernels must hold kernels with init, step and needs (pfzoo.kernels), got {type(kernel).__name__}")
        needs = {kernel.needs for kernel in kernels}
        if len(needs) > 1:
            raise ValueError(f"kernels must all act on the same kind of target, got kernels that need {' and '.join(sorted(needs))}")
        self.kernels = tuple(kernels)
        self.needs = kernels[0].needs

    def init(self, position: Any, target: Any, *, generator: torch.Generator | None = None) -> Any:
        return self.kernels[0].init(position, target, generator=generator)

    def step(self, state: Any, target: Any, *, beta: float = 1.0, generator: torch.Generator | None = None, **settings) -> tuple[Any, CompositeInfo]:
        infos = []
        for kernel in self.kernels:
            state, info = kernel.step(state, target, beta=beta, generator=generator, **settings)
            infos.append(info)
        return state, _composite_info(infos)

    def __repr__(self) -> str:
        return f"Cycle({list(self.kernels)!r})"


class Repeat:
    """``kernel`` applied ``times`` times per step: ``K^n``, invariant (and reversible) whenever ``K`` is."""

    def __init__(self, kernel: Kernel, times: int) -> None:
        if not isinstance(kernel, Kernel):
            raise ValueError(f"kernel must be a pfzoo kernel with init, step and needs (pfzoo.kernels), got {type(kernel).__name__}")
        self.kernel = kernel
        self.times = check_positive_int(times, "times")
        self.needs = kernel.needs

    def init(self, position: Any, target: Any, *, generator: torch.Generator | None = None) -> Any:
        return self.kernel.init(position, target, generator=generator)

    def step(self, state: Any, target: Any, *, beta: float = 1.0, generator: torch.Generator | None = None, **settings) -> tuple[Any, CompositeInfo]:
        infos = []
        for _ in range(self.times):
            state, info = self.kernel.step(state, target, beta=beta, generator=generator, **settings)
            infos.append(info)
        return state, _composite_info(infos)

    def __repr__(self) -> str:
        return f"Repeat({self.kernel!r}, times={self.times})"


def run_chain(kernel: Kernel, target: Any, position: Any, num_steps: int, *, beta: float = 1.0,
              generator: torch.Generator | None = None) -> tuple[Any, Any]:
    """``num_steps`` ≥ 1 steps of ``kernel`` on ``target`` at β from ``position`` → ``(last state, last info)``."""
    check_positive_int(num_steps, "num_steps")
    state = kernel.init(position, target, generator=generator)
    info = None
    for _ in range(num_steps):
        state, info = kernel.step(state, target, beta=beta, generator=generator)
    return state, info
