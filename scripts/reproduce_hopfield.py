"""Reproduce §3.3 of Sohl-Dickstein's thesis (Hillar, Sohl-Dickstein & Koepsell 2012): Hopfield memories stored by MPF.

    python scripts/reproduce_hopfield.py           # n = 64, 5 trials: all experiments → reports/hopfield/n64/
    python scripts/reproduce_hopfield.py --quick   # smoke run (few m values, 2 trials): reports/hopfield/quick/
    python scripts/reproduce_hopfield.py --render reports/hopfield/results.json   # re-render README.md and plots beside it
    python scripts/reproduce_hopfield.py --render a/results.json b/results.json    # a's report, with b's sections in
    # the thesis's size, as reports/hopfield/README.md was made (its head says how that run was split into processes):
    python scripts/reproduce_hopfield.py --num-units 128 --trials 20 --recall-patterns 20 \
        --pattern-counts 1 4 8 16 24 32 48 64 80 96 112 128 144 160 176 192 208 224 240 \
        --recall-flips 0 4 8 12 16 20 24 28 32 36 40 44 48 52 56 60 64 --threads 1 --out reports/hopfield

Rules (every experiment fits each from scratch, in float64):
- MPF: the recipe conf/experiment/hopfield_mpf.yaml run by :func:`pfzoo.training.recipe.fit_recipe` (the flow K of
  :class:`pfzoo.training.BitFlipMPF`, single-bit flips, full-batch L-BFGS from J = 0, b = 0, at most
  ``--mpf-iterations`` iterations);
- MPF local rule: the same K minimised online by the local, Hebbian-like update of thesis eqs. 3.12–3.13
  (:func:`pfzoo.training.mpf_online_rule`, minibatches of ``--local-batch-size``, step ``--local-learning-rate``);
- the outer-product (Hebb) rule (:func:`pfzoo.training.outer_product_rule`);
- the perceptron rule, symmetrised (:func:`pfzoo.training.perceptron_rule`).

Experiments (``--experiments``; the measuring functions are in :mod:`pfzoo.studies.hopfield_capacity`):
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
import shlex
import sys
from pathlib import Path

import torch

from pfzoo.cli import compose
from pfzoo.data import DataSplits
from pfzoo.studies.hopfield_capacity import half_capacity, measure_capacity, measure_convergence, measure_noisy_storage, measure_recall
from pfzoo.studies.reporting import load_average, machine_description
from pfzoo.training import mpf_online_rule, outer_product_rule, perceptron_rule
from pfzoo.training.recipe import fit_recipe

REPO = Path(__file__).resolve().parents[1]

PATTERN_COUNTS = [1, 2, 4, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64, 72, 80, 90, 100, 110, 120]
EXPERIMENTS = ("capacity", "recall", "noisy", "convergence")
LBFGS_BUDGETS = [1, 2, 5, 10, 20, 50, 100, 200, 500]
EPOCH_BUDGETS = [1, 2, 5, 10, 20, 50, 100, 200]
STYLES = [{"lw": 3.0, "marker": "o", "ms": 4, "alpha": 0.8}, {"lw": 1.5, "marker": "s", "ms": 3, "ls": "--"},
          {"lw": 1.5, "marker": "^", "ms": 3, "ls": "-."}, {"lw": 1.2, "marker": ".", "ls": ":"}]


def mpf_rule(cfg, patterns: torch.Tensor):
    """A Hopfield network fitted to ``patterns [m, n]`` by the composed MPF recipe ``cfg`` in the patterns' dtype (float64)."""
    return fit_recipe(cfg, DataSplits("hopfield_patterns", train=patterns, test=patterns), dtype=patterns.dtype).model


