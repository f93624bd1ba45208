"""Partition-function and log-likelihood estimators."""

from pfzoo.estimators.ais import AIS
from pfzoo.estimators.base import BoundKind, Estimator, LikelihoodEstimate, PartitionEstimate
from pfzoo.estimators.bracket import Bracket, BracketEstimate
from pfzoo.estimators.csl import CSL
from pfzoo.estimators.exact import Exact
from pfzoo.estimators.hais import HAIS
from pfzoo.estimators.importance import importance_log_marginal
from pfzoo.estimators.raise_ import RAISE

__all__ = [
    "AIS",
    "BoundKind",
    "Bracket",
    "BracketEstimate",
    "CSL",
    "Estimator",
    "Exact",
    "HAIS",
    "LikelihoodEstimate",
    "PartitionEstimate",
    "RAISE",
    "importance_log_marginal",
]
