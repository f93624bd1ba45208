"""Reproduce Figs. 3.7 and 3.9 of Sohl-Dickstein's thesis: Hopfield memory capacity and recall under MPF.

    python scripts/reproduce_hopfield.py           # full run: reports/hopfield/{README.md,results.json,capacity.png,recall.png}
    python scripts/reproduce_hopfield.py --quick   # smoke run (fewer m values, 2 trials): reports/hopfield/quick/
    python scripts/reproduce_hopfield.py --render reports/hopfield/results.json   # re-render README.md and plots beside it

Capacity (Fig. 3.7, :func:`pfzoo.studies.hopfield_capacity.measure_capacity`): for m random patterns of n = 64 fair
bits, the fraction of the patterns that are fixed points of the asynchronous dynamics after learning with
- MPF: the recipe conf/experiment/hopfield_mpf.yaml run in float64 by :func:`pfzoo.training.recipe.fit_recipe` (the flow K
  of :class:`pfzoo.training.BitFlipMPF`, single-bit flips, full-batch L-BFGS from J = 0, b = 0, at most
  ``--mpf-iterations`` iterations);
- the outer-product (Hebb) rule (:func:`pfzoo.training.outer_product_rule`);
- the perceptron rule, symmetrised (:func:`pfzoo.training.perceptron_rule`),
averaged over independent trials (new patterns per trial).

Recall (Fig. 3.9, :func:`~pfzoo.studies.hopfield_capacity.measure_recall`): with ``--recall-patterns`` patterns stored
by each rule, each pattern is corrupted by flipping k random bits and run to a fixed point; the table gives the
fraction recovered exactly.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
from pathlib import Path

import torch

from pfzoo.cli import compose
from pfzoo.data import DataSplits
from pfzoo.studies.hopfield_capacity import measure_capacity, measure_recall
from pfzoo.studies.reporting import load_average, machine_description
from pfzoo.training import outer_product_rule, perceptron_rule
from pfzoo.training.recipe import fit_recipe

REPO = Path(__file__).resolve().parents[1]

PATTERN_COUNTS = [1, 2, 4, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64, 72, 80, 90, 100, 110, 120]


def mpf_rule(cfg, patterns: torch.Tensor):
    """A Hopfield network fitted to ``patterns [m, n]`` by the composed MPF recipe ``cfg`` in the patterns' dtype (float64)."""
    return fit_recipe(cfg, DataSplits("hopfield_patterns", train=patterns, test=patterns), dtype=patterns.dtype).model