def plot(x, curves: dict, path: Path, xlabel: str, ylabel: str, title: str, vlines=(), log_x=False, log_y=False, unit_range=True) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for (name, values), style in zip(curves.items(), STYLES):  # styles tell apart curves that coincide
        ax.plot(x, values, label=name, **style)
    for position, label in vlines:
        ax.axvline(position, color="grey", lw=0.8, ls=":")
        ax.text(position, 0.5, f" {label}", color="grey", rotation=90, va="center", fontsize=8)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    if unit_range:
        ax.set_ylim(-0.02, 1.02)
    if log_x:
        ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_convergence(convergence: dict, path: Path, title: str) -> None:
    """K (log) and the stored fraction against mean wall seconds, one line per rule, one point per budget."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, (flow_ax, stored_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for (name, points), style in zip(convergence.items(), STYLES):
        seconds = [p["seconds"] for p in points]
        flow_ax.plot(seconds, [p["flow"] for p in points], label=name, **style)
        stored_ax.plot(seconds, [p["stored"] for p in points], label=name, **style)
    flow_ax.set(xscale="log", yscale="log", xlabel="seconds per fit", ylabel="MPF objective K on the patterns", title=title)
    stored_ax.set(xscale="log", xlabel="seconds per fit", ylabel="fraction of patterns that are fixed points", ylim=(-0.02, 1.02),
                  title="(one point per L-BFGS iteration or epoch budget)")
    for ax in (flow_ax, stored_ax):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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


def main() -> None:
    args = parse_args()
    if args.render:
        record = json.loads(args.render[0].read_text())
        for path in args.render[1:]:
            other = json.loads(path.read_text())
            for section in EXPERIMENTS:
                if section in other:
                    how = f"`{other['command']}` on {other['date']} (load average {other['load_average']})"
                    commands = record.setdefault("section_commands", {})
                    if args.pool_trials and section == "noisy" and section in record:
                        record[section] = pool_noisy(record[section], other[section])
                        commands[section] = f"{commands[section]} pooled with {how}"
                    else:
                        record[section] = other[section]
                        commands[section] = how
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
    n = args.num_units
    cfg = compose("train", ["+experiment=hopfield_mpf", f"seed={args.seed}", f"trainer.optimizer.max_iter={args.mpf_iterations}"])

    def local_rule(patterns, *, learning_rate, max_epochs, stop_when_stored=True):
        # its own generator, seeded alike for every fit: rules must not draw from the study's generator
        return mpf_online_rule(patterns, learning_rate=learning_rate, max_epochs=max_epochs, batch_size=args.local_batch_size,
                               stop_when_stored=stop_when_stored, max_flip_rate=args.local_max_flip_rate, generator=torch.Generator().manual_seed(args.seed + 1))

    rules = {
        "MPF (L-BFGS)": lambda p: mpf_rule(cfg, p),
        "MPF local rule": lambda p: local_rule(p, learning_rate=args.local_learning_rate, max_epochs=args.local_epochs),
        "outer product": outer_product_rule,
        "perceptron": lambda p: perceptron_rule(p, max_epochs=args.perceptron_epochs),
    }
    noisy_rules = {
        "MPF (L-BFGS)": rules["MPF (L-BFGS)"],
        "MPF local rule": lambda p: local_rule(p, learning_rate=args.noisy_local_learning_rate, max_epochs=args.noisy_local_epochs,
                                               stop_when_stored=False),
        "outer product": outer_product_rule,
        "perceptron": lambda p: perceptron_rule(p, max_epochs=args.noisy_perceptron_epochs),
    }
    generator = torch.Generator().manual_seed(args.seed)
    record = {
        "command": "python " + shlex.join(sys.argv),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine_description(),
        "threads": args.threads,
        "load_average": load_average(),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("out", "render", "note")},
    }
    if args.note:
        record["note"] = args.note

    def save(section: str, value) -> None:
        record[section] = value
        (out / "results.json").write_text(json.dumps(record, indent=1))
        print(f"{datetime.datetime.now():%H:%M:%S} {section} done", flush=True)

    if "capacity" in args.experiments:
        shown = (args.pattern_counts[len(args.pattern_counts) // 2], args.pattern_counts[-1])

        def progress(trial, measured):
            print(f"trial {trial}/{args.trials}: " + ", ".join(
                f"{name} m={m}: {measured.fractions[name][m][-1]:.2f}" for name in rules for m in shown), flush=True)

        capacity = measure_capacity(rules, n, args.pattern_counts, args.trials, generator=generator, progress=progress)
        save("capacity", {
            "fractions": {name: dict(zip(args.pattern_counts, fractions)) for name, fractions in capacity.mean().items()},
            "stored_in_every_trial": {name: dict(zip(args.pattern_counts, flags)) for name, flags in capacity.stored_in_every_trial().items()},
            "fit_seconds": {name: dict(zip(args.pattern_counts, seconds)) for name, seconds in capacity.mean_seconds().items()},
            "seconds_total": capacity.seconds,
        })
    if "recall" in args.experiments:
        recall = measure_recall(rules, n, args.recall_patterns, args.recall_flips, args.recall_trials, generator=generator)
        save("recall", {name: dict(zip(args.recall_flips, fractions)) for name, fractions in recall.items()})
    if "noisy" in args.experiments:
        conditions = [(args.noisy_patterns, p) for p in args.noisy_flip_probabilities]
        conditions += [(m, args.noisy_flip_probability) for m in args.noisy_pattern_counts if (m, args.noisy_flip_probability) not in conditions]
        def save_noisy(trial, noisy):  # after every trial, so a run stopped early still leaves its trials
            save("noisy", {
                "conditions": [list(c) for c in conditions],
                "trials_done": trial,
                "stored": noisy.mean("stored"),
                "cleaned": noisy.mean("cleaned"),
                "stored_in_every_trial": {name: [min(trials) == 1.0 for trials in by_c] for name, by_c in noisy.stored.items()},
                "seconds_total": noisy.seconds,
            })

        measure_noisy_storage(noisy_rules, n, conditions, args.noisy_copies, args.noisy_trials or args.trials, generator=generator,
                              progress=save_noisy)
    if "convergence" in args.experiments:
        # composed before timing: a fit's seconds are the rule's, not Hydra's
        budget_cfgs = {steps: compose("train", ["+experiment=hopfield_mpf", f"seed={args.seed}", f"trainer.optimizer.max_iter={steps}"])
                       for steps in LBFGS_BUDGETS}
        fits = {
            "MPF (L-BFGS)": lambda p, steps: mpf_rule(budget_cfgs[steps], p),
            "MPF local rule": lambda p, steps: local_rule(p, learning_rate=args.local_learning_rate, max_epochs=steps, stop_when_stored=False),
            "perceptron": lambda p, steps: perceptron_rule(p, max_epochs=steps),
        }
        budgets = {"MPF (L-BFGS)": LBFGS_BUDGETS, "MPF local rule": EPOCH_BUDGETS, "perceptron": EPOCH_BUDGETS}
        m = args.convergence_patterns or n
        points = measure_convergence(fits, budgets, n, m, args.trials, generator=generator)
        save("convergence", {"num_patterns": m, "rules": {name: [
            {"steps": p.steps, "seconds": sum(p.seconds) / len(p.seconds), "flow": sum(p.flow) / len(p.flow), "stored": sum(p.stored) / len(p.stored)}
            for p in by_budget] for name, by_budget in points.items()}})
    write_report(json.loads((out / "results.json").read_text()), out)


def pool_noisy(first: dict, second: dict) -> dict:
    """The corrupted-sample sections of two independent runs (same conditions, other seeds) as one of all their trials."""
    if first["conditions"] != second["conditions"]:
        raise ValueError("--pool-trials needs runs of the same (m, p) conditions")
    a, b = first["trials_done"], second["trials_done"]

    def pooled(x, y):
        return {name: [(u * a + v * b) / (a + b) for u, v in zip(x[name], y[name])] for name in x}

    return {
        "conditions": first["conditions"],
        "trials_done": a + b,
        "stored": pooled(first["stored"], second["stored"]),
        "cleaned": pooled(first["cleaned"], second["cleaned"]),
        "stored_in_every_trial": {name: [u and v for u, v in zip(flags, second["stored_in_every_trial"][name])]
                                  for name, flags in first["stored_in_every_trial"].items()},
        "seconds_total": {name: first["seconds_total"][name] + second["seconds_total"][name] for name in first["seconds_total"]},
    }


def table(header: str, names: list[str], rows: list[tuple]) -> str:
    """A Markdown table: ``header`` column then one per name; each row is (label, [cell per name])."""
    lines = [f"| {header} | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows]
    return "\n".join(lines)


def comparison(record: dict) -> str:
    """The thesis's claims (§3.3; Hillar, Sohl-Dickstein & Koepsell 2012) beside what this run measured, a verdict
    computed from the numbers, and every difference of setting we know of."""
    settings = record["settings"]
    n = settings["num_units"]
    mpf = "MPF (L-BFGS)"
    rows = []
    if "capacity" in record:
        counts = settings["pattern_counts"]
        capacity = record["capacity"]
        cells, halves = [], {}
        for name, by_m in capacity["fractions"].items():
            halves[name] = half_capacity(counts, [by_m[str(m)] for m in counts])
            every = capacity["stored_in_every_trial"][name]
            largest = max((m for m in counts if all(every[str(c)] for c in counts if c <= m)), default=None)
            half = halves[name]
            cells.append(f"{name}: all stored in every trial up to m = {largest} ({largest / n:.2f} n), half stored at "
                         + (f"m ≈ {half:.0f} ({half / n:.2f} n)" if half is not None else "no measured m") if largest else f"{name}: never all")
        opr = halves.get("outer product")
        holds = halves[mpf] is not None and halves[mpf] >= 0.9 * n and opr is not None and opr <= 0.25 * n
        rows.append(("MPF stores about n random patterns (at least one per neuron; optimal: it stores any set some "
                     "network can hold); the outer-product rule about 0.14 n (Fig. 3.7).", "; ".join(cells) + ".",
                     "holds" if holds else "does not hold as stated"))
        at = min(counts, key=lambda m: abs(m - n))
        seconds = {name: by_m[str(at)] for name, by_m in capacity["fit_seconds"].items()}
        ratio = seconds[mpf] / seconds["perceptron"]
        fit_seconds = capacity["fit_seconds"]
        faster = [m for m in counts if fit_seconds[mpf][str(m)] < fit_seconds["perceptron"][str(m)]]
        verdict = "holds at m = n" if ratio < 1 else f"does not hold at m = {at}: MPF takes {ratio:.1f}× the perceptron's time"
        verdict += f"; MPF is the faster at m = {', '.join(map(str, faster))}" if faster else "; MPF is the slower at every m"
        rows.append(("MPF trains faster than the classical iterative rule (the perceptron); the outer product is one "
                     "matrix product.", f"mean seconds per fit at m = {at}: " + ", ".join(f"{name} {value:.3g} s" for name, value in seconds.items())
                     + " (fit_time.png).", verdict))
    if "recall" in record:
        flips = settings["recall_flips"]
        recall = record["recall"]
        shown = [k for k in flips if k in (n // 16, n // 8, n // 4, 3 * n // 8, n // 2)] or flips[-1:]
        behind = [k for k in flips if any(recall[name][str(k)] > recall[mpf][str(k)] for name in recall if name != mpf)]
        rows.append(("MPF-trained networks recall stored patterns from more corrupted cues than the classical rules "
                     "(Figs. 3.8–3.9).", f"m = {settings['recall_patterns']}, fraction recalled with k flipped bits: " + "; ".join(
                         f"k = {k}: " + ", ".join(f"{name} {by_k[str(k)]:.2f}" for name, by_k in recall.items()) for k in shown) + ".",
                     "holds at every k" if not behind else f"holds except at k = {', '.join(map(str, behind))}"))
    if "noisy" in record:
        noisy = record["noisy"]
        conditions = [tuple(c) for c in noisy["conditions"]]
        picked = sorted((i for i, (m, p) in enumerate(conditions) if p == settings["noisy_flip_probability"]), key=lambda i: conditions[i][0])
        stored = noisy["stored"]
        behind = [conditions[i] for i in range(len(conditions)) if any(stored[name][i] > stored[mpf][i] + 1e-12 for name in stored if name != mpf)]
        rows.append(("Trained only on corrupted copies, MPF finds a network whose fixed points are the clean originals "
                     "(Figs. 3.6/3.10).", f"p = {settings['noisy_flip_probability']}, {settings['noisy_copies']} copies, fraction of clean "
                     "patterns stored: " + "; ".join(f"m = {conditions[i][0]}: " + ", ".join(
                         f"{name} {values[i]:.2f}" for name, values in stored.items()) for i in picked) + ".",
                     "holds; MPF at least as good as every other rule in every condition" if not behind
                     else "holds where p is small; other rules ahead at (m, p) = " + ", ".join(f"({m}, {p:g})" for m, p in behind)))
    if "convergence" in record:
        convergence = record["convergence"]
        last = {name: points[-1] for name, points in convergence["rules"].items()}
        rows.append(("The MPF update is local and Hebbian-like (eqs. 3.12–3.13) and can be applied online.",
                     f"our local rule's update equals -∇K to 1e-13 (tests/training/test_mpf_local_rule.py); storing m = "
                     f"{convergence['num_patterns']} patterns: " + ", ".join(
                         f"{name} {p['stored']:.2f} stored with a budget of {p['steps']} {'iterations' if 'L-BFGS' in name else 'epochs'} "
                         f"({p['seconds']:.2g} s)" for name, p in last.items()) + " (convergence.png).",
                     f"holds (derivation checked exactly); online, K after {last['MPF local rule']['steps']} epochs is "
                     f"{last['MPF local rule']['flow']:.2g} against L-BFGS's {last[mpf]['flow']:.2g}"))
    noisy_trials = record["noisy"].get("trials_done", settings.get("noisy_trials")) if "noisy" in record else None
    overhead = ""
    if "convergence" in record:
        first = record["convergence"]["rules"][mpf][0]
        overhead = (f" Every MPF (L-BFGS) fit goes through the recipe's Trainer (a temporary run folder, metrics, a checkpoint): "
                    f"a fit of {first['steps']} iteration took {first['seconds']:.2g} s here, a fixed cost inside every MPF time above.")
    return (
        "## The thesis's claims beside ours\n\n| thesis (§3.3, Hillar et al. 2012) | this run | verdict |\n|---|---|---|\n"
        + "\n".join(f"| {claim} | {ours} | {verdict} |" for claim, ours, verdict in rows)
        + "\n\nDifferences of setting that remain:\n\n"
        "- Perceptron: ours is full-batch and symmetrised (the update's symmetric part, zero diagonal), stopping once every "
        "pattern is stable; the thesis's perceptron variant, step size and stopping rule may differ, and its timings come "
        "from other hardware and code, so only the ordering of speeds is comparable, not the seconds." + overhead + "\n"
        "- MPF: the recipe conf/experiment/hopfield_mpf.yaml (all single-bit flips, K itself, full-batch L-BFGS with "
        "strong-Wolfe line search from zero, float64); the thesis minimised the same K with L-BFGS, but its iteration "
        "limits and tolerances may differ.\n"
        f"- MPF local rule: minibatches of {settings['local_batch_size']} examples per update (the thesis's rule is per "
        f"example), flip rates bounded by {settings['local_max_flip_rate']:g} (the exact gradient where no unit disagrees "
        "with its field by more than 2 log of that bound), a fixed step, at most "
        f"{settings['local_epochs']} epochs; the step sizes were picked by a few trial runs, not tuned.\n"
        "- Storage from corrupted samples: the number of copies, the flip probabilities and the pattern counts are our "
        "choice; the paper's fingerprint images (the visual clean-up demonstration) are not reproduced.\n"
        f"- Recall: m = {settings['recall_patterns']} stored patterns is our choice (the load of the n = 64 report's 10 "
        "patterns); a pattern counts as recalled only when the dynamics end on it exactly.\n"
        "- Fixed points: a unit whose field is exactly zero keeps its state, so a tie counts as stable.\n"
        + (f"- Trials: the corrupted-sample experiment ran {noisy_trials} trials, not {settings['trials']}, to fit the time "
           "available.\n" if noisy_trials and noisy_trials != settings["trials"] else "")
    )


def write_report(record: dict, out: Path) -> None:
    """``README.md`` and the plots in ``out`` from a run's ``record`` (what results.json holds); sections not run are left out."""
    settings = record["settings"]
    n = settings["num_units"]
    sections = [
        f"# Hopfield networks of n = {n} units stored by MPF (thesis §3.3)\n\n"
        f"Made by `{record['command']}` on {record['date']} ({record['machine']}, {record['threads']} threads, "
        f"load average {record['load_average']})"
        + "".join(f"; its {section} section by {how}" for section, how in record.get("section_commands", {}).items()) + ".\n\n"
        + (f"{record['note']}\n\n" if record.get("note") else "") +
        "Rules: **MPF (L-BFGS)**: single-bit-flip MPF, full-batch L-BFGS from zero (at most "
        f"{settings['mpf_iterations']} iterations); **MPF local rule**: the same objective minimised online by the local "
        f"update of thesis eqs. 3.12–3.13 (minibatches of {settings['local_batch_size']}, η = {settings['local_learning_rate']}, "
        f"flip rates bounded by {settings['local_max_flip_rate']:g}, "
        f"at most {settings['local_epochs']} epochs, stopping once every pattern is a fixed point); **outer product**: Hebb rule; "
        f"**perceptron**: symmetrised perceptron rule (at most {settings['perceptron_epochs']} epochs)."
    ]
    if "capacity" in record:
        capacity = record["capacity"]
        counts = settings["pattern_counts"]
        names = list(capacity["fractions"])
        fractions = {name: [by_m[str(m)] for m in counts] for name, by_m in capacity["fractions"].items()}
        every = {name: [by_m[str(m)] for m in counts] for name, by_m in capacity["stored_in_every_trial"].items()}
        seconds = {name: [by_m[str(m)] for m in counts] for name, by_m in capacity["fit_seconds"].items()}
        plot(counts, fractions, out / "capacity.png", "number of patterns m", "fraction of patterns that are fixed points",
             f"Hopfield capacity, n = {n} ({settings['trials']} trials)", vlines=[(0.14 * n, "0.14 n"), (n, "n")])
        plot(counts, seconds, out / "fit_time.png", "number of patterns m", "seconds per fit (mean)",
             f"Time to store m patterns, n = {n} ({settings['threads']} thread)", vlines=[(n, "n")], log_y=True, unit_range=False)
        rows = [(m, [f"{fractions[name][i]:.3f}{' ✓' if every[name][i] else ''}" for name in names]) for i, m in enumerate(counts)]
        time_rows = [(m, [f"{seconds[name][i]:.3g}" for name in names]) for i, m in enumerate(counts)]
        sections.append(
            f"## Capacity (Fig. 3.7)\n\nFraction of m random patterns that are fixed points after learning, mean over "
            f"{settings['trials']} trials (✓: all patterns stored in every trial). Total fitting time: "
            + ", ".join(f"{name} {capacity['seconds_total'][name]:.1f} s" for name in names) + ".\n\n"
            + table("m", names, rows) + "\n\n![capacity](capacity.png)\n\n"
            "Mean seconds per fit (the speed comparison):\n\n" + table("m", names, time_rows) + "\n\n![fit time](fit_time.png)"
        )
    if "recall" in record:
        flips = settings["recall_flips"]
        recall = {name: [by_k[str(k)] for k in flips] for name, by_k in record["recall"].items()}
        names = list(recall)
        plot(flips, recall, out / "recall.png", "bits flipped in the cue", "fraction recalled exactly",
             f"Recall from corrupted cues, n = {n}, m = {settings['recall_patterns']} ({settings['recall_trials']} trials)")
        rows = [(k, [f"{recall[name][i]:.3f}" for name in names]) for i, k in enumerate(flips)]
        sections.append(
            f"## Recall (Figs. 3.8–3.9)\n\n{settings['recall_patterns']} stored patterns; each cue is a pattern with k random "
            f"bits flipped, run to a fixed point; fraction recalled exactly, over {settings['recall_trials']} trials × "
            f"{settings['recall_patterns']} patterns.\n\n" + table("k", names, rows) + "\n\n![recall](recall.png)"
        )
    if "noisy" in record:
        noisy = record["noisy"]
        noisy_done = noisy.get("trials_done", settings.get("noisy_trials") or settings["trials"])
        conditions = [tuple(c) for c in noisy["conditions"]]
        names = list(noisy["stored"])
        m_fixed, p_fixed = settings["noisy_patterns"], settings["noisy_flip_probability"]
        by_p = sorted((i for i, (m, _) in enumerate(conditions) if m == m_fixed), key=lambda i: conditions[i][1])
        by_m = sorted((i for i, (_, p) in enumerate(conditions) if p == p_fixed), key=lambda i: conditions[i][0])
        plot([conditions[i][1] for i in by_p], {name: [noisy["stored"][name][i] for i in by_p] for name in names}, out / "noisy_corruption.png",
             "flip probability p of the training copies", "fraction of clean patterns that are fixed points",
             f"Storage from corrupted samples: n = {n}, m = {m_fixed}, {settings['noisy_copies']} copies each")
        plot([conditions[i][0] for i in by_m], {name: [noisy["stored"][name][i] for i in by_m] for name in names}, out / "noisy_patterns.png",
             "number of patterns m", "fraction of clean patterns that are fixed points",
             f"Storage from corrupted samples: n = {n}, p = {p_fixed}, {settings['noisy_copies']} copies each")
        every = noisy["stored_in_every_trial"]
        rows = [(f"{m}, {p:g}", [f"{noisy['stored'][name][i]:.3f}{' ✓' if every[name][i] else ''} / {noisy['cleaned'][name][i]:.3f}" for name in names])
                for i, (m, p) in enumerate(conditions)]
        sections.append(
            f"## Storage from corrupted samples (Figs. 3.6/3.10)\n\nThe rules see only {settings['noisy_copies']} copies of each "
            "of m random patterns, every bit flipped independently with probability p, never the patterns themselves. "
            "Each cell: fraction of the clean patterns that are fixed points (✓: all, in every trial) / fraction of the noisy "
            f"training copies the dynamics clean up to exactly their pattern; mean over {noisy_done} trials. Here the "
            f"perceptron runs {settings['noisy_perceptron_epochs']} epochs (noisy copies are never all stable) and the local rule "
            f"{settings['noisy_local_epochs']} epochs at η = {settings['noisy_local_learning_rate']} without stopping early. "
            "Total fitting time: " + ", ".join(f"{name} {noisy['seconds_total'][name]:.1f} s" for name in names) + ".\n\n"
            "The two numbers differ where the copies are few enough for the network to hold them all (m × copies below "
            "its capacity, about 1.5 n here): MPF and the perceptron then make the noisy copies themselves fixed points "
            "beside the clean pattern, which is stored but not reached from the copies.\n\n"
            + table("m, p", names, rows) + "\n\n![against p](noisy_corruption.png)\n\n![against m](noisy_patterns.png)"
        )
    if "convergence" in record:
        convergence = record["convergence"]
        m = convergence["num_patterns"]
        plot_convergence(convergence["rules"], out / "convergence.png", f"Storing m = {m} patterns, n = {n} ({settings['trials']} trials)")
        lines = []
        for name, points in convergence["rules"].items():
            unit = "L-BFGS iterations" if "L-BFGS" in name else "epochs"
            lines.append(f"| {name} | {unit} | " + " | ".join(
                f"{p['steps']}: K = {p['flow']:.3g}, {p['stored']:.2f} stored, {p['seconds']:.3g} s" for p in points) + " |")
        sections.append(
            f"## Convergence: the local rule against full-batch MPF\n\nm = {m} random patterns; each rule run from scratch with a "
            f"budget of L-BFGS iterations or epochs (the local rule runs them all; L-BFGS stops earlier when its steps stall, "
            f"the perceptron once every pattern is stable), mean over {settings['trials']} trials: MPF's objective K on the "
            "patterns, the fraction stored, and the wall seconds of the fit.\n\n"
            "| rule | budget | points (budget: K, stored fraction, seconds) |\n|---|---|---|\n" + "\n".join(lines)
            + "\n\n![convergence](convergence.png)"
        )
    sections.append(comparison(record))
    (out / "README.md").write_text("\n\n".join(sections) + "\n")
    print(f"wrote {out}/README.md and its plots")


if __name__ == "__main__":
    main()
