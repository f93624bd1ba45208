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
import logging
import sys
import tempfile
import time
from pathlib import Path

from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf

from pfzoo import app, cli, zoo
from pfzoo.studies.zoo_build import card_data, initial_model, measure_log_likelihood

REPO = Path(__file__).resolve().parents[1]
PREFIX = "zoo_"


def recipes() -> list[str]:
    """Model config names that have a zoo recipe ``zoo_<model>.yaml``, sorted. The long runs at the literature's level
    (``zoo_rbm_cd25_500``, ``zoo_dbm_500_1000``, ``zoo_dbn_500_2000``: no ``conf/model/<name>.yaml``) train for hours
    in ``zoo/training/`` and land through ``scripts/reproduce_raise.py --export-zoo``, so they are not built here."""
    config_dir = cli.config_dir()
    names = (path.stem[len(PREFIX):] for path in (config_dir / "experiment").glob(f"{PREFIX}*.yaml"))
    return sorted(name for name in names if (config_dir / "model" / f"{name}.yaml").is_file())


def build(name: str, zoo_dir: Path, work: Path) -> dict:
    """Train the recipe ``zoo_<name>``, measure and export it; returns its card."""
    experiment = f"{PREFIX}{name}"
    cfg = cli.compose("train", [f"+experiment={experiment}", f"run_dir={work / name}"])
    expected = OmegaConf.load(cli.config_dir() / "model" / f"{name}.yaml")["_target_"]
    if cfg.model._target_ != expected:
        raise SystemExit(f"{experiment}: its model is {cfg.model._target_}, not conf/model/{name}.yaml's {expected}")
    data = instantiate(cfg.dataset)
    logging.info("%s: measuring the initial model", experiment)
    at_init = measure_log_likelihood(initial_model(cfg, data), data, cfg)
    logging.info("%s: training (%s)", experiment, get_class(cfg.trainer.objective._target_).__name__)
    started = time.perf_counter()
    result = app.train(cfg)
    seconds = time.perf_counter() - started
    model = zoo.load(result["checkpoint"])
    measured = measure_log_likelihood(model, data, cfg)
    folder = zoo_dir / zoo.folder_name(name, data.name)
    card = card_data(name, experiment, cfg, data, model, measured=measured, at_init=at_init, training_seconds=seconds, folder=folder, repo=REPO)
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
