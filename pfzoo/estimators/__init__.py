"""Partition-function and log-likelihood estimators."""

from pfzoo.estimators.ais import AIS
from pfzoo.estimators.base import BoundKind, Estimator, LikelihoodEstimate, PartitionEstimate
from pfzoo.estimators.exact import Exact

__all__ = ["AIS", "BoundKind", "Estimator", "Exact", "LikelihoodEstimate", "PartitionEstimate"]
