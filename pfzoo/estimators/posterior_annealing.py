"""Per-example log-likelihoods of latent-variable generative models by annealing over the latents (HAIS §3)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from pfzoo.estimators.annealing import anneal
from pfzoo.estimators.base import (
    BoundKind, LikelihoodEstimate, ProgressCallback, independent_examples_stderr, likelihood_estimate, reliability_warnings,
)
from pfzoo.estimators.batching import example_batches
from pfzoo.estimators.sharding import offset_progress, run_blocks
from pfzoo.kernels import Kernel, ReflectingKernel, reflection_bounds
from pfzoo.kernels.hmc import HMCKernel
from pfzoo.logmath import summarize_log_weights
from pfzoo.paths.posterior import PosteriorPath

ROWS_PER_CHUNK = 1 << 16
"""Examples × particles annealed as one batch; larger data sets run in chunks of whole examples."""

DEFAULT_LATENT_STEP_SIZE = 0.2
"""Leapfrog step of the default HMC kernel over a generative model's latents (HAIS's ε)."""


def posterior_kernel(model, kernel: Kernel | None = None) -> Kernel:
    """The kernel to anneal ``model``'s latents with: ``kernel``, or HMC with step :data:`DEFAULT_LATENT_STEP_SIZE` for
    ``None``; a kernel that reflects nowhere (``lower=None``) is given the model's latent bounds, keeping its settings."""
    kernel = HMCKernel(DEFAULT_LATENT_STEP_SIZE) if kernel is None else kernel
    if isinstance(kernel, ReflectingKernel) and kernel.lower is None and model.latent_lower is not None:
        # reflect where the prior's support ends (e.g. the bilinear model's d ≥ 0)
        kernel = kernel.reflecting_at(model.latent_lower)
    return kernel


def check_kernel_bounds(model, kernel) -> None:
    """Raise ``ValueError`` unless ``kernel`` reflects exactly at the model's latent bounds (``model.latent_lower``)."""
    model_lower, kernel_lower = model.latent_lower, reflection_bounds(kernel)
    if model_lower is None and kernel_lower is None:
        return
    if model_lower is None or kernel_lower is None:
        raise ValueError(
            f"kernel={type(kernel).__name__} (lower={_bounds(kernel_lower)}) must reflect exactly at the bounds of "
            f"{type(model).__name__}'s latents ({_bounds(model_lower)}), where the prior's support ends; use the "
            f"estimator's default kernel (estimator=hais or ais)"
        )
    expected = torch.as_tensor(model_lower, dtype=torch.float64).expand(model.num_latent)
    if not torch.equal(kernel_lower.to(torch.float64).expand(model.num_latent), expected):
        raise ValueError(
            f"kernel={type(kernel).__name__} reflects at lower={_bounds(kernel_lower)} but {type(model).__name__}'s latents are "
            f"bounded at {_bounds(model_lower)}; use the estimator's default kernel"
        )


def _bounds(lower) -> str:
    """A short description of lower bounds (``None``, a number or a tensor): e.g. ``"8 of 44 bounded below"``."""
    if lower is None:
        return "none"
    values = torch.as_tensor(lower, dtype=torch.float64).flatten()
    finite = values[torch.isfinite(values)]
    if values.numel() == 1:
        return f"{values.item():g}"
    where = "" if finite.numel() == 0 else f" (at {', '.join(f'{v:g}' for v in finite.unique().tolist())})"
    return f"{finite.numel()} of {values.numel()} bounded below{where}"


class PerExampleAnnealing(NamedTuple):
    """Each example's particles reduced (:func:`~pfzoo.logmath.summarize_log_weights`), and the kernel's acceptance.

    log_mean, stderr, ess: float64 ``[B]``, per example over its particles: ``log (1/P) Σ_p w_np``, its delta-method
    standard error and the weights' effective sample size. acceptance: the kernel's mean acceptance probability per
    stretch of the schedule, averaged over the examples (float64 CPU ``[S]``), and segment_betas the β ending each stretch
    ``[S]``; both ``None`` for kernels that always accept.
    """

    log_mean: torch.Tensor
    stderr: torch.Tensor
    ess: torch.Tensor
    acceptance: torch.Tensor | None
    segment_betas: torch.Tensor | None


