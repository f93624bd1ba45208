"""README.md and the Fig. 5-style plot of the analysis models' size sweep (:mod:`~pfzoo.studies.model_comparison.sizes`),
rendered from what its results.json holds alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pfzoo.studies.model_comparison.row_recorder import exact_check, total_stderr, warning_text
from pfzoo.studies.model_comparison.sizes import FAMILIES, PAPER_FIG5, PAPER_TABLE1, best_rows

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _value(row: dict) -> str:
    return f"{row['evaluation']['mean']:.2f} ± {total_stderr(row['evaluation']):.2f}"


def _sweep_table(rows: list[dict]) -> list[str]:
    lines = ["| model | size | parameters | train patches | training | train s | log Ẑ ± stderr (ESS) | test log-likelihood ± stderr "
             "| train log-likelihood | train − test | notes |",
             "|---|---:|---:|---:|---|---:|---|---:|---:|---:|---|"]
    for r in rows:
        if r.get("failed"):
            lines.append(f"| {r['label']} | {r['size']} | {r['parameters']:,} | {r['num_train']:,} | {r['train_method']} | — | — | failed: {r['failed']} | — | — | |")
            continue
        e = r["evaluation"]
        lines.append(f"| {r['label']} | {r['size']} | {r['parameters']:,} | {r['num_train']:,} | {r['train_method']} | {r['train_seconds']:.0f} | "
                     f"{e['log_z']:.3f} ± {e['log_z_stderr']:.3f} ({e['ess']:.0f} of {e['chains']}) | {_value(r)} | {r['train_mean']:.2f} | "
                     f"{r['train_mean'] - e['mean']:+.2f} | {'; '.join(filter(None, (r.get('notes', ''), warning_text(e))))} |")
    return lines


def _convergence_table(rows: list[dict]) -> list[str]:
    ok = [r for r in rows if not r.get("failed")]
    steps = sorted({c["num_steps"] for r in ok for c in r["evaluation"]["convergence"]})
    lines = ["| model | " + " | ".join(f"N = {n:,}" for n in steps) + " | last two N differ by |", "|---|" + "---:|" * (len(steps) + 1)]
    for r in ok:
        by_n = {c["num_steps"]: c for c in r["evaluation"]["convergence"]}
        cells = [f"{by_n[n]['mean']:.3f} ± {by_n[n]['stderr']:.3f}" if n in by_n else "—" for n in steps]
        conv = r["evaluation"]["convergence"]
        lines.append(f"| {r['label']} | " + " | ".join(cells) + f" | {conv[-1]['mean'] - conv[-2]['mean']:+.3f} |")
    return lines


def paired_drop(after: dict, peak: dict) -> tuple[float, float]:
    """``after`` − ``peak`` on the common test subset (paired per patch) and its stderr: the patches' spread of the
    differences and the two log Ẑ stderrs in quadrature."""
    diffs = [a - b for a, b in zip(after["subset_per_example"], peak["subset_per_example"])]
    mean = sum(diffs) / len(diffs)
    spread = sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1) / len(diffs)
    return mean, (spread + after["evaluation"]["log_z_stderr"] ** 2 + peak["evaluation"]["log_z_stderr"] ** 2) ** 0.5


def curve_text(rows: list[dict], family: str) -> str:
    """The measured shape of one family's curve: its values by size, where it peaks, the change from the peak to the
    largest size (paired on the common test subset, :func:`paired_drop`), whether that is overfitting (a drop by more
    than 2 stderr while the train − test gap grows by more than half the drop; a drop the training patches share is a
    worse fit, not overfitting) and the train − test gap at the smallest and largest size."""
    ok = sorted((r for r in rows if r["family"] == family and not r.get("failed")), key=lambda r: r["size"])
    if not ok:
        return "every size failed."
    values = ", ".join(f"{r['size']}: {_value(r)}" for r in ok)
    peak = max(ok, key=lambda r: r["evaluation"]["mean"])
    last = ok[-1]
    text = f"{values}; best at {peak['size']}"
    if last is not peak:
        drop, stderr = paired_drop(last, peak)
        text += f", then {drop:+.2f} ± {stderr:.2f} at {last['size']} (paired, {len(last['subset_per_example'])} test patches): "
        if drop >= -2 * stderr:
            text += "no significant drop, so no overfitting measured"
        elif _gap(last) - _gap(peak) > -drop / 2:  # the training patches held up while the test patches fell
            text += "it overfits"
        else:
            text += (f"not overfitting: its training patches fall too ({peak['train_mean']:.2f} → {last['train_mean']:.2f}), "
                     "so the larger model is fitted worse")
    else:
        text += " (the largest size run): no overfitting within this range"
    gaps = f"{_gap(ok[0]):+.2f} at {ok[0]['size']}"
    if len(ok) > 1:
        gaps += f" to {_gap(last):+.2f} at {last['size']}"
    return text + f"; train − test gap {gaps}."


def _gap(row: dict) -> float:
    """A row's train − test log-likelihood gap (nats per patch)."""
    return row["train_mean"] - row["evaluation"]["mean"]


