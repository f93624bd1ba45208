"""Reproduce Table 3.1 of Sohl-Dickstein's thesis: learning a 10×10 lattice spin glass from 20,000 samples.

    python scripts/reproduce_ising.py                # full run: reports/ising/{README.md,results.json,convergence.png}
    python scripts/reproduce_ising.py --quick        # smoke run (6×6 lattice, 2,000 samples): reports/ising/quick/
    python scripts/reproduce_ising.py --report-only  # re-render README.md and the plot from the folder's results.json
                                                     # (which gets the numbers the README derives from it)

Figure 3.2 (a 40-unit fully connected glass, ε_corr against training time; reports/ising/fully_connected40/), at the
scale of the MPF code released with the paper (MPF_ising/runme_ising.m: J' = randn(d)/√d · 3, symmetrised, biases on its
diagonal; in our units σ = 3√(2/D), bias σ = 3/√D):

    python scripts/reproduce_ising.py --kind fully_connected --num-units 40 --coupling-std 0.6708 --bias-std 0.4743 \
        --correlation-trace --threads 1 --cd-seconds 120 --out reports/ising/fully_connected40

The thesis's own settings for Table 3.1 (σ² = 10, zero field, Swendsen–Wang training states; reports/ising/sigma10/):

    python scripts/reproduce_ising.py --coupling-std 3.1623 --zero-field-biases --sampler swendsen_wang \
        --threads 1 --cd-seconds 120 --out reports/ising/sigma10

Figure 3.1 d–f (ε_corr against learning time, the five learners of Table 3.1, training timed in process CPU seconds;
reports/ising/sigma10_trace/):

    python scripts/reproduce_ising.py --coupling-std 3.1623 --zero-field-biases --sampler swendsen_wang --threads 1 \
        --cd-seconds 120 --correlation-trace --trace-samples 20000 --trace-growth 1.5 --clock cpu \
        --learners MPF pseudo-likelihood CD-1 CD-10 MFT+TAP --out reports/ising/sigma10_trace

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
Errors (:mod:`pfzoo.studies.ising_recovery`, whose :func:`~pfzoo.studies.ising_recovery.recover_spin_glass` runs it all;
the report: :mod:`pfzoo.studies.ising_report`): ε_J, the mean square coupling error over all pairs i < j, logged after
every epoch outside the timed region; ε_corr, that of the pair moments ⟨x_i x_j⟩ of samples of the learned model
against the training data; with ``--correlation-trace`` also along training, at log-spaced epochs (each point a fresh
sample of the learned model, outside the timed region), for Figure 3.2's curves.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from pfzoo.cli import compose
from pfzoo.studies.ising_recovery import CLOSED_FORM, LEARNERS, recover_spin_glass
from pfzoo.studies.ising_report import report, with_derived_numbers
from pfzoo.studies.reporting import run_header, settings_record

REPO = Path(__file__).resolve().parents[1]


def write_report(record: dict, out: Path) -> None:
    """``results.json`` (``record`` with the numbers the README derives from it, :func:`with_derived_numbers`),
    ``README.md``, ``convergence.png`` (and ``correlation.png``) in ``out`` from a run's ``record``."""
    record = with_derived_numbers(record)
    (out / "results.json").write_text(json.dumps(record, indent=1))
    (out / "README.md").write_text(report(record, out))
    print(f"wrote {out}/results.json, README.md, convergence.png" + (", correlation.png" if "correlation_traces" in record else ""))


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
    parser.add_argument("--trace-growth", type=float, default=1.25, help="ratio between the epochs of successive ε_corr points")
    parser.add_argument("--learners", nargs="+", choices=[*LEARNERS, *CLOSED_FORM], default=None,
                        help="fit only these (MPF among them; default: all)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="training seconds (and the CD budget) in wall time or process CPU time (robust to load)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="6×6 lattice, 2,000 samples, 10 s of CD: a smoke run")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default reports/ising[/quick])")
    parser.add_argument("--report-only", action="store_true", help="rewrite README.md and the plot from the folder's results.json, "
                        "adding to it the numbers the README derives (Figure 3.2's seconds to twice the ε_corr floor)")
    args = parser.parse_args()
    if args.quick:
        args.side, args.num_samples, args.cd_seconds, args.model_samples, args.burn_in = 6, 2000, 10.0, 2000, 200
    if args.learners is not None and "MPF" not in args.learners:
        parser.error("--learners must include MPF (the report compares every learner with it)")
    out = args.out or REPO / "reports" / "ising" / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        write_report(json.loads((out / "results.json").read_text()), out)
        return
    torch.set_num_threads(args.threads)
    settings = settings_record(vars(args), leave_out=("out", "report_only"))
    measured = recover_spin_glass(settings, lambda overrides: compose("train", overrides), REPO / "runs" / "ising" / out.name,
                                  on_progress=lambda line: print(line, flush=True))  # runs/: git-ignored checkpoints and metrics
    write_report({**run_header(sys.argv, args.threads), **measured}, out)


if __name__ == "__main__":
    main()