def anneal_examples(
    model,
    data: torch.Tensor,
    *,
    num_particles: int,
    betas: torch.Tensor,
    kernel,
    latents: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    progress: ProgressCallback | None = None,
) -> PerExampleAnnealing:
    """Anneal ``num_particles`` chains per row of ``data [B, M]`` along :class:`~pfzoo.paths.posterior.PosteriorPath`.

    Without ``latents`` every chain starts from an exact prior draw and ``betas`` (float64 ``[K + 1]``) runs from 0 to 1:
    forward AIS, ``E[w_np] = p(x_n)`` (HAIS eqs. 27–29). With ``latents [B, L]``, exact posterior samples
    ``z_n ~ p(z | x_n)``, all of an example's chains start from its ``z_n`` (each with its own momentum and random
    stream) and ``betas`` runs from 1 to 0: reverse AIS, ``E[w_np] = 1/p(x_n)`` (Grosse, Ghahramani & Adams 2015, §4).
    Examples × particles run as one tensor per block of examples with the block's own random stream
    (:func:`pfzoo.estimators.sharding.run_blocks`, so the same numbers plain or on any number of ranks), in chunks of
    about :data:`ROWS_PER_CHUNK` rows.
    """
    check_kernel_bounds(model, kernel)

    def run(examples: torch.Tensor, starts: torch.Tensor | None, block_generator: torch.Generator | None,
            block_progress: ProgressCallback | None) -> tuple:
        """Per-example log means, stderrs and ESS ``[b]`` of ``examples [b, M]``, and the acceptance summed over examples."""
        chunks = example_batches(examples, num_particles, max_rows=ROWS_PER_CHUNK)
        start_chunks = [None] * len(chunks) if starts is None else example_batches(starts, num_particles, max_rows=ROWS_PER_CHUNK)
        log_means, stderrs, esses, acceptances, segment_betas = [], [], [], [], None
        for index, (chunk, start) in enumerate(zip(chunks, start_chunks)):
            rows = chunk.repeat_interleave(num_particles, dim=0)
            path = PosteriorPath(model, rows, kernel)
            report = None if block_progress is None else offset_progress(block_progress, index, len(chunks))
            with torch.no_grad():
                if start is None:
                    initial = path.sample_base(rows.shape[0], generator=block_generator)
                else:  # exact samples of the β = 1 end: the posterior latents, momenta drawn afresh by the kernel's init
                    initial = path.init(start.repeat_interleave(num_particles, dim=0), generator=block_generator)
                result = anneal(path, betas, initial, generator=block_generator, progress=report)
            summary = summarize_log_weights(result.log_weights.view(chunk.shape[0], num_particles), dim=1)
            log_means.append(summary.log_mean)
            stderrs.append(summary.stderr)
            esses.append(summary.ess)
            if result.acceptance is not None:
                acceptances.append(result.acceptance * chunk.shape[0])
                segment_betas = result.segment_betas
        acceptance = torch.stack(acceptances).sum(0) if acceptances else None
        return torch.cat(log_means), torch.cat(stderrs), torch.cat(esses), acceptance, segment_betas

    def run_block(examples: range, block_generator: torch.Generator, block_progress: ProgressCallback | None) -> tuple:
        starts = None if latents is None else latents[examples.start:examples.stop]
        parts = run(data[examples.start:examples.stop], starts, block_generator, block_progress)
        return tuple(part if part is None else part.cpu() for part in parts)

    # examples in blocks, each block's stream fixed by the seed and its index, dealt across ranks under torch.distributed
    blocks = run_blocks(data.shape[0], run_block, generator=generator, device=data.device, progress=progress)
    log_means, stderrs, esses = (torch.cat([block[i] for block in blocks]).to(data.device) for i in range(3))
    summed = [block[3] for block in blocks if block[3] is not None]
    acceptance_sum, segment_betas = (torch.stack(summed).sum(0), blocks[0][4]) if summed else (None, None)
    acceptance = None if acceptance_sum is None else acceptance_sum / data.shape[0]
    return PerExampleAnnealing(log_means, stderrs, esses, acceptance, segment_betas)


def posterior_annealing_log_likelihood(
    model,
    data: torch.Tensor,
    *,
    num_particles: int,
    betas: torch.Tensor,
    kernel,
    generator: torch.Generator | None = None,
    progress: ProgressCallback | None = None,
    info: dict | None = None,
    remedy: str = "anneal longer (num_steps) or with more chains",
) -> LikelihoodEstimate:
    """``log p̂(x_n) = log (1/P) Σ_p w_np`` for each row of ``data [B, M]`` (HAIS eqs. 27–29); ``remedy`` ends the
    weight warnings (:func:`~pfzoo.estimators.base.reliability_warnings`).

    Each example gets ``num_particles`` chains annealed from the prior (β = 0) to its posterior (β = 1)
    along :class:`~pfzoo.paths.posterior.PosteriorPath` (:func:`anneal_examples`). ``E[w_np] = p(x_n)``, so each
    ``log p̂(x_n)`` is a stochastic lower bound on ``log p(x_n)``. The stderr of the mean combines the per-example
    delta-method errors: ``sqrt(Σ_n se_n²) / B``.
    """
    result = anneal_examples(model, data, num_particles=num_particles, betas=betas, kernel=kernel, generator=generator, progress=progress)
    ess = result.ess.mean().item()  # per example, over its particles, averaged
    info = {**(info or {}), "num_particles": num_particles, "num_steps": betas.numel() - 1, "ess": ess}
    if result.acceptance is not None:
        info.update(acceptance=result.acceptance.tolist(), acceptance_betas=result.segment_betas.tolist())
    warnings = reliability_warnings(ess, num_particles, result.acceptance, result.segment_betas, remedy=remedy)
    return likelihood_estimate(
        result.log_mean, stderr=independent_examples_stderr(result.stderr), kind=BoundKind.LIKELIHOOD_LOWER_BOUND,
        info={**info, "per_example_stderr": result.stderr}, warnings=warnings, independent_examples=True,
    )
