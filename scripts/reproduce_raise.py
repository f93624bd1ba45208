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
from pathlib import Path

import torch
from omegaconf import OmegaConf

from pfzoo import app, zoo
from pfzoo.cli import compose
from pfzoo.data import DataSplits, binarized_mnist
from pfzoo.data.root import resolve_data_root
from pfzoo.paths import schedule_from_name
from pfzoo.studies.bracket_sweep import bracket_sweep
from pfzoo.studies.heating_comparison import compare_heating
from pfzoo.studies.raise_figures import sweep_figure
from pfzoo.studies.raise_table import (
    AIS_CHAINS, FIGURES, MODELS, SECTIONS, SWEEP_BASES, card_fields, comparable, hardware, label, measure, model_card, point_row, render_table, schedule_pilot, seeded,
    sweep_key, sweep_model, training_record, zoo_folder,
)
from pfzoo.studies.reporting import device_name, git_commit, load_average, machine_description
from pfzoo.zoo.cards import ACCURACY_METRIC, with_accuracy_section

REPO = Path(__file__).resolve().parents[1]
SETTINGS = {"steps": 10_000, "long_steps": 100_000, "ais_chains": 100, "posterior_samples": 100, "raise_chains": 10,
            "raise_examples": 50, "long_raise_examples": 20, "csl_chains": 10, "csl_samples": 1000, "csl_burn_in": 100}
QUICK = {"steps": 100, "long_steps": 200, "ais_chains": 10, "posterior_samples": 5, "raise_chains": 2, "raise_examples": 10,
         "long_raise_examples": 5, "csl_samples": 20, "csl_burn_in": 5}
PAPER_SCALE = {"steps": 100_000, "long_steps": 0, "ais_chains": 5000, "raise_chains": 50, "raise_examples": 100}
"""RAISE Table 1's settings (Burda, Grosse & Salakhutdinov 2015), what ``--paper-scale`` puts over :data:`SETTINGS`; its single K, so no long K."""
QUICK_PILOT = {"pilot_examples": 5, "pilot_ais_chains": 10}
QUICK_TRAINING = {"trainer.epochs": 1, "trainer.objective.pretrain.epochs_per_layer": 1, "model.num_hidden": 10, "model.hidden_sizes": [10, 10],
                  "trainer.pretrained_layers": []}  # a quick run's 10-unit layers cannot take the zoo's trained ones


def train(name: str, runs_dir: Path, data_root: Path, quick: bool, device: torch.device) -> Path:
    """Train (or resume to completion) model ``name`` in ``<runs_dir>/<name>`` on ``device``; quick: tiny layers, one epoch."""
    cfg = compose("train", [f"+experiment={MODELS[name][1]}", "trainer.progress=false", f"run_dir={runs_dir / name}", f"data.root={data_root}",
                            "resume=true", f"device={device}"])
    for key, value in QUICK_TRAINING.items() if quick else ():
        if OmegaConf.select(cfg, key) is not None:
            OmegaConf.update(cfg, key, value)
    return Path(app.train(cfg)["checkpoint"])


