"""The model zoo: energy-based and latent-variable models as ``nn.Module``s."""

from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability, MissingCapability
from pfzoo.models.bilinear_generative import BilinearGenerative
from pfzoo.models.continuous import ContinuousModel
from pfzoo.models.dbm import DBM
from pfzoo.models.dbn import DBN
from pfzoo.models.energy_function import EnergyFunction
from pfzoo.models.gaussian import Gaussian
from pfzoo.models.gaussian_rbm import GaussianBernoulliRBM
from pfzoo.models.hopfield import Hopfield
from pfzoo.models.ica import ICA
from pfzoo.models.ising import Ising
from pfzoo.models.latent import LatentGenerativeModel
from pfzoo.models.linear_generative import LinearGenerative
from pfzoo.models.mcrbm import MeanCovarianceRBM
from pfzoo.models.poe import ProductOfExperts
from pfzoo.models.rbm import RBM
from pfzoo.models.registry import model_class, register_model, registered_models

__all__ = [
    "BilinearGenerative",
    "Capability",
    "ContinuousModel",
    "DBM",
    "DBN",
    "EnergyFunction",
    "EnergyModel",
    "Gaussian",
    "GaussianBernoulliRBM",
    "Hopfield",
    "ICA",
    "Ising",
    "LatentGenerativeModel",
    "LinearGenerative",
    "MeanCovarianceRBM",
    "MissingCapability",
    "ProductOfExperts",
    "RBM",
    "model_class",
    "register_model",
    "registered_models",
]
