"""pfzoo: probabilistic models with intractable partition functions, their estimators and trainers."""

__version__ = "0.2.0"

from pfzoo import schema  # noqa: E402,F401  registers the typed schemas of conf/train.yaml and evaluate.yaml with Hydra
from pfzoo import estimators, models, zoo  # noqa: E402,F401  so that `import pfzoo; pfzoo.zoo.pretrained(...)` works
