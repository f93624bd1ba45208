"""Estimator base class and the result types every estimator returns."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from pfzoo.estimators.importance import exact_free_energy_affordable, importance_log_marginal
from pfzoo.models.base import EnergyModel
from pfzoo.validation import check_generator, check_matrix

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while an estimator runs; the app turns it into a progress bar."""


class BoundKind(str, enum.Enum):
    """What an estimate is, which decides how it may be reported."""

    EXACT = "exact"
    UNBIASED_Z = "unbiased Z: stochastic lower bound on log Z, so the log-likelihood is biased upward"
    LIKELIHOOD_LOWER_BOUND = "stochastic lower bound on the log-likelihood"


@dataclass(frozen=True)
class PartitionEstimate:
    """An estimate of ``log Z``.

    log_z: the estimate.
    stderr: its standard error (0 for exact answers); for importance-weighted estimates the
        delta-method ``sd(w) / (sqrt(N) mean(w))``.
    log_weights: float64 ``[N]`` per-chain log importance weights, or ``None`` (exact).
    ess: effective sample size of the weights, or ``None``.
    kind: :class:`BoundKind` of the estimate.
    info: estimator settings and diagnostics (chains, steps, schedule, base, ...).
    """

    log_z: float
    stderr: float
    log_weights: torch.Tensor | None
    ess: float | None
    kind: BoundKind
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LikelihoodEstimate:
    """An estimate of per-example log-likelihoods ``log p(v_n)`` on a data set.

    mean: mean over the examples.
    stderr: standard error of ``mean`` due to the estimator's randomness (what to compare with
        an exact answer on the same data).
    per_example: float64 ``[B]``.
    log_z: the partition-function estimate used, if any.
    data_stderr: ``sd(per_example) / sqrt(B)``, the sampling error of the mean as an estimate of
        the expected log-likelihood under the data distribution.
    kind: :class:`BoundKind`.
    info: estimator settings and diagnostics.
    """

    mean: float
    stderr: float
    per_example: torch.Tensor
    log_z: PartitionEstimate | None
    data_stderr: float
    kind: BoundKind
    info: dict[str, Any] = field(default_factory=dict)


class Estimator(nn.Module):
    """A partition-function / log-likelihood estimator, pluggable into any model that offers what it needs.

    ``est(model, data=..., generator=g)`` returns a :class:`PartitionEstimate`;
    ``est.log_likelihood(model, data, generator=g)`` returns a :class:`LikelihoodEstimate`.
    Estimators never print; pass ``progress`` to follow long runs.

    ``posterior_samples``: for models without an affordable exact free energy (DBM, DBN),
    :meth:`log_likelihood` estimates ``log f(v)`` by importance sampling with this many proposals
    per example (:func:`~pfzoo.estimators.importance.importance_log_marginal`); ``None`` refuses.
    """

    posterior_samples: int | None = None

    def forward(
        self,
        model: EnergyModel,
        *,
        data: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> PartitionEstimate:
        raise NotImplementedError

    def log_likelihood(
        self,
        model: EnergyModel,
        data: torch.Tensor,
        *,
        base_data: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> LikelihoodEstimate:
        """``log p(v) = log f(v) - log Ẑ`` for ``data [B, V]``.

        ``log f(v) = -F(v)`` exactly when the model's free energy is affordable; otherwise by
        importance sampling with :attr:`posterior_samples` proposals per example, whose per-example
        standard errors are added (in quadrature, averaged) to the stderr of ``log Ẑ``.
        ``base_data`` (default: ``data``) is what a data-dependent base distribution is fitted to;
        pass the training set so test examples do not inform the estimate.
        """
        check_matrix(data, "data", width=model.num_visible, device=model.device)
        check_generator(generator, model.device)
        estimate = self(model, data=data if base_data is None else base_data, generator=generator, progress=progress)
        info: dict[str, Any] = {}
        if exact_free_energy_affordable(model):
            with torch.no_grad():
                log_marginal = model.unnormalized_log_prob(data).double()
            marginal_variance = 0.0
        elif self.posterior_samples is not None:
            marginal = importance_log_marginal(model, data, self.posterior_samples, generator=generator)
            log_marginal = marginal.log_marginal
            marginal_variance = (marginal.stderr**2).sum().item() / data.shape[0] ** 2
            info["posterior_samples"] = self.posterior_samples
        else:
            raise ValueError(
                f"{type(model).__name__}'s free energy is not exactly computable at this size; "
                f"use an estimator with posterior_samples set (e.g. AIS) or RAISE"
            )
        per_example = log_marginal - estimate.log_z
        return LikelihoodEstimate(
            mean=per_example.mean().item(),
            stderr=math.sqrt(estimate.stderr**2 + marginal_variance),
            per_example=per_example,
            log_z=estimate,
            data_stderr=sample_stderr(per_example),
            kind=estimate.kind,
            info=info,
        )


def sample_stderr(values: torch.Tensor) -> float:
    """``sd(values) / sqrt(n)``; 0 for a single value."""
    if values.numel() < 2:
        return 0.0
    return (values.std(unbiased=True) / math.sqrt(values.numel())).item()
