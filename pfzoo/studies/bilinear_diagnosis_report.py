"""README of the bilinear diagnosis (reports/models/vanhateren/bilinear) from its results.json: the HAIS N-sweep, the
bidirectional bounds, the model's moments against the data's, the training ablation, and the cause they name."""

from __future__ import annotations

from statistics import NormalDist

GEWEKE_ALPHA = 1e-3
"""False-failure rate of the E-step's Geweke test; each statistic's |z| is held to the Bonferroni threshold for it."""

CONVERGED_NATS = 0.5
"""Largest rise of the mean lower bound between the sweep's last two N for which it counts as converged (issue 52)."""

PAPER = {"bilinear": -32.69, "gaussian": -49.15}
"""HAIS report Table 1 (nats per patch): the bilinear model and the linear Gaussian model."""

PAPER_SIZE = {"bilinear": 98}
"""HAIS report Table 1's size of the bilinear row (its auxiliary variables)."""

NUM_CONTENT = 36
"""Content latents Lc of every model here: the comparison's complete K = Lc = 36 on 36 whitened PCA components."""

RECIPE_NUM_STYLE = 8
"""Style latents Ld of the comparison's recipe (conf/model/bilinear.yaml)."""


def _pm(value: float, stderr: float) -> str:
    return f"{value:.2f} ± {stderr:.2f}"


def convergence_verdict(sweep: list[dict]) -> tuple[bool, float]:
    """Whether the sweep's last two means differ by at most :data:`CONVERGED_NATS`, and their difference."""
    rise = sweep[-1]["mean"] - sweep[-2]["mean"]
    return abs(rise) <= CONVERGED_NATS, rise


def _sweep_section(measured: dict) -> list[str]:
    first = next(iter(measured.values()))
    s = first["setting"]
    step = f"ε = {s['step_size']:g} / √(1 + {s['stiffness']:g} β), {s['schedule']} β from 10⁻³"
    names = list(measured)
    out = ["## 1. Does HAIS converge on the test patches?", "",
           f"Per-example HAIS (the comparison's pilot choice for the bilinear row: {step}; one leapfrog step per distribution), "
           f"{first['particles']} particles on each of the first {first['patches']} patches of the comparison's common test subset, the "
           "same patches at every N. Each cell: the mean lower bound on log p(x) ± HAIS's stderr (acceptance in the last 10 % of β).", "",
           "| N | " + " | ".join(f"`{n}`" for n in names) + " |", "|---:|" + "---:|" * len(names)]
    steps = sorted({r["num_steps"] for m in measured.values() for r in m["sweep"]})
    for n in steps:
        cells = []
        for m in measured.values():
            r = next((r for r in m["sweep"] if r["num_steps"] == n), None)
            cells.append("—" if r is None else f"{_pm(r['mean'], r['stderr'])} ({r['acceptance_last_10pct']:.2f})")
        out.append(f"| {n:,} | " + " | ".join(cells) + " |")
    out.append("")
    for name, m in measured.items():
        converged, rise = convergence_verdict(m["sweep"])
        last, before = m["sweep"][-1]["num_steps"], m["sweep"][-2]["num_steps"]
        out.append(f"- `{name}`: from N = {before:,} to {last:,} the bound moves by {rise:+.3f} nats: "
                   + ("converged within 0.5 nat." if converged else "**not converged** (more than 0.5 nat)."))
    return out + [""]


