"""RAISE Tables 1–2 (Burda, Grosse & Salakhutdinov 2015) on binarized MNIST: the estimates per model, the schedule pilot,
and the table and model cards rendered from the results (what ``scripts/reproduce_raise.py`` stores in results.json).

:func:`measure` returns one model's estimates (exact, CSL, RAISE and AIS from uniform and base-rate initial
distributions) with the settings of :data:`SETTINGS` (or :data:`QUICK`, :data:`PAPER_SCALE`), :func:`schedule_pilot`
the schedule with the smallest |AIS − RAISE| on validation digits and the test set measured with it, :func:`sweep_rows`
AIS and RAISE against K, :func:`heating_rows` RAISE with and without the clamped heating chain, :func:`render_table`
the markdown of ``table.md``, :func:`model_card` a model's zoo card and :func:`card_fields` its ``card.json``; the
renderers read nothing but the results dict, so a table re-renders without re-measuring (a run's training time:
:mod:`pfzoo.studies.training_time`). How a run stores them in results.json, and the files written from it:
:mod:`pfzoo.studies.raise_results`.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import re
import time
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

import pfzoo
from pfzoo import zoo
from pfzoo.estimators.base import BoundKind
from pfzoo.estimators import AIS, CSL, RAISE, Bracket
from pfzoo.models import Capability
from pfzoo.paths import schedule_from_name
from pfzoo.studies.bracket_sweep import BracketPoint, bracket_sweep, estimator_options
from pfzoo.studies.heating_comparison import compare_heating
from pfzoo.studies.schedule_pilot import pilot_schedule
from pfzoo.studies.training_time import duration, training_fact
from pfzoo.zoo.cards import command_markdown

logger = logging.getLogger(__name__)

MODELS = {"cd1-20": ("CD1(20)", "raise_rbm_cd1_20"), "pcd-20": ("PCD(20)", "raise_rbm_pcd_20"), "cd1-500": ("CD1(500)", "raise_rbm_cd1_500"),
          "pcd-500": ("PCD(500)", "raise_rbm_pcd_500"), "cd25-500": ("CD25(500)", "zoo_rbm_cd25_500"),
          "dbm-500-1000": ("DBM (500–1000)", "zoo_dbm_500_1000_from_rbm_sampled_momentum05_averaged"), "dbn-500-2000": ("DBN (500–2000)", "zoo_dbn_500_2000_fresh_chains1000"),
          "dbm-500-500-1000": ("DBM (500–500–1000)", "zoo_dbm_500_500_1000_from_rbm_sampled_momentum05")}
"""Name → (table label, recipe in conf/experiment/)."""
AIS_CHAINS = {"dbm-500-1000": {"base_rate": 1000}, "dbm-500-500-1000": {"base_rate": 1000}}
"""Chains of the table's AIS cells beyond ``ais_chains``, at least: the DBMs' base-rate AIS weights are heavy-tailed at 100 chains (ESS 5.5)."""
SECTIONS = ("models", "sweeps", "schedule_pilots", "heating")
"""The parts of results.json that runs on other models add to rather than replace; every entry of each records the
checkpoint it was measured on (``checkpoint``, its path, and ``checkpoint_sha256``) or is marked :data:`OLDER`."""
OLDER = "older_checkpoint"
"""An entry's key for the text naming the checkpoint it was measured on when its model no longer loads that one: such an
entry renders with the text beside it (marked †) instead of being refused (:func:`pfzoo.studies.raise_results.check_checkpoints`)."""
SWEEP_BASES = {"base_rate": "base-rate initialisation", "uniform": "uniform initialisation"}
"""The initial distributions a sweep against K may anneal from, with the words the table uses for them."""
FIGURES = "figures"  # beside table.md: <name>-against-K.png for every sweep
SETTINGS = {"steps": 10_000, "long_steps": 100_000, "ais_chains": 100, "posterior_samples": 100, "raise_chains": 10,
            "raise_examples": 50, "long_raise_examples": 20, "csl_chains": 10, "csl_samples": 1000, "csl_burn_in": 100}
"""The default measurement settings: scaled down from RAISE Table 1's so that a CPU run can afford them."""
QUICK = {"steps": 100, "long_steps": 200, "ais_chains": 10, "posterior_samples": 5, "raise_chains": 2, "raise_examples": 10,
         "long_raise_examples": 5, "csl_samples": 20, "csl_burn_in": 5}
"""What a smoke run (``--quick``) puts over :data:`SETTINGS`."""
PAPER_SCALE = {"steps": 100_000, "long_steps": 0, "ais_chains": 5000, "raise_chains": 50, "raise_examples": 100}
"""RAISE Table 1's settings (Burda, Grosse & Salakhutdinov 2015), what ``--paper-scale`` puts over :data:`SETTINGS`; its single K, so no long K."""
QUICK_PILOT = {"pilot_examples": 5, "pilot_ais_chains": 10}
QUICK_TRAINING = {"pictures": False, "trainer.epochs": 1, "trainer.objective.pretrain.epochs_per_layer": 1, "model.num_hidden": 10,
                  "model.hidden_sizes": lambda sizes: [10] * len(sizes), "trainer.pretrained_layers": [], "trainer.init_from_below": False,
                  "trainer.average_parameters.from_epoch": 1}
"""What a smoke run sets in a model's recipe, where the recipe has the key (a function: of the recipe's value): one
epoch, no pictures, 10-unit layers as many as the recipe's (which cannot take the zoo's trained layers), parameters averaged from
that epoch on."""


