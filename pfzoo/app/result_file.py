"""``result.json``: what every train, evaluate and sample run folder ends with, one machine-readable record of the run.

Its keys (``format`` :data:`RESULT_FORMAT`):

- ``task`` (``"train"`` / ``"evaluate"`` / ``"sample"``) and ``status``: ``"completed"``, or ``"diverged"`` for a
  training run the divergence guard stopped (:class:`~pfzoo.training.TrainingDiverged`);
- ``headline``: the closing estimate, ``{quantity, mean, stderr, data_stderr, kind, estimator, num_test, of, examples,
  log_z}`` (``kind`` says whether it is exact, an estimate or a stochastic bound; ``stderr`` is the estimator's own
  error, ``data_stderr`` the one from which examples were measured, sd / √n over them: what another draw of as many
  test examples would move the mean by; a ``versus=`` comparison's is the difference of the two models' mean
  log-likelihoods), or ``None`` when nothing applied (and for sampling, which estimates nothing);
- ``estimator``: ``{name, config}``, the estimator that made the headline and its resolved settings (``config`` ``None``
  for exact values); ``None`` for sampling;
- ``samples`` (sampling only, else ``None``): what was drawn, from which model and how
  (:func:`pfzoo.app.sampling.sample`);
- ``settings``: the whole resolved config; ``seed``;
- ``timings``: seconds (``total``; for training also ``training`` and ``evaluation``, the epochs' sums from the metrics,
  and ``closing_estimate``; for evaluation ``estimate``; for sampling ``load``, ``sampling`` and ``writing``);
- ``machine``: :func:`machine_record`;
- ``divergence``: ``None``, or what the guard saw and did: ``message`` (its line), ``epoch``, ``update``, ``signal``,
  ``restored`` (in words) with ``restored_update`` and the restored model's held-out score;
- ``files`` (checkpoint, metrics or samples, pictures; a training run's averaged model where it averaged its
  parameters), ``last_epoch`` (training's last metrics record) and ``warnings``.

The same headline goes to the run's log (``train.log`` / ``evaluate.log``, :func:`headline_text`) and, for training, into
the last record of the metrics files (:meth:`pfzoo.training.Trainer.record_result`: CSV and TensorBoard too).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path
from typing import Any, Mapping

import torch
from omegaconf import DictConfig, OmegaConf

import pfzoo
from pfzoo.estimators.base import BoundKind
from pfzoo.studies.reporting import device_name, git_commit, machine_description

RESULT_FILE = "result.json"
RESULT_FORMAT = "pfzoo-result-1"


def machine_record(device: torch.device) -> dict[str, Any]:
    """What ran the numbers: the machine in words (cores, CPU, OS, Python), the device and its name (the GPU's for
    CUDA), torch and its threads, pfzoo's version and the checkout's commit (``None`` for an installed wheel)."""
    return {"description": machine_description(), "platform": platform.platform(), "device": str(device),
            "device_name": device_name(device), "torch": torch.__version__, "cuda": torch.version.cuda,
            "threads": torch.get_num_threads(), "pfzoo": pfzoo.__version__, "git_commit": checkout_commit()}


def checkout_commit() -> str | None:
    """The commit of the pfzoo checkout this package runs from (``+dirty`` with uncommitted changes), ``None`` for an
    installed package: its folder's parent must be the repository itself (``.git``, ``conf/``), not merely lie inside one
    (a virtual environment in a user's own repository)."""
    root = Path(pfzoo.__file__).resolve().parents[1]
    return git_commit(root) if (root / ".git").exists() and (root / "conf").is_dir() else None


def training_headline(final: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The headline of :func:`~pfzoo.app.training.final_log_likelihood`'s closing estimate (``None`` when none ran)."""
    if final is None:
        return None
    return {"quantity": "mean test log-likelihood (nats per example)", "mean": final["mean"], "stderr": final["stderr"],
            "data_stderr": final.get("data_stderr"), "kind": final["kind"], "estimator": final["estimator"], "num_test": final["num_test"], "of": final["of"],
            "examples": final["examples"], "log_z": final.get("log_z")}


def evaluation_headline(result: Mapping[str, Any]) -> dict[str, Any]:
    """The headline of :func:`~pfzoo.app.evaluate`'s result: the (lower) test log-likelihood estimate, or a ``versus=``
    comparison's difference."""
    rows = result.get("test_rows") or {}
    examples = rows.get("description") or str(result["num_test"])
    split = result.get("split", "test")  # split=valid measures the validation split
    if "comparison" in result:
        comparison = result["comparison"]
        return {"quantity": f"mean log p_A − log p_B over the {split} examples (nats per example)", "mean": comparison["difference"],
                "stderr": comparison["stderr"], "data_stderr": comparison.get("data_stderr"), "kind": "difference of two models' estimates", "estimator": "bridge sampling",
                "num_test": result["num_test"], "examples": examples, "log_z": None, "split": split}
    estimator = result.get("estimator") or {}
    name = str(estimator.get("_target_", "?")).rsplit(".", 1)[-1]
    return {"quantity": f"mean {split} log-likelihood (nats per example)" + (" (the bracket's lower estimate)" if "upper" in result else ""),
            "mean": result["test_log_likelihood"], "stderr": result["test_log_likelihood_stderr"],
            "data_stderr": result.get("test_log_likelihood_data_stderr"), "kind": result["kind"],
            "estimator": name, "num_test": result["num_test"], "examples": examples, "log_z": result.get("log_z"), "split": split}


def headline_text(headline: Mapping[str, Any] | None) -> str:
    """One line for the run's log: ``test log-likelihood = -24.5789 ± 0.0123 (AIS on 200 of 360 test examples, ± 1.0234
    test-set sampling; <kind>)``: the estimator's error, then the one from which examples were measured (exact values
    without the estimator's)."""
    if headline is None:
        return "test log-likelihood: not measured (no exact value and no estimator that applies)"
    split = headline.get("split", "test")
    what = "log p_A − log p_B" if headline["quantity"].startswith("mean log p_A") else f"{split} log-likelihood"
    data_stderr = headline.get("data_stderr")
    sampling = "" if data_stderr is None else f", ± {data_stderr:.4f} {split}-set sampling"
    if headline["kind"] == BoundKind.EXACT.value:
        return f"{what} = {headline['mean']:.4f} (exact, on {headline['examples']} {split} examples{sampling})"
    return (f"{what} = {headline['mean']:.4f} ± {headline['stderr']:.4f} ({headline['estimator']} on "
            f"{headline['examples']} {split} examples{sampling}; {headline['kind']})")


def divergence_record(message: str, details: Mapping[str, Any], checkpoint: str) -> dict[str, Any]:
    """``result.json``'s ``divergence`` of a run the guard stopped, from :class:`~pfzoo.training.TrainingDiverged`'s
    line and :attr:`~pfzoo.training.TrainingDiverged.record`."""
    score = details.get("restored_score")
    scored = "" if score is None else f" (held-out {details.get('restored_score_name')} {score:.4g})"
    return {"message": message, "epoch": details["epoch"], "update": details["update"], "signal": details["signal"],
            "restored": f"the parameters after update {details['restored_update']}{scored}, written to {checkpoint}",
            "restored_update": details["restored_update"], "restored_score": score,
            "restored_score_name": details.get("restored_score_name")}


def result_record(task: str, cfg: DictConfig, device: torch.device, *, headline: dict[str, Any] | None,
                  estimator: dict[str, Any] | None, timings: dict[str, float], files: dict[str, Any],
                  divergence: dict[str, Any] | None = None, last_epoch: dict[str, Any] | None = None,
                  warnings: list[str] | None = None, samples: dict[str, Any] | None = None) -> dict[str, Any]:
    """The document ``result.json`` holds (module docstring)."""
    return {"format": RESULT_FORMAT, "task": task, "status": "diverged" if divergence else "completed",
            "date": datetime.datetime.now().isoformat(timespec="seconds"), "headline": headline, "estimator": estimator,
            "samples": samples, "seed": cfg.seed, "timings": timings, "machine": machine_record(device), "divergence": divergence,
            "files": files, "last_epoch": last_epoch, "warnings": list(warnings or []),
            "settings": OmegaConf.to_container(cfg, resolve=True)}


def write_result(run_dir: str | os.PathLike, record: Mapping[str, Any]) -> Path:
    """Write ``record`` as ``<run_dir>/result.json`` atomically (a reader never sees half a file); returns its path."""
    path = Path(run_dir) / RESULT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{RESULT_FILE}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(record, indent=2, default=str) + "\n")
    os.replace(partial, path)
    return path
