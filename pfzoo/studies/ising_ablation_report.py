"""The README of scripts/ising_ablation.py (reports/ising/ablation/), rendered from its results.json record alone: the
ablation table (one setting difference per row, MPF's and pseudo-likelihood's ε_J beside thesis Table 3.1's), the ε_corr
table beside the thesis's column, and the verdict the numbers give."""

from __future__ import annotations

import math

from pfzoo.studies.ising_ablation import ROWS, THESIS_TABLE

FIT_ROWS = {row.key for row in ROWS if row.fit is not None}

THESIS_SETTINGS = """The thesis's settings (§3.1.1, Table 3.1), as stated: a 10×10 square lattice (d = 100) whose coupling matrix J' "only had
non-zero elements corresponding to nearest-neighbor units ... and bias terms along the diagonal" in p ∝ exp(−xᵀJ'x),
x ∈ {0,1}; nearest-neighbour elements drawn with variance σ² = 10, diagonal set so that each column sums to 0 (zero field);
20,000 iid samples by Swendsen–Wang; MPF with single-bit-flip connectivity (eq. 3.2); MPF and pseudo-likelihood by an
off-the-shelf L-BFGS (minFunc, Schmidt 2005) on the full training set; CD-1 and CD-10 by SGD on minibatches of 100 with
the learning rate annealed linearly from 3.0 to 0.1; learning took ~60 s (MPF), ~800 s (PL), "upwards of 20,000 s"
(CD-1, CD-10), 0.1 s (MFT+TAP). ε_J and ε_corr are *mean square* errors ("mean square error in recovered coupling
strengths", "mean square error in pairwise correlations"; the mean *absolute* error is Fig. 3.2's, on the 40-unit glass).
Not stated: over which entries ε_J averages, whether σ² is that of J' or of the pair coupling, the learners'
initialisation, L-BFGS's tolerances and iteration cap, the floating-point precision, the sampler's burn-in and thinning,
and against what (data or true model) the correlations are compared."""


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}" if value >= 1e-3 else f"{value:.2e}"


def _errors(row: dict, name: str) -> tuple[float | None, float | None]:
    result = row["learners"].get(name)
    return (None, None) if result is None else (result["coupling_errors"]["pairs"], result["seconds"])


def ablation_table(rows: dict) -> list[str]:
    """The ablation's markdown table: per row MPF's and PL's ε_J, their ratio beside the thesis's, each ÷ the thesis's
    value, and their seconds."""
    thesis_mpf, thesis_pl = THESIS_TABLE["MPF"][0], THESIS_TABLE["pseudo-likelihood"][0]
    lines = [f"| row | change from the baseline | MPF ε_J | PL ε_J | MPF ÷ PL (thesis {thesis_mpf / thesis_pl:.2f}) | MPF ÷ thesis's | "
             "PL ÷ thesis's | MPF s (epochs) | PL s (epochs) |", "|---|---|---|---|---|---|---|---|---|"]
    for row in ROWS:
        if row.key not in rows or "MPF" not in rows[row.key]["learners"]:
            continue
        record = rows[row.key]
        (mpf, mpf_seconds), (pl, pl_seconds) = _errors(record, "MPF"), _errors(record, "pseudo-likelihood")
        cells = [f"`{row.key}`", record["change"], _number(mpf), _number(pl), "—" if pl is None else f"{mpf / pl:.2f}",
                 f"{mpf / thesis_mpf:.2f}", "—" if pl is None else f"{pl / thesis_pl:.2f}"]
        for name, seconds in (("MPF", mpf_seconds), ("pseudo-likelihood", pl_seconds)):
            result = record["learners"].get(name)
            cells.append("—" if result is None else f"{seconds:.0f} ({result['epochs']})")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def conventions_table(rows: dict) -> list[str]:
    """MPF's and PL's ε_J in every convention (module docstring of :mod:`pfzoo.studies.ising_ablation`) for every refit row."""
    thesis_mpf, thesis_pl = THESIS_TABLE["MPF"][0], THESIS_TABLE["pseudo-likelihood"][0]
    lines = ["| row | pairs, our J: MPF / PL | edges, our J | pairs, J' (÷ 4) | all D² entries of J' | thesis |",
             "|---|---|---|---|---|---|"]
    for row in ROWS:
        record = rows.get(row.key)
        if row.fit is None or record is None or not {"MPF", "pseudo-likelihood"} <= record["learners"].keys():
            continue
        mpf, pl = (record["learners"][name]["coupling_errors"] for name in ("MPF", "pseudo-likelihood"))
        cells = [f"{_number(mpf[convention])} / {_number(pl[convention])}" for convention in ("pairs", "edges", "thesis_pairs", "thesis_matrix")]
        lines.append(f"| `{row.key}` | " + " | ".join(cells) + f" | {thesis_mpf} / {thesis_pl} |")
    return lines


