"""Why the bilinear model is last on van Hateren (HAIS report Table 1): the estimator, the training or the data, measured
(pfzoo/studies/bilinear_diagnosis.py says what each stage measures). Stages, each merging its part into results.json:

    python scripts/bilinear_diagnosis.py train                     # the comparison's bilinear model (~30 min) → zoo/training/bilinear-vanhateren/baseline.pt
    python scripts/bilinear_diagnosis.py measure                   # HAIS N-sweep to 10⁵ on test patches, BDMC on simulated ones, moments
    python scripts/bilinear_diagnosis.py train --name ica-50 --start ica --epochs 50    # one training setting changed
    python scripts/bilinear_diagnosis.py ablate --name ica-50      # its HAIS estimate on the same patches → the ablation table
    python scripts/bilinear_diagnosis.py render                    # README.md from results.json

Data: the comparison's (reports/models/vanhateren: seed 0, 20,000 training and 5,000 test patches of the van Hateren image
in <data-root>/natural_images); HAIS's setting is the comparison's pilot choice for the bilinear row, read from its results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
from hydra.utils import instantiate

from pfzoo.cli import compose
from pfzoo.data.root import resolve_data_root
from pfzoo.models import BilinearGenerative
from pfzoo.studies import reporting
from pfzoo.studies.bilinear_diagnosis import (bidirectional, convergence_in_n, e_step_geweke, excess_kurtosis, second_moments, state_hash,
                                             train_variant)
from pfzoo.studies.bilinear_diagnosis_report import readme
from pfzoo.studies.model_comparison.settings import SETTINGS
from pfzoo.studies.step_size_pilot import HAISSetting

REPO = Path(__file__).resolve().parents[1]
COMPARISON = REPO / "reports" / "models" / "vanhateren" / "results.json"
COMPARISONS = {"vanhateren": COMPARISON, "embedded": REPO / "reports" / "models" / "results.json"}


def comparison_means(path: Path) -> dict:
    """Each row's test log-likelihood in a model comparison's results.json."""
    return {m["name"]: m["evaluation"]["mean"] for m in json.loads(path.read_text())["models"] if "evaluation" in m}


def load_data(data_root: Path, seed: int, source: str = "vanhateren"):
    """The comparison's splits and the compose function of its recipes."""
    s = SETTINGS["full"]
    common = [f"dataset.source={source}", f"data.root={data_root}", f"dataset.num_train={s['num_train']}", f"dataset.num_test={s['num_test']}",
              f"dataset.seed={seed}", "trainer.progress=false"]
    recipe = lambda name, run_seed, *more: compose("train", [f"+experiment={name}", *common, f"seed={run_seed}", *more])  # noqa: E731
    return instantiate(recipe("hais_poe_laplace", seed).dataset), recipe


def same_patch_references(num_patches: int) -> dict:
    """Each comparison row's mean log-likelihood on the first ``num_patches`` patches of its common subset, with its kind."""
    rows = json.loads(COMPARISON.read_text())["models"]
    return {m["name"]: {"label": m["label"], "kind": m["evaluation"]["kind"], "mean": sum(m["subset_per_example"][:num_patches]) / num_patches}
            for m in rows if m.get("subset_per_example")}


def comparison_choice() -> tuple[HAISSetting, list[int]]:
    """The comparison's HAIS setting for the bilinear row and its common test subset's indices."""
    payload = json.loads(COMPARISON.read_text())
    pilot = next(m for m in payload["models"] if m["name"] == "bilinear")["pilot"]
    return HAISSetting(pilot["step_size"], pilot["stiffness"], pilot["schedule"]), payload["meta"]["subset_indices"]


