"""Thesis Table 3.1's fully connected MPF and pseudo-likelihood fits, stopped or regularised by held-out states.

An unregularised fit of all D(D−1)/2 couplings to 20,000 states overfits the sample: along full-batch L-BFGS, ε_J and
ε_corr pass a minimum within seconds and then rise until the step cap (reports/ising/sigma20_trace). The thesis states
neither a stopping rule nor a penalty for these fits ("off the shelf L-BFGS ... at convergence", §3.1.1), so this study
measures two standard choices made on data alone, one at a time, on the run's own glass and training states:

- ``early_stopping``: a tenth of the training states held out; the fit on the rest stops at the lowest held-out value
  of its own objective (MPF's K, minus the log pseudo-likelihood) — never at the lowest ε_J or ε_corr, which read the
  truth; ``early_stopping_refit``: the same number of L-BFGS steps on all the training states;
- ``l2``: the penalty ``λ Σ_{i<j} J_ij²`` (the Trainer's ``weight_decay`` λ on the symmetric coupling matrix), λ from
  a grid by the held-out objective (unpenalised) of fits on the rest; ``l2_refit``: that λ on all the training states.

:func:`measure` returns results.json's record (ε_J, ε_corr as the run measured them, CPU seconds, the held-out
objective of every grid point); :func:`render` writes the README.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Mapping, Sequence

import torch
from hydra.utils import instantiate

from pfzoo.data import sample_spin_glass
from pfzoo.studies.ising_correlation_floor import error_anatomy
from pfzoo.studies.ising_recovery import (LEARNERS, Compose, correlation_error, coupling_error, fit_learner, learner_overrides,
                                          recipe_overrides, training_glass)
from pfzoo.training import objective_score
from pfzoo.zoo import load

GRID = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3)
"""λ of the L2 grid: around the penalty that matches K at the truth (λ Σ J*² ≈ 17 at λ = 2·10⁻³) and decades below."""
SPLIT_SEED_OFFSET = 20  # the held-out rows: randperm with seed + 20 (the run's other streams use + 1 to + 17)


def _fit(compose: Compose, settings: Mapping, name: str, rows: torch.Tensor, truth, run_dir: Path, gibbs: dict,
         reference: torch.Tensor, extra: Sequence[str] = (), **stopping) -> tuple[torch.nn.Module, dict, list[dict]]:
    """Fit learner ``name`` to ``rows`` with the run's recipe plus ``extra`` overrides; ε_J, ε_corr (its samples drawn
    as the run drew that learner's, against ``reference``), CPU seconds and L-BFGS steps, and the epochs' records."""
    recipe, dtype, offset = LEARNERS[name]
    seed = settings["seed"]
    cfg = compose([f"+experiment={recipe}", *recipe_overrides(settings), *learner_overrides(name, settings),
                   f"trainer.seed={seed + offset}", *extra])
    model, trace, _, steps = fit_learner(cfg, dtype, rows, truth, run_dir, **stopping)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    index = list(LEARNERS).index(name)  # the run's sampling seed of this learner: common random numbers with its table
    samples = sample_spin_glass(model, settings["model_samples"], **gibbs, generator=torch.Generator().manual_seed(seed + 10 + index))
    result = {"coupling_error": coupling_error(model, truth), "correlation_error": correlation_error(samples, reference),
              "seconds": trace[-1][0], "steps": steps,
              "scoring_seconds": sum(record.get("callback_seconds", 0.0) for record in records)}
    return model, result, records


def measure(run: Mapping, compose: Compose, runs_dir: Path, *, learners: Sequence[str] = ("MPF", "pseudo-likelihood"),
            grid: Sequence[float] = GRID, held_out_fraction: float = 0.1, patience: int = 40,
            on_progress: Callable[[str], None] = lambda line: None) -> dict:
    """Every row of the module docstring for ``learners`` on the glass and training states of ``run`` (a
    scripts/reproduce_ising.py results.json record, whose settings are kept: clock, L-BFGS cap and tolerance, seeds)."""
    if not 0 < held_out_fraction < 1:
        raise ValueError(f"held_out_fraction must be in (0, 1), got {held_out_fraction!r}")
    settings = run["settings"]
    truth, train, gibbs, _ = training_glass(settings, compose)
    order = torch.randperm(train.shape[0], generator=torch.Generator().manual_seed(settings["seed"] + SPLIT_SEED_OFFSET))
    count = round(held_out_fraction * train.shape[0])
    held, rest = train[order[:count]], train[order[count:]]
    rows = {}
    for name in learners:
        folder = runs_dir / LEARNERS[name][0]
        _, stopped, records = _fit(compose, settings, name, rest, truth, folder / "early_stopping", gibbs, train,
                                   held_out=held, patience=patience)
        # one full-batch L-BFGS step an epoch: the kept step is the first epoch that scored the final best (0: the start)
        best = next((record["epoch"] for record in records if record["early_stopping_score"] == records[-1]["early_stopping_best"]), 0)
        stopped |= {"best_step": best, "seconds_to_best": sum(record["seconds"] for record in records[:best]),
                    "held_out_objective": [[record["epoch"], -record["early_stopping_score"]] for record in records]}
        on_progress(f"{name}: early stopping at step {best} of {stopped['steps']}: ε_J {stopped['coupling_error']:.4f}, "
                    f"ε_corr {stopped['correlation_error']:.2e}")
        _, refit, _ = _fit(compose, settings, name, train, truth, folder / "early_stopping_refit", gibbs, train,
                           [f"trainer.epochs={max(best, 1)}"])
        on_progress(f"{name}: refit for {best} steps: ε_J {refit['coupling_error']:.4f}, ε_corr {refit['correlation_error']:.2e}")
        objective = instantiate(compose([f"+experiment={LEARNERS[name][0]}"]).trainer.objective)
        points = []
        for strength in grid:
            model, point, _ = _fit(compose, settings, name, rest, truth, folder / f"l2_{strength:g}", gibbs, train,
                                   [f"trainer.weight_decay={strength}"])
            point |= {"weight_decay": strength, "held_out_objective": -objective_score(objective, held)(model.double())}
            points.append(point)
            on_progress(f"{name}: λ = {strength:g}: held-out {point['held_out_objective']:.5f}, ε_J {point['coupling_error']:.4f}, "
                        f"ε_corr {point['correlation_error']:.2e}, {point['seconds']:.0f} s")
        chosen = min(points, key=lambda point: point["held_out_objective"])["weight_decay"]
        _, l2_refit, _ = _fit(compose, settings, name, train, truth, folder / "l2_refit", gibbs, train,
                              [f"trainer.weight_decay={chosen}"])
        on_progress(f"{name}: λ = {chosen:g} on all states: ε_J {l2_refit['coupling_error']:.4f}, ε_corr {l2_refit['correlation_error']:.2e}")
        rows[name] = {"early_stopping": stopped, "early_stopping_refit": refit, "l2_grid": points,
                      "l2_refit": l2_refit | {"weight_decay": chosen}}
    return {"held_out": {"fraction": held_out_fraction, "count": count, "seed": settings["seed"] + SPLIT_SEED_OFFSET,
                         "patience": patience}, "grid": list(grid), "learners": rows}


REFITS = ("early_stopping_refit", "l2_refit")


def repeated_draws(run: Mapping, learners: Sequence[str], compose: Compose, runs_dir: Path, *, repeats: int = 3) -> dict:
    """ε_corr of the fits on all the training states (:data:`REFITS`, read back from their checkpoints under ``runs_dir``)
    over ``repeats`` draws of their samples, with the seeds the run's ``correlation_floor`` section drew its learners'
    (its seed + 300: common random numbers with its CD rows), by :func:`~pfzoo.studies.ising_correlation_floor.error_anatomy`:
    ``{learner: {row: anatomy}}``."""
    settings = run["settings"]
    truth, train, gibbs, _ = training_glass(settings, compose)
    seed = run["correlation_floor"]["seed"] + 300
    return {name: {row: error_anatomy(load(runs_dir / LEARNERS[name][0] / row / "checkpoint.pt"), truth, train,
                                      num_samples=settings["model_samples"], sampling=gibbs, seed=seed, repeats=repeats)
                   for row in REFITS} for name in learners}


THESIS = {"MPF": (0.0172, 0.0025), "pseudo-likelihood": (0.0582, 0.0036), "CD-1": (0.3196, 0.0127), "CD-10": (0.3341, 0.0123)}
"""Table 3.1's ε_J (in its J' units, a quarter of ours) and ε_corr."""
THESIS_ORDER = ("MPF", "pseudo-likelihood", "CD-10", "CD-1")  # by ε_corr
ROWS = {"baseline": "unregularised, all {total:,} states, to convergence or the 400-step cap (the run's row)",
        "early_stopping": "fit on the other {rest:,} states, kept at the lowest held-out objective",
        "early_stopping_refit": "all {total:,} states, as many L-BFGS steps as early stopping kept",
        "l2": "fit on the other {rest:,} states with the λ of the lowest held-out objective",
        "l2_refit": "all {total:,} states with that λ"}
STATED = """What the thesis states (§3.1.1): MPF and pseudo-likelihood were fitted "by applying an off the shelf L-BFGS
(quasi-Newton gradient descent) implementation [minFunc] to their objective functions evaluated over the full training
dataset", and Table 3.1 gives "the relative performance at convergence". It states no stopping rule, tolerance or
iteration cap, no held-out set and no penalty for these fits; the one regularisation it names is MFT+TAP's pseudoinverse
(eq. 3.3, λ not stated). The MPF code released with the paper (Sohl-Dickstein/Minimum-Probability-Flow-Learning,
MPF_ising/runme_ising.m with K_dK_ising.m) runs minFunc on all samples with maxIter = maxFunEvals = 10,000 and no penalty
term. So the thesis's convention is the unregularised fit to convergence, which is the baseline row; both changes below
are ours, chosen on held-out states alone."""


def _order(errors: Mapping[str, float]) -> str:
    return " < ".join(sorted(errors, key=errors.__getitem__))


def _row(name: str, key: str, values: Mapping, extra: str = "") -> str:
    thesis_j, thesis_corr = THESIS[name]
    steps = values.get("steps", values.get("iterations_or_epochs"))
    return (f"| {name} | `{key}`{extra} | {values['coupling_error']:.4f} | {values['coupling_error'] / 4:.4f} | {thesis_j} | "
            f"{values['correlation_error']:.2e} | {thesis_corr} | {values['correlation_error'] / thesis_corr:.2f} | "
            f"{values['seconds']:.1f} | {steps} |")


def _chosen(rows: Mapping) -> dict:
    """The L2 grid point of the lowest held-out objective."""
    return min(rows["l2_grid"], key=lambda point: point["held_out_objective"])


def _fits(key: str, learners: Mapping, base: Mapping) -> dict:
    """Row ``key``'s MPF and PL fits beside the run's CD rows: ``{learner: values}``."""
    fits = {name: base[name] if key == "baseline" else _chosen(rows) if key == "l2" else rows[key] for name, rows in learners.items()}
    return fits | {name: base[name] for name in ("CD-1", "CD-10")}


def render(record: Mapping, run: Mapping) -> str:
    """README.md of ``record`` (:func:`measure`'s, with the run header), beside the baseline ``run``'s results.json."""
    held, learners, base, settings = record["held_out"], record["learners"], run["results"], run["settings"]
    sizes = {"total": settings["num_samples"], "rest": settings["num_samples"] - held["count"]}
    lines = ["# Thesis Table 3.1: the fully connected MPF and pseudo-likelihood fits stopped early or L2-regularised", "",
             f"Made by `{record['command']}` on {record['date']} ({record['machine']}, {record['threads']} thread, load average "
             f"{record['load_average']}), on the glass and the {sizes['total']:,} training states of `{record['run']}` (its seed, "
             f"sampler, L-BFGS settings, CPU clock and ε_corr: {settings['model_samples']:,} block-Gibbs samples of each fit, "
             f"burn-in {settings['burn_in']} and thinning {settings['thin']} sweeps, each learner's drawn with its seed in that "
             "run, against all the training states).", "", STATED, "",
             f"Held out: {held['count']:,} of the training states (randperm, seed {held['seed']}). Early stopping scores the fit's "
             f"own objective on them after every L-BFGS step (5 iterations, history carried) and stops {held['patience']} steps "
             "after the best (`pfzoo.training.EarlyStopping` with `pfzoo.training.objective_score`); the L2 penalty is "
             "λ Σ_{i<j} J_ij² (the Trainer's `weight_decay` λ on the symmetric coupling matrix, not on the biases), λ from "
             f"{', '.join(f'{v:g}' for v in record['grid'])} by the unpenalised held-out objective. Nothing here reads the true "
             "couplings except ε_J, nor the fit's samples except ε_corr. CPU seconds: training only (early stopping's: to the "
             "step patience stopped at; its held-out scoring, "
             + ", ".join(f"{name} {rows['early_stopping']['scoring_seconds']:.1f} s" for name, rows in learners.items())
             + ", left out; the L2 route costs its whole grid and the refit: "
             + ", ".join(f"{name} {sum(p['seconds'] for p in rows['l2_grid']) + rows['l2_refit']['seconds']:.0f} s"
                         for name, rows in learners.items()) + ").", "",
             "| learner | row | ε_J | ε_J ÷ 4 (J' units) | thesis ε_J | ε_corr | thesis ε_corr | ours ÷ thesis's | CPU s | L-BFGS steps |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, rows in learners.items():
        lines += [_row(name, "baseline", base[name]), *(_row(name, key, rows[key]) for key in ("early_stopping", "early_stopping_refit")),
                  _row(name, "l2", _chosen(rows), f" (λ = {_chosen(rows)['weight_decay']:g})"),
                  _row(name, "l2_refit", rows["l2_refit"], f" (λ = {rows['l2_refit']['weight_decay']:g})")]
    lines += ["", "Rows: " + "; ".join(f"`{key}`: {text.format(**sizes)}" for key, text in ROWS.items()) + ".", ""]
    for name, rows in learners.items():
        stopped = rows["early_stopping"]
        curve = dict((step, value) for step, value in stopped["held_out_objective"])
        lines.append(f"- {name}: held-out objective {curve[1]:.4f} after step 1, lowest {curve[stopped['best_step']]:.4f} at step "
                     f"{stopped['best_step']} ({stopped['seconds_to_best']:.1f} CPU s), {curve[max(curve)]:.4f} at step {max(curve)} "
                     "where patience stopped it.")
    lines += ["", f"## The L2 grid (fits on the {sizes['rest']:,} states)", "",
              "| learner | λ | held-out objective | ε_J | ε_corr | CPU s | L-BFGS steps |", "|---|---|---|---|---|---|---|"]
    for name, rows in learners.items():
        lines += [f"| {name} | {p['weight_decay']:g} | {p['held_out_objective']:.5f} | {p['coupling_error']:.4f} | "
                  f"{p['correlation_error']:.2e} | {p['seconds']:.1f} | {p['steps']} |" for p in rows["l2_grid"]]
    lines += ["", "## The order of the learners", "",
              "CD-1 and CD-10 are the run's rows, reused unchanged (not refitted here). One draw per fit; single draws of one "
              "model's samples spread by up to ±25 % (the run's section \"What sets ε_corr\"): the next section resolves the "
              "order over repeated draws.", "",
              "| MPF and PL as | order by ε_corr | order by ε_J | MPF's ε_corr ÷ thesis's | PL's ε_corr ÷ thesis's |", "|---|---|---|---|---|"]
    for key in ROWS:
        fits = _fits(key, learners, base)
        corr = {name: values["correlation_error"] for name, values in fits.items()}
        ratios = [f"{corr[name] / THESIS[name][1]:.2f}" if name in learners else "—" for name in ("MPF", "pseudo-likelihood")]
        lines.append(f"| `{key}` | {_order(corr)} | {_order({n: v['coupling_error'] for n, v in fits.items()})} | {ratios[0]} | {ratios[1]} |")
    lines += ["", "Thesis: MPF < pseudo-likelihood < CD-10 < CD-1 by ε_corr; MPF < pseudo-likelihood < CD-1 < CD-10 by ε_J.", ""]
    orders = {}
    if "draws" in record:
        section, orders = _draws_section(record["draws"], run["correlation_floor"])
        lines += section
    return "\n".join([*lines, "## The cause", "", *_verdict(learners, base, orders)]) + "\n"


def _resolved_order(means: Mapping[str, tuple[float, float]]) -> str:
    """Learners by mean ε_corr, ``<`` where neighbours differ by more than twice their combined standard error, ``≈`` else."""
    names = sorted(means, key=lambda name: means[name][0])
    text = names[0]
    for lower, higher in zip(names, names[1:]):
        gap, spread = means[higher][0] - means[lower][0], 2 * (means[higher][1] ** 2 + means[lower][1] ** 2) ** 0.5
        text += f" {'<' if gap > spread else '≈'} {higher}"
    return text


def _draws_section(draws: Mapping, floor: Mapping) -> tuple[list[str], dict[str, str]]:
    """The refitted models' ε_corr over repeated draws beside the run's own learners' (its correlation_floor section), and
    the resolved order of each row (``{row: "MPF < ..."}``)."""
    lines = ["## The order over repeated draws", "",
             f"ε_corr over {draws['repeats']} draws of {floor['num_samples']:,} samples each (seeds {floor['seed'] + 300} to "
             f"{floor['seed'] + 299 + draws['repeats']}, those the run's section \"What sets ε_corr\" drew its learners' with: "
             f"common random numbers with its CD rows), mean ± standard error; made by `{draws['command']}`. The field error "
             "is the mean square error of the spin fields h = J𝟙/4 + b/2 (the truth's are 0).", "",
             "| learner | fit | ε_corr mean ± s.e. | single draws | field error |", "|---|---|---|---|---|"]
    fits = {("baseline", name): values for name, values in floor["learners"].items()}
    fits |= {(row, name): rows[row] for name, rows in draws["learners"].items() for row in REFITS}
    for (row, name), values in fits.items():
        lines.append(f"| {name} | `{row}` | {values['correlation_error']:.2e} ± {values['correlation_error_stderr']:.1e} | "
                     + ", ".join(f"{e:.2e}" for e in values["correlation_errors"]) + f" | {values['field_error']:.2e} |")
    lines += ["", "| MPF and PL as | order by mean ε_corr (< : apart by more than twice the combined s.e.; ≈ : not) |", "|---|---|"]
    orders = {}
    for row in ("baseline", *REFITS):
        means = {name: (values["correlation_error"], values["correlation_error_stderr"]) for (key, name), values in fits.items()
                 if key == row or (key == "baseline" and name.startswith("CD"))}
        orders[row] = _resolved_order(means)
        lines.append(f"| `{row}` | {orders[row]} |")
    return lines + [""], orders


def _factor(value: float, thesis: float) -> str:
    """``value`` against the thesis's, as "2.81× above" or "1.64× below"."""
    return f"{value / thesis:.2f}× above" if value >= thesis else f"{thesis / value:.2f}× below"


def _mpf_place(order: str) -> str:
    """Where MPF stands in a resolved order ("A < B ≈ C"): first, tied for first, or behind."""
    names, signs = order.split(" ")[::2], order.split(" ")[1::2]
    if names[0] == "MPF":
        return "first" if signs[0] == "<" else f"tied for first with {names[1]}"
    place = names.index("MPF")
    return f"tied for first with {names[0]}" if all(sign == "≈" for sign in signs[:place]) else f"behind {names[0]}"


def _against_cd(order: str, name: str) -> str:
    """``name`` against the CD learners in a resolved order ("A < B ≈ C"): "ahead of", "level with" or "behind" CD."""
    names, signs = order.split(" ")[::2], order.split(" ")[1::2]
    place, cds = names.index(name), [names.index(cd) for cd in ("CD-1", "CD-10")]
    nearest = min(cds, key=lambda index: abs(index - place))
    between = signs[min(place, nearest):max(place, nearest)]
    if all(sign == "≈" for sign in between):
        return "level with CD"
    return "ahead of CD" if place < min(cds) else "behind CD"


def _verdict(learners: Mapping, base: Mapping, orders: Mapping[str, str]) -> list[str]:
    """The cause section: how far each change moves MPF's and PL's errors toward the thesis's, the orders it gives (ε_J,
    which no sampling blurs, and ε_corr over repeated draws where measured), and whether MPF comes first."""
    lines, places, thesis_j = [], {}, {}
    for key in REFITS:
        fits = _fits(key, learners, base)
        moves = "; ".join(
            f"{name} ε_corr {_factor(base[name]['correlation_error'], THESIS[name][1])} the thesis's → "
            f"{_factor(fits[name]['correlation_error'], THESIS[name][1])} ({base[name]['correlation_error']:.2e} → "
            f"{fits[name]['correlation_error']:.2e}), ε_J in J' units {base[name]['coupling_error'] / 4:.3f} → "
            f"{fits[name]['coupling_error'] / 4:.3f} (thesis {THESIS[name][0]})" for name in learners)
        by_j = sorted(fits, key=lambda name: fits[name]["coupling_error"])
        thesis_j[key] = by_j == ["MPF", "pseudo-likelihood", "CD-1", "CD-10"]
        j_order = " < ".join(by_j) + (" (the thesis's)" if thesis_j[key] else "")
        corr = {name: values["correlation_error"] for name, values in fits.items()}
        single = sorted(corr, key=corr.__getitem__)
        place = _mpf_place(orders[key]) if key in orders else ("first" if single[0] == "MPF" else f"behind {single[0]}")
        resolved_order = orders.get(key, " < ".join(single))
        places[key] = (place, ", ".join(f"{name} {_against_cd(resolved_order, name)}" for name in learners))
        resolved = f", over repeated draws {orders[key]}" if key in orders else ""
        lines.append(f"- `{key}`: {moves}. By ε_J {j_order}; by ε_corr, one draw each, {' < '.join(single)}{resolved}: "
                     f"MPF {place}; {places[key][1]}.")
    if set(learners) != {"MPF", "pseudo-likelihood"}:
        return lines  # the closing comparison needs both
    fits = [learners[name][key] | {"name": name} for name in learners for key in REFITS]
    corr_factor = max(max(f["correlation_error"] / THESIS[f["name"]][1], THESIS[f["name"]][1] / f["correlation_error"]) for f in fits)
    j_factors = [f["coupling_error"] / 4 / THESIS[f["name"]][0] for f in fits]
    mpf, pl = learners["MPF"], learners["pseudo-likelihood"]
    lead = [pl[key]["coupling_error"] / mpf[key]["coupling_error"] for key in REFITS]
    curves = {name: [value for _, value in rows["early_stopping"]["held_out_objective"]] for name, rows in learners.items()}
    lines += ["", "**Cause named.** The reversed order of the baseline is the unregularised fully connected MPF and "
              "pseudo-likelihood fits run to the 400-step cap: they overfit the training states (the held-out objective passes "
              "its minimum and rises: " + ", ".join(f"{name} {min(curve):.4f} → {curve[-1]:.4f}" for name, curve in curves.items())
              + "). Either change chosen on held-out states moves both toward the thesis's ε_corr: MPF's ε_corr falls "
              f"{base['MPF']['correlation_error'] / mpf['early_stopping_refit']['correlation_error']:.1f}× (early stopping) and "
              f"{base['MPF']['correlation_error'] / mpf['l2_refit']['correlation_error']:.1f}× (L2), pseudo-likelihood's "
              f"{base['pseudo-likelihood']['correlation_error'] / pl['early_stopping_refit']['correlation_error']:.1f}× and "
              f"{base['pseudo-likelihood']['correlation_error'] / pl['l2_refit']['correlation_error']:.1f}×, all four within "
              f"{corr_factor:.2f}× of the thesis's; against CD, early stopping leaves {places['early_stopping_refit'][1]}, L2 "
              f"{places['l2_refit'][1]}. By ε_J the thesis's order comes with "
              + (" and ".join(f"`{key}`" for key in REFITS if thesis_j[key]) or "neither change")
              + (". MPF is then the best by ε_corr under both" if all(places[key][0] == "first" for key in REFITS)
                 else ". Whether MPF is then the *best* is not settled by these fits")
              + f": by ε_corr MPF is {places['early_stopping_refit'][0]} with early stopping and "
              f"{places['l2_refit'][0]} with L2, and its ε_J lead over pseudo-likelihood is {lead[0]:.2f}× and {lead[1]:.2f}× "
              f"(thesis {THESIS['pseudo-likelihood'][0] / THESIS['MPF'][0]:.1f}×). The ε_J stay {min(j_factors):.1f}–"
              f"{max(j_factors):.1f}× above the thesis's, which neither change removes (the fully connected fit of a lattice "
              "glass: the lattice-fit rows of reports/ising/ablation)."]
    return lines
