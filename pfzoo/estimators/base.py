"""Estimator protocols, the result types every estimator returns, and the one reduction of per-example values.

Two protocols: partition estimators (:class:`PartitionEstimator`, ``est(model, data=..., generator=g)`` →
:class:`PartitionEstimate`) and likelihood estimators (:class:`LikelihoodEstimator`,
``est.log_likelihood(model, data, base_data=..., generator=g)`` → :class:`LikelihoodEstimate`). A
partition estimator is also a likelihood estimator (``log p(v) = log f(v) − log Ẑ``). Each estimator
states what it needs of a model (:meth:`Estimator.check`) and refuses, once and in one line, a model
that lacks it, naming the estimators that do apply.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from pfzoo.estimators import trust
from pfzoo.estimators.importance import importance_log_marginal
from pfzoo.estimators.tail_bounds import order_statistic_bound
from pfzoo.logmath import PARETO_K_UNRELIABLE, pareto_tail_index
from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability, MissingCapability, check_is_model, describe, join_alternatives
from pfzoo.validation import check_generator

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while an estimator runs; the app turns it into a progress bar."""

MIN_ESS_FRACTION = 0.05
"""An importance-weighted estimate whose ESS is below this fraction of its chains (or below 2) is flagged."""

MIN_EFFECTIVE_CHAINS = 8
"""An importance-weighted estimate whose ESS is below this many chains (or below half its chains, when it has fewer
than 16) is flagged too: its delta-method stderr is a variance estimated from that few effective draws (AIS with a
linear schedule and 50 chains landed 4 nats below the exact log Z with ESS 7.5, and on an RBM with weights ×10, 10
chains along 10 linear steps, 3.5 nats below with stderr 0.53 and ESS 2.8: 5 % of the chains flagged neither)."""

MIN_ACCEPTANCE = 0.05
"""A kernel whose mean acceptance falls below this in some stretch of the schedule is flagged."""

MIN_TAIL_FIT_CHAINS = 50
"""Fewest chains whose log weights get a Pareto tail fit: with fewer the fit's own noise (±0.2 at 50) would flag
healthy runs."""


class BoundKind(str, enum.Enum):
    """What an estimate is, which decides how it may be reported."""

    EXACT = "exact"
    UNBIASED_Z = "unbiased Z: stochastic lower bound on log Z, so the log-likelihood is biased upward"
    LIKELIHOOD_LOWER_BOUND = "stochastic lower bound on the log-likelihood"
    CONSISTENT = "consistent estimate of log Z, neither bound (a ratio of means, as bridge sampling)"


@dataclass(frozen=True)
class ConfidenceBound:
    """With probability at least ``confidence`` over the estimator's randomness, the true ``quantity`` lies on the
    ``relation`` side of ``value``: ``"log Z" "≥" 517.2`` reads "log Z ≥ 517.2"."""

    quantity: str
    relation: str
    value: float
    confidence: float
    rule: str = "Markov's inequality"

    def __str__(self) -> str:
        return f"{self.quantity} {self.relation} {self.value:.4f} with probability ≥ {self.confidence:g} ({self.rule})"


def markov_slack(confidence: float) -> float:
    """``log(1/(1 − c))``: an unbiased ``Ẑ ≥ 0`` exceeds ``Z/(1 − c)`` with probability at most ``1 − c`` (Markov's
    inequality), so ``log Ẑ`` overshoots ``log Z`` by more than this with probability at most ``1 − c`` (RAISE §2.2,
    after Gogate, Bidyuk & Dechter 2007)."""
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be a probability strictly between 0 and 1, got {confidence!r}")
    return -math.log1p(-confidence)