def _bdmc_section(measured: dict) -> list[str]:
    first = next(iter(measured.values()))
    out = ["## 2. Is HAIS tight on these models? Bidirectional Monte Carlo", "",
           f"{first['patches']} patches simulated from each model with the latents that made them (an exact posterior draw each); forward "
           "HAIS from the prior gives a stochastic lower bound on their mean log p(x), reverse HAIS from that draw a stochastic upper bound "
           f"(Grosse et al. 2015; `pfzoo.estimators.Sandwich`), {first['particles'] // 5} chains per direction, the kernel and schedule above.", "",
           "| model | N | lower | upper | gap | seconds |", "|---|---:|---:|---:|---:|---:|"]
    for name, m in measured.items():
        out += [f"| `{name}` | {r['num_steps']:,} | {_pm(r['lower'], r['lower_stderr'])} | {_pm(r['upper'], r['upper_stderr'])} | "
                f"{_pm(r['gap'], r['gap_stderr'])} | {r['seconds']:.0f} |" for r in m["bdmc"]]
    out.append("")
    for name, m in measured.items():
        own, test = m["bdmc"][-1], m["sweep"][-1]
        out.append(f"- `{name}`: at N = {own['num_steps']:,} the model's own patches get between {own['lower']:.2f} and {own['upper']:.2f}; "
                   f"the test patches get {test['mean']:.2f} (a lower bound, N = {test['num_steps']:,}), {own['lower'] - test['mean']:.1f} nats less.")
    return out + [""]


def _moments_section(measured: dict) -> list[str]:
    out = ["## 3. Does each model describe the data's second and fourth moments?", "",
           "Covariance eigenvalues of the 5,000 test patches and of 20,000 samples of each model (whitened data: about 1), the mean "
           "excess kurtosis of the 36 coordinates (0 for a Gaussian), and the exact log-likelihood that a Gaussian fitted to the test "
           "patches gives each set.", "",
           "| | eigenvalues min / median / max | excess kurtosis | under the data's Gaussian |", "|---|---|---:|---:|"]

    def eig(values: list[float]) -> str:
        return f"{values[0]:.3f} / {values[len(values) // 2]:.3f} / {values[-1]:.3f}"

    first = next(iter(measured.values()))["moments"]
    out.append(f"| test patches | {eig(first['data_covariance_eigenvalues'])} | {first['data_excess_kurtosis']:.2f} | {first['data_gaussian_on_data']:.2f} |")
    for name, m in measured.items():
        mo = m["moments"]
        out.append(f"| `{name}` samples | {eig(mo['model_covariance_eigenvalues'])} | {mo['model_excess_kurtosis']:.2f} | "
                   f"{mo['data_gaussian_on_model_samples']:.2f} |")
    return out + [""]


def _references(references: dict, num_patches: int) -> list[str]:
    def kind(text: str) -> str:
        return "exact" if text == "exact" else "biased upward" if "upward" in text else "a lower bound" if "lower bound" in text else text

    rows = ", ".join(f"{r['label']} {r['mean']:.2f} ({kind(r['kind'])})" for r in references.values())
    return [f"The comparison's rows on the same {num_patches} patches (from its per-patch values): {rows}.", ""]


DATA_ROWS = (("gaussian", "Gaussian"), ("ica", "ICA"), ("sparse-coding", "sparse coding"), ("poe-student-t", "Student-t POE"),
             ("mcrbm", "mcRBM"), ("bilinear", "bilinear"))
PAPER_TABLE = {"gaussian": -49.15, "sparse-coding": -42.85, "poe-student-t": -34.01, "mcrbm": -36.01, "bilinear": -32.69}
"""HAIS report Table 1 for the rows the comparisons share (its sparse coding is the Laplace linear generative model)."""


def _data_section(data: dict) -> list[str]:
    sources = {"vanhateren": "one van Hateren image", "embedded": "scikit-learn's two photos"}
    out = ["## 6. How much does the data decide?", "",
           "The same comparison on two patch sets (`scripts/reproduce_models.py`, `reports/models` and `reports/models/vanhateren`), "
           "beside the paper's 10,000 patches of 4,112 van Hateren images. Excess kurtosis: the mean over the 36 whitened coordinates of "
           "the test patches (0 for a Gaussian); the gains are over each data set's Gaussian row, in nats per patch.", "",
           "| data | excess kurtosis | " + " | ".join(label for _, label in DATA_ROWS) + " |", "|---|---:|" + "---:|" * len(DATA_ROWS)]
    for source, d in data.items():
        means = d["comparison"]
        out.append(f"| {sources.get(source, source)} | {d['excess_kurtosis']:.2f} | "
                   + " | ".join("—" if name not in means else f"{means[name]:.2f}" + ("" if name == "gaussian" else f" ({means[name] - means['gaussian']:+.1f})")
                                for name, _ in DATA_ROWS) + " |")
    out.append("| the paper (HAIS report Table 1) | — | " + " | ".join(
        "—" if name not in PAPER_TABLE else f"{PAPER_TABLE[name]:.2f}" + ("" if name == "gaussian" else f" ({PAPER_TABLE[name] - PAPER_TABLE['gaussian']:+.1f})")
        for name, _ in DATA_ROWS) + " |")
    return out + [""]


