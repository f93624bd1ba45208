"""Annealed importance sampling (Neal 2001; Salakhutdinov & Murray 2008 for RBMs)."""

from __future__ import annotations

import torch

from pfzoo.estimators.annealing import anneal
from pfzoo.estimators.base import BoundKind, Estimator, LikelihoodEstimate, PartitionEstimate, ProgressCallback
from pfzoo.estimators.posterior_annealing import posterior_annealing_log_likelihood
from pfzoo.kernels.hmc import HMCKernel
from pfzoo.logmath import summarize_log_weights
from pfzoo.models.base import EnergyModel
from pfzoo.models.latent import LatentGenerativeModel
from pfzoo.paths.schedules import ScheduleSpec, make_betas
from pfzoo.validation import check_generator, check_positive_int


DEFAULT_LATENT_STEP_SIZE = 0.2
"""Leapfrog step of the default HMC kernel over a generative model's latents (HAIS's ε)."""


class AIS(Estimator):
    """AIS estimate of ``log Z`` along the model's geometric path from a tractable base.

    ``Ẑ = Z_0 · mean_i w_i`` is unbiased for Z, so ``log Ẑ`` is a stochastic lower bound on
    ``log Z`` and log-likelihoods computed from it are biased upward. All chains run as one
    batch; the standard error is the delta-method one of :func:`pfzoo.logmath.summarize_log_weights`.

    Args:
        num_chains: N, independent annealing chains (≥ 2).
        num_steps: K, intermediate distributions (ignored when ``schedule`` is an explicit β sequence).
        schedule: "linear", "sigmoid", a :class:`~pfzoo.paths.Schedule`, or an explicit β sequence.
        base: the model family's base distribution, see its ``annealing_base``: for binary RBMs
            "uniform" or "base_rate" (needs ``data``); for continuous models "isotropic" or "fitted".
        base_smoothing: pseudo-count for data-fitted bases.
        kernel: transition kernel for models whose path takes one (continuous models:
            :class:`~pfzoo.kernels.HMCKernel`, :class:`~pfzoo.kernels.RandomWalkMetropolis`);
            ``None`` = the model's default (block Gibbs for RBMs).
        posterior_samples: proposals per example for ``log f(v)`` in :meth:`log_likelihood` when
            the model's free energy is intractable (DBM: mean-field proposal; DBN: recognition model).
        path: the kind of annealing path, one of the model's ``annealing_path_kinds``: "geometric"
            (every model) or "moment_averaged" (Grosse, Maddison & Salakhutdinov 2013; Gaussians and RBMs).
        diagnostics: also return, in ``info["diagnostics"]`` of the log Z estimate, the per-step
            :class:`~pfzoo.estimators.annealing.AnnealingDiagnostics` (increments of log w, ESS
            along the path, symmetric-KL estimates and their cost functional); feed them to
            :meth:`pfzoo.paths.OptimalSchedule.from_diagnostics` for a schedule fitted to the path.

    For a directed latent-variable model (:class:`~pfzoo.models.latent.LatentGenerativeModel`, e.g.
    :class:`~pfzoo.models.LinearGenerative`), :meth:`log_likelihood` instead anneals each example's
    latents from the prior to the posterior with ``num_chains`` particles per example (HAIS eqs. 27–29):
    a stochastic lower bound on ``log p(x)``.
    """

    def __init__(
        self,
        num_chains: int = 100,
        num_steps: int | None = 1000,
        schedule: ScheduleSpec = "linear",
        base: str = "uniform",
        base_smoothing: float = 1.0,
        kernel=None,
        posterior_samples: int = 100,
        path: str = "geometric",
        diagnostics: bool = False,
    ) -> None:
        super().__init__()
        self.diagnostics = bool(diagnostics)
        if not isinstance(path, str):
            raise ValueError(f"path must be a path kind such as 'geometric' or 'moment_averaged', got {type(path).__name__}")
        self.path = path
        self.posterior_samples = check_positive_int(posterior_samples, "posterior_samples")
        self.num_chains = check_positive_int(num_chains, "num_chains")
        if num_chains < 2:
            raise ValueError(f"num_chains must be at least 2 to report a standard error, got {num_chains}")
        self.schedule = schedule
        self.base = base
        self.base_smoothing = base_smoothing
        self.kernel = kernel
        self.register_buffer("betas", make_betas(schedule, num_steps), persistent=False)

    @property
    def num_steps(self) -> int:
        return self.betas.numel() - 1

    def forward(
        self,
        model: EnergyModel,
        *,
        data: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> PartitionEstimate:
        """Estimate ``log Z`` of ``model``; ``data [N, V]`` feeds the base-rate base distribution."""
        check_generator(generator, model.device)
        base = model.annealing_base(self.base, data, smoothing=self.base_smoothing)
        path = model.annealing_path(self.path, base, kernel=self.kernel)
        initial = path.sample_base(self.num_chains, generator=generator)
        result = anneal(path, self.betas, initial, generator=generator, progress=progress, diagnostics=self.diagnostics)
        log_weights = result.log_weights + path.base_log_partition()
        summary = summarize_log_weights(log_weights)
        return PartitionEstimate(
            log_z=summary.log_mean.item(),
            stderr=summary.stderr.item(),
            log_weights=log_weights,
            ess=summary.ess.item(),
            kind=BoundKind.UNBIASED_Z,
            info={"estimator": type(self).__name__, "num_chains": self.num_chains, "num_steps": self.num_steps, "base": self.base,
                  "path": self.path, **({"diagnostics": result.diagnostics} if self.diagnostics else {})},
        )

    def log_likelihood(
        self,
        model: EnergyModel,
        data: torch.Tensor,
        *,
        base_data: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> LikelihoodEstimate:
        """As :meth:`Estimator.log_likelihood`; for latent-variable generative models, per-example annealing over the latents."""
        if not isinstance(model, LatentGenerativeModel):
            return super().log_likelihood(model, data, base_data=base_data, generator=generator, progress=progress)
        model.check_visible(data, "data")
        check_generator(generator, model.device)
        kernel = self.kernel if self.kernel is not None else HMCKernel(DEFAULT_LATENT_STEP_SIZE)
        if isinstance(kernel, HMCKernel) and kernel.lower is None and model.latent_lower is not None:
            # reflect where the prior's support ends (e.g. the bilinear model's d ≥ 0), keeping the kernel's settings
            kernel = kernel.reflecting_at(model.latent_lower)
        info = {"estimator": type(self).__name__, "mode": "per-example annealing from the prior to the posterior"}
        return posterior_annealing_log_likelihood(
            model, data, num_particles=self.num_chains, betas=self.betas, kernel=kernel, generator=generator, progress=progress, info=info
        )