@dataclass(frozen=True)
class PartitionEstimate:
    """An estimate of ``log Z``.

    log_z: the estimate.
    stderr: its standard error (0 for exact answers); for importance-weighted estimates the
        delta-method ``sd(w) / (sqrt(N) mean(w))``.
    log_weights: float64 ``[N]`` per-chain log importance weights, or ``None`` (exact).
    ess: effective sample size of the weights, or ``None``.
    kind: :class:`BoundKind` of the estimate.
    info: estimator settings and diagnostics (chains, steps, schedule, base, ``acceptance`` per stretch of
        the schedule where the kernel can reject, ...).
    warnings: one line per reason not to trust the estimate (small ESS, collapsed acceptance); empty when none.
    """

    log_z: float
    stderr: float
    log_weights: torch.Tensor | None
    ess: float | None
    kind: BoundKind
    info: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # the checks every estimate gets, whichever estimator made it (pfzoo.estimators.trust)
        _add_warnings(self, trust.value_warnings(self.log_z, self.stderr, stochastic=self.kind is not BoundKind.EXACT))

    def markov_bound(self, confidence: float = 0.95) -> ConfidenceBound | None:
        """``log Z ≥ log Ẑ − log(1/(1 − c))`` at confidence c for an unbiased ``Ẑ`` (:func:`markov_slack`); ``None`` for
        exact values and for estimates that are not unbiased for Z (bridge sampling's ratio of means)."""
        slack = markov_slack(confidence)
        if self.kind is not BoundKind.UNBIASED_Z:
            return None
        return ConfidenceBound("log Z", "≥", self.log_z - slack, confidence)

    def order_statistic_bound(self, confidence: float = 0.95) -> ConfidenceBound | None:
        """A sharper ``log Z ≥ …`` at confidence c than :meth:`markov_bound`, from the independent unbiased estimates in
        ``log_weights`` (AIS's chains, SMC's groups) combined as Gogate, Bidyuk & Dechter (2007) suggest
        (:func:`pfzoo.estimators.tail_bounds.order_statistic_bound`); ``None`` where :meth:`markov_bound` is."""
        if self.kind is not BoundKind.UNBIASED_Z or self.log_weights is None:
            markov_slack(confidence)
            return None
        value, rule = order_statistic_bound(self.log_weights, confidence)
        return ConfidenceBound("log Z", "≥", value, confidence, f"order statistics of independent unbiased estimates: the {rule}")


@dataclass(frozen=True)
class LikelihoodEstimate:
    """An estimate of per-example log-likelihoods ``log p(v_n)`` on a data set.

    mean: mean over the examples.
    stderr: standard error of ``mean`` due to the estimator's randomness (what to compare with
        an exact answer on the same data).
    per_example: float64 ``[B]``.
    partition: the partition-function estimate used, if any.
    data_stderr: ``sd(per_example) / sqrt(n)`` with n the size of the data set evaluated, the sampling
        error of the mean as an estimate of the expected log-likelihood under the data distribution.
    kind: :class:`BoundKind`.
    info: estimator settings and diagnostics.
    warnings: one line per reason not to trust the estimate; empty when none.
    independent_examples: whether each example's estimate came from its own chains (RAISE, posterior annealing), so
        that their product is unbiased for the product of the examples' likelihoods (:meth:`markov_bound`).
    """

    mean: float
    stderr: float
    per_example: torch.Tensor
    partition: PartitionEstimate | None
    data_stderr: float
    kind: BoundKind
    info: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    independent_examples: bool = False

    def __post_init__(self) -> None:
        # the checks every estimate gets, whichever estimator made it (pfzoo.estimators.trust); a lower bound's chains
        # start at the data, so a zero stderr there means they never moved
        _add_warnings(self, trust.value_warnings(self.mean, self.stderr, stochastic=self.kind is not BoundKind.EXACT,
                                                 frozen_chains=self.kind is BoundKind.LIKELIHOOD_LOWER_BOUND))

    def markov_bound(self, confidence: float = 0.95) -> ConfidenceBound | None:
        """What Markov's inequality guarantees about the mean log-likelihood of the examples evaluated, at confidence c
        (:func:`markov_slack` ``s = log(1/(1 − c))``), or ``None`` where it guarantees nothing:

        - a stochastic lower bound whose per-example estimates ``p̂_n`` are unbiased: the mean of ``p̂_n / p_n`` has
          expectation 1 and bounds their geometric mean, so ``mean log p ≥ mean log p̂ − s`` (the RAISE paper's
          conservative claim, §2.2); with independent chains per example the product ``Π p̂_n`` is unbiased for
          ``Π p_n`` and the slack shrinks to ``s / B``. RAISE's ``p̂`` is unbiased for the annealed model's
          likelihood, which approaches the model's with the number of steps.
        - an unbiased ``Ẑ`` with exact free energies: ``log Z ≥ log Ẑ − s``, so the true mean is at most ``mean + s``.
          This is an upper bound, not a conservative one: AIS can overstate the log-likelihood without limit, and
          Markov's inequality only bounds how far it understates it.
        """
        slack = markov_slack(confidence)
        if self.kind is BoundKind.LIKELIHOOD_LOWER_BOUND:
            share = slack / self.per_example.numel() if self.independent_examples else slack
            return ConfidenceBound("mean log-likelihood", "≥", self.per_example.double().mean().item() - share, confidence)
        if self.kind is BoundKind.UNBIASED_Z and "posterior_samples" not in self.info:
            return ConfidenceBound("mean log-likelihood", "≤", self.mean + slack, confidence)
        return None


