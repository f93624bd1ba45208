"""Calibration, as TFP tests its estimators: every estimator that claims an unbiased Ẑ (AIS, HAIS, importance sampling,
SMC, linked importance sampling) has ``E[Ẑ / Z] = 1``: over R independent runs, the mean of ``Ẑ_r / Z`` lies within 4 of
its standard errors of 1, on small models with exact log Z, skewed ones included (a sign error hides behind a symmetric
target: reflecting the base draws through 0 is harmless where the base is symmetric about 0 and not elsewhere).

One estimator call makes all R runs: its chains are independent, so consecutive blocks of chains are independent runs
(AIS, importance sampling), and SMC's groups and LIS's runs are independent estimates by construction (the shared SMC
schedule, chosen from all 4,000 particles, is the same to a small fraction of a step in every call).

Sample sizes from a stated false-failure rate: with R ≥ 1000 runs the mean is normal to a good approximation, and |z| > 4
has probability 6e-5 per check; the 13 checks here fail falsely about once in 1,200 CI runs. R = 1000 runs of a few
chains also resolve a relative bias of about 4 · sd(Ẑ/Z) / √R, 5–10 % at these settings: a sign error, a
Jensen-biased reduction or a kernel that does not leave p_β invariant is caught (the broken estimators below).
"""

import math

import numpy as np
import pytest
import torch
from factories import random_ising, random_poe, random_rbm
from torch import nn

from pfzoo.estimators import AIS, HAIS, SMC, BoundKind, ImportanceSampling, LinkedImportanceSampling
from pfzoo.models import EnergyFunction, Gaussian

K_SIGMA = 4.0
RUNS = 1000


class LogGammaEnergy(nn.Module):
    """``E(x) = Σ_i (e^{x_i} − a x_i)``: independent log-Gamma(a) coordinates, skewed to the left; ``Z = Γ(a)^D``."""

    def __init__(self, shape: float) -> None:
        super().__init__()
        self.shape = shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.exp(x) - self.shape * x).sum(-1)


SHAPE, WIDTH = 2.0, 2


def log_gamma_model():
    model = EnergyFunction(LogGammaEnergy(SHAPE), WIDTH).double()
    return model, WIDTH * math.lgamma(SHAPE)


def log_gamma_draws(num: int = 2000) -> torch.Tensor:
    """Exact draws ``log g``, ``g ~ Gamma(a)`` (what a fitted base is fitted to)."""
    return torch.from_numpy(np.log(np.random.default_rng(0).gamma(SHAPE, size=(num, WIDTH))))


def skewed_rbm():
    model = random_rbm(8, 5, 1.0, 1, bias_scale=2.0)  # biases N(0, 2²): most units nearly always on or off, asymmetrically
    return model, model.log_partition().item()


def skewed_ising():
    model = random_ising(8, 0.5, 2, bias_scale=2.0, draw_dtype=None)
    return model, model.log_partition().item()


def laplace_poe():
    model = random_poe(2, expert="laplace", seed=3)
    return model, model.log_partition().item()


def run_ratios(estimate, log_z: float, chains_per_run: int = 1) -> torch.Tensor:
    """``Ẑ_r / Z`` for every run of ``estimate``: its log weights in blocks of ``chains_per_run``, each block's mean."""
    assert estimate.kind is BoundKind.UNBIASED_Z
    weights = estimate.log_weights.double().view(-1, chains_per_run)
    return torch.exp(torch.logsumexp(weights, 1) - math.log(chains_per_run) - log_z)


def calibration_z(ratios: torch.Tensor) -> float:
    """``(mean(Ẑ_r / Z) − 1) / SE``."""
    return ((ratios.mean() - 1) / (ratios.std() / math.sqrt(ratios.numel()))).item()


