"""Thesis Fig. 3.3: a four-layer DBN (784–H–H–H) trained greedily by minimum probability flow and by CD-1 on 10,000
binarized MNIST digits, compared by their samples, whose digit classes a classifier reads (pfzoo.studies.mpf_dbn).

    python scripts/reproduce_mpf_dbn.py                 # reports/mpf_dbn/{README.md,results.json,samples.png}
    python scripts/reproduce_mpf_dbn.py --quick         # 1 epoch per layer, 100 sweeps: reports/mpf_dbn/quick/
    python scripts/reproduce_mpf_dbn.py --from-runs     # reuse the DBNs trained under runs/mpf_dbn (measure samples only)
    python scripts/reproduce_mpf_dbn.py --render        # README.md from results.json (samples.png stays)

Each RBM is trained as conf/experiment/mpf_rbm_{mpf,cd1}.yaml trains reports/mpf_rbm's (SGD, minibatches of 100, the
same learning rates and decay; MPF with single-bit-flip connectivity and the hidden units summed out), on the binary
samples of the layer below (pfzoo.training.GreedyTrainer). The thesis states neither the layer sizes nor the budgets.
Samples: --sweeps block-Gibbs sweeps in the top RBM from random states (the thesis: 1,000 between samples), then down
the stack; the pictures show p(v | h¹). The classifier: logistic regression on 20,000 thresholded MNIST training images.
The ablation repeats the class count after --ablation-sweeps sweeps (the samples' evenness depends on the chains' length).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
from hydra.utils import instantiate

from pfzoo.cli import compose
from pfzoo.data import DataSplits, binarized_mnist, mnist
from pfzoo.data.root import resolve_data_root
from pfzoo.models import DBN
from pfzoo.studies import reporting
from pfzoo.studies.mpf_dbn import DigitClassifier, class_evenness, samples_figure, sweep_ablation, visible_samples
from pfzoo.zoo import load

REPO = Path(__file__).resolve().parents[1]
RECIPES = {"MPF": ["trainer=mpf_sgd", "trainer.objective.binary.num_flips=100", "trainer.optimizer.lr=0.3", "trainer.optimizer.momentum=0.9"],
           "CD-1": ["trainer=cd", "trainer.objective.k=1", "trainer.optimizer.lr=0.05", "trainer.optimizer.momentum=0.5"]}


def readme(results: dict) -> str:
    s = results["settings"]
    lines = ["# A four-layer DBN trained by MPF and by CD-1 (thesis Fig. 3.3)", "",
             f"Made by `{results['command']}` on {results['date']} ({results['machine']}, {results['threads']} thread(s), load average "
             f"{results['load_average']}); raw numbers in `results.json`.", "",
             f"DBN 784–{'–'.join(str(h) for h in s['hidden'])}, each RBM trained {s['epochs']} epochs on the binary samples of the "
             f"layer below, from {s['num_train']:,} binarized MNIST training digits (the thesis: 10,000; it states no sizes or budgets). "
             f"Samples: {s['num_samples']:,} chains, {s['sweeps']:,} block-Gibbs sweeps in the top RBM from random states, then down the "
             f"stack. Classes read by logistic regression on thresholded MNIST (accuracy {results['classifier_accuracy']:.3f} on its "
             "10,000 test images).", "",
             "| objective | train seconds | sample class counts 0–9 | entropy (log 10 = 2.303) | total variation from the data's classes |",
             "|---|---:|---|---:|---:|"]
    for name, row in results["results"].items():
        e = row["classes"]
        lines.append(f"| {name} | {row['train_seconds']:.0f} | {' '.join(map(str, e['counts']))} | {e['entropy']:.3f} | {e['total_variation']:.3f} |")
    mpf, cd = (results["results"][name]["classes"]["total_variation"] for name in ("MPF", "CD-1"))
    verdict = ("MPF's samples are the more even over the digit classes, as the thesis says of its Fig. 3.3" if mpf < cd else
               "CD-1's samples are at least as even over the digit classes as MPF's: the thesis's reading of its Fig. 3.3 does not hold here")
    lines += ["", f"{verdict} (total variation {mpf:.3f} against {cd:.3f}).", "", "![samples](samples.png)", "",
              "## Against the number of sweeps", "", "Total variation of the samples' classes from the data's (entropy in brackets), "
              f"{s['num_samples']:,} samples after each number of top-RBM sweeps from random states:", "",
              "| sweeps | " + " | ".join(results["results"]) + " |", "|---:|" + "---:|" * len(results["results"])]
    lines += [f"| {row['sweeps']:,} | " + " | ".join(f"{row[name]['total_variation']:.3f} ({row[name]['entropy']:.2f})" for name in results["results"]) + " |"
              for row in results["ablation"]]
    first, last = results["ablation"][0], results["ablation"][-1]
    names = list(results["results"])
    worse = all(last[name]["total_variation"] > first[name]["total_variation"] for name in names)
    gap = max(abs(row[names[0]]["total_variation"] - row[names[1]]["total_variation"]) for row in results["ablation"])
    lines += ["", (f"Both DBNs' samples grow less even with the chains' length (total variation {first[names[0]]['total_variation']:.2f} → "
                   f"{last[names[0]]['total_variation']:.2f} for {names[0]}, {first[names[1]]['total_variation']:.2f} → "
                   f"{last[names[1]]['total_variation']:.2f} for {names[1]}, {first['sweeps']:,} → {last['sweeps']:,} sweeps), while the two "
                   f"differ by at most {gap:.2f} at any length: the unevenness measures how far the chains have settled into the "
                   "models' dominant mode, which both top RBMs share, more than a difference between MPF and CD-1."
                   if worse else "The samples' evenness does not fall with the chains' length for both models.")]
    return "\n".join(lines + [""])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, nargs=3, default=[200, 200, 200])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--num-train", type=int, default=10000)
    parser.add_argument("--num-samples", type=int, default=1000)
    parser.add_argument("--sweeps", type=int, default=1000)
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ablation-sweeps", type=int, nargs="+", default=[1, 10, 100, 1000, 10000])
    parser.add_argument("--from-runs", action="store_true", help="load the DBNs trained under runs/mpf_dbn instead of training")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--render", action="store_true", help="measure nothing: README.md from results.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.epochs, args.sweeps, args.num_samples, args.ablation_sweeps = 1, 100, 200, [1, 100]
    out = REPO / "reports" / "mpf_dbn" / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    if args.render:
        (out / "README.md").write_text(readme(json.loads((out / "results.json").read_text())))
        return
    torch.set_num_threads(args.threads)
    root = resolve_data_root(args.data_root or os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")
    digits = binarized_mnist(root)
    data = DataSplits(name="binarized_mnist-10k", train=digits.train[: args.num_train], test=digits.test, image_shape=(28, 28))
    labelled = mnist(root, download=False)
    classifier = DigitClassifier(labelled.train[:20000], labelled.train_labels[:20000])
    reference = torch.bincount(labelled.train_labels.long(), minlength=10).double() / labelled.train_labels.numel()
    results, samples, classes, models = {}, {}, {}, {}
    previous = json.loads((out / "results.json").read_text())["results"] if args.from_runs else {}
    for index, (name, overrides) in enumerate(RECIPES.items()):
        run_dir = REPO / "runs" / "mpf_dbn" / ("quick" if args.quick else "") / name  # git-ignored
        began = time.perf_counter()
        if args.from_runs:
            models[name], seconds = load(run_dir / "checkpoint.pt"), previous[name]["train_seconds"]
        else:
            cfg = compose("train", ["model=dbn", f"model.hidden_sizes=[{','.join(map(str, args.hidden))}]", *overrides, f"seed={args.seed}",
                                    f"trainer.epochs={args.epochs}", "trainer.learning_rate_decay=0.1", "trainer.progress=false"])
            models[name] = DBN([784, *args.hidden], generator=torch.Generator().manual_seed(args.seed))
            instantiate(cfg.trainer, run_dir=str(run_dir)).fit(models[name], data)
            seconds = time.perf_counter() - began
        samples[name] = visible_samples(models[name], args.num_samples, args.sweeps, seed=args.seed + 10 + index)
        classes[name] = classifier.predict((samples[name] > 0.5).float())
        results[name] = {"train_seconds": seconds, "classes": class_evenness(classes[name], reference)}
    ablation = sweep_ablation(models, classifier, reference, args.ablation_sweeps, num_samples=args.num_samples, seed=args.seed + 20)
    header = reporting.run_header(["scripts/reproduce_mpf_dbn.py", *(sys.argv[1:] if argv is None else argv)], args.threads)
    payload = {**header, "settings": reporting.settings_record(vars(args), leave_out={"data_root", "quick"}),
               "classifier_accuracy": classifier.accuracy(labelled.test, labelled.test_labels), "reference_classes": reference.tolist(), "results": results,
               "ablation": ablation}
    (out / "results.json").write_text(json.dumps(payload, indent=1) + "\n")
    (out / "README.md").write_text(readme(payload))
    samples_figure(samples, classes, (28, 28)).savefig(out / "samples.png", dpi=110)


if __name__ == "__main__":
    main()
