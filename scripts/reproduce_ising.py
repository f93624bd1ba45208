"""Reproduce Table 3.1 of Sohl-Dickstein's thesis: learning a 10×10 lattice spin glass from 20,000 samples.

    python scripts/reproduce_ising.py                # full run: reports/ising/{README.md,results.json,convergence.png}
    python scripts/reproduce_ising.py --quick        # smoke run (6×6 lattice, 2,000 samples): reports/ising/quick/
    python scripts/reproduce_ising.py --report-only  # re-render README.md and the plot from the folder's results.json

Figure 3.2 (a 40-unit fully connected glass, ε_corr against training time; reports/ising/fully_connected40/), at the
scale of the MPF code released with the paper (MPF_ising/runme_ising.m: J' = randn(d)/√d · 3, symmetrised, biases on its
diagonal; in our units σ = 3√(2/D), bias σ = 3/√D):

    python scripts/reproduce_ising.py --kind fully_connected --num-units 40 --coupling-std 0.6708 --bias-std 0.4743 \
        --correlation-trace --threads 1 --cd-seconds 120 --out reports/ising/fully_connected40

The thesis's own settings for Table 3.1 (σ² = 10, zero field, Swendsen–Wang training states; reports/ising/sigma10/):

    python scripts/reproduce_ising.py --coupling-std 3.1623 --zero-field-biases --sampler swendsen_wang \
        --threads 1 --cd-seconds 120 --out reports/ising/sigma10

σ is the standard deviation of our pair coupling J (energy −½ xᵀJx − b·x). The thesis's energy, as in the MPF code
released with the paper, is xᵀJ'x with each pair counted twice (J = −2J'); reading its σ² = 10 as J'’s gives
``--coupling-std 6.3246`` (2√10), the same command with ``--out reports/ising/sigma10/xtjx_units``.

Data: the spin glass of the recipes' dataset settings (:func:`pfzoo.data.spin_glass_model`: periodic lattice, or with
``--kind fully_connected`` all pairs of ``--num-units`` units, couplings ``J_ij ~ N(0, σ²)``; biases ``N(0, --bias-std²)``,
or with ``--zero-field-biases`` ``b = -½ J𝟙``, zero field on the ±1 spins, the thesis's J columns summing to 0), sampled
by parallel chains (:func:`pfzoo.data.sample_spin_glass`, seed + 1) of block-Gibbs sweeps or, with
``--sampler swendsen_wang``, Swendsen–Wang steps (the thesis's sampler); burn-in and thinning count that sampler's steps.
Learners, each a recipe in conf/experiment run by the :class:`pfzoo.training.Trainer`, fit a *fully connected* Ising
model (all D(D−1)/2 couplings and D biases) from J = 0 and the independent-units biases:
- ``ising_mpf``: MPF, single-bit flips, full-batch L-BFGS (float64) until an epoch changes the loss by < 1e-10;
- ``ising_pseudolikelihood``: pseudo-likelihood, the same L-BFGS;
- ``ising_cd1``, ``ising_cd10``: CD-k, minibatch SGD with momentum for a budget of training seconds;
- ``ising_ratio_matching``, ``ising_generalized_score_matching``: ratio matching and GSM (*Deep Learning* §18.4), the
  same L-BFGS as MPF; ``ising_nce``, ``ising_pt``: NCE and PT-SML, the same SGD and time budget as CD;
- ``MFT+TAP`` and ``nMF``: mean-field inversion in closed form from the data's moments
  (:func:`pfzoo.training.fit_mean_field`, TAP-corrected and naive); a fit the method cannot make (no real TAP root)
  is reported as unusable.
Errors (:mod:`pfzoo.studies.ising_recovery`): ε_J, the mean square coupling error over all pairs i < j, logged after
every epoch outside the timed region; ε_corr, that of the pair moments ⟨x_i x_j⟩ of samples of the learned model
against the training data; with ``--correlation-trace`` also along training, at log-spaced epochs (each point a fresh
sample of the learned model, outside the timed region), for Figure 3.2's curves.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import shlex
import sys
import time
from functools import partial
from pathlib import Path

import torch
from hydra.utils import instantiate

from pfzoo.cli import compose
from pfzoo.data import DataSplits, sample_spin_glass, spin_glass_model
from pfzoo.kernels import SwendsenWang
from pfzoo.studies.ising_recovery import CorrelationTrace, correlation_error, coupling_error, nearly_constant_units, upper_pairs
from pfzoo.studies.reporting import load_average, machine_description
from pfzoo.training import fit_mean_field

REPO = Path(__file__).resolve().parents[1]

THESIS = {  # Table 3.1 as quoted in the issue: ε_J and wall time (seconds), 10×10 lattice, 20,000 samples
    "MPF": ("0.0172", "~60"),
    "pseudo-likelihood": ("0.0582", "~800"),
    "CD-1": ("0.3196", "~20,000"),
    "CD-10": ("0.3341", "—"),
    "MFT+TAP": ("fails", "—"),
}  # the thesis has no row for the other learners
# learner: (recipe, dtype, offset of its trainer seed); CD's data order and Gibbs draws come from seed + offset.
LEARNERS = {
    "MPF": ("ising_mpf", torch.float64, 0),
    "pseudo-likelihood": ("ising_pseudolikelihood", torch.float64, 0),
    "CD-1": ("ising_cd1", torch.float32, 2),
    "CD-10": ("ising_cd10", torch.float32, 3),
    "ratio matching": ("ising_ratio_matching", torch.float64, 0),
    "GSM": ("ising_generalized_score_matching", torch.float64, 0),
    "NCE": ("ising_nce", torch.float32, 4),
    "PT-SML": ("ising_pt", torch.float32, 5),
}
SAMPLER_NAMES = {"gibbs": "block-Gibbs", "swendsen_wang": "Swendsen–Wang"}
CLOSED_FORM = {"MFT+TAP": "tap", "nMF": "naive"}  # learner: fit_mean_field's correction (float64, no trainer)


def fit(name: str, overrides: list[str], seed: int, train: torch.Tensor, truth, run_dir: Path,
        correlation_trace: CorrelationTrace | None = None) -> tuple[torch.nn.Module, list, list, int]:
    """Train learner ``name`` on ``train [N, D]``; returns the model (float32), its traces ``[(seconds, ε_J), ...]`` from
    the start and ``[(seconds, ε_corr), ...]`` at ``correlation_trace``'s epochs (empty without one), and its number of
    epochs (L-BFGS steps or CD epochs)."""
    recipe, dtype, seed_offset = LEARNERS[name]
    cfg = compose("train", [f"+experiment={recipe}", *overrides, f"trainer.seed={seed + seed_offset}"])
    model = instantiate(cfg.model, num_visible=train.shape[1]).to(dtype)
    model.init_from_data(train.to(dtype))  # J = 0 and the independent-units biases: every learner's start
    trace = [(0.0, coupling_error(model, truth))]
    metrics = {"coupling_error": partial(coupling_error, truth=truth)}
    if correlation_trace is not None:
        metrics["correlation_error"] = correlation_trace
    trainer = instantiate(cfg.trainer, run_dir=run_dir, estimator=None, epoch_metrics=metrics)
    trainer.fit(model, DataSplits("spin_glass", train=train, test=train[:1]))
    records = [json.loads(line) for line in trainer.metrics_path.read_text().splitlines()]
    correlations = []
    for record in records:
        trace.append((trace[-1][0] + record["seconds"], record["coupling_error"]))
        if not math.isnan(record.get("correlation_error", math.nan)):
            correlations.append((trace[-1][0], record["correlation_error"]))
    return model.float(), trace, correlations, len(records)


def fit_closed_form(name: str, train: torch.Tensor, truth) -> tuple[torch.nn.Module, list, list, int]:
    """Mean-field inversion ``name`` of :data:`CLOSED_FORM` on ``train [N, D]``, as :func:`fit` returns it (one step, no
    ε_corr trace).
    Raises ``ValueError`` when the method has no fit for these moments."""
    began = time.perf_counter()
    model = fit_mean_field(train.double(), correction=CLOSED_FORM[name])
    seconds = time.perf_counter() - began
    start = upper_pairs(truth.symmetric_coupling.detach()).pow(2).mean().item()  # ε_J of J = 0, every learner's start
    return model.float(), [(0.0, start), (seconds, coupling_error(model, truth))], [], 1


def plot(traces: dict, path: Path, title: str, ylabel: str, floor: float | None = None) -> None:
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
    ax.set(xlabel="training time (s)", ylabel=ylabel, title=title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=("lattice", "fully_connected"), default="lattice",
                        help="true couplings: a periodic side×side lattice, or all pairs of --num-units units (Figure 3.2)")
    parser.add_argument("--side", type=int, default=10, help="lattice side (D = side²)")
    parser.add_argument("--num-units", type=int, default=None, help="D of a fully connected glass (default side²)")
    parser.add_argument("--num-samples", type=int, default=20000, help="training samples")
    parser.add_argument("--coupling-std", type=float, default=1.0, help="σ of the Gaussian nearest-neighbour couplings")
    parser.add_argument("--bias-std", type=float, default=0.0, help="biases b_i ~ N(0, bias_std²) (0: none)")
    parser.add_argument("--zero-field-biases", action="store_true", help="biases -½ J𝟙 (zero field on ±1 spins), as the thesis")
    parser.add_argument("--sampler", choices=("gibbs", "swendsen_wang"), default="gibbs", help="sampler of the training states")
    parser.add_argument("--burn-in", type=int, default=1000, help="sampler steps (sweeps) before the first kept sample")
    parser.add_argument("--thin", type=int, default=10, help="sampler steps (sweeps) between kept samples of a chain")
    parser.add_argument("--cd-seconds", type=float, default=300.0, help="training-time budget of CD-1 and of CD-10")
    parser.add_argument("--cd-learning-rate", type=float, default=0.02)
    parser.add_argument("--max-lbfgs-steps", type=int, default=400, help="L-BFGS steps (epochs of 5 iterations) at most")
    parser.add_argument("--weight-decay", type=float, default=0.0,
                        help="L2 penalty weight_decay/2 · Σ J² on every trained learner's couplings (0: none, the thesis's fits)")
    parser.add_argument("--model-samples", type=int, default=20000, help="samples from each learned model for ε_corr")
    parser.add_argument("--correlation-trace", action="store_true",
                        help="also measure ε_corr along training, at log-spaced epochs (Figure 3.2's curves)")
    parser.add_argument("--trace-samples", type=int, default=5000, help="samples of the learned model per ε_corr point")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="6×6 lattice, 2,000 samples, 10 s of CD: a smoke run")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default reports/ising[/quick])")
    parser.add_argument("--report-only", action="store_true", help="rewrite README.md and the plot from the folder's results.json")
    args = parser.parse_args()
    if args.quick:
        args.side, args.num_samples, args.cd_seconds, args.model_samples, args.burn_in = 6, 2000, 10.0, 2000, 200
    out = args.out or REPO / "reports" / "ising" / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        write_report(json.loads((out / "results.json").read_text()), out)
        return
    torch.set_num_threads(args.threads)
    num_units = "null" if args.num_units is None else args.num_units
    data = dict(kind=args.kind, side=args.side, num_units=num_units, coupling_std=args.coupling_std, bias_std=args.bias_std,
                zero_field=args.zero_field_biases, burn_in=args.burn_in, thin=args.thin, num_train=args.num_samples, seed=args.seed)
    overrides = [f"dataset.{key}={value}" for key, value in data.items()] + [f"seed={args.seed}"]
    if args.weight_decay:
        overrides.append(f"trainer.weight_decay={args.weight_decay}")
    learner_overrides = {
        "MPF": [f"trainer.epochs={args.max_lbfgs_steps}"], "pseudo-likelihood": [f"trainer.epochs={args.max_lbfgs_steps}"],
        "CD-1": [f"trainer.max_seconds={args.cd_seconds}", f"trainer.optimizer.lr={args.cd_learning_rate}"],
        "CD-10": [f"trainer.max_seconds={args.cd_seconds}", f"trainer.optimizer.lr={args.cd_learning_rate}"],
        "ratio matching": [f"trainer.epochs={args.max_lbfgs_steps}"], "GSM": [f"trainer.epochs={args.max_lbfgs_steps}"],
        "NCE": [f"trainer.max_seconds={args.cd_seconds}", f"trainer.optimizer.lr={args.cd_learning_rate}"],
        "PT-SML": [f"trainer.max_seconds={args.cd_seconds}", f"trainer.optimizer.lr={args.cd_learning_rate}"],
    }
    recipe = compose("train", ["+experiment=ising_mpf", *overrides])
    dataset, lbfgs = recipe.dataset, {"lbfgs_iterations": recipe.trainer.optimizer.max_iter, "stop_tolerance": recipe.trainer.stop_tolerance}
    truth = spin_glass_model(kind=dataset.kind, side=dataset.side, num_units=dataset.num_units, coupling_std=dataset.coupling_std,
                             bias_std=dataset.bias_std, seed=dataset.seed, zero_field=dataset.zero_field)
    gibbs = dict(num_chains=dataset.num_chains, burn_in=dataset.burn_in, thin=dataset.thin)
    kernel = SwendsenWang() if args.sampler == "swendsen_wang" else None  # None: block-Gibbs sweeps
    began = time.perf_counter()
    train = sample_spin_glass(truth, dataset.num_train, **gibbs, kernel=kernel, generator=torch.Generator().manual_seed(args.seed + 1))
    sampling_seconds = time.perf_counter() - began
    print(f"sampled {args.num_samples} states of {describe_glass(args.kind, args.side, truth.num_units)} by {args.sampler} in "
          f"{sampling_seconds:.1f} s", flush=True)
    # ε_corr's floor: block-Gibbs samples of the true model itself, drawn as each learned model's are (seed + 9)
    floor = correlation_error(sample_spin_glass(truth, args.model_samples, **gibbs, generator=torch.Generator().manual_seed(args.seed + 9)), train)
    constant_units = nearly_constant_units(train)  # their couplings are hardly determined by the sample (README)
    trace_sampling = dict(num_samples=args.trace_samples, **gibbs, seed=args.seed + 8)  # every point of every curve: the same draws
    trace_floor = CorrelationTrace(train, **trace_sampling)(truth) if args.correlation_trace else None

    results, traces, correlation_traces = {}, {}, {}
    for index, name in enumerate([*LEARNERS, *CLOSED_FORM]):
        try:
            if name in CLOSED_FORM:
                model, trace, correlations, epochs = fit_closed_form(name, train, truth)
            else:
                run_dir = REPO / "runs" / "ising" / out.name / LEARNERS[name][0]  # git-ignored checkpoints and metrics
                correlation_trace = CorrelationTrace(train, **trace_sampling) if args.correlation_trace else None
                model, trace, correlations, epochs = fit(name, overrides + learner_overrides[name], args.seed, train, truth, run_dir,
                                                         correlation_trace)
        except FloatingPointError as error:  # e.g. GSM, whose loss may have no minimum on a finite sample
            results[name] = {"diverged": str(error).split(";")[0]}
            print(f"{name:18s} diverged: {error}", flush=True)
            continue
        except ValueError as error:  # mean-field inversion: moments the method cannot invert (no real TAP root)
            if name not in CLOSED_FORM:
                raise
            results[name] = {"unusable": str(error)}
            print(f"{name:18s} unusable: {error}", flush=True)
            continue
        samples = sample_spin_glass(model, args.model_samples, **gibbs, generator=torch.Generator().manual_seed(args.seed + 10 + index))
        results[name] = {"coupling_error": coupling_error(model, truth), "correlation_error": correlation_error(samples, train),
                         "seconds": trace[-1][0], "iterations_or_epochs": epochs}
        if constant_units:
            results[name]["coupling_error_without_constant_units"] = coupling_error(model, truth, excluding=constant_units)
        traces[name] = trace
        if args.correlation_trace:
            correlation_traces[name] = correlations or [(trace[-1][0], correlation_error(samples, train))]
        print(f"{name:18s} ε_J {results[name]['coupling_error']:.4f}  ε_corr {results[name]['correlation_error']:.2e}  "
              f"{results[name]['seconds']:.1f} s", flush=True)

    record = {
        "command": "python " + shlex.join(sys.argv),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine_description(),
        "threads": args.threads,
        "load_average": load_average(),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("out", "report_only")} | lbfgs,
        "sampling_seconds": sampling_seconds,
        "truth_correlation_error": floor,
        "nearly_constant_units": {unit: train[:, unit].mean().item() for unit in constant_units},
        "results": results,
        "traces": traces,
    }
    if args.correlation_trace:
        record |= {"correlation_traces": correlation_traces, "trace_correlation_floor": trace_floor}
    (out / "results.json").write_text(json.dumps(record, indent=1))
    write_report(record, out)


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
        lines.append(f"MFT+TAP, which the thesis reports as failing, gives ε_J {tap['coupling_error']:.4f} (nMF "
                     f"{naive.get('coupling_error', float('nan')):.4f}; MPF {mpf.get('coupling_error', float('nan')):.4f}). "
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
        "ε_corr: from block-Gibbs samples of each learned model (burn-in and thinning as the data's, in Gibbs sweeps); the "
        "thesis quotes no ε_corr in the rows above",
    ]
    return "\n".join(lines + [f"- {line}" for line in differences]) + "\n"


def describe_glass(kind: str, side: int, num_units: int) -> str:
    """``"a 10×10 spin glass"`` or ``"a 40-unit fully connected spin glass"``."""
    return f"a {side}×{side} spin glass" if kind == "lattice" else f"a {num_units}-unit fully connected spin glass"


def first_within(trace: list, bound: float) -> float | None:
    """The first training time at which ``trace [(seconds, error), ...]`` is at or below ``bound``, or None."""
    return next((seconds for seconds, error in trace if error <= bound), None)


def correlation_section(record: dict) -> str:
    """Figure 3.2's section: ε_corr against training time, and which learner reaches the sampling floor first."""
    traces, floor, settings = record["correlation_traces"], record["trace_correlation_floor"], record["settings"]
    plot(traces, record["out"] / "correlation.png", "ε_corr against training time", "ε_corr (mean square error of ⟨x_i x_j⟩)", floor)
    bound = 2 * floor
    reached = {name: first_within(trace, bound) for name, trace in traces.items()}
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


