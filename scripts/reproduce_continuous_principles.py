"""The continuous inductive-principles table (pfzoo issue 29, item 5): products of experts (Laplace, Student-t; complete
and 2× overcomplete), ICA, GB-RBM and mcRBM on whitened natural-image patches, trained by exact ML, score matching,
DSM, SSM, NCE, MPF and CD-1 with the natural gradient off and on, measured by test log-likelihood (exact or HAIS,
bracketed by RAISE where it applies), −log Ẑ beside NCE's c, wall time and filters.

    python scripts/reproduce_continuous_principles.py           # reports/principles/continuous/{README.md,results.json,filters_*.png}
    python scripts/reproduce_continuous_principles.py --quick   # smoke run: tiny data, 1 epoch, short HAIS, .../continuous/quick/
    python scripts/reproduce_continuous_principles.py --render reports/principles/continuous/results.json

Each cell runs ``conf/experiment/continuous_principles.yaml`` with ``model=<its option>`` and ``trainer=<its option>``,
Adam for every principle (only the objective differs), and ``trainer.natural_gradient`` set or not
(:mod:`pfzoo.studies.continuous_principles`). ``--learning-rates 0.001 0.003 0.01`` adds a search by validation
log-likelihood (three times the training and a validation evaluation per point: budget accordingly).

Measured time of the full run on one CPU thread (2-core AMD EPYC, loaded): 20.2 minutes (reports/principles/continuous),
most of it the natural-gradient training of the mcRBM (~125 s a principle at 5 epochs) and GB-RBM (~70 s a principle):
per-example gradients for the energy metric. HAIS (100 chains × 5000 steps, N = 1000) takes ~2 s a cell, the GB-RBM's
AIS/RAISE bracket ~3 s. ``--quick`` takes about 30 s.
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from pfzoo.cli import compose
from pfzoo.studies import continuous_principles as study
from pfzoo.studies.principles import validation_split
from pfzoo.studies.reporting import load_average, machine_description

REPO = Path(__file__).resolve().parents[1]
QUICK = ["dataset.num_train=600", "dataset.num_test=200", "trainer.epochs=1"]
QUICK_EVALUATION = study.Evaluation(num_test=100, chains=20, steps=200, raise_chains=4, raise_steps=100, bracket_num_test=50)


def config(spec: study.ModelSpec, principle: study.Principle, natural: bool, overrides: list[str], run_dir: Path, args):
    cfg = compose("train", ["+experiment=continuous_principles", f"model={spec.config}", f"trainer={principle.trainer}",
                            *spec.overrides, *principle.overrides, *(QUICK if args.quick else []),
                            f"seed={args.seed}", f"run_dir={run_dir}"])
    cfg.trainer.optimizer = OmegaConf.create({"_target_": "torch.optim.Adam", "_partial_": True, "lr": 0.003})
    if natural:
        OmegaConf.update(cfg, "trainer.natural_gradient", dict(spec.natural_gradient), force_add=True)
    for override in overrides:  # e.g. trainer.optimizer.lr=0.01
        key, value = override.split("=", 1)
        OmegaConf.update(cfg, key, json.loads(value), merge=False)
    return cfg


def make_train(spec, principle, natural: bool, args):
    def train(overrides: list[str], data):
        run_dir = (REPO / "runs" / "continuous_principles" / study.slug(spec.name) / f"{principle.trainer}_{'ng' if natural else 'plain'}"
                   / data.name / ("quick" if args.quick else "full") / "_".join(o.split("=")[1] for o in overrides))
        cfg = config(spec, principle, natural, overrides, run_dir, args)
        model = instantiate(cfg.model, num_visible=data.num_features, generator=torch.Generator().manual_seed(args.seed))
        if cfg.init_from_data:
            model.init_from_data(data.train.to(model.dtype))
        trainer = instantiate(cfg.trainer, run_dir=run_dir, estimator=None)
        trainer.fit(model, data)
        records = [json.loads(line) for line in trainer.metrics_path.read_text().splitlines()]
        return model, sum(record["seconds"] for record in records), records[-1]
    return train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--learning-rates", type=float, nargs="+", default=None, help="Adam rates to search (default: 0.003 only)")
    parser.add_argument("--models", nargs="+", default=None, help="a subset of the models, by config name (e.g. ica mcrbm)")
    parser.add_argument("--principles", nargs="+", default=None, help="a subset of the principles, by trainer (e.g. nce cd)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--render", type=Path, default=None, help="rewrite README.md beside this results.json")
    args = parser.parse_args()
    if args.render:
        (args.render.parent / "README.md").write_text(study.readme(json.loads(args.render.read_text())))
        return
    args.out = args.out or REPO / "reports" / "principles" / "continuous" / ("quick" if args.quick else "")
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    began = time.perf_counter()
    base = compose("train", ["+experiment=continuous_principles", *(QUICK if args.quick else [])])
    data = instantiate(base.dataset)
    validation = validation_split(data, 0.2, torch.Generator().manual_seed(args.seed))
    evaluation = QUICK_EVALUATION if args.quick else study.Evaluation()
    rates = args.learning_rates or [0.003]
    cells, panels = [], {}
    for spec in study.MODELS:
        if args.models and spec.config not in args.models:
            continue
        for principle in study.PRINCIPLES:
            if args.principles and principle.trainer not in args.principles:
                continue
            for natural in (False, True):
                grid = [[f"trainer.optimizer.lr={rate}"] for rate in rates]

                def score(model):
                    return study.evaluate(model, validation.test, validation.train, evaluation, seed=args.seed)["test_log_likelihood"]

                cell, model = study.run_cell(spec.name, principle.name, natural, make_train(spec, principle, natural, args), grid, data,
                                             validation, score, lambda m: study.evaluate(m, data.test, data.train, evaluation, seed=args.seed))
                cells.append(cell)
                print(f"{spec.name} | {principle.name} | NG {'on' if natural else 'off'}: {cell.status} {cell.test_log_likelihood or cell.reason}", flush=True)
                panel = None if model is None else study.filter_panel(model, data.transform)
                if panel is not None:
                    panels.setdefault(spec, {})[f"{principle.name}, NG {'on' if natural else 'off'}"] = panel
    for spec, grids in panels.items():
        study.filters_figure(grids, (base.dataset.patch_size, base.dataset.patch_size), args.out / f"filters_{study.slug(spec.name)}.png")
    cfg = compose("train", ["+experiment=continuous_principles", *(QUICK if args.quick else [])])
    payload = {"cells": [cell.row() for cell in cells], "train": list(data.train.shape), "test": list(data.test.shape),
               "epochs": cfg.trainer.epochs, "batch_size": cfg.trainer.batch_size, "learning_rates": rates,
               "evaluation": evaluation.__dict__, "machine": machine_description(), "threads": args.threads,
               "load_average": load_average(), "date": datetime.date.today().isoformat(),
               "seconds": time.perf_counter() - began, "quick": args.quick}
    (args.out / "results.json").write_text(json.dumps(payload, indent=1))
    (args.out / "README.md").write_text(study.readme(payload))
    print(f"wrote {args.out / 'README.md'}")


if __name__ == "__main__":
    main()
