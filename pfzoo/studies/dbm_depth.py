"""Whether a DBM is deep: the log-likelihood it loses when its top layer is removed (issue 48's depth diagnostic).

The shorter model is :meth:`DBM.without_top_layer <pfzoo.models.DBM.without_top_layer>`: the layers below the top kept,
the top layer replaced by its average input over the test digits. Both models are measured by the same estimator with the
same settings and seed, so their difference is the top layer's contribution; its share of the posterior's activity comes
from :meth:`DBM.top_layer_share <pfzoo.models.DBM.top_layer_share>`.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from pfzoo.estimators.base import Estimator
from pfzoo.models.dbm import DBM


def _measurement(estimate) -> dict[str, Any]:
    return {"value": estimate.mean, "stderr": estimate.stderr,
            "log_z": None if estimate.partition is None else estimate.partition.log_z,
            "warnings": list(estimate.warnings)}


def depth_diagnostic(model: DBM, test: torch.Tensor, train: torch.Tensor, estimator: Estimator, *, seed: int = 0) -> dict[str, Any]:
    """The DBM ``model`` against itself without its top layer on ``test [N, V]`` (``train [M, V]`` fits data bases).

    Returns ``{"model", "without_top"}`` (each ``value``, ``stderr``, ``log_z``, ``warnings``: ``estimator``'s mean test
    log-likelihood), ``loss`` (the DBM's minus the shorter model's, nats per digit) with ``loss_stderr`` (the two
    stderrs in quadrature: the runs are independent), ``top_layer_share`` and ``num_test``. Each run draws from a
    generator seeded with ``seed``.
    """
    short = model.without_top_layer(test)
    runs = {}
    for name, candidate in (("model", model), ("without_top", short)):
        generator = torch.Generator(model.device).manual_seed(seed)
        runs[name] = _measurement(estimator.log_likelihood(candidate, test, base_data=train, generator=generator))
    loss = runs["model"]["value"] - runs["without_top"]["value"]
    return {**runs, "loss": loss, "loss_stderr": math.hypot(runs["model"]["stderr"], runs["without_top"]["stderr"]),
            "top_layer_share": model.top_layer_share(test), "num_test": int(test.shape[0])}
