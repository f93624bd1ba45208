"""Reproduce the layout of RAISE Tables 1–2 (Burda, Grosse & Salakhutdinov 2015) on binarized MNIST.

    python scripts/reproduce_raise.py [--models cd1-20 ...] [--steps 10000] [--from-zoo models] [--export-zoo models]
        [--sweep-steps 1000 10000 --sweep-models ...] [--schedule-pilot linear power:5 ... --pilot-models ...]
    python scripts/reproduce_raise.py --models --sweep-steps 100000 --sweep-ais-chains 1000 --sweep-part 0/4   # then 1/4, 2/4, 3/4
    python scripts/reproduce_raise.py --quick                     # smoke run → reports/raise/quick/
    python scripts/reproduce_raise.py --paper-scale --device cuda --from-zoo models   # Table 1's settings → estimators/raise/paper_scale/
    python scripts/reproduce_raise.py --render estimators/raise/results.json [--export-zoo models]

Trains (or resumes, or with ``--from-zoo`` reuses) each model of :data:`MODELS` by its recipe (``conf/experiment/``),
then measures on the 10,000 test digits: the exact log-likelihood (20-hidden-unit RBMs), CSL, and RAISE (a random
subset, control variates) and AIS from uniform and base-rate starts. ``--sweep-steps``: AIS and RAISE against K
(:func:`pfzoo.studies.bracket_sweep.bracket_sweep`); ``--sweep-part I/N``: a point in N sittings
(:meth:`pfzoo.studies.raise_results.RaiseRun.measure_sweep_part`). ``--schedule-pilot``: per model, the schedule that
closes their gap on validation digits (:func:`pfzoo.studies.schedule_pilot.pilot_schedule`), then the test set with it.
Writes ``<output>/table.md`` and ``results.json`` (each entry with its checkpoint's path and SHA-256: rendering refuses
one whose checkpoint changed since, :func:`pfzoo.studies.raise_results.check_checkpoints`); ``--export-zoo DIR`` puts each
model and its card into ``DIR/<family>-binarized_mnist[-<name>]``. Wall times are on the device named under the table.

``--paper-scale``: RAISE Table 1's settings (:data:`PAPER_SCALE`; K = 10⁵, AIS 5,000 chains, RAISE 50 chains × 100
digits, both starts), 500 and 100 times the AIS and RAISE chain-steps of :data:`SETTINGS` (which a 2-core CPU affords:
14 s to 11 min an estimate): run it with ``--device cuda``. It writes into ``estimators/raise/paper_scale/`` by default.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path

import torch

from pfzoo import app, zoo
from pfzoo.cli import compose
from pfzoo.data import binarized_mnist
from pfzoo.data.root import resolve_data_root
from pfzoo.studies.raise_results import RaiseRun, check_sweep_part, on_device, part_of, write_table_and_cards
from pfzoo.studies.raise_table import AIS_CHAINS, MODELS, PAPER_SCALE, QUICK, QUICK_PILOT, SETTINGS, SWEEP_BASES, quick_recipe, schedule_name, zoo_folder
from pfzoo.studies.reporting import machine_description

REPO = Path(__file__).resolve().parents[1]


def train(name: str, runs_dir: Path, data_root: Path, quick: bool, device: torch.device) -> Path:
    """Train (or resume) ``name`` in ``<runs_dir>/<name>`` on ``device`` (quick: tiny layers, one epoch); returns the model's file (``averaged.pt`` where the recipe averages)."""
    cfg = compose("train", [f"+experiment={MODELS[name][1]}", "trainer.progress=false", f"run_dir={runs_dir / name}", f"data.root={data_root}", "resume=true", f"device={device}"])
    result = app.train(quick_recipe(cfg) if quick else cfg)
    return Path(result.get("averaged_model", result["checkpoint"]))


