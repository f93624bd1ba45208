"""Per-example log-likelihoods of latent-variable generative models by annealing over the latents (HAIS §3)."""

from __future__ import annotations

import torch

from pfzoo.estimators.annealing import anneal
from pfzoo.estimators.base import (
    BoundKind, LikelihoodEstimate, ProgressCallback, independent_examples_stderr, likelihood_estimate, reliability_warnings,
)
from pfzoo.estimators.batching import example_batches
from pfzoo.estimators.sharding import offset_progress, run_blocks
from pfzoo.logmath import summarize_log_weights
from pfzoo.paths.posterior import PosteriorPath

ROWS_PER_CHUNK = 1 << 16
"""Examples × particles annealed as one batch; larger data sets run in chunks of whole examples."""


def check_kernel_bounds(model, kernel) -> None:
    """Raise ``ValueError`` unless ``kernel`` reflects exactly at the model's latent bounds (``model.latent_lower``)."""
    model_lower, kernel_lower = model.latent_lower, getattr(kernel, "lower", None)
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
) -> LikelihoodEstimate:
    """``log p̂(x_n) = log (1/P) Σ_p w_np`` for each row of ``data [B, M]`` (HAIS eqs. 27–29).

    Each example gets ``num_particles`` chains annealed from the prior (β = 0) to its posterior (β = 1)
    along :class:`~pfzoo.paths.posterior.PosteriorPath`; examples × particles run as one tensor per block of
    examples with the block's own random stream (:func:`pfzoo.estimators.sharding.run_blocks`, so the same numbers
    plain or on any number of ranks), in chunks of about :data:`ROWS_PER_CHUNK` rows. ``E[w_np] = p(x_n)``, so each ``log p̂(x_n)`` is a
    stochastic lower bound on ``log p(x_n)``. The stderr of the mean combines the per-example
    delta-method errors: ``sqrt(Σ_n se_n²) / B``.
    """
    check_kernel_bounds(model, kernel)
    num_steps = betas.numel() - 1

    def run(examples: torch.Tensor, block_generator: torch.Generator | None, block_progress: ProgressCallback | None) -> tuple:
        """Per-example log means, stderrs and ESS ``[b]`` of ``examples [b, M]``, and the acceptance summed over examples."""
        chunks = example_batches(examples, num_particles, max_rows=ROWS_PER_CHUNK)
        log_means, stderrs, esses, acceptances, segment_betas = [], [], [], [], None
        for index, chunk in enumerate(chunks):
            rows = chunk.repeat_interleave(num_particles, dim=0)
            path = PosteriorPath(model, rows, kernel)
            report = None if block_progress is None else offset_progress(block_progress, index, len(chunks))
            with torch.no_grad():
                result = anneal(path, betas, path.sample_base(rows.shape[0], generator=block_generator), generator=block_generator,
                                progress=report)
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
        parts = run(data[examples.start:examples.stop], block_generator, block_progress)
        return tuple(part if part is None else part.cpu() for part in parts)

    # examples in blocks, each block's stream fixed by the seed and its index, dealt across ranks under torch.distributed
    blocks = run_blocks(data.shape[0], run_block, generator=generator, device=data.device, progress=progress)
    log_means, stderrs, esses = (torch.cat([block[i] for block in blocks]).to(data.device) for i in range(3))
    summed = [block[3] for block in blocks if block[3] is not None]
    acceptance_sum, segment_betas = (torch.stack(summed).sum(0), blocks[0][4]) if summed else (None, None)
    ess = esses.mean().item()  # per example, over its particles, averaged
    info = {**(info or {}), "num_particles": num_particles, "num_steps": num_steps, "ess": ess}
    acceptance = None
    if acceptance_sum is not None:
        acceptance = acceptance_sum / data.shape[0]
        info.update(acceptance=acceptance.tolist(), acceptance_betas=segment_betas.tolist())
    warnings = reliability_warnings(ess, num_particles, acceptance, segment_betas)
    return likelihood_estimate(
        log_means, stderr=independent_examples_stderr(stderrs), kind=BoundKind.LIKELIHOOD_LOWER_BOUND,
        info={**info, "per_example_stderr": stderrs}, warnings=warnings, independent_examples=True,
    )
