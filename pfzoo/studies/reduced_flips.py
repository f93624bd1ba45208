"""HMC with reduced momentum flips against standard flips on a ring (Sohl-Dickstein's thesis §6.1.3, Figure 6.3).

With persistent momenta (a small refresh γ), every rejection of a standard HMC transition negates the momentum, and the
chain walks back the way it came. Reduced flips (thesis eq. 6.11, :class:`~pfzoo.kernels.HMCKernel` with
``flip="reduced"``) negate it on rejection only with probability ``max(0, P(Fζ) − P(ζ)) / (1 − P(ζ))``, which keeps the
stationary distribution and cuts most of the reversals. The target here is the thesis's ring, ``E(x) = s log² |x|`` on
ℝ^D: narrow in the radius, free along the circle, so progress round the ring is what persistent momentum buys and what
each reversal throws away.

:func:`compare_flips` runs both kernels from the same exact samples with the same settings and measures the
autocovariance of ``x`` against transitions and against gradient evaluations (a reduced-flip transition pays for its
reverse trajectory only when the forward one is rejected), the integrated autocorrelation time, and, as the check that
both chains sample the ring, the moments of ``log |x|`` against their exact values.
"""

from __future__ import annotations

import math
import time

import torch

from pfzoo.kernels.hmc import EnergyTarget, HMCKernel
from pfzoo.sampling import normal, uniform
from pfzoo.validation import check_finite_number, check_positive_int

FLIPS = ("standard", "reduced")
THESIS = {"scale": 100.0, "step_size": 0.1, "num_leapfrog": 1, "num_steps": 100_000}
"""The thesis's settings (§6.1.3, eq. 6.12): E = 100 log² |x|, leapfrog step ε = 0.1, one leapfrog step per transition and
100,000 sampling steps per sampler; its momentum corruption refreshes half the momentum per unit simulation time
(:func:`half_per_unit_time`). It does not state a number of chains."""
AUTOCOVARIANCE_CUTOFF = 0.05
"""The integrated autocorrelation time sums the autocovariance up to its first lag below this (its noisy tail aside)."""