def render(results: dict, output: Path, zoo_dir: Path | None) -> None:
    """Write ``<output>/table.md`` and its figures; with ``zoo_dir`` also each model's card there (the checkpoints stay)."""
    table = write_table_and_cards(results, output, zoo_dir, repo=REPO)
    print(f"wrote {table}" + (f" and the cards of {', '.join(results['models'])} in {zoo_dir}" if zoo_dir is not None else ""))


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
    parser.add_argument("--compile", action="store_true", help="AIS and RAISE with compile=True (hashed draws; recorded in the settings)")
    parser.add_argument("--cuda-graphs", action="store_true", help="AIS and RAISE with cuda_graphs=True (on CUDA: the same numbers, faster; recorded)")
    parser.add_argument("--render", type=Path, metavar="RESULTS_JSON", help="measure nothing: rewrite table.md (with --export-zoo also the cards)")
    parser.add_argument("--from-zoo", type=Path, help="measure the checkpoints already in this zoo folder (e.g. models) instead of training")
    parser.add_argument("--export-zoo", type=Path, help="copy checkpoints and model cards (README.md, card.json) into this zoo folder")
    parser.add_argument("--trained-on", default=None, metavar="TEXT", help="the machine that trained the runs, for the cards' training time (default: this one)")
    parser.add_argument("--sweep-steps", type=int, nargs="+", help="also run AIS and RAISE at each of these K on --sweep-models")
    parser.add_argument("--sweep-models", nargs="+", choices=list(MODELS), default=["dbm-500-1000"])
    parser.add_argument("--sweep-base", choices=list(SWEEP_BASES), default="base_rate",
                        help="the sweep's initial distribution (a uniform sweep is stored beside the base-rate one)")
    parser.add_argument("--sweep-ais-chains", type=int, default=300)
    parser.add_argument("--sweep-raise-examples", type=int, default=20)
    parser.add_argument("--sweep-part", type=part_of, metavar="I/N", help="only part I (0…N−1) of each sweep point's AIS chains; the "
                        "parts wait in <output>/sweep_parts/, the last one stores the row a one-go sweep gives")
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
    try:
        check_sweep_part(args.sweep_part, args.sweep_steps, args.sweep_ais_chains)
    except ValueError as error:
        parser.error(f"--sweep-part: {error}")
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
    settings |= {key: True for key in ("compile", "cuda_graphs") if getattr(args, key)}  # absent when off: earlier results stay comparable
    data = on_device(binarized_mnist(data_root), device)
    output.mkdir(parents=True, exist_ok=True)
    run = RaiseRun.start(output, settings, seed=args.seed, device=device, fresh=args.quick, repo=REPO)

    def model_of(name: str) -> tuple[torch.nn.Module, Path]:
        if args.from_zoo is not None:
            checkpoint = zoo_folder(name, args.from_zoo) / zoo.CHECKPOINT_FILE
        else:
            print(f"{name}: training (or resuming) in {runs_dir / name}", flush=True)
            checkpoint = train(name, runs_dir, data_root, args.quick, device)
        return zoo.load(checkpoint, map_location=device), checkpoint

    for name in args.models:
        model, checkpoint = model_of(name)
        print(f"{name}: measuring", flush=True)
        run.measure_model(name, model, data, checkpoint, ais_chains={} if args.quick else AIS_CHAINS.get(name, {}), only=args.only,
                          trained_on=args.trained_on or machine_description())
        if args.export_zoo is not None:  # the row then records the zoo's copy, not a scratch run's checkpoint
            run.export(name, checkpoint, zoo_folder(name, args.export_zoo))
    for name in args.sweep_models if args.sweep_steps else ():
        print(f"{name}: AIS and RAISE against K ({SWEEP_BASES[args.sweep_base]})", flush=True)
        lines = run.measure_sweep(name, *model_of(name), data, args.sweep_steps, base=args.sweep_base, ais_chains=args.sweep_ais_chains,
                                  raise_examples=args.sweep_raise_examples, part=args.sweep_part)
        print("\n".join(f"{name}: {line}" for line in lines), flush=True)
    for name in args.pilot_models if args.schedule_pilot else ():
        print(f"{name}: choosing the schedule among {', '.join(args.schedule_pilot)}", flush=True)
        pilot = {"pilot_examples": args.pilot_examples, "pilot_ais_chains": args.pilot_ais_chains} | (QUICK_PILOT if args.quick else {})
        run.measure_pilot(name, *model_of(name), data, args.schedule_pilot, pilot)
    for name in args.heating_models if args.heating else ():
        print(f"{name}: RAISE with the mean-field proposal and the clamped heating chain", flush=True)
        run.measure_heating(name, *model_of(name), data, args.heating, examples=args.heating_examples)
    render(run.results, output, None)


if __name__ == "__main__":
    main()
