"""Partition-function and log-likelihood estimators."""

from pfzoo.estimators.ais import AIS
from pfzoo.estimators.base import BoundKind, Estimator, LikelihoodEstimate, PartitionEstimate
from pfzoo.estimators.exact import Exact
from pfzoo.estimators.hais import HAIS

__all__ = ["AIS", "BoundKind", "Estimator", "Exact", "HAIS", "LikelihoodEstimate", "PartitionEstimate"]
