"""Fig. 5 of Sohl-Dickstein & Culpepper (2011) for the analysis models: products of Laplace and Student-t experts trained
by MPF with full-batch L-BFGS (conf/experiment/models_poe_*_mpf_lbfgs.yaml), and the mcRBM (models_mcrbm.yaml), at
several sizes, each evaluated with a HAIS log Ẑ from N(0, I); the best size per family gives Table 1's rows (§5.4:
"for both POE models and the mcRBM they were chosen from the best performing datapoints in Figure 5")."""

from __future__ import annotations

import torch

from pfzoo.studies.model_comparison.comparison import count_parameters
from pfzoo.studies.model_comparison.row_recorder import RowRecorder, exact_check
from pfzoo.studies.model_comparison.settings import DIM

FAMILIES = {"laplace": ("models_poe_laplace_mpf_lbfgs", "POE, Laplace experts"),
            "student-t": ("models_poe_student_mpf_lbfgs", "POE, Student-t experts"),
            "mcrbm": ("models_mcrbm", "mcRBM")}
"""family → (recipe, Table 1's name)."""
PAPER_TABLE1 = {"gaussian": ("Linear generative, Gaussian", 36, -49.15, 2.31), "linear-laplace": ("Linear generative, Laplace", 36, -42.85, 2.41),
                "laplace": ("POE, Laplace experts", 144, -41.54, 2.46), "mcrbm": ("mcRBM", 432, -36.01, 2.57),
                "student-t": ("POE, Student's t experts", 144, -34.01, 2.68), "bilinear": ("Bilinear generative", 98, -32.69, 2.56)}
"""The seed's Table 1: key → (model, size, average test log-likelihood, its ±), sizes as the table counts them."""
PAPER_FIG5 = {"laplace": "relatively poor; no evidence that it overfits", "student-t": "rises quickly to a high level, then overfits dramatically",
              "mcrbm": "performs poorly at a number of auxiliary variables comparable to the best POE",
              "bilinear": "outperforms all other models with only a small number of auxiliary variables"}
"""What §5.3 says of each curve of Fig. 5 (the figure has no numbers in the text)."""


def best_rows(rows: list[dict]) -> dict[str, dict]:
    """family → its row with the largest test log-likelihood (failed rows never win)."""
    best: dict[str, dict] = {}
    for row in (r for r in rows if not r.get("failed")):
        if row["family"] not in best or row["evaluation"]["mean"] > best[row["family"]]["evaluation"]["mean"]:
            best[row["family"]] = row
    return best


