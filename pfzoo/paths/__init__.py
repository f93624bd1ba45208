"""Annealing paths and schedules."""

from pfzoo.paths.base import AnnealingPath
from pfzoo.paths.gaussian_rbm import GaussianRBMGeometricPath
from pfzoo.paths.geometric import RBMGeometricPath
from pfzoo.paths.ising import IsingGeometricPath
from pfzoo.paths.schedules import LinearSchedule, Schedule, SigmoidSchedule, make_betas

__all__ = ["AnnealingPath", "GaussianRBMGeometricPath", "IsingGeometricPath", "RBMGeometricPath", "Schedule", "LinearSchedule", "SigmoidSchedule", "make_betas"]