ONE_CHANGE = (
    ("baseline", "nobound-200", "no bound on the columns' norms (the recipe's 1.0 removed)"),
    ("baseline", "random-50", "50 epochs instead of 200"),
    ("baseline", "ica-200", "the start: ICA's basis (Θ = I, gains ≈ 1) instead of 0.17·N(0, 1) weights"),
    ("ica-0", "ica-50", "50 epochs of the recipe's EM-HMC from ICA's start"),
    ("ica-0", "ica-200", "200 epochs of the recipe's EM-HMC from ICA's start"),
    ("ica-200", "ica-200-lr3e-4", "Adam's lr 3e-4 instead of the recipe's 3e-3"),
    ("ica-50", "ica-50-hmc10", "10 HMC transitions of each minibatch's latents before its M-step instead of 2"),
    ("random-50", "random-50-hmc10", "10 HMC transitions of each minibatch's latents before its M-step instead of 2"),
)
"""(from, to, the one setting that differs): the ablation's comparisons, each shown where both rows were measured."""


def one_change_moves(rows: dict) -> list[tuple[str, str, str, float, float]]:
    """For each pair of :data:`ONE_CHANGE` with both rows measured: (from, to, change, to − from, its stderr)."""
    moves = []
    for before, after, change in ONE_CHANGE:
        if before in rows and after in rows:
            a, b = rows[before]["estimate"], rows[after]["estimate"]
            moves.append((before, after, change, b["mean"] - a["mean"], (a["stderr"] ** 2 + b["stderr"] ** 2) ** 0.5))
    return moves


def _ablation_section(rows: dict) -> list[str]:
    out = ["## 4. Training ablation: one setting changed at a time", "",
           "Each model trained by the comparison's EM-HMC recipe (`+experiment=models_bilinear`) with one setting changed, evaluated by "
           "the same HAIS on the same patches.", "",
           "| model | start | epochs | overrides | Ld | final complete-data loss | HAIS N | mean log p̂(x) | train s |",
           "|---|---|---:|---|---:|---:|---:|---:|---:|"]
    for name, r in rows.items():
        t, e = r["training"], r["estimate"]
        loss = "—" if t["final_loss"] is None else f"{t['final_loss']:.2f}"
        out.append(f"| {name} | {t['start']} | {t['epochs']} | {', '.join(t['overrides']) or '—'} | {_num_style(r)} | {loss} | {e['num_steps']:,} | "
                   f"{_pm(e['mean'], e['stderr'])} | {t['wall_seconds']:.0f} |")
    out += ["", "One setting at a time (HAIS's estimator stderrs in quadrature; the patches are the same, so the test-sampling error cancels):", ""]
    out += [f"- `{before}` → `{after}`, {change}: {move:+.2f} ± {stderr:.2f} nats." for before, after, change, move, stderr in one_change_moves(rows)]
    return out + [""]


def _num_style(row: dict) -> int:
    """The row's style latents Ld (rows trained before the size sweep have the recipe's 8)."""
    return row["training"].get("num_style", RECIPE_NUM_STYLE)


def size_curves(rows: dict) -> dict[tuple, list[tuple[int, str, dict]]]:
    """The ablation rows grouped by their training (start, epochs, overrides) where a group holds more than one size:
    group → [(latents Lc + Ld, row name, estimate)] by size. Lc is the complete content layer's 36."""
    groups: dict[tuple, list] = {}
    for name, r in rows.items():
        t = r["training"]
        if t["epochs"]:
            groups.setdefault((t["start"], t["epochs"], tuple(t["overrides"])), []).append((NUM_CONTENT + _num_style(r), name, r["estimate"]))
    return {key: sorted(group) for key, group in groups.items() if len(group) > 1}