def quick_recipe(cfg: DictConfig) -> DictConfig:
    """The composed recipe ``cfg`` shrunk for a smoke run: :data:`QUICK_TRAINING` set where ``cfg`` has the key (in place),
    and a DBM that starts from a trained zoo RBM (``dbm_pretrain=from_rbm``) started at random instead."""
    for key, value in QUICK_TRAINING.items():
        if (current := OmegaConf.select(cfg, key)) is not None:
            OmegaConf.update(cfg, key, value(current) if callable(value) else value, merge=False)
    if OmegaConf.select(cfg, "trainer.objective.pretrain.rbm") is not None:
        OmegaConf.update(cfg, "trainer.objective.pretrain", None, merge=False)
    return cfg


def label(name: str, results: dict) -> str:
    """Model ``name``'s table label from the sizes it was measured with (a quick run's 10-unit models are not called
    "CD1(500)"): the recipe's label with the stored config's hidden sizes, e.g. ``CD1(10)`` or ``DBM (10–10)``."""
    config = results.get("models", {}).get(name, {}).get("config") or {}
    sizes = config.get("layer_sizes", [None])[1:] if "layer_sizes" in config else [config.get("num_hidden")]
    if None in sizes or not sizes:
        return MODELS[name][0]
    return re.sub(r"\(\d+(–\d+)*\)", "(" + "–".join(str(size) for size in sizes) + ")", MODELS[name][0])


def sweep_key(name: str, base: str) -> str:
    """results.json's key of model ``name``'s sweep from ``base``: the name itself for base rates (the table's default
    sweep, the one the model's card shows), ``name@uniform`` for the uniform start."""
    return name if base == "base_rate" else f"{name}@{base}"


def sweep_model(key: str) -> tuple[str, str]:
    """The model name and initial distribution of sweep ``key`` (:func:`sweep_key` inverted)."""
    name, _, base = key.partition("@")
    return name, base or "base_rate"


def family(name: str) -> str:
    """The model family of ``name`` (``rbm``, ``dbm``, ``dbn``), from its recipe's name."""
    return MODELS[name][1].split("_")[1]


FAMILY_HEADLINES = ("dbm-500-1000", "dbn-500-2000")
"""The models that live in their family's plain zoo folder (``dbm-binarized_mnist``), the one the app's pretrained lookup
finds; every other model's folder names it (``rbm-binarized_mnist-cd1-20``, ``dbm-binarized_mnist-500-500-1000``)."""


def zoo_folder(name: str, zoo_dir: Path) -> Path:
    """Where model ``name`` lives in the zoo folder ``zoo_dir``."""
    variant = None if name in FAMILY_HEADLINES else name.removeprefix(family(name) + "-")
    return zoo_dir / zoo.folder_name(family(name), "binarized_mnist", variant)


def has_exact_likelihood(model) -> bool:
    """At most 2^20 states to enumerate for log Z, and an exact log f(v)."""
    return Capability.EXACT_FREE_ENERGY in model.capabilities and (model.log_partition_cost or 99) <= 20


def measure(model, data, s: dict, generator, *, ais_chains: dict, only: list[str] | None) -> dict:
    """The table's estimates for one model, each ``{mean, stderr, seconds, ...}``; ``only`` restricts the keys."""
    rows: dict[str, dict] = {}

    def record(key, estimator, **extra):
        if only is None or key in only:
            began = time.perf_counter()
            estimate = estimator.to(model.device).log_likelihood(model, data.test, base_data=data.train, generator=generator)
            rows[key] = {"mean": estimate.mean, "stderr": estimate.stderr, "seconds": round(time.perf_counter() - began, 1), **extra,
                         "warnings": list(estimate.warnings)}
            if estimate.partition is not None:
                rows[key].update(log_z=estimate.partition.log_z, log_z_stderr=estimate.partition.stderr, ess=estimate.partition.ess)
            logger.info("  %-18s %10.3f ± %.3f   (%s s)", key, estimate.mean, estimate.stderr, rows[key]["seconds"])

    if (only is None or "exact" in only) and has_exact_likelihood(model):
        began = time.perf_counter()
        with torch.no_grad():
            rows["exact"] = {"mean": model.log_prob(data.test).mean().item(), "stderr": 0.0, "seconds": round(time.perf_counter() - began, 1)}
        logger.info("  %-18s %10.3f", "exact", rows["exact"]["mean"])
    record("csl", CSL(s["csl_chains"], s["csl_samples"], burn_in=s["csl_burn_in"]))
    for steps in [s["steps"]] + ([s["long_steps"]] if "exact" in rows and s["long_steps"] else []):
        suffix, examples = ("", s["raise_examples"]) if steps == s["steps"] else (f"@{steps}", s["long_raise_examples"])
        for base in ("uniform", "base_rate"):
            record(f"raise_{base}{suffix}", RAISE(s["raise_chains"], steps, base=base, num_examples=examples, **estimator_options(s)))
        for base in ("uniform", "base_rate"):
            chains = max(ais_chains.get(base, 0), s["ais_chains"])
            record(f"ais_{base}{suffix}", AIS(chains, steps, schedule="linear", base=base, posterior_samples=s["posterior_samples"],
                                              **estimator_options(s)), chains=chains)
    return rows


def sweep_warnings(rows: list[dict]) -> list[str]:
    """README lines listing the estimators' warnings of a sweep's ``rows`` by K (none when no row has any)."""
    lines = [f"- K = {r['steps']:,}: {line}" for r in rows for line in r.get("warnings", ())]
    return ["", "Warnings the estimators gave (their estimates at these K are not to be trusted as they stand):", "", *lines] if lines else []


