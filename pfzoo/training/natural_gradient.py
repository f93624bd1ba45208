"""The natural gradient (Amari 1998) as a preconditioner any objective's updates can take, after Sohl-Dickstein's
thesis, chapter 4, "The natural gradient by analogy to signal whitening" (also arXiv:1205.1828, "... and recipes and
tricks for its use").

Steepest descent follows ``∇J(θ)``, the direction of fastest descent per unit of *Euclidean* length in parameter space;
a badly parametrised model (the chapter's Fig. 4.1) makes it zig-zag. The natural gradient measures length by the KL
divergence between neighbouring models, ``KL(p_θ ‖ p_{θ+δ}) ≈ ½ δᵀ G(θ) δ`` with ``G`` the Fisher information, and
follows ``G⁻¹ ∇J``: in the chapter's analogy, it *whitens* the gradient, whose covariance over the model's samples
``G`` is, just as a whitening filter ``C^{-½}`` decorrelates a signal of covariance ``C``.

:class:`NaturalGradient` wraps an objective like :class:`~pfzoo.training.Centered` does: the loss is the inner one, and
after backward :meth:`NaturalGradient.precondition` replaces the model's gradients ``g`` (flattened over its
parameters, ``[P]``) by ``(G + λ I)⁻¹ g``. A wrapper rather than a new optimiser, so that every optimiser (SGD, Adam)
and every objective (ML, CD, MPF, ...) combine with it unchanged; the Trainer builds it from its ``natural_gradient``
setting. The metrics ``G`` (the chapter's recipes, each named in :data:`METRICS`):

- ``model_fisher`` — the Fisher information ``G = Cov_{x∼p_θ}[∇_θ F(x)]`` (chapter 4, "the natural gradient"; for an
  exponential family ``F = −θᵀT(x)`` it is the covariance of the sufficient statistics), estimated from
  ``num_samples`` of the model's own samples (``model.sample(..., generator=)``) at every step;
- ``data_fisher`` — the Fisher information over the data distribution (recipe "Fisher information over the data
  distribution"; the empirical Fisher): ``G = ⟨s sᵀ⟩_data`` of the per-example scores ``s_n = −∇_θ F(x_n) − ∇_θ log Z``,
  with ``∇ log Z`` by autograd where it is a closed form, else ``−⟨∇F⟩`` over ``num_samples`` model samples;
- ``energy`` — the energy approximation (recipe "energy approximation"): the model's expectation replaced by the
  data's, ``G = Cov_data[∇_θ F(x)]``; no model samples, and equal to the Fisher at a model that fits the data;
- ``relative`` — Amari, Cichocki & Yang's (1996) natural (relative) gradient for filter matrices, ``ΔW ← ΔW WᵀW``,
  the steepest direction under the metric ``‖δW W⁻¹‖²_F`` that is invariant to ``W → W M`` (recipe "natural gradient
  of ... filter matrices"); applied to every 2-D parameter named ``*filters`` ([L, M], e.g. ICA's unmixing matrix W),
  other parameters keep their plain gradient.

``structure`` (recipe "diagonal approximation"): ``full`` uses ``G`` as it is, ``block`` keeps only the blocks within
each parameter tensor (a block-diagonal ``G``: one solve per tensor), ``diagonal`` only its diagonal. ``damping`` λ
(recipe "regularization") adds ``λ I``; as λ → ∞ the update tends to ``g / λ``, plain gradient descent rescaled.

Functions here are the algebra (:func:`energy_gradients`, :func:`precondition_direction`) and two closed-form Fisher
matrices the tests and the study check estimates against (:func:`linear_gaussian_fisher`, :func:`laplace_ica_fisher`).
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch.func import functional_call, jacrev

from pfzoo import distributed
from pfzoo.models.capabilities import Capability, MissingCapability, describe
from pfzoo.training.objective import Objective
from pfzoo.validation import check_choice, check_finite_number, check_positive_int

METRICS = ("model_fisher", "data_fisher", "energy", "relative")
STRUCTURES = ("full", "block", "diagonal")
_CHUNK = 128


def _trainable(model) -> list[tuple[str, torch.nn.Parameter]]:
    return [(name, parameter) for name, parameter in model.named_parameters() if parameter.requires_grad]


def energy_gradients(model, x: torch.Tensor) -> torch.Tensor:
    """Per-example gradients ``∇_θ F(x_n)`` of the free energy, ``[B, P]`` (float64), for ``x [B, V]``; the columns
    follow ``model.named_parameters()`` (trainable ones), each tensor flattened row-major."""
    named = _trainable(model)
    values = {name: parameter.detach() for name, parameter in named}
    rows = []
    # forward is log p* = −F: its Jacobian in the parameters, negated. jacrev costs (rows out) × (rows in), so it runs
    # on chunks of _CHUNK rows (vmap over single rows would trip the models' data-dependent input checks).
    for chunk in x.split(_CHUNK):
        jacobian = jacrev(lambda params, chunk=chunk: functional_call(model, params, (chunk,)))(values)
        rows.append(torch.cat([jacobian[name].reshape(chunk.shape[0], -1) for name, _ in named], dim=1))
    return -torch.cat(rows).double()


def _covariance(rows: torch.Tensor) -> torch.Tensor:
    centered = rows - rows.mean(0)
    return centered.T @ centered / rows.shape[0]


def _model_mean(model, num_samples: int, generator: torch.Generator | None) -> torch.Tensor:
    """``E_p[∇_θ F] = −∇_θ log Z`` ``[P]``: by autograd of a closed-form log Z, else over ``num_samples`` model samples."""
    if Capability.CLOSED_FORM_LOG_Z in model.capabilities:
        named = _trainable(model)
        with torch.enable_grad():
            grads = torch.autograd.grad(model.log_partition(), [p for _, p in named], allow_unused=True)
        return -torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for g, (_, p) in zip(grads, named)]).double()
    return energy_gradients(model, model.sample(num_samples, generator=generator)).mean(0)


def measure_metric(model, batch: torch.Tensor, metric: str, *, num_samples: int = 1000,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """The metric ``G [P, P]`` (float64) named ``metric`` (one of :data:`METRICS` but ``relative``, which has no
    matrix here; see the module docstring) at the model's current parameters, ``batch [B, V]`` the data:
    ``energy`` eq. 4.33, ``model_fisher`` eq. 4.30 (from ``num_samples`` model samples), ``data_fisher`` eq. 4.31."""
    check_choice(metric, "metric", ("model_fisher", "data_fisher", "energy"))
    if metric == "energy":
        return _covariance(energy_gradients(model, batch))
    if metric == "model_fisher":
        return _covariance(energy_gradients(model, model.sample(num_samples, generator=generator)))
    scores = energy_gradients(model, batch) - _model_mean(model, num_samples, generator)
    return scores.T @ scores / batch.shape[0]


def precondition_direction(
    gradient: torch.Tensor, metric: torch.Tensor, *, damping: float, sizes: list[int] | None = None, structure: str = "full",
) -> torch.Tensor:
    """``(G̃ + λ I)⁻¹ g`` for ``gradient g [P]`` and ``metric G [P, P]``, with ``G̃`` = ``G`` (``full``), its blocks of
    ``sizes`` along the diagonal (``block``; ``sizes`` sums to P, one per parameter tensor) or its diagonal
    (``diagonal``). Solved in float64 by Cholesky (least squares when ``G̃ + λI`` is singular, e.g. λ = 0 with fewer
    samples than parameters); returns ``[P]`` in ``gradient``'s dtype."""
    g = gradient.double()
    metric = metric.double()
    if structure == "diagonal":
        return (g / (metric.diagonal() + damping)).to(gradient.dtype)
    sizes = [g.numel()] if structure == "full" or sizes is None else sizes
    pieces, start = [], 0
    for size in sizes:
        block = metric[start:start + size, start:start + size]
        block = block + damping * torch.eye(size, dtype=block.dtype, device=block.device)
        factor, info = torch.linalg.cholesky_ex(block)
        piece = g[start:start + size]
        if int(info) == 0:
            pieces.append(torch.cholesky_solve(piece[:, None], factor)[:, 0])
        else:
            pieces.append(torch.linalg.lstsq(block, piece[:, None]).solution[:, 0])
        start += size
    return torch.cat(pieces).to(gradient.dtype)


