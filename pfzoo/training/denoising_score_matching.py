"""Denoising score matching (Vincent 2011; Deep Learning §18.5): match the model's score at a corrupted point
``x̃ = x + σ ε``, ``ε ~ N(0, I)``, to the score of the corruption ``∇_x̃ log q_σ(x̃ | x) = −(x̃ − x)/σ²``:

    L(θ) = ½ E_{x ~ data, ε} ‖ ∇_x̃ log p̃(x̃) + (x̃ − x)/σ² ‖²,

whose minimiser matches the score of the *smoothed* data density ``q_σ = data ∗ N(0, σ² I)``, not the data's: for a
Gaussian model it is the maximum-likelihood covariance plus ``σ² I`` (tests check it in closed form). It needs only the
first derivative of ``log p̃`` (one backward pass, by autograd), so it applies where the Laplacian is costly or not
defined (Laplace experts' kinks).

With a ladder of noise levels ``σ_1, …, σ_K`` (Song & Ermon 2019) each example draws one σ uniformly, and its term is
weighted by ``λ(σ) = σ²``, so every level contributes on the same scale: ``½ ‖σ s(x̃) + ε‖²``. A single σ is unweighted.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pfzoo.sampling import normal, randint
from pfzoo.training.objective import Objective
from pfzoo.training.score_functions import autograd_score, missing_real_free_energy
from pfzoo.validation import checking_values


class DenoisingScoreMatching(Objective):
    """Minimise ``(1/B) Σ_n λ(σ_n) ½ ‖s(x̃_n) + ε_n/σ_n‖²``, ``x̃_n = x_n + σ_n ε_n``, ``s = −∇_x F`` (Vincent 2011).

    Args:
        sigma: the noise level σ > 0, or a list of them (a ladder: one drawn per example, uniformly, weighted σ²).
    """

    config_name = "denoising_score_matching"
    missing = staticmethod(missing_real_free_energy)

    def __init__(self, sigma: float | Sequence[float] = 0.1) -> None:
        super().__init__()
        levels = [sigma] if isinstance(sigma, (int, float, str)) else list(sigma)
        if not levels or any(isinstance(level, bool) or not isinstance(level, (int, float)) or not level > 0 for level in levels):
            raise ValueError(f"sigma must be a positive number or a non-empty list of them, got {sigma!r}")
        self.ladder = len(levels) > 1
        self.register_buffer("sigmas", torch.tensor([float(level) for level in levels], dtype=torch.float64), persistent=False)

    def caveats(self, model) -> tuple[str, ...]:
        """The minimiser fits the data convolved with the noise, not the data: a bias of the noise level's size."""
        levels = ", ".join(f"{sigma:g}" for sigma in self.sigmas.tolist())
        return (f"denoising score matching fits the data blurred by its noise N(0, σ² I) (σ = {levels}), not the data: the "
                f"estimate is biased by that noise, and more data does not remove it (a Gaussian's fitted covariance is the "
                f"data's plus σ² I); lower sigma or use trainer=score_matching, ml or nce for an unbiased fit",)

    def example_losses(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Each row's ``λ(σ_n) ½ ‖s(x̃_n) + ε_n/σ_n‖²`` for ``batch [B, M]`` → ``[B]``, noise and levels from ``generator``."""
        if checking_values():  # inside the Trainer's steps the model was checked by fit
            self.check(model)
            model.check_visible(batch, "batch")
        noise = normal(tuple(batch.shape), generator=generator, device=batch.device, dtype=batch.dtype)
        sigmas = self.sigmas.to(device=batch.device, dtype=batch.dtype)
        if self.ladder:
            sigma = sigmas[randint(len(sigmas), (batch.shape[0],), generator=generator, device=batch.device)].unsqueeze(1)
        else:
            sigma = sigmas.expand(batch.shape[0]).unsqueeze(1)
        with torch.enable_grad():
            corrupted = (batch.detach() + sigma * noise).requires_grad_(True)
            score = autograd_score(model, corrupted)
        residual = 0.5 * (score + noise / sigma).square().sum(1)  # (x̃ − x)/σ² = ε/σ
        return residual * sigma.squeeze(1).square() if self.ladder else residual

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """The denoising score matching loss of ``batch [B, M]`` (scalar): the mean of :meth:`example_losses`."""
        return self.example_losses(model, batch, generator=generator).mean()
