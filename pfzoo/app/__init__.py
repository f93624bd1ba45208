"""The application: ``train(cfg)``, ``evaluate(cfg)`` and ``sample(cfg)``, what the command line (:mod:`pfzoo.cli`) and the scripts call.

Both take a composed config (``conf/train.yaml`` / ``conf/evaluate.yaml``) and return a plain dict of results, so they
are testable without Hydra's command line; :mod:`pfzoo.app.report` turns the dicts into the reports people read.

- :mod:`pfzoo.app.config`: the config folder, the device, whether the user chose the model config;
- :mod:`pfzoo.app.training`: :func:`train`;
- :mod:`pfzoo.app.evaluation`: :func:`evaluate` and the choice of what it measures;
- :mod:`pfzoo.app.run_pictures`: the pictures a run writes into its folder;
- :mod:`pfzoo.app.report`: :func:`format_training` and :func:`format_evaluation`;
- :mod:`pfzoo.app.sweep`: the table of a ``-m`` sweep's jobs, printed and written as ``summary.csv``;
- :mod:`pfzoo.app.sampling`: :func:`sample` (``pfzoo sample``); :mod:`pfzoo.app.zoo_listing`: ``pfzoo zoo``'s table.
"""

from pfzoo.app.config import config_dir, resolve_device
from pfzoo.app.evaluation import evaluate, evaluation_source
from pfzoo.app.report import format_evaluation, format_training
from pfzoo.app.sampling import format_sampling, sample
from pfzoo.app.training import train

__all__ = [
    "config_dir",
    "evaluate",
    "evaluation_source",
    "format_evaluation",
    "format_sampling",
    "format_training",
    "resolve_device",
    "sample",
    "train",
]
