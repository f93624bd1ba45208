"""The model zoo: energy-based and latent-variable models as ``nn.Module``s."""

from pfzoo.models.base import EnergyModel
from pfzoo.models.gaussian_rbm import GaussianBernoulliRBM
from pfzoo.models.rbm import RBM
from pfzoo.models.registry import model_class, register_model, registered_models

__all__ = ["EnergyModel", "GaussianBernoulliRBM", "RBM", "model_class", "register_model", "registered_models"]
