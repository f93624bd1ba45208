"""Reproduce the layout of RAISE Tables 1–2 (Burda, Grosse & Salakhutdinov 2015) on binarized MNIST.

    python scripts/reproduce_raise.py [--models cd1-20 ...] [--steps 10000] [--from-zoo models] [--export-zoo models]
        [--sweep-steps 1000 10000 --sweep-models ...] [--schedule-pilot linear power:5 ... --pilot-models ...]
    python scripts/reproduce_raise.py --quick                     # smoke run → reports/raise/quick/
    python scripts/reproduce_raise.py --paper-scale --device cuda --from-zoo models   # Table 1's settings → estimators/raise/paper_scale/
    python scripts/reproduce_raise.py --render estimators/raise/results.json [--export-zoo models]

Trains (or resumes, or with ``--from-zoo`` reuses) each model of :data:`MODELS` by its recipe
``conf/experiment/<recipe>.yaml`` (``python scripts/train.py +experiment=<recipe>`` trains it too), then measures
on the 10,000 test digits: the exact log-likelihood (20-hidden-unit RBMs), CSL, and RAISE and AIS from uniform and
base-rate initial distributions (RAISE on a random subset with control variates). ``--sweep-steps``: AIS and RAISE
against K (:func:`pfzoo.studies.bracket_sweep.bracket_sweep`). ``--schedule-pilot``: per model, the schedule that
closes their gap on validation digits (:func:`pfzoo.studies.schedule_pilot.pilot_schedule`), then the test set
with it. Writes ``<output>/table.md`` and ``results.json``; ``--export-zoo DIR`` puts each model and its card into
``DIR/<family>-binarized_mnist[-<name>]`` (:func:`pfzoo.zoo.export`). Each table row states the wall time of its
estimates, on the device named under the table (``--device cpu`` or ``cuda``: models, data and random streams live there).

``--paper-scale`` measures with RAISE Table 1's own settings (:data:`PAPER_SCALE`): K = 10⁵ intermediate
distributions, AIS with 5,000 chains, RAISE with 50 reverse chains on each of 100 random test digits and
control variates for the full-set mean, both initial distributions (uniform and base rates), and no second, longer K.
That is 500 times the AIS chain-steps and 100 times the RAISE chain-steps of the default settings, whose estimates took
14 s to 11 minutes each on a 2-core CPU: run it with ``--device cuda``. It writes into ``estimators/raise/paper_scale/``
by default, so the default table stays. The default settings (:data:`SETTINGS`) are the scaled-down ones that CPU runs can afford.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import logging
import os
import re
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from pfzoo import app, zoo
from pfzoo.cli import compose
from pfzoo.data import DataSplits, binarized_mnist
from pfzoo.data.root import resolve_data_root
from pfzoo.estimators import AIS, CSL, RAISE, Bracket
from pfzoo.models import Capability
from pfzoo.paths import schedule_from_name
from pfzoo.studies.bracket_sweep import bracket_sweep
from pfzoo.studies.reporting import device_name, load_average, machine_description
from pfzoo.studies.schedule_pilot import pilot_schedule

REPO = Path(__file__).resolve().parents[1]
MODELS = {"cd1-20": ("CD1(20)", "raise_rbm_cd1_20"), "pcd-20": ("PCD(20)", "raise_rbm_pcd_20"), "cd1-500": ("CD1(500)", "raise_rbm_cd1_500"),
          "pcd-500": ("PCD(500)", "raise_rbm_pcd_500"), "cd25-500": ("CD25(500)", "raise_rbm_cd25_500"),
          "dbm-500-1000": ("DBM (500–1000)", "raise_dbm_500_1000"), "dbn-500-1000": ("DBN (500–1000)", "raise_dbn_500_1000")}
"""Name → (table label, recipe in conf/experiment/)."""
AIS_CHAINS = {"dbm-500-1000": {"base_rate": 1000}}  # at least: the DBM's base-rate AIS weights are heavy-tailed at 100 chains (ESS 5.5)
SETTINGS = {"steps": 10_000, "long_steps": 100_000, "ais_chains": 100, "posterior_samples": 100, "raise_chains": 10,
            "raise_examples": 50, "long_raise_examples": 20, "csl_chains": 10, "csl_samples": 1000, "csl_burn_in": 100}
QUICK = {"steps": 100, "long_steps": 200, "ais_chains": 10, "posterior_samples": 5, "raise_chains": 2, "raise_examples": 10,
         "long_raise_examples": 5, "csl_samples": 20, "csl_burn_in": 5}
PAPER_SCALE = {"steps": 100_000, "long_steps": 0, "ais_chains": 5000, "raise_chains": 50, "raise_examples": 100}
"""RAISE Table 1's settings (Burda, Grosse & Salakhutdinov 2015), what ``--paper-scale`` puts over :data:`SETTINGS`; its single K, so no long K."""
QUICK_PILOT = {"pilot_examples": 5, "pilot_ais_chains": 10}
QUICK_TRAINING = {"trainer.epochs": 1, "trainer.objective.pretrain.epochs_per_layer": 1, "model.num_hidden": 10, "model.hidden_sizes": [10, 10]}
SECTIONS = ("models", "sweeps", "schedule_pilots")


