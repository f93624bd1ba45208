"""Reproduce §3.3 of Sohl-Dickstein's thesis (Hillar, Sohl-Dickstein & Koepsell 2012): Hopfield memories stored by MPF.

    python scripts/reproduce_hopfield.py           # n = 64, 5 trials: all experiments → reports/hopfield/n64/
    python scripts/reproduce_hopfield.py --quick   # smoke run (few m values, 2 trials): reports/hopfield/quick/
    python scripts/reproduce_hopfield.py --render reports/hopfield/results.json   # re-render README.md and plots beside it
    python scripts/reproduce_hopfield.py --render a/results.json b/results.json    # a's report, with b's sections in
    # the thesis's size, as reports/hopfield/README.md was made (its head says how that run was split into processes):
    python scripts/reproduce_hopfield.py --num-units 128 --trials 20 --recall-patterns 20 \
        --pattern-counts 1 4 8 16 24 32 48 64 80 96 112 128 144 160 176 192 208 224 240 \
        --recall-flips 0 4 8 12 16 20 24 28 32 36 40 44 48 52 56 60 64 --threads 1 --out reports/hopfield

The thesis's Figs. 3.6 and 3.7–3.10 at their own settings (80 images in 4096 units; n = 64 with t = 20 and t = 13;
four loads at n = 128) are run by scripts/hopfield_figures.py into the same results.json; --render renders them too.

Rules (every experiment fits each from scratch, in float64):
- MPF: the recipe conf/experiment/hopfield_mpf.yaml run by :func:`pfzoo.training.recipe.fit_recipe` (the flow K of
  :class:`pfzoo.training.BitFlipMPF`, single-bit flips, full-batch L-BFGS from J = 0, b = 0, at most
  ``--mpf-iterations`` iterations);
- MPF local rule: the same K minimised online by the local, Hebbian-like update of thesis eqs. 3.12–3.13
  (:func:`pfzoo.training.mpf_online_rule`, minibatches of ``--local-batch-size``, step ``--local-learning-rate``);
- the outer-product (Hebb) rule (:func:`pfzoo.training.outer_product_rule`);
- the perceptron rule, symmetrised (:func:`pfzoo.training.perceptron_rule`).

Experiments (``--experiments``; run by :func:`pfzoo.studies.hopfield_capacity.run_experiments`, reported by
:mod:`pfzoo.studies.hopfield_report`):
- capacity (Fig. 3.7): for m random patterns of n fair bits, the fraction that are fixed points of the dynamics, and
  the seconds each fit takes, averaged over ``--trials`` trials;
- recall (Figs. 3.8–3.9): ``--recall-patterns`` patterns stored; each corrupted by k random flips and run to a
  fixed point; the fraction recovered exactly;
- noisy (Figs. 3.6/3.10, the paper's experiment): the rules see only ``--noisy-copies`` copies of each pattern with
  every bit flipped with probability p, never the clean patterns; the fraction of clean patterns that are fixed
  points, against p (``--noisy-patterns`` patterns) and against m (at p = ``--noisy-flip-probability``);
- convergence: K and the stored fraction of ``--convergence-patterns`` patterns against wall time, for L-BFGS MPF
  (by iteration budget), the MPF local rule (by epochs) and the perceptron (by epochs).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import torch

from pfzoo.cli import compose
from pfzoo.studies.hopfield_capacity import EXPERIMENTS, PATTERN_COUNTS, run_experiments
from pfzoo.studies.hopfield_report import join_runs, report
from pfzoo.studies.reporting import run_header, settings_record

REPO = Path(__file__).resolve().parents[1]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-units", type=int, default=64)
    parser.add_argument("--pattern-counts", type=int, nargs="+", default=PATTERN_COUNTS)
    parser.add_argument("--trials", type=int, default=5, help="trials of every experiment but recall")
    parser.add_argument("--mpf-iterations", type=int, default=2000, help="L-BFGS iterations at most per MPF fit")
    parser.add_argument("--perceptron-epochs", type=int, default=2000)
    parser.add_argument("--local-learning-rate", type=float, default=0.3, help="step η of the MPF local rule on the clean patterns")
    parser.add_argument("--local-batch-size", type=int, default=8)
    parser.add_argument("--local-max-flip-rate", type=float, default=20.0, help="bound on each flip rate in the local rule's update")
    parser.add_argument("--local-epochs", type=int, default=200, help="epochs at most of the MPF local rule")
    parser.add_argument("--recall-patterns", type=int, default=10, help="patterns stored for the recall experiment")
    parser.add_argument("--recall-flips", type=int, nargs="+", default=[0, 2, 4, 6, 8, 10, 12, 14, 16])
    parser.add_argument("--recall-trials", type=int, default=20)
    parser.add_argument("--noisy-trials", type=int, default=None, help="trials of the noisy experiment (default --trials)")
    parser.add_argument("--noisy-copies", type=int, default=50, help="corrupted copies of each pattern the rules see")
    parser.add_argument("--noisy-patterns", type=int, default=16, help="patterns of the sweep over the flip probability")
    parser.add_argument("--noisy-flip-probabilities", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3])
    parser.add_argument("--noisy-pattern-counts", type=int, nargs="+", default=[4, 8, 16, 32])
    parser.add_argument("--noisy-flip-probability", type=float, default=0.1, help="flip probability of the sweep over m")
    parser.add_argument("--noisy-perceptron-epochs", type=int, default=200, help="noisy copies are never all stable: the perceptron runs this many")
    parser.add_argument("--noisy-local-learning-rate", type=float, default=0.03, help="η of the local rule on noisy copies (0.1 stores none there: too noisy)")
    parser.add_argument("--noisy-local-epochs", type=int, default=100)
    parser.add_argument("--convergence-patterns", type=int, default=None, help="patterns of the convergence experiment (default n)")
    parser.add_argument("--experiments", nargs="+", choices=EXPERIMENTS, default=list(EXPERIMENTS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="few m values, 2 trials: a smoke run")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default reports/hopfield/n<num-units>, or .../quick)")
    parser.add_argument("--pool-trials", action="store_true", help="with --render: pool the corrupted-sample trials of "
                        "several files (independent runs, different --seed) instead of taking the last")
    parser.add_argument("--note", default=None, help="a paragraph for the report's head (kept in results.json)")
    parser.add_argument("--render", type=Path, nargs="+", default=None, help="re-render README.md and the plots beside the first "
                        "results.json, each section taken from the last file that has it (runs of other --experiments, same settings)")
    return parser.parse_args()


def write_report(record: dict, out: Path) -> None:
    """``README.md`` and its plots in ``out`` from a run's ``record`` (what results.json holds)."""
    (out / "README.md").write_text(report(record, out))
    print(f"wrote {out}/README.md and its plots")


