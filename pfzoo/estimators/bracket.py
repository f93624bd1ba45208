"""Bracketing the log-likelihood between AIS (from above) and RAISE (from below), RAISE §6's practical advice."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pfzoo.estimators.ais import AIS
from pfzoo.estimators.base import LikelihoodEstimate, LikelihoodEstimator, ProgressCallback
from pfzoo.estimators.raise_ import RAISE
from pfzoo.models.base import EnergyModel


@dataclass(frozen=True)
class BracketEstimate(LikelihoodEstimate):
    """The lower (RAISE) estimate as a :class:`LikelihoodEstimate`, with the upper one and their gap beside it.

    upper: the AIS estimate (its ``log Ẑ`` is a stochastic lower bound, so it tends to be too high).
    lower: the RAISE estimate (a stochastic lower bound on the annealing model's log-likelihood); ``mean``,
        ``stderr`` and the rest are its.
    gap: ``upper.mean - lower.mean``; gap_stderr its standard error.
    ``warnings`` holds the gap's warning (when it exceeds the threshold) first, then each estimate's own.
    """

    upper: LikelihoodEstimate | None = None
    lower: LikelihoodEstimate | None = None
    gap: float = math.nan
    gap_stderr: float = math.nan


class Bracket(LikelihoodEstimator):
    """Run an upper-biased estimator (AIS) and RAISE on the same data and report both and their gap.

    When the two agree, both are probably accurate; when they disagree by more than
    ``gap_threshold`` nats, one of them is wrong, typically AIS overestimating because ``log Ẑ`` is
    too low (RAISE §6 / Table 1: uniform-init AIS on CD-trained RBMs). Both must use annealing
    paths long enough that RAISE's annealing model is close to the model.

    Args:
        upper: an estimator whose ``log_likelihood`` is biased upward (default ``AIS()``, base rates).
        lower: a :class:`RAISE` estimator (default ``RAISE()``).
        gap_threshold: nats of disagreement above which a warning is set.
    """

    config_name = "bracket"

    def __init__(self, upper: LikelihoodEstimator | None = None, lower: LikelihoodEstimator | None = None, gap_threshold: float = 1.0) -> None:
        super().__init__()
        if not (isinstance(gap_threshold, (int, float)) and math.isfinite(gap_threshold) and gap_threshold > 0):
            raise ValueError(f"gap_threshold must be a positive finite number of nats, got {gap_threshold!r}")
        self.upper = AIS() if upper is None else upper
        self.lower = RAISE() if lower is None else lower
        for name, estimator in (("upper", self.upper), ("lower", self.lower)):
            if not isinstance(estimator, LikelihoodEstimator):
                raise ValueError(f"{name} must be a pfzoo.estimators likelihood estimator, got {type(estimator).__name__}")
        self.gap_threshold = float(gap_threshold)

    def missing(self, model: EnergyModel) -> str | None:
        """Both sides must apply: what the first side that does not apply needs."""
        return self.upper.missing(model) or self.lower.missing(model)

    def log_likelihood(
        self,
        model: EnergyModel,
        data: torch.Tensor,
        *,
        base_data: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> BracketEstimate:
        """Both estimates on ``data [B, V]``; progress reports the upper run then the lower one."""
        self.check(model)
        upper = self.upper.log_likelihood(model, data, base_data=base_data, generator=generator, progress=_half(progress, 0))
        lower = self.lower.log_likelihood(model, data, base_data=base_data, generator=generator, progress=_half(progress, 1))
        gap = upper.mean - lower.mean
        gap_stderr = math.sqrt(upper.stderr**2 + lower.stderr**2)
        warnings = []
        if gap > self.gap_threshold:
            warnings.append(
                f"the upper estimate exceeds the lower one by {gap:.2f} ± {gap_stderr:.2f} nats (threshold "
                f"{self.gap_threshold:g}): at least one is inaccurate; anneal longer (num_steps) or use the "
                f"base-rate initial distribution before trusting either"
            )
        elif gap < -self.gap_threshold:
            warnings.append(
                f"the lower estimate exceeds the upper one by {-gap:.2f} ± {gap_stderr:.2f} nats (threshold "
                f"{self.gap_threshold:g}): at least one is inaccurate — AIS's log Ẑ can overshoot when its weights "
                f"are dominated by a few chains, and RAISE's annealing model can fit the data better than the model "
                f"at this num_steps; anneal longer with more chains before trusting either"
            )
        if warnings and upper.warnings:  # AIS's log Ẑ failing is the usual cause; say so before anything else
            warnings[0] += f" (likely cause: the {type(self.upper).__name__} side flagged itself: {upper.warnings[0]})"
        return BracketEstimate(
            mean=lower.mean, stderr=lower.stderr, per_example=lower.per_example, partition=upper.partition,
            data_stderr=lower.data_stderr, kind=lower.kind, info=lower.info,
            warnings=tuple(warnings) + upper.warnings + lower.warnings, independent_examples=lower.independent_examples,
            upper=upper, lower=lower, gap=gap, gap_stderr=gap_stderr,
        )


def _half(progress: ProgressCallback | None, index: int) -> ProgressCallback | None:
    """Map a sub-run's progress onto half ``index`` of the overall bar."""
    if progress is None:
        return None

    def report(done: int, total: int) -> None:
        progress(index * total + done, 2 * total)

    return report
