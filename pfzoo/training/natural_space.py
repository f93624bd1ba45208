"""Any optimiser run in the natural parameter space ``φ = G^½(θ_fixed) θ`` (Sohl-Dickstein's thesis, §4.1.4 "Whitening
the parameter space", eqs. 4.11–4.18, and §4.2.7 "Combining the natural gradient with other techniques using the
natural parameter space φ", eq. 4.37).

For a fixed metric ``G`` the linear map ``φ = W θ`` with ``WᵀW = G`` makes the metric on φ the identity (eq. 4.16);
the thesis takes the symmetric root ``W = G^½`` (eq. 4.17, "zero-phase" whitening, its footnote 1). In φ the steepest
gradient *is* the natural gradient: ``∇_φ J = G^{-½} ∇_θ J`` (eq. 4.21), and a step ``Δφ`` moves θ by
``G^{-½} Δφ`` (eq. 4.23), so steepest descent in φ at rate η is ``θ ← θ − η G⁻¹ ∇_θ J`` (eq. 4.24). Unlike
:class:`~pfzoo.training.NaturalGradient`, which replaces the gradient an optimiser sees by ``G⁻¹ ∇J``, this hands the
optimiser the true gradient of the function it descends (``J`` as a function of φ), which is what line searches need:
"blindly replacing all gradients with natural gradients frequently causes problems (line search implementations, for
instance, depend on the gradients they are passed being the true gradients of the function they are descending)"
(§4.2.7). So L-BFGS, momentum, Adam ... run unchanged in φ.

``G`` depends on θ; the thesis holds it fixed at ``θ_fixed`` "for many learning steps" (§4.1.4, footnote 2): "fix
θ_fixed to the initial value of θ and perform gradient descent over φ using any preferred algorithm. After a significant
number of update steps convert back to θ, update θ_fixed to the new value of θ, and continue gradient descent in the
new φ space" (§4.2.7). :class:`NaturalParameterSpace` does exactly that: ``metric()`` is measured at the first step and
again every ``refresh_every`` steps (never again with ``None``); at each refresh φ is re-expressed in the new
coordinates and the inner optimiser's state (L-BFGS's curvature pairs, momentum), which describes the old ones, is
dropped. With ``refresh_every=1`` and plain SGD it is the algorithm of §4.1.4's list (steps 1–4).

The Trainer builds it from its ``natural_parameter_space`` setting (:func:`natural_space_from_settings`), measuring
``G`` over the training rows with a metric of :func:`pfzoo.training.natural_gradient.measure_metric`; from the
command line e.g. ``trainer=ml +trainer.natural_parameter_space.metric=data_fisher``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import torch

from pfzoo.models.capabilities import Capability, MissingCapability, describe
from pfzoo.training.natural_gradient import STRUCTURES, measure_metric
from pfzoo.validation import check_choice, check_finite_number, check_positive_int

SPACE_METRICS = ("model_fisher", "data_fisher", "energy")
SPACE_SETTINGS = ("metric", "damping", "structure", "num_samples", "refresh_every")


def _symmetric_root(block: torch.Tensor, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B^½, B^{-½})`` of a symmetric positive definite ``block [K, K]`` (float64) by its eigendecomposition."""
    values, vectors = torch.linalg.eigh(block)
    # eigenvalues at round-off level would make B^{-½} blow up the steps along their eigenvectors (thesis §4.2.6)
    floor = values.abs().max().clamp_min(1e-300) * block.shape[0] * torch.finfo(torch.float64).eps
    if values.min() <= floor:
        raise ValueError(f"{name} must be positive definite to whiten the parameters, got smallest eigenvalue "
                         f"{values.min().item():.3g} (largest {values.max().item():.3g}): raise damping")
    root = values.sqrt()
    return (vectors * root) @ vectors.T, (vectors / root) @ vectors.T


