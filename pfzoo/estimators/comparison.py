"""Which of two models fits a test set better, and by how much, from the ratio of their partition functions alone
(*Deep Learning* eqs. 18.38–18.40): neither ``Z`` is estimated."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pfzoo.estimators.annealing import anneal
from pfzoo.estimators.bridge import BRIDGES, BridgeRatio, bridge_log_ratio
from pfzoo.logmath import PARETO_K_UNRELIABLE, log_mean_exp
from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability, MissingCapability, describe
from pfzoo.paths.model_pair import pair_path
from pfzoo.paths.schedules import make_betas
from pfzoo.validation import check_generator, check_positive_int, check_sample_count

MODEL_DRAWS_PER_CHAIN = 1
"""Each model's sampler returns the last state of independent chains: one draw per chain."""

BRACKET_THRESHOLD = 1.0
"""Nats by which the one-sided estimates may be out of order or apart before the comparison warns."""


@dataclass(frozen=True)
class ModelComparison:
    """``mean_n [log p_A(x_n) − log p_B(x_n)]`` over a test set, and its parts.

    difference: the mean log-likelihood difference (positive: A fits the test set better).
    stderr: its standard error from the estimate of ``log Z_A − log Z_B`` (the test set held fixed).
    data_stderr: ``sd_n(log p_A(x_n) − log p_B(x_n)) / √n``, the test set's sampling error of the difference.
    log_z_difference, log_z_difference_stderr: the bridge-sampling estimate of ``log Z_A − log Z_B``.
    log_z_difference_bracket: the two one-sided estimates of ``log Z_A − log Z_B`` the bridge combines: importance
        sampling from B's draws (a stochastic lower bound) and from A's draws (a stochastic upper bound). With
        representative draws they bracket the truth; a lower end above the upper one means a sampler's draws do not
        represent its model.
    mean_free_energy_difference: ``mean_n [F_B(x_n) − F_A(x_n)]``, exact.
    num_test: n.
    info: settings and diagnostics (draws, effective draws, bridge iterations).
    warnings: one line per reason not to trust the comparison.
    """

    difference: float
    stderr: float
    data_stderr: float
    log_z_difference: float
    log_z_difference_stderr: float
    log_z_difference_bracket: tuple[float, float]
    mean_free_energy_difference: float
    num_test: int
    info: dict
    warnings: tuple[str, ...]

    @property
    def better(self) -> str:
        """"A" or "B": the model with the higher estimated mean test log-likelihood."""
        return "A" if self.difference > 0 else "B"

    @property
    def significant(self) -> bool:
        """Whether the difference exceeds three of its combined standard errors (estimator and test set)."""
        return abs(self.difference) > 3 * math.hypot(self.stderr, self.data_stderr)


def comparison_missing(model: EnergyModel) -> str | None:
    """What :func:`compare` needs of each model and ``model`` lacks, or ``None``."""
    if Capability.EXACT_FREE_ENERGY not in model.capabilities:
        return "an exact free energy (log p_A − log p_B needs both models' unnormalised log-probabilities)"
    return None


