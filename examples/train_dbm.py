"""Train a small DBM from a recipe: compose ``conf/experiment/zoo_dbm.yaml`` (the recipe of the zoo's ``dbm-digits``: a
[64, 20, 10] DBM on the embedded digits, greedy CD-1 pretraining, then PCD + mean field) with overrides, as
``pfzoo-train +experiment=zoo_dbm ...`` would, run it and load the result. The recipe's DBM is small enough that the
closing report's test log-likelihood is exact.

    python examples/train_dbm.py                  # the recipe's epochs shortened to 10 + 10 per layer: seconds
    python examples/train_dbm.py --toy            # 1 + 1
    python examples/train_dbm.py --run-dir runs/dbm trainer.objective.learning_rate=...   # more overrides

The run folder (default ``runs/train_dbm/<date>_<time>`` under the current folder) keeps the checkpoint, metrics and
the pictures the report names.
"""

import argparse
import sys
import time
from pathlib import Path

from pfzoo import cli, zoo


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toy", action="store_true", help="a seconds-long run (1 pretraining and 1 training epoch)")
    parser.add_argument("--run-dir", type=Path, default=None, help="where the run goes (default: runs/train_dbm/<date>_<time>)")
    parser.add_argument("overrides", nargs="*", help="further Hydra overrides, key=value")
    args = parser.parse_args(argv)
    epochs = 1 if args.toy else 10
    run_dir = args.run_dir or Path("runs", "train_dbm", time.strftime("%Y-%m-%d_%H-%M-%S"))
    overrides = ["+experiment=zoo_dbm", f"trainer.epochs={epochs}", f"trainer.objective.pretrain.epochs_per_layer={epochs}",
                 f"run_dir={run_dir}", *args.overrides]
    code = cli.execute("train", cli.compose("train", overrides))  # prints the run's report, ending with the test log-likelihood
    if code != 0:
        return code
    model = zoo.load(run_dir / zoo.CHECKPOINT_FILE)
    print(f"trained {type(model).__name__} with layers {model.config()['layer_sizes']}; the zoo's own (50 + 50 epochs): "
          f"{zoo.pretrained_weights('dbm-digits').log_likelihood:.2f} nats; the run is in {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