def load_model(path: Path) -> BilinearGenerative:
    saved = torch.load(path, weights_only=True)
    model = BilinearGenerative(**saved["config"], init_std=0.0)
    model.load_state_dict(saved["state_dict"])
    return model.requires_grad_(False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", choices=("train", "measure", "ablate", "geweke", "render"))
    parser.add_argument("--name", default="baseline", help="model name: <model-dir>/<name>.pt")
    parser.add_argument("--start", choices=("random", "ica"), default="random", help="train: initial weights")
    parser.add_argument("--epochs", type=int, default=SETTINGS["full"]["bilinear_epochs"], help="train: EM epochs")
    parser.add_argument("--num-style", type=int, default=8, help="train: style latents Ld (the recipe's 8; the model has 36 + Ld latents)")
    parser.add_argument("--override", action="append", default=[], help="train: a recipe override (repeatable)")
    parser.add_argument("--sweep-steps", type=lambda v: int(float(v)), nargs="+", default=[1000, 10000, 30000, 100000])
    parser.add_argument("--bdmc-steps", type=lambda v: int(float(v)), nargs="+", default=[1000, 10000, 30000])
    parser.add_argument("--patches", type=int, default=20, help="test patches (the first of the comparison's common subset)")
    parser.add_argument("--particles", type=int, default=100, help="HAIS particles per patch (BDMC: chains per direction = particles / 5)")
    parser.add_argument("--ablation-steps", type=lambda v: int(float(v)), default=10000, help="ablate: HAIS N")
    parser.add_argument("--model-dir", type=Path, default=REPO / "zoo" / "training" / "bilinear-vanhateren")
    parser.add_argument("--data-root", type=Path, default=resolve_data_root(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data"))
    parser.add_argument("--out-dir", type=Path, default=REPO / "reports" / "models" / "vanhateren" / "bilinear")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    results_path = args.out_dir / "results.json"
    payload = json.loads(results_path.read_text()) if results_path.exists() else {}
    if args.stage == "render":
        (args.out_dir / "README.md").write_text(readme(payload))
        return print(f"wrote {args.out_dir / 'README.md'}")
    header = {**reporting.run_header(sys.argv if argv is None else ["scripts/bilinear_diagnosis.py", *argv], args.threads)}
    splits, recipe = load_data(args.data_root, args.seed)
    model_path = args.model_dir / f"{args.name}.pt"
    if args.stage == "train":
        model, info = train_variant(splits, dict(SETTINGS["full"]), args.seed, recipe, args.start, args.epochs, *args.override,
                                    num_style=args.num_style)
        args.model_dir.mkdir(parents=True, exist_ok=True)
        torch.save({"config": model.config(), "state_dict": model.state_dict()}, model_path)
        info.update(sha256=state_hash(model), start=args.start, overrides=args.override, num_style=args.num_style, **header)
        model_path.with_suffix(".json").write_text(json.dumps(info, indent=1, default=float) + "\n")
        return print(f"wrote {model_path} ({info['wall_seconds']:.0f} s, final complete-data loss {info['final_loss']})")
    model = load_model(model_path)
    setting, subset = comparison_choice()
    patches = splits.test[torch.tensor(subset[: args.patches])]
    record = {"model": args.name, "sha256": state_hash(model), "setting": vars(setting), "patches": args.patches, **header}
    if args.stage == "measure":
        record["sweep"] = convergence_in_n(model, patches, setting, args.sweep_steps, args.particles, args.seed + 100, print)
        record["bdmc"] = bidirectional(model, args.patches, setting, args.bdmc_steps, args.particles // 5, args.seed + 200, print)
        record["moments"] = second_moments(model, splits.test, 20000, args.seed + 300)
        record["particles"] = args.particles
        payload.setdefault("measure", {})[args.name] = record
        payload["data"] = {source: {"excess_kurtosis": excess_kurtosis(load_data(args.data_root, args.seed, source)[0].test),
                                    "comparison": comparison_means(path)} for source, path in COMPARISONS.items()}
        payload["references"] = same_patch_references(args.patches)
    elif args.stage == "geweke":  # the E-step sampler at the trained model's own adapted step, ten leapfrog steps as in training
        step = json.loads(model_path.with_suffix(".json").read_text())["final_step_size"]
        result = e_step_geweke(model.double(), 50000, 20, args.seed + 400, step_size=step, num_leapfrog=10)
        payload.setdefault("geweke", {})[args.name] = {**record, **{k: v for k, v in result.items() if k != "z_scores"}, "step_size": step,
                                                       "num_statistics": len(result["z_scores"])}
        print(f"Geweke: largest |z| {result['max_abs_z']:.2f} of {len(result['z_scores'])} statistics, acceptance {result['acceptance']:.2f}")
    else:
        training = json.loads(model_path.with_suffix(".json").read_text())
        row = convergence_in_n(model, patches, setting, [args.ablation_steps], args.particles, args.seed + 100, print)[0]
        payload.setdefault("ablation", {})[args.name] = {**record, "estimate": row, "particles": args.particles,
                                                        "training": {**{k: training.get(k) for k in ("start", "overrides", "epochs", "final_loss", "wall_seconds", "sha256")},
                                                                     "num_style": training.get("num_style", 8)}}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    results_path.write_text(json.dumps(payload, indent=1, default=float) + "\n")
    (args.out_dir / "README.md").write_text(readme(payload))
    print(f"wrote {results_path}")


if __name__ == "__main__":
    main()
