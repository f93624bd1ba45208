"""Which of two models fits a test set better, and by how much, from the ratio of their partition functions alone
(*Deep Learning* eqs. 18.38–18.40): neither ``Z`` is estimated."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pfzoo.estimators.bridge import BRIDGES, BridgeRatio, bridge_log_ratio
from pfzoo.logmath import PARETO_K_UNRELIABLE
from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability, MissingCapability, describe
from pfzoo.validation import check_generator, check_positive_int

MODEL_DRAWS_PER_CHAIN = 1
"""Each model's sampler returns the last state of independent chains: one draw per chain."""


@dataclass(frozen=True)
class ModelComparison:
    """``mean_n [log p_A(x_n) − log p_B(x_n)]`` over a test set, and its parts.

    difference: the mean log-likelihood difference (positive: A fits the test set better).
    stderr: its standard error from the estimate of ``log Z_A − log Z_B`` (the test set held fixed).
    data_stderr: ``sd_n(log p_A(x_n) − log p_B(x_n)) / √n``, the test set's sampling error of the difference.
    log_z_difference, log_z_difference_stderr: the bridge-sampling estimate of ``log Z_A − log Z_B``.
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
    bridge: str = "optimal",
    generator: torch.Generator | None = None,
) -> ModelComparison:
    """Compare two models over the same visible space on ``test [n, V]`` without estimating either partition function.

    ``log p_A(x) − log p_B(x) = F_B(x) − F_A(x) − (log Z_A − log Z_B)``: the free energies are exact, and
    ``log Z_A − log Z_B`` is estimated by bridge sampling (:func:`~pfzoo.estimators.bridge.bridge_log_ratio` with
    ``p_0 = p_B``, ``p_1 = p_A`` and ``ℓ(x) = F_B(x) − F_A(x)``) from ``num_samples`` draws of each model by its own
    sampler (``model.sample``: exact where the family allows, else the last states of independent MCMC chains). Where
    a sampler misses some of its model's modes, the ratio misses their mass: the warnings then usually show heavy tails.
    """
    for name, model in (("model_a", model_a), ("model_b", model_b)):
        need = comparison_missing(model)
        if need is not None:
            raise MissingCapability(f"comparing models needs {need}; {name} ({type(model).__name__}) {describe(model)}")
    if model_a.num_visible != model_b.num_visible:
        raise ValueError(f"model_a and model_b must share a visible space, got {model_a.num_visible} and {model_b.num_visible} units")
    if bridge not in BRIDGES:
        raise ValueError(f"bridge must be one of {', '.join(BRIDGES)}, got {bridge!r}")
    check_positive_int(num_samples, "num_samples")
    if num_samples < 2:
        raise ValueError(f"num_samples must be at least 2 to report a standard error, got {num_samples}")
    model_a.check_visible(test, "test")
    check_generator(generator, model_a.device)
    draws_b = model_b.sample(num_samples, generator=generator).to(model_a.dtype)
    draws_a = model_a.sample(num_samples, generator=generator).to(model_b.dtype)

    def log_ratio(x: torch.Tensor) -> torch.Tensor:  # ℓ(x) = log f_A(x) − log f_B(x)
        return (model_b.free_energy(x.to(model_b.dtype)).double() - model_a.free_energy(x.to(model_a.dtype)).double())

    ratio: BridgeRatio = bridge_log_ratio(log_ratio(draws_b), log_ratio(draws_a).view(-1, MODEL_DRAWS_PER_CHAIN), bridge=bridge)
    per_example = log_ratio(test) - ratio.log_ratio
    data_stderr = (per_example.std() / math.sqrt(per_example.numel())).item() if per_example.numel() > 1 else 0.0
    warnings = []
    if ratio.tail_index is not None and ratio.tail_index > PARETO_K_UNRELIABLE:
        warnings.append(f"the bridge between the two models is heavy-tailed (Pareto k̂ = {ratio.tail_index:.2f}): they overlap "
                        f"little, so log Z_A − log Z_B and the difference are unreliable; draw more samples (num_samples)")
    return ModelComparison(
        difference=per_example.mean().item(), stderr=ratio.stderr, data_stderr=data_stderr, log_z_difference=ratio.log_ratio,
        log_z_difference_stderr=ratio.stderr, mean_free_energy_difference=log_ratio(test).mean().item(), num_test=test.shape[0],
        info={"num_samples": num_samples, "bridge": bridge, "iterations": ratio.iterations}, warnings=tuple(warnings),
    )