def point_row(point: BracketPoint) -> dict:
    """A bracket point as a results.json row."""
    return {"steps": point.num_steps, "schedule": point.schedule, "ais": point.upper, "ais_stderr": point.upper_stderr, "ais_log_z": point.log_z,
            "ais_ess": point.ess, "raise": point.lower, "raise_stderr": point.lower_stderr, "seconds": point.seconds,
            "warnings": list(point.warnings)}


def schedule_pilot(model, data, schedules: list[str], s: dict, seed: int) -> dict:
    """The schedule with the smallest |AIS − RAISE| on ``pilot_examples`` random validation digits, then the test set with it."""
    validation = data.valid[torch.randperm(data.valid.shape[0], generator=torch.Generator().manual_seed(seed + 3))[: s["pilot_examples"]]]
    pilot = pilot_schedule(model, validation, schedules, num_steps=s["steps"], ais_chains=s["pilot_ais_chains"], raise_chains=s["raise_chains"],
                           posterior_samples=s["posterior_samples"], base="base_rate", base_data=data.train,
                           generator=seeded(model.device, seed + 1), raise_generator=seeded(model.device, seed + 2))
    logger.info("  chosen: %s; measuring the test set with it", pilot.chosen)
    with torch.no_grad():
        exact = ({"validation": model.log_prob(validation).mean().item(), "test": model.log_prob(data.test).mean().item()}
                 if has_exact_likelihood(model) else None)
    both = Bracket(AIS(s["pilot_ais_chains"], s["steps"], schedule=pilot.chosen, base="base_rate", posterior_samples=s["posterior_samples"]),
                   RAISE(s["raise_chains"], s["steps"], schedule=pilot.chosen, base="base_rate", num_examples=s["raise_examples"]))
    estimate = both.log_likelihood(model, data.test, base_data=data.train, generator=seeded(model.device, seed))
    test = {"ais": estimate.upper.mean, "ais_stderr": estimate.upper.stderr, "ais_ess": estimate.upper.partition.ess,
            "raise": estimate.lower.mean, "raise_stderr": estimate.lower.stderr}
    logger.info("  test set: AIS %s, RAISE %s", pm(test, "ais"), pm(test, "raise"))
    return {"rows": [point_row(point) for point in pilot.points], "chosen": pilot.chosen, "test": test, "exact": exact}


def sweep_rows(model, data, num_steps: list[int], s: dict, *, base: str, seed: int) -> list[dict]:
    """AIS and RAISE against K (:func:`~pfzoo.studies.bracket_sweep.bracket_sweep`) on the test digits from the initial
    distribution ``base`` (:data:`SWEEP_BASES`), as results.json rows, one per K of ``num_steps``; ``s``: the run's
    settings with the sweep's ``sweep_ais_chains`` and ``sweep_raise_examples``."""
    points = bracket_sweep(model, data.test, num_steps=num_steps, ais_chains=s["sweep_ais_chains"], raise_chains=s["raise_chains"],
                           raise_examples=s["sweep_raise_examples"], posterior_samples=s["posterior_samples"], base=base,
                           base_data=data.train if base == "base_rate" else None, generator=seeded(model.device, seed + 1),
                           raise_generator=seeded(model.device, seed + 2), **estimator_options(s))
    return [point_row(point) for point in points]


def heating_rows(model, data, heating_steps: list[int], s: dict, seed: int) -> list[dict]:
    """RAISE with the mean-field proposal and with each number T of ``heating_steps`` clamped-heating sweeps (RAISE
    Algorithm 3; :func:`~pfzoo.studies.heating_comparison.compare_heating`) on ``s["heating_examples"]`` random test digits."""
    chosen = torch.randperm(data.test.shape[0], generator=torch.Generator().manual_seed(seed + 4))[: s["heating_examples"]]
    digits = data.test[chosen.to(data.test.device)]
    return compare_heating(model, digits, heating_steps, num_steps=s["steps"], num_chains=s["raise_chains"], base_data=data.train, seed=seed + 5)


def schedule_name(spec: str) -> str:
    """An argparse type: a schedule name :func:`pfzoo.paths.schedule_from_name` reads (``linear``, ``power:5``, …)."""
    try:
        schedule_from_name(spec)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return spec


def seeded(device: torch.device, seed: int) -> torch.Generator:
    """A generator on ``device`` seeded with ``seed``."""
    return torch.Generator(device).manual_seed(seed)


def comparable(stored: dict, results: dict) -> bool:
    """Whether ``stored`` results belong in the same table as ``results``: the same settings, and wall times from the same kind of device."""
    return stored.get("settings") == results["settings"] and stored.get("gpu") == results["gpu"]


# ---- rendering: table.md and the zoo's cards, from the content of results.json alone -------------------------------

COLUMNS = {"exact": "exact", "csl": "CSL", "raise_uniform": "RAISE uniform", "raise_base_rate": "RAISE base rate",
           "ais_uniform": "AIS uniform", "ais_base_rate": "AIS base rate"}
IMPOSSIBLE = ("‡ above 0 nats: no binary digit has probability above 1, so this estimate failed (for AIS, its log Ẑ "
              "fell at least that many nats short of log Z).")


def sweep_measured(sweep: dict) -> str:
    """The sentence naming when and where a sweep's rows were measured and how long they took: one sitting, or per sitting
    (rows that record their own ``measured_on``, from runs that added K's to a stored sweep) with its K's."""
    sittings: dict[str, list[dict]] = {}
    for row in sweep["rows"]:
        when = row.get("measured_on", sweep.get("measured_on"))
        if when:
            sittings.setdefault(when, []).append(row)
    parts = []
    for when, rows in sittings.items():
        steps = ", ".join(f"{row['steps']:,}" for row in rows)
        parts.append(f"{when}, {duration(sum(row['seconds'] for row in rows))}" + (f" (K = {steps})" if len(sittings) > 1 else " in all"))
    return f" Measured {'; '.join(parts)}." if parts else ""


