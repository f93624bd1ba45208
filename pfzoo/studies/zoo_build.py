"""The zoo's models built from their recipes (``scripts/build_zoo.py``): the test log-likelihood a card states, before
and after training, and the card's fields (:data:`pfzoo.zoo.CARD_FIELDS`) of a trained recipe.

The log-likelihood is exact when the model offers an exact log Z and free energy at its size; otherwise it is the
recipe's own ``estimator`` node, run on the whole test set with the training set as base data.
"""

from __future__ import annotations

import datetime
import math
import time
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

import pfzoo
from pfzoo import zoo
from pfzoo.data import DataSplits
from pfzoo.estimators.base import BoundKind
from pfzoo.models import EnergyModel
from pfzoo.models.capabilities import Capability
from pfzoo.studies.reporting import git_commit

LICENCES = {
    "digits": "CC BY 4.0: UCI ML hand-written digits (Alpaydin & Kaynak 1998), as bundled with scikit-learn",
    "patches": "CC BY 2.0: scikit-learn's sample photographs china.jpg and flower.jpg (Flickr), as bundled with scikit-learn",
    "spin_glass": "MIT (pfzoo's licence): synthetic samples that pfzoo draws from a random spin glass",
    "hopfield_patterns": "MIT (pfzoo's licence): synthetic random patterns that pfzoo draws",
    "binarized_mnist": "CC BY-SA 3.0: MNIST (LeCun, Cortes & Burges), binarised by Larochelle & Murray (2011)",
}
NOTES = {  # what a reader of the card should know that the numbers do not say
    "gaussian": "On whitened patches N(0, I), the starting point, already is the maximum-likelihood Gaussian: training "
                "confirms it and cannot improve on it (the trained and initial values agree).",
    "gaussian_rbm": "A Gaussian-Bernoulli RBM barely improves on a Gaussian on whitened patches: with unit (or learned) "
                    "visible variances its hidden units can only shift the Gaussian, and maximum likelihood keeps them "
                    "near zero. It is here as the family's working example, not as a good patch model.",
    "hopfield": "Trained as a density (PCD) on its 64 patterns, which are also its test set. As a memory, MPF "
                "(conf/experiment/hopfield_mpf.yaml) stores all 64 patterns as fixed points, but its couplings grow "
                "until spurious states dominate Z: AIS then puts its log-likelihood far below the uniform distribution's.",
}



def measure_log_likelihood(model, data: DataSplits, cfg: DictConfig) -> dict:
    """The mean test log-likelihood of ``model`` on ``data.test`` as card.json stores it: exact where the model offers an
    exact log Z and free energy, else the recipe ``cfg``'s estimator (with the training set as base data, seed ``cfg.seed``)."""
    test, train = (split.to(dtype=model.dtype) for split in (data.test, data.train))
    started = time.perf_counter()
    offered = model.capabilities
    if Capability.EXACT_LOG_Z in offered and Capability.EXACT_FREE_ENERGY in offered:
        with torch.no_grad():
            log_z = model.log_partition()
            per_example = model.log_prob(test, log_z=log_z)
        return {"estimator": "exact", "kind": BoundKind.EXACT.value, "value": per_example.mean().item(), "stderr": 0.0,
                "data_stderr": (per_example.std() / math.sqrt(len(per_example))).item(), "num_test": len(per_example),
                "log_z": log_z.item(), "settings": {}, "seconds": round(time.perf_counter() - started, 1), "warnings": []}
    estimator = instantiate(cfg.estimator)
    estimate = estimator.log_likelihood(model, test, base_data=train, generator=torch.Generator().manual_seed(cfg.seed))
    measured = {"estimator": type(estimator).__name__.lower(), "kind": estimate.kind.value, "value": estimate.mean,
                "stderr": estimate.stderr, "data_stderr": estimate.data_stderr, "num_test": test.shape[0],
                "settings": OmegaConf.to_container(cfg.estimator, resolve=True),
                "seconds": round(time.perf_counter() - started, 1), "warnings": list(estimate.warnings)}
    if estimate.partition is not None:
        measured.update(log_z=estimate.partition.log_z, log_z_stderr=estimate.partition.stderr, ess=estimate.partition.ess)
    return measured


def initial_model(cfg: DictConfig, data: DataSplits) -> EnergyModel:
    """The model as ``pfzoo.app.train`` builds it before the first epoch (same seed, same data-dependent start)."""
    model = instantiate(cfg.model, num_visible=data.num_features, generator=torch.Generator().manual_seed(cfg.seed))
    if cfg.init_from_data:
        model.init_from_data(data.train)
    return model


def card_data(name: str, experiment: str, cfg: DictConfig, data: DataSplits, model: EnergyModel, *, measured: dict, at_init: dict,
              training_seconds: float, folder: Path, repo: Path) -> dict:
    """card.json of model config ``name`` trained by recipe ``experiment`` (composed as ``cfg``) on ``data``, exported to
    zoo ``folder``: its log-likelihood ``measured`` after training and ``at_init`` before (:func:`measure_log_likelihood`),
    the recipe with paths relative to the checkout ``repo``, and the checkout's commit."""
    return {
        "name": folder.name,
        "title": f"{folder.name}: {type(model).__name__} ({name}) on {data.name}",
        "family": model.registry_name,
        "model_config_name": name,
        "model_config": model.config(),
        "dataset": data.name,
        "dataset_config": zoo.portable_config(OmegaConf.to_container(cfg.dataset, resolve=True)),
        "data_licence": LICENCES.get(data.name, "see the data set's source"),
        "recipe": {"experiment": experiment, "command": f"python scripts/train.py +experiment={experiment}",
                   "config": zoo.portable_config(OmegaConf.to_container(cfg, resolve=True), base=repo)},
        "log_likelihood": measured,
        "log_likelihood_at_init": at_init,
        "date": datetime.date.today().isoformat(),
        "pfzoo_version": pfzoo.__version__,
        "git_commit": git_commit(repo),
        "training_seconds": round(training_seconds, 1),
        "notes": [NOTES[name]] if name in NOTES else [],
    }