def sgd_table(rows: dict) -> list[str]:
    """CD-1 and PT-SML's ε_J and seconds in the rows that fit them, beside the thesis's CD-1."""
    lines = ["| row | learner | ε_J | ε_J ÷ 4 (J' units) | thesis ε_J | seconds (epochs) |", "|---|---|---|---|---|---|"]
    for key in ("sgd_learners", "cd_thesis_schedule", "strong_cd_thesis_schedule"):
        for name, result in rows.get(key, {}).get("learners", {}).items():
            error = result["coupling_errors"]["pairs"]
            thesis = THESIS_TABLE.get(name, (None,))[0]
            lines.append(f"| `{key}` | {name} | {error:.4f} | {error / 4:.4f} | {_number(thesis)} | {result['seconds']:.0f} ({result['epochs']}) |")
    return lines


def correlation_table(record: dict, baseline_std: float) -> list[str]:
    """ε_corr of the baseline's learners and the SGD learners in each convention, beside the thesis's column, with what
    separates couplings from biases: the field error, ε_corr with the true zero field, the samples' mean |⟨s_i⟩|."""
    rows = record["rows"]
    learners = {**rows.get("baseline", {}).get("learners", {}), **rows.get("sgd_learners", {}).get("learners", {}),
                **{f"{name} (thesis's schedule)": result for name, result in rows.get("cd_thesis_schedule", {}).get("learners", {}).items()},
                **{f"{name} (thesis's schedule, σ = 2√10 glass)": result
                   for name, result in rows.get("strong_cd_thesis_schedule", {}).get("learners", {}).items()}}
    truth = record["truth"].get(repr(baseline_std))
    lines = ["| learner | thesis ε_corr | ε_corr ⟨x_i x_j⟩ (ours) | ⟨s_i s_j⟩ | covariances | ε_J | field error | "
             "ε_corr ⟨x_i x_j⟩, own J with zero field | mean \\|⟨s_i⟩\\| of its samples |", "|---|---|---|---|---|---|---|---|---|"]
    entries = list(learners.items()) + ([("true glass (sampling floor)", truth)] if truth else [])
    for name, result in entries:
        corr, zero = result["correlation_errors"], result["zero_field_correlation_errors"]
        thesis = THESIS_TABLE.get(name.split(" (")[0], (None, None))[1]
        lines.append(f"| {name} | {_number(thesis)} | {_number(corr['moments'])} | {_number(corr['spin_moments'])} | "
                     f"{_number(corr['covariances'])} | {_number(result['coupling_errors']['pairs'])} | {_number(result['field_error'])} | "
                     f"{_number(zero['moments'])} | {result['mean_abs_magnetisation']:.3f} |")
    return lines


def verdict(rows: dict) -> list[str]:
    """Sentences the numbers give: which single-change rows put MPF ahead of PL, and which moves MPF ÷ PL most."""
    baseline = rows.get("baseline")
    if baseline is None:
        return []
    ratio = _errors(baseline, "MPF")[0] / _errors(baseline, "pseudo-likelihood")[0]
    moved = []
    for row in ROWS:
        record = rows.get(row.key)
        if row.key == "baseline" or record is None or "pseudo-likelihood" not in record["learners"] or "MPF" not in record["learners"]:
            continue
        moved.append((_errors(record, "MPF")[0] / _errors(record, "pseudo-likelihood")[0], row.key))
    ahead = [f"`{key}` ({value:.2f})" for value, key in moved if value < 1]
    best = min(moved) if moved else None
    lines = [f"MPF ÷ PL in the baseline: {ratio:.2f} (thesis {THESIS_TABLE['MPF'][0] / THESIS_TABLE['pseudo-likelihood'][0]:.2f}). "
             + (f"Rows that put MPF ahead of PL: {', '.join(ahead)}. " if ahead else "No row puts MPF ahead of PL. ")
             + (f"The row that moves MPF ÷ PL furthest toward the thesis's: `{best[1]}` ({best[0]:.2f})." if best else "")]
    mpf, pl = baseline["learners"]["MPF"], baseline["learners"]["pseudo-likelihood"]
    lines.append(f"In the baseline MPF errs more than PL both on the lattice's edges (mean square {mpf['coupling_errors']['edges']:.4f} "
                 f"against {pl['coupling_errors']['edges']:.4f}) and on the other pairs, true 0, which the fully connected fit "
                 f"must learn to leave at 0 ({non_edges(mpf):.4f} against {non_edges(pl):.4f}).")
    nearest = min(((abs(math.log(result["coupling_errors"][convention] / THESIS_TABLE["MPF"][0])), key, convention)
                   for key, record in rows.items() if key in FIT_ROWS and "MPF" in record["learners"] and "pseudo-likelihood" in record["learners"]
                   for result in [record["learners"]["MPF"]] for convention in result["coupling_errors"]), default=None)
    if nearest is not None:
        _, key, convention = nearest
        mpf, pl = (rows[key]["learners"][name]["coupling_errors"][convention] for name in ("MPF", "pseudo-likelihood"))
        lines.append(f"MPF's ε_J comes nearest the thesis's {THESIS_TABLE['MPF'][0]} in row `{key}` read as `{convention}`: {mpf:.4f}, "
                     f"where PL's is {pl:.4f} (thesis {THESIS_TABLE['pseudo-likelihood'][0]}).")
    return lines