@torch.no_grad()
def compare(
    model_a: EnergyModel,
    model_b: EnergyModel,
    test: torch.Tensor,
    *,
    num_samples: int = 1000,
    num_steps: int = 100,
    bridge: str = "optimal",
    generator: torch.Generator | None = None,
) -> ModelComparison:
    """Compare two models over the same visible space on ``test [n, V]`` without estimating either partition function.

    ``log p_A(x) − log p_B(x) = F_B(x) − F_A(x) − (log Z_A − log Z_B)``: the free energies are exact, and
    ``log Z_A − log Z_B`` is estimated by bridge sampling (:func:`~pfzoo.estimators.bridge.bridge_log_ratio` with
    ``p_0 = p_B`` and ``p_1 = p_A``) from ``num_samples`` draws of each model: exact where the family can draw them
    (``model.exact_samples``: RBMs with a layer of at most 20 units, exactly sampled families), else by its sampler
    (``model.sample``: the last states of independent MCMC chains).

    Where the family has a path between two of its models (:func:`~pfzoo.paths.model_pair.pair_path`: RBMs) and
    ``num_steps > 1``, each draw is annealed to the other model in ``num_steps`` steps and ℓ is its log weight (B's
    draws annealed to A) or minus it (A's draws annealed back to B): Bennett's acceptance ratio over annealing
    (Crooks 2000), which keeps working where the two models overlap too little for a direct bridge. Otherwise
    ``ℓ(x) = F_B(x) − F_A(x)`` at the draws. Where a sampler misses some of its model's modes, the ratio misses their
    mass: the warnings then usually show heavy tails.
    """
    for name, model in (("model_a", model_a), ("model_b", model_b)):
        need = comparison_missing(model)
        if need is not None:
            raise MissingCapability(f"comparing models needs {need}; {name} ({type(model).__name__}) {describe(model)}")
    if model_a.num_visible != model_b.num_visible:
        raise ValueError(f"model_a and model_b must share a visible space, got {model_a.num_visible} and {model_b.num_visible} units")
    if model_a.binary_visible != model_b.binary_visible:  # else one model's draws reach the other's check as "data must be binary"
        kinds = {True: "binary", False: "real-valued"}
        raise ValueError(f"model_a and model_b must model the same kind of data, got {type(model_a).__name__} over "
                         f"{kinds[model_a.binary_visible]} and {type(model_b).__name__} over {kinds[model_b.binary_visible]} "
                         f"visible units: a density ratio needs one space (compare each model's test log-likelihood instead)")
    if model_a.dtype != model_b.dtype or model_a.device != model_b.device:
        raise ValueError(f"model_a and model_b must share a dtype and a device, got {model_a.dtype} on {model_a.device} and "
                         f"{model_b.dtype} on {model_b.device}; convert one, e.g. model_b.to(model_a.dtype)")
    if bridge not in BRIDGES:
        raise ValueError(f"bridge must be one of {', '.join(BRIDGES)}, got {bridge!r}")
    check_positive_int(num_steps, "num_steps")
    check_sample_count(num_samples, "num_samples")
    model_a.check_visible(test, "test")
    check_generator(generator, model_a.device)
    exact = {}
    draws = {}
    for name, model in (("b", model_b), ("a", model_a)):
        drawn = model.exact_samples(num_samples, generator=generator)
        exact[name] = drawn is not None
        draws[name] = drawn if drawn is not None else model.sample(num_samples, generator=generator)
    draws_b, draws_a = draws["b"], draws["a"]

    def log_ratio(x: torch.Tensor) -> torch.Tensor:  # ℓ(x) = log f_A(x) − log f_B(x)
        return model_b.free_energy(x).double() - model_a.free_energy(x).double()

    path = pair_path(model_b, model_a) if num_steps > 1 else None  # β = 0 at B, β = 1 at A
    if path is None:
        from_b, from_a = log_ratio(draws_b), log_ratio(draws_a)
    else:
        betas = make_betas("linear", num_steps).to(model_a.device)
        from_b = anneal(path, betas, path.init(draws_b, generator=generator), generator=generator).log_weights
        from_a = -anneal(path, betas.flip(0), path.init(draws_a, generator=generator), generator=generator).log_weights
    ratio: BridgeRatio = bridge_log_ratio(from_b, from_a.view(-1, MODEL_DRAWS_PER_CHAIN), bridge=bridge)
    lower, upper = log_mean_exp(from_b, 0).item(), -log_mean_exp(-from_a.reshape(-1), 0).item()
    free_energy_difference = log_ratio(test)  # F_B(x_n) − F_A(x_n), exact
    per_example = free_energy_difference - ratio.log_ratio
    data_stderr = (per_example.std() / math.sqrt(per_example.numel())).item() if per_example.numel() > 1 else 0.0
    warnings = []
    if lower > upper + BRACKET_THRESHOLD:
        warnings.append(f"the one-sided estimates of log Z_A − log Z_B are out of order (from B's draws {lower:.2f}, a lower bound; "
                        f"from A's draws {upper:.2f}, an upper bound): a model's sampler does not reach its distribution, so the "
                        f"comparison is unreliable; sample longer or anneal between the models in more steps")
    elif upper - lower > BRACKET_THRESHOLD:
        warnings.append(f"the one-sided estimates of log Z_A − log Z_B are {upper - lower:.2f} nats apart ({lower:.2f} to {upper:.2f}): "
                        f"the bridge between them is only as good as the draws; anneal between the models in more steps")
    if ratio.tail_index is not None and ratio.tail_index > PARETO_K_UNRELIABLE:
        warnings.append(f"the bridge between the two models is heavy-tailed (Pareto k̂ = {ratio.tail_index:.2f}): they overlap "
                        f"little, so log Z_A − log Z_B and the difference are unreliable; draw more samples (num_samples)")
    return ModelComparison(
        difference=per_example.mean().item(), stderr=ratio.stderr, data_stderr=data_stderr, log_z_difference=ratio.log_ratio,
        log_z_difference_stderr=ratio.stderr, log_z_difference_bracket=(lower, upper), mean_free_energy_difference=free_energy_difference.mean().item(), num_test=test.shape[0],
        info={"num_samples": num_samples, "num_steps": num_steps if path is not None else 1, "bridge": bridge, "iterations": ratio.iterations,
              "exact_draws_a": exact["a"], "exact_draws_b": exact["b"]},
        warnings=tuple(warnings),
    )