def relative_gradient(gradient: torch.Tensor, filters: torch.Tensor) -> torch.Tensor:
    """Amari et al.'s (1996) natural gradient of a filter matrix: ``ΔW WᵀW`` for ``ΔW, W [L, M]`` → ``[L, M]``."""
    return gradient @ (filters.T @ filters)


def linear_gaussian_fisher(design: torch.Tensor) -> torch.Tensor:
    """Closed-form Fisher ``AᵀA [K, K]`` of ``p(x; θ) = N(x; Aθ, I)`` with ``design A [M, K]`` (the model of the
    chapter's Fig. 4.1): ``∇_θ log p = Aᵀ(x − Aθ)`` has covariance ``Aᵀ I A``, whatever θ."""
    return design.double().T @ design.double()


def laplace_ica_fisher(filters: torch.Tensor) -> torch.Tensor:
    """Closed-form Fisher ``[M², M²]`` of complete ICA with Laplace sources in its unmixing matrix ``W [M, M]``
    (row-major). The score is ``∂ log p/∂W = (I − φ(s) sᵀ) W⁻ᵀ`` with ``s = W x`` and ``φ = sign``; for independent
    Laplace ``s_i`` (``E s² = 2``, ``E|s| = 1``) ``Z = I − φ(s)sᵀ`` has ``E[Z_ij²] = 2`` and ``E[Z_ij Z_ji] = 1`` (i ≠ j),
    ``E[Z_ii²] = Var|s_i| = 1``, and no other correlations, so ``G = (I ⊗ W⁻¹) C (I ⊗ W⁻ᵀ)`` with ``C`` that table."""
    size = filters.shape[0]
    eye = torch.eye(size, dtype=torch.float64, device=filters.device)
    moments = torch.zeros(size, size, size, size, dtype=torch.float64, device=filters.device)
    for i in range(size):
        for j in range(size):
            if i == j:
                moments[i, i, i, i] = 1.0
            else:
                moments[i, j, i, j] = 2.0
                moments[i, j, j, i] = 1.0
    mixing = torch.linalg.inv(filters.double()).contiguous()
    # vec(Z W⁻ᵀ) = (I ⊗ W⁻¹) vec(Z) for row-major vec.
    transform = torch.kron(eye, mixing)
    return transform @ moments.reshape(size * size, size * size) @ transform.T


