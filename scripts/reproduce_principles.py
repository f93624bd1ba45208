"""The inductive-principles table (Marlin, Swersky, Chen & de Freitas 2010; *Deep Learning* §18): small RBMs trained by
every principle pfzoo has, measured by exact test log-likelihood, denoising, classification and training time.

    python scripts/reproduce_principles.py                     # digits and MNIST: reports/principles/{README.md,results.json,samples.png}
    python scripts/reproduce_principles.py --datasets digits   # the embedded digits only (no data folder needed)
    python scripts/reproduce_principles.py --quick             # smoke run: 2 epochs, one learning rate, reports/principles/quick/
    python scripts/reproduce_principles.py --render reports/principles/results.json

Each principle (:data:`pfzoo.studies.principles.PRINCIPLES`) runs the recipe ``conf/experiment/principles_<data>.yaml``
with ``trainer=<its option>`` and SGD (momentum 0.5; Adam with early stopping for GSM, whose loss has no minimum on a
finite sample); its learning rate is the best of a recorded search by exact
log-likelihood on a validation split (a fifth of the training set), and the chosen setting is then trained on the whole
training set and measured on the test set (:mod:`pfzoo.studies.principles`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from pfzoo.cli import compose
from pfzoo.studies import principles as study
from pfzoo.studies.reporting import load_average, machine_description, with_kept_section
from pfzoo.training import EarlyStopping, UpdateLimit

REPO = Path(__file__).resolve().parents[1]
DENOISING_BLOCK = {"digits": 3, "mnist": 10}
GSM_SECTION = "GSM diagnosis (issue 52)"
OPTIMIZERS = {"SGD": {"_target_": "torch.optim.SGD", "_partial_": True, "lr": 0.05, "momentum": 0.5},
              "Adam": {"_target_": "torch.optim.Adam", "_partial_": True, "lr": 0.001}}
EARLY_STOPPING_PATIENCE = 20  # validation scores in a row below the best before a search run stops


def trainer_for(dataset: str, principle: study.Principle, overrides: list[str], run_dir: Path, args) -> OmegaConf:
    cfg = compose("train", [f"+experiment=principles_{dataset}", f"trainer={principle.trainer}", *principle.overrides,
                            f"seed={args.seed}", f"run_dir={run_dir}", *([f"data.root={args.data_root}"] if args.data_root else [])])
    cfg.trainer.optimizer = OmegaConf.create(OPTIMIZERS[principle.optimizer])
    for override in overrides:  # e.g. trainer.optimizer.lr=0.1
        key, value = override.split("=", 1)
        OmegaConf.update(cfg, key, json.loads(value), merge=False)
    if args.quick:
        cfg.trainer.epochs = 2
    return cfg


def make_train(dataset: str, principle: study.Principle, args):
    """``train(overrides, data, updates=None) -> (model, seconds, details)`` for the search (:data:`study.Train`);
    an early-stopped principle scores ``data.test`` (the validation split) during the search and stops at ``updates``
    in the final run."""
    def train(overrides: list[str], data, updates: int | None = None) -> tuple:
        # One folder per setting and training set (the search's split or the whole set), resumed when it exists: an
        # interrupted study redoes no finished training (an early stop's kept model is in the checkpoint).
        setting = "_".join(o.split("=")[1] for o in overrides) + f"-rows{data.train.shape[0]}"
        setting = (f"{principle.optimizer.lower()}-" if principle.optimizer != "SGD" else "") + setting
        setting += "" if updates is None else f"-updates{updates}"
        run_dir = REPO / "runs" / "principles" / ("quick" if args.quick else "") / dataset / principle.trainer / setting
        cfg = trainer_for(dataset, principle, overrides, run_dir, args)
        model = instantiate(cfg.model, num_visible=data.num_features, generator=torch.Generator().manual_seed(args.seed))
        model.init_from_data(data.train)
        stopping = None
        if principle.early_stopping_every is not None:
            stopping = (EarlyStopping(lambda m: study.exact_log_likelihood(m, data.test), every=principle.early_stopping_every,
                                      patience=EARLY_STOPPING_PATIENCE) if updates is None else UpdateLimit(updates))
        trainer = instantiate(cfg.trainer, run_dir=run_dir, estimator=None, callbacks=[stopping] if stopping else [])
        diverged = False
        try:
            trainer.fit(model, data, resume=True)
        except FloatingPointError:  # after the model to keep was reached, a later divergence does not matter
            if stopping is None or (isinstance(stopping, UpdateLimit) and stopping.kept is None):
                raise
            diverged = True
        lines = trainer.metrics_path.read_text().splitlines() if trainer.metrics_path.exists() else []
        # an epoch abandoned for a non-finite loss leaves no record: with none at all the time is unknown (None), not 0
        seconds = sum(json.loads(line)["seconds"] for line in lines) if lines or not diverged else None
        if isinstance(stopping, EarlyStopping):
            stopping.restore_best(model)
            return model, seconds, {"updates": stopping.best_update, "updates_run": stopping.updates}
        if isinstance(stopping, UpdateLimit):
            stopping.restore(model)
        return model, seconds, {}
    return train


def run_dataset(dataset: str, args) -> dict:
    cfg = compose("train", [f"+experiment=principles_{dataset}", *([f"data.root={args.data_root}"] if args.data_root else [])])
    data = instantiate(cfg.dataset)
    validation = study.validation_split(data, 0.2, torch.Generator().manual_seed(args.seed))
    results, samples = [], {}
    for principle in study.PRINCIPLES:
        if principle.small_only and dataset != "digits":
            continue
        rates = principle.learning_rates[1:2] if args.quick else principle.learning_rates
        train = make_train(dataset, principle, args)
        best, search = study.search_setting(train, [[f"trainer.optimizer.lr={rate}"] for rate in rates], validation)
        if best is None:
            results.append(study.failed(principle.name, principle.trainer, search))
            continue
        updates = next(point for point in search if point["overrides"] == best).get("updates")
        model, seconds, _ = train(best, data, updates=updates)
        results.append(study.measure(principle.name, principle.trainer, best, model, seconds, data, block=DENOISING_BLOCK[dataset],
                                     seed=args.seed, search=search, optimizer=principle.optimizer, updates=updates))
        samples[principle.name] = study.gibbs_samples(model, 64, sweeps=100 if args.quick else 1000, seed=args.seed)
    study.samples_figure(samples, data.image_shape, args.out / f"samples_{dataset}.png")
    return {"dataset": dataset, "train": list(data.train.shape), "test": list(data.test.shape),
            "hidden": cfg.model.num_hidden, "epochs": 2 if args.quick else cfg.trainer.epochs, "block": DENOISING_BLOCK[dataset],
            "results": [result.row() for result in results]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["digits", "mnist"], choices=sorted(DENOISING_BLOCK))
    parser.add_argument("--data-root", default=os.environ.get("PFZOO_DATA"), help="for MNIST (default $PFZOO_DATA)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--render", type=Path, default=None, help="rewrite README.md beside this results.json")
    args = parser.parse_args()
    if args.render:
        write_readme(args.render.parent / "README.md", study.readme(json.loads(args.render.read_text())))
        return
    args.out = args.out or REPO / "reports" / "principles" / ("quick" if args.quick else "")
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    began = time.perf_counter()
    payload = {"datasets": [run_dataset(dataset, args) for dataset in args.datasets],
               "machine": machine_description(), "threads": args.threads, "load_average": load_average(),
               "date": datetime.date.today().isoformat(), "seconds": time.perf_counter() - began, "quick": args.quick}
    (args.out / "results.json").write_text(json.dumps(payload, indent=1))
    write_readme(args.out / "README.md", study.readme(payload))
    print(f"wrote {args.out / 'README.md'}")


def write_readme(path: Path, text: str) -> None:
    """``text`` into ``path``, keeping the GSM diagnosis section that ``scripts/diagnose_gsm.py``'s study added there."""
    previous = path.read_text() if path.is_file() else ""
    path.write_text(with_kept_section(text, previous, GSM_SECTION))


if __name__ == "__main__":
    main()