def whitening(metric: torch.Tensor, *, damping: float = 0.0, sizes: Sequence[int] | None = None,
              structure: str = "full") -> tuple[torch.Tensor, torch.Tensor]:
    """The whitening ``W = (G̃ + λI)^½`` of the parameter space and its inverse (eqs. 4.17–4.18), both ``[P, P]``
    float64, for ``metric G [P, P]``: ``G̃`` is ``G`` (``full``), its blocks of ``sizes`` along the diagonal (``block``;
    one per parameter tensor, summing to P) or its diagonal (``diagonal``) — the thesis's §4.2.5; ``damping`` λ ≥ 0 its
    §4.2.6 regularisation. ``W`` is symmetric, so ``WᵀW = G̃ + λI`` (eq. 4.16)."""
    check_choice(structure, "structure", STRUCTURES)
    damping = check_finite_number(damping, "damping", minimum=0.0)
    if not isinstance(metric, torch.Tensor) or metric.dim() != 2 or metric.shape[0] != metric.shape[1]:
        raise ValueError(f"metric must be a square matrix [P, P], got {tuple(metric.shape) if isinstance(metric, torch.Tensor) else type(metric).__name__}")
    metric = metric.double()
    size = metric.shape[0]
    if structure == "diagonal":
        diagonal = metric.diagonal() + damping
        if diagonal.min() <= 0:
            raise ValueError(f"metric's diagonal plus damping must be positive to whiten the parameters, got {diagonal.min().item():.3g}: raise damping")
        return torch.diag(diagonal.sqrt()), torch.diag(diagonal.rsqrt())
    sizes = [size] if structure == "full" or sizes is None else list(sizes)
    if sum(sizes) != size:
        raise ValueError(f"sizes must sum to the metric's size {size}, got {sizes}")
    root = torch.zeros_like(metric)
    inverse_root = torch.zeros_like(metric)
    start = 0
    for count in sizes:
        block = metric[start:start + count, start:start + count]
        block = 0.5 * (block + block.T) + damping * torch.eye(count, dtype=block.dtype, device=block.device)
        pieces = _symmetric_root(block, "metric + damping" if structure == "full" else f"the metric's block at {start}")
        root[start:start + count, start:start + count], inverse_root[start:start + count, start:start + count] = pieces
        start += count
    return root, inverse_root