class SizeSweep(RowRecorder):
    """Trains and evaluates the analysis models of Fig. 5 at given sizes on ``splits`` (whitened patches ``[N, 36]``) with
    the budgets ``s`` (keys of :data:`~pfzoo.studies.model_comparison.settings.SETTINGS`; ``logz_steps`` N and
    ``logz_chains`` of the HAIS log Ẑ, ``convergence_steps`` the shorter runs of its convergence check). One row per
    model in :attr:`rows`, with ``family`` and ``size`` (Table 1's count: experts, or mean + covariance units)."""

    def product_of_experts(self, family: str, num_experts: int, epochs: int, run_seed: int, tag: str = "") -> dict:
        """A POE with ``num_experts`` experts, MPF + full-batch L-BFGS for ``epochs`` epochs, log Ẑ by HAIS; a complete one
        (``num_experts`` = 36) is also evaluated exactly, which checks the HAIS value (``row["exact_check"]``)."""
        recipe_name, label = FAMILIES[family]
        if (done := self.row_named(f"poe-{family}-{num_experts}{tag}")) is not None:
            return done
        model, cfg, info, fields, losses = self.fit_em(recipe_name, run_seed, epochs, f"model.num_experts={num_experts}")
        row = {"name": f"poe-{family}-{num_experts}{tag}", "family": family, "size": num_experts, "label": f"{label}, L = {num_experts}{tag}",
               "parameters": count_parameters(model), "train_method": f"MPF (persistent HMC connectivity) + full-batch L-BFGS, {info['epochs']} epochs",
               "num_train": self.train.shape[0], **fields,
               "description": f"`+experiment={recipe_name} model.num_experts={num_experts} trainer.epochs={epochs}`: `Trainer(MPF(continuous="
                              f"PersistentMPF(num_hmc_steps={cfg.trainer.objective.continuous.num_hmc_steps}, step_size="
                              f"{cfg.trainer.objective.continuous.step_size}, num_leapfrog={cfg.trainer.objective.continuous.num_leapfrog})), "
                              f"LBFGS(max_iter={cfg.trainer.optimizer.max_iter}, history_size={cfg.trainer.optimizer.history_size}, strong Wolfe), "
                              f"full batch of {self.train.shape[0]:,})` (conf/trainer/mpf.yaml)."}
        if info["error"]:
            return self.fail(row, info["error"])
        norms = model.filters.norm(dim=1).sort().values
        row["notes"] = f"filter norms {norms[0]:.2f} / {norms[len(norms) // 2]:.2f} / {norms[-1]:.2f} (min/median/max)"
        if family == "student-t":
            shapes = model.shape.sort().values
            row["notes"] += f"; λ {shapes[0]:.3f} / {shapes[len(shapes) // 2]:.3f} / {shapes[-1]:.3f}"
        evaluation = self.pilot_and_evaluate(row, model, self.test, self.s["logz_chains"], self.s["logz_steps"], latent=False, convergence=True)
        if num_experts == DIM:
            with torch.no_grad():
                exact = model.log_prob(self.test).double().mean().item()
            row["exact_check"] = exact_check(evaluation["mean"], exact, evaluation["log_z_stderr"])
            if row["exact_check"]["warning"]:
                evaluation["warnings"].append(row["exact_check"]["warning"])
        return self.finish_with_train(row, model, evaluation)

    def row_named(self, name: str) -> dict | None:
        """The row called ``name`` when a resumed run already holds it (:attr:`rows` preloaded from results.json), else ``None``."""
        return next((r for r in self.rows if r["name"] == name), None)

    def finish_with_train(self, row: dict, model, evaluation: dict) -> dict:
        """Record the row with its train log-likelihood, mean(−F(x_train)) − log Ẑ with the test value's log Ẑ (train − test
        is the overfitting of §5.3's Student-t curve)."""
        with torch.no_grad():
            row["train_mean"] = (-model.free_energy(self.train)).double().mean().item() - evaluation["log_z"]
        return self.finish(row, evaluation)

    def mcrbm(self, size: int, epochs: int, run_seed: int) -> dict:
        """An mcRBM with ``size`` = mean + covariance units, split equally, and twice as many factors as covariance units
        (the zoo's 72 / 36 / 36 ratio); persistent MPF + Adam (full-batch L-BFGS lets its parameters run away,
        conf/model/mcrbm.yaml), log Ẑ by HAIS."""
        half = size // 2
        if (done := self.row_named(f"mcrbm-{2 * half}")) is not None:
            return done
        model, cfg, info, fields, _ = self.fit_em("models_mcrbm", run_seed, epochs, f"model.num_factors={2 * half}",
                                                  f"model.num_covariance_hidden={half}", f"model.num_mean_hidden={half}")
        row = {"name": f"mcrbm-{2 * half}", "family": "mcrbm", "size": 2 * half, "label": f"mcRBM, {half} mean + {half} covariance units",
               "parameters": count_parameters(model), "train_method": f"persistent MPF + Adam, {info['epochs']} epochs", "num_train": self.train.shape[0],
               **fields, "description": f"`+experiment=models_mcrbm model.num_factors={2 * half} model.num_covariance_hidden={half} "
                                        f"model.num_mean_hidden={half} trainer.epochs={epochs}` (Adam lr {cfg.trainer.optimizer.lr}, batch {cfg.trainer.batch_size})."}
        if info["error"]:
            return self.fail(row, info["error"])
        evaluation = self.pilot_and_evaluate(row, model, self.test, self.s["logz_chains"], self.s["logz_steps"], latent=False, convergence=True)
        return self.finish_with_train(row, model, evaluation)
