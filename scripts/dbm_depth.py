"""Measure what a zoo DBM's top layer contributes and record it on its card (issue 48's depth diagnostic).

    python scripts/dbm_depth.py                                  # models/dbm-binarized_mnist: AIS K = 10⁴, 100 chains
    python scripts/dbm_depth.py --name dbm-digits --num-steps 1000
    python scripts/dbm_depth.py --checkpoint RUN_DIR/checkpoint.pt --num-test 2000 [--device cuda] [--compile]

The DBM and the DBM without its top layer (the top layer's average input over the test digits folded into the bias
below, :meth:`pfzoo.models.DBM.without_top_layer`) are measured by AIS from the data base rates with the same settings
and seed (:func:`pfzoo.studies.dbm_depth.depth_diagnostic`); the result goes into the card's ``depth`` and its README.
With --checkpoint (a DBM in training, say) it is measured on the data of --name's card, on --num-test random test digits,
and printed as one JSON line: no card changes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

import torch

from pfzoo import zoo
from pfzoo.data.root import resolve_data_root
from pfzoo.estimators import AIS
from pfzoo.studies.dbm_depth import depth_diagnostic
from pfzoo.studies.reporting import card_command, machine_description
from pfzoo.zoo.cards import with_card_sections

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", default="dbm-binarized_mnist", help="the zoo DBM (a folder of models/)")
    parser.add_argument("--num-steps", type=int, default=10_000, help="AIS intermediate distributions K")
    parser.add_argument("--num-chains", type=int, default=100, help="AIS chains")
    parser.add_argument("--posterior-samples", type=int, default=100, help="mean-field proposals per digit for the DBM's log f(v)")
    parser.add_argument("--data-root", type=Path, default=None, help="folder holding the card's data set")
    parser.add_argument("--zoo", type=Path, default=REPO / "models", help="the zoo folder holding --name")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--checkpoint", type=Path, default=None, help="measure this DBM checkpoint instead, printing the result")
    parser.add_argument("--num-test", type=int, default=None, help="with --checkpoint: this many random test digits (seeded by --seed)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--compile", action="store_true", help="AIS with compile=True: a faster step, hashed draws (pfzoo.hashed_draws)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    folder = args.zoo / args.name
    card = json.loads((folder / zoo.CARD_DATA_FILE).read_text())
    if card["family"] != "dbm":
        parser.error(f"--name must name a DBM of the zoo, got {args.name} (family {card['family']})")
    root = resolve_data_root(args.data_root or os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data")
    data = zoo.pretrained_dataset(args.name, root, zoo_dir=args.zoo)
    model = zoo.load(args.checkpoint, map_location=args.device) if args.checkpoint else zoo.pretrained(args.name, zoo_dir=args.zoo)
    settings = {"num_chains": args.num_chains, "num_steps": args.num_steps, "schedule": "linear", "base": "base_rate",
                "posterior_samples": args.posterior_samples, **({"compile": True} if args.compile else {})}
    estimator = AIS(**settings)
    began = time.perf_counter()
    test, train = data.test.to(model.device, model.dtype), data.train.to(model.device, model.dtype)
    if args.num_test is not None:
        test = test[torch.randperm(test.shape[0], generator=torch.Generator().manual_seed(args.seed))[: args.num_test].to(model.device)]
    depth = depth_diagnostic(model, test, train, estimator, seed=args.seed)
    if args.checkpoint:
        print(json.dumps({"checkpoint": str(args.checkpoint), "settings": settings, "seconds": round(time.perf_counter() - began, 1),
                          **depth}))
        return
    command = card_command("scripts/dbm_depth.py", sys.argv[1:] if argv is None else argv, flags=())  # without this machine's folders
    card["depth"] = {**depth, "estimator": "ais", "settings": settings, "seed": args.seed, "machine": machine_description(),
                     "date": datetime.date.today().isoformat(), "seconds": round(time.perf_counter() - began, 1), "command": command}
    readme = (folder / zoo.CARD_FILE).read_text()
    (folder / zoo.CARD_DATA_FILE).write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    (folder / zoo.CARD_FILE).write_text(with_card_sections(readme, card))
    print(f"{args.name}: DBM {depth['model']['value']:.2f}, without its top layer {depth['without_top']['value']:.2f}, "
          f"top layer {depth['loss']:+.2f} ± {depth['loss_stderr']:.2f} nats; share {depth['top_layer_share']:.3f}")


if __name__ == "__main__":
    main()