class NaturalParameterSpace(torch.optim.Optimizer):
    """Runs ``optimizer`` (any ``params -> torch.optim.Optimizer``, L-BFGS included) on the natural parameters
    ``φ = W θ`` (``W = (G̃ + λI)^½`` at θ_fixed, :func:`whitening`; eqs. 4.18, 4.37) instead of the parameters θ.

    The user's code is unchanged: its closure computes the loss at the θ held in ``params`` and leaves ``∇_θ J`` in
    their ``.grad`` (``zero_grad`` clears them); :meth:`step` writes ``θ = W⁻¹ φ`` before every evaluation, turns the
    gradient into ``∇_φ J = W⁻¹ ∇_θ J`` (eq. 4.21) for the inner optimiser, and writes θ after its step. A change to θ
    made between steps (e.g. a model's projection of its parameters) is read back into φ at the next step.

    ``param_groups`` and ``state`` are the inner optimiser's (one group holding the flat ``φ [P]``, float64), so a
    learning-rate schedule and ``state.clear()`` act on it; ``state_dict`` holds it together with φ, ``W`` and the
    step count since the last refresh.

    Args:
        params: the parameters θ (tensors, or one parameter group's dict with ``params``), flattened in this order.
        optimizer: ``params -> torch.optim.Optimizer`` building the inner optimiser (e.g.
            ``functools.partial(torch.optim.LBFGS, line_search_fn="strong_wolfe")``).
        metric: ``() -> G [P, P]`` at the current θ (called at the first step and at each refresh).
        damping: λ ≥ 0 added to G̃'s diagonal (thesis §4.2.6); ``G̃ + λI`` must be positive definite.
        structure: ``full``, ``block`` (one block per tensor of ``params``) or ``diagonal`` (thesis §4.2.5).
        refresh_every: re-measure ``G`` at the current θ every this many steps (§4.2.7's "after a significant number
            of update steps ... update θ_fixed"); ``None``: only at the first step (θ_fixed = the initial θ).
    """

    def __init__(self, params, optimizer: Callable[[list[torch.Tensor]], torch.optim.Optimizer],
                 metric: Callable[[], torch.Tensor], *, damping: float = 0.0, structure: str = "full",
                 refresh_every: int | None = None) -> None:
        super().__init__(params, {})
        if not callable(optimizer) or not callable(metric):
            raise ValueError(f"optimizer and metric must be callables (params -> Optimizer, () -> G [P, P]), got "
                             f"{type(optimizer).__name__} and {type(metric).__name__}")
        self.theta = [p for group in self.param_groups for p in group["params"]]
        self.metric = metric
        self.damping = check_finite_number(damping, "damping", minimum=0.0)
        self.structure = check_choice(structure, "structure", STRUCTURES)
        self.refresh_every = None if refresh_every is None else check_positive_int(refresh_every, "refresh_every")
        first = self.theta[0]
        self.phi = torch.zeros(sum(p.numel() for p in self.theta), dtype=torch.float64, device=first.device, requires_grad=True)
        self.inner = optimizer([self.phi])
        if not isinstance(self.inner, torch.optim.Optimizer):
            raise ValueError(f"optimizer must build a torch.optim.Optimizer, got {type(self.inner).__name__}")
        self.param_groups, self.defaults, self.state = self.inner.param_groups, self.inner.defaults, self.inner.state
        self.root: torch.Tensor | None = None  # W = (G̃ + λI)^½ [P, P], None until the first step measures G
        self.inverse_root: torch.Tensor | None = None
        self.steps_since_refresh = 0
        self.refreshes = 0
        self._written: torch.Tensor | None = None  # the flat θ last written, to notice changes made outside

    def _flat_theta(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1).double() for p in self.theta])

    def _flat_grad(self) -> torch.Tensor:
        return torch.cat([(torch.zeros_like(p) if p.grad is None else p.grad).reshape(-1).double() for p in self.theta])

    @torch.no_grad()
    def _write_theta(self) -> None:
        """θ = W⁻¹ φ (eq. 4.18 inverted) into the parameters."""
        flat = self.inverse_root @ self.phi.detach()
        for parameter, piece in zip(self.theta, flat.split([p.numel() for p in self.theta])):
            parameter.copy_(piece.view_as(parameter))
        self._written = self._flat_theta()

    @torch.no_grad()
    def refresh(self) -> None:
        """θ_fixed ← θ: measure ``G`` there, re-express φ = W θ in the new coordinates and drop the inner optimiser's
        state (its history describes the old coordinates)."""
        metric = self.metric()
        size = self.phi.numel()
        if not isinstance(metric, torch.Tensor) or tuple(metric.shape) != (size, size):
            got = tuple(metric.shape) if isinstance(metric, torch.Tensor) else type(metric).__name__
            raise ValueError(f"metric() must return G [{size}, {size}] over the parameters, got {got}")
        self.root, self.inverse_root = whitening(metric.to(self.phi.device), damping=self.damping,
                                                 sizes=[p.numel() for p in self.theta], structure=self.structure)
        self.phi.copy_(self.root @ self._flat_theta())
        self._written = self._flat_theta()
        self.inner.state.clear()
        self.steps_since_refresh = 0
        self.refreshes += 1

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of θ (where the closure leaves ``∇_θ J``) and of φ."""
        for tensor in (*self.theta, self.phi):
            if tensor.grad is not None:
                if set_to_none:
                    tensor.grad = None
                else:
                    tensor.grad.zero_()

    def step(self, closure: Callable[[], torch.Tensor]) -> torch.Tensor:  # type: ignore[override]
        """One step of the inner optimiser on φ; ``closure`` computes the loss at the parameters θ and its gradient in
        their ``.grad`` (after ``zero_grad``), as for any closure-taking optimiser. Returns the inner step's loss."""
        if closure is None:
            raise ValueError("NaturalParameterSpace.step needs a closure: the loss at θ with ∇_θ J left in the parameters' .grad")
        if self.root is None or (self.refresh_every is not None and self.steps_since_refresh >= self.refresh_every):
            self.refresh()
        elif not torch.equal(self._flat_theta(), self._written):
            with torch.no_grad():
                self.phi.copy_(self.root @ self._flat_theta())

        def phi_closure() -> torch.Tensor:
            self._write_theta()
            with torch.enable_grad():
                loss = closure()
            # ∇_φ J = (∂θ/∂φᵀ)ᵀ ∇_θ J = W⁻ᵀ ∇_θ J = W⁻¹ ∇_θ J, W symmetric (eqs. 4.20–4.21)
            self.phi.grad = self.inverse_root @ self._flat_grad()
            return loss

        loss = self.inner.step(phi_closure)
        self._write_theta()
        self.steps_since_refresh += 1
        return loss

    def state_dict(self) -> dict[str, Any]:
        return {"inner": self.inner.state_dict(), "phi": self.phi.detach().clone(), "root": self.root,
                "inverse_root": self.inverse_root, "steps_since_refresh": self.steps_since_refresh, "refreshes": self.refreshes}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        with torch.no_grad():
            self.phi.copy_(state_dict["phi"])
        self.root, self.inverse_root = state_dict["root"], state_dict["inverse_root"]
        self.steps_since_refresh, self.refreshes = state_dict["steps_since_refresh"], state_dict["refreshes"]
        self.inner.load_state_dict(state_dict["inner"])
        self._written = None if self.root is None else self._flat_theta()