def ablation_lines(rows: list[dict], ablation: list[dict]) -> list[str]:
    """Each ablation row against the main sweep's row of the same family and size: the test change (paired,
    :func:`paired_drop`) and both train − test gaps."""
    lines = []
    for a in (a for a in ablation if not a.get("failed")):
        main = next((r for r in rows if r["family"] == a["family"] and r["size"] == a["size"] and not r.get("failed")), None)
        if main is not None:
            change, stderr = paired_drop(a, main)
            lines.append(f"{a['label']}: test {_value(a)} against {_value(main)} with {main['num_train']:,} patches "
                         f"({change:+.2f} ± {stderr:.2f} paired on {len(a['subset_per_example'])} test patches); train − test gap "
                         f"{a['train_mean'] - a['evaluation']['mean']:+.2f} against {main['train_mean'] - main['evaluation']['mean']:+.2f}.")
    return lines


def _resumed(meta: dict) -> list[dict]:
    """The metas of the runs a resumed run continued, latest first (``meta.resumed_from``, nested)."""
    chain = []
    while meta.get("resumed_from"):
        meta = meta["resumed_from"]
        chain.append(meta)
    return chain


def readme(payload: dict) -> str:
    """The report: the sweep, the convergence of each log Ẑ, Table 1 at the best sizes beside the paper's, the
    differences from §5.3's description and the ablation."""
    meta, rows, ablation = payload["meta"], payload["rows"], payload.get("ablation", [])
    s = meta["settings"]
    out = ["# Model size (Sohl-Dickstein & Culpepper 2011, Fig. 5 and Table 1's sizes) on van Hateren patches", "",
           f"Measured on {meta['date']} on {meta['machine']}, {meta['torch_threads']} torch thread, torch {meta['torch_version']}, pfzoo "
           f"{meta['pfzoo_version']}, in {meta['total_seconds'] / 60:.0f} min. Generated by `{meta['command']}`"
           + "".join(f", resuming the rows of `{m['command']}` ({m['total_seconds'] / 60:.0f} min, {m['date']})" for m in _resumed(meta))
           + "; raw numbers in `results.json`. "
           f"Data: {meta['data']}", "",
           "Every model is an analysis model with no closed-form log Z above 36 experts: its test log-likelihood is mean(−E(x)) − log Ẑ with log Ẑ "
           f"from HAIS started at N(0, I) ({s['logz_chains']} chains, N = {s['logz_steps']:,}; ε and the schedule chosen per model by a pilot of "
           f"{s['pilot_chains']} chains at N = {s['pilot_logz_steps']:,}, largest log Ẑ wins). log Ẑ is a stochastic lower bound on log Z, so each "
           "log-likelihood is biased upward by the bound's slack. ± is the log Ẑ stderr and the test-sampling stderr "
           f"(sd / √{meta['num_test']:,}) in quadrature. The train log-likelihood uses the same log Ẑ on every training patch; train − test is "
           "the overfitting the paper's Student-t curve shows. The POEs are trained the paper's way, MPF with HMC connectivity and full-batch "
           "L-BFGS (conf/experiment/models_poe_*_mpf_lbfgs.yaml), with the L-BFGS step capped at 5 iterations per epoch: the recipes' comments give "
           "the measurements behind the cap (20 iterations per epoch left the complete models far below exact ML). A Student-t expert whose filter "
           "shrinks to zero contributes nothing (λ log(1 + (φ·x)²) → 0), so the notes column's median filter norm shows how many experts a "
           "model uses.", "",
           "## Fig. 5: test log-likelihood against model size", "", "![test log-likelihood against size](sizes.png)", "", *_sweep_table(rows), "",
           "Complete (L = 36) POEs have an exact log Z; their HAIS value against the exact one checks the estimator:", ""]
    for r in (r for r in rows if r.get("exact_check")):
        c = exact_check(r["exact_check"]["hais"], r["exact_check"]["exact"], r["exact_check"]["log_z_stderr"])
        out.append(f"- {r['label']}: HAIS {c['hais']:.3f}, exact {c['exact']:.3f}, error {c['error']:+.3f} (log Ẑ stderr {c['log_z_stderr']:.3f}, "
                   f"{c['stderrs']:.1f} stderr)" + (f": **{c['warning']}**." if c["warning"] else "."))
    out += ["", "## Convergence of log Ẑ against N", "",
            "The test log-likelihood with log Ẑ from the same chains and setting at fewer intermediate distributions; the last column is the table's run.", "",
            *_convergence_table(rows), "", "## Table 1 at the best size per family", "",
            "As the paper: \"for both POE models and the mcRBM they were chosen from the best performing datapoints in Figure 5\". The other rows of "
            "Table 1 are in [../README.md](../README.md) (the paper's linear models are not swept; the bilinear model's curve, trained by "
            "EM-HMC, is in [../bilinear/README.md](../bilinear/README.md#5-fig-5s-bilinear-curve-log-likelihood-against-the-number-of-latents)).", "",
            "Our patches come from one image, the paper's from 4,112, so the levels differ; the gain over the Gaussian (exact, fitted here on the "
            "same training patches) is the comparable quantity.", "",
            "| model | paper size | paper | paper − Gaussian | our best size | ours | ours − Gaussian | ours at the paper's size |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    best, g = best_rows(rows), payload.get("gaussian")
    paper_g = PAPER_TABLE1["gaussian"][2]
    if g:
        out.append(f"| {PAPER_TABLE1['gaussian'][0]} (exact) | 36 | {paper_g:.2f} ± {PAPER_TABLE1['gaussian'][3]:.2f} | 0 | — | "
                   f"{g['mean']:.2f} ± {g['stderr']:.2f} | 0 | — |")
    for key, (name, size, value, pm) in PAPER_TABLE1.items():
        if key not in FAMILIES:
            continue
        at_paper = next((r for r in rows if r["family"] == key and r["size"] == size and not r.get("failed")), None)
        mine = best.get(key)
        gain = f"{mine['evaluation']['mean'] - g['mean']:+.2f}" if mine and g else "—"
        out.append(f"| {name} | {size} | {value:.2f} ± {pm:.2f} | {value - paper_g:+.2f} | {mine['size'] if mine else '—'} | "
                   f"{_value(mine) if mine else 'not run'} | {gain} | {_value(at_paper) if at_paper else 'not run'} |")
    if "laplace" in best and "student-t" in best:
        gap, stderr = paired_drop(best["student-t"], best["laplace"])
        out += ["", f"Student-t POE − Laplace POE at their best sizes: the paper {PAPER_TABLE1['student-t'][2] - PAPER_TABLE1['laplace'][2]:+.2f} "
                f"(\"more than 7 nats\"), ours {gap:+.2f} ± {stderr:.2f} (paired on {len(best['laplace']['subset_per_example'])} test patches)."]
    if g:
        out += ["", f"The Gaussian's own train − test gap is {g['train_mean'] - g['mean']:+.2f} nats: train and test patches come from disjoint "
                "blocks of the image, so part of every model's train − test gap is that shift, not overfitting."]
    out += ["", "## Against §5.3's description of Fig. 5", ""]
    out += [f"- {FAMILIES[f][1]}: the paper: {PAPER_FIG5[f]}. Ours: {curve_text(rows, f)}" if any(r["family"] == f for r in rows)
            else f"- {FAMILIES[f][1]}: the paper: {PAPER_FIG5[f]}. Not measured in this run (the main table's mcRBM, 72 units, is in ../README.md)."
            for f in FAMILIES]
    if ablation:
        out += ["", "## Ablation: training-set size", "",
                "The paper trains on 10,000 patches of 4,112 images, we on 20,000 of one image: the same models retrained on the first "
                f"{ablation[0]['num_train']:,} of our training patches (same test patches, same recipe and evaluation):", "", *_sweep_table(ablation), ""]
        out += [f"- {line}" for line in ablation_lines(rows, ablation)]
    out += ["", "## Timing", "", "This run (a resumed run's earlier part is in `results.json` under `meta.resumed_from`): "
            f"training {meta['training_seconds']:.0f} s, pilots {meta['pilot_seconds']:.0f} s, evaluation {meta['evaluation_seconds']:.0f} s, "
            f"convergence runs {meta.get('convergence_seconds', 0):.0f} s; load average "
            f"{meta['load_average']['start']} at the start, {meta['load_average']['end']} at the end (the machine was shared).", ""]
    return "\n".join(out)


def sizes_figure(payload: dict) -> Figure:
    """Fig. 5: test log-likelihood against the number of experts or units, one line per family, with error bars (and the
    ablation's points as open markers); the caller saves and closes it."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for i, family in enumerate(FAMILIES):
        for rows, open_marker in ((payload["rows"], False), (payload.get("ablation", []), True)):
            ok = sorted((r for r in rows if r["family"] == family and not r.get("failed")), key=lambda r: r["size"])
            if ok:
                ax.errorbar([r["size"] for r in ok], [r["evaluation"]["mean"] for r in ok], yerr=[total_stderr(r["evaluation"]) for r in ok],
                            marker="o", capsize=3, color=f"C{i}", linestyle=":" if open_marker else "-", mfc="white" if open_marker else None,
                            label=f"{FAMILIES[family][1]}" + (f" ({ok[0]['num_train']:,} training patches)" if open_marker else ""))
    if payload.get("gaussian"):
        ax.axhline(payload["gaussian"]["mean"], color="k", linestyle="--", linewidth=1, label="Gaussian (exact)")
    ax.set_xscale("log", base=2)
    sizes = sorted({r["size"] for r in payload["rows"]})
    ax.set_xticks(sizes, [str(v) for v in sizes])
    ax.set_xlabel("number of experts (POE) / mean + covariance units (mcRBM)")
    ax.set_ylabel("test log-likelihood (nats per patch)")
    ax.set_title(f"Analysis models against size ({payload['meta']['num_test']:,} van Hateren test patches)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig
