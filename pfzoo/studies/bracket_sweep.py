"""AIS and RAISE side by side over annealing settings: where the bracket on the log-likelihood closes.

RAISE §6's practical advice (Burda, Grosse & Salakhutdinov 2015): AIS's log-likelihood is biased upward (its
``log Ẑ`` is a stochastic lower bound on ``log Z``) and RAISE's is a stochastic lower bound (on the annealing
model's log-likelihood), so when the two approach each other as the number of intermediate distributions K grows,
or for a better annealing schedule, both are converging on the model's log-likelihood; a gap that stays open means
neither is to be trusted. :func:`bracket_sweep` measures that gap at each (K, schedule) pair; :func:`bracket_point_in_parts`
makes one such point in several sittings when its AIS is too long for one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from pfzoo.estimators.ais import AIS, pool_parts
from pfzoo.estimators.base import LikelihoodEstimate, PartitionEstimate
from pfzoo.estimators.raise_ import RAISE
from pfzoo.models.base import EnergyModel

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BracketPoint:
    """AIS (upper) and RAISE (lower) mean log-likelihoods at one annealing setting, in nats.

    num_steps: K. schedule: the schedule's name. upper, upper_stderr: AIS's mean over the examples and its own
    standard error; log_z, ess: AIS's ``log Ẑ`` and its chains' effective sample size (``None`` where AIS anneals
    each example's latents instead, for latent-variable generative models). lower, lower_stderr: RAISE's.
    seconds: wall time of both runs. warnings: the two estimates' warnings (small ESS, heavy tails, impossible
    values), each prefixed with ``AIS:`` or ``RAISE:``; empty when neither has one.
    """

    num_steps: int
    schedule: str
    upper: float
    upper_stderr: float
    log_z: float | None
    ess: float | None
    lower: float
    lower_stderr: float
    seconds: float
    warnings: tuple[str, ...] = ()

    @property
    def gap(self) -> float:
        """``upper − lower``: ≥ 0 up to the errors when the two bracket the log-likelihood; small when they pin it down."""
        return self.upper - self.lower


def replay(generator: torch.Generator | None) -> torch.Generator | None:
    """A new generator in ``generator``'s current state (``None`` stays ``None``): each setting reruns the same stream."""
    if generator is None:
        return None
    copy = torch.Generator(device=generator.device)
    copy.set_state(generator.get_state())
    return copy


def estimator_options(settings: dict) -> dict[str, bool]:
    """The AIS and RAISE options a study run's ``settings`` ask for: ``compile`` (hashed draws, other numbers) and
    ``cuda_graphs`` (the same numbers, faster on a GPU); off where absent."""
    return {key: settings.get(key, False) for key in ("compile", "cuda_graphs")}


def bracket_sweep(
    model: EnergyModel,
    data: torch.Tensor,
    *,
    num_steps: int | Sequence[int],
    schedules: str | Sequence[str] = "linear",
    ais_chains: int = 100,
    raise_chains: int = 10,
    raise_examples: int | None = None,
    posterior_samples: int = 100,
    base: str = "auto",
    base_data: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    raise_generator: torch.Generator | None = None,
    compile: bool = False,
    cuda_graphs: bool = False,
) -> list[BracketPoint]:
    """AIS and RAISE mean log-likelihoods of ``data [B, V]`` at every K in ``num_steps`` and every schedule (K outer).

    Every setting replays the same random streams (common random numbers, so differences between settings are
    not the chains' noise): AIS starts from ``generator``'s current state, RAISE from ``raise_generator``'s
    (``None``: also ``generator``'s). Neither generator is advanced. ``ais_chains`` AIS chains for ``log Ẑ``
    (and ``posterior_samples`` proposals per example for ``log f(v)`` where the free energy is intractable);
    ``raise_chains`` reverse chains per example, on a random subset of ``raise_examples`` examples with control
    variates (RAISE §4) when given. ``base`` names the initial distribution of both ("auto", "base_rate",
    "uniform", ...); ``base_data`` fits data-based bases; ``compile`` and ``cuda_graphs`` run both so (the estimators'
    options of those names). All estimators are built, and their settings checked, before the first run.
    """
    steps = [num_steps] if isinstance(num_steps, int) else list(num_steps)
    names = [schedules] if isinstance(schedules, str) else list(schedules)
    if not steps or not names:
        raise ValueError(f"num_steps and schedules must each name at least one setting, got {steps} and {names}")
    settings = [
        (k, name, AIS(ais_chains, k, schedule=name, base=base, posterior_samples=posterior_samples, compile=compile, cuda_graphs=cuda_graphs),
         RAISE(raise_chains, k, schedule=name, base=base, num_examples=raise_examples, compile=compile, cuda_graphs=cuda_graphs))
        for k in steps for name in names
    ]
    points = []
    for k, name, upper_estimator, lower_estimator in settings:
        began = time.perf_counter()
        upper = upper_estimator.log_likelihood(model, data, base_data=base_data, generator=replay(generator))
        lower = lower_estimator.log_likelihood(
            model, data, base_data=base_data, generator=replay(generator if raise_generator is None else raise_generator)
        )
        points.append(bracket_point(k, name, upper, lower, time.perf_counter() - began))
    return points