def measured_where(results: dict) -> str:
    """``<machine> (measured <date>, <date>); <machine> (…)``: the machines and days the table's rows were measured on
    (each entry's ``trained_on`` is ``<date>, <machine>``), not the machine of whichever run stored results.json last
    (a sweep-only run on another machine changes no row); the results' own machine where no entry records one."""
    by_machine: dict[str, set[str]] = {}
    for entry in results["models"].values():
        date, _, machine = entry.get("trained_on", "").partition(", ")
        if re.fullmatch(r"\d{4}-\d\d-\d\d", date) and machine:
            by_machine.setdefault(machine, set()).add(date)
    return "; ".join(f"{machine} (measured {', '.join(sorted(dates))})" for machine, dates in sorted(by_machine.items(), key=lambda item: min(item[1]))) or hardware(results)


def markdown_table(header: list[str], align: str, rows: list[list[str]]) -> list[str]:
    """The lines of a markdown table; ``align`` holds one letter per column, ``r`` for right-aligned."""
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|",
            *("| " + " | ".join(row) + " |" for row in rows)]


def cell(row: dict, s: dict, key: str) -> str:
    """``mean ± stderr`` (exact: the mean), `` (N chains)`` where AIS ran another chain count, `` ‡`` above 0 nats, `` ⚠``
    where the estimator warned (:func:`cell_warnings` lists the lines)."""
    chains = row.get("chains", s["ais_chains"])
    return (f"{row['mean']:.2f}" + ("" if key == "exact" else f" ± {row['stderr']:.2f}") + (f" ({chains:,} chains)" if chains != s["ais_chains"] else "")
            + (" ‡" if row["mean"] > 0 else "") + (" ⚠" if row.get("warnings") else ""))


def cell_warnings(results: dict) -> list[str]:
    """README lines listing the warnings of the table's cells (none when no cell has any). Cells measured before the
    table recorded warnings (no ``warnings`` in results.json) list none."""
    lines = [f"- {label(name, results)}, {COLUMNS[key.partition('@')[0]]}{' at K = ' + key.partition('@')[2] if '@' in key else ''}: {line}"
             for name in MODELS if name in results["models"] for key, row in results["models"][name]["estimates"].items()
             for line in row.get("warnings", ())]
    return ["", "⚠ The estimator warned (its estimate is not to be trusted as it stands):", "", *lines] if lines else []


def pm(row: dict, key: str) -> str:
    """``row[key] ± row[key_stderr]``."""
    return f"{row[key]:.2f} ± {row[key + '_stderr']:.2f}"


def describe_schedule(spec: str) -> str:
    """``linear`` → ``linear``; ``power:5`` → ``β = 1 − (1 − k/K)^5``; ``sigmoid:4`` → ``sigmoid (δ = 4)``."""
    schedule, name = schedule_from_name(spec), spec.partition(":")[0]
    return {"power": lambda: f"β = 1 − (1 − k/K)^{schedule.power:g}", "sigmoid": lambda: f"sigmoid (δ = {schedule.scale:g})",
            "geometric": lambda: f"geometric from {schedule.start:g}"}.get(name, lambda: name)()


def hardware(results: dict) -> str:
    """Where the wall times were taken: the machine, and the GPU when the run had ``--device cuda``."""
    return f"{results['gpu']} in a {results['machine']}" if results.get("gpu") else results["machine"]




def older_mark(entry: dict) -> str:
    """`` †`` after the label of an entry measured on an older checkpoint than its model now loads (:data:`OLDER`), else nothing."""
    return " †" if entry.get(OLDER) else ""


def older_notes(entries: list[tuple[str, dict]]) -> list[str]:
    """Paragraph lines naming the older checkpoint of each ``(title, entry)`` marked :data:`OLDER` (none when none is)."""
    return ["", *(f"† {title}: measured on an older checkpoint than the one its model now loads: {entry[OLDER]}" for title, entry in entries
                  if entry.get(OLDER))] if any(entry.get(OLDER) for _, entry in entries) else []


