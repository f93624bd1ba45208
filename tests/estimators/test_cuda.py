"""The oracle table on CUDA: every family × every estimator that applies, against the same exact answers as on the
CPU, plus CPU–CUDA agreement within the two estimates' errors and same-seed reproducibility on the GPU; the
deterministic trainers reach the CPU's loss on CUDA. (Every trainer config also trains on CUDA, without a host sync in
its steps, in tests/test_training_host_syncs.py.)

Marked ``cuda`` (``pytest -m cuda``) and skipped on machines without CUDA, so CPU CI is unchanged. Written without a
GPU at hand: the first run on one is its first check.
"""

import json
import math
from pathlib import Path

import pytest
import torch
from test_composition_matrix import model_overrides, tiny_overrides
from test_oracle_table import ESTIMATORS, FAMILIES, K_SIGMA, exact_log_likelihood

from pfzoo import app, cli

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

CASES = [pytest.param(family, name, id=f"{family.name}-{name}") for family in FAMILIES for name in ESTIMATORS
         if name in family.applicable and name != "exact"]


def estimate_on(device: str, family, estimator_name: str):
    torch.manual_seed(0)
    model = family.model()
    data = family.data(model)
    model, data = model.to(device), data.to(device)
    estimator = ESTIMATORS[estimator_name](**family.settings.get(estimator_name, {})).to(device)
    return model, data, estimator.log_likelihood(model, data, base_data=data, generator=torch.Generator(device).manual_seed(0))


@pytest.mark.parametrize("family, estimator_name", CASES)
def test_cuda_estimate_matches_the_exact_value_and_the_cpu_estimate(family, estimator_name):
    model, data, on_gpu = estimate_on("cuda", family, estimator_name)
    exact = exact_log_likelihood(model.cpu(), data.cpu())
    assert math.isfinite(on_gpu.mean) and on_gpu.stderr < family.max_stderr
    assert abs(on_gpu.mean - exact) <= K_SIGMA * on_gpu.stderr + 1e-6, f"CUDA {on_gpu.mean:.4f} ± {on_gpu.stderr:.4f}, exact {exact:.4f}"
    _, _, on_cpu = estimate_on("cpu", family, estimator_name)
    assert abs(on_gpu.mean - on_cpu.mean) <= K_SIGMA * math.hypot(on_gpu.stderr, on_cpu.stderr) + 1e-6


@pytest.mark.parametrize("family, estimator_name", [case for case in CASES if case.values[1] in ("ais", "hais")])
def test_same_seed_gives_the_same_numbers_on_cuda(family, estimator_name):
    first, second = estimate_on("cuda", family, estimator_name)[2], estimate_on("cuda", family, estimator_name)[2]
    assert first.mean == second.mean and first.stderr == second.stderr


def test_exact_values_agree_between_cpu_and_cuda():
    for family in FAMILIES:
        model = family.model()
        data = family.data(model)
        cpu = exact_log_likelihood(model, data)
        gpu = exact_log_likelihood(model.to("cuda"), data.to("cuda"))
        assert gpu == pytest.approx(cpu, abs=1e-6 * max(1.0, abs(cpu))), family.name


DETERMINISTIC_TRAINING = [("gaussian", "ml"), ("ica", "ml"), ("rbm", "pseudolikelihood"), ("ising", "pseudolikelihood")]


def final_loss(device: str, model: str, trainer: str, run_dir: Path) -> float:
    overrides = [*model_overrides(model), f"trainer={trainer}", *tiny_overrides("trainer", trainer), "trainer.epochs=2",
                 f"run_dir={run_dir / device}", f"device={device}", "pictures=false"]
    result = app.train(cli.compose("train", overrides))
    return json.loads(Path(result["metrics_file"]).read_text().splitlines()[-1])["loss"]


@pytest.mark.parametrize("model, trainer", DETERMINISTIC_TRAINING, ids=[f"{m}-{t}" for m, t in DETERMINISTIC_TRAINING])
def test_deterministic_training_on_cuda_reaches_the_cpu_loss(model, trainer, tmp_path):
    """Full-batch L-BFGS on the same data from the same start: only the order of floating-point sums differs."""
    on_gpu, on_cpu = final_loss("cuda", model, trainer, tmp_path), final_loss("cpu", model, trainer, tmp_path)
    assert on_gpu == pytest.approx(on_cpu, rel=1e-3, abs=1e-4)
