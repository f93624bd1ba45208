"""How the model comparison names a HAIS setting (its leapfrog step and β schedule) in its rows and its report."""

from __future__ import annotations

from pfzoo.studies.model_comparison.settings import GEOMETRIC_START

SCHEDULE_TEXT = {"linear": "linear β", "geometric": f"geometric β from {GEOMETRIC_START:g}"}
"""A β schedule's name in the report: linear, or geometric from its first nonzero β."""


def step_text(step_size: float, stiffness: float) -> str:
    """The leapfrog step of a HAIS setting, e.g. ``ε = 0.05 / √(1 + 30 β)``."""
    return f"ε = {step_size:g}" if stiffness == 0 else f"ε = {step_size:g} / √(1 + {stiffness:.0f} β)"