def _add_warnings(estimate: PartitionEstimate | LikelihoodEstimate, lines: tuple[str, ...]) -> None:
    """Append to a (frozen) estimate's warnings the ``lines`` it does not already carry."""
    new = tuple(line for line in lines if line not in estimate.warnings)
    if new:
        object.__setattr__(estimate, "warnings", estimate.warnings + new)


_ESTIMATORS: dict[str, type["Estimator"]] = {}


class Estimator(nn.Module):
    """What every estimator shares: a config name, the capability check and its refusal.

    Subclasses set :attr:`config_name` (the ``conf/estimator`` file that selects them, used in refusals
    to name what applies instead) and implement :meth:`missing`. Estimators never print; pass
    ``progress`` to follow long runs.
    """

    config_name: str | None = None

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("config_name"):
            _ESTIMATORS[cls.config_name] = cls

    def missing(self, model: EnergyModel) -> str | None:
        """What :meth:`log_likelihood` needs and ``model`` lacks, in words ("a differentiable energy over real
        vectors"), or ``None`` when it applies."""
        raise NotImplementedError

    def applies_to(self, model: EnergyModel) -> bool:
        return self.missing(model) is None

    def check(self, model: EnergyModel) -> None:
        """Raise :class:`~pfzoo.models.MissingCapability` (one line) unless :meth:`log_likelihood` applies to ``model``:
        "<Estimator> needs <what>; <Model> <is ...> — use estimator=<those that apply>"; anything but a pfzoo model
        (a config name, an ``nn.Module``) is refused first (:func:`check_is_model`)."""
        check_is_model(model, type(self).__name__)
        need = self.missing(model)
        if need is not None:
            raise self.refusal(need, model)

    def refusal(self, need: str, model: EnergyModel) -> MissingCapability:
        message = f"{type(self).__name__} needs {need}; {type(model).__name__} {describe(model)}"
        others = [f"estimator={name}" for name in applicable_estimators(model) if name != self.config_name]
        return MissingCapability(message + (f" — use {join_alternatives(others)}" if others else ""))


def applicable_estimators(model: EnergyModel) -> list[str]:
    """Config names of the estimators (in their default settings) whose :meth:`Estimator.check` accepts ``model``."""
    names = []
    for name, cls in sorted(_ESTIMATORS.items()):
        try:
            applies = cls().applies_to(model)
        except (TypeError, ValueError):  # an estimator that needs constructor arguments is not a default choice
            applies = False
        if applies:
            names.append(name)
    return names


