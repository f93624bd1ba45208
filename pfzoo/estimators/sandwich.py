"""Bidirectional Monte Carlo (Grosse, Ghahramani & Adams 2015): log p(x) sandwiched between forward and reverse AIS on
data simulated from a latent-variable generative model."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pfzoo.estimators.base import Estimator, ProgressCallback, independent_examples_stderr, reliability_warnings
from pfzoo.estimators.posterior_annealing import PerExampleAnnealing, anneal_examples, posterior_kernel
from pfzoo.estimators.sharding import offset_progress
from pfzoo.kernels import Kernel
from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability
from pfzoo.paths.schedules import ScheduleSpec, make_betas
from pfzoo.validation import check_finite_number, check_generator, check_positive_int, check_sample_count

NOISE_STDERRS = 3.0
"""An upper bound below the lower one by more than this many standard errors of their gap is flagged as impossible."""


@dataclass(frozen=True)
class SandwichEstimate:
    """Stochastic lower and upper bounds on ``log p(x_n)`` for B examples simulated from the model.

    data: the simulated examples ``x_n`` ``[B, M]``; latents: the latents ``z_n`` that generated them ``[B, L]``, each an
        exact sample of its example's posterior (compare the bounds with an exact ``log p(x_n)`` where there is one).
    lower: float64 ``[B]``, forward AIS ``log (1/C) Σ_c w_nc`` (``E[w_nc] = p(x_n)``).
    upper: float64 ``[B]``, reverse AIS ``−log (1/C) Σ_c w̃_nc`` (``E[w̃_nc] = 1/p(x_n)``).
    lower_mean, upper_mean: their means over the examples; gap: ``upper_mean − lower_mean``, an upper bound (in
        expectation) on the mean error of either bound.
    lower_stderr, upper_stderr, gap_stderr: standard errors of the three means over the estimator's randomness given
        the simulated ``x_n`` (see :class:`Sandwich` for how the upper one is made).
    lower_ess, upper_ess: per-example effective sample size of the chains' weights, averaged over the examples.
    forward, reverse: the two runs' per-example summaries and the kernel's acceptance per stretch of the schedule
        (:class:`~pfzoo.estimators.posterior_annealing.PerExampleAnnealing`; the reverse run's stretches have
        descending β, and its ``log_mean`` is ``−upper``).
    num_chains, num_steps: C chains per example in each direction, K annealing steps.
    warnings: one line per reason not to trust the bounds (a gap above the threshold, an upper bound below the lower
        one beyond noise, either run's small ESS or collapsed acceptance); empty when none.
    """

    data: torch.Tensor
    latents: torch.Tensor
    lower: torch.Tensor
    upper: torch.Tensor
    lower_mean: float
    upper_mean: float
    gap: float
    lower_stderr: float
    upper_stderr: float
    gap_stderr: float
    lower_ess: float
    upper_ess: float
    forward: PerExampleAnnealing
    reverse: PerExampleAnnealing
    num_chains: int
    num_steps: int
    warnings: tuple[str, ...] = ()


class Sandwich(Estimator):
    """Bidirectional Monte Carlo: simulate ``(x_n, z_n) ~ p(z) p(x | z)``, then bound each ``log p(x_n)`` from both sides.

    Forward AIS anneals C chains per example from the prior (β = 0) to the posterior (β = 1) along
    :class:`~pfzoo.paths.posterior.PosteriorPath` with the kernel HAIS uses for latent models: its weights have
    ``E[w_nc] = p(x_n)``, so ``log (1/C) Σ_c w_nc`` is a stochastic lower bound on ``log p(x_n)`` (Jensen; BDMC §3).
    Reverse AIS runs the same path and kernel from β = 1 down to 0, starting from ``z_n``, which is an exact posterior
    sample because it generated ``x_n``: with ``z_K = z_n`` and ``z_{k−1}`` a transition at ``β_{k−1}`` from ``z_k``,
    its weights ``w̃_nc = Π_{k=1..K} f_{β_{k−1}}(z_k) / f_{β_k}(z_k)`` are AIS weights for ``Z_0 / Z_1 = 1/p(x_n)``, so
    ``−log (1/C) Σ_c w̃_nc`` is a stochastic upper bound (BDMC §4). The C reverse chains of an example all start from
    its one exact sample, the only one there is (each draws its own momentum and moves): their mean weight is still
    unbiased for ``1/p(x_n)``, but they are not independent. Both bounds tighten as K grows, and their gap bounds (in
    expectation) the error of each. The upper bound is valid only on such simulated data: a real data set has no exact
    posterior sample, so this is not a likelihood estimator for the app.

    Standard errors, over the estimator's randomness given the ``x_n``: the lower one combines the per-example
    delta-method errors (``sqrt(Σ_n se_n²) / B``). The reverse chains' delta-method error misses the randomness of their
    shared start ``z_n``, and ``x_n`` has no other exact sample to measure it with; since the two runs are independent
    given ``x_n``, ``Var(U_n) = Var(U_n − L_n) − Var(L_n)``, and the sample variance of ``upper − lower`` over the
    examples, less the mean squared lower stderr, estimates the mean ``Var(U_n)`` plus the spread of the expected gap
    across examples: it errs high. The upper stderr is the square root of that (or of the mean squared delta-method
    error of the reverse chains, if larger) over B; the gap's combines both.

    Args:
        num_chains: C ≥ 2, chains per example in each direction.
        num_steps: K, intermediate distributions (ignored for an explicit β sequence).
        schedule: "linear", "sigmoid", "power:5", ..., a :class:`~pfzoo.paths.Schedule` or an explicit β sequence from
            0 to 1 (the reverse run takes it backwards); "energy" anneals linearly here, as HAIS does over latents.
        kernel: the transition on the latents (:class:`~pfzoo.kernels.HMCKernel`, ...); ``None``: HAIS's default
            (:func:`~pfzoo.estimators.posterior_annealing.posterior_kernel`), reflecting at the model's latent bounds.
        gap_threshold: nats of mean gap above which a warning is set.
    """

    def __init__(
        self,
        num_chains: int = 20,
        num_steps: int | None = 1000,
        schedule: ScheduleSpec = "linear",
        kernel: Kernel | None = None,
        gap_threshold: float = 1.0,
    ) -> None:
        super().__init__()
        self.num_chains = check_sample_count(num_chains, "num_chains")
        self.kernel = kernel
        self.gap_threshold = check_finite_number(gap_threshold, "gap_threshold", minimum=0.0, exclusive=True)
        self.register_buffer("betas", make_betas(schedule, num_steps), persistent=False)

    @property
    def num_steps(self) -> int:
        return self.betas.numel() - 1

    def missing(self, model: EnergyModel) -> str | None:
        """Simulating ``(x, z)`` jointly and annealing over z need a prior over latents and a likelihood ``p(x | z)``."""
        return None if Capability.LATENT_GENERATIVE in model.capabilities else Capability.LATENT_GENERATIVE.value

    def forward(
        self,
        model: EnergyModel,
        num_examples: int,
        *,
        generator: torch.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> SandwichEstimate:
        """Simulate ``num_examples`` (≥ 2) examples from ``model`` (:meth:`~pfzoo.models.LatentGenerativeModel.sample_joint`)
        and bound their log-likelihoods by forward and reverse AIS; ``progress`` reports the forward run then the reverse.
        Everything runs on the model's device, each example's C chains batched with the others'."""
        self.check(model)
        check_positive_int(num_examples, "num_examples")
        if num_examples < 2:
            raise ValueError(f"num_examples must be at least 2 to report the upper bound's standard error, got {num_examples}")
        check_generator(generator, model.device)
        kernel = posterior_kernel(model, self.kernel)
        data, latents = model.sample_joint(num_examples, generator=generator)
        settings = dict(num_particles=self.num_chains, kernel=kernel, generator=generator)
        forward = anneal_examples(model, data, betas=self.betas, progress=_part(progress, 0), **settings)
        reverse = anneal_examples(model, data, betas=self.betas.flip(0), latents=latents, progress=_part(progress, 1), **settings)
        lower, upper = forward.log_mean, -reverse.log_mean
        lower_stderr = independent_examples_stderr(forward.stderr)
        # per-example variance of the upper bounds: Var(U − L) − Var(L) errs high (see the class docstring); never below
        # what the reverse chains' own spread shows
        difference_variance = (upper - lower).var().item() - forward.stderr.square().mean().item()
        upper_stderr = math.sqrt(max(difference_variance, reverse.stderr.square().mean().item()) / num_examples)
        gap_stderr = math.hypot(lower_stderr, upper_stderr)
        lower_mean, upper_mean = lower.mean().item(), upper.mean().item()
        gap = upper_mean - lower_mean
        lower_ess, upper_ess = forward.ess.mean().item(), reverse.ess.mean().item()
        warnings = []
        if gap > self.gap_threshold:
            warnings.append(
                f"the bounds are {gap:.2f} ± {gap_stderr:.2f} nats apart on average (threshold {self.gap_threshold:g}): "
                f"log p(x) is only pinned down to that; anneal longer (num_steps)"
            )
        if gap < -NOISE_STDERRS * gap_stderr:
            warnings.append(
                f"the upper bound lies {-gap:.2f} ± {gap_stderr:.2f} nats below the lower one, impossible in expectation: "
                f"the kernel does not leave each annealing distribution invariant (check its step size and bounds)"
            )
        for name, run, ess in (("forward", forward, lower_ess), ("reverse", reverse, upper_ess)):
            warnings += [f"{name} AIS: {line}" for line in reliability_warnings(ess, self.num_chains, run.acceptance, run.segment_betas)]
        return SandwichEstimate(
            data=data, latents=latents, lower=lower, upper=upper, lower_mean=lower_mean, upper_mean=upper_mean, gap=gap,
            lower_stderr=lower_stderr, upper_stderr=upper_stderr, gap_stderr=gap_stderr, lower_ess=lower_ess,
            upper_ess=upper_ess, forward=forward, reverse=reverse, num_chains=self.num_chains, num_steps=self.num_steps,
            warnings=tuple(warnings),
        )


def _part(progress: ProgressCallback | None, index: int) -> ProgressCallback | None:
    """Report run ``index`` of the two (forward, reverse) as overall progress."""
    return None if progress is None else offset_progress(progress, index, 2)