def store(results_file: Path, results: dict, section: str, name: str, entry: dict, fresh: bool) -> None:
    """Set ``results[section][name]`` and write results.json, keeping what another run (other models) wrote meanwhile.
    A sweep with the same settings as the stored one adds its K's rows to the stored rows (replacing those at the same K)."""
    latest = json.loads(results_file.read_text()) if results_file.is_file() and not fresh else {}
    if comparable(latest, results):
        results.update({key: {**latest.get(key, {}), **results[key]} for key in SECTIONS})
    stored = results[section].get(name)
    if section == "sweeps" and stored is not None and stored["settings"] == entry["settings"]:
        new_steps = {row["steps"] for row in entry["rows"]}
        entry = {**entry, "rows": sorted([row for row in stored["rows"] if row["steps"] not in new_steps] + entry["rows"], key=lambda row: row["steps"])}
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
    parser.add_argument("--export-zoo", type=Path, help="copy checkpoints and model cards (README.md, card.json) into this zoo folder")
    parser.add_argument("--trained-on", default=None, metavar="TEXT",
                        help="the machine that trained the runs, for the cards' training time (default: this machine)")
    parser.add_argument("--sweep-steps", type=int, nargs="+", help="also run AIS and RAISE at each of these K on --sweep-models")
    parser.add_argument("--sweep-models", nargs="+", choices=list(MODELS), default=["dbm-500-1000"])
    parser.add_argument("--sweep-base", choices=list(SWEEP_BASES), default="base_rate",
                        help="the sweep's initial distribution (a uniform sweep is stored beside the base-rate one)")
    parser.add_argument("--sweep-ais-chains", type=int, default=300)
    parser.add_argument("--sweep-raise-examples", type=int, default=20)
    parser.add_argument("--schedule-pilot", type=schedule_name, nargs="+", metavar="SCHEDULE",
                        help="per --pilot-models, the schedule (linear, sigmoid, power:<p>, …) with the smallest |AIS − RAISE| on validation digits")
    parser.add_argument("--pilot-models", nargs="+", choices=list(MODELS), default=["cd1-20", "pcd-20"])
    parser.add_argument("--pilot-examples", type=int, default=20, help="validation digits of the schedule pilot")
    parser.add_argument("--pilot-ais-chains", type=int, default=1000, help="AIS chains of the pilot and its test run (100 let one heavy-tailed weight decide)")
    parser.add_argument("--heating", type=int, nargs="+", metavar="T",
                        help="RAISE on --heating-models with each number of clamped-heating sweeps T (0: the mean-field proposal; Algorithm 3)")
    parser.add_argument("--heating-models", nargs="+", choices=[name for name in MODELS if name.startswith("dbm")], default=["dbm-500-1000"])
    parser.add_argument("--heating-examples", type=int, default=20, help="random test digits of the heating comparison")
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
        # a training run's metrics.jsonl lies beside its checkpoint; a zoo folder's does not, so its earlier record stays
        training = training_record(checkpoint.parent, args.trained_on or machine_description()) or results["models"].get(name, {}).get("training")
        store(results_file, results, "models", name, {"checkpoint": repo_relative(kept), "config": model.config(), "estimates": estimates,
                                                      "trained_on": measured_on, "load_average": load_average(), "training": training}, args.quick)
        if args.export_zoo is not None:
            export(name, results, checkpoint, zoo_folder(name, args.export_zoo))
    for name in args.sweep_models if args.sweep_steps else ():
        s = {**settings, "sweep_ais_chains": args.sweep_ais_chains, "sweep_raise_examples": args.sweep_raise_examples}
        print(f"{name}: AIS and RAISE against K ({SWEEP_BASES[args.sweep_base]})", flush=True)
        points = bracket_sweep(zoo.load(checkpoint_of(name), map_location=device), data.test, num_steps=args.sweep_steps,
                               ais_chains=s["sweep_ais_chains"], raise_chains=s["raise_chains"], raise_examples=s["sweep_raise_examples"],
                               posterior_samples=s["posterior_samples"], base=args.sweep_base,
                               base_data=data.train if args.sweep_base == "base_rate" else None,
                               generator=seeded(device, args.seed + 1), raise_generator=seeded(device, args.seed + 2))
        store(results_file, results, "sweeps", sweep_key(name, args.sweep_base),
              {"settings": s, "rows": [point_row(p) for p in points], "measured_on": measured_on}, args.quick)
    for name in args.pilot_models if args.schedule_pilot else ():
        s = {**settings, "pilot_examples": args.pilot_examples, "pilot_ais_chains": args.pilot_ais_chains} | (QUICK_PILOT if args.quick else {})
        print(f"{name}: choosing the schedule among {', '.join(args.schedule_pilot)}", flush=True)
        pilot = schedule_pilot(zoo.load(checkpoint_of(name), map_location=device), data, args.schedule_pilot, s, args.seed)
        store(results_file, results, "schedule_pilots", name, {**pilot, "settings": s, "measured_on": measured_on}, args.quick)
    for name in args.heating_models if args.heating else ():
        s = {"steps": settings["steps"], "raise_chains": settings["raise_chains"], "heating_examples": args.heating_examples}
        print(f"{name}: RAISE with the mean-field proposal and the clamped heating chain", flush=True)
        digits = data.test[torch.randperm(data.test.shape[0], generator=torch.Generator().manual_seed(args.seed + 4))[: args.heating_examples].to(device)]
        model = zoo.load(checkpoint_of(name), map_location=device)
        rows = compare_heating(model, digits, args.heating, num_steps=s["steps"], num_chains=s["raise_chains"], base_data=data.train, seed=args.seed + 5)
        store(results_file, results, "heating", name, {"settings": s, "config": model.config(), "rows": rows, "measured_on": measured_on}, args.quick)
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


def render(results: dict, output: Path, zoo_dir: Path | None) -> None:
    """Write ``<output>/table.md``; with ``zoo_dir`` also each model's card there (the checkpoints are left as they are)."""
    output.mkdir(parents=True, exist_ok=True)
    (output / "table.md").write_text(render_table(results))
    for key, sweep in results.get("sweeps", {}).items():
        (name, base), w = sweep_model(key), sweep["settings"]
        exact = results["models"].get(name, {}).get("estimates", {}).get("exact")
        sweep_figure(f"{label(name, results)}: AIS and RAISE against K ({SWEEP_BASES[base]})", sweep["rows"],
                     output / FIGURES / f"{key}-against-K.png",
                     exact=None if exact is None else exact["mean"],
                     note=f"AIS {w['sweep_ais_chains']} chains; RAISE {w['raise_chains']} chains × the same {w['sweep_raise_examples']} test digits")
    print(f"wrote {output / 'table.md'}" + (f" and the cards of {', '.join(results['models'])} in {zoo_dir}" if zoo_dir is not None else ""))
    for name in results["models"] if zoo_dir is not None else ():
        folder = zoo_folder(name, zoo_dir)
        export(name, results, folder / zoo.CHECKPOINT_FILE, folder)


def export(name: str, results: dict, checkpoint: Path, folder: Path) -> None:
    """Put model ``name`` of ``checkpoint`` into zoo ``folder`` with its README.md and card.json. The linear-classifier
    section (``scripts/feature_card.py``) is kept only while the folder's checkpoint stays the same: a new model's
    features are not the old one's, so it is measured again."""
    model, config = zoo.load(checkpoint), zoo.load_checkpoint(checkpoint)["config"]
    same_model = checkpoint.resolve() == (folder / zoo.CHECKPOINT_FILE).resolve()
    data = folder / zoo.CARD_DATA_FILE
    previous = json.loads(data.read_text()) if data.is_file() and same_model else {}
    kept = [row for row in previous.get("measurements", []) if row.get("metric") == ACCURACY_METRIC]
    fields = card_fields(name, results, model, config, git_commit=previous.get("git_commit") if same_model else git_commit(REPO), kept=kept)
    fields["notes"] = previous.get("notes") or fields["notes"]  # what was noted about this checkpoint still holds
    text = model_card(name, results, model, repo_relative(folder)).render()
    zoo.export(checkpoint, folder, card=with_accuracy_section(text, fields), card_data=fields)


if __name__ == "__main__":
    main()
