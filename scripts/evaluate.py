"""Evaluate a checkpoint: ``python scripts/evaluate.py [model=rbm] [estimator=ais] [checkpoint=PATH] [key=value ...]``."""

import sys

import hydra
from omegaconf import DictConfig

from pfzoo import cli


@hydra.main(version_base="1.3", config_path="../conf", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    sys.exit(cli.execute("evaluate", cfg))


if __name__ == "__main__":
    cli.check_overrides("evaluate", sys.argv[1:])
    main()
