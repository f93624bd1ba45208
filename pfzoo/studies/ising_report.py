"""The report of scripts/reproduce_ising.py (thesis Table 3.1 on a lattice, Figure 3.2 on a fully connected glass):
README.md and its plots, rendered from nothing but a run's results.json record (what
:func:`pfzoo.studies.ising_recovery.recover_spin_glass` measured, with the run's command, date and machine).

:func:`report` draws ``convergence.png`` (and, with ε_corr traces, ``correlation.png``) into a folder and returns the
README's markdown: the table of every learner's errors beside the thesis's, and what differs from the thesis's setting.
"""

from __future__ import annotations

import math
from pathlib import Path

from pfzoo.studies.ising_correlation_floor import floor_markdown
from pfzoo.studies.ising_correlation_scale import scale_markdown
from pfzoo.studies.ising_recovery import SAMPLER_NAMES, describe_glass

THESIS = {  # Table 3.1 (seed 003, §3.1.1): ε_J and learning time (seconds), 10×10 lattice, 20,000 samples
    "MPF": ("0.0172", "~60"),
    "pseudo-likelihood": ("0.0582", "~800"),
    "CD-1": ("0.3196", "~20,000"),
    "CD-10": ("0.3341", "~20,000"),
    "MFT+TAP": ("7.7704", "0.1"),
}  # the thesis has no row for the other learners
THESIS_CORRELATION = {"MPF": 0.0025, "pseudo-likelihood": 0.0036, "CD-1": 0.0127, "CD-10": 0.0123, "MFT+TAP": 0.0983}
"""Table 3.1's ε_corr column, "mean square error in pairwise correlations" (how the thesis sampled its models is not stated)."""
FIGURE_WINDOWS = (60.0, 800.0, None)
"""Figure 3.1's time windows: panels (a)/(d) the first 60 s of learning, (b)/(e) the first 800 s, (c)/(f) the whole run."""


def time_label(settings: dict) -> str:
    """The time axis's name: wall-clock or (``--clock cpu``) process CPU seconds of training."""
    return "training CPU time (s)" if settings.get("clock", "wall") == "cpu" else "training time (s)"