def non_edges(result: dict, num_units: int = 100, num_edges: int = 200) -> float:
    """Mean square coupling error over the pairs that are not lattice edges (true coupling 0), from the means over all
    pairs and over the edges of a ``num_units`` glass with ``num_edges`` edges."""
    pairs = num_units * (num_units - 1) // 2
    errors = result["coupling_errors"]
    return (errors["pairs"] * pairs - errors["edges"] * num_edges) / (pairs - num_edges)


def pt_sentences(record: dict) -> list[str]:
    """What separates PT-SML's ε_corr from MPF's at a similar ε_J, from the measured fields and zero-field samples."""
    mpf = record["rows"].get("baseline", {}).get("learners", {}).get("MPF")
    pt = record["rows"].get("sgd_learners", {}).get("learners", {}).get("PT-SML")
    if mpf is None or pt is None:
        return []
    corr = lambda result, key="correlation_errors": result[key]["moments"]  # noqa: E731
    gap, zero_gap = corr(pt) / corr(mpf), corr(pt, "zero_field_correlation_errors") / corr(mpf, "zero_field_correlation_errors")
    edges = pt["coupling_errors"]["edges"] / mpf["coupling_errors"]["edges"]
    cause = (("so the biases carry most of the gap, and ε_J, which reads no bias, cannot see it" if zero_gap < 0.2 * gap else
              "so the couplings carry most of the gap") +
             f"; what is left comes from the lattice's edges, where PT-SML's couplings err {edges:.1f}× more than MPF's "
             f"(mean square {pt['coupling_errors']['edges']:.3f} against {mpf['coupling_errors']['edges']:.3f}), while over the "
             f"other pairs (true 0) its error is {non_edges(pt):.4f} against MPF's {non_edges(mpf):.4f}: ε_J's mean over all "
             "pairs dilutes the edges' error with the zero pairs'")
    return [f"PT-SML's ε_corr is {gap:.0f}× MPF's ({corr(pt):.2e} against {corr(mpf):.2e}) at ε_J "
            f"{pt['coupling_errors']['pairs']:.4f} against {mpf['coupling_errors']['pairs']:.4f}; its spin fields are "
            f"{pt['field_error'] / mpf['field_error']:.1f}× further from the truth's 0 (mean square {pt['field_error']:.3g} against "
            f"{mpf['field_error']:.3g}) and its samples' mean |⟨s_i⟩| is {pt['mean_abs_magnetisation']:.3f} against "
            f"{mpf['mean_abs_magnetisation']:.3f}. With its own couplings and the zero field, its ε_corr is "
            f"{corr(pt, 'zero_field_correlation_errors'):.2e} ({zero_gap:.1f}× MPF's, likewise treated), {cause}."]


