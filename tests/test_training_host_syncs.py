"""No value is read back to the host inside a training step: every trainer config's objective ``loss`` and every HMC
transition during one epoch of the app's training of a model it applies to (guard: tests/host_reads.py; on CUDA
``torch.cuda.set_sync_debug_mode("error")``)."""

import pytest
from host_reads import DEVICES, guarded
from test_composition_matrix import NATURAL, config_names, model_overrides, natural, tiny_overrides

from pfzoo import app, cli, training
from pfzoo.kernels.hmc import HMCKernel

OBJECTIVES = [getattr(training, name) for name in ("CD", "PCD", "BitFlipMPF", "MPF", "PersistentMPF", "PseudoLikelihood",
                                                   "ExactMaximumLikelihood", "EMHMC", "DBMPersistentMeanField", "PT", "FPCD", "NaiveMCMC",
                                                   "NCE", "SelfContrastive", "RatioMatching", "GeneralizedScoreMatching",
                                                   "GeneralizedPseudoLikelihood", "DBMParallelTempering", "ScoreMatching",
                                                   "DenoisingScoreMatching", "SlicedScoreMatching")]
# every trainer config: each model's natural trainer, and the RBM's and the DBM's other trainers
TRAINING_PAIRS = sorted({(model, natural(model).trainer) for model in config_names("model")}
                        | {("rbm", trainer) for trainer in ("cd", "pseudolikelihood", "mpf_sgd", "pt", "fpcd", "naive_mcmc", "nce",
                                                            "self_contrastive", "ratio_matching", "stochastic_ratio_matching",
                                                            "generalized_score_matching", "generalized_pseudolikelihood")}
                        | {("dbm", "dbm_pt")}
                        # score matching (analytic scores of the PoE and the Gaussian RBM; its autograd paths are tested on the CPU in
                        # tests/training/test_score_matching.py), DSM (autograd), SSM (autograd)
                        | {("poe_student", "score_matching"), ("gaussian_rbm", "score_matching"), ("ica", "denoising_score_matching"),
                           ("mcrbm", "sliced_score_matching")})


def test_the_training_pairs_cover_every_trainer_config():
    assert {trainer for _, trainer in TRAINING_PAIRS} == set(config_names("trainer")), NATURAL


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model, trainer", TRAINING_PAIRS, ids=[f"{m}-{t}" for m, t in TRAINING_PAIRS])
def test_training_steps_read_nothing_back(model, trainer, device, tmp_path, monkeypatch):
    counter = [0]
    for objective in OBJECTIVES:
        monkeypatch.setattr(objective, "loss", guarded(objective.loss, device, counter))
    monkeypatch.setattr(HMCKernel, "step", guarded(HMCKernel.step, device, counter))
    overrides = [*model_overrides(model), f"trainer={trainer}", *tiny_overrides("trainer", trainer), f"run_dir={tmp_path}",
                 f"device={device}", "trainer.evaluate_every=0", "pictures=false"]
    app.train(cli.compose("train", overrides))
    assert counter[0] >= 1
