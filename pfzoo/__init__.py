"""pfzoo: probabilistic models with intractable partition functions, their estimators and trainers."""

__version__ = "0.1.0"