def cost_table(record: dict) -> list[str]:
    """L-BFGS evaluations per row and learner times the CPU seconds of one evaluation: each run's CPU time on an idle core."""
    costs = record.get("costs")
    if not costs:
        return []
    each = costs["evaluation_cpu_seconds"]
    lines = [f"CPU seconds of one evaluation of the loss and its gradient on 20,000 states (uniform 0/1 states: the dense "
             "objectives cost the same on any; float64, 100 units, measured by "
             f"`{costs['command']}` on {costs['date']}, process time): MPF {each['MPF']:.3f} s, pseudo-likelihood "
             f"{each['pseudo-likelihood']:.3f} s. Times the evaluations each run made (its L-BFGS state), the CPU time of each "
             "fit on an idle core (the seconds above are wall-clock on a loaded machine):", "",
             "| row | MPF evaluations | PL evaluations | MPF CPU s | PL CPU s | PL ÷ MPF (thesis ~800/~60 ≈ 13) |", "|---|---|---|---|---|---|"]
    for key, counts in costs["function_evaluations"].items():
        if {"MPF", "pseudo-likelihood"} <= counts.keys():
            mpf, pl = counts["MPF"] * each["MPF"], counts["pseudo-likelihood"] * each["pseudo-likelihood"]
            lines.append(f"| `{key}` | {counts['MPF']} | {counts['pseudo-likelihood']} | {mpf:.0f} | {pl:.0f} | {pl / mpf:.2f} |")
    largest = costs.get("largest_coupling", {})
    if largest:
        lines += ["", "Largest learned |J_ij| at the end of each fit (from its checkpoint) against the true glass's largest: " + "; ".join(
            f"`{key}` " + ", ".join(f"{name} {learned:.1f}" for name, (learned, _) in entries.items())
            + f" (truth {next(iter(entries.values()))[1]:.1f})" for key, entries in largest.items()) + "."]
    return lines + [""]


def render(record: dict, baseline_std: float) -> str:
    """The README's markdown from results.json's ``record``; ``baseline_std`` is the baseline glass's σ (its truth floors)."""
    lines = ["# Thesis Table 3.1, one setting at a time (10×10 spin glass, σ² = 10)", ""]
    if "command" in record:
        lines += [f"Made by `{record['command']}` on {record['date']} ({record['machine']}, {record['threads']} threads, load average "
                  f"{record['load_average']}); rows kept from earlier runs of the same command are as they were measured.", ""]
    for merged in record.get("merged", []):
        lines += [f"Rows {', '.join(f'`{key}`' for key in merged['rows'])}: made by `{merged['command']}` on {merged['date']} "
                  f"(load average {merged['load_average']}), merged with `--merge`.", ""]
    lines += [THESIS_SETTINGS, "",
              "Baseline: reports/ising/sigma10's protocol (σ = √10 on our pair coupling J of E = −½ xᵀJx − b·x, J = −2J'), refitted "
              "here on 20,000 Swendsen–Wang states drawn as that run drew them (same sampler, settings and seed 1): every learner fits all 4,950 couplings from J = 0 and the "
              "base-rate biases, float64 L-BFGS (5 iterations an epoch, history 20, strong Wolfe) until an epoch changes the loss "
              "by at most 1e-10 · max(1, |loss|), at most 400 epochs. Each row changes one thing; rows `thesis_pairs` to "
              "`best_on_path` re-read the baseline's fit (another error convention, another stopping point of the same path: "
              "no training); `thesis_protocol` changes two (lattice-only fit and the J'-variance reading of σ²). ε_J: mean "
              "square over all pairs i < j of our J unless the row says otherwise; seconds: training only, one thread, wall-clock on a "
              "shared machine (the load averages above), so compare the CPU seconds of the cost table below instead.", ""]
    lines += ablation_table(record["rows"]) + [""]
    lines += ["Every refit row's ε_J in each reading of the thesis's \"mean square error in recovered coupling strengths\":", ""]
    lines += conventions_table(record["rows"]) + [""]
    lines += cost_table(record)
    lines += ["CD-1 and PT-SML (the thesis's CD rows ran ~20,000 s; ours run in seconds):", ""] + sgd_table(record["rows"]) + [""]
    lines += ["## ε_corr beside the thesis's column", "",
              "ε_corr of 20,000 block-Gibbs samples of each learned model (1,000 chains, burn-in 1,000 sweeps, thinning 10) against "
              "the training states, mean square over pairs i < j, in three readings of \"pairwise correlations\"; the field "
              "error is the mean square error of the spin fields h = J𝟙/4 + b/2 (the true glass's are 0), which ε_J never sees.",
              ""] + correlation_table(record, baseline_std) + [""]
    lines += pt_sentences(record) + [""]
    lines += ["## What the numbers say", ""] + [line + "\n" for line in verdict(record["rows"])]
    missing = [row for row in ROWS if row.key not in record["rows"]]
    if missing:
        lines += ["Rows not run yet: " + "; ".join(f"`{row.key}` ({row.change})" for row in missing) + ".", ""]
    return "\n".join(lines)