def render_table(results: dict) -> str:
    """``table.md``'s markdown from ``results`` (what results.json holds): the estimates, the sweeps and the schedule pilots;
    an entry measured on an older checkpoint (:data:`OLDER`) is marked † and named under its table. Whether each entry's
    checkpoint is the one its model now loads is checked by :func:`pfzoo.studies.raise_results.check_checkpoints`."""
    s, models, rows = results["settings"], results["models"], []
    for name in (n for n in MODELS if n in models):
        estimates = models[name]["estimates"]
        for steps, suffix in ((s["steps"], ""), (s["long_steps"], f"@{s['long_steps']}")):
            if not suffix or f"ais_base_rate{suffix}" in estimates:
                found = {key: estimates.get(key if key in ("exact", "csl") else key + suffix) for key in COLUMNS}
                timed = [row["seconds"] for key, row in found.items() if row is not None and not (suffix and key in ("exact", "csl"))]
                rows.append([f"{label(name, results)}, K = {steps:,}{older_mark(models[name])}",
                             *("—" if row is None else cell(row, s, key) for key, row in found.items()),
                             duration(sum(timed))])
    longer = f"; models with exact values are also run at K = {s['long_steps']:,}" if s["long_steps"] else ""
    long_examples = f" ({s['long_raise_examples']} at the long K)" if s["long_steps"] else ""
    text = [*markdown_table(["model", *COLUMNS.values(), "wall time"], "l" + "r" * (len(COLUMNS) + 1), rows), "", (
        f"Mean test log-likelihood (nats) on the 10,000 binarized-MNIST test digits. K intermediate distributions (linear β) for RAISE and AIS"
        f"{longer}. AIS: {s['ais_chains']:,} chains; for the DBM and DBN log f(v) by "
        f"importance sampling with {s['posterior_samples']} mean-field / recognition proposals per digit; a cell naming its chains used that many. "
        f"RAISE: {s['raise_chains']} reverse chains for each of {s['raise_examples']} random test digits{long_examples}, "
        f"full-set mean by control variates (§4). CSL: {s['csl_chains']} chains × {s['csl_samples']} samples after {s['csl_burn_in']} burn-in "
        "sweeps, started at training digits. ± is each estimator's own standard error (not the test-set sampling error). AIS is biased upward "
        "(log Ẑ is a stochastic lower bound on log Z); RAISE and CSL are stochastic lower bounds. Wall time: the row's estimates one after "
        f"another (a longer K's row: its RAISE and AIS only) on {measured_where(results)}. Every row below records the SHA-256 of the "
        "checkpoint it was measured on and is rendered only if that is the file its model now loads, unless marked † with the "
        "older checkpoint named. ⚠ marks a cell whose estimator warned (listed below; cells measured before the table recorded "
        "warnings show none)." + (
            "" if results.get("csl_stderr") == "shared chains" else " The CSL ± were computed before pfzoo counted that every digit is scored "
            "by the same chains (their errors are correlated): they understate CSL's error, by about 20× on a quick run (0.18 against 0.009)."))]
    text += older_notes([(label(name, results), models[name]) for name in MODELS if name in models])
    text += ["", IMPOSSIBLE] if any(row["mean"] > 0 for entry in models.values() for row in entry["estimates"].values()) else []
    text += cell_warnings(results)
    for key, sweep in results.get("sweeps", {}).items():
        (name, base), w = sweep_model(key), sweep["settings"]
        exact_f = family(name) == "rbm"
        text += ["", f"## {label(name, results)}: AIS and RAISE against K ({SWEEP_BASES[base]})", "",
                 f"![{label(name, results)}: AIS and RAISE against K]({FIGURES}/{key}-against-K.png)", "", *markdown_table(
            ["K", "AIS", "log Ẑ (ESS)", "RAISE", "AIS − RAISE"], "rrrrr", [[f"{r['steps']:,}", pm(r, "ais"), f"{r['ais_log_z']:.2f} ({r['ais_ess']:.1f})",
                                                                            pm(r, "raise"), f"{r['ais'] - r['raise']:+.2f}"] for r in sweep["rows"]]), "",
            f"AIS: {w['sweep_ais_chains']} chains, log f(v) " + ("exact (hidden units summed out) on all test digits" if exact_f else
                                                                 f"by importance sampling with {w['posterior_samples']} proposals on all test "
                                                                 "digits (the log of an unbiased estimate, so biased low: that bias can put AIS "
                                                                 "below RAISE)") + ". RAISE: "
            f"{w['raise_chains']} chains on the same {w['sweep_raise_examples']} random test digits at every K, full-set mean by control variates. "
            "A bracket holds when AIS − RAISE ≥ 0 up to the errors; it pins the log-likelihood down when the gap is small."
            + sweep_measured(sweep)]
        text += older_notes([(f"{label(name, results)}'s sweep", sweep)]) + sweep_warnings(sweep["rows"])
    pilots = {name: results["schedule_pilots"][name] for name in MODELS if name in results.get("schedule_pilots", {})}
    if pilots:
        p = next(iter(results["schedule_pilots"].values()))["settings"]
        validation = [[label(n, results) + older_mark(e), describe_schedule(r["schedule"]) + (" ✓" if r["schedule"] == e["chosen"] else ""), pm(r, "ais"), pm(r, "raise"),
                       f"{r['ais'] - r['raise']:+.2f}", f"{e['exact']['validation']:.2f}" if e["exact"] else "—"]
                      for n, e in pilots.items() for r in e["rows"]]
        test = [[label(n, results) + older_mark(e), describe_schedule(e["chosen"]), pm(t, "ais"), pm(t, "raise"), f"{t['ais'] - t['raise']:+.2f}",
                 *([f"{x['test']:.2f}", f"{t['ais'] - x['test']:+.2f}", f"{t['raise'] - x['test']:+.2f}"] if x else ["—"] * 3)]
                for n, e in pilots.items() for t, x in [(e["test"], e["exact"])]]
        text += ["", "## Choosing the annealing schedule by the bracket (base-rate initialisation)", "",
                 *markdown_table(["model", "schedule", "AIS (validation)", "RAISE (validation)", "AIS − RAISE", "exact (validation)"], "llrrrr", validation),
                 "", *markdown_table(["model", "chosen schedule", "AIS (test)", "RAISE (test)", "AIS − RAISE", "exact (test)", "AIS − exact",
                                      "RAISE − exact"], "llrrrrrr", test), "",
                 (f"K = {p['steps']:,} for every schedule. Pilot: AIS ({p['pilot_ais_chains']:,} chains, also on the test set) and RAISE ({p['raise_chains']} "
                  f"chains per digit) on the same {p['pilot_examples']} random *validation* digits; ✓ marks the schedule with the smallest |AIS − RAISE|, "
                  "a rule that needs no exact value and never sees the test set. The second table runs both on the test set with the chosen schedule "
                  f"(RAISE on {p['raise_examples']} digits with control variates). The schedule changes the annealing model, and with it RAISE's value, "
                  "as much as K does. Where RAISE ends above an exact value, the annealing model fits the test digits better than the RBM itself: "
                  "RAISE bounds p_ann, not p."), *older_notes([(f"{label(n, results)}'s pilot", e) for n, e in pilots.items()])]
    for name, comparison in results.get("heating", {}).items():
        text += ["", *heating_section(label(name, {"models": {name: {"config": comparison["config"]}}}), comparison)]
    return "# RAISE Tables 1–2 on binarized MNIST, reproduced\n\n" + "\n".join(text) + "\n"