def label(name: str, results: dict) -> str:
    """Model ``name``'s table label from the sizes it was measured with (a quick run's 10-unit models are not called
    "CD1(500)"): the recipe's label with the stored config's hidden sizes, e.g. ``CD1(10)`` or ``DBM (10–10)``."""
    config = results.get("models", {}).get(name, {}).get("config") or {}
    sizes = config.get("layer_sizes", [None])[1:] if "layer_sizes" in config else [config.get("num_hidden")]
    if None in sizes or not sizes:
        return MODELS[name][0]
    return re.sub(r"\(\d+(–\d+)?\)", "(" + "–".join(str(size) for size in sizes) + ")", MODELS[name][0])


def family(name: str) -> str:
    return MODELS[name][1].split("_")[1]


def zoo_folder(name: str, zoo_dir: Path) -> Path:
    return zoo_dir / zoo.folder_name(family(name), "binarized_mnist", name if family(name) == "rbm" else None)


def train(name: str, runs_dir: Path, data_root: Path, quick: bool, device: torch.device) -> Path:
    """Train (or resume to completion) model ``name`` in ``<runs_dir>/<name>`` on ``device``; quick: tiny layers, one epoch."""
    cfg = compose("train", [f"+experiment={MODELS[name][1]}", "trainer.progress=false", f"run_dir={runs_dir / name}", f"data.root={data_root}",
                            "resume=true", f"device={device}"])
    for key, value in QUICK_TRAINING.items() if quick else ():
        if OmegaConf.select(cfg, key) is not None:
            OmegaConf.update(cfg, key, value)
    return Path(app.train(cfg)["checkpoint"])


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
            rows[key] = {"mean": estimate.mean, "stderr": estimate.stderr, "seconds": round(time.perf_counter() - began, 1), **extra}
            if estimate.partition is not None:
                rows[key].update(log_z=estimate.partition.log_z, log_z_stderr=estimate.partition.stderr, ess=estimate.partition.ess)
            print(f"  {key:<18} {estimate.mean:10.3f} ± {estimate.stderr:.3f}   ({rows[key]['seconds']} s)", flush=True)

    if (only is None or "exact" in only) and has_exact_likelihood(model):
        began = time.perf_counter()
        with torch.no_grad():
            rows["exact"] = {"mean": model.log_prob(data.test).mean().item(), "stderr": 0.0, "seconds": round(time.perf_counter() - began, 1)}
        print(f"  {'exact':<18} {rows['exact']['mean']:10.3f}", flush=True)
    record("csl", CSL(s["csl_chains"], s["csl_samples"], burn_in=s["csl_burn_in"]))
    for steps in [s["steps"]] + ([s["long_steps"]] if "exact" in rows and s["long_steps"] else []):
        suffix, examples = ("", s["raise_examples"]) if steps == s["steps"] else (f"@{steps}", s["long_raise_examples"])
        for base in ("uniform", "base_rate"):
            record(f"raise_{base}{suffix}", RAISE(s["raise_chains"], steps, base=base, num_examples=examples))
        for base in ("uniform", "base_rate"):
            chains = max(ais_chains.get(base, 0), s["ais_chains"])
            record(f"ais_{base}{suffix}", AIS(chains, steps, schedule="linear", base=base, posterior_samples=s["posterior_samples"]), chains=chains)
    return rows


