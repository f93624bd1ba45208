"""Choosing an annealing schedule by the bracket: the one whose AIS and RAISE agree best on held-out examples.

AIS's log-likelihood is biased upward and RAISE's is a stochastic lower bound (RAISE §6, Burda, Grosse &
Salakhutdinov 2015), so the schedule that closes the gap between them is the one whose annealing model is closest
to the model: a rule that needs no exact value. Run it on validation examples, never the test set, then measure
the test set with the chosen schedule. On the zoo's MNIST RBMs it picks ``power:5`` for CD1(20), CD1(500),
PCD(500) and CD25(500), ``sigmoid`` for PCD(20) and ``linear`` for the DBN (``estimators/raise/table.md``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pfzoo.studies.bracket_sweep import BracketPoint, bracket_sweep
from pfzoo.models.base import EnergyModel


@dataclass(frozen=True)
class SchedulePilot:
    """points: one :class:`BracketPoint` per candidate schedule, in the order given; chosen: the chosen schedule's name."""

    points: tuple[BracketPoint, ...]
    chosen: str


def pilot_schedule(
    model: EnergyModel,
    data: torch.Tensor,
    schedules: Sequence[str],
    *,
    num_steps: int,
    ais_chains: int = 1000,
    raise_chains: int = 10,
    posterior_samples: int = 100,
    base: str = "auto",
    base_data: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    raise_generator: torch.Generator | None = None,
) -> SchedulePilot:
    """The candidate in ``schedules`` (names such as ``"linear"``, ``"power:5"``) with the smallest |AIS − RAISE|.

    AIS (``ais_chains`` chains) and RAISE (``raise_chains`` reverse chains per example) run at K = ``num_steps``
    on every example of ``data [B, V]`` (held-out examples, e.g. a few dozen validation digits), each candidate
    on the same random streams (see :func:`~pfzoo.studies.bracket_sweep.bracket_sweep`, which also explains
    ``generator``, ``raise_generator``, ``base`` and ``base_data``). Many AIS chains matter: with 100, one
    heavy-tailed weight decided the pick on MNIST RBMs. Ties go to the earlier candidate; a candidate whose
    estimates are not finite is never chosen. Raises ``ValueError`` for no candidates, a repeated or unknown
    name, or when no candidate gives finite estimates.
    """
    names = [schedules] if isinstance(schedules, str) else list(schedules)
    if not names:
        raise ValueError("schedules must name at least one candidate schedule, got none")
    if len(set(names)) != len(names):
        raise ValueError(f"schedules must not repeat a candidate, got {names}")
    points = bracket_sweep(
        model, data, num_steps=num_steps, schedules=names, ais_chains=ais_chains, raise_chains=raise_chains,
        posterior_samples=posterior_samples, base=base, base_data=base_data, generator=generator, raise_generator=raise_generator,
    )
    finite = [point for point in points if math.isfinite(point.gap)]
    if not finite:
        raise ValueError(f"no candidate schedule among {names} gave finite AIS and RAISE estimates")
    return SchedulePilot(points=tuple(points), chosen=min(finite, key=lambda point: abs(point.gap)).schedule)
