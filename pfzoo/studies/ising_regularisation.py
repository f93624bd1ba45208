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
from pfzoo.studies.ising_recovery import (LEARNERS, Compose, correlation_error, coupling_error, fit_learner, learner_overrides,
                                          recipe_overrides, training_glass)
from pfzoo.training import objective_score

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


THESIS = {"MPF": (0.0172, 0.0025), "pseudo-likelihood": (0.0582, 0.0036), "CD-1": (0.3196, 0.0127), "CD-10": (0.3341, 0.0123)}
"""Table 3.1's ε_J (in its J' units, a quarter of ours) and ε_corr."""
ROWS = {"baseline": "unregularised, all 20,000 states, to convergence or the 400-step cap (the run's row)",
        "early_stopping": "fit on 18,000 states, kept at the lowest held-out objective",
        "early_stopping_refit": "all 20,000 states, as many L-BFGS steps as early stopping kept",
        "l2": "fit on 18,000 states with the λ of the lowest held-out objective",
        "l2_refit": "all 20,000 states with that λ"}
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


def render(record: Mapping, run: Mapping) -> str:
    """README.md of ``record`` (:func:`measure`'s, with the run header), beside the baseline ``run``'s results.json."""
    held, learners, base = record["held_out"], record["learners"], run["results"]
    lines = ["# Thesis Table 3.1: the fully connected MPF and pseudo-likelihood fits stopped early or L2-regularised", "",
             f"Made by `{record['command']}` on {record['date']} ({record['machine']}, {record['threads']} thread, load average "
             f"{record['load_average']}), on the glass and training states of `{record['run']}` (its seed, sampler, L-BFGS "
             f"settings, CPU clock and ε_corr sampler: 20,000 block-Gibbs samples of each fit, 1,000 chains, burn-in 1,000 "
             f"sweeps, thinning 10, each learner's samples drawn with its seed in that run, against all 20,000 training states).",
             "", STATED, "",
             f"Held out: {held['count']} of the training states (randperm, seed {held['seed']}). Early stopping scores the fit's "
             f"own objective on them after every L-BFGS step (5 iterations, history carried) and stops {held['patience']} steps "
             f"after the best (:class:`pfzoo.training.EarlyStopping` with :func:`pfzoo.training.objective_score`); the L2 "
             f"penalty is λ Σ_{{i<j}} J_ij² (the Trainer's `weight_decay` λ on the symmetric coupling matrix, not on the "
             f"biases), λ from {', '.join(f'{v:g}' for v in record['grid'])} by the unpenalised held-out objective. Nothing "
             f"here reads the true couplings except ε_J and nothing reads the samples of the fit except ε_corr. CPU seconds: "
             f"training only (the held-out scoring, "
             + ", ".join(f"{name} {learners[name]['early_stopping']['scoring_seconds']:.1f} s" for name in learners)
             + ", is left out).", "",
             "| learner | row | ε_J | ε_J ÷ 4 (J' units) | thesis ε_J | ε_corr | thesis ε_corr | ours ÷ thesis's | CPU s | L-BFGS steps |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, rows in learners.items():
        lines.append(_row(name, "baseline", base[name]))
        for key in ("early_stopping", "early_stopping_refit"):
            lines.append(_row(name, key, rows[key]))
        chosen = min(rows["l2_grid"], key=lambda point: point["held_out_objective"])
        lines.append(_row(name, "l2", chosen, f" (λ = {chosen['weight_decay']:g})"))
        lines.append(_row(name, "l2_refit", rows["l2_refit"], f" (λ = {rows['l2_refit']['weight_decay']:g})"))
    lines += ["", "Rows: " + "; ".join(f"`{key}`: {text}" for key, text in ROWS.items()) + ".", ""]
    for name, rows in learners.items():
        stopped = rows["early_stopping"]
        curve = dict((step, value) for step, value in stopped["held_out_objective"])
        lines.append(f"- {name}: held-out objective {curve[1]:.4f} after step 1, lowest {curve[stopped['best_step']]:.4f} at step "
                     f"{stopped['best_step']} ({stopped['seconds_to_best']:.1f} CPU s), {curve[max(curve)]:.4f} at step {max(curve)} "
                     f"where patience stopped it.")
    lines += ["", "## The L2 grid (fits on the 18,000 states)", "",
              "| learner | λ | held-out objective | ε_J | ε_corr | CPU s | L-BFGS steps |", "|---|---|---|---|---|---|---|"]
    for name, rows in learners.items():
        lines += [f"| {name} | {p['weight_decay']:g} | {p['held_out_objective']:.5f} | {p['coupling_error']:.4f} | "
                  f"{p['correlation_error']:.2e} | {p['seconds']:.1f} | {p['steps']} |" for p in rows["l2_grid"]]
    lines += ["", "## The order of the learners", "",
              "CD-1 and CD-10 are the run's rows, reused unchanged (not refitted here). Single draws of one model's samples "
              "spread by about ±5 % (the run's section \"What sets ε_corr\"), so a gap under ~10 % is not resolved.", "",
              "| MPF and PL as | order by ε_corr | order by ε_J | MPF's ε_corr ÷ thesis's | PL's ε_corr ÷ thesis's |", "|---|---|---|---|---|"]
    cd = {name: base[name] for name in ("CD-1", "CD-10")}
    verdicts = {}
    for key in ROWS:
        fits = {name: (base[name] if key == "baseline" else min(rows["l2_grid"], key=lambda p: p["held_out_objective"]) if key == "l2"
                       else rows[key]) for name, rows in learners.items()} | cd
        corr = {name: values["correlation_error"] for name, values in fits.items()}
        verdicts[key] = corr
        ratios = [f"{corr[name] / THESIS[name][1]:.2f}" if name in corr else "—" for name in ("MPF", "pseudo-likelihood")]
        lines.append(f"| `{key}` | {_order(corr)} | {_order({n: v['coupling_error'] for n, v in fits.items()})} | {ratios[0]} | {ratios[1]} |")
    lines += ["", "Thesis: MPF < pseudo-likelihood < CD-10 < CD-1 by ε_corr; MPF < pseudo-likelihood < CD-1 < CD-10 by ε_J.", "",
              "## The cause", ""]
    lines += [_verdict(verdicts)]
    return "\n".join(lines) + "\n"


def _verdict(verdicts: Mapping[str, Mapping[str, float]]) -> str:
    """One paragraph from the orders measured: which change puts MPF first, and how far each moves MPF and PL."""
    thesis_order = ["MPF", "pseudo-likelihood", "CD-10", "CD-1"]
    parts = []
    for key, corr in verdicts.items():
        order = sorted(corr, key=corr.__getitem__)
        first = "MPF first" if order[0] == "MPF" else f"{order[0]} first"
        moves = ", ".join(f"{name} ε_corr {verdicts['baseline'][name]:.2e} → {corr[name]:.2e} "
                          f"(÷ thesis's {verdicts['baseline'][name] / THESIS[name][1]:.2f} → {corr[name] / THESIS[name][1]:.2f})"
                          for name in ("MPF", "pseudo-likelihood") if name in corr)
        same = " (the thesis's order)" if order == [n for n in thesis_order if n in corr] else ""
        parts.append(f"`{key}`: {first}{same}; {moves}" if key != "baseline" else f"`baseline`: {first}; {moves.split(' → ')[0]}")
    return ("; ".join(parts) + ".")

