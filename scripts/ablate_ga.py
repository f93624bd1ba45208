"""Which training setting makes the geometric path underestimate log Z of a CD1(500) MNIST RBM (the slides' claim).

    python scripts/ablate_ga.py --stage screen [--variants centre "momentum 0.5" ...]   # train, GA at K = 1,000
    python scripts/ablate_ga.py --stage full --variants centre "visible biases 0"       # GA and MAS at K ≤ 10⁴
    python scripts/ablate_ga.py --stage raise --variants "visible biases 0"             # RAISE beside the full stage
    python scripts/ablate_ga.py --render reports/paths/ga_ablation.json

Each variant of :data:`pfzoo.studies.ga_ablation.VARIANTS` (the zoo's CD1(500) recipe at 5 epochs with one training
setting changed, or the zoo's own checkpoint) is trained (or resumed) in ``runs/ga_ablation/<name>`` and measured by
:mod:`pfzoo.studies.ga_ablation`; each stage's entry is stored in ``reports/paths/ga_ablation.json`` as soon as it is
measured, with the checkpoint's SHA-256 (a stage stored for the same checkpoint is skipped), and ``ga_ablation.md`` is
rendered from the JSON alone.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
from pathlib import Path

import torch

from pfzoo import app, zoo
from pfzoo.cli import compose
from pfzoo.data import binarized_mnist
from pfzoo.data.root import resolve_data_root
from pfzoo.studies.ga_ablation import BASES, RECIPE, VARIANTS, parameter_summary, path_runs, raise_check, shortfalls
from pfzoo.studies.ga_ablation_report import markdown
from pfzoo.studies.raise_results import checkpoint_record
from pfzoo.studies.reporting import machine_description

REPO = Path(__file__).resolve().parents[1]
STAGES = {"screen": {"kinds": ("GA",), "steps": [1000]}, "full": {"kinds": ("GA", "MAS"), "steps": [1000, 10000]}, "mas": {"kinds": ("MAS",), "steps": [1000]},
          "raise": {}, "parameters": {}}
"""What each stage measures: the screen finds where GA from uniform falls short; the full stage adds MAS and K = 10⁴; the
mas stage runs MAS alone (beside a GA-only full stage); the raise stage checks the full stage's log Ẑs against RAISE on
test digits; parameters only records the parameter summary."""


def checkpoint_of(name: str, runs_dir: Path, data_root: Path) -> tuple[Path, dict | None]:
    """The variant's checkpoint (the zoo's, or trained here) and the training result (``None`` for the zoo's)."""
    variant = VARIANTS[name]
    if variant.zoo is not None:
        return REPO / "models" / variant.zoo / zoo.CHECKPOINT_FILE, None
    cfg = compose("train", [f"+experiment={RECIPE}", *variant.overrides, "trainer.progress=false", f"run_dir={runs_dir / variant.slug(name)}",
                            f"data.root={data_root}", "resume=true", "pictures=false", "trainer.metrics_rows=1000"])
    result = app.train(cfg)
    return Path(result["checkpoint"]), {"seconds": round(result["seconds"], 1), "overrides": list(variant.overrides),
                                        "closing_test_log_likelihood": result["test_log_likelihood"]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=None, help="folder holding binarized_mnist/ (default $PFZOO_DATA or ../shared/data)")
    parser.add_argument("--output", type=Path, default=REPO / "reports" / "paths" / "ga_ablation.json")
    parser.add_argument("--runs-dir", type=Path, default=REPO / "runs" / "ga_ablation")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--stage", choices=list(STAGES), default="screen")
    parser.add_argument("--steps", type=int, nargs="+", default=None, help="K values (default: the stage's)")
    parser.add_argument("--mas-steps", type=int, nargs="+", default=None, help="full stage: MAS's K values (default: the stage's)")
    parser.add_argument("--mas-bases", nargs="*", choices=list(BASES), default=list(BASES), help="full stage: MAS's bases (none: GA only)")
    parser.add_argument("--chains", type=int, default=100)
    parser.add_argument("--raise-steps", type=int, default=10000, help="raise stage: RAISE from the base rates at this K")
    parser.add_argument("--raise-digits", type=int, default=20)
    parser.add_argument("--raise-chains", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--render", type=Path, metavar="RESULTS_JSON", help="measure nothing: rewrite the markdown from the JSON")
    args = parser.parse_args(argv)
    if args.render is not None:
        args.render.with_suffix(".md").write_text(markdown(json.loads(args.render.read_text())))
        return print(f"rewrote {args.render.with_suffix('.md')}")
    torch.set_num_threads(args.threads)
    data_root = args.data_root or resolve_data_root(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")
    if not (data_root / "binarized_mnist").is_dir():
        parser.error(f"{data_root}/binarized_mnist is missing; pass --data-root or set PFZOO_DATA")
    data = binarized_mnist(data_root)
    for name in args.variants:
        checkpoint, training = checkpoint_of(name, args.runs_dir, data_root)
        record = checkpoint_record(checkpoint, REPO)
        entry = load(args.output)["variants"].get(name, {})  # read afresh: another run of this script may have stored it meanwhile
        if entry.get("checkpoint_sha256") != record["checkpoint_sha256"]:
            entry = {"training": training}
        entry |= {**record, "changed": VARIANTS[name].changed, "relative_to": VARIANTS[name].relative_to}
        if args.stage == "parameters":
            entry["parameters"] = parameter_summary(zoo.load(checkpoint), data.train)
            store(args.output, name, entry)
            continue
        settings = stage_settings(args)
        if entry.get(args.stage, {}).get("settings") == settings or (args.stage == "raise" and "full" not in entry):
            print(f"{name}: {args.stage} stored for this checkpoint, or no full stage to check: skipped", flush=True)
            continue
        model = zoo.load(checkpoint).requires_grad_(False)
        entry["parameters"] = parameter_summary(model, data.train)
        print(f"{name}: {args.stage} on {checkpoint}", flush=True)
        if args.stage == "raise":
            measured = raise_check(model, data.train, data.test, entry["full"]["rows"], steps=args.raise_steps, chains=args.raise_chains,
                                   digits=args.raise_digits, seed=args.seed)
        else:
            rows = path_runs(model, data.train, settings["steps"], args.chains, seed=args.seed, kinds=("GA",), name=name) if "GA" in settings["kinds"] else []
            if "mas_steps" in settings:
                rows += path_runs(model, data.train, settings["mas_steps"], args.chains, seed=args.seed, kinds=("MAS",), bases=settings["mas_bases"],
                                  name=name)
            measured = {"rows": rows, "shortfalls": shortfalls(rows)}
            for r in rows:
                print(f"  {r['path']} {r['base']} K = {r['steps']:,}: log Ẑ {r['log_z']:.2f} ± {r['stderr']:.2f} (ESS {r['ess']:.0f})", flush=True)
        entry[args.stage] = {"settings": settings, **measured, "measured_on": f"{datetime.date.today().isoformat()}, {machine_description()}",
                             "threads": args.threads}
        store(args.output, name, entry)


def load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {"variants": {}}


def store(path: Path, name: str, entry: dict) -> None:
    """Merge ``entry`` into the file as it is now (another run of this script may have stored other variants meanwhile)."""
    results = load(path)
    stored = results["variants"].get(name, {})
    results["variants"][name] = (stored if stored.get("checkpoint_sha256") == entry["checkpoint_sha256"] else {}) | entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1) + "\n")
    path.with_suffix(".md").write_text(markdown(results))


def stage_settings(args) -> dict:
    """What a stage's stored entry must match to be skipped."""
    if args.stage == "raise":
        return {"steps": args.raise_steps, "chains": args.raise_chains, "digits": args.raise_digits, "seed": args.seed}
    stage = dict(STAGES[args.stage]) | ({"steps": args.steps} if args.steps else {})
    settings = {"kinds": list(stage["kinds"]), "steps": stage["steps"], "chains": args.chains, "seed": args.seed}
    mas = {"mas_steps": args.mas_steps or stage["steps"], "mas_bases": args.mas_bases} if "MAS" in stage["kinds"] else {}
    return settings | mas


if __name__ == "__main__":
    main()