def line_searches(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer`` (or the one a :class:`NaturalParameterSpace` runs) is L-BFGS, whose line search needs the
    true gradient of the function it descends and reads every loss."""
    inner = optimizer.inner if isinstance(optimizer, NaturalParameterSpace) else optimizer
    return isinstance(inner, torch.optim.LBFGS)


def check_space_settings(settings: Mapping | None) -> dict[str, Any] | None:
    """The Trainer's ``natural_parameter_space`` setting, validated: None, or a mapping of ``metric`` (one of
    :data:`SPACE_METRICS`), ``damping``, ``structure``, ``num_samples`` and ``refresh_every`` (see
    :class:`NaturalParameterSpace`); returns it as a plain dict with the defaults filled in."""
    if settings is None:
        return None
    if not isinstance(settings, Mapping):
        raise ValueError(f"natural_parameter_space must be null or a mapping of {', '.join(SPACE_SETTINGS)}, got {type(settings).__name__}")
    unknown = sorted(str(key) for key in set(settings) - set(SPACE_SETTINGS))
    if unknown:
        raise ValueError(f"natural_parameter_space has unknown settings {', '.join(unknown)}: expected {', '.join(SPACE_SETTINGS)}")
    chosen = {"metric": "data_fisher", "damping": 1e-4, "structure": "full", "num_samples": 1000, "refresh_every": None, **settings}
    check_choice(chosen["metric"], "natural_parameter_space.metric", SPACE_METRICS)
    check_choice(chosen["structure"], "natural_parameter_space.structure", STRUCTURES)
    check_finite_number(chosen["damping"], "natural_parameter_space.damping", minimum=0.0)
    check_positive_int(chosen["num_samples"], "natural_parameter_space.num_samples")
    if chosen["refresh_every"] is not None:
        check_positive_int(chosen["refresh_every"], "natural_parameter_space.refresh_every")
    return chosen


def natural_space_from_settings(optimizer: Callable, settings: Mapping[str, Any], model, extra: Sequence[torch.Tensor],
                                rows: torch.Tensor, *, generator: torch.Generator | None = None) -> NaturalParameterSpace:
    """The Trainer's optimiser under ``natural_parameter_space`` (settings from :func:`check_space_settings`): the
    model's trainable parameters whitened by the metric ``settings["metric"]`` measured over ``rows [N, V]`` (the
    training set) at each refresh, then ``extra`` (an objective's own parameters, e.g. NCE's normaliser) with the
    identity metric."""
    if Capability.EXACT_FREE_ENERGY not in model.capabilities:
        raise MissingCapability(f"natural_parameter_space's metrics differentiate the free energy, which needs "
                                f"{Capability.EXACT_FREE_ENERGY.value}; {type(model).__name__} {describe(model)} — use natural_parameter_space=null")
    trainable = [p for p in model.parameters() if p.requires_grad]
    extra = list(extra)

    def metric() -> torch.Tensor:
        measured = measure_metric(model, rows, settings["metric"], num_samples=settings["num_samples"], generator=generator)
        if not extra:
            return measured
        return torch.block_diag(measured, torch.eye(sum(p.numel() for p in extra), dtype=measured.dtype, device=measured.device))

    return NaturalParameterSpace([*trainable, *extra], optimizer, metric, damping=settings["damping"],
                                 structure=settings["structure"], refresh_every=settings["refresh_every"])