def _size_section(rows: dict, references: dict) -> list[str]:
    curves = size_curves(rows)
    if not curves:
        return []
    out = ["## 5. Fig. 5's bilinear curve: log-likelihood against the number of latents", "",
           f"The paper's Fig. 5 sweeps each model's number of auxiliary variables; for the bilinear model that is Lc + Ld latents "
           f"(Table 1's row has {PAPER_SIZE['bilinear']}). Here Lc = K = {NUM_CONTENT} (complete) and Ld, the style latents, is swept; "
           "each curve is one training of the ablation above at every Ld, each model evaluated as the ablation rows are (same patches, "
           "same HAIS).", ""]
    for (start, epochs, overrides), points in curves.items():
        label = f"{start} start, {epochs} epochs" + (f", {', '.join(overrides)}" if overrides else " (the recipe's settings)")
        out.append(f"- {label}: " + "; ".join(f"{latents} latents ({name}) {_pm(e['mean'], e['stderr'])}" for latents, name, e in points))
    best_reference = max(((r["mean"], r["label"]) for r in references.values() if "bilinear" not in r["label"].lower()), default=None)
    if best_reference is not None:
        best = max((e["mean"], latents) for points in curves.values() for latents, _, e in points)
        out += ["", f"The best bilinear model here scores {best[0]:.2f} at {best[1]} latents; the best other model of the comparison on "
                    f"the same patches, {best_reference[1]}, {best_reference[0]:.2f} (the paper: the bilinear model best, with few latents)."]
    return out + [""]


def _eigen_range(moments: dict) -> str:
    values = moments["model_covariance_eigenvalues"]
    return f"{values[0]:.2f}–{values[-1]:.2f}"


