"""The README sections and plots of the thesis's Figs. 3.6 and 3.7–3.10 at their settings (scripts/hopfield_figures.py),
rendered from nothing but their sections of results.json (:mod:`pfzoo.studies.hopfield_figures`,
:mod:`pfzoo.studies.hopfield_images`). :func:`figure_sections` is called by :func:`pfzoo.studies.hopfield_report.report`.
"""

from __future__ import annotations

from pathlib import Path

from pfzoo.studies.hopfield_images import from_hex

RULE_STYLES = {"MPF": {"color": "tab:red"}, "PER": {"color": "tab:blue"}, "OPR": {"color": "tab:green"}}
PANELS = (("training", "30 % corrupted training copy"), ("cue", "40 % corrupted start"), ("one_update", "after one update"),
          ("converged", "converged"))


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    return plt


def _made_by(section: dict) -> str:
    return (f"Made by `{section['command']}` on {section['date']} ({section['machine']}, {section['threads']} threads, "
            f"load average {section['load_average']}).")


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def images_section(section: dict, out: Path) -> str:
    """Fig. 3.6: the panels a–h as images.png and the measured fractions."""
    s, n = section["settings"], section["num_units"]
    side = s["side"]
    plt = _pyplot()
    fig, axes = plt.subplots(len(s["shown"]), 5, figsize=(11, 2.4 * len(s["shown"])))
    for row, image in enumerate(s["shown"]):
        pictures = [("original", section["originals"][row])] + [(title, section["panels"][key][row]) for key, title in PANELS]
        for col, (title, bits) in enumerate(pictures):
            ax = axes[row][col]
            ax.imshow(from_hex(bits, n).reshape(side, side), cmap="gray", interpolation="nearest")
            letter = "" if col == 0 else f"{'abcdefgh'[4 * row + col - 1]}. "
            ax.set_title(f"{letter}{title}", fontsize=9)
            ax.axis("off")
    fig.tight_layout()
    fig.savefig(out / "images.png", dpi=100)
    plt.close(fig)
    trace = ", ".join(f"{point['step']}: {point['stored']:.2f}" for point in section["trace"])
    bits = section["bits_correct"]
    return (
        f"## Storing 80 images from corrupted copies (Fig. 3.6)\n\n{_made_by(section)}\n\n"
        f"No fingerprints are available, so the patterns are {section['num_patterns']} distinct, non-overlapping {side} × {side} "
        "crops of the van Hateren image in ../shared/data (a meadow: grass blades and the dark gaps between them, the nearest "
        "thing we have to a fingerprint's ridges), each binarised at its own median so half of its bits are on; MNIST digits would be 80–90 % "
        "background and, upscaled to 64 × 64, mostly blocks of repeated pixels. Mean |spin overlap| between two of them "
        f"{section['pattern_overlap']['mean']:.3f} (random patterns: about √(2/πn) = {(2 / (3.141592653589793 * n)) ** 0.5:.3f}), largest "
        f"{section['pattern_overlap']['max']:.3f}.\n\n"
        f"Training minimises MPF's K (eq. 3.10) over fresh corrupted copies, each with exactly {s['train_flips']} of its "
        f"{n} bits flipped: {s['steps']} heavy-ball steps (η = {s['learning_rate']:g}, momentum {s['momentum']:g}, in the spin "
        f"parametrisation; module pfzoo/studies/hopfield_images.py says why), each over {s['copies_per_step']} new copies of "
        f"every image, {section['training_copies']:,} copies in all; the network never sees an original. Training took "
        f"{section['seconds']:.0f} s. Fraction of the originals that are fixed points by step: {trace}.\n\n"
        f"**Stored: {section['stored']:.3f} of the {section['num_patterns']} originals are fixed points** (thesis: all 80). "
        f"**Recovered: {section['recovered']:.3f} of {s['cues_per_image']} × {section['num_patterns']} cues with {s['cue_flips']} "
        f"bits flipped ({s['cue_flips'] / n:.0%}) converge exactly to their original** ({section['images_recovered_every_cue']:.3f} "
        f"of the images from every one of their cues); correct bits {bits['cue']:.3f} in the cue, {bits['one_update']:.3f} "
        f"after one asynchronous update of every unit (in order, eq. 3.7), {bits['converged']:.3f} at convergence "
        f"({section['recall_seconds']:.0f} s for all cues).\n\n"
        "![Fig. 3.6: originals, a/e training copy, b/f corrupted start, c/g one update, d/h converged](images.png)"
    )


