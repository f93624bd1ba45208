"""Whether zoo models' samples are recognised as digits by a classifier fitted on real ones, printed and (``--write``)
recorded in their model cards.

    python scripts/sample_card.py                                    # every zoo model trained on binarised MNIST
    python scripts/sample_card.py --models dbm-binarized_mnist       # any zoo RBM, DBM or DBN on labelled digits
    python scripts/sample_card.py --write                            # also write the measurement into card.json + README.md,
                                                                     # and samples.png (first samples beside real digits)
    python scripts/sample_card.py --checkpoint RUN/checkpoint.pt --models dbm-binarized_mnist   # a run in training, on that card's data

:mod:`pfzoo.studies.sample_recognition`: a multinomial logistic regression on the pixels of ``--num-train`` labelled
training digits reads the real test digits, the training digits it was not fitted on (a second scale) and
``--num-samples`` samples of the model (independent Gibbs chains from
random states, ``--num-steps`` sweeps each, read along the way beside as many chains from test digits: the burn-in
curve, and whether the two starts agree at the end); an image is recognised when one class gets probability ≥ ``--threshold``.
The data are the card's data set where it has labels, else (binarised MNIST) the official MNIST files binarised as
Larochelle & Murray did (``scripts/feature_card.py``). Needs ``MNIST/raw/*-ubyte`` under ``--data-root`` for them.
With ``--checkpoint`` the model saved there (a run in training, say) is measured on the data of the one ``--models``
card and the result printed as one JSON line: no card changes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from feature_card import measure_cards, model_with_labelled_data
from pfzoo.models import Capability
from pfzoo.studies.sample_recognition import DEFAULT_NUM_STEPS, sample_recognition
from pfzoo.studies.reporting import card_command
from pfzoo.zoo.cards import RECOGNITION_METRIC, SAMPLES_PICTURE, burn_in_sentence

REPO = Path(__file__).resolve().parents[1]
LABEL = "samples recognised as digits by a linear classifier"
CLASSIFIER = "multinomial logistic regression (scikit-learn LogisticRegression, L-BFGS, L2) on the pixels"


def measure(name: str, zoo_dir: Path, root: Path, args) -> dict | None:
    """One zoo model's measurement as a card entry, or ``None`` (after saying why) when it does not apply."""
    loaded = model_with_labelled_data(name, zoo_dir, root, Capability.HIDDEN_CHAIN, "Gibbs chain through a hidden layer",
                                      checkpoint=args.checkpoint)
    if loaded is None:
        return None
    model, data, description = loaded
    began = time.perf_counter()
    picture = zoo_dir / name / SAMPLES_PICTURE if args.write else None  # the card's picture of its samples beside real digits
    result = sample_recognition(model, data, num_samples=args.num_samples, num_steps=args.num_steps, threshold=args.threshold,
                                num_train=args.num_train, max_iter=args.max_iter, generator=torch.Generator().manual_seed(args.seed),
                                picture=picture)
    seconds = time.perf_counter() - began
    if args.checkpoint is not None:
        print(json.dumps({"checkpoint": str(args.checkpoint), "card": name, **result.record(), "seconds": round(seconds, 1)}), flush=True)
        return None
    left_out = "" if result.real_left_out is None else f"; left-out training digits {result.real_left_out:.3f}"
    print(f"{name}: samples recognised {result.samples:.3f} ({result.ratio:.2f} of the real digits' {result.real:.3f}; "
          f"{result.class_matched_ratio:.2f} of their {result.class_matched_real:.3f} in the samples' classes{left_out}), mean "
          f"top-class probability {result.samples_confidence:.3f} (real {result.real_confidence:.3f}), classes' total "
          f"variation {result.class_total_variation:.3f}; {seconds:.0f} s", flush=True)
    print("  " + burn_in_sentence(result.record()), flush=True)
    return {"label": LABEL, "metric": RECOGNITION_METRIC, **result.record(), "data": description, "picture": SAMPLES_PICTURE,
            "settings": {"classifier": CLASSIFIER, "max_iter": result.max_iter, "num_train": result.num_train, "seed": args.seed},
            "seconds": round(seconds, 1),
            "command": args.command}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=None, help="zoo names (default: every model trained on binarized_mnist)")
    parser.add_argument("--zoo", type=Path, default=REPO / "models", help="the zoo folder (default: the checkout's models/)")
    parser.add_argument("--data-root", type=Path, default=None, help="reference data (default: $PFZOO_DATA or <repo>/../shared/data)")
    parser.add_argument("--num-samples", type=int, default=1000, help="samples of each model (default 1000)")
    parser.add_argument("--num-steps", type=int, default=DEFAULT_NUM_STEPS, help=f"Gibbs sweeps of each sample's chain (default {DEFAULT_NUM_STEPS})")
    parser.add_argument("--threshold", type=float, default=0.9, help="top-class probability that counts as recognised (default 0.9)")
    parser.add_argument("--num-train", type=int, default=20000, help="training digits for the classifier, drawn at random (default 20000)")
    parser.add_argument("--max-iter", type=int, default=300, help="L-BFGS iterations (default 300)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the training subsample and of the chains")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--write", action="store_true", help="record the measurement in each card (replacing an earlier one)")
    parser.add_argument("--checkpoint", type=Path, default=None, help="measure this checkpoint instead, on the one --models card's data, "
                                                                        "printing the result")
    args = parser.parse_args(argv)
    if args.checkpoint is not None and (args.write or args.models is None or len(args.models) != 1):
        parser.error("--checkpoint takes exactly one --models name (the card whose data it is measured on) and no --write")
    if args.checkpoint is not None and not args.checkpoint.is_file():
        parser.error(f"--checkpoint must be a saved model file, got {args.checkpoint} (no such file)")
    args.command = card_command("scripts/sample_card.py", sys.argv[1:] if argv is None else argv)
    torch.set_num_threads(args.threads)
    measure_cards(args, measure)


if __name__ == "__main__":
    main()
