"""Annealing paths and schedules."""

from pfzoo.paths.base import AnnealingPath
from pfzoo.paths.gaussian_rbm import GaussianRBMGeometricPath
from pfzoo.paths.geometric import RBMGeometricPath
from pfzoo.paths.schedules import LinearSchedule, Schedule, SigmoidSchedule, make_betas

__all__ = ["AnnealingPath", "GaussianRBMGeometricPath", "RBMGeometricPath", "Schedule", "LinearSchedule", "SigmoidSchedule", "make_betas"]