def figure_differences(settings: dict, results: dict, traces: dict) -> str:
    """The README's section on what a fully connected run takes from where, and what is ours."""
    num_units = settings.get("num_units") or settings["side"] ** 2
    scale = 3 * math.sqrt(2 / num_units)
    lines = [
        "## Against the thesis",
        "",
        "The thesis's Figure 3.2 (a 40-unit fully connected Ising model) is not available to this project, so its settings are "
        "not known here; this run takes the scale of the MPF code released with the paper (Sohl-Dickstein/"
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
        "- ε_corr: the mean square error of the raw moments ⟨x_i x_j⟩ (i < j); the released demo compares correlation "
        "coefficients, and the thesis's axis may use another norm",
        f"- CD's budget: {settings['cd_seconds']:g} s of SGD (batch 100, momentum 0.9, learning rate "
        f"{settings['cd_learning_rate']}/(1 + epoch/10)); MPF and pseudo-likelihood: our L-BFGS (float64, at most "
        f"{settings['max_lbfgs_steps']} steps of 5 iterations), the released code's minFunc to convergence",
        "- seconds: this machine, one thread, beside other work: compare ratios between learners",
    ]
    return "\n".join(lines) + "\n"


def write_report(record: dict, out: Path) -> None:
    """``convergence.png`` (and with ε_corr traces ``correlation.png``) and ``README.md`` in ``out`` from a run's ``record``
    (what results.json holds)."""
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
    plot(traces, out / "convergence.png", title, "ε_J (mean square coupling error)")
    mpf_seconds = results["MPF"]["seconds"]
    thesis = (lambda name: f" | {THESIS.get(name, ('—', '—'))[0]} | {THESIS.get(name, ('—', '—'))[1]} |") if lattice else (lambda name: " |")
    rows = [
        f"| {name} | {'diverged' if 'diverged' in r else 'unusable'} ({r.get('diverged') or r['unusable']}) | | | |" + thesis(name)
        if "diverged" in r or "unusable" in r else
        f"| {name} | {r['coupling_error']:.4f} | {error_at(traces[name], mpf_seconds):.4f} | {r['correlation_error']:.2e} "
        f"| {r['seconds']:.1f} | {r['iterations_or_epochs']}" + thesis(name)
        for name, r in results.items()
    ]
    header = "| learner | ε_J | ε_J at MPF's time | ε_corr | seconds | L-BFGS steps / CD epochs |" + (" thesis ε_J | thesis seconds |" if lattice else "")
    separator = "|---" * (8 if lattice else 6) + "|"
    correlations = correlation_section(record | {"out": out}) if "correlation_traces" in record else ""
    (out / "README.md").write_text(
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
           if "truth_correlation_error" in record else "") + ". Seconds: training time only.\n\n"
        f"{header}\n{separator}\n" + "\n".join(rows) + "\n\n"
        "![ε_J against training time](convergence.png)\n\n" + "\n".join(constant_units_paragraph(record)) + correlations
        + (comparison(settings, results, traces) if lattice else figure_differences(settings, results, traces))
    )
    print(f"wrote {out}/README.md, convergence.png" + (", correlation.png" if correlations else ""))


if __name__ == "__main__":
    main()
