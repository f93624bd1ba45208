"""A linear classifier on the hidden features of zoo models, printed and (``--write``) recorded in their model cards.

    python scripts/feature_card.py                                   # every zoo model trained on binarised MNIST
    python scripts/feature_card.py --models rbm-digits dbn-digits    # any zoo model with hidden means and labelled data
    python scripts/feature_card.py --write                           # also write the measurement into card.json + README.md

Multinomial logistic regression on the hidden units' means given the image (:mod:`pfzoo.studies.features`: every hidden
layer side by side, or one with ``--layer``), scored on the whole test split, beside the same classifier on the raw pixels. The data are the
card's data set where it has labels. Larochelle & Murray's binarised MNIST has none (its files are not in MNIST's order:
:mod:`pfzoo.data.binarized_mnist`), so its models are measured on the official MNIST files under the data root, each
pixel a Bernoulli draw of its intensity (seed 0) as Larochelle & Murray binarised them: the same test images; the
training images a random ``--num-train`` of MNIST's 60,000 (a superset of the models' 50,000). Needs
``MNIST/raw/*-ubyte`` under ``--data-root`` (default ``$PFZOO_DATA`` or ``<repo>/../shared/data``).

A script, not ``evaluate.py features=true``: writing into the zoo's cards is zoo maintenance like
``scripts/bridging_card.py``, and ``evaluate.py``'s contract is a log-likelihood (its evaluation.json); this keeps the
typed evaluate config as it is.
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
from omegaconf import OmegaConf

from pfzoo import zoo
from pfzoo.data import DataSplits, mnist
from pfzoo.models import Capability
from pfzoo.studies.features import feature_accuracy
from pfzoo.studies.reporting import card_command
from pfzoo.zoo.cards import ACCURACY_METRIC, with_card_sections

REPO = Path(__file__).resolve().parents[1]
LABEL = "linear classifier on hidden features: test accuracy"
CLASSIFIER = "multinomial logistic regression (scikit-learn LogisticRegression, L-BFGS, L2)"
MNIST_DATA = ("MNIST from the official IDX files with their labels, each pixel a Bernoulli draw of its intensity (seed 0) "
              "as Larochelle & Murray binarised it (their files carry no labels and are not in MNIST's order): the same "
              "10,000 test images; the classifier's training images drawn from MNIST's 60,000.")


def label(layer: int | None) -> str:
    """The card label of a measurement on every hidden layer (``None``) or on one; a re-run replaces its own label's entry."""
    return LABEL if layer is None else f"{LABEL} (hidden layer {layer})"


def labelled_data(card: dict, root: Path) -> tuple[DataSplits, str]:
    """The data a card's model is measured on, with labels, and a sentence saying what they are."""
    if card["dataset"] == "binarized_mnist":
        return mnist(root, binarize="stochastic", binarize_seed=0, download=False), MNIST_DATA
    config = OmegaConf.create(card["dataset_config"])
    if "root" in config:
        config.root = str(root)
    data = instantiate(config)
    return data, f"The card's data set `{card['dataset']}` with its labels."


def model_with_labelled_data(name: str, zoo_dir: Path, root: Path, needs: Capability, lacking: str,
                             checkpoint: Path | None = None) -> tuple | None:
    """Zoo model ``name`` (or the model saved in ``checkpoint``, a run in training, say), the data of ``name``'s card with
    labels and the sentence saying what they are, or ``None`` (after saying why) when the model lacks ``needs``
    (``lacking`` says so in words) or the data have no labels."""
    card = zoo.pretrained_card(name, zoo_dir=zoo_dir)
    model = zoo.load(checkpoint) if checkpoint is not None else zoo.pretrained(name, zoo_dir=zoo_dir)
    if needs not in model.capabilities:
        print(f"{name}: skipped, {type(model).__name__} has no {lacking}", flush=True)
        return None
    data, description = labelled_data(card, root)
    if not data.labelled:
        print(f"{name}: skipped, the data set {card['dataset']!r} has no labels", flush=True)
        return None
    return model, data, description


def measure(name: str, zoo_dir: Path, root: Path, args) -> dict | None:
    """One zoo model's measurement as a card entry, or ``None`` (after saying why) when it does not apply."""
    loaded = model_with_labelled_data(name, zoo_dir, root, Capability.HIDDEN_MEANS, "hidden means")
    if loaded is None:
        return None
    model, data, description = loaded
    began = time.perf_counter()
    result = feature_accuracy(model, data, layer=args.layer, num_train=args.num_train, max_iter=args.max_iter, C=args.C,
                              generator=torch.Generator().manual_seed(args.seed))
    seconds = time.perf_counter() - began
    print(f"{name}: hidden features ({result.num_features}) {result.features:.4f}, raw pixels {result.pixels:.4f}, majority class "
          f"{result.chance:.4f}; {result.num_train} training / {result.num_test} test examples, {seconds:.0f} s"
          + ("" if result.converged else " (L-BFGS hit max_iter)"), flush=True)
    record = result.record()
    return {
        "label": label(args.layer), "metric": ACCURACY_METRIC, "value": record.pop("features"), **record,
        "layers_description": "every hidden layer's means" if args.layer is None else ("the top hidden layer's means" if args.layer == -1
                                                                                        else f"hidden layer {args.layer}'s means"),
        "data": description,
        "settings": {"classifier": CLASSIFIER, "C": result.C, "max_iter": result.max_iter, "num_train": result.num_train,
                     "subsample_seed": args.seed},
        "seconds": round(seconds, 1),
        "command": args.command,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=None, help="zoo names (default: every model trained on binarized_mnist)")
    parser.add_argument("--zoo", type=Path, default=REPO / "models", help="the zoo folder (default: the checkout's models/)")
    parser.add_argument("--data-root", type=Path, default=None, help="reference data (default: $PFZOO_DATA or <repo>/../shared/data)")
    parser.add_argument("--num-train", type=int, default=20000, help="training rows for the classifier, drawn at random (default 20000)")
    parser.add_argument("--max-iter", type=int, default=300, help="L-BFGS iterations (default 300)")
    parser.add_argument("--C", type=float, default=1.0, help="inverse L2 strength (default 1)")
    parser.add_argument("--layer", type=int, default=None, help="one hidden layer's means (0 = first, -1 = top; default: all layers)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the training subsample")
    parser.add_argument("--write", action="store_true", help="record the measurement in each card (replacing an earlier one)")
    args = parser.parse_args(argv)
    args.command = card_command("scripts/feature_card.py", sys.argv[1:] if argv is None else argv)
    measure_cards(args, measure)


def measure_cards(args, measure) -> None:
    """``measure(name, zoo_dir, root, args)`` for each of ``args.models`` (default: every model of ``args.zoo`` trained on
    binarised MNIST), printed, and with ``args.write`` recorded in each card (:func:`write`); the reference data under
    ``args.data_root`` (default ``$PFZOO_DATA`` or ``<repo>/../shared/data``)."""
    root = args.data_root or Path(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")
    names = args.models or [name for name in zoo.list_pretrained(zoo_dir=args.zoo)
                            if zoo.pretrained_card(name, zoo_dir=args.zoo)["dataset"] == "binarized_mnist"]
    for name in names:
        entry = measure(name, args.zoo, root, args)
        if entry is None or not args.write:
            continue
        write(args.zoo / name, entry)
        print(f"  wrote {args.zoo / name / zoo.CARD_DATA_FILE} and {zoo.CARD_FILE}", flush=True)


def write(folder: Path, entry: dict) -> None:
    """Put ``entry`` into ``folder``'s card.json (replacing an earlier one) and its README.md: re-rendered where
    :func:`pfzoo.zoo.render_card` made it, else (a README another script renders) with only the section set."""
    card = json.loads((folder / zoo.CARD_DATA_FILE).read_text())
    readme = (folder / zoo.CARD_FILE).read_text()
    rendered_here = readme == zoo.render_card(card).render()
    card["measurements"] = [m for m in card.get("measurements") or [] if m.get("label") != entry["label"]] + [entry]
    card = zoo.write_card(folder, card, readme=False)
    (folder / zoo.CARD_FILE).write_text(zoo.render_card(card).render() if rendered_here else with_card_sections(readme, card))


if __name__ == "__main__":
    main()
