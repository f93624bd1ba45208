"""Why the bilinear model comes last on van Hateren (HAIS report Table 1 puts it first, −32.69): the estimator, the training
or the data, each measured on the model that the comparison trained (``reports/models/vanhateren``).

Three measurements of one trained model:

- **Convergence in N** of per-example HAIS (the report's eq. 27–29 on the latents z = [c, d]) on test patches, up to the
  paper's N = 10⁵: a lower bound that still rises between N = 3·10⁴ and 10⁵ has not converged.
- **Bidirectional Monte Carlo** (Grosse et al. 2015) on patches simulated from the model itself: forward HAIS is a
  stochastic lower and reverse HAIS from the exact posterior draw a stochastic upper bound on log p(x), so their gap
  bounds HAIS's error on this model's posterior geometry at each N, with no reference value needed.
- **Model against data**: the model's log-likelihood of its own samples against that of the test patches, and the
  Gaussian's (exact) on both: a model that fits the data gives the test patches about what it gives its own samples.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Sequence
from typing import Callable

import torch
from omegaconf import DictConfig

from pfzoo.data.splits import DataSplits
from pfzoo.estimators.sandwich import Sandwich
from pfzoo.kernels import HMCKernel
from pfzoo.models import BilinearGenerative, Gaussian
from pfzoo.studies.step_size_pilot import HAISSetting
from pfzoo.training import EMHMC
from pfzoo.studies.model_comparison.comparison import ModelComparison
from pfzoo.studies.model_comparison.row_recorder import RowRecorder, gen
from pfzoo.studies.model_comparison.settings import NOISE_STD

RECIPE, SEED_OFFSET = "models_bilinear", 2
"""The comparison trains the bilinear model from ``conf/experiment/models_bilinear.yaml`` with run seed ``seed + 2``."""


def state_hash(model: torch.nn.Module) -> str:
    """SHA-256 of the model's state dict as ``torch.save`` writes it: which trained model a measurement used."""
    buffer = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, buffer)
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def convergence_in_n(model: BilinearGenerative, patches: torch.Tensor, setting: HAISSetting, steps: Sequence[int], particles: int,
                     seed: int, progress: Callable[[str], None] | None = None) -> list[dict]:
    """Per-example HAIS (eqs. 27–29) with ``setting`` on ``patches [B, M]`` at every N of ``steps``, ``particles`` per patch.

    Returns one entry per N: the mean lower bound over the patches, its stderr over the estimator's randomness, the mean
    per-patch ESS of the particles' weights, the acceptance in the last tenth of β, and the seconds.
    """
    rows = []
    for index, num_steps in enumerate(steps):
        began = time.perf_counter()
        estimate = setting.estimator(particles, num_steps, base="isotropic").log_likelihood(
            model, patches, generator=gen(seed + index))
        acceptance = estimate.info.get("acceptance") or [float("nan")]
        rows.append({"num_steps": num_steps, "mean": estimate.mean, "stderr": estimate.stderr, "per_example": estimate.per_example.tolist(),
                     "acceptance_last_10pct": acceptance[-1], "seconds": time.perf_counter() - began, "warnings": list(estimate.warnings)})
        if progress is not None:
            progress(f"HAIS N = {num_steps:,}: {estimate.mean:.3f} ± {estimate.stderr:.3f} ({rows[-1]['seconds']:.0f} s)")
    return rows


def bidirectional(model: BilinearGenerative, num_examples: int, setting: HAISSetting, steps: Sequence[int], chains: int, seed: int,
                  progress: Callable[[str], None] | None = None) -> list[dict]:
    """Bidirectional Monte Carlo on ``num_examples`` patches simulated from ``model`` (the same patches at every N of
    ``steps``), with the HMC kernel and schedule of ``setting``: the mean forward (lower) and reverse (upper) bounds, their
    gap and stderrs, and the seconds, one entry per N."""
    kernel = HMCKernel(setting.step_size, stiffness=setting.stiffness, lower=model.latent_lower)
    rows = []
    for index, num_steps in enumerate(steps):
        began = time.perf_counter()
        result = Sandwich(chains, num_steps, schedule=setting.schedule, kernel=kernel)(model, num_examples, generator=gen(seed))
        rows.append({"num_steps": num_steps, "lower": result.lower_mean, "upper": result.upper_mean, "gap": result.gap,
                     "lower_stderr": result.lower_stderr, "upper_stderr": result.upper_stderr, "gap_stderr": result.gap_stderr,
                     "lower_ess": result.lower_ess, "upper_ess": result.upper_ess, "seconds": time.perf_counter() - began,
                     "warnings": list(result.warnings)})
        if progress is not None:
            progress(f"BDMC N = {num_steps:,}: [{result.lower_mean:.3f}, {result.upper_mean:.3f}], gap {result.gap:.3f} ({rows[-1]['seconds']:.0f} s)")
    return rows


@torch.no_grad()
def second_moments(model: BilinearGenerative, data: torch.Tensor, num_samples: int, seed: int) -> dict:
    """How the model's samples' second moments compare with the data's ``[N, M]`` (whitened, so about the identity): the
    eigenvalues of each covariance, and the exact log-likelihood that a Gaussian fitted to the data gives each."""
    samples = model.sample(num_samples, generator=gen(seed)).double()
    data = data.double()
    gaussian = Gaussian.fit(data.float()).double()
    return {"model_covariance_eigenvalues": torch.linalg.eigvalsh(samples.T.cov()).tolist(),
            "data_covariance_eigenvalues": torch.linalg.eigvalsh(data.T.cov()).tolist(),
            "data_gaussian_on_model_samples": gaussian.log_prob(samples).mean().item(),
            "data_gaussian_on_data": gaussian.log_prob(data).mean().item(),
            "model_excess_kurtosis": excess_kurtosis(samples), "data_excess_kurtosis": excess_kurtosis(data)}