CASES = {
    # name: (model factory, estimator factory, data factory, chains per run)
    "ais-skewed-rbm": (skewed_rbm, lambda: AIS(4 * RUNS, 10, schedule="linear", base="uniform"), None, 4),
    "importance-skewed-rbm": (skewed_rbm, lambda: ImportanceSampling(4 * RUNS, base="uniform"), None, 4),
    "smc-skewed-rbm": (skewed_rbm, lambda: SMC(4 * RUNS, target_cess=0.9, num_groups=RUNS, base="uniform"), None, None),
    "lis-skewed-rbm": (skewed_rbm, lambda: LinkedImportanceSampling(num_runs=RUNS, num_levels=5, states_per_level=2, base="uniform"), None, 1),
    # four states: linked_runs restarts a level's backward stretch at the link partway through its batch; a stretch that
    # never restarts passes here too (measured), so this checks that path's calibration, not the restart itself
    "lis4-skewed-rbm": (skewed_rbm, lambda: LinkedImportanceSampling(num_runs=RUNS, num_levels=5, states_per_level=4, base="uniform"), None, 1),
    "ais-skewed-ising": (skewed_ising, lambda: AIS(4 * RUNS, 10, schedule="linear", base="uniform"), None, 4),
    "smc-skewed-ising": (skewed_ising, lambda: SMC(4 * RUNS, target_cess=0.9, num_groups=RUNS, base="uniform"), None, None),
    "hais-log-gamma": (log_gamma_model, lambda: HAIS(4 * RUNS, 20, base="fitted"), log_gamma_draws, 4),
    "importance-log-gamma": (log_gamma_model, lambda: ImportanceSampling(4 * RUNS, base="fitted"), log_gamma_draws, 4),
    "smc-log-gamma": (log_gamma_model, lambda: SMC(4 * RUNS, target_cess=0.9, num_groups=RUNS, base="fitted"), log_gamma_draws, None),
    "hais-laplace-poe": (laplace_poe, lambda: HAIS(4 * RUNS, 20, base="student_t"), None, 4),  # Student-t base: Laplace tails keep its weights bounded
}


@pytest.mark.parametrize("name", CASES)
def test_the_mean_of_z_hat_over_z_is_one(name):
    make_model, make_estimator, make_data, per_run = CASES[name]
    model, log_z = make_model()
    estimate = make_estimator()(model, data=None if make_data is None else make_data(), generator=torch.Generator().manual_seed(0))
    ratios = run_ratios(estimate, log_z, 1 if per_run is None else per_run)
    assert ratios.numel() == RUNS
    assert abs(calibration_z(ratios)) <= K_SIGMA, f"{name}: mean Ẑ/Z = {ratios.mean():.4f} ± {ratios.std() / math.sqrt(RUNS):.4f}"


def test_a_jensen_biased_reduction_fails():
    """``exp(mean log w)`` per run instead of ``mean w``: a geometric mean, below Z on average — caught."""
    model, log_z = skewed_rbm()
    estimate = AIS(4 * RUNS, 10, schedule="linear", base="uniform")(model, generator=torch.Generator().manual_seed(0))
    geometric = torch.exp(estimate.log_weights.view(-1, 4).mean(1) - log_z)
    assert calibration_z(geometric) < -K_SIGMA


class QuadraticEnergy(nn.Module):
    """``E(x) = ½ Σ_i s_i x_i²``: a centred Gaussian, symmetric about 0; ``log Z = Σ_i ½ log(2π / s_i)``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * (x.square() * torch.tensor([1.5, 3.0], dtype=x.dtype)).sum(-1)


def test_a_sign_error_hides_behind_a_symmetric_target_and_is_caught_on_a_skewed_one(monkeypatch):
    """A sign error in the Gaussian sampler's mean (draws ``−(μ + Lε) ~ N(−μ, Σ)`` where the density says N(μ, Σ)):
    harmless where the base fitted to the target is centred at 0, a biased Ẑ where the target is skewed."""
    sample = Gaussian.sample
    monkeypatch.setattr(Gaussian, "sample", lambda self, num, *, generator=None: -sample(self, num, generator=generator))
    symmetric = EnergyFunction(QuadraticEnergy(), 2).double()
    draws = torch.randn(2000, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64) / torch.tensor([1.5, 3.0]).sqrt()
    estimate = ImportanceSampling(4 * RUNS, base="fitted")(symmetric, data=draws, generator=torch.Generator().manual_seed(0))
    assert abs(calibration_z(run_ratios(estimate, 0.5 * math.log(2 * math.pi / 1.5) + 0.5 * math.log(2 * math.pi / 3.0), 4))) <= K_SIGMA
    skewed, log_z = log_gamma_model()
    estimate = ImportanceSampling(4 * RUNS, base="fitted")(skewed, data=log_gamma_draws(), generator=torch.Generator().manual_seed(0))
    assert abs(calibration_z(run_ratios(estimate, log_z, 4))) > K_SIGMA
