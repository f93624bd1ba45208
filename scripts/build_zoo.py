"""Build the pretrained zoo from its recipes: for each ``conf/experiment/zoo_<model>.yaml``, train through the app
(what ``python scripts/train.py +experiment=zoo_<model>`` runs), measure the test log-likelihood before and after
training, and export ``models/<model>-<dataset>/`` with ``checkpoint.pt``, ``card.json`` and ``README.md``.

    python scripts/build_zoo.py                     # every recipe that no card.json names yet
    python scripts/build_zoo.py --only dbm ica      # retrain and re-export these (model config names)
    python scripts/build_zoo.py --only rbm --zoo /tmp/zoo   # somewhere else (rbm reproduces models/rbm-digits' weights)

The log-likelihood is exact when the model offers an exact log Z and free energy at its size; otherwise it is the
recipe's own ``estimator`` node (``override /estimator: ...`` with settings whose stderr is well under a nat), run on
the whole test set with the training set as base data. Card fields: :data:`pfzoo.zoo.CARD_FIELDS`.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import math
import sys
import tempfile
import time
from pathlib import Path

import torch
from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf

import pfzoo
from pfzoo import app, cli, zoo
from pfzoo.estimators.base import BoundKind
from pfzoo.models.capabilities import Capability
from pfzoo.studies.reporting import git_commit

REPO = Path(__file__).resolve().parents[1]
PREFIX = "zoo_"
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


def recipes() -> list[str]:
    """Model config names that have a zoo recipe ``zoo_<model>.yaml``, sorted. The long runs at the literature's level
    (``zoo_rbm_cd25_500``, ``zoo_dbm_500_1000``, ``zoo_dbn_500_2000``: no ``conf/model/<name>.yaml``) train for hours
    in ``zoo/training/`` and land through ``scripts/reproduce_raise.py --export-zoo``, so they are not built here."""
    config_dir = cli.config_dir()
    names = (path.stem[len(PREFIX):] for path in (config_dir / "experiment").glob(f"{PREFIX}*.yaml"))
    return sorted(name for name in names if (config_dir / "model" / f"{name}.yaml").is_file())


def measure(model, data, cfg) -> dict:
    """The mean test log-likelihood of ``model`` on ``data.test``: exact where the model offers it, else ``cfg.estimator``."""
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


def initial_model(cfg, data):
    """The model as ``pfzoo.app.train`` builds it before the first epoch (same seed, same data-dependent start)."""
    model = instantiate(cfg.model, num_visible=data.num_features, generator=torch.Generator().manual_seed(cfg.seed))
    if cfg.init_from_data:
        model.init_from_data(data.train)
    return model


def build(name: str, zoo_dir: Path, work: Path) -> dict:
    """Train the recipe ``zoo_<name>``, measure and export it; returns its card."""
    experiment = f"{PREFIX}{name}"
    cfg = cli.compose("train", [f"+experiment={experiment}", f"run_dir={work / name}"])
    expected = OmegaConf.load(cli.config_dir() / "model" / f"{name}.yaml")["_target_"]
    if cfg.model._target_ != expected:
        raise SystemExit(f"{experiment}: its model is {cfg.model._target_}, not conf/model/{name}.yaml's {expected}")
    data = instantiate(cfg.dataset)
    logging.info("%s: measuring the initial model", experiment)
    at_init = measure(initial_model(cfg, data), data, cfg)
    logging.info("%s: training (%s)", experiment, get_class(cfg.trainer.objective._target_).__name__)
    started = time.perf_counter()
    result = app.train(cfg)
    seconds = time.perf_counter() - started
    model = zoo.load(result["checkpoint"])
    measured = measure(model, data, cfg)
    folder = zoo_dir / zoo.folder_name(name, data.name)
    card = {
        "name": folder.name,
        "title": f"{folder.name}: {type(model).__name__} ({name}) on {data.name}",
        "family": model.registry_name,
        "model_config_name": name,
        "model_config": model.config(),
        "dataset": data.name,
        "dataset_config": zoo.portable_config(OmegaConf.to_container(cfg.dataset, resolve=True)),
        "data_licence": LICENCES.get(data.name, "see the data set's source"),
        "recipe": {"experiment": experiment, "command": f"python scripts/train.py +experiment={experiment}",
                   "config": zoo.portable_config(OmegaConf.to_container(cfg, resolve=True), base=REPO)},
        "log_likelihood": measured,
        "log_likelihood_at_init": at_init,
        "date": datetime.date.today().isoformat(),
        "pfzoo_version": pfzoo.__version__,
        "git_commit": git_commit(REPO),
        "training_seconds": round(seconds, 1),
        "notes": [NOTES[name]] if name in NOTES else [],
    }
    zoo.export(result["checkpoint"], folder, card_data=card)
    print(f"{folder.name}: {measured['estimator']} {measured['value']:.3f} ± {measured['stderr']:.3f} "
          f"(at init {at_init['value']:.3f}); trained in {seconds:.0f} s; {(folder / zoo.CHECKPOINT_FILE).stat().st_size:,} bytes")
    return card


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", metavar="NAME", help=f"model config names to (re)build, of: {' '.join(recipes())}")
    parser.add_argument("--zoo", type=Path, default=zoo.default_zoo_dir(), help="zoo folder (default: %(default)s)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    unknown = sorted(set(args.only or ()) - set(recipes()))
    if unknown:
        parser.error(f"no recipe conf/experiment/{PREFIX}<name>.yaml for {', '.join(unknown)}; recipes: {' '.join(recipes())}")
    built = {(zoo.pretrained_card(n, zoo_dir=args.zoo).get("recipe") or {}).get("experiment") for n in zoo.list_pretrained(zoo_dir=args.zoo)}
    names = args.only or [name for name in recipes() if f"{PREFIX}{name}" not in built]
    with tempfile.TemporaryDirectory(prefix="pfzoo-build-") as work:
        for name in names:
            build(name, args.zoo, Path(work))
    if not names:
        print(f"every recipe has a zoo folder in {args.zoo}; rebuild with --only NAME")


if __name__ == "__main__":
    sys.exit(main())