def heating_section(title: str, comparison: dict) -> list[str]:
    """The table of :func:`pfzoo.studies.heating_comparison.compare_heating`'s rows, with its settings."""
    w, rows = comparison["settings"], comparison["rows"]
    table = [[f"{r['heating_steps']:,}" + (" (mean field)" if r["heating_steps"] == 0 else ""), f"{r['mean']:.2f} ± {r['stderr']:.2f}",
              f"{r['ess']:.2f} of {w['raise_chains']}", f"{r['paired_difference']:+.2f} ± {r['paired_stderr']:.2f}" if "paired_difference" in r else "—",
              duration(r["seconds"])] for r in rows]
    return [f"## {title}: RAISE's latents from mean field or from Algorithm 3's clamped heating chain", "",
            *markdown_table(["heating sweeps T", "RAISE (mean of the digits' bounds)", "ESS per digit", f"− T = {rows[0]['heating_steps']} (paired)",
                             "wall time"], "rrrrr", table), "",
            (f"RAISE from base rates, K = {w['steps']:,} (linear β), {w['raise_chains']} reverse chains on each of the same {w['heating_examples']} "
             f"random test digits for every T, the chains seeded alike; T heating sweeps draw each chain's latents from the mean-field posterior "
             "and anneal them towards p(h | v) with the digit clamped (DBM.heat_clamped), T = 0 draws them from the mean-field posterior itself. "
             "Every T gives a valid stochastic lower bound (E[w] = p_ann(v) whatever the proposal), so the higher mean is the tighter bound; "
             "the ESS is that of the whole reverse chain's weights, whose spread the annealing dominates. The paired column is the mean "
             f"per-digit difference with its standard error over the digits. Measured {comparison['measured_on']}."
             + (f" {comparison['note']}" if comparison.get("note") else "")
             + (f" Measured on an older checkpoint than the one its model now loads: {comparison[OLDER]}" if comparison.get(OLDER) else ""))]


def model_card(name: str, results: dict, model, folder: str) -> zoo.ModelCard:
    """Model ``name``'s zoo card for its zoo ``folder`` (as the card should name it, e.g. relative to the repository): its
    recipe, the table's estimates, the bracket's verdict and its sweep against K."""
    s, entry = results["settings"], results["models"][name]
    estimates, recipe = entry["estimates"], MODELS[name][1]
    rows = [f"| {key.replace('_', ' ').replace('@', ', K = ')} | {cell(row, s, key)} |" for key, row in estimates.items()]
    measured = "\n".join(["| estimator | value |", "|---|---|", *rows, "", (
        f"K = {s['steps']:,}; AIS {s['ais_chains']} chains; RAISE {s['raise_chains']} chains × {s['raise_examples']} digits\nwith control variates; "
        f"CSL {s['csl_chains']} × {s['csl_samples']} samples.{' ' + IMPOSSIBLE if any('‡' in row for row in rows) else ''} Evaluate again with e.g.\n"
        f"`pfzoo evaluate pretrained={Path(folder).name} estimator=bracket data.root=DIR`.")])
    if "exact" not in estimates:
        headline = conservative_headline(card_measurements(name, results))
        measured += (f"\n\nHeadline (the card's `log_likelihood`, what `pfzoo zoo` lists): **{headline['value']:.2f} ± {headline['stderr']:.2f}**, "
                     f"{headline['headline_rule']}: AIS overstates the likelihood when its log Ẑ falls short, RAISE understates it.")
    gap = estimates["ais_base_rate"]["mean"] - estimates["raise_base_rate"]["mean"] if {"ais_base_rate", "raise_base_rate"} <= estimates.keys() else 0.0
    longest = max((row for base, sweep in card_sweeps(name, results) if base == "base_rate" for row in sweep["rows"]), key=lambda row: row["steps"], default=None)
    if gap > 1.0 and longest is not None and longest["steps"] > s["steps"] and abs(longest["ais"] - longest["raise"]) <= 1.0:
        measured += (f"\n\nWith base-rate initialisation AIS is {gap:.1f} nats above RAISE at K = {s['steps']:,}; at K = {longest['steps']:,} "
                     f"the two are {longest['ais'] - longest['raise']:+.2f} apart (the sweep below), where the headline is measured.")
    elif gap > 1.0:
        measured += (f"\n\n**Warning: with base-rate initialisation AIS is {gap:.1f} nats above RAISE at K = {s['steps']:,}: "
                     "the test log-likelihood is only bracketed, not pinned down.**")
    elif gap < -1.0:
        measured += (f"\n\n**Note: with base-rate initialisation RAISE is {-gap:.1f} nats above AIS at K = {s['steps']:,}. RAISE bounds the annealing "
                     "model's likelihood, not this model's, so either the annealing model fits the test digits better than the model does (RAISE §3; "
                     "common for under-trained models) or AIS's log Ẑ overshot (a heavy-tailed weight: look at its ESS). Either way the two do not "
                     "bracket the model's log-likelihood here.**")
    sections = [("Measured mean test log-likelihood (nats, 10,000 test digits)", measured)]
    for base, sweep in card_sweeps(name, results):
        w = sweep["settings"]
        sections.append((f"AIS and RAISE against K ({CARD_BASES[base]})", "\n".join([*markdown_table(["K", "AIS", "RAISE", "AIS − RAISE"], "rrrr", [
            [f"{r['steps']:,}", pm(r, "ais"), pm(r, "raise"), f"{r['ais'] - r['raise']:+.2f}"] for r in sweep["rows"]]), "",
            (f"AIS {w['sweep_ais_chains']} chains; RAISE {w['raise_chains']} chains on the same {w['sweep_raise_examples']} test digits at every K "
             f"(control variates); see `estimators/raise/table.md`.{sweep_measured(sweep)}")])))
    return zoo.ModelCard(
        title=f"{family(name)}-binarized_mnist ({label(name, results)})",
        summary=(f"Trained and measured by {command_markdown('python scripts/reproduce_raise.py')}; last measured "
                 f"{entry['trained_on']} (`--from-zoo` re-measures without retraining)."),
        facts=[("architecture", f"`pfzoo.models.{type(model).__name__}`, config `{model.config()}`"),
               ("data", "`dataset=binarized_mnist` (Larochelle & Murray's fixed binarisation; 50,000 train, 10,000 test), read from `data.root`"),
               ("training", f"{command_markdown(f'python scripts/train.py +experiment={recipe} data.root=DIR')} "
                            f"(`conf/experiment/{recipe}.yaml`)"),
               *([("training time", training_fact(entry["training"]))] if entry.get("training") else []),
               ("file", f"`checkpoint.pt`: load with `pfzoo.zoo.pretrained({Path(folder).name!r})` (or `pfzoo.zoo.load(path)`)")],
        sections=sections)


