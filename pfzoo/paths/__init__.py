"""Annealing paths, the registry that maps a model family to its paths and bases, and schedules.

Importing this package registers every family's paths (each path module registers its own).
"""

from pfzoo.paths.base import AnnealingPath
from pfzoo.paths.binary_energy import BinaryGeometricPath
from pfzoo.paths.continuous import ContinuousGeometricPath
from pfzoo.paths.gaussian import GaussianGeodesicPath, GaussianGeometricPath, GaussianMomentAveragedPath, GaussianPath
from pfzoo.paths.gaussian_rbm import GaussianRBMGeometricPath
from pfzoo.paths.geometric import RBMGeometricPath
from pfzoo.paths.ising import IsingGeometricPath
from pfzoo.paths.model_pair import RBMPairPath, pair_path, register_pair_path
from pfzoo.paths.moment_averaged_rbm import RBMSplinePath, exact_rbm_moments, fit_moment_averaged_knots, rbm_moments
from pfzoo.paths.posterior import PosteriorPath
from pfzoo.paths.registry import (
    build, build_from_base, is_annealable, make_base, path_kinds, register_family, register_path, resolve_base,
)
from pfzoo.paths.schedules import (
    EnergyScaleSchedule, GeometricSchedule, LinearSchedule, OptimalSchedule, PowerSchedule, Schedule, SigmoidSchedule, make_betas,
    schedule_from_name,
)

__all__ = [
    "AnnealingPath", "BinaryGeometricPath", "ContinuousGeometricPath", "GaussianGeodesicPath", "GaussianGeometricPath", "GaussianMomentAveragedPath",
    "GaussianPath", "GaussianRBMGeometricPath", "IsingGeometricPath", "PosteriorPath", "RBMGeometricPath", "RBMSplinePath",
    "Schedule", "LinearSchedule", "SigmoidSchedule", "GeometricSchedule", "OptimalSchedule", "PowerSchedule", "EnergyScaleSchedule", "build",
    "build_from_base", "make_base",
    "exact_rbm_moments", "fit_moment_averaged_knots", "is_annealable", "make_betas", "path_kinds", "rbm_moments",
    "RBMPairPath", "pair_path", "register_family", "register_pair_path", "register_path", "resolve_base", "schedule_from_name",
]