def bracket_point(num_steps: int, schedule: str, upper: LikelihoodEstimate, lower: LikelihoodEstimate, seconds: float) -> BracketPoint:
    """The :class:`BracketPoint` of AIS's ``upper`` and RAISE's ``lower`` estimates at K = ``num_steps``, logged."""
    partition = upper.partition
    point = BracketPoint(
        num_steps=num_steps, schedule=schedule, upper=upper.mean, upper_stderr=upper.stderr,
        log_z=None if partition is None else partition.log_z, ess=None if partition is None else partition.ess,
        lower=lower.mean, lower_stderr=lower.stderr, seconds=round(seconds, 1),
        warnings=tuple(f"AIS: {line}" for line in upper.warnings) + tuple(f"RAISE: {line}" for line in lower.warnings),
    )
    partition_note = "" if partition is None else f" (log Ẑ {point.log_z:.2f}, ESS {point.ess:.1f})"
    logger.info("K = %s, %s: AIS %.2f ± %.2f%s, RAISE %.2f ± %.2f, gap %+.2f (%.1f s)", f"{num_steps:,}", schedule, point.upper,
                point.upper_stderr, partition_note, point.lower, point.lower_stderr, point.gap, point.seconds)
    for line in point.warnings:
        logger.warning("K = %s, %s: %s", f"{num_steps:,}", schedule, line)
    return point


def bracket_point_in_parts(
    model: EnergyModel,
    data: torch.Tensor,
    *,
    num_steps: int,
    part: tuple[int, int],
    done: Sequence[PartitionEstimate] | Callable[[], Sequence[PartitionEstimate]] = (),
    schedule: str = "linear",
    ais_chains: int = 100,
    raise_chains: int = 10,
    raise_examples: int | None = None,
    posterior_samples: int = 100,
    base: str = "auto",
    base_data: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    raise_generator: torch.Generator | None = None,
    compile: bool = False,
    cuda_graphs: bool = False,
) -> tuple[PartitionEstimate, BracketPoint | None]:
    """One point of :func:`bracket_sweep` (K = ``num_steps``, one schedule) made in sittings: AIS's ``log Ẑ`` chains in
    n parts (``part = (i, n)``: this sitting runs part i, :class:`~pfzoo.estimators.AIS`'s ``part``), ``done`` the
    parts other sittings made, or a function giving them, called once this part's chains have run (so that parts which
    sittings running beside this one finished meanwhile count). Returns this part's estimate and, once ``done`` and it are all n parts, the point:
    AIS's log-likelihood from the pooled ``log Ẑ`` (:func:`~pfzoo.estimators.pool_parts`) and RAISE, run in this
    sitting. With the same arguments in every sitting the point is the one :func:`bracket_sweep` makes in one go, bit for
    bit, but for ``seconds`` (this sitting's only). For a K whose AIS is longer than a sitting: K = 10⁵ with 1,000
    chains of an MNIST DBM is hours of one CPU core."""
    settings = {"schedule": schedule, "base": base, "posterior_samples": posterior_samples, "compile": compile, "cuda_graphs": cuda_graphs}
    ais = AIS(ais_chains, num_steps, part=part, **settings)
    raise_estimator = RAISE(raise_chains, num_steps, schedule=schedule, base=base, num_examples=raise_examples, compile=compile,
                            cuda_graphs=cuda_graphs)
    began = time.perf_counter()
    ais_generator = replay(generator)
    estimate = ais(model, data=data if base_data is None else base_data, generator=ais_generator)
    parts = [*(done() if callable(done) else done), estimate]
    if len(parts) < part[1]:
        return estimate, None
    pooled = pool_parts(parts)  # refuses parts of other runs, a part twice, or one missing
    upper = AIS(ais_chains, num_steps, **settings).log_likelihood_given(model, data, pooled, generator=ais_generator)
    lower = raise_estimator.log_likelihood(model, data, base_data=base_data,
                                           generator=replay(generator if raise_generator is None else raise_generator))
    return estimate, bracket_point(num_steps, schedule, upper, lower, time.perf_counter() - began)
