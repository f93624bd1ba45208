"""What a model offers, declared by the model, and the one-sentence refusal when a consumer needs what it lacks.

Estimators, paths and trainers never ask a model for its class: they ask for capabilities
(``Capability.REAL_ENERGY in model.capabilities``) and, when one is missing, raise
:class:`MissingCapability` through :func:`require`, naming the consumer, what it needs, what the
model is and what to use instead, e.g.

    HAIS needs a differentiable energy over real vectors; RBM has binary states — use estimator=ais, csl, exact or raise
"""

from __future__ import annotations

import enum
from typing import Iterable


class Capability(str, enum.Enum):
    """One thing a model offers; the value is how a refusal names it."""

    BINARY_STATES = "binary states"
    REAL_ENERGY = "a differentiable energy over real vectors"
    BLOCK_GIBBS = "exact block-Gibbs conditionals at inverse temperature β"
    VISIBLE_GIBBS_CHAIN = "a Gibbs chain over its visible units with the other units summed out"
    HIDDEN_CHAIN = "Gibbs chains over a first hidden layer with a Bernoulli p(v | h)"
    POSTERIOR_PROPOSAL = "a proposal for its latent units given the visible ones"
    LATENT_GENERATIVE = "a prior over latents and a likelihood p(x | z) (a latent-variable generative model)"
    EXACT_LOG_Z = "an exact log Z at its size (closed form or enumeration)"
    CLOSED_FORM_LOG_Z = "a closed-form, differentiable log Z"
    GAUSSIAN_MOMENTS = "a Gaussian density with its mean and covariance in closed form"
    EXACT_FREE_ENERGY = "an exact free energy at its size"
    MEAN_FIELD = "a mean-field posterior over several hidden layers (a DBM)"
    RECONSTRUCTION = "a mean-field reconstruction of its visible units through its hidden ones"
    PAIRWISE_COUPLINGS = "symmetric pairwise couplings between its units (a fully visible Boltzmann machine)"
    RBM_STACK = "a stack of RBMs trained one at a time, bottom first (a DBN)"
    CENTERING = "a centered parametrisation of its binary layers (offsets its gradient can be centered on)"
    ANALYTIC_SCORE = "an analytic score and Laplacian of its log density (score_and_laplacian(x, *, kink_bandwidth))"
    HIDDEN_MEANS = "the means of its hidden units given the visible ones (hidden_means(v), one tensor per hidden layer)"


class MissingCapability(ValueError):
    """A consumer (estimator, path, trainer) was given a model that lacks what it needs; the message is one line."""


def describe(model) -> str:
    """What the model is, in a few words, for a refusal: "has binary states", "is over real vectors", ...; a model
    whose Z is infinite says why (its :meth:`~pfzoo.models.EnergyModel.improper_reason`: singular filters, a Student-t
    shape λ ≤ ½), since that, not its kind, is then what takes an exact log Z away."""
    offered = model.capabilities
    if Capability.LATENT_GENERATIVE in offered:
        kind = "is a latent-variable generative model"
    elif Capability.BINARY_STATES in offered:
        kind = "has binary states"
    elif Capability.REAL_ENERGY in offered:
        kind = "is an energy over real vectors without latents"
    else:
        kind = "is real-valued with binary hidden units"
    improper = None if model.device.type == "meta" else model.improper_reason()  # a meta model has no values to judge
    return kind if improper is None else f"{kind}, and {improper}"


def check_is_model(model: object, by: str) -> None:
    """Refuse in one line anything but a pfzoo model handed to ``by`` (an estimator's name): a config name such as
    ``"rbm"`` or a plain ``nn.Module`` would otherwise fail deep inside with an AttributeError."""
    if getattr(type(model), "capabilities", None) is None:  # the class's: the property itself may compute (a POE's rank)
        raise ValueError(f"{by} needs a pfzoo model (a pfzoo.models.EnergyModel, e.g. pfzoo.zoo.pretrained(name) or "
                         f"pfzoo.models.RBM(...)), got {type(model).__name__} {model!r:.60}")


def require(model, *needed: Capability, by: str, alternatives: Iterable[str] = (), any_of: bool = False) -> None:
    """Raise :class:`MissingCapability` unless ``model`` offers every capability in ``needed`` (or one of them, ``any_of``).

    ``by`` names the consumer ("HAIS"); ``alternatives`` are what to use instead ("estimator=ais").
    """
    offered = getattr(model, "capabilities", None)
    if offered is None:
        raise MissingCapability(f"{by} needs a pfzoo model (pfzoo.models.EnergyModel), got {type(model).__name__}")
    missing = [need for need in needed if need not in offered]
    if not missing or (any_of and len(missing) < len(needed)):
        return
    need = " or ".join(m.value for m in missing) if any_of else " and ".join(m.value for m in missing)
    raise MissingCapability(refusal(by, need, model, alternatives))


def refusal(by: str, need: str, model, alternatives: Iterable[str] = ()) -> str:
    """The one-line refusal: "<by> needs <need>; <Model> <what it is> — use <alternatives>"."""
    alternatives = list(alternatives)
    message = f"{by} needs {need}; {type(model).__name__} {describe(model)}"
    if alternatives:
        message += f" — use {join_alternatives(alternatives)}"
    return message


def join_alternatives(names: list[str]) -> str:
    """``["estimator=ais", "estimator=raise"]`` → "estimator=ais or raise" (one prefix, listed once)."""
    if not names:
        return ""
    prefix, _, first = names[0].partition("=")
    if first and all(name.startswith(prefix + "=") for name in names):
        values = [name.split("=", 1)[1] for name in names]
        return f"{prefix}=" + (values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1])
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
