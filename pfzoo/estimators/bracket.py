"""Bracketing the log-likelihood between AIS (from above) and RAISE (from below), RAISE §6's practical advice."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pfzoo.estimators.ais import AIS
from pfzoo.estimators.base import Estimator, LikelihoodEstimate, PartitionEstimate, ProgressCallback
from pfzoo.estimators.raise_ import RAISE
from pfzoo.models.base import EnergyModel


@dataclass(frozen=True)
class BracketEstimate:
    """Two estimates of the mean test log-likelihood that should sandwich the truth.

    upper: the AIS estimate (its ``log Ẑ`` is a stochastic lower bound, so it tends to be too high).
    lower: the RAISE estimate (a stochastic lower bound on the annealing model's log-likelihood).
    gap: ``upper.mean - lower.mean``; gap_stderr its standard error.
    warning: a message when the gap exceeds the threshold (at least one estimate is inaccurate), else ``None``.
    """

    upper: LikelihoodEstimate
    lower: LikelihoodEstimate
    gap: float
    gap_stderr: float
    warning: str | None


class Bracket(Estimator):
    """Run an upper-biased estimator (AIS) and RAISE on the same data and report both and their gap.

    When the two agree, both are probably accurate; when they disagree by more than
    ``gap_threshold`` nats, one of them is wrong, typically AIS overestimating because ``log Ẑ`` is
    too low (RAISE §6 / Table 1: uniform-init AIS on CD-trained RBMs). Both must use annealing
    paths long enough that RAISE's annealing model is close to the model.

    Args:
        upper: an estimator whose ``log_likelihood`` is biased upward (default ``AIS(base="base_rate")``).
        lower: a :class:`RAISE` estimator (default ``RAISE()``).
        gap_threshold: nats of disagreement above which :attr:`BracketEstimate.warning` is set.
    """

    def __init__(self, upper: Estimator | None = None, lower: Estimator | None = None, gap_threshold: float = 1.0) -> None:
        super().__init__()
        if gap_threshold <= 0:
            raise ValueError(f"gap_threshold must be positive (nats), got {gap_threshold}")
        self.upper = AIS(base="base_rate") if upper is None else upper
        self.lower = RAISE() if lower is None else lower
        for name, estimator in (("upper", self.upper), ("lower", self.lower)):
            if not isinstance(estimator, Estimator):
                raise ValueError(f"{name} must be a pfzoo.estimators.Estimator, got {type(estimator).__name__}")
        self.gap_threshold = float(gap_threshold)

    def forward(self, model: EnergyModel, **kwargs) -> PartitionEstimate:
        raise TypeError("Bracket compares log-likelihood estimates: call bracket.log_likelihood(model, data)")

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
        upper = self.upper.log_likelihood(model, data, base_data=base_data, generator=generator, progress=_half(progress, 0))
        lower = self.lower.log_likelihood(model, data, base_data=base_data, generator=generator, progress=_half(progress, 1))
        gap = upper.mean - lower.mean
        gap_stderr = math.sqrt(upper.stderr**2 + lower.stderr**2)
        warning = None
        if gap > self.gap_threshold:
            warning = (
                f"the upper estimate exceeds the lower one by {gap:.2f} ± {gap_stderr:.2f} nats (threshold "
                f"{self.gap_threshold:g}): at least one is inaccurate; anneal longer (num_steps) or use the "
                f"base-rate initial distribution before trusting either"
            )
        elif gap < -self.gap_threshold:
            warning = (
                f"the lower estimate exceeds the upper one by {-gap:.2f} ± {gap_stderr:.2f} nats, which neither "
                f"bias explains: check that both estimators saw the same data and model"
            )
        return BracketEstimate(upper=upper, lower=lower, gap=gap, gap_stderr=gap_stderr, warning=warning)


def _half(progress: ProgressCallback | None, index: int) -> ProgressCallback | None:
    """Map a sub-run's progress onto half ``index`` of the overall bar."""
    if progress is None:
        return None

    def report(done: int, total: int) -> None:
        progress(index * total + done, 2 * total)

    return report
