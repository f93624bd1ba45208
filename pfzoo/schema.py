"""Typed schemas of the top-level keys of ``conf/train.yaml``, ``conf/evaluate.yaml`` and ``conf/sample.yaml`` (Hydra structured configs in its
ConfigStore).

With them a mistyped value (``seed=abc``, ``resume=maybe``, ``pictures=2``) fails when the config is composed,
before any data are loaded, in one line naming the key. The config groups (model, dataset, trainer, estimator)
stay free-form: their own constructors check them. Importing this module registers the schemas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class DataRoot:
    root: Optional[str] = None  # noqa: UP045 (OmegaConf reads Optional, not "X | None", on Python 3.10)


@dataclass
class TrainSchema:
    """``conf/train.yaml``: the run's top-level settings."""

    model: Any = MISSING
    dataset: Any = MISSING
    trainer: Any = MISSING
    estimator: Any = MISSING
    seed: int = 0
    device: str = "cpu"
    resume: bool = False
    pictures: bool = True
    metrics_csv: bool = True
    tensorboard: bool = False
    final_num_test: int = 200
    init_from_data: bool = True
    init_from: Optional[str] = None  # noqa: UP045  a trained model's checkpoint path or zoo name to start from
    run_dir: str = MISSING
    model_config_name: Optional[str] = None  # noqa: UP045  the conf/model option composed; pfzoo.cli records it
    data: DataRoot = field(default_factory=DataRoot)


@dataclass
class EvaluateSchema:
    """``conf/evaluate.yaml``: what to measure, on what, and what to write."""

    model: Any = MISSING
    dataset: Any = MISSING
    estimator: Any = MISSING
    checkpoint: Optional[str] = None  # noqa: UP045
    pretrained: Optional[str] = None  # noqa: UP045
    zoo_dir: Optional[str] = None  # noqa: UP045
    seed: int = 0
    device: str = "cpu"
    num_test: Optional[int] = None  # noqa: UP045
    test_rows: str = "random"
    split: str = "test"
    exact_max_units: int = 20
    confidence: float = 0.95
    versus: Optional[str] = None  # noqa: UP045
    versus_samples: int = 1000
    versus_steps: int = 100
    progress: bool = True
    samples: bool = False
    output: str = "evaluation.json"
    run_dir: str = MISSING
    model_config_name: Optional[str] = None  # noqa: UP045  the conf/model option composed; pfzoo.cli records it
    data: DataRoot = field(default_factory=DataRoot)


@dataclass
class SampleSchema:
    """``conf/sample.yaml``: which model to draw from, how many samples, and where they go."""

    checkpoint: Optional[str] = None  # noqa: UP045
    pretrained: Optional[str] = None  # noqa: UP045
    zoo_dir: Optional[str] = None  # noqa: UP045
    num_samples: int = 64
    seed: int = 0
    device: str = "cpu"
    picture: bool = True
    run_dir: str = MISSING
    model_config_name: Optional[str] = None  # noqa: UP045  recorded by pfzoo.cli.compose as for the other tasks


ConfigStore.instance().store(name="train_schema", node=TrainSchema)
ConfigStore.instance().store(name="evaluate_schema", node=EvaluateSchema)
ConfigStore.instance().store(name="sample_schema", node=SampleSchema)
