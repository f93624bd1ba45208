"""pfzoo: probabilistic models with intractable partition functions, their estimators and trainers."""

__version__ = "0.1.0"

from pfzoo import schema  # noqa: E402,F401  registers conf/train.yaml's typed schema with Hydra's ConfigStore