def point_row(point) -> dict:
    return {"steps": point.num_steps, "schedule": point.schedule, "ais": point.upper, "ais_stderr": point.upper_stderr, "ais_log_z": point.log_z,
            "ais_ess": point.ess, "raise": point.lower, "raise_stderr": point.lower_stderr, "seconds": point.seconds}


def schedule_pilot(model, data, schedules: list[str], s: dict, seed: int) -> dict:
    """The schedule with the smallest |AIS − RAISE| on ``pilot_examples`` random validation digits, then the test set with it."""
    validation = data.valid[torch.randperm(data.valid.shape[0], generator=torch.Generator().manual_seed(seed + 3))[: s["pilot_examples"]]]
    pilot = pilot_schedule(model, validation, schedules, num_steps=s["steps"], ais_chains=s["pilot_ais_chains"], raise_chains=s["raise_chains"],
                           posterior_samples=s["posterior_samples"], base="base_rate", base_data=data.train,
                           generator=seeded(model.device, seed + 1), raise_generator=seeded(model.device, seed + 2))
    print(f"  chosen: {pilot.chosen}; measuring the test set with it", flush=True)
    with torch.no_grad():
        exact = ({"validation": model.log_prob(validation).mean().item(), "test": model.log_prob(data.test).mean().item()}
                 if has_exact_likelihood(model) else None)
    both = Bracket(AIS(s["pilot_ais_chains"], s["steps"], schedule=pilot.chosen, base="base_rate", posterior_samples=s["posterior_samples"]),
                   RAISE(s["raise_chains"], s["steps"], schedule=pilot.chosen, base="base_rate", num_examples=s["raise_examples"]))
    estimate = both.log_likelihood(model, data.test, base_data=data.train, generator=seeded(model.device, seed))
    test = {"ais": estimate.upper.mean, "ais_stderr": estimate.upper.stderr, "ais_ess": estimate.upper.partition.ess,
            "raise": estimate.lower.mean, "raise_stderr": estimate.lower.stderr}
    print(f"  test set: AIS {pm(test, 'ais')}, RAISE {pm(test, 'raise')}", flush=True)
    return {"rows": [point_row(point) for point in pilot.points], "chosen": pilot.chosen, "test": test, "exact": exact}


def seeded(device: torch.device, seed: int) -> torch.Generator:
    return torch.Generator(device).manual_seed(seed)


def comparable(stored: dict, results: dict) -> bool:
    """Whether ``stored`` results belong in the same table as ``results``: the same settings, and wall times from the same kind of device."""
    return stored.get("settings") == results["settings"] and stored.get("gpu") == results["gpu"]