def main() -> None:
    args = parse_args()
    if args.render:
        record = join_runs([json.loads(path.read_text()) for path in args.render], pool_trials=args.pool_trials)
        if args.note:
            record["note"] = args.note
        (args.render[0].parent / "results.json").write_text(json.dumps(record, indent=1))
        write_report(record, args.render[0].parent)
        return
    if args.quick:
        args.pattern_counts, args.trials, args.recall_trials = [8, 32, 64, 90], 2, 4
        args.noisy_flip_probabilities, args.noisy_pattern_counts = [0.0, 0.1, 0.2], [8, 16]
    out = args.out or REPO / "reports" / "hopfield" / ("quick" if args.quick else f"n{args.num_units}")
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    record = {**run_header(sys.argv, args.threads), "settings": settings_record(vars(args), leave_out=("out", "render", "note"))}
    if args.note:
        record["note"] = args.note

    def save(section: str, value: dict) -> None:
        record[section] = value
        (out / "results.json").write_text(json.dumps(record, indent=1))
        print(f"{datetime.datetime.now():%H:%M:%S} {section} done", flush=True)

    def mpf_recipe(max_iter: int):
        return compose("train", ["+experiment=hopfield_mpf", f"seed={args.seed}", f"trainer.optimizer.max_iter={max_iter}"])

    run_experiments(record["settings"], mpf_recipe, on_section=save, on_progress=lambda line: print(line, flush=True))
    write_report(json.loads((out / "results.json").read_text()), out)


if __name__ == "__main__":
    main()