def plot(x, curves: dict, path: Path, xlabel: str, ylabel: str, title: str, vline: float | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for name, fractions in curves.items():
        ax.plot(x, fractions, marker=".", label=name)
    if vline is not None:
        ax.axvline(vline, color="grey", lw=0.8, ls=":")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title, ylim=(-0.02, 1.02))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-units", type=int, default=64)
    parser.add_argument("--pattern-counts", type=int, nargs="+", default=PATTERN_COUNTS)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--mpf-iterations", type=int, default=2000, help="L-BFGS iterations at most per MPF fit")
    parser.add_argument("--perceptron-epochs", type=int, default=2000)
    parser.add_argument("--recall-patterns", type=int, default=10, help="patterns stored for the recall experiment")
    parser.add_argument("--recall-flips", type=int, nargs="+", default=[0, 2, 4, 6, 8, 10, 12, 14, 16])
    parser.add_argument("--recall-trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="m ∈ {8, 32, 64, 90}, 2 trials: a smoke run")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default reports/hopfield[/quick])")
    parser.add_argument("--render", type=Path, default=None, help="re-render README.md and the plots beside this results.json")
    args = parser.parse_args()
    if args.render:
        write_report(json.loads(args.render.read_text()), args.render.parent)
        return
    if args.quick:
        args.pattern_counts, args.trials, args.recall_trials = [8, 32, 64, 90], 2, 4
    out = args.out or REPO / "reports" / "hopfield" / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    n = args.num_units
    cfg = compose("train", ["+experiment=hopfield_mpf", f"seed={args.seed}", f"trainer.optimizer.max_iter={args.mpf_iterations}"])
    rules = {
        "MPF": lambda p: mpf_rule(cfg, p),
        "outer product": outer_product_rule,
        "perceptron": lambda p: perceptron_rule(p, max_epochs=args.perceptron_epochs),
    }
    generator = torch.Generator().manual_seed(args.seed)
    shown = (args.pattern_counts[len(args.pattern_counts) // 2], args.pattern_counts[-1])

    def progress(trial, measured):
        print(f"trial {trial}/{args.trials}: " + ", ".join(
            f"{name} m={m}: {measured.fractions[name][m][-1]:.2f}" for name in rules for m in shown), flush=True)

    capacity = measure_capacity(rules, n, args.pattern_counts, args.trials, generator=generator, progress=progress)
    recall = measure_recall(rules, n, args.recall_patterns, args.recall_flips, args.recall_trials, generator=generator)
    record = {
        "command": "python " + shlex.join(sys.argv),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine_description(),
        "threads": args.threads,
        "load_average": load_average(),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("out", "render")},
        "capacity": {name: dict(zip(args.pattern_counts, fractions)) for name, fractions in capacity.mean().items()},
        "stored_in_every_trial": {name: dict(zip(args.pattern_counts, flags)) for name, flags in capacity.stored_in_every_trial().items()},
        "fit_seconds_total": capacity.seconds,
        "recall": {name: dict(zip(args.recall_flips, fractions)) for name, fractions in recall.items()},
    }
    (out / "results.json").write_text(json.dumps(record, indent=1))
    write_report(json.loads((out / "results.json").read_text()), out)


def write_report(record: dict, out: Path) -> None:
    """``README.md``, ``capacity.png`` and ``recall.png`` in ``out`` from a run's ``record`` (what results.json holds)."""
    settings, seconds = record["settings"], record["fit_seconds_total"]
    n, counts, flips = settings["num_units"], settings["pattern_counts"], settings["recall_flips"]
    capacity = {name: [by_m[str(m)] for m in counts] for name, by_m in record["capacity"].items()}
    all_stored = {name: [by_m[str(m)] for m in counts] for name, by_m in record["stored_in_every_trial"].items()}
    recall = {name: [by_k[str(k)] for k in flips] for name, by_k in record["recall"].items()}
    names = list(capacity)
    plot(counts, capacity, out / "capacity.png", "number of patterns m", "fraction of patterns that are fixed points",
         f"Hopfield capacity, n = {n} ({settings['trials']} trials)", vline=n)
    plot(flips, recall, out / "recall.png", "bits flipped in the cue", "fraction recalled exactly",
         f"Recall from corrupted patterns, n = {n}, m = {settings['recall_patterns']}")
    capacity_rows = [
        f"| {m} | " + " | ".join(f"{capacity[name][i]:.3f}{' ✓' if all_stored[name][i] else ''}" for name in names) + " |"
        for i, m in enumerate(counts)
    ]
    recall_rows = [f"| {k} | " + " | ".join(f"{recall[name][i]:.3f}" for name in names) + " |" for i, k in enumerate(flips)]
    (out / "README.md").write_text(
        f"# Hopfield networks of n = {n} units: capacity and recall (thesis Figs. 3.7, 3.9)\n\n"
        f"Made by `{record['command']}` on {record['date']} ({record['machine']}, {record['threads']} threads, "
        f"load average {record['load_average']}).\n\n"
        f"## Capacity\n\nFraction of m random patterns that are fixed points after learning, mean over {settings['trials']} trials "
        "(✓: all patterns stored in every trial). MPF: single-bit-flip MPF, full-batch L-BFGS from zero (at most "
        f"{settings['mpf_iterations']} iterations); outer product: Hebb rule; perceptron: symmetrised perceptron rule (at most "
        f"{settings['perceptron_epochs']} epochs). Total fitting time: "
        + ", ".join(f"{name} {seconds[name]:.1f} s" for name in names) + ".\n\n"
        "| m | " + " | ".join(names) + " |\n|---|" + "---|" * len(names) + "\n" + "\n".join(capacity_rows) + "\n\n"
        "![capacity](capacity.png)\n\n"
        f"## Recall\n\n{settings['recall_patterns']} stored patterns; each cue is a pattern with k random bits flipped, run to a "
        f"fixed point; fraction recalled exactly, over {settings['recall_trials']} trials × {settings['recall_patterns']} patterns.\n\n"
        "| k | " + " | ".join(names) + " |\n|---|" + "---|" * len(names) + "\n" + "\n".join(recall_rows) + "\n\n"
        "![recall](recall.png)\n"
    )
    print(f"wrote {out}/README.md, capacity.png, recall.png")


if __name__ == "__main__":
    main()