def excess_kurtosis(x: torch.Tensor) -> float:
    """Mean over the M coordinates of ``E[(x − μ)⁴] / Var² − 3`` for ``x [N, M]``: how heavy-tailed the marginals are."""
    centred = x - x.mean(0)
    return (centred.pow(4).mean(0) / centred.pow(2).mean(0).square() - 3).mean().item()


def ica_start(splits: DataSplits, settings: dict, seed: int, recipe: Callable[..., DictConfig], num_style: int = 8,
              max_basis_norm: float = 1.0) -> BilinearGenerative:
    """A bilinear model that starts at the comparison's ICA row: Φ = W⁻¹ (ICA's basis, as sparse coding's EM starts), Θ = I
    (content c_k drives component k alone) and Ψ = 1/Ld + 0.01·N(0, 1), so the gain Ψd has mean ≈ 1 under the Exp(1)
    prior: a = c ⊙ Ψd is then a Laplace code with a mild common gain, a scale mixture of ICA's density."""
    study = ModelComparison(splits, settings, seed, recipe)
    study.products_of_experts()
    basis = study.ica_basis
    num_components = basis.shape[1]
    style = 1.0 / num_style + 0.01 * torch.randn(num_components, num_style, generator=gen(seed + SEED_OFFSET), dtype=basis.dtype)
    return BilinearGenerative.from_tensors(basis, torch.eye(num_components, dtype=basis.dtype), style, noise_std=NOISE_STD,
                                           max_basis_norm=max_basis_norm)


def train_variant(splits: DataSplits, settings: dict, seed: int, recipe: Callable[..., DictConfig], start: str, epochs: int,
                  *overrides: str, num_style: int = 8) -> tuple[BilinearGenerative, dict]:
    """The comparison's bilinear training (:func:`train_bilinear`) changed in one setting: ``start`` "random" (the recipe's
    0.17·N(0, 1) weights) or "ica" (:func:`ica_start`), ``epochs`` (0: the untrained start), recipe ``overrides`` (e.g.
    ``model.max_basis_norm=null``), and ``num_style`` Ld (the model's size, Lc + Ld latents, is what Fig. 5 sweeps)."""
    recorder = RowRecorder(splits, settings, seed, recipe)
    model = None if start == "random" else ica_start(splits, settings, seed, recipe, num_style=num_style)
    overrides = (*overrides, f"model.num_style={num_style}")
    if epochs == 0:  # the start itself: what training adds or takes away
        if model is None:
            raise ValueError("epochs = 0 needs start='ica': a random start is not a model worth evaluating")
        return model.requires_grad_(False), {"epochs": 0, "final_loss": None, "wall_seconds": 0.0}
    began = time.perf_counter()
    trained, _, info, _, _ = recorder.fit_em(RECIPE, seed + SEED_OFFSET, epochs, *overrides, model=model)
    info["wall_seconds"] = time.perf_counter() - began
    return trained, info


@torch.no_grad()
def e_step_geweke(model: BilinearGenerative, chains: int, iterations: int, seed: int, *, step_size: float = 0.3,
                  num_leapfrog: int = 4) -> dict:
    """Geweke's joint-distribution test (Geweke 2004) of EM-HMC's E-step sampler on ``model``'s latents z = [c, d], with the
    reflection at d = 0: marginal-conditional draws of p(z, x) against ``chains`` successive-conditional chains started at
    exact draws, each repeating {one E-step, x ~ p(x | z)} ``iterations`` times. A sampler that leaves p(z | x) invariant
    keeps every iterate a draw of p(z, x), so the z-scores of the first and second joint moments (z, x, z², x², z·x per
    coordinate pair) stay standard normal. Returns the z-scores ``[S]``, their largest |z| and the E-step's acceptance."""
    generator = gen(seed)
    x_marginal, z_marginal = model.sample_joint(chains, generator=generator)
    x, z = model.sample_joint(chains, generator=generator)
    sampler = EMHMC(num_hmc_steps=1, step_size=step_size, num_leapfrog=num_leapfrog, target_acceptance=None, batch_hmc_steps=0)
    sampler.latents, sampler.batch_advanced = z, torch.zeros(chains, dtype=torch.bool)
    for _ in range(iterations):
        sampler.prepare(model, x, generator=generator)
        x = model.sample_visible(sampler.latents, generator=generator)

    def joint_moments(z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([z, x, z**2, x**2, (z[:, :, None] * x[:, None, :]).flatten(1)], dim=1)

    successive, marginal = joint_moments(sampler.latents, x), joint_moments(z_marginal, x_marginal)
    scores = (successive.mean(0) - marginal.mean(0)) / (successive.var(0) / chains + marginal.var(0) / chains).sqrt()
    return {"z_scores": scores.tolist(), "max_abs_z": scores.abs().max().item(), "acceptance": sampler.adaptation[-1][0],
            "chains": chains, "iterations": iterations}
