"""Reproduce Figs. 3.7 and 3.9 of Sohl-Dickstein's thesis: Hopfield memory capacity and recall under MPF.

    python scripts/reproduce_hopfield.py           # full run: reports/hopfield/{README.md,results.json,capacity.png,recall.png}
    python scripts/reproduce_hopfield.py --quick   # smoke run (fewer m values, 2 trials): reports/hopfield/quick/

Capacity (Fig. 3.7): for m random patterns of n = 64 fair bits, the fraction of the patterns that are fixed
points of the asynchronous dynamics (:meth:`pfzoo.models.Hopfield.is_fixed_point`) after learning with
- MPF: the flow K of :class:`pfzoo.training.BitFlipMPF` (single-bit flips) on the m patterns, full-batch
  L-BFGS from J = 0, b = 0 until it stops changing or ``--mpf-iterations`` iterations;
- the outer-product (Hebb) rule (:func:`pfzoo.training.outer_product_rule`);
- the perceptron rule, symmetrised (:func:`pfzoo.training.perceptron_rule`),
averaged over independent trials (new patterns per trial).

Recall (Fig. 3.9): with ``--recall-patterns`` patterns stored by each rule, each pattern is corrupted by
flipping k random bits and run to a fixed point (:meth:`~pfzoo.models.Hopfield.recall`); the table gives the
fraction recovered exactly.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
import time
from pathlib import Path

import torch

from pfzoo.data import corrupt, random_patterns
from pfzoo.models import Hopfield
from pfzoo.training import BitFlipMPF, outer_product_rule, perceptron_rule

from pfzoo.reporting import load_average, machine_description

REPO = Path(__file__).resolve().parents[1]

PATTERN_COUNTS = [1, 2, 4, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64, 72, 80, 90, 100, 110, 120]


def mpf_rule(patterns: torch.Tensor, *, max_iterations: int) -> Hopfield:
    """A Hopfield network fitted to ``patterns [m, n]`` by single-bit-flip MPF with full-batch L-BFGS from zero.

    Minimises the flow K itself (thesis eq. 3.2), ``exp`` of :class:`BitFlipMPF`'s ``log K`` loss. When every pattern
    can be made a fixed point, K → 0 only as the couplings grow without bound, so log K has no finite minimiser and
    L-BFGS would chase it to overflow; K's gradient vanishes instead, and L-BFGS stops once the flow is negligible.
    """
    model = Hopfield(patterns.shape[1], init_std=0.0).to(patterns.dtype)
    objective = BitFlipMPF()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=max_iterations, history_size=20, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        flow = objective.loss(model, patterns).exp()
        flow.backward()
        return flow

    optimizer.step(closure)
    return model


def plot_capacity(counts, curves: dict, path: Path, num_units: int, trials: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for name, fractions in curves.items():
        ax.plot(counts, fractions, marker=".", label=name)
    ax.axvline(num_units, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("number of patterns m")
    ax.set_ylabel("fraction of patterns that are fixed points")
    ax.set_title(f"Hopfield capacity, n = {num_units} ({trials} trials)")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_recall(flips, curves: dict, path: Path, num_units: int, num_patterns: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for name, fractions in curves.items():
        ax.plot(flips, fractions, marker=".", label=name)
    ax.set_xlabel("bits flipped in the cue")
    ax.set_ylabel("fraction recalled exactly")
    ax.set_title(f"Recall from corrupted patterns, n = {num_units}, m = {num_patterns}")
    ax.set_ylim(-0.02, 1.02)
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
    args = parser.parse_args()
    if args.quick:
        args.pattern_counts, args.trials, args.recall_trials = [8, 32, 64, 90], 2, 4
    out = args.out or REPO / "reports" / "hopfield" / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    n = args.num_units
    rules = {
        "MPF": lambda p: mpf_rule(p, max_iterations=args.mpf_iterations),
        "outer product": outer_product_rule,
        "perceptron": lambda p: perceptron_rule(p, max_epochs=args.perceptron_epochs),
    }
    generator = torch.Generator().manual_seed(args.seed)

    stored = {name: {m: [] for m in args.pattern_counts} for name in rules}
    seconds = {name: 0.0 for name in rules}
    for trial in range(args.trials):
        for m in args.pattern_counts:
            patterns = random_patterns(m, n, generator=generator).double()
            for name, rule in rules.items():
                began = time.perf_counter()
                model = rule(patterns)
                seconds[name] += time.perf_counter() - began
                stored[name][m].append(model.is_fixed_point(patterns.to(model.dtype)).double().mean().item())
        print(f"trial {trial + 1}/{args.trials}: " + ", ".join(
            f"{name} m={m}: {stored[name][m][-1]:.2f}" for name in rules for m in (args.pattern_counts[len(args.pattern_counts) // 2], args.pattern_counts[-1])
        ), flush=True)
    capacity = {name: [sum(stored[name][m]) / len(stored[name][m]) for m in args.pattern_counts] for name in rules}
    all_stored = {name: [min(stored[name][m]) == 1.0 for m in args.pattern_counts] for name in rules}

    recall = {name: {k: [] for k in args.recall_flips} for name in rules}
    for _ in range(args.recall_trials):
        patterns = random_patterns(args.recall_patterns, n, generator=generator).double()
        for name, rule in rules.items():
            model = rule(patterns)
            for k in args.recall_flips:
                cues = corrupt(patterns, k, generator=generator) if k else patterns
                recalled = model.recall(cues.to(model.dtype))
                recall[name][k].append((recalled == patterns.to(model.dtype)).all(-1).double().mean().item())
    recall_curves = {name: [sum(recall[name][k]) / len(recall[name][k]) for k in args.recall_flips] for name in rules}

    plot_capacity(args.pattern_counts, capacity, out / "capacity.png", n, args.trials)
    plot_recall(args.recall_flips, recall_curves, out / "recall.png", n, args.recall_patterns)
    record = {
        "command": "python " + shlex.join(sys.argv),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine_description(),
        "threads": args.threads,
        "load_average": load_average(),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "out"},
        "capacity": {name: dict(zip(args.pattern_counts, fractions)) for name, fractions in capacity.items()},
        "stored_in_every_trial": {name: dict(zip(args.pattern_counts, flags)) for name, flags in all_stored.items()},
        "fit_seconds_total": seconds,
        "recall": {name: dict(zip(args.recall_flips, fractions)) for name, fractions in recall_curves.items()},
    }
    (out / "results.json").write_text(json.dumps(record, indent=1))
    names = list(rules)
    capacity_rows = [
        f"| {m} | " + " | ".join(f"{capacity[name][i]:.3f}{' ✓' if all_stored[name][i] else ''}" for name in names) + " |"
        for i, m in enumerate(args.pattern_counts)
    ]
    recall_rows = [f"| {k} | " + " | ".join(f"{recall_curves[name][i]:.3f}" for name in names) + " |" for i, k in enumerate(args.recall_flips)]
    (out / "README.md").write_text(
        f"# Hopfield networks of n = {n} units: capacity and recall (thesis Figs. 3.7, 3.9)\n\n"
        f"Made by `{record['command']}` on {record['date']} ({record['machine']}, {args.threads} threads, "
        f"load average {record['load_average']}).\n\n"
        f"## Capacity\n\nFraction of m random patterns that are fixed points after learning, mean over {args.trials} trials "
        "(✓: all patterns stored in every trial). MPF: single-bit-flip MPF, full-batch L-BFGS from zero (at most "
        f"{args.mpf_iterations} iterations); outer product: Hebb rule; perceptron: symmetrised perceptron rule (at most "
        f"{args.perceptron_epochs} epochs). Total fitting time: "
        + ", ".join(f"{name} {seconds[name]:.1f} s" for name in names) + ".\n\n"
        "| m | " + " | ".join(names) + " |\n|---|" + "---|" * len(names) + "\n" + "\n".join(capacity_rows) + "\n\n"
        "![capacity](capacity.png)\n\n"
        f"## Recall\n\n{args.recall_patterns} stored patterns; each cue is a pattern with k random bits flipped, run to a fixed "
        f"point; fraction recalled exactly, over {args.recall_trials} trials × {args.recall_patterns} patterns.\n\n"
        "| k | " + " | ".join(names) + " |\n|---|" + "---|" * len(names) + "\n" + "\n".join(recall_rows) + "\n\n"
        "![recall](recall.png)\n"
    )
    print(f"wrote {out}/README.md, results.json, capacity.png, recall.png")


if __name__ == "__main__":
    main()
