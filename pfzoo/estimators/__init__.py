"""Partition-function and log-likelihood estimators: partition estimators (``est(model)``) and likelihood
estimators (``est.log_likelihood(model, data)``), each checking once what it needs of a model."""

from pfzoo.estimators.ais import AIS, pool_parts
from pfzoo.estimators.base import (
    BoundKind, ConfidenceBound, Estimator, LikelihoodEstimate, LikelihoodEstimator, PartitionEstimate, PartitionEstimator,
    applicable_estimators, markov_slack,
)
from pfzoo.estimators.bracket import Bracket, BracketEstimate
from pfzoo.estimators.bridge import BridgeRatio, BridgeSampling, bridge_log_ratio
from pfzoo.estimators.csl import CSL
from pfzoo.estimators.exact import Exact
from pfzoo.estimators.hais import HAIS
from pfzoo.estimators.importance import importance_log_marginal
from pfzoo.estimators.importance_sampling import ImportanceSampling
from pfzoo.estimators.linked import LinkedImportanceSampling
from pfzoo.estimators.raise_ import RAISE
from pfzoo.estimators.sandwich import Sandwich, SandwichEstimate
from pfzoo.estimators.smc import SMC
from pfzoo.estimators.stepping_stone import SteppingStone

__all__ = [
    "AIS", "BoundKind", "Bracket", "BracketEstimate", "BridgeRatio", "BridgeSampling", "CSL", "ConfidenceBound", "Estimator", "Exact",
    "HAIS", "ImportanceSampling", "LikelihoodEstimate", "LinkedImportanceSampling", "LikelihoodEstimator", "PartitionEstimate", "PartitionEstimator", "RAISE",
    "SMC", "Sandwich", "SandwichEstimate", "SteppingStone", "applicable_estimators", "bridge_log_ratio", "importance_log_marginal", "markov_slack", "pool_parts",
]