def _cause_section(payload: dict) -> list[str]:
    """The causes the measurements name, with their numbers (needs the baseline measured and its ablation rows)."""
    measured, rows, data = payload.get("measure", {}), payload.get("ablation", {}), payload.get("data", {})
    if "baseline" not in measured or not {"baseline", "ica-0", "ica-200"} <= set(rows):
        return []
    base = measured["baseline"]
    _, rise = convergence_verdict(base["sweep"])
    own = base["bdmc"][-1]
    mean = {name: r["estimate"]["mean"] for name, r in rows.items()}
    ica = payload.get("references", {}).get("ica", {}).get("mean")
    out = ["## What causes it", "",
           f"- **Not the estimator.** On `baseline` the bound moves by {rise:+.2f} nats from N = {base['sweep'][-2]['num_steps']:,} to "
           f"{base['sweep'][-1]['num_steps']:,}, and on the model's own patches forward and reverse HAIS agree to {own['gap']:.2f} ± "
           f"{own['gap_stderr']:.2f} nats at N = {own['num_steps']:,}: HAIS is converged and tight on this model.",
           ]
    for name, g in payload.get("geweke", {}).items():
        limit = NormalDist().inv_cdf(1 - GEWEKE_ALPHA / (2 * g["num_statistics"]))
        out.append(f"- **Not the E-step sampler.** Geweke's test of EM-HMC's E-step on `{name}` itself ({g['chains']:,} chains × "
                   f"{g['iterations']} E-steps of 10 leapfrog steps at the trained step {g['step_size']:.3f}, reflecting at d = 0): largest |z| "
                   f"{g['max_abs_z']:.2f} of {g['num_statistics']:,} joint moments against {limit:.2f} (false-failure rate {GEWEKE_ALPHA:g}): "
                   + ("the sampler leaves p(z | x) invariant." if g["max_abs_z"] < limit else "**the sampler fails**."))
    out += [
           f"- **The training (the main cause).** The recipe's EM-HMC from its random start ends with a model whose samples' covariance "
           f"eigenvalues are {_eigen_range(base['moments'])} where the whitened data's are 1: it spreads its mass over a small part of the "
           f"data's range, gives its own samples {own['lower']:.1f} nats and the test patches {base['sweep'][-1]['mean']:.1f}. Started from "
           f"ICA's basis, the same training ends {mean['ica-200'] - mean['baseline']:+.1f} nats higher. The untrained ICA start already "
           f"scores {mean['ica-0']:.2f}" + (f" (ICA itself: {ica:.2f})" if ica is not None else "") + f", and EM-HMC *lowers* it "
           f"({mean['ica-200'] - mean['ica-0']:+.2f} after 200 epochs)" + (
               f"; at lr 3e-4 by less ({mean['ica-200-lr3e-4'] - mean['ica-0']:+.2f})" if "ica-200-lr3e-4" in mean else "") + ".",
           ]
    if "ica-200-lr3e-4" in measured:
        out.append(f"  That model's samples, too, have shrunk (eigenvalues {_eigen_range(measured['ica-200-lr3e-4']['moments'])}): "
                   "the EM-HMC updates contract the model's spread, however they start.")
    if {"ica-50", "ica-50-hmc10"} <= set(mean):
        out.append(f"  Ten HMC transitions of each minibatch's latents before its M-step instead of two lower it further "
                   f"({mean['ica-50-hmc10'] - mean['ica-50']:+.2f} nats at 50 epochs from ICA's start), so latents lagging behind the parameters "
                   "are not the mechanism; which property of the stochastic EM updates contracts the spread is not measured here.")
    if {"vanhateren", "embedded"} <= set(data):
        vh, em = data["vanhateren"], data["embedded"]
        gain = {k: d["comparison"]["ica"] - d["comparison"]["gaussian"] for k, d in (("vh", vh), ("em", em))}
        out.append(f"- **The data sets the spread between the other models.** Our van Hateren patches (one image) have excess kurtosis "
                   f"{vh['excess_kurtosis']:.2f}, the embedded photos' {em['excess_kurtosis']:.2f}; ICA gains {gain['vh']:+.1f} nats over the "
                   f"Gaussian on the first and {gain['em']:+.1f} on the second, the paper's Laplace model {PAPER_TABLE['sparse-coding'] - PAPER_TABLE['gaussian']:+.1f} "
                   "on its 4,112 images. On the heavy-tailed photos the same bilinear recipe beats ICA and sparse coding, as the paper's bilinear "
                   "model beats its Laplace models.")
    return out + [""]


def readme(payload: dict) -> str:
    """The report's Markdown from the merged results.json ``payload``: ``measure`` (model name → its sweep, BDMC and moments),
    ``references``, ``ablation`` and ``data``."""
    measured = payload.get("measure") or {}
    out = ["# Why the bilinear model comes last on van Hateren (HAIS report Table 1)", "",
           f"The HAIS report puts the bilinear generative model first ({PAPER['bilinear']}, 16.5 nats above its linear Gaussian model's "
           f"{PAPER['gaussian']}); the comparison (`reports/models/vanhateren`) put it last, 15 nats below our Gaussian, with a per-example "
           "HAIS bound still rising at N = 12,000. This report measures which of the estimator, the training or the data causes that. "
           "`baseline` is the comparison's model (retrained by the same code and seeds: the same final complete-data loss, 98.534); the "
           "other models change one training setting. Made by `scripts/bilinear_diagnosis.py`.", ""]
    for name, m in measured.items():
        out.append(f"- `{name}` (SHA-256 {m['sha256'][:12]}…): measured {m['date']} on {m['machine']}, {m['threads']} thread: `{m['command']}`")
    if measured:
        out += [""] + _cause_section(payload) + _sweep_section(measured)
        if payload.get("references"):
            out += _references(payload["references"], next(iter(measured.values()))["patches"])
        out += _bdmc_section(measured) + _moments_section(measured)
    if payload.get("ablation"):
        out += _ablation_section(payload["ablation"]) + _size_section(payload["ablation"], payload.get("references", {}))
    if payload.get("data"):
        out += _data_section(payload["data"])
    return "\n".join(out).rstrip() + "\n"
