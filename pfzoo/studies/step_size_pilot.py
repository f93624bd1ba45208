"""Step-size pilot for Hamiltonian AIS: choose the leapfrog ε, its β-scaling and the schedule from short runs.

HAIS (Sohl-Dickstein & Culpepper 2011) takes one leapfrog step of size ε per intermediate distribution. Too
large an ε and the chains stop accepting where the target is stiff (near β = 1, or everywhere for a peaked
model); too small and they barely move. With stiffness s > 0 the step at β is ε / √(1 + β s)
(:class:`~pfzoo.kernels.HMCKernel`): ε sized for the base, shrinking as a posterior stiffens. No closed form
picks ε, s and the β schedule, so a pilot runs every candidate :class:`HAISSetting` on a small problem and
keeps the one with the **largest estimate**. Both quantities a pilot can measure are stochastic lower bounds:

- per-example ``log p̂(x)`` of a latent-variable model (HAIS eqs. 27–29): ``E[ŵ] = p(x)``, so by Jensen
  ``E[log p̂(x)] ≤ log p(x)``;
- ``log Ẑ`` of an energy model (Neal 2001, eq. 3): ``E[Ẑ] = Z``, so ``E[log Ẑ] ≤ log Z``,

hence the largest is the tightest. (For an energy model the log-likelihood ``mean(−E) − log Ẑ`` is biased the
other way, which is why the pilot ranks log Ẑ, not the likelihood.) Each trial keeps the kernel's mean acceptance
in each stretch of the schedule (``estimate.info["acceptance"]``), so a report can show *why* a setting lost.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Sequence

import torch

from pfzoo.estimators.hais import HAIS
from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability
from pfzoo.validation import check_generator, check_positive_int

logger = logging.getLogger(__name__)

STEP_GRID = (0.2, 0.1, 0.05, 0.025)
"""Candidate ε used at every β (stiffness 0); 0.2 is the paper's."""
SCALED_STEP_GRID = (1.0, 0.5, 0.2)
"""Candidate ε at β = 0 for each stiffness s > 0 (the step shrinks as ε / √(1 + β s))."""
SCHEDULES = ("linear", "geometric")
"""Candidate β schedules (:func:`pfzoo.paths.schedule_from_name` names); "geometric" is log-spaced from 10⁻³."""


@dataclass(frozen=True)
class HAISSetting:
    """One candidate: leapfrog ``step_size`` ε, ``stiffness`` s (0: the same ε at every β) and a ``schedule`` name."""

    step_size: float
    stiffness: float = 0.0
    schedule: str = "linear"

    def estimator(self, num_chains: int, num_steps: int, **kwargs) -> HAIS:
        """``HAIS(num_chains, num_steps, ε, schedule=..., stiffness=..., **kwargs)`` with this setting."""
        return HAIS(num_chains, num_steps, self.step_size, schedule=self.schedule, stiffness=self.stiffness, **kwargs)


@dataclass(frozen=True)
class PilotTrial:
    """One pilot run: its ``setting``, the ``bound`` it reached ± ``stderr``, the kernel's mean ``acceptance`` in each
    stretch of the schedule (float, ``[S]``; empty for kernels that never reject) and its wall time in ``seconds``."""

    setting: HAISSetting
    bound: float
    stderr: float
    acceptance: tuple[float, ...]
    seconds: float

    @property
    def acceptance_mean(self) -> float:
        """Mean acceptance over the stretches (they hold equal numbers of transitions, up to one)."""
        return sum(self.acceptance) / len(self.acceptance) if self.acceptance else float("nan")

    @property
    def acceptance_last(self) -> float:
        """Mean acceptance in the last stretch (the last tenth of the schedule: the stiffest distributions)."""
        return self.acceptance[-1] if self.acceptance else float("nan")


@dataclass(frozen=True)
class PilotResult:
    """Every trial in the order run; ``what`` the pilot measured ("log Ẑ" or "mean per-example log p̂(x)")."""

    trials: tuple[PilotTrial, ...]
    what: str

    @property
    def best(self) -> PilotTrial:
        """The trial with the largest bound (the first of equals)."""
        return max(self.trials, key=lambda trial: trial.bound)

    @property
    def setting(self) -> HAISSetting:
        return self.best.setting


def candidate_settings(
    step_grid: Sequence[float] = STEP_GRID,
    scaled_step_grid: Sequence[float] = SCALED_STEP_GRID,
    stiffness_grid: Sequence[float] = (),
    schedules: Sequence[str] = SCHEDULES,
) -> list[HAISSetting]:
    """Per schedule: every ε of ``step_grid`` at stiffness 0, then every ε of ``scaled_step_grid`` for each s of
    ``stiffness_grid``. Raises ``ValueError`` on a non-positive ε or a negative s."""
    if any(not eps > 0 for eps in (*step_grid, *scaled_step_grid)):
        raise ValueError(f"step sizes must be positive, got {list(step_grid)} and {list(scaled_step_grid)}")
    if any(not s >= 0 for s in stiffness_grid):
        raise ValueError(f"stiffness values must be non-negative, got {list(stiffness_grid)}")
    pairs = [(float(eps), 0.0) for eps in step_grid]
    pairs += [(float(eps), float(s)) for s in stiffness_grid for eps in scaled_step_grid]
    return [HAISSetting(eps, s, schedule) for schedule in schedules for eps, s in pairs]


def pilot_hais(
    model: EnergyModel,
    settings: Sequence[HAISSetting],
    *,
    num_chains: int,
    num_steps: int,
    data: torch.Tensor | None = None,
    base: str = "auto",
    generator: torch.Generator | None = None,
) -> PilotResult:
    """Run HAIS with every setting and rank them by the bound each reaches.

    A latent-variable generative model (``Capability.LATENT_GENERATIVE``) is scored by the mean per-example
    ``log p̂(x)`` over ``data [B, M]`` (required; use training data, not the data you will report on) with
    ``num_chains`` particles per example; any other model by ``log Ẑ`` from ``num_chains`` chains (``data``, if
    given, feeds a data-fitted ``base``). Every trial anneals ``num_steps`` distributions.

    Trial ``i`` draws from a fresh generator seeded with ``generator.initial_seed() + i`` (on the model's device),
    so a trial's numbers do not depend on which trials ran before it; ``generator=None`` uses torch's global stream.
    """
    settings = list(settings)
    if not settings:
        raise ValueError("settings must hold at least one HAISSetting")
    check_positive_int(num_chains, "num_chains")
    check_positive_int(num_steps, "num_steps")
    check_generator(generator, model.device)
    latent = Capability.LATENT_GENERATIVE in model.capabilities
    if latent and data is None:
        raise ValueError(f"data [B, {model.num_visible}] is required to pilot a latent-variable model (per-example log p̂(x))")
    trials = []
    for index, setting in enumerate(settings):
        trial_generator = None
        if generator is not None:
            trial_generator = torch.Generator(model.device).manual_seed(generator.initial_seed() + index)
        estimator = setting.estimator(num_chains, num_steps, base=base)
        began = time.perf_counter()
        if latent:
            estimate = estimator.log_likelihood(model, data, generator=trial_generator)
            bound, stderr, info = estimate.mean, estimate.stderr, estimate.info
        else:
            estimate = estimator(model, data=data, generator=trial_generator)
            bound, stderr, info = estimate.log_z, estimate.stderr, estimate.info
        trial = PilotTrial(setting, bound, stderr, tuple(info.get("acceptance", ())), time.perf_counter() - began)
        logger.info("pilot %s: %.4f ± %.4f, acceptance %.2f (last stretch %.2f)", setting, bound, stderr,
                    trial.acceptance_mean, trial.acceptance_last)
        trials.append(trial)
    return PilotResult(tuple(trials), "mean per-example log p̂(x)" if latent else "log Ẑ")