def timing_section(section: dict, out: Path) -> str:
    """Figs. 3.7–3.8 at n = 64, t = 20: stored fractions and seconds of the bare loops, and what dominates them."""
    s, rules = section["settings"], section["rules"]
    counts, n, names = s["pattern_counts"], s["num_units"], list(rules)
    plt = _pyplot()
    fig, (stored_ax, time_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name in names:
        stored_ax.plot(counts, [rules[name][str(m)]["stored"] for m in counts], marker="o", ms=3, label=name, **RULE_STYLES[name])
        time_ax.plot(counts, [rules[name][str(m)]["seconds"] for m in counts], marker="o", ms=3, label=name, **RULE_STYLES[name])
    stored_ax.set(xlabel="number of patterns m", ylabel="fraction of patterns that are fixed points", ylim=(-0.02, 1.02),
                  title=f"Fig. 3.7: n = {n}, t = {s['trials']}")
    time_ax.set(xlabel="number of patterns m", ylabel="seconds per fit (mean)", yscale="log", title=f"Fig. 3.8: n = {n}, t = {s['trials']}")
    for ax in (stored_ax, time_ax):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "training_time.png", dpi=120)
    plt.close(fig)
    mpf, per = rules["MPF"], rules["PER"]
    rows = []
    for m in map(str, counts):
        stored = [f"{rules[name][m]['stored']:.3f}{' ✓' if rules[name][m]['stored_in_every_trial'] else ''}" for name in names]
        seconds = [f"{rules[name][m]['seconds']:.2g}" for name in names]
        rows.append([m, *stored, *seconds, f"{mpf[m]['steps']:.0f} / {mpf[m]['evaluations']:.0f} ({mpf[m]['evaluation_seconds'] / mpf[m]['seconds']:.0%})",
                     f"{per[m]['steps']:.0f}"])
    share = [mpf[str(m)]["evaluation_seconds"] / mpf[str(m)]["seconds"] for m in counts]
    per_eval = [mpf[str(m)]["seconds"] / mpf[str(m)]["evaluations"] for m in counts]
    longest = max(counts, key=lambda m: per[str(m)]["evaluations"])
    per_epoch = per[str(longest)]["seconds"] / per[str(longest)]["evaluations"]
    faster = [m for m in counts if mpf[str(m)]["seconds"] < per[str(m)]["seconds"]]
    text = (
        f"## Training time at n = {n}, t = {s['trials']} (Figs. 3.7–3.8)\n\n{_made_by(section)}\n\n"
        "Each rule's bare loop, timed around its call alone: MPF is one `torch.optim.LBFGS` step on K (the recipe's settings: "
        f"from zero, strong-Wolfe line search, history 20, at most {s['mpf_iterations']} iterations), PER the symmetrised "
        f"full-batch perceptron (at most {s['perceptron_epochs']} epochs), OPR one matrix product. Fresh random patterns "
        "every trial and m, the same for every rule; ✓: all stored in every trial.\n\n"
        + _table(["m", *[f"stored {name}" for name in names], *[f"s {name}" for name in names], "MPF iterations / evaluations (time in them)",
                  "PER epochs"], rows)
        + "\n\n![Figs. 3.7-3.8](training_time.png)\n\n"
        f"What dominates: MPF's time is its evaluations of K and its gradient (autograd through the symmetrised coupling) and "
        f"L-BFGS's own work between them (two-loop recursion, line-search logic, in Python); the evaluations take "
        f"{min(share):.0%}–{max(share):.0%} of it, and the whole fit costs {min(per_eval) * 1e3:.2g}–{max(per_eval) * 1e3:.2g} ms "
        f"per evaluation at every m (at n = {n} the arithmetic of one evaluation is a few microseconds: the cost is Python and "
        f"autograd overhead), so MPF's time is its evaluation count, "
        f"{mpf[str(counts[0])]['evaluations']:.0f} at m = {counts[0]} and growing near capacity. PER's is its "
        f"epochs, each two [m, n] × [n, n] products ({per_epoch * 1e6:.0f} µs an epoch at m = {longest}, plus a fixed cost of "
        "about a millisecond a call); it needs a handful of epochs far below capacity and runs out its "
        f"{s['perceptron_epochs']} near it. MPF is the faster at m = " + (", ".join(map(str, faster)) if faster else "no m") + "."
    )
    ablations = section.get("ablations", [])
    if ablations:
        rows = [[a["change"], str(m), f"{a['rules']['MPF'][str(m)]['seconds']:.2g}", f"{a['rules']['PER'][str(m)]['seconds']:.2g}",
                 f"{a['rules']['PER'][str(m)]['steps']:.0f}", f"{a['rules']['PER'][str(m)]['stored']:.3f}"]
                for a in ablations for m in a["settings"]["pattern_counts"]]
        text += ("\n\nAblations, one setting changed at a time (each its own run: "
                 + "; ".join(f"`{a['command']}` on {a['date']}, {a['settings']['trials']} trials" for a in ablations) + "):\n\n"
                 + _table(["change", "m", "s MPF", "s PER", "PER epochs", "stored PER"], rows))
    return text


