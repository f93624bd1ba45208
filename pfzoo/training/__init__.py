"""Training objectives that avoid the partition function, their diagnostics, and the Trainer."""

from pfzoo.training.contrastive import CD, PCD
from pfzoo.training.maximum_likelihood import ExactMaximumLikelihood
from pfzoo.training.metrics import pseudo_log_likelihood, reconstruction_error
from pfzoo.training.mpf import PersistentMPF
from pfzoo.training.trainer import Trainer

__all__ = ["CD", "ExactMaximumLikelihood", "PCD", "PersistentMPF", "Trainer", "pseudo_log_likelihood", "reconstruction_error"]

from pfzoo.training.greedy import GreedyTrainer, train_greedy  # noqa: E402

__all__ += ["GreedyTrainer", "train_greedy"]

from pfzoo.training.dbm import DBMPersistentMeanField, compose_dbm, pretrain_dbm  # noqa: E402

__all__ += ["DBMPersistentMeanField", "compose_dbm", "pretrain_dbm"]