class RingEnergy:
    """``E(x) = s (log |x|)²`` on ``x ∈ ℝ^D`` (``s`` = ``scale``): a ring of radius ≈ 1 and relative width ``1/√(2s)``.

    In 2-D, ``u = log |x|`` is exactly ``N(1/s, 1/(2s))`` (the density ``∝ r e^{−s log² r}`` in ``r``, times ``e^u`` for
    ``dr = e^u du``) and the angle is uniform, which :func:`exact_ring_samples` draws."""

    def __init__(self, scale: float = 100.0, dim: int = 2) -> None:
        self.scale = float(check_finite_number(scale, "scale", minimum=0.0, exclusive=True))
        self.dim = check_positive_int(dim, "dim")

    def energy_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Energy ``[N]`` and gradient ``[N, D]`` of ``x [N, D]``: ``∇E = 2 s log|x| · x / |x|²``."""
        squared_radius = (x * x).sum(-1)
        log_radius = 0.5 * torch.log(squared_radius)
        return self.scale * log_radius**2, (2.0 * self.scale * log_radius / squared_radius)[:, None] * x

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        return self.energy_and_grad(x)[0]

    def log_radius_moments(self) -> tuple[float, float]:
        """Exact mean and variance of ``log |x|`` (2-D only: ``N(1/s, 1/(2s))``)."""
        if self.dim != 2:
            raise ValueError(f"the exact moments of log |x| are known here for dim=2 only, got dim={self.dim}")
        return 1.0 / self.scale, 1.0 / (2.0 * self.scale)


def exact_ring_samples(energy: RingEnergy, num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """``[num_samples, 2]`` float64 independent draws from the 2-D ring: ``log |x| ~ N(1/s, 1/(2s))``, angle uniform."""
    mean, variance = energy.log_radius_moments()
    log_radius = mean + math.sqrt(variance) * normal((num_samples,), generator=generator, dtype=torch.float64)
    angle = 2.0 * math.pi * uniform((num_samples,), generator=generator, dtype=torch.float64)
    return torch.exp(log_radius)[:, None] * torch.stack([torch.cos(angle), torch.sin(angle)], -1)


def autocovariance(positions: torch.Tensor, max_lag: int) -> torch.Tensor:
    """Normalised autocovariance ``C(τ) / C(0)`` ``[max_lag + 1]`` of chains ``positions [T, N, D]`` about the known
    mean 0 (the ring is symmetric), averaged over chains, coordinates and time: ``C(τ) = mean_t x_t · x_{t+τ}``."""
    steps = positions.shape[0]
    if not 0 <= max_lag < steps:
        raise ValueError(f"max_lag must lie in [0, {steps - 1}] for chains of {steps} states, got {max_lag}")
    series = positions.double().flatten(1)  # [T, N·D]
    spectrum = torch.fft.rfft(series, n=2 * steps, dim=0)
    lagged_sums = torch.fft.irfft(spectrum * spectrum.conj(), n=2 * steps, dim=0)[: max_lag + 1].sum(-1)
    covariance = lagged_sums / torch.arange(steps, steps - max_lag - 1, -1, dtype=torch.float64)
    return covariance / covariance[0]


def integrated_autocorrelation_time(normalised: torch.Tensor) -> float:
    """``τ = 1 + 2 Σ_{τ ≥ 1} C(τ)`` up to the first lag whose ``C`` falls below :data:`AUTOCOVARIANCE_CUTOFF`, in lags
    (``nan`` when it never falls that low: the chains were too short to say)."""
    below = (normalised < AUTOCOVARIANCE_CUTOFF).nonzero()
    if below.numel() == 0:
        return math.nan
    return 1.0 + 2.0 * normalised[1 : int(below[0])].sum().item()


def run_chains(energy: RingEnergy, kernel: HMCKernel, start: torch.Tensor, num_steps: int, *,
               generator: torch.Generator) -> dict:
    """``num_steps`` transitions of ``kernel`` from ``start [N, D]``: the positions ``[num_steps + 1, N, D]``, the mean
    acceptance, the fraction of transitions that negated the momentum and the seconds."""
    target = EnergyTarget(energy)
    state = kernel.init(start, target, generator=generator)
    positions, accepted, flipped = [start], torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.float64)
    began = time.perf_counter()
    for _ in range(num_steps):
        state, info = kernel.step(state, target, generator=generator)
        positions.append(state.position)
        accepted += info.accepted.double().mean()
        flipped += info.flipped.double().mean()
    return {"positions": torch.stack(positions), "acceptance": accepted.item() / num_steps,
            "flip_rate": flipped.item() / num_steps, "seconds": time.perf_counter() - began}


def half_per_unit_time(step_size: float, num_leapfrog: int = 1) -> float:
    """The refresh γ that replaces half the momentum power per unit simulation time, for transitions of ``num_leapfrog``
    steps of size ``step_size``: ``(1 − γ)^(1/(εL)) = ½``, so ``γ = 1 − 0.5^(εL)`` (HAIS's rule; thesis §§5, 6.1.3)."""
    return 1.0 - 0.5 ** (step_size * num_leapfrog)


def compare_flips(*, scale: float = 100.0, step_size: float = 0.1, momentum_refresh: float | None = None, num_leapfrog: int = 1,
                  num_chains: int = 500, num_steps: int = 4000, max_lag: int = 1000, seed: int = 0) -> dict:
    """Standard and reduced flips on the 2-D ring ``E = s log² |x|``, both from the same exact samples and seed;
    ``momentum_refresh`` γ, or ``None`` for :func:`half_per_unit_time` (recorded as ``refresh_rule``).

    Per flip rule: ``acceptance``, ``flip_rate`` (transitions that negated the momentum), ``gradient_evaluations``
    per transition (L, plus L for the reverse trajectory of each rejected reduced-flip transition),
    ``autocovariance`` ``[max_lag + 1]`` (lags in transitions), ``iat_transitions`` and ``iat_gradient_evaluations``
    (:func:`integrated_autocorrelation_time`, the latter times the evaluations per transition), and the sample moments of
    ``log |x|`` over all states (``log_radius_mean`` / ``_variance``) beside their exact values in ``exact``."""
    energy = RingEnergy(scale)
    rule = momentum_refresh is None
    momentum_refresh = half_per_unit_time(step_size, num_leapfrog) if rule else momentum_refresh
    start = exact_ring_samples(energy, check_positive_int(num_chains, "num_chains"), generator=torch.Generator().manual_seed(seed))
    exact_mean, exact_variance = energy.log_radius_moments()
    results = {"settings": {"scale": scale, "dim": 2, "step_size": step_size, "momentum_refresh": momentum_refresh,
                            "num_leapfrog": num_leapfrog, "num_chains": num_chains, "num_steps": num_steps, "max_lag": max_lag,
                            "seed": seed, **({"refresh_rule": "half the momentum power per unit time"} if rule else {})},
               "exact": {"log_radius_mean": exact_mean, "log_radius_variance": exact_variance}}
    for flip in FLIPS:
        kernel = HMCKernel(step_size, num_leapfrog=num_leapfrog, momentum_refresh=momentum_refresh, flip=flip)
        run = run_chains(energy, kernel, start.clone(), check_positive_int(num_steps, "num_steps"),
                         generator=torch.Generator().manual_seed(seed + 1))
        curve = autocovariance(run["positions"], max_lag)
        evaluations = num_leapfrog * (1.0 + (1.0 - run["acceptance"]) * (flip == "reduced"))
        iat = integrated_autocorrelation_time(curve)
        log_radius = 0.5 * torch.log((run["positions"] ** 2).sum(-1))
        results[flip] = {
            "acceptance": run["acceptance"], "flip_rate": run["flip_rate"], "gradient_evaluations": evaluations,
            "autocovariance": curve.tolist(), "iat_transitions": iat, "iat_gradient_evaluations": iat * evaluations,
            "log_radius_mean": log_radius.mean().item(), "log_radius_variance": log_radius.var().item(),
            "seconds": run["seconds"],
        }
    return results


def flips_markdown(runs: list[dict]) -> str:
    """The comparison table of :func:`compare_flips` results ``runs`` (one row per step size and flip rule)."""
    lines = ["| ε | γ | flips | acceptance | momentum negated | gradient evaluations / transition | τ (transitions) "
             "| τ (gradient evaluations) | reduced / standard τ (gradient evaluations) | log \\|x\\| mean, variance (exact) |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    for run in runs:
        s, exact = run["settings"], run["exact"]
        for flip in FLIPS:
            r = run[flip]
            ratio = r["iat_gradient_evaluations"] / run["standard"]["iat_gradient_evaluations"] if flip == "reduced" else math.nan
            lines.append(
                f"| {s['step_size']:g} | {s['momentum_refresh']:.4g} | {flip} | {r['acceptance']:.3f} | {r['flip_rate']:.3f} "
                f"| {r['gradient_evaluations']:.2f} | {_time(r['iat_transitions'])} | {_time(r['iat_gradient_evaluations'])} "
                f"| {'—' if math.isnan(ratio) else f'{ratio:.2f}'} | {r['log_radius_mean']:.4f}, {r['log_radius_variance']:.5f} "
                f"({exact['log_radius_mean']:.4f}, {exact['log_radius_variance']:.5f}) |")
    return "\n".join(lines)


def refresh_text(settings: dict) -> str:
    """The momentum refresh of a run's ``settings``: the thesis's rule (``γ = 1 − 0.5^ε``) or the fixed ``γ = …``."""
    if settings.get("refresh_rule"):
        return "γ = 1 − 0.5^ε" if settings["num_leapfrog"] == 1 else "γ = 1 − 0.5^(εL)"
    return f"γ = {settings['momentum_refresh']:g}"


def against_thesis(runs: list[dict]) -> str:
    """The README's paragraph on the thesis's settings (:data:`THESIS`) and which of the ``runs``' settings differ."""
    settings = [run["settings"] for run in runs]
    s = settings[0]

    def other(key: str) -> list[float]:
        return sorted({run[key] for run in settings if run[key] != THESIS[key]})

    differences = [f"the step sizes {', '.join(f'{e:g}' for e in other('step_size'))} beside the thesis's 0.1, chosen so that "
                   "acceptance spans the range where the flip rule matters"] if other("step_size") else []
    differences += [f"{what}: {', '.join(f'{value:,g}' for value in other(key))} rather than {THESIS[key]:,g}" for key, what in
                    (("scale", "the scale s"), ("num_leapfrog", "leapfrog steps per transition"), ("num_steps", "transitions per chain"))
                    if other(key)]
    fixed = sorted({run["momentum_refresh"] for run in settings if not run.get("refresh_rule")})
    differences += [f"a fixed refresh γ = {', '.join(f'{value:g}' for value in fixed)} whatever ε, where the thesis's rule gives "
                    f"γ = {half_per_unit_time(THESIS['step_size']):.4f} at ε = 0.1"] if fixed else []
    return ("Settings from the thesis (§6.1.3): the energy E = 100 log² √(x₁² + x₂²) (eq. 6.12), leapfrog step ε = 0.1, one leapfrog "
            "step per sampling step, the momentum corruption rate set to corrupt half the momentum per unit simulation time, and "
            "100,000 sampling steps for each sampler. We read \"half the momentum\" as half its power, as the thesis words HAIS's "
            f"refresh (§5): γ = 1 − 0.5^ε, {half_per_unit_time(THESIS['step_size']):.4f} at ε = 0.1. Ours: {s['num_chains']} chains "
            "(the thesis does not state how many) started at exact samples; the autocovariance also against gradient evaluations and "
            "the integrated autocorrelation time τ (the thesis's Figure 6.3 plots the autocovariance against sampling steps)"
            + ("; and, unlike the thesis, " + "; ".join(differences) if differences else "") + ".")


def _time(value: float) -> str:
    return "not below 0.05 within the lags" if math.isnan(value) else f"{value:.1f}"


def flips_figure(runs: list[dict], path) -> None:
    """Autocovariance against gradient evaluations, standard (dashed) and reduced (solid) flips, one colour per ε."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.5))
    for index, run in enumerate(runs):
        colour = f"C{index}"
        for flip, style in zip(FLIPS, ("--", "-")):
            r = run[flip]
            lags = torch.arange(1, len(r["autocovariance"]), dtype=torch.float64) * r["gradient_evaluations"]
            axis.plot(lags.numpy(), r["autocovariance"][1:], style, color=colour,
                      label=f"ε = {run['settings']['step_size']:g}, {flip} (acceptance {r['acceptance']:.2f})")
    axis.axhline(0.0, color="grey", linewidth=0.5)
    axis.set_xscale("log")  # the step sizes' decorrelation times span two decades
    axis.set_xlabel("gradient evaluations (lag × evaluations per transition)")
    axis.set_ylabel("autocovariance of x (normalised)")
    settings = runs[0]["settings"]
    axis.set_title(f"HMC on the ring E = {settings['scale']:g} log² |x| (2-D), {refresh_text(settings)}, "
                   f"L = {settings['num_leapfrog']}")
    axis.legend(fontsize=7)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