def recall_by_load_section(section: dict, out: Path) -> str:
    """Fig. 3.9: recovery against flipped bits for four m, PER left, MPF right."""
    s, recall = section["settings"], section["recall"]
    flips, loads, n = s["flips"], s["loads"], s["num_units"]
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, name in zip(axes, ("PER", "MPF")):
        for m in loads:
            ax.plot(flips, recall[name][str(m)], marker="o", ms=3, label=f"m = {m}")
        ax.set(xlabel="bits flipped at the start of recovery", title=f"{name}, n = {n} ({s['trials']} trials)", ylim=(-0.02, 1.02))
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("fraction of exact recovery")
    fig.tight_layout()
    fig.savefig(out / "recall_by_load.png", dpi=120)
    plt.close(fig)
    rows = [[str(k), *[f"{recall[name][str(m)][i]:.3f}" for name in ("PER", "MPF") for m in loads]] for i, k in enumerate(flips)]
    return (
        f"## Recall at four loads, n = {n} (Fig. 3.9)\n\n{_made_by(section)}\n\n"
        f"The thesis plots four values of m but its text does not give them; ours are m = {', '.join(map(str, loads))} "
        f"({', '.join(f'{m / n:.3g} n' for m in loads)}), all below both rules' capacity. Each trial stores m fresh random "
        "patterns with the bare loops of the training-time section; every pattern is corrupted by k distinct flips and run "
        f"to a fixed point; fraction recovered exactly, over {s['trials']} trials × m patterns (k = 0: the fraction stored).\n\n"
        + _table(["k", *[f"{name} m = {m}" for name in ("PER", "MPF") for m in loads]], rows)
        + "\n\n![Fig. 3.9](recall_by_load.png)"
    )


def _corrupted_cells(rules: dict, m: str) -> list[str]:
    return [f"{rules[name]['patterns'][m]:.3f} / {rules[name]['bits'][m]:.3f}" for name in ("MPF", "PER")] + [
        f"{rules[name]['patterns_from_cue'][m]:.3f} / {rules[name]['bits_from_cue'][m]:.3f}" for name in ("MPF", "PER")]