def plot(traces: dict, path: Path, title: str, ylabel: str, floor: float | None = None, xlabel: str = "training time (s)") -> None:
    """Log-log curves ``{learner: [(seconds, error), ...]}`` (the first point, at 0 s, left out) with an optional dashed
    ``floor``."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for name, trace in traces.items():
        points = [point for point in trace if point[0] > 0]
        if not points:
            continue
        seconds, errors = zip(*points)
        ax.loglog(seconds, errors, label=name, marker="o" if len(seconds) == 1 else "." if len(seconds) < 60 else None)
    if floor is not None:
        ax.axhline(floor, color="k", linestyle="--", linewidth=1, label="true model's own samples")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def error_at(trace: list, seconds: float) -> float:
    """ε_J of the last recorded point of ``trace`` at or before ``seconds`` of training."""
    return [error for elapsed, error in trace if elapsed <= seconds][-1]


def non_monotone_paths(settings: dict, results: dict, traces: dict) -> list[str]:
    """A README paragraph (as a one-line list, or none) on the L-BFGS learners whose ε_J passed well below its end."""
    overfit = [(name, *min(traces[name][1:], key=lambda point: point[1])) for name in ("MPF", "pseudo-likelihood", "ratio matching")
               if name in traces and min(error for _, error in traces[name][1:]) < 0.9 * results[name]["coupling_error"]]
    if not overfit:
        return []
    return ["ε_J is not monotone along the L-BFGS path: " + "; ".join(
        f"{name} passes {error:.4f} at {seconds:.0f} s and ends at {results[name]['coupling_error']:.4f} after "
        f"{results[name]['iterations_or_epochs']} steps" + (" (the cap)" if results[name]["iterations_or_epochs"] >= settings["max_lbfgs_steps"] else "")
        for name, seconds, error in overfit) + " (the fully connected fit, unregularised, overfits the sample).\n"]


def constant_units_paragraph(record: dict) -> list[str]:
    """A README paragraph (or none) on the units the sample leaves nearly constant, with ε_J over the other pairs."""
    units = record.get("nearly_constant_units") or {}
    if not units:
        return []
    listed = ", ".join(f"{unit} (mean {mean:.5f})" for unit, mean in units.items())
    others = ", ".join(f"{name} {result['coupling_error_without_constant_units']:.4f}" for name, result in record["results"].items()
                       if "coupling_error_without_constant_units" in result)
    return [f"Nearly constant units (the rarer value in at most 0.1 % of the {record['settings']['num_samples']} samples): {listed}. "
            "The sample hardly determines their couplings, so an unregularised fit may move them far along directions the loss "
            f"barely sees. ε_J over the pairs that touch none of them: {others}.\n\n"]


def comparison(settings: dict, results: dict, traces: dict) -> str:
    """The README's section on how this run differs from the thesis's Table 3.1: MPF against pseudo-likelihood in both,
    then every setting that is not the thesis's (as far as the thesis states them), from a run's ``settings``."""
    lines = ["## Against the thesis", ""]
    mpf, pl = results.get("MPF", {}), results.get("pseudo-likelihood", {})
    if "coupling_error" in mpf and "coupling_error" in pl:
        order = "below" if mpf["coupling_error"] < pl["coupling_error"] else "above"
        lines.append(f"MPF's ε_J ({mpf['coupling_error']:.4f}) is {order} pseudo-likelihood's ({pl['coupling_error']:.4f}); in the "
                     "thesis MPF's (0.0172) is below pseudo-likelihood's (0.0582), at a thirteenth of its time.\n")
    lines += non_monotone_paths(settings, results, traces)
    tap, naive = results.get("MFT+TAP", {}), results.get("nMF", {})
    if "coupling_error" in tap:
        lines.append(f"MFT+TAP, which the thesis reports as failing, gives ε_J {tap['coupling_error']:.4f} ("
                     + (f"nMF {naive['coupling_error']:.4f}; " if "coupling_error" in naive else "")
                     + f"MPF {mpf.get('coupling_error', float('nan')):.4f}). "
                     "TAP's correction −2 K_ij² m_i m_j is nearly nil where the magnetisations m are near 0, as at zero field.\n")
    elif "unusable" in tap:
        lines.append(f"MFT+TAP fails here as in the thesis: {tap['unusable']}.\n")
    quarter = [f"{name} {result['coupling_error'] / 4:.4f}" for name, result in results.items()
               if "coupling_error" in result and (name in THESIS or name == "nMF")]
    lines.append("ε_J / 4, the error in the thesis's J' = −J/2 (below): " + ", ".join(quarter) + ".\n")
    lines.append("Settings that differ from the thesis's:\n")
    differences = []
    variance = settings["coupling_std"] ** 2
    if abs(variance - 10) < 1e-3:
        differences.append(
            "the scale of σ: σ² = 10 is the variance of our J, the pair coupling of the energy −½ xᵀJx − b·x (each pair once). "
            "The thesis's energy, as in the MPF code released with the paper (Sohl-Dickstein/Minimum-Probability-Flow-Learning, "
            "MPF_ising/E_ising.m and sample_ising.m: E = xᵀJ'x over x ∈ {0,1}, biases on the diagonal), counts each pair twice, "
            "J = −2J'. If its σ² = 10 is J'’s, its glass is twice as strongly coupled (σ = 2√10 ≈ 6.32 here: "
            "`--coupling-std 6.3246`, reports/ising/sigma10/xtjx_units/) and its ε_J is a quarter of ours for the same fit")
    elif abs(variance - 40) < 4e-3:
        differences.append(
            "none in σ if the thesis's σ² = 10 is the variance of J' in its energy xᵀJ'x over x ∈ {0,1} (biases on the diagonal, "
            "each pair counted twice, as in the MPF code released with the paper, MPF_ising/E_ising.m): our pair coupling is "
            "J = −2J', σ = 2√10, and the thesis's ε_J is a quarter of ours for the same fit")
    else:
        differences.append(f"couplings N(0, {settings['coupling_std']:g}²): variance 10 neither for our J nor for the thesis's "
                           "J' = −J/2 (σ = √10 or 2√10 here)")
    if not settings.get("zero_field_biases"):
        differences.append("biases 0 rather than zero field (the thesis's J columns summing to 0, `--zero-field-biases`): in ±1 "
                           "spins each unit feels a field ¼ Σ_j J_ij")
    if settings.get("sampler", "gibbs") != "swendsen_wang":
        differences.append("training states by block-Gibbs sweeps, not Swendsen–Wang (`--sampler swendsen_wang`)")
    if (settings["side"], settings["num_samples"]) != (10, 20000):
        differences.append(f"a {settings['side']}×{settings['side']} lattice and {settings['num_samples']} samples, not 10×10 and 20,000")
    differences += [
        f"CD's budget: {settings['cd_seconds']:g} s of SGD (batch 100, momentum 0.9, learning rate "
        f"{settings['cd_learning_rate']}/(1 + epoch/10)) against the thesis's ~20,000 s for CD-1, whose optimiser we do not "
        "reproduce",
        f"MPF and pseudo-likelihood: our L-BFGS (float64, at most {settings['max_lbfgs_steps']} steps of 5 iterations, stopped at "
        "a relative change of 1e-10), not the thesis's minimiser and stopping rule",
        "one true model (seed 0) and one sample of training states; burn-in and thinning "
        f"({settings['burn_in']} and {settings['thin']} steps of 1000 chains) are ours, as the thesis's are not stated in the table",
        "seconds: this machine, one thread, beside other work, against the thesis's hardware: compare ratios between "
        "learners, not the seconds themselves",
        "ε_corr: from block-Gibbs samples of each learned model (burn-in and thinning as the data's, in Gibbs sweeps) against "
        "the training states; the thesis does not state how it sampled its models, nor against what it compared them",
    ]
    return "\n".join(lines + [f"- {line}" for line in differences]) + "\n"


def first_within(trace: list, bound: float) -> float | None:
    """The first training time at which ``trace [(seconds, error), ...]`` is at or below ``bound``, or None."""
    return next((seconds for seconds, error in trace if error <= bound), None)


def twice_floor_times(record: dict) -> dict:
    """Figure 3.2's speed reading, from a fully connected run's stored ε_corr traces: ``bound``, twice the traces' sampling
    floor (``trace_correlation_floor``, the true model's own samples drawn the same way), and ``seconds``, per learner
    the first training time its trace is at or below the bound (None: not within its run)."""
    bound = 2 * record["trace_correlation_floor"]
    return {"bound": bound, "seconds": {name: first_within(trace, bound) for name, trace in record["correlation_traces"].items()}}


def with_derived_numbers(record: dict) -> dict:
    """``record`` (what results.json holds) with the numbers the README derives from its measurements, so that they are
    read from results.json too (the seeds' index points at them): on a fully connected glass with ε_corr traces, the
    :func:`twice_floor_times` as ``twice_floor``. A record without them is returned unchanged."""
    if record["settings"].get("kind", "lattice") == "lattice" or "correlation_traces" not in record:
        return record
    return {**record, "twice_floor": twice_floor_times(record)}


def correlation_section(record: dict, out: Path) -> str:
    """Figure 3.2's section: ε_corr against training time (drawn as ``out/correlation.png``), and which learner reaches
    twice the sampling floor first (:func:`twice_floor_times`)."""
    traces, floor, settings = record["correlation_traces"], record["trace_correlation_floor"], record["settings"]
    plot(traces, out / "correlation.png", "ε_corr against training time", "ε_corr (mean square error of ⟨x_i x_j⟩)", floor)
    speed = twice_floor_times(record)
    bound, reached = speed["bound"], speed["seconds"]
    rows = [f"| {name} | {min(error for _, error in trace):.2e} | "
            + (f"{reached[name]:.3g}" if reached[name] is not None else f"not in {trace[-1][0]:.3g}") + " |"
            for name, trace in traces.items()]
    order = sorted((seconds, name) for name, seconds in reached.items() if seconds is not None)
    claim = ""
    if "MPF" in reached:
        rivals = [name for name in ("pseudo-likelihood", "CD-1", "CD-10") if name in reached]
        before = [name for name in rivals if reached[name] is not None and (reached["MPF"] is None or reached[name] < reached["MPF"])]
        verdict = ("does not hold here: MPF never reaches it" if reached["MPF"] is None
                   else f"does not hold here: {', '.join(before)} reached it first" if before else "holds here")
        claim = f"The figure's claim, that MPF fits faster than pseudo-likelihood and CD, {verdict}.\n\n"
    return (
        "## ε_corr against training time (thesis Figure 3.2)\n\n"
        f"Each point: {settings['trace_samples']} block-Gibbs samples of the learned model (burn-in and thinning as the data's, "
        "the same random numbers at every point), at log-spaced epochs, outside the timed region. Dashed: the true model's "
        f"own samples drawn the same way ({floor:.2e}, the floor sampling noise sets). A fit can pass below it: it matches the "
        "training sample's moments, which the true model matches only up to that sample's noise.\n\n"
        "![ε_corr against training time](correlation.png)\n\n"
        f"| learner | lowest ε_corr | seconds to reach 2 × floor ({bound:.2e}) |\n|---|---|---|\n" + "\n".join(rows) + "\n\n"
        + ("Order of reaching it: " + " < ".join(name for _, name in order) + ".\n\n" if order else "")
        + claim
    )


def windowed_plot(traces: dict, path: Path, floor: float, xlabel: str) -> None:
    """Figure 3.1 (d)–(f): ε_corr curves ``{learner: [(seconds, error), ...]}`` over the thesis's windows
    (:data:`FIGURE_WINDOWS`), linear in time as the thesis draws them, log in ε_corr, with the dashed ``floor``."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(1, len(FIGURE_WINDOWS), figsize=(15, 4.5), sharey=True)
    for ax, window, panel in zip(axes, FIGURE_WINDOWS, "def"):
        for name, trace in traces.items():
            points = [point for point in trace if window is None or point[0] <= window]
            if points:
                seconds, errors = zip(*points)
                ax.semilogy(seconds, errors, label=name, marker="o" if len(points) == 1 else ".")
        ax.axhline(floor, color="k", linestyle="--", linewidth=1, label="true model's own samples")
        ax.set(xlabel=xlabel, title=f"({panel}) " + (f"the first {window:g} s" if window else "the whole run"))
        ax.set_xlim(0, window)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("ε_corr (mean square error of ⟨x_i x_j⟩)")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def with_final_points(record: dict) -> dict:
    """Each learner's ε_corr trace with its final ε_corr (results.json's, from its own draws) appended at its end, where
    the trace's log-spaced epochs stopped short of the last one."""
    traces = {}
    for name, trace in record["correlation_traces"].items():
        end = record["results"][name]
        traces[name] = trace + ([(end["seconds"], end["correlation_error"])] if trace[-1][0] < end["seconds"] else [])
    return traces


def figure_31_section(record: dict, out: Path) -> str:
    """Figure 3.1 (d)–(f)'s section on a lattice: ε_corr against learning time (drawn as ``out/correlation.png``),
    every learner's final ε_corr beside Table 3.1's column, and the caption's claim checked."""
    settings, results, floor = record["settings"], record["results"], record["trace_correlation_floor"]
    traces = with_final_points(record)
    windowed_plot(traces, out / "correlation.png", floor, time_label(settings))
    final = {name: results[name]["correlation_error"] for name in traces}
    bound = 2 * min(final.values())  # twice the best converged fit: the floor itself may be out of every learner's reach
    reached = {name: first_within(trace, bound) for name, trace in traces.items()}
    rows = [f"| {name} | {final[name]:.2e} | {THESIS_CORRELATION[name]:g} | {final[name] / THESIS_CORRELATION[name]:.3f} | "
            f"{min(error for _, error in trace):.2e} | "
            + (f"{reached[name]:.3g}" if reached[name] is not None else f"not in {trace[-1][0]:.3g}") + f" | {results[name]['seconds']:.3g} |"
            if name in THESIS_CORRELATION else
            f"| {name} | {final[name]:.2e} | — | — | {min(error for _, error in trace):.2e} | "
            + (f"{reached[name]:.3g}" if reached[name] is not None else f"not in {trace[-1][0]:.3g}") + f" | {results[name]['seconds']:.3g} |"
            for name, trace in traces.items()]
    # a learner with no fit here (mean-field inversion of a singular covariance) keeps its row, beside the thesis's number
    rows += [f"| {name} | no fit: {result['unusable']} | {THESIS_CORRELATION[name]:g} | — | — | — | — |"
             for name, result in results.items() if "unusable" in result and name in THESIS_CORRELATION]
    ours = sorted(final, key=final.get)
    thesis = sorted((name for name in THESIS_CORRELATION if name in final), key=THESIS_CORRELATION.get)
    better = [name for name in ours if final[name] < final["MPF"]]
    faster = [name for name in traces if name not in ("MPF", "MFT+TAP") and reached[name] is not None
              and (reached["MPF"] is None or reached[name] < reached["MPF"])]
    clock = "CPU seconds" if settings.get("clock", "wall") == "cpu" else "seconds"
    return (
        "## ε_corr against learning time (thesis Figure 3.1 d–f)\n\n"
        f"Each point: {settings['trace_samples']} block-Gibbs samples of the learned model (burn-in and thinning as the data's, "
        f"the same random numbers at every point), at epochs {settings.get('trace_growth', 1.25):g}× apart, outside the timed "
        f"region; the last point of each curve is its final ε_corr of the table above. Time: training {clock}"
        + (" (process CPU time, `--clock cpu`: the machine is shared, and its load stretches wall time)" if clock == "CPU seconds" else "")
        + f". Dashed: the true model's own samples drawn the same way ({floor:.2e}, the floor sampling noise sets). Panels as "
        "the thesis's: the first 60 s, the first 800 s, the whole run (linear time).\n\n"
        "![ε_corr against learning time, three windows](correlation.png)\n\n"
        f"| learner | ε_corr | thesis ε_corr | ours ÷ thesis's | lowest on the curve | {clock} to reach twice the best final "
        f"ε_corr ({bound:.2e}) | "
        f"{clock} in all |\n|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        f"Order by final ε_corr, ours: {' < '.join(ours)}; the thesis's: {' < '.join(thesis)}.\n\n"
        "The caption's claim, \"in every comparison above MPF finds a better fit, and for all cases but MFT+TAP does so in a "
        "shorter time\": better fit "
        + ("holds here (MPF's final ε_corr is the lowest)" if not better else f"does not hold here: {', '.join(better)} end{'s' if len(better) == 1 else ''} below MPF")
        + "; shorter time (first to reach twice the best final ε_corr) "
        + ("does not hold here: MPF never reaches it" if reached["MPF"] is None
           else f"does not hold here: {', '.join(faster)} reached it first" if faster else "holds here") + ".\n\n"
    )


THESIS_FIGURE = {"units": 40, "samples": 20000, "final_error": 0.0058, "seconds": 15}
"""Thesis §3.1.2 and Figure 3.2: the 40-unit fully connected Ising model of Broderick et al. (2007) fitted by MPF from 20,000
samples; the mean absolute error in the learned model's correlation matrix, 0.0058 at the end, reached in about 15 s on an
8-core 2.33 GHz Intel Xeon."""


def absolute_error_bounds(results: dict) -> str:
    """``name ≤ √ε_corr`` for every learner with an ε_corr: the mean absolute error over the pairs is at most the root of
    the mean square error (Cauchy–Schwarz), the most results.json, which stores only the mean square, says of it."""
    return ", ".join(f"{name} ≤ {math.sqrt(r['correlation_error']):.4f}" for name, r in results.items() if "correlation_error" in r)


def figure_differences(settings: dict, results: dict, traces: dict) -> str:
    """The README's section on what a fully connected run takes from the thesis's Figure 3.2 (:data:`THESIS_FIGURE`) and
    the released code, and what is ours."""
    num_units = settings.get("num_units") or settings["side"] ** 2
    scale = 3 * math.sqrt(2 / num_units)
    thesis = THESIS_FIGURE
    lines = [
        "## Against the thesis",
        "",
        f"The thesis's Figure 3.2 (§3.1.2) fits the {thesis['units']}-unit fully connected Ising model of Broderick et al. (2007) from "
        f"{thesis['samples']:,} samples and plots the mean absolute error in the learned model's correlation matrix against "
        f"learning time: MPF converges in about {thesis['seconds']} seconds on an 8-core 2.33 GHz Intel Xeon, to a final absolute "
        f"correlation error of {thesis['final_error']}. Its couplings J_ij were provided to the thesis by Broderick and coauthors "
        "and are not available to this project, so this run draws its own glass at "
        "the scale of the MPF code released with the paper (Sohl-Dickstein/"
        "Minimum-Probability-Flow-Learning, MPF_ising/runme_ising.m: J' = randn(d)/√d · 3, symmetrised, biases on its diagonal, "
        f"energy xᵀJ'x over {{0, 1}}), which in our energy −½ xᵀJx − b·x is σ = 3√(2/D) = {scale:.4f} and bias σ = 3/√D = "
        f"{3 / math.sqrt(num_units):.4f} at D = {num_units}"
        + (" (this run's)" if abs(settings["coupling_std"] - scale) < 1e-3 else f" (this run: σ = {settings['coupling_std']:g}, "
           f"bias σ = {settings.get('bias_std', 0):g})") + ".",
        "",
        *non_monotone_paths(settings, results, traces),
        "Settings that are ours:",
        "",
        f"- {settings['num_samples']} training samples from 1000 parallel chains ({settings['burn_in']} burn-in, thinning "
        f"{settings['thin']} {SAMPLER_NAMES[settings.get('sampler', 'gibbs')]} steps); the released demo draws 10,000 from one random-scan Gibbs "
        "chain (burn-in 100 D, 10 D single-site steps apart) at D = 50",
        "- ε_corr: the mean square error of the raw moments ⟨x_i x_j⟩ (i < j), where the thesis plots the mean absolute error in "
        "the correlation matrix (and the released demo compares correlation coefficients). results.json stores only the mean "
        "square errors, not the learned parameters or the per-pair errors, so the mean absolute error of ⟨x_i x_j⟩ cannot be "
        "computed from it; it is at most √ε_corr (Cauchy–Schwarz): " + absolute_error_bounds(results)
        + f", against the thesis's final {thesis['final_error']}",
        f"- CD's budget: {settings['cd_seconds']:g} s of SGD (batch 100, momentum 0.9, learning rate "
        f"{settings['cd_learning_rate']}/(1 + epoch/10)); MPF and pseudo-likelihood: our L-BFGS (float64, at most "
        f"{settings['max_lbfgs_steps']} steps of 5 iterations), the released code's minFunc to convergence",
        "- seconds: this machine, one thread, beside other work: compare ratios between learners",
    ]
    return "\n".join(lines) + "\n"


def report(record: dict, out: Path) -> str:
    """Draw ``convergence.png`` (and with ε_corr traces ``correlation.png``) into ``out`` and return the README's markdown,
    from a run's ``record`` (what results.json holds)."""
    settings, results, traces = record["settings"], record["results"], record["traces"]
    kind, side, num_samples = settings.get("kind", "lattice"), settings["side"], settings["num_samples"]
    num_units = side**2 if kind == "lattice" else settings.get("num_units") or side**2
    lattice = kind == "lattice"
    title = f"{describe_glass(kind, side, num_units)[2:]}, {num_samples} samples" + (
        f", σ = {settings['coupling_std']:g}" if settings["coupling_std"] != 1 else "")
    sampler = SAMPLER_NAMES[settings.get("sampler", "gibbs")]
    biases = ("−½ J𝟙 (zero field on the ±1 spins)" if settings.get("zero_field_biases")
              else f"b_i ~ N(0, {settings['bias_std']:g}²)" if settings.get("bias_std") else "0")
    couplings = (f"periodic {side}×{side} lattice, nearest neighbours J_ij ~ N(0, {settings['coupling_std']}²)" if lattice
                 else f"all pairs of {num_units} units, J_ij ~ N(0, {settings['coupling_std']}²)")
    plot(traces, out / "convergence.png", title, "ε_J (mean square coupling error)", xlabel=time_label(settings))
    mpf_seconds = results["MPF"]["seconds"]
    thesis = (lambda name: f" | {THESIS.get(name, ('—', '—'))[0]} | {THESIS_CORRELATION.get(name, '—')} | "
              f"{THESIS.get(name, ('—', '—'))[1]} |") if lattice else (lambda name: " |")
    rows = [
        f"| {name} | {'diverged' if 'diverged' in r else 'unusable'} ({r.get('diverged') or r['unusable']}) | | | |" + thesis(name)
        if "diverged" in r or "unusable" in r else
        f"| {name} | {r['coupling_error']:.4f} | {error_at(traces[name], mpf_seconds):.4f} | {r['correlation_error']:.2e} "
        f"| {r['seconds']:.1f} | {r['iterations_or_epochs']}" + thesis(name)
        for name, r in results.items()
    ]
    cpu = settings.get("clock", "wall") == "cpu"
    header = (f"| learner | ε_J | ε_J at MPF's time | ε_corr | {'CPU seconds' if cpu else 'seconds'} | L-BFGS steps / CD epochs |"
              + (" thesis ε_J | thesis ε_corr | thesis seconds |" if lattice else ""))
    separator = "|---" * (9 if lattice else 6) + "|"
    correlations = ("" if "correlation_traces" not in record else figure_31_section(record, out) if lattice
                    else correlation_section(record, out))
    correlations += floor_markdown(record["correlation_floor"]) if "correlation_floor" in record else ""
    correlations += scale_markdown(record["correlation_scale"], THESIS_CORRELATION) if "correlation_scale" in record else ""
    return (
        f"# Learning {describe_glass(kind, side, num_units)[0]} {title} (thesis {'Table 3.1' if lattice else 'Figure 3.2'})\n\n"
        f"Made by `{record['command']}` on {record['date']} ({record['machine']}, {record['threads']} threads, "
        f"load average {record['load_average']}).\n\n"
        f"True couplings: {couplings}, biases {biases}, units in {{0, 1}}. Training data: {num_samples} {sampler} samples from "
        f"1000 chains (burn-in {settings['burn_in']} steps, thinning {settings['thin']}), drawn in {record['sampling_seconds']:.1f} s. "
        f"Every learner fits all {num_units * (num_units - 1) // 2:,} couplings of a fully connected model from J = 0. MPF and "
        f"pseudo-likelihood: full-batch L-BFGS in float64 until {settings.get('lbfgs_iterations', 5)} iterations change the loss by "
        f"less than {settings.get('stop_tolerance', 1e-10):g} (relative); "
        f"CD-k: SGD, batch 100, momentum 0.9, learning rate {settings['cd_learning_rate']}/(1 + epoch/10), for "
        f"{settings['cd_seconds']:g} s."
        + (f" Every trained learner adds the L2 penalty {settings['weight_decay']:g}/2 · Σ J² on its couplings (`--weight-decay`)."
           if settings.get("weight_decay") else "")
        + " MFT+TAP, nMF: mean-field inversion, closed form from the data's means and covariances (TAP-corrected and naive).\n\n"
        "ε_J: mean square coupling error over all pairs i < j. ε_J at MPF's time: each learner's ε_J after as many training "
        f"seconds as MPF took to converge ({mpf_seconds:.1f} s). ε_corr: mean square error of ⟨x_i x_j⟩ (i < j) of "
        f"{settings['model_samples']} block-Gibbs samples of the learned model against the training data"
        + (f" (the true model's own samples give {record['truth_correlation_error']:.2e}, the floor set by sampling noise)"
           if "truth_correlation_error" in record else "") + ". Seconds: training time only"
        + (", process CPU time (`--clock cpu`; the CD budget counts it too)" if cpu else "") + ".\n\n"
        f"{header}\n{separator}\n" + "\n".join(rows) + "\n\n"
        "![ε_J against training time](convergence.png)\n\n" + "\n".join(constant_units_paragraph(record)) + correlations
        + (comparison(settings, results, traces) if lattice else figure_differences(settings, results, traces))
    )