LICENCE = "CC BY-SA 3.0: MNIST (LeCun, Cortes & Burges), binarised by Larochelle & Murray (2011)"
KINDS = {"exact": BoundKind.EXACT, "csl": BoundKind.LIKELIHOOD_LOWER_BOUND, "raise": BoundKind.LIKELIHOOD_LOWER_BOUND, "ais": BoundKind.UNBIASED_Z}








def measurement(key: str, row: dict, s: dict, num_test: int, measured_on: str | None = None) -> dict:
    """One results.json estimate as a card measurement (:data:`pfzoo.zoo.CARD_FIELDS`' ``log_likelihood`` layout);
    ``measured_on``: the day and machine of its entry."""
    estimator, _, rest = key.partition("_")
    base, _, long_steps = rest.partition("@")
    steps = int(long_steps) if long_steps else s["steps"]
    settings = {"exact": {}, "csl": {"num_chains": s["csl_chains"], "samples_per_chain": s["csl_samples"], "burn_in": s["csl_burn_in"]},
                "raise": {"num_chains": s["raise_chains"], "num_steps": steps, "base": base,
                          "num_examples": s["long_raise_examples"] if long_steps else s["raise_examples"]},
                "ais": {"num_chains": row.get("chains", s["ais_chains"]), "num_steps": steps, "base": base,
                        "posterior_samples": s["posterior_samples"]}}[estimator]
    label = estimator if estimator in ("csl", "exact") else f"{estimator} {base.replace('_', ' ')}, K = {steps:,}"
    extra = {name: row[name] for name in ("log_z", "log_z_stderr", "ess") if name in row}
    return {"label": label, "estimator": estimator, "kind": KINDS[estimator].value, "value": row["mean"], "stderr": row["stderr"],
            "data_stderr": None, "num_test": num_test, "settings": settings, "seconds": row.get("seconds"), "warnings": [], **extra,
            **({"measured_on": measured_on} if measured_on else {})}


CARD_BASES = {"base_rate": "base rates", "uniform": "uniform start"}  # a card's words for a sweep's initial distribution


def card_sweeps(name: str, results: dict) -> list[tuple[str, dict]]:
    """``(base, sweep)`` for each of model ``name``'s sweeps against K in ``results`` that was measured on the checkpoint
    of the model's row (a sweep of another or an older checkpoint describes another model, so its card leaves it out)."""
    sha, sweeps = results["models"][name].get("checkpoint_sha256"), results.get("sweeps", {})
    return [(base, sweeps[sweep_key(name, base)]) for base in SWEEP_BASES if sweep_key(name, base) in sweeps
            and sweeps[sweep_key(name, base)].get("checkpoint_sha256") == sha and not sweeps[sweep_key(name, base)].get(OLDER)]


