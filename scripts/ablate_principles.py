"""Ablation of two *Deep Learning* §18 claims that ``reports/principles`` does not reproduce (issue 52): SML's best
classification accuracy (§18.2) and pseudolikelihood's poor density estimates but good fill-in of small amounts of
missing values (§18.3). One setting of the principles study changes at a time (:mod:`pfzoo.studies.principles_ablation`).

    python scripts/ablate_principles.py --dataset digits                # reports/principles/ablation/results_digits.json
    python scripts/ablate_principles.py --dataset mnist --rows 10000    # a random 10,000 of MNIST's training rows
    python scripts/ablate_principles.py --render reports/principles/ablation   # README.md from the results_*.json

Trained RBMs are kept in ``runs/principles_ablation/`` and resumed, not retrained, by a later invocation.
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
from pfzoo.data import DataSplits
from pfzoo.studies import principles as study
from pfzoo.studies import principles_ablation as ablation
from pfzoo.studies.reporting import load_average, machine_description

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = REPO / "reports" / "principles" / "results.json"
NAMES = ("CD-1", "PCD (SML)", "pseudolikelihood", "ratio matching", "self-contrastive")
BLOCK = {"digits": 3, "mnist": 10}
HIDDEN_WIDE = 100   # the hidden-unit row (no exact log-likelihood beyond ~25 hidden units)
EPOCHS_FACTOR = 5   # the training-budget row


def train(dataset: str, principle: study.Principle, lr: float, data: DataSplits, args, *, hidden: int = 20,
          epochs: int | None = None, seed: int = 0):
    """One RBM of the principles recipe (SGD, momentum 0.5, learning rate ``lr``), resumed from its run folder."""
    run_dir = (REPO / "runs" / "principles_ablation" / dataset / principle.trainer /
               f"lr{lr}-h{hidden}-e{epochs}-s{seed}-rows{data.train.shape[0]}")
    cfg = compose("train", [f"+experiment=principles_{dataset}", f"trainer={principle.trainer}", *principle.overrides,
                            f"seed={seed}", f"run_dir={run_dir}", f"model.num_hidden={hidden}",
                            *([f"trainer.epochs={epochs}"] if epochs else []), *([f"data.root={args.data_root}"] if args.data_root else [])])
    cfg.trainer.optimizer = OmegaConf.create({"_target_": "torch.optim.SGD", "_partial_": True, "lr": lr, "momentum": 0.5})
    model = instantiate(cfg.model, num_visible=data.num_features, generator=torch.Generator().manual_seed(seed))
    model.init_from_data(data.train)
    instantiate(cfg.trainer, run_dir=run_dir, estimator=None, callbacks=[]).fit(model, data, resume=True)
    return model


def load(dataset: str, args) -> tuple[DataSplits, int]:
    cfg = compose("train", [f"+experiment=principles_{dataset}", *([f"data.root={args.data_root}"] if args.data_root else [])])
    data = instantiate(cfg.dataset)
    if args.rows and args.rows < data.train.shape[0]:  # a random subset of the training rows; the test split is whole
        keep = torch.randperm(data.train.shape[0], generator=torch.Generator().manual_seed(args.seed))[:args.rows]
        data = DataSplits(f"{data.name}-{args.rows}", data.train[keep], data.test, image_shape=data.image_shape,
                          train_labels=data.train_labels[keep], test_labels=data.test_labels)
    return data, cfg.trainer.epochs


def run(args, began: float) -> None:
    data, epochs = load(args.dataset, args)
    validation = study.validation_split(data, 0.2, torch.Generator().manual_seed(args.seed))
    principles = [p for p in study.PRINCIPLES if p.name in NAMES]
    patterns = ablation.fill_patterns(BLOCK[args.dataset], exact_up_to=9 if args.dataset == "digits" else 3)
    published = {r["name"]: json.loads(r["overrides"][0].split("=")[1]) for part in json.loads(PUBLISHED.read_text())["datasets"]
                 if part["dataset"] == args.dataset for r in part["results"]}
    payload = {"dataset": args.dataset, "train": list(data.train.shape), "test": list(data.test.shape), "hidden": 20,
               "hidden_wide": HIDDEN_WIDE, "epochs": epochs, "epochs_factor": EPOCHS_FACTOR, "block": BLOCK[args.dataset],
               "search": {}, "variants": {}, "published_rates": args.published_rates}
    rates = {}  # principle: (rate by validation log-likelihood, rate by validation accuracy)
    for p in principles:
        if args.published_rates:  # the rate the study's own search chose on the whole training set: no search here
            rates[p.name] = (published[p.name],) * 2
            continue
        points = []
        for lr in p.learning_rates:  # the study's search, scored by validation log-likelihood and by validation accuracy
            model = train(args.dataset, p, lr, validation, args)
            points.append({"lr": lr, "validation_log_likelihood": study.exact_log_likelihood(model, validation.test),
                           "validation_accuracy": study.classification_accuracy(model, validation)})
        payload["search"][p.name] = points
        rates[p.name] = tuple(max(points, key=lambda point: point[key])["lr"] for key in ("validation_log_likelihood", "validation_accuracy"))
    settings = {"base": {}, "lr_by_accuracy": {}, "hidden": {"hidden": HIDDEN_WIDE}, "epochs": {"epochs": epochs * EPOCHS_FACTOR},
                **{f"seed{seed}": {"seed": seed} for seed in args.seeds}}  # seeds: the noise of every number
    for variant, changes in settings.items():
        if variant == "lr_by_accuracy" and args.published_rates:
            continue
        row = {}
        for p in principles:
            lr = rates[p.name][variant == "lr_by_accuracy"]
            row[p.name] = {"lr": lr, **ablation.measure_model(train(args.dataset, p, lr, data, args, **changes), data, patterns,
                                                              seed=args.seed, classifiers=variant == "base",
                                                              log_likelihood=not args.no_log_likelihood)}
        payload["variants"][variant] = row
        payload.update(machine=machine_description(), threads=args.threads, load_average=load_average(),
                       date=datetime.date.today().isoformat(), seconds=time.perf_counter() - began)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"results_{args.dataset}.json").write_text(json.dumps(payload, indent=1))


def maximum_likelihood(args) -> None:
    """Exact maximum likelihood (L-BFGS on the enumerated gradient) from the base pseudolikelihood RBM, measured like the
    rest, into the data set's results JSON (which an earlier invocation wrote)."""
    path = args.out / f"results_{args.dataset}.json"
    payload = json.loads(path.read_text())
    data, _ = load(args.dataset, args)
    principle = next(p for p in study.PRINCIPLES if p.name == ablation.PL)
    model = train(args.dataset, principle, payload["variants"]["base"][ablation.PL]["lr"], data, args)
    began = time.perf_counter()
    trace = ablation.fit_maximum_likelihood(model, data.train, iterations=args.maximum_likelihood, dtype=torch.float32)
    seconds = time.perf_counter() - began
    patterns = ablation.fill_patterns(BLOCK[args.dataset], exact_up_to=9 if args.dataset == "digits" else 3)
    payload["maximum_likelihood"] = {"start": ablation.PL, "iterations": args.maximum_likelihood, "evaluations": len(trace),
                                     "train_log_likelihood": trace, "seconds": seconds, "load_average": load_average(),
                                     **ablation.measure_model(model, data, patterns, seed=args.seed)}
    path.write_text(json.dumps(payload, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=sorted(BLOCK), default="digits")
    parser.add_argument("--rows", type=int, default=None, help="a random subset of this many training rows")
    parser.add_argument("--data-root", default=os.environ.get("PFZOO_DATA"), help="for MNIST (default $PFZOO_DATA)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="*", default=[1, 2], help="training seeds of the noise rows")
    parser.add_argument("--published-rates", action="store_true", help="each principle's rate from reports/principles: no search")
    parser.add_argument("--no-log-likelihood", action="store_true", help="skip the exact log-likelihood (2^20 states for MNIST)")
    parser.add_argument("--maximum-likelihood", type=int, default=0, metavar="ITERATIONS",
                        help="add exact maximum likelihood from the base pseudolikelihood RBM to an existing results JSON")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "principles" / "ablation")
    parser.add_argument("--render", type=Path, default=None, help="rewrite README.md in this folder from its results_*.json")
    args = parser.parse_args()
    if args.render:
        ablation.write_report(args.render, json.loads(PUBLISHED.read_text()))
        return
    torch.set_num_threads(args.threads)
    if args.maximum_likelihood:
        return maximum_likelihood(args)
    run(args, time.perf_counter())


if __name__ == "__main__":
    main()