class NaturalGradient(Objective):
    """``objective``'s loss, with each update the natural gradient ``(G + λ I)⁻¹ g`` under the metric ``metric``.

    The metric is measured in :meth:`loss` (where the batch and the sampling generator are at hand: the model's samples
    for ``model_fisher``, the batch for ``data_fisher`` and ``energy``) at the current parameters, and applied to the
    gradients in :meth:`precondition`, after the inner objective's own preconditioning (e.g. centering). Only the
    model's parameters are preconditioned; an objective's own (NCE's normaliser) keeps its plain gradient.

    Args:
        objective: the objective whose updates are preconditioned (its state is this one's, under ``objective.``).
        metric: one of :data:`METRICS` (see the module docstring).
        damping: λ ≥ 0 added to the metric's diagonal (ignored by ``relative``). A metric estimated from a minibatch has
            rank at most the batch size, so a full solve with a tiny λ scales the gradient's component outside its span
            by 1/λ: with λ = 1e-4 the digits RBM (1,300 parameters, batches of 100, ``energy``) fell to −10,533 nats in
            5 epochs; with the default 1e-2 it reached −23.4 (diagonal: −22.5).
        structure: one of :data:`STRUCTURES` (ignored by ``relative``).
        num_samples: model samples per step for ``model_fisher`` (and for ``data_fisher`` without a closed-form log Z).
    """

    def __init__(
        self, objective: Objective, metric: str = "model_fisher", *, damping: float = 1e-2, structure: str = "full",
        num_samples: int = 1000,
    ) -> None:
        super().__init__()
        if not isinstance(objective, Objective):
            raise ValueError(f"objective must be a pfzoo.training.Objective to precondition, got {type(objective).__name__}")
        if isinstance(objective, NaturalGradient):
            raise ValueError("objective must not itself be a NaturalGradient (its updates are already preconditioned)")
        check_choice(metric, "metric", METRICS)
        check_choice(structure, "structure", STRUCTURES)
        self.objective = objective
        self.metric = metric
        self.damping = check_finite_number(damping, "damping", minimum=0.0)
        self.structure = structure
        self.num_samples = check_positive_int(num_samples, "num_samples")
        self._metric: torch.Tensor | None = None

    def caveats(self, model) -> tuple[str, ...]:
        return self.objective.caveats(model)

    def missing(self, model) -> str | None:
        return self.objective.missing(model) or self._metric_missing(model)

    def _metric_missing(self, model) -> str | None:
        """What the metric itself needs of ``model`` (None when it applies)."""
        if self.metric == "relative":
            return None if self._filters(model) else "a filter matrix (a 2-D parameter named '*filters') for the relative gradient"
        # the Fisher metrics differentiate the free energy of the visible units, F(v) = −log Σ_h e^{−E(v, h)}
        return None if Capability.EXACT_FREE_ENERGY in model.capabilities else Capability.EXACT_FREE_ENERGY.value

    def check(self, model) -> None:
        """The inner objective's refusal (naming it and the trainers that apply), else the metric's, which names the
        metrics that apply instead: another trainer would not help."""
        self.objective.check(model)
        need = self._metric_missing(model)
        if need is not None:
            others = [metric for metric in METRICS if metric != self.metric and NaturalGradient(self.objective, metric)._metric_missing(model) is None]
            instead = f"trainer.natural_gradient.metric={' or '.join(others)}" if others else "no natural gradient (trainer.natural_gradient=null)"
            raise MissingCapability(f"NaturalGradient(metric={self.metric!r}) needs {need}; {type(model).__name__} {describe(model)} — use {instead}")

    @staticmethod
    def _filters(model) -> set[str]:
        """The names of the model's filter matrices: trainable 2-D parameters named ``*filters``."""
        return {name for name, parameter in _trainable(model) if name.endswith("filters") and parameter.dim() == 2}

    def start_epoch(self, epoch: int) -> None:
        self.objective.start_epoch(epoch)

    def attach_data(self, data) -> None:
        self.objective.attach_data(data)

    def prepare(self, model, train: torch.Tensor, *, generator: torch.Generator | None = None) -> bool:
        return self.objective.prepare(model, train, generator=generator)

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None,
             indices: torch.Tensor | None = None) -> torch.Tensor:
        """The inner objective's loss of ``batch [B, V]``; also measures the metric ``G [P, P]`` at the current θ."""
        extra = {"indices": indices} if self.objective.epoch_stateful else {}
        loss = self.objective.loss(model, batch, generator=generator, **extra)
        if self.metric != "relative":
            self._metric = self.measure(model, batch, generator=generator)
        return loss

    def measure(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """The metric ``G [P, P]`` (float64) at the model's current parameters, ``batch [B, V]`` the data
        (:func:`measure_metric`)."""
        return measure_metric(model, batch, self.metric, num_samples=self.num_samples, generator=generator)

    def precondition(self, model) -> None:
        """Replace the gradients in the model's ``.grad`` by the natural gradient (after the inner preconditioning)."""
        self.objective.precondition(model)
        named = _trainable(model)
        if self.metric == "relative":
            filters = self._filters(model)
            with torch.no_grad():
                for name, parameter in named:
                    if parameter.grad is not None and name in filters:
                        parameter.grad.copy_(relative_gradient(parameter.grad, parameter.detach()))
            return
        gradient = torch.cat([(torch.zeros_like(p) if p.grad is None else p.grad).reshape(-1) for _, p in named])
        sizes = [p.numel() for _, p in named]
        direction = precondition_direction(gradient, self._shared_metric(gradient), damping=self.damping, sizes=sizes,
                                           structure=self.structure)
        with torch.no_grad():
            for (_, parameter), piece in zip(named, direction.split(sizes)):
                if parameter.grad is not None:
                    parameter.grad.copy_(piece.view_as(parameter))
        self._metric = None  # measured afresh at the next step's parameters

    def _shared_metric(self, gradient: torch.Tensor) -> torch.Tensor:
        """The metric measured in this step's :meth:`loss`; under a ``torch.distributed`` process group the mean of
        the ranks' (each measured on its own shard and sampling stream), so that every rank takes the same step. A rank
        left without rows (a minibatch smaller than the world size) measured nothing and counts for nothing."""
        if not distributed.is_active():
            if self._metric is None:
                raise ValueError("NaturalGradient.precondition needs a metric: call loss(model, batch) first in the same step")
            return self._metric
        size = gradient.numel()
        measured = self._metric is not None
        metric = self._metric if measured else torch.zeros(size, size, dtype=torch.float64, device=gradient.device)
        flag = torch.full((1,), float(measured), dtype=torch.float64, device=gradient.device)
        buffer = torch.cat([metric.reshape(-1), flag])  # one all_reduce: the metrics' sum and how many ranks measured
        torch.distributed.all_reduce(buffer)
        return buffer[:-1].view(size, size) / buffer[-1].clamp_min(1.0)

    def epoch_metrics(self) -> dict[str, float]:
        return self.objective.epoch_metrics()

    def extra_repr(self) -> str:
        return f"metric={self.metric!r}, damping={self.damping}, structure={self.structure!r}, num_samples={self.num_samples}"


def natural_gradient_from_settings(objective: Objective, settings: Mapping | None) -> Objective:
    """``objective`` wrapped in :class:`NaturalGradient` with the keyword ``settings`` (the Trainer's
    ``natural_gradient``: e.g. ``{metric: relative}``), or ``objective`` itself when ``settings`` is None."""
    if settings is None:
        return objective
    if not isinstance(settings, Mapping):
        raise ValueError(f"natural_gradient must be null or a mapping of NaturalGradient settings (metric, damping, structure, "
                         f"num_samples), got {type(settings).__name__}")
    unknown = sorted(set(settings) - {"metric", "damping", "structure", "num_samples"})
    if unknown:
        raise ValueError(f"natural_gradient has unknown settings {', '.join(map(str, unknown))}: expected metric, damping, "
                         f"structure, num_samples")
    return NaturalGradient(objective, **dict(settings))
