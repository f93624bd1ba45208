"""Evaluate a checkpoint: ``python scripts/evaluate.py [model=rbm] [estimator=ais] [checkpoint=PATH] [key=value ...]``."""

import json
import logging
import sys
from pathlib import Path

import hydra
from hydra.errors import InstantiationException
from omegaconf import DictConfig

from pfzoo.app import evaluate, format_evaluation

logger = logging.getLogger("pfzoo.evaluate")


@hydra.main(version_base="1.3", config_path="../conf", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    try:
        result = evaluate(cfg)
    except (ValueError, FileNotFoundError, NotImplementedError, InstantiationException) as error:
        logger.error("%s", error)
        sys.exit(2)
    output = Path(cfg.run_dir) / cfg.output
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(format_evaluation(result))
    print(f"results written to {output}")


if __name__ == "__main__":
    main()
