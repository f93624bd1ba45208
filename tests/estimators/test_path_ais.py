"""AIS along a prebuilt path: unbiased in Z, and its mean log weight falls short of log Z by the closed-form bias."""

import torch

from pfzoo.estimators.path_ais import anneal_path
from pfzoo.models import Gaussian
from pfzoo.paths import GaussianGeometricPath


def test_perfect_transition_ais_matches_log_z_and_the_kl_sum_within_its_standard_errors():
    unit = torch.eye(1, dtype=torch.float64)
    target, base = Gaussian.from_tensors(unit, torch.tensor([3.0], dtype=torch.float64)), Gaussian.from_tensors(unit)
    path = GaussianGeometricPath(target, base)
    exact = target.log_partition().item()
    run = anneal_path(path, "linear", 30, 4000, generator=torch.Generator().manual_seed(0))
    bias = 9 / (2 * 30)  # d²/(2K) along the geometric path between unit Gaussians
    assert run.log_weights.shape == (4000,) and run.log_weights.dtype == torch.float64
    assert abs(run.log_z - exact) < 4 * run.stderr
    assert abs((exact - run.mean_log_weight) - bias) < 4 * run.mean_log_weight_stderr
    assert 1 <= run.ess <= 4000


def test_the_same_seed_gives_the_same_weights():
    unit = torch.eye(1, dtype=torch.float64)
    path = GaussianGeometricPath(Gaussian.from_tensors(unit, torch.tensor([1.0], dtype=torch.float64)), Gaussian.from_tensors(unit))
    first = anneal_path(path, "linear", 5, 10, generator=torch.Generator().manual_seed(3))
    second = anneal_path(path, "linear", 5, 10, generator=torch.Generator().manual_seed(3))
    assert torch.equal(first.log_weights, second.log_weights)
