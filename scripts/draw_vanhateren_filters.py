"""HAIS report Figure 1 (thesis Figure 5.1) for reports/models/vanhateren: the bases and filters of Table 1's models.

    python scripts/draw_vanhateren_filters.py --data-root ../shared/data   # retrain the cheap rows (~5 CPU min) → filters.png
    python scripts/draw_vanhateren_filters.py --render                     # redraw from runs/vanhateren_filters/ (no training)
    python scripts/reproduce_models.py --source vanhateren --rerender      # then the README's Fig. 1 section from filters.json

The comparison (scripts/reproduce_models.py) trains in temporary folders and keeps no checkpoint, so the rows are retrained
here by the same recipes, seeds and data (ICA and the Student-t POE: exact ML by L-BFGS, ~20 s each; the mcRBM: persistent
MPF, ~4 min), and each retrained model's final training loss is stored beside the comparison's (equal: the same model). The
bilinear row is zoo/training/bilinear-vanhateren/baseline.pt (scripts/bilinear_diagnosis.py's retrain of it, same final loss).
Sparse coding (EM-HMC, ~11 min) is not retrained; panel (b) shows the Laplace-prior check row's basis (ICA's Φ = W⁻¹).
Writes reports/models/vanhateren/filters.{png,json}; the trained models go to runs/vanhateren_filters/ (git-ignored).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
from pathlib import Path

import torch
from hydra.utils import instantiate

from pfzoo.cli import compose
from pfzoo.data.root import resolve_data_root
from pfzoo.models import BilinearGenerative
from pfzoo.studies.model_comparison.comparison import ModelComparison, ml_gaussian_prior_basis
from pfzoo.studies.model_comparison.filters import bases_to_pixels, filters_figure, filters_to_pixels, grouping
from pfzoo.studies.model_comparison.settings import ITERS_PER_EPOCH, NUM_LATENT
from pfzoo.studies.reporting import machine_description
from pfzoo.training import ExactMaximumLikelihood
from pfzoo.training.recipe import fit_recipe

REPO = Path(__file__).resolve().parents[1]
OUT, RUNS = REPO / "reports" / "models" / "vanhateren", REPO / "runs" / "vanhateren_filters"
SHOWN = 12  # tiles of each grouping panel


def train(args, s: dict) -> dict:
    """Retrain ICA, the Student-t POE and the mcRBM as the comparison does; save them (and the data transform) in RUNS."""
    common = ["dataset.source=vanhateren", f"data.root={args.data_root}", f"dataset.num_train={s['num_train']}",
              f"dataset.num_test={s['num_test']}", f"dataset.seed={args.seed}", "trainer.progress=false"]
    recipe = lambda name, run_seed, *more: compose("train", [f"+experiment={name}", *common, f"seed={run_seed}", *more])  # noqa: E731
    splits = instantiate(recipe("hais_poe_laplace", args.seed).dataset)
    study, losses, models = ModelComparison(splits, s, args.seed, recipe), {}, {}
    for recipe_name, name in (("hais_poe_laplace", "ica"), ("hais_poe_student", "poe-student-t")):
        fit = fit_recipe(recipe(recipe_name, args.seed, f"trainer.epochs={math.ceil(s['poe_iters'] / ITERS_PER_EPOCH)}"), splits, dtype=torch.float64)
        losses[name] = (ExactMaximumLikelihood().loss(fit.model, splits.train.double()).item(), fit.seconds)
        models[name] = fit.model.float().requires_grad_(False)
    mcrbm, _, info, _, _ = study.fit_em("models_mcrbm", args.seed + 4, s["mpf_epochs"])
    models["mcrbm"], losses["mcrbm"] = mcrbm, (info["final_loss"], info["seconds"])
    RUNS.mkdir(parents=True, exist_ok=True)
    torch.save({"models": models, "gaussian_basis": ml_gaussian_prior_basis(splits.train, NUM_LATENT, args.seed + 5), "transform": splits.transform,
                "losses": losses}, RUNS / "models.pt")
    return losses


def panels(saved: dict, bilinear: BilinearGenerative) -> list[dict]:
    """Figure 1's panels (a)–(i) from the saved models, in log-pixel space."""
    t, models = saved["transform"], saved["models"]
    ica_basis = torch.linalg.inv(models["ica"].filters.double())  # Φ = W⁻¹, columns are the basis vectors
    style = bilinear.style_weight.detach()
    style_index = style.norm(dim=0).argmax()
    order, strength = grouping(style[:, style_index], SHOWN)
    pooling, factors = models["mcrbm"].pooling.detach(), models["mcrbm"].factors.detach()
    pool_index = pooling.sort(dim=0, descending=True).values[1].argmax()  # the covariance unit that pools its filters most evenly
    pool_order, pool_strength = grouping(pooling[:, pool_index], SHOWN)
    return [
        {"title": "(a) Gaussian-prior linear generative (L = 72, exact ML): bases Φ", "patches": bases_to_pixels(saved["gaussian_basis"].T, t)},
        {"title": "(b) Laplace-prior linear generative, the check row's basis (ICA's Φ = W⁻¹; sparse coding not retrained)", "patches": bases_to_pixels(ica_basis.T, t)},
        {"title": "(c) Laplace POE (ICA, exact ML): filters", "patches": filters_to_pixels(models["ica"].filters.detach(), t)},
        {"title": "(d) Student-t POE (exact ML): filters", "patches": filters_to_pixels(models["poe-student-t"].filters.detach(), t)},
        {"title": "(e) bilinear generative: bases Φ", "patches": bases_to_pixels(bilinear.basis.detach().T, t)},
        {"title": f"(f) bilinear: Φ's columns grouped by Ψ's column {int(style_index)} (largest norm), by |Ψ| and contrast-modulated",
         "patches": bases_to_pixels(bilinear.basis.detach().T[order], t), "contrast": strength},
        {"title": "(g) mcRBM: factor filters C", "patches": filters_to_pixels(factors.T, t)},
        {"title": "(h) mcRBM: mean filters W", "patches": filters_to_pixels(models["mcrbm"].mean_weight.detach().T, t)},
        {"title": f"(i) mcRBM: C's filters pooled by P's column {int(pool_index)}, by P weight and contrast-modulated",
         "patches": filters_to_pixels(factors.T[pool_order], t), "contrast": pool_strength},
    ]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=resolve_data_root(os.environ.get("PFZOO_DATA") or REPO.parent / "shared" / "data"))
    parser.add_argument("--seed", type=int, default=0, help="the comparison's seed")
    parser.add_argument("--render", action="store_true", help="redraw from runs/vanhateren_filters/models.pt, no training")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    comparison = json.loads((OUT / "results.json").read_text())
    if not args.render:
        train(args, comparison["meta"]["settings"])
    saved = torch.load(RUNS / "models.pt", weights_only=False)
    stored = torch.load(REPO / "zoo" / "training" / "bilinear-vanhateren" / "baseline.pt", weights_only=True)
    bilinear = BilinearGenerative(**stored["config"], init_std=0.0)
    bilinear.load_state_dict(stored["state_dict"])
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure = filters_figure(panels(saved, bilinear))
    figure.savefig(OUT / "filters.png", dpi=120)
    plt.close(figure)
    theirs = {row["name"]: row.get("training", {}).get("final_loss") for row in comparison["models"]}
    record = {"date": datetime.date.today().isoformat(), "machine": machine_description(),
              "final_loss": {name: {"retrained": loss, "comparison": theirs.get(name), "train_seconds": seconds}
                             for name, (loss, seconds) in saved["losses"].items()},
              "bilinear": "zoo/training/bilinear-vanhateren/baseline.pt", "sparse_coding": "not retrained (EM-HMC, 687 s in the comparison)"}
    (OUT / "filters.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record["final_loss"], indent=1))


if __name__ == "__main__":
    main()