def corrupted_section(section: dict, ablations: list[dict], out: Path) -> str:
    """Fig. 3.10: fractions of patterns and bits recalled against m, MPF red, PER blue (bits dotted), and its ablations."""
    s, rules = section["settings"], section["rules"]
    counts, n = s["pattern_counts"], s["num_units"]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for name in ("MPF", "PER"):
        ax.plot(counts, [rules[name]["patterns"][str(m)] for m in counts], marker="o", ms=3, label=f"{name} patterns", **RULE_STYLES[name])
        ax.plot(counts, [rules[name]["bits"][str(m)] for m in counts], ls=":", marker=".", label=f"{name} bits", **RULE_STYLES[name])
    ax.set(xlabel="number of patterns m", ylabel="fraction recalled", ylim=(-0.02, 1.02),
           title=f"Fig. 3.10: n = {n}, {s['flips']}-bit corrupted copies, t = {s['trials']}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "corrupted_training.png", dpi=120)
    plt.close(fig)
    header = ["m", "MPF from original", "PER from original", "MPF from a cue", "PER from a cue"]
    text = (
        f"## Storage from {s['flips'] / n:.0%}-corrupted copies, n = {n} (Fig. 3.10)\n\n{_made_by(section)}\n\n"
        f"The rules see only {s['copies']} copies of each of m random patterns, each copy with exactly {s['flips']} of its {n} "
        "bits flipped (the thesis presents them \"repeatedly\" without saying how often), never the patterns. MPF: the bare "
        f"L-BFGS loop on all copies; PER: the full-batch perceptron for {s['perceptron_epochs']} epochs (noisy copies are never "
        "all stable). Each cell: fraction of patterns / fraction of bits recalled, mean over "
        f"{s['trials']} trials; *from original*: the dynamics started at the clean pattern (a pattern recalled = a fixed point), "
        f"*from a cue*: started at a fresh copy with {s['flips']} bits flipped.\n\n"
        + _table(header, [[str(m), *_corrupted_cells(rules, str(m))] for m in counts]) + "\n\n![Fig. 3.10](corrupted_training.png)\n\n"
        f"Why MPF stores none of one or two patterns from these copies: every copy has exactly {s['flips']} flipped bits, so "
        f"Σ_j s_j s̃_j = {n - 2 * s['flips']} for every copy s̃ of pattern s, and a unit can read its own copy's bit off the others. "
        f"The anti-Hebbian network J_s = -β s sᵀ, θ = {n - 2 * s['flips']}β s gives unit i the field β s̃_i on every copy, so K → 0 "
        "as β grows: every copy becomes a fixed point and the original the least stable state, and L-BFGS finds that network "
        "(tests/studies/test_hopfield_figures.py checks it). With several patterns no one linear field reads every copy's bits, "
        "and MPF averages the copies instead. With bits flipped independently (first ablation) the constraint is gone; what "
        "is left at m = 1 is the finite number of copies: each bit of a copy is then independent of its other bits, K's "
        "minimiser is J = 0 with the bias along the pattern, and a finite set of copies adds couplings fitted to its noise. "
        "The number of copies is the setting that moves MPF most (the other ablations)."
    )
    if ablations:
        rows = []
        for ablation in ablations:
            for m in ablation["settings"]["pattern_counts"]:
                rows.append([ablation["change"], str(m), *_corrupted_cells(ablation["rules"], str(m))])
        text += ("\n\nAblations, one setting changed at a time (each its own run: "
                 + "; ".join(f"`{a['command']}` on {a['date']}" for a in ablations) + "):\n\n"
                 + _table(["change", *header], rows))
    return text


def figure_sections(record: dict, out: Path) -> list[str]:
    """The README sections of whichever of the figures ``record`` holds, drawing their plots into ``out``."""
    sections = []
    if "fig36_images" in record:
        sections.append(images_section(record["fig36_images"], out))
    if "fig38_training_time" in record:
        sections.append(timing_section({**record["fig38_training_time"], "ablations": record.get("fig38_training_time_ablations", [])}, out))
    if "fig39_recall_by_load" in record:
        sections.append(recall_by_load_section(record["fig39_recall_by_load"], out))
    if "fig310_corrupted" in record:
        sections.append(corrupted_section(record["fig310_corrupted"], record.get("fig310_corrupted_ablations", []), out))
    return sections


def _crossing(xs: list, ys: list) -> float | None:
    """The x at which ``ys`` first falls below ½, linearly interpolated (None when it never does, or starts below)."""
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if y0 >= 0.5 > y1:
            return x0 + (y0 - 0.5) / (y0 - y1) * (x1 - x0)
    return None


def figure_claims(record: dict) -> list[tuple[str, str, str]]:
    """Rows (thesis's claim, what we measured, a verdict computed from the numbers) for the figures ``record`` holds."""
    rows = []
    if "fig36_images" in record:
        section = record["fig36_images"]
        s = section["settings"]
        stored, recovered = section["stored"], section["recovered"]
        verdict = ("holds" if stored == 1 and recovered == 1 else f"storage holds; {recovered:.2f} of the 40 % corrupted starts recovered"
                   if stored == 1 else f"does not hold: {stored:.2f} of the originals are fixed points")
        rows.append(("80 fingerprints (64 × 64) stored in 4096 units from copies with 1228 of their bits flipped: all 80 are fixed "
                     "points, and a 40 % corrupted start converges to the original (Fig. 3.6).",
                     f"{section['num_patterns']} grass images, {section['training_copies']:,} copies with {s['train_flips']} bits flipped, "
                     f"{section['seconds']:.0f} s: {stored:.3f} of the originals are fixed points; {recovered:.3f} of the starts with "
                     f"{s['cue_flips']} bits flipped converge exactly to their original (images.png).", verdict))
    if "fig38_training_time" in record:
        section = record["fig38_training_time"]
        s, rules = section["settings"], section["rules"]
        counts, n = s["pattern_counts"], s["num_units"]
        mpf, per = rules["MPF"], rules["PER"]
        below, above = [m for m in counts if m < 1.5 * n], [m for m in counts if m > 1.7 * n]
        largest = max((m for m in counts if all(mpf[str(c)]["stored_in_every_trial"] for c in counts if c <= m)), default=None)
        holds = min(mpf[str(m)]["stored"] for m in below) >= 0.95 and (not above or max(mpf[str(m)]["stored"] for m in above) <= 0.05)
        rows.append(("At n = 64 (t = 20) the fraction MPF stores tends to 1 for m/n < 1.5 and to 0 for m/n > 1.7 (Fig. 3.7).",
                     f"n = {n}, t = {s['trials']}, bare L-BFGS: all stored in every trial up to m = {largest} ({largest / n:.2f} n); stored "
                     "fraction " + ", ".join(f"m = {m}: MPF {mpf[str(m)]['stored']:.3f}, PER {per[str(m)]['stored']:.3f}" for m in counts
                                            if m >= 64) + " (training_time.png).",
                     "holds" if holds else "does not hold as stated"))
        ratios = {m: mpf[str(m)]["seconds"] / per[str(m)]["seconds"] for m in counts}
        faster = [m for m in counts if ratios[m] < 1]
        slower = [m for m in counts if ratios[m] >= 1]
        verdict = f"with full-batch PER, holds only at m = {', '.join(map(str, faster))}" if faster else "with full-batch PER, does not hold at any m"
        if slower:
            worst = max(slower, key=lambda m: ratios[m])
            verdict += f"; PER is the faster at m = {', '.join(map(str, slower))} (by up to {ratios[worst]:.0f}× at m = {worst})"
        for ablation in record.get("fig38_training_time_ablations", []):
            a = ablation["rules"]
            quicker = [m for m in ablation["settings"]["pattern_counts"] if a["MPF"][str(m)]["seconds"] < a["PER"][str(m)]["seconds"]]
            verdict += f"; with {ablation['change'].split(' (')[0].split(', not')[0]}, MPF is the faster at m = {', '.join(map(str, quicker)) or 'none'} of those run"
        ours = f"bare loops, n = {n}, t = {s['trials']}, mean seconds per fit MPF / PER: " + ", ".join(
            f"m = {m}: {mpf[str(m)]['seconds']:.2g} / {per[str(m)]['seconds']:.2g}" for m in counts)
        for ablation in record.get("fig38_training_time_ablations", []):
            a = ablation["rules"]
            quicker = [m for m in ablation["settings"]["pattern_counts"] if a["MPF"][str(m)]["seconds"] < a["PER"][str(m)]["seconds"]]
            ours += (f"; ablation, {ablation['change']}: MPF / PER " + ", ".join(
                f"m = {m}: {a['MPF'][str(m)]['seconds']:.2g} / {a['PER'][str(m)]['seconds']:.2g}" for m in ablation["settings"]["pattern_counts"])
                + f" (MPF the faster at m = {', '.join(map(str, quicker)) or 'none'})")
        rows.append(("MPF trains a 64-unit network faster than PER; both slow down near capacity (Fig. 3.8).", ours + ".", verdict))
    if "fig39_recall_by_load" in record:
        section = record["fig39_recall_by_load"]
        s, recall = section["settings"], section["recall"]
        halves = {name: {m: _crossing(s["flips"], recall[name][str(m)]) for m in s["loads"]} for name in ("MPF", "PER")}
        behind = [(m, k) for m in s["loads"] for i, k in enumerate(s["flips"]) if recall["PER"][str(m)][i] > recall["MPF"][str(m)][i]]

        def show(value):
            return "never" if value is None else f"{value:.0f}"

        rows.append(("For each of four m, MPF-trained networks (n = 128) recover exactly from more flipped bits than PER-trained "
                     "ones (Fig. 3.9).", f"n = {s['num_units']}, {s['trials']} trials; flipped bits at which exact recovery falls below "
                     "½, MPF / PER: " + ", ".join(f"m = {m}: {show(halves['MPF'][m])} / {show(halves['PER'][m])}" for m in s["loads"])
                     + " (recall_by_load.png).",
                     "holds at every m and k" if not behind else "holds except at (m, k) = " + ", ".join(f"({m}, {k})" for m, k in behind)))
    if "fig310_corrupted" in record:
        section = record["fig310_corrupted"]
        s, rules = section["settings"], section["rules"]
        mpf, per = rules["MPF"], rules["PER"]
        counts = [str(m) for m in s["pattern_counts"]]
        ahead = [m for m in counts if mpf["patterns"][m] > per["patterns"][m]]
        bits_ahead = [m for m in counts if mpf["bits"][m] > per["bits"][m]]
        half = [m for m in counts if mpf["patterns"][m] >= 0.5]
        ours = (f"n = {s['num_units']}, {s['copies']} copies with exactly {s['flips']} bits flipped, t = {s['trials']}; fraction of "
                "patterns (bits) recalled from the original, MPF / PER: " + ", ".join(
                    f"m = {m}: {mpf['patterns'][m]:.2f} ({mpf['bits'][m]:.2f}) / {per['patterns'][m]:.2f} ({per['bits'][m]:.2f})" for m in counts))
        for ablation in record.get("fig310_corrupted_ablations", []):
            a = ablation["rules"]["MPF"]["patterns"]
            ours += f"; ablation, {ablation['change']}: MPF patterns " + ", ".join(f"m = {m}: {a[str(m)]:.2f}" for m in ablation["settings"]["pattern_counts"])
        verdict = (f"MPF ahead of PER in patterns at m = {', '.join(ahead) or 'none'} and in bits at m = {', '.join(bits_ahead) or 'none'}; "
                   f"MPF recalls at least half of the patterns at m = {', '.join(half) or 'none'}")
        rows.append(("Trained on copies with 20 of 64 bits flipped (31 %), MPF recalls more of the patterns and of their bits than "
                     "PER (Fig. 3.10).", ours + " (corrupted_training.png).", verdict))
    return rows
