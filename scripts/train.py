"""Train a model: ``python scripts/train.py [model=rbm] [dataset=digits] [trainer=pcd] [key=value ...]``."""

import logging
import sys

import hydra
from hydra.errors import InstantiationException
from omegaconf import DictConfig

from pfzoo.app import train

logger = logging.getLogger("pfzoo.train")


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> None:
    try:
        result = train(cfg)
    except (ValueError, FileNotFoundError, InstantiationException, FloatingPointError) as error:
        logger.error("%s", error)
        sys.exit(2)
    metrics = ", ".join(f"{key} {value:.4g}" for key, value in result["metrics"].items() if isinstance(value, float))
    print(f"final epoch: {metrics}")
    print(f"metrics written to {result['metrics_file']}")
    print(f"checkpoint written to {result['checkpoint']}")


if __name__ == "__main__":
    main()