class LikelihoodEstimator(Estimator):
    """``log_likelihood(model, data, *, base_data, generator, progress) -> LikelihoodEstimate``."""

    def log_likelihood(
        self,
        model: EnergyModel,
        data: torch.Tensor,
        *,
        base_data: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> LikelihoodEstimate:
        raise NotImplementedError


class PartitionEstimator(LikelihoodEstimator):
    """``est(model, *, data, generator, progress) -> PartitionEstimate``, and log-likelihoods through ``log Ẑ``.

    ``posterior_samples``: for models without an affordable exact free energy (DBM, DBN),
    :meth:`log_likelihood` estimates ``log f(v)`` by importance sampling with this many proposals
    per example (:func:`~pfzoo.estimators.importance.importance_log_marginal`); ``None`` refuses.
    """

    posterior_samples: int | None = None

    def missing_for_partition(self, model: EnergyModel) -> str | None:
        """What :meth:`forward` needs and ``model`` lacks, or ``None``."""
        raise NotImplementedError

    def check_partition(self, model: EnergyModel) -> None:
        """Raise :class:`~pfzoo.models.MissingCapability` (one line) unless :meth:`forward` applies to ``model``."""
        check_is_model(model, type(self).__name__)
        need = self.missing_for_partition(model)
        if need is not None:
            raise self.refusal(need, model)

    def missing(self, model: EnergyModel) -> str | None:
        need = self.missing_for_partition(model)
        if need is not None:
            return need
        offered = model.capabilities
        if Capability.EXACT_FREE_ENERGY not in offered and not (
            self.posterior_samples is not None and Capability.POSTERIOR_PROPOSAL in offered
        ):
            return "an exact free energy or a proposal for the latent units (posterior_samples)"
        return None

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
        self.check(model)
        model.check_visible(data, "data")
        if base_data is not None:  # checked here under its own name: forward would call it data
            model.check_visible(base_data, "base_data")
        check_generator(generator, model.device)
        estimate = self(model, data=data if base_data is None else base_data, generator=generator, progress=progress)
        return self.log_likelihood_given(model, data, estimate, generator=generator)

    def log_likelihood_given(self, model: EnergyModel, data: torch.Tensor, estimate: PartitionEstimate, *,
                             generator: torch.Generator | None = None) -> LikelihoodEstimate:
        """:meth:`log_likelihood`'s second half: ``log p(v) = log f(v) − log Ẑ`` for ``data [B, V]`` with the
        ``estimate`` of ``log Z`` already made (for instance pooled from parts, :func:`pfzoo.estimators.pool_parts`).
        With ``generator`` in the state the estimate left it (the generator the last part ran with), the numbers are
        those :meth:`log_likelihood` gives in one go."""
        self.check(model)
        model.check_visible(data, "data")
        check_generator(generator, model.device)
        if not isinstance(estimate, PartitionEstimate):
            raise ValueError(f"estimate must be a PartitionEstimate (a log Z estimate of this model), got {type(estimate).__name__}")
        info: dict[str, Any] = {}
        if Capability.EXACT_FREE_ENERGY in model.capabilities:
            with torch.no_grad():
                log_marginal = model.unnormalized_log_prob(data).double()
            marginal_variance = 0.0
        else:
            marginal = importance_log_marginal(model, data, self.posterior_samples, generator=generator)
            log_marginal = marginal.log_marginal
            marginal_variance = (marginal.stderr**2).sum().item() / data.shape[0] ** 2
            info["posterior_samples"] = self.posterior_samples
        per_example = log_marginal - estimate.log_z
        return likelihood_estimate(
            per_example, stderr=math.sqrt(estimate.stderr**2 + marginal_variance), kind=estimate.kind, info=info,
            partition=estimate, warnings=estimate.warnings, discrete=discrete_visible(model),
        )


def likelihood_estimate(
    per_example: torch.Tensor,
    *,
    stderr: float,
    kind: BoundKind,
    info: dict[str, Any],
    mean: float | None = None,
    num_data: int | None = None,
    partition: PartitionEstimate | None = None,
    warnings: tuple[str, ...] = (),
    independent_examples: bool = False,
    discrete: bool = False,
) -> LikelihoodEstimate:
    """The one place a :class:`LikelihoodEstimate` is assembled from per-example estimates ``[B]``.

    ``mean`` defaults to their mean (RAISE's control variates give another); ``stderr`` is the estimator's
    own error of that mean (each estimator knows how its examples' errors combine); ``data_stderr`` is
    always ``sd(per_example) / √n`` with n = ``num_data`` (default B), the size of the test set the mean
    stands for — RAISE on a subset of n examples reports the sampling error of the full set's mean.
    ``discrete``: the visible units are discrete (:func:`discrete_visible`), so a log-likelihood above 0 is flagged
    (:func:`~pfzoo.estimators.trust.log_likelihood_warnings`).
    """
    num_data = per_example.numel() if num_data is None else num_data
    data_stderr = sample_stderr(per_example) * math.sqrt(per_example.numel() / num_data)
    mean = per_example.mean().item() if mean is None else mean
    warnings = tuple(warnings) + trust.log_likelihood_warnings(per_example, mean, stderr, discrete=discrete)
    return LikelihoodEstimate(
        mean=mean, stderr=stderr, per_example=per_example,
        partition=partition, data_stderr=data_stderr, kind=kind, info=info, warnings=warnings,
        independent_examples=independent_examples,
    )


def discrete_visible(model: EnergyModel) -> bool:
    """Whether ``model``'s visible units take discrete values (so every ``log p(v) ≤ 0``)."""
    return Capability.BINARY_STATES in model.capabilities


def independent_examples_stderr(per_example_stderr: torch.Tensor) -> float:
    """``sqrt(Σ_n se_n²) / B``: the stderr of a mean of B estimates made with independent chains per example."""
    return math.sqrt(per_example_stderr.double().square().sum().item()) / per_example_stderr.numel()


def reliability_warnings(
    ess: float | None,
    num_chains: int,
    acceptance: torch.Tensor | None = None,
    segment_betas: torch.Tensor | None = None,
    log_weights: torch.Tensor | None = None,
    remedy: str = "anneal longer (num_steps) or with more chains",
) -> tuple[str, ...]:
    """One line per reason an importance-weighted estimate may be wrong: log weights (``[..., N]``) that are NaN or
    +∞ somewhere (:func:`~pfzoo.estimators.trust.nonfinite_weight_warnings`; then the only warning), an ESS below
    :data:`MIN_ESS_FRACTION` of the chains or below :data:`MIN_EFFECTIVE_CHAINS` (at most half the chains; the weights
    are dominated by a few chains and the delta-method stderr understates the error), a kernel's acceptance below
    :data:`MIN_ACCEPTANCE` somewhere on the schedule (the chains stopped moving, so the weights describe where they
    started), or ``log_weights [N]`` (N ≥ :data:`MIN_TAIL_FIT_CHAINS`) whose Pareto k̂ exceeds :data:`~pfzoo.logmath.PARETO_K_UNRELIABLE` (a heavy
    tail: the chains that would dominate the mean were probably not drawn, which the ESS of the drawn ones cannot show).
    ``remedy`` ends the weight warnings: what to change for a better estimate."""
    warnings = list(trust.nonfinite_weight_warnings(log_weights, num_chains, remedy))
    if warnings:  # no tail, ESS or stderr means anything once a weight is not a number
        return tuple(warnings)
    if log_weights is not None and log_weights.dim() == 1 and log_weights.numel() >= MIN_TAIL_FIT_CHAINS:
        k = pareto_tail_index(log_weights)
        if k > PARETO_K_UNRELIABLE:
            warnings.append(
                f"log weights are heavy-tailed (Pareto k̂ = {k:.2f} > {PARETO_K_UNRELIABLE}): rare chains would move the "
                f"mean, so the estimate and its stderr are unreliable; {remedy}"
            )
    if ess is not None and ess < max(2.0, MIN_ESS_FRACTION * num_chains, min(MIN_EFFECTIVE_CHAINS, num_chains / 2)):
        warnings.append(
            f"ESS {ess:.1f} of {num_chains} chains: a few chains carry the weight, so the stderr understates the error; "
            f"{remedy}"
        )
    if acceptance is not None and acceptance.numel() and acceptance.min().item() < MIN_ACCEPTANCE:
        worst = int(acceptance.argmin())
        where = f" near β = {segment_betas[worst].item():.3g}" if segment_betas is not None else ""
        warnings.append(
            f"kernel acceptance fell to {acceptance[worst].item():.3f}{where}: the chains barely move there; "
            f"reduce the step size (or raise stiffness) and anneal again"
        )
    return tuple(warnings)


def sample_stderr(values: torch.Tensor) -> float:
    """``sd(values) / sqrt(n)``; 0 for a single value."""
    if values.numel() < 2:
        return 0.0
    return (values.std(unbiased=True) / math.sqrt(values.numel())).item()
