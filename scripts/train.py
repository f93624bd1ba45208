"""Train a model: ``python scripts/train.py [model=rbm] [dataset=digits] [trainer=pcd] [key=value ...]``."""

import sys

import hydra
from omegaconf import DictConfig

from pfzoo import cli


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> None:
    sys.exit(cli.execute("train", cfg))


if __name__ == "__main__":
    cli.check_overrides("train", sys.argv[1:])
    main()
