"""Training objectives that avoid the partition function, their diagnostics, and the Trainer."""

from pfzoo.training.bit_flip_mpf import BitFlipMPF
from pfzoo.training.callbacks import TrainingCallback
from pfzoo.training.centering import Centered
from pfzoo.training.contrastive import CD, PCD
from pfzoo.training.dbm import DBMParallelTempering, DBMPersistentMeanField, pretrain_dbm, start_dbm_from_rbm
from pfzoo.training.denoising_score_matching import DenoisingScoreMatching
from pfzoo.training.divergence import TrainingDiverged
from pfzoo.training.early_stopping import EarlyStopping, UpdateLimit, objective_score
from pfzoo.training.em_hmc import EMHMC
from pfzoo.training.fast_pcd import FPCD
from pfzoo.training.generalized_pseudolikelihood import GeneralizedPseudoLikelihood
from pfzoo.training.generalized_score_matching import GeneralizedScoreMatching
from pfzoo.training.greedy import GreedyTrainer, train_greedy
from pfzoo.training.hopfield_rules import PerceptronFit, outer_product_rule, perceptron_fit, perceptron_rule
from pfzoo.training.maximum_likelihood import ExactMaximumLikelihood
from pfzoo.training.mean_field_inversion import fit_mean_field, mean_field_ising
from pfzoo.training.metrics import pseudo_log_likelihood, reconstruction_error
from pfzoo.training.mpf import MPF
from pfzoo.training.mpf_local_rule import mpf_local_update, mpf_online_rule
from pfzoo.training.naive_mcmc import NaiveMCMC
from pfzoo.training.natural_gradient import NaturalGradient
from pfzoo.training.nce import NCE
from pfzoo.training.objective import Objective, applicable_trainers
from pfzoo.training.parallel_tempering import PT
from pfzoo.training.parameter_averaging import ParameterAveraging
from pfzoo.training.partition_tracking import PartitionTracker
from pfzoo.training.replica_tracking import ReplicaPartitionTracker
from pfzoo.training.persistent_mpf import PersistentMPF
from pfzoo.training.pseudolikelihood import PseudoLikelihood
from pfzoo.training.ratio_matching import RatioMatching
from pfzoo.training.score_matching import ScoreMatching
from pfzoo.training.self_contrastive import SelfContrastive
from pfzoo.training.sliced_score_matching import SlicedScoreMatching
from pfzoo.training.sparsity import SparsityTarget
from pfzoo.training.trainer import Trainer
from pfzoo.training.trainer_settings import TrainerSettings

__all__ = [
    "BitFlipMPF",
    "CD",
    "Centered",
    "DBMParallelTempering",
    "DBMPersistentMeanField",
    "DenoisingScoreMatching",
    "EarlyStopping",
    "EMHMC",
    "ExactMaximumLikelihood",
    "FPCD",
    "GeneralizedPseudoLikelihood",
    "GeneralizedScoreMatching",
    "GreedyTrainer",
    "PCD",
    "MPF",
    "NaiveMCMC",
    "NaturalGradient",
    "NCE",
    "Objective",
    "PerceptronFit",
    "ParameterAveraging",
    "PartitionTracker",
    "ReplicaPartitionTracker",
    "PersistentMPF",
    "PT",
    "PseudoLikelihood",
    "RatioMatching",
    "ScoreMatching",
    "SelfContrastive",
    "SlicedScoreMatching",
    "SparsityTarget",
    "Trainer",
    "TrainerSettings",
    "TrainingCallback",
    "TrainingDiverged",
    "UpdateLimit",
    "applicable_trainers",
    "fit_mean_field",
    "mean_field_ising",
    "objective_score",
    "mpf_local_update",
    "mpf_online_rule",
    "outer_product_rule",
    "perceptron_fit",
    "perceptron_rule",
    "pretrain_dbm",
    "start_dbm_from_rbm",
    "pseudo_log_likelihood",
    "reconstruction_error",
    "train_greedy",
]