def sweep_measurements(name: str, results: dict) -> list[dict]:
    """Card measurements (:func:`measurement`'s layout) of AIS and RAISE at the largest K of each of model ``name``'s
    sweeps (:func:`card_sweeps`), labelled with their chains (the sweep's, not the table's) and ``measured_on``."""
    rows = []
    for base, sweep in card_sweeps(name, results):
        w, point = sweep["settings"], max(sweep["rows"], key=lambda row: row["steps"])
        steps, words, when = point["steps"], base.replace("_", " "), point.get("measured_on", sweep.get("measured_on"))
        common = {"data_stderr": None, "num_test": 10_000, "seconds": None, **({"measured_on": when} if when else {})}
        rows.append({"label": f"ais {words}, K = {steps:,}, {w['sweep_ais_chains']} chains", "estimator": "ais", "kind": KINDS["ais"].value,
                     "value": point["ais"], "stderr": point["ais_stderr"], "log_z": point["ais_log_z"], "ess": point["ais_ess"],
                     "settings": {"num_chains": w["sweep_ais_chains"], "num_steps": steps, "base": base, "posterior_samples": w["posterior_samples"]},
                     "warnings": [text for text in point.get("warnings", []) if text.startswith("AIS")], **common})
        rows.append({"label": f"raise {words}, K = {steps:,}, {w['raise_chains']} chains × {w['sweep_raise_examples']} digits", "estimator": "raise",
                     "kind": KINDS["raise"].value, "value": point["raise"], "stderr": point["raise_stderr"],
                     "settings": {"num_chains": w["raise_chains"], "num_steps": steps, "base": base, "num_examples": w["sweep_raise_examples"]},
                     "warnings": [text for text in point.get("warnings", []) if text.startswith("RAISE")], **common})
    return rows


def card_measurements(name: str, results: dict) -> list[dict]:
    """Every card measurement of model ``name``: its row's estimates (:func:`measurement`) and its sweeps' largest K
    (:func:`sweep_measurements`), from which :func:`conservative_headline` chooses."""
    entry = results["models"][name]
    when = entry.get("trained_on")  # the day and machine the row was (last) measured on
    return ([measurement(key, row, results["settings"], 10_000, when) for key, row in entry["estimates"].items()]
            + sweep_measurements(name, results))


def conservative_headline(rows: list[dict]) -> dict:
    """The headline a careful reader accepts (issue 48) among card measurements ``rows``: at the largest K with both AIS
    and RAISE rows, the lower of the most conservative AIS (the lowest: the start whose log Ẑ came out highest, since AIS
    overstates the likelihood) and the tightest RAISE (the highest: each start's RAISE is a stochastic lower bound). A copy
    of that row with ``headline_rule`` saying so: both candidates with their labels (K, start, chains), AIS's log Ẑ, where
    they were measured (``measured_on``), and whether AIS had only one start at that K."""
    by_steps: dict[int, dict[str, list[dict]]] = {}
    for row in rows:
        if row["estimator"] in ("ais", "raise"):
            by_steps.setdefault(row["settings"]["num_steps"], {}).setdefault(row["estimator"], []).append(row)
    both = [steps for steps, kinds in by_steps.items() if len(kinds) == 2]
    if not both:
        raise ValueError(f"rows hold no K with both AIS and RAISE estimates to choose a headline from: {[row['label'] for row in rows]}")
    steps = max(both)
    ais = min(by_steps[steps]["ais"], key=lambda row: row["value"])
    tightest_raise = max(by_steps[steps]["raise"], key=lambda row: row["value"])
    chosen = min(ais, tightest_raise, key=lambda row: row["value"])
    log_z = f", log Ẑ {ais['log_z']:.2f}" if "log_z" in ais else ""
    starts = {row["settings"].get("base") for row in by_steps[steps]["ais"]}
    only = f" (AIS from one start only at this K: {ais['settings'].get('base', '?').replace('_', ' ')})" if len(starts) < 2 else ""
    rule = (f"the lower of AIS's lowest start ({ais['label']}: {ais['value']:.2f}{log_z}) and RAISE's highest ({tightest_raise['label']}: "
            f"{tightest_raise['value']:.2f}) at K = {steps:,}{only}")
    where = list(dict.fromkeys(row["measured_on"] for row in (ais, tightest_raise) if row.get("measured_on")))
    return {**chosen, "headline_rule": rule + (f", measured {' and '.join(where)}" if where else "")}


def card_fields(name: str, results: dict, model, config: dict | None, *, git_commit: str | None, kept: list[dict] = ()) -> dict:
    """Model ``name``'s ``card.json`` fields from ``results`` (:data:`pfzoo.zoo.CARD_FIELDS`): the headline is the exact
    log-likelihood where the model has one, else :func:`conservative_headline`; every other estimate is a measurement.
    ``config`` is the training run's stored config (made portable here); ``kept`` are measurements to carry over (a
    linear-classifier section of the same checkpoint)."""
    entry, recipe = results["models"][name], MODELS[name][1]
    rows = card_measurements(name, results)
    headline = next((row for row in rows if row["estimator"] == "exact"), None) or conservative_headline(rows)
    folder = zoo_folder(name, Path("."))
    portable = None if config is None else zoo.portable_config(config)
    return {
        "name": folder.name,
        "title": f"{folder.name} ({label(name, results)})",
        "family": type(model).registry_name,
        "model_config_name": family(name),
        "model_config": model.config(),
        "dataset": "binarized_mnist",
        "dataset_config": (portable or {}).get("dataset", {"_target_": "pfzoo.data.binarized_mnist", "root": None}),
        "data_licence": LICENCE,
        "recipe": {"experiment": recipe, "command": f"python scripts/train.py +experiment={recipe} data.root=DIR", "config": portable},
        "log_likelihood": headline,
        "log_likelihood_at_init": None,
        "measurements": [row for row in rows if row["label"] != headline["label"]] + list(kept),
        "date": entry["trained_on"].split(",")[0] if re.match(r"\d{4}-\d\d-\d\d", entry["trained_on"]) else datetime.date.today().isoformat(),
        "pfzoo_version": pfzoo.__version__,
        "git_commit": git_commit,
        "training_seconds": (entry.get("training") or {}).get("seconds"),
        "notes": ["Trained and measured by scripts/reproduce_raise.py (estimators/raise/results.json), which renders README.md too."],
    }
