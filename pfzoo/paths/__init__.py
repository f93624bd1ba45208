"""Annealing paths and schedules."""

from pfzoo.paths.base import AnnealingPath
from pfzoo.paths.gaussian_rbm import GaussianRBMGeometricPath
from pfzoo.paths.geometric import RBMGeometricPath
from pfzoo.paths.ising import IsingGeometricPath
from pfzoo.paths.gaussian import GaussianGeometricPath, GaussianMomentAveragedPath, GaussianPath
from pfzoo.paths.moment_averaged_rbm import RBMSplinePath, exact_rbm_moments, fit_moment_averaged_knots, rbm_moments
from pfzoo.paths.schedules import GeometricSchedule, LinearSchedule, OptimalSchedule, PowerSchedule, Schedule, SigmoidSchedule, make_betas, schedule_from_name

__all__ = [
    "AnnealingPath", "GaussianGeometricPath", "GaussianMomentAveragedPath", "GaussianPath", "GaussianRBMGeometricPath",
    "IsingGeometricPath", "RBMGeometricPath", "Schedule", "LinearSchedule", "SigmoidSchedule", "GeometricSchedule",
    "OptimalSchedule", "PowerSchedule", "make_betas", "schedule_from_name", "RBMSplinePath", "fit_moment_averaged_knots", "rbm_moments", "exact_rbm_moments",
]