def store(results_file: Path, results: dict, section: str, name: str, entry: dict, fresh: bool) -> None:
    """Set ``results[section][name]`` and write results.json, keeping what another run (other models) wrote meanwhile."""
    latest = json.loads(results_file.read_text()) if results_file.is_file() and not fresh else {}
    if comparable(latest, results):
        results.update({key: {**latest.get(key, {}), **results[key]} for key in SECTIONS})
    results[section][name] = entry
    results_file.write_text(json.dumps(results, indent=2) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=None, help="folder holding binarized_mnist/ (default $PFZOO_DATA or ../shared/data)")
    parser.add_argument("--runs-dir", type=Path, default=None, help="training runs (default runs/reproduce_raise[/quick])")
    parser.add_argument("--output", type=Path, default=None, help="for table.md and results.json (default estimators/raise; quick: reports/raise/quick)")
    parser.add_argument("--models", nargs="*", choices=list(MODELS), default=list(MODELS), help="models to measure (none: only sweeps and pilots)")
    for key, default in SETTINGS.items():
        parser.add_argument("--" + key.replace("_", "-"), type=int, default=default)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    scale = parser.add_mutually_exclusive_group()
    scale.add_argument("--quick", action="store_true", help="1 training epoch, 10 hidden units, K = 100, small chains: a smoke run")
    scale.add_argument("--paper-scale", action="store_true", help="RAISE Table 1's settings (PAPER_SCALE over the size options), meant for --device cuda")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where models, data and chains live (training too)")
    parser.add_argument("--render", type=Path, metavar="RESULTS_JSON", help="measure nothing: rewrite table.md (with --export-zoo also the cards)")
    parser.add_argument("--from-zoo", type=Path, help="measure the checkpoints already in this zoo folder (e.g. models) instead of training")
    parser.add_argument("--export-zoo", type=Path, help="copy checkpoints and model cards into this zoo folder")
    parser.add_argument("--sweep-steps", type=int, nargs="+", help="also run AIS and RAISE at each of these K on --sweep-models")
    parser.add_argument("--sweep-models", nargs="+", choices=list(MODELS), default=["dbm-500-1000"])
    parser.add_argument("--sweep-ais-chains", type=int, default=300)
    parser.add_argument("--sweep-raise-examples", type=int, default=20)
    parser.add_argument("--schedule-pilot", type=schedule_name, nargs="+", metavar="SCHEDULE",
                        help="per --pilot-models, the schedule (linear, sigmoid, power:<p>, …) with the smallest |AIS − RAISE| on validation digits")
    parser.add_argument("--pilot-models", nargs="+", choices=list(MODELS), default=["cd1-20", "pcd-20"])
    parser.add_argument("--pilot-examples", type=int, default=20, help="validation digits of the schedule pilot")
    parser.add_argument("--pilot-ais-chains", type=int, default=1000, help="AIS chains of the pilot and its test run (100 let one heavy-tailed weight decide)")
    parser.add_argument("--only", nargs="+", metavar="KEY", help="measure only these cells (exact, csl, raise_uniform, ..., ais_base_rate, with @<K> "
                        "for the long K), keeping the model's other cells from results.json")
    args = parser.parse_args(argv)
    if args.render is not None:
        return render(json.loads(args.render.read_text()), args.output or args.render.parent, args.export_zoo)
    torch.set_num_threads(args.threads)
    device = app.resolve_device(args.device)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    data_root = args.data_root or resolve_data_root(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")
    if not (data_root / "binarized_mnist").is_dir():
        parser.error(f"{data_root}/binarized_mnist is missing; pass --data-root or set PFZOO_DATA")
    output = args.output or (REPO / "reports" / "raise" / "quick" if args.quick else REPO / "estimators" / "raise" / ("paper_scale" if args.paper_scale else ""))
    runs_dir = args.runs_dir or REPO / "runs" / "reproduce_raise" / ("quick" if args.quick else "")
    settings = {key: getattr(args, key) for key in SETTINGS} | (QUICK if args.quick else PAPER_SCALE if args.paper_scale else {})
    data, results_file = on_device(binarized_mnist(data_root), device), output / "results.json"
    output.mkdir(parents=True, exist_ok=True)
    previous = json.loads(results_file.read_text()) if results_file.is_file() and not args.quick else {}
    results = {"machine": machine_description(), "gpu": device_name(device) if device.type == "cuda" else None, "settings": settings, "seed": args.seed,
               "csl_stderr": "shared chains"}
    results |= {key: previous.get(key, {}) if comparable(previous, results) else {} for key in SECTIONS}
    measured_on = f"{datetime.date.today().isoformat()}, {hardware(results)}"

    def checkpoint_of(name: str) -> Path:
        if args.from_zoo is not None:
            return zoo_folder(name, args.from_zoo) / zoo.CHECKPOINT_FILE
        print(f"{name}: training (or resuming) in {runs_dir / name}", flush=True)
        return train(name, runs_dir, data_root, args.quick, device)

    for name in args.models:
        checkpoint = checkpoint_of(name)
        model = zoo.load(checkpoint, map_location=device)
        print(f"{name}: measuring", flush=True)
        estimates = measure(model, data, settings, seeded(device, args.seed), ais_chains={} if args.quick else AIS_CHAINS.get(name, {}),
                            only=args.only)
        if args.only is not None:  # re-measured cells replace their old values; the others are kept
            estimates = {**results["models"].get(name, {}).get("estimates", {}), **estimates}
        kept = zoo_folder(name, args.export_zoo) / zoo.CHECKPOINT_FILE if args.export_zoo is not None else checkpoint  # not a scratch run's
        store(results_file, results, "models", name, {"checkpoint": repo_relative(kept), "config": model.config(), "estimates": estimates,
                                                      "trained_on": measured_on, "load_average": load_average()}, args.quick)
        if args.export_zoo is not None:
            zoo.export(checkpoint, zoo_folder(name, args.export_zoo), card=model_card(name, results, model, zoo_folder(name, args.export_zoo)))
    for name in args.sweep_models if args.sweep_steps else ():
        s = {**settings, "sweep_ais_chains": args.sweep_ais_chains, "sweep_raise_examples": args.sweep_raise_examples}
        print(f"{name}: AIS and RAISE against K", flush=True)
        points = bracket_sweep(zoo.load(checkpoint_of(name), map_location=device), data.test, num_steps=args.sweep_steps,
                               ais_chains=s["sweep_ais_chains"], raise_chains=s["raise_chains"], raise_examples=s["sweep_raise_examples"],
                               posterior_samples=s["posterior_samples"], base="base_rate", base_data=data.train,
                               generator=seeded(device, args.seed + 1), raise_generator=seeded(device, args.seed + 2))
        store(results_file, results, "sweeps", name, {"settings": s, "rows": [point_row(p) for p in points], "measured_on": measured_on}, args.quick)
    for name in args.pilot_models if args.schedule_pilot else ():
        s = {**settings, "pilot_examples": args.pilot_examples, "pilot_ais_chains": args.pilot_ais_chains} | (QUICK_PILOT if args.quick else {})
        print(f"{name}: choosing the schedule among {', '.join(args.schedule_pilot)}", flush=True)
        pilot = schedule_pilot(zoo.load(checkpoint_of(name), map_location=device), data, args.schedule_pilot, s, args.seed)
        store(results_file, results, "schedule_pilots", name, {**pilot, "settings": s, "measured_on": measured_on}, args.quick)
    render(results, output, None)


def on_device(data: DataSplits, device: torch.device) -> DataSplits:
    return dataclasses.replace(data, **{split: getattr(data, split).to(device) for split in ("train", "valid", "test")})


def schedule_name(spec: str) -> str:
    """``--schedule-pilot``'s argument type: a name :func:`pfzoo.paths.schedule_from_name` reads (``linear``, ``power:5``, …)."""
    try:
        schedule_from_name(spec)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return spec


def repo_relative(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it (results.json must not name local folders)."""
    resolved = path.resolve()
    return str(resolved.relative_to(REPO) if resolved.is_relative_to(REPO) else path)


# ---- rendering: table.md and the zoo's cards, from the content of results.json alone -------------------------------

COLUMNS = {"exact": "exact", "csl": "CSL", "raise_uniform": "RAISE uniform", "raise_base_rate": "RAISE base rate",
           "ais_uniform": "AIS uniform", "ais_base_rate": "AIS base rate"}
IMPOSSIBLE = ("‡ above 0 nats: no binary digit has probability above 1, so this estimate failed (for AIS, its log Ẑ "
              "fell at least that many nats short of log Z).")


def markdown_table(header: list[str], align: str, rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|",
            *("| " + " | ".join(row) + " |" for row in rows)]


def cell(row: dict, s: dict, key: str) -> str:
    """``mean ± stderr`` (exact: the mean), `` (N chains)`` where AIS ran another chain count, `` ‡`` above 0 nats."""
    chains = row.get("chains", s["ais_chains"])
    return (f"{row['mean']:.2f}" + ("" if key == "exact" else f" ± {row['stderr']:.2f}") + (f" ({chains:,} chains)" if chains != s["ais_chains"] else "")
            + (" ‡" if row["mean"] > 0 else ""))


def pm(row: dict, key: str) -> str:
    return f"{row[key]:.2f} ± {row[key + '_stderr']:.2f}"


def describe_schedule(spec: str) -> str:
    """``linear`` → ``linear``; ``power:5`` → ``β = 1 − (1 − k/K)^5``; ``sigmoid:4`` → ``sigmoid (δ = 4)``."""
    schedule, name = schedule_from_name(spec), spec.partition(":")[0]
    return {"power": lambda: f"β = 1 − (1 − k/K)^{schedule.power:g}", "sigmoid": lambda: f"sigmoid (δ = {schedule.scale:g})",
            "geometric": lambda: f"geometric from {schedule.start:g}"}.get(name, lambda: name)()


def hardware(results: dict) -> str:
    """Where the wall times were taken: the machine, and the GPU when the run had ``--device cuda``."""
    return f"{results['gpu']} in a {results['machine']}" if results.get("gpu") else results["machine"]


def duration(seconds: float) -> str:
    """``42.0 s``, ``12.5 min`` or ``3.20 h``."""
    return f"{seconds:.1f} s" if seconds < 60 else f"{seconds / 60:.1f} min" if seconds < 3600 else f"{seconds / 3600:.2f} h"


def render(results: dict, output: Path, zoo_dir: Path | None) -> None:
    """Write ``<output>/table.md``; with ``zoo_dir`` also each model's card there (the checkpoints are left as they are)."""
    s, models, rows = results["settings"], results["models"], []
    for name in (n for n in MODELS if n in models):
        estimates = models[name]["estimates"]
        for steps, suffix in ((s["steps"], ""), (s["long_steps"], f"@{s['long_steps']}")):
            if not suffix or f"ais_base_rate{suffix}" in estimates:
                found = {key: estimates.get(key if key in ("exact", "csl") else key + suffix) for key in COLUMNS}
                timed = [row["seconds"] for key, row in found.items() if row is not None and not (suffix and key in ("exact", "csl"))]
                rows.append([f"{label(name, results)}, K = {steps:,}", *("—" if row is None else cell(row, s, key) for key, row in found.items()),
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
        f"another (a longer K's row: its RAISE and AIS only) on {hardware(results)}." + (
            "" if results.get("csl_stderr") == "shared chains" else " The CSL ± were computed before pfzoo counted that every digit is scored "
            "by the same chains (their errors are correlated): they understate CSL's error, by about 20× on a quick run (0.18 against 0.009)."))]
    text += ["", IMPOSSIBLE] if any(row["mean"] > 0 for entry in models.values() for row in entry["estimates"].values()) else []
    for name, sweep in results.get("sweeps", {}).items():
        w, exact_f = sweep["settings"], family(name) == "rbm"
        text += ["", f"## {label(name, results)}: AIS and RAISE against K (base-rate initialisation)", "", *markdown_table(
            ["K", "AIS", "log Ẑ (ESS)", "RAISE", "AIS − RAISE"], "rrrrr", [[f"{r['steps']:,}", pm(r, "ais"), f"{r['ais_log_z']:.2f} ({r['ais_ess']:.1f})",
                                                                            pm(r, "raise"), f"{r['ais'] - r['raise']:+.2f}"] for r in sweep["rows"]]), "",
            f"AIS: {w['sweep_ais_chains']} chains, log f(v) " + ("exact (hidden units summed out)" if exact_f else f"by importance sampling with "
                                                                 f"{w['posterior_samples']} proposals") + " on all test digits. RAISE: "
            f"{w['raise_chains']} chains on the same {w['sweep_raise_examples']} random test digits at every K, full-set mean by control variates. "
            "A bracket holds when AIS − RAISE ≥ 0 up to the errors; it pins the log-likelihood down when the gap is small."]
    pilots = {name: results["schedule_pilots"][name] for name in MODELS if name in results.get("schedule_pilots", {})}
    if pilots:
        p = next(iter(results["schedule_pilots"].values()))["settings"]
        validation = [[label(n, results), describe_schedule(r["schedule"]) + (" ✓" if r["schedule"] == e["chosen"] else ""), pm(r, "ais"), pm(r, "raise"),
                       f"{r['ais'] - r['raise']:+.2f}", f"{e['exact']['validation']:.2f}" if e["exact"] else "—"]
                      for n, e in pilots.items() for r in e["rows"]]
        test = [[label(n, results), describe_schedule(e["chosen"]), pm(t, "ais"), pm(t, "raise"), f"{t['ais'] - t['raise']:+.2f}",
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
                  "RAISE bounds p_ann, not p.")]
    output.mkdir(parents=True, exist_ok=True)
    (output / "table.md").write_text("# RAISE Tables 1–2 on binarized MNIST, reproduced\n\n" + "\n".join(text) + "\n")
    print(f"wrote {output / 'table.md'}" + (f" and the cards of {', '.join(models)} in {zoo_dir}" if zoo_dir is not None else ""))
    for name in models if zoo_dir is not None else ():
        checkpoint = zoo_folder(name, zoo_dir) / zoo.CHECKPOINT_FILE
        zoo.export(checkpoint, checkpoint.parent, card=model_card(name, results, zoo.load(checkpoint), checkpoint.parent))


def model_card(name: str, results: dict, model, folder: Path) -> zoo.ModelCard:
    """Model ``name``'s zoo card in ``folder``: its recipe, the table's estimates, the bracket's verdict and its sweep against K."""
    s, entry, sweep = results["settings"], results["models"][name], results.get("sweeps", {}).get(name)
    estimates, recipe = entry["estimates"], MODELS[name][1]
    rows = [f"| {key.replace('_', ' ').replace('@', ', K = ')} | {cell(row, s, key)} |" for key, row in estimates.items()]
    measured = "\n".join(["| estimator | value |", "|---|---|", *rows, "", (
        f"K = {s['steps']:,}; AIS {s['ais_chains']} chains; RAISE {s['raise_chains']} chains × {s['raise_examples']} digits\nwith control variates; "
        f"CSL {s['csl_chains']} × {s['csl_samples']} samples.{' ' + IMPOSSIBLE if any('‡' in row for row in rows) else ''} Evaluate again with e.g.\n"
        f"`python scripts/evaluate.py model={family(name)} dataset=binarized_mnist checkpoint={repo_relative(folder)}/checkpoint.pt "
        "estimator=bracket`.")])
    gap = estimates["ais_base_rate"]["mean"] - estimates["raise_base_rate"]["mean"] if {"ais_base_rate", "raise_base_rate"} <= estimates.keys() else 0.0
    if gap > 1.0:
        measured += (f"\n\n**Warning: with base-rate initialisation AIS is {gap:.1f} nats above RAISE at K = {s['steps']:,}: "
                     "the test log-likelihood is only bracketed, not pinned down.**")
    elif gap < -1.0:
        measured += (f"\n\n**Note: with base-rate initialisation RAISE is {-gap:.1f} nats above AIS at K = {s['steps']:,}. RAISE bounds the annealing "
                     "model's likelihood, not this model's, so either the annealing model fits the test digits better than the model does (RAISE §3; "
                     "common for under-trained models) or AIS's log Ẑ overshot (a heavy-tailed weight: look at its ESS). Either way the two do not "
                     "bracket the model's log-likelihood here.**")
    sections = [("Measured mean test log-likelihood (nats, 10,000 test digits)", measured)]
    if sweep is not None:
        w = sweep["settings"]
        sections.append(("AIS and RAISE against K (base rates)", "\n".join([*markdown_table(["K", "AIS", "RAISE", "AIS − RAISE"], "rrrr", [
            [f"{r['steps']:,}", pm(r, "ais"), pm(r, "raise"), f"{r['ais'] - r['raise']:+.2f}"] for r in sweep["rows"]]), "",
            (f"AIS {w['sweep_ais_chains']} chains; RAISE {w['raise_chains']} chains on the same {w['sweep_raise_examples']} test digits at every K "
             "(control variates); see `estimators/raise/table.md`.")])))
    return zoo.ModelCard(
        title=f"{family(name)}-binarized_mnist ({label(name, results)})",
        summary=(f"Trained and measured by `python scripts/reproduce_raise.py`; last measured {entry['trained_on']} "
                 "(`--from-zoo` re-measures without retraining)."),
        facts=[("architecture", f"`pfzoo.models.{type(model).__name__}`, config `{model.config()}`"),
               ("data", "`dataset=binarized_mnist` (Larochelle & Murray's fixed binarisation; 50,000 train, 10,000 test), read from `data.root`"),
               ("training", f"`python scripts/train.py +experiment={recipe} data.root=DIR` (`conf/experiment/{recipe}.yaml`)"),
               ("file", "`checkpoint.pt`: load with `pfzoo.zoo.load(...)`")],
        sections=sections)


if __name__ == "__main__":
    main()
