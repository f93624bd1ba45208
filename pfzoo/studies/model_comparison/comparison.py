"""The models of the comparison, trained and evaluated one after another in the table's order: the Gaussian, the complete
products of experts (exact ML), sparse coding, the estimator checks, the bilinear model, the mcRBM, the products of
experts trained by MPF, and Fig. 5's size sweep."""

from __future__ import annotations

import copy
import logging
import math
import time
from typing import Callable

import torch
from omegaconf import DictConfig

from pfzoo.data.splits import DataSplits
from pfzoo.logmath import log_mean_exp
from pfzoo.models import Gaussian, LinearGenerative
from pfzoo.studies.model_comparison.row_recorder import RowRecorder, exact_check, gen
from pfzoo.studies.model_comparison.settings import DIM, ITERS_PER_EPOCH, NOISE_STD, NUM_LATENT, POE_MPF_RECIPES, SWEEP_SIZES
from pfzoo.training import ExactMaximumLikelihood
from pfzoo.training.recipe import fit_recipe

logger = logging.getLogger(__name__)


def count_parameters(model) -> int:
    """Free parameters: every entry of every parameter tensor (the Gaussian row counts its own, see :meth:`ModelComparison.gaussian`)."""
    return sum(p.numel() for p in model.parameters())


def ica_initial_basis(ica_basis: torch.Tensor, num_latent: int, seed: int) -> torch.Tensor:
    """``[M, L]``: the ICA basis's min(L, M) longest columns, then columns of 0.01·N(0, 1) up to L (EM from a random basis
    stays far below ICA: −43 against −32 in the 2026-11-22 report; the extra columns start small so they only add)."""
    order = ica_basis.norm(dim=0).argsort(descending=True)[: min(num_latent, ica_basis.shape[1])]
    extra = 0.01 * torch.randn(ica_basis.shape[0], num_latent - order.numel(), generator=gen(seed), dtype=ica_basis.dtype)
    return torch.cat([ica_basis[:, order], extra], dim=1)


def ml_gaussian_prior_basis(train: torch.Tensor, num_latent: int, seed: int) -> torch.Tensor:
    """The ML Φ ``[M, L]`` of the Gaussian-prior linear generative model with σ_n fixed (probabilistic PCA): ΦΦᵀ = S − σ_n² I
    (eigenvalues below σ_n² clipped), Φ = (S − σ_n² I)^½ R with R ``[M, L]`` with orthonormal rows (any such R is optimal)."""
    data = train.double()
    values, vectors = torch.linalg.eigh(data.T @ data / data.shape[0])
    root = vectors @ torch.diag((values - NOISE_STD**2).clamp_min(0).sqrt()) @ vectors.T
    q, r = torch.linalg.qr(torch.randn(num_latent, DIM, generator=gen(seed), dtype=torch.float64))
    return (root @ (q * r.diagonal().sign()).T).float()


@torch.no_grad()
def noise_convolved_log_prob(model, x: torch.Tensor, draws: int, generator: torch.Generator) -> torch.Tensor:
    """``log E_n[p(x − n)]``, ``n ~ N(0, σ_n² I)``, for ``x [B, D]`` → ``[B]`` by simple Monte Carlo over ``draws`` noise vectors."""
    reference = copy.deepcopy(model).double()
    return torch.stack([log_mean_exp(reference.log_prob(row - NOISE_STD * torch.randn(draws, x.shape[1], generator=generator, dtype=torch.float64)), dim=0)
                        for row in x.double()])


class ModelComparison(RowRecorder):
    """Trains and evaluates the comparison's models on ``splits`` (whitened patches ``[N, 36]``) with the budgets ``s``
    (one of :data:`~pfzoo.studies.model_comparison.settings.SETTINGS`, possibly overridden), collecting one row per model
    in :attr:`rows` (how a row is trained, evaluated and recorded: :class:`RowRecorder`)."""

    def __init__(self, splits: DataSplits, s: dict, seed: int, recipe: Callable[..., DictConfig]) -> None:
        super().__init__(splits, s, seed, recipe)
        self.sweep_seconds = 0.0  # Fig. 5's wall time, set by size_sweep

    def run(self, sweep: bool) -> tuple[list[dict] | None, dict]:
        """Every model in the table's order, then (``sweep``) Fig. 5's sizes; returns the sweep's entries (``None``
        without it) and its exact references (label → mean on the same patches)."""
        self.gaussian()
        self.products_of_experts()
        sparse_coding = self.sparse_coding(NUM_LATENT, f"Sparse coding (Laplace linear generative, L = {NUM_LATENT})")
        self.estimator_checks()
        self.bilinear()
        self.mcrbm()
        self.mpf_products_of_experts()
        return self.size_sweep(sparse_coding) if sweep else (None, {})

    def gaussian(self) -> None:
        """1. The Gaussian (exact ML)."""
        train = self.train
        began = time.perf_counter()
        gaussian = Gaussian.fit(train).requires_grad_(False)
        self.timers["training"] += (seconds := time.perf_counter() - began)
        m = gaussian.num_visible  # the mean, and of the precision's Cholesky factor only the lower triangle
        self.exact({"name": "gaussian", "label": "Gaussian", "parameters": m + m * (m + 1) // 2, "sizes": "mean and full covariance",
                    "train_method": "exact ML (`Gaussian.fit`)", "train_seconds": seconds,
                    "description": "`Gaussian.fit(train)`: sample mean and covariance (+1e-6·I); the data are whitened on the training set, so ≈ N(0, I)."}, gaussian)

    def products_of_experts(self) -> None:
        """2-3. Complete products of experts: exact ML, full-batch L-BFGS in float64 (conf/experiment/hais_poe_*.yaml); keeps
        ICA's model and basis Φ = W⁻¹ for sparse coding's start and the estimator check."""
        s, seed, train = self.s, self.seed, self.train
        for recipe_name, name, label in (("hais_poe_laplace", "ica", "ICA (complete Laplace POE)"), ("hais_poe_student", "poe-student-t", "Student-t POE (complete)")):
            cfg = self.recipe(recipe_name, seed, f"trainer.epochs={math.ceil(s['poe_iters'] / ITERS_PER_EPOCH)}")
            fit = fit_recipe(cfg, self.splits, dtype=torch.float64)
            final = ExactMaximumLikelihood().loss(fit.model, train.double())
            final.backward()
            grad_norm = math.sqrt(sum(p.grad.square().sum().item() for p in fit.model.parameters()))
            model, student = fit.model.float().requires_grad_(False), name == "poe-student-t"
            self.timers["training"] += fit.seconds
            info = {"optimizer": f"`+experiment={recipe_name}`: torch.optim.LBFGS(lr=1, history_size=20, strong Wolfe line search) on the full training "
                                 f"set in float64 through `pfzoo.training.Trainer`, {ITERS_PER_EPOCH} iterations per epoch until an epoch changes the loss "
                                 f"by ≤ {cfg.trainer.stop_tolerance:g}·|loss| (at most {cfg.trainer.epochs * ITERS_PER_EPOCH})",
                    "initial_loss": fit.records[0]["loss"], "final_loss": final.item(), "iterations": fit.optimizer_state["state"][0]["n_iter"],
                    "final_grad_norm": grad_norm, "converged": fit.stop_reason is not None, "seconds": fit.seconds}
            norms, shapes = model.filters.norm(dim=1).sort().values, model.shape.sort().values
            notes = (f"L-BFGS {info['iterations']} iterations, final |grad| {grad_norm:.1e}" + ("" if info["converged"] else " (iteration limit)")
                     + f"; filter norms {norms[0]:.2f} / {norms[len(norms) // 2]:.2f} / {norms[-1]:.2f} (min/median/max)"
                     + (f"; λ {shapes[0]:.3f} / {shapes[len(shapes) // 2]:.3f} / {shapes[-1]:.3f}" if student else ""))
            self.exact({"name": name, "label": label, "parameters": count_parameters(model), "sizes": "36 experts, complete" + (", λ learned" if student else ""),
                        "train_method": "exact ML, full-batch L-BFGS", "train_seconds": fit.seconds, "notes": notes, "training": info,
                        "description": f"`ProductOfExperts(36, 36, expert={model.expert!r})`: {info['optimizer']}; loss {info['initial_loss']:.3f} → "
                                       f"{info['final_loss']:.4f}"
                                       + ("; λ = ½ + softplus(ρ) (`shape_above_half=True`) keeps Z finite during line searches" if student else "") + "."}, model)
            if name == "ica":
                self.ica_model, self.ica_basis = model, torch.linalg.inv(model.filters.detach().double()).float()  # Φ = W⁻¹: ICA's basis, sparse coding's start

    def sparse_coding(self, num_latent: int, label: str) -> dict:
        """4. Sparse coding: Laplace linear generative model, EM-HMC from ICA's basis (conf/experiment/models_sparse_coding.yaml)."""
        s, seed, subset = self.s, self.seed, self.subset
        start = LinearGenerative.from_tensors(ica_initial_basis(self.ica_basis, num_latent, seed + num_latent), prior="laplace", noise_std=NOISE_STD)
        model, cfg, info, fields, losses = self.fit_em("models_sparse_coding", seed + num_latent, s["em_epochs"], model=start)
        columns = f"{'its ' + str(num_latent) + ' longest columns' if num_latent < DIM else 'all 36 columns'}"
        columns += f", then {num_latent - DIM} columns of 0.01·N(0, 1)" if num_latent > DIM else ""
        row = {"name": "sparse-coding" if num_latent == NUM_LATENT else f"sparse-coding-{num_latent}", "label": label, "parameters": count_parameters(model),
               "sizes": f"L = {num_latent} latents, σ_n = {NOISE_STD}", "train_method": f"EM-HMC + Adam, {info['epochs']} epochs", **fields,
               "description": f"`LinearGenerative(36, {num_latent}, prior='laplace', noise_std={NOISE_STD})`, initial basis the ICA row's Φ = W⁻¹ ({columns}); "
                              f"{info['burn_in_e_steps']} burn-in E-steps (the latents start at prior draws), then `+experiment=models_sparse_coding`: "
                              f"`Trainer(EMHMC(num_hmc_steps=10, step_size=0.05, num_leapfrog=10, target_acceptance=0.8, batch_hmc_steps=2), "
                              f"Adam(lr={cfg.trainer.optimizer.lr}), epochs={info['epochs']}, batch_size=100)`; complete-data loss per epoch {losses}."}
        if info["error"]:
            return self.fail(row, info["error"])
        row["notes"] = (f"E-step acceptance {info['sampler_acceptance'][-1]:.2f} at ε {info['final_step_size']:.3f}; "
                        f"basis column norms {model.basis.norm(dim=0).min().item():.2f}–{model.basis.norm(dim=0).max().item():.2f}")
        return self.finish(row, self.pilot_and_evaluate(row, model, subset, s["hais_particles"], s["hais_steps"], convergence=num_latent == NUM_LATENT))

    def estimator_check(self, name: str, label: str, model, train_method: str, reference_method: str, description: str, exact_fn) -> None:
        """A generative model with a known log-likelihood, evaluated like every generative row (its own pilot, then HAIS) on the
        first ``check_patches`` test patches of the common subset."""
        s, subset = self.s, self.subset
        row = {"name": name, "label": label, "parameters": count_parameters(model), "sizes": f"L = {model.num_latent} latents, σ_n = {NOISE_STD}",
               "train_method": train_method, "train_seconds": 0.0, "description": description}
        patches = subset[: s["check_patches"]]
        evaluation = self.pilot_and_evaluate(row, model.requires_grad_(False), patches, s["check_particles"], s["hais_steps"])
        began = time.perf_counter()
        reference = exact_fn(patches).double().mean().item()
        self.timers["evaluation"] += time.perf_counter() - began
        p = row["pilot"]
        row["check"] = {"patches": patches.shape[0], "particles": s["check_particles"], "num_steps": s["hais_steps"], "step_size": p["step_size"],
                        "schedule": p["schedule"], "stiffness": p["stiffness"], "estimate": evaluation["mean"], "stderr": evaluation["estimator_stderr"],
                        "exact": reference, "reference_method": reference_method, "error": evaluation["mean"] - reference}
        row["notes"] = f"reference on the same {patches.shape[0]} patches: {reference:.3f}; error {row['check']['error']:+.3f}"
        warning = exact_check(evaluation["mean"], reference, evaluation["estimator_stderr"])["warning"]
        if warning:  # the check exists to catch this: say it where the row's warnings are shown
            evaluation.setdefault("warnings", []).append(warning)
        self.finish(row, evaluation)

    def estimator_checks(self) -> None:
        """Generative models with a known log-likelihood, evaluated like the generative rows."""
        seed, train, s = self.seed, self.train, self.s
        ica_model, ica_basis = self.ica_model, self.ica_basis
        # Estimator checks. (a) The Gaussian-prior linear generative model at its exact ML basis: closed-form log-likelihood.
        check_model = LinearGenerative.from_tensors(ml_gaussian_prior_basis(train, NUM_LATENT, seed + 5), prior="gaussian", noise_std=NOISE_STD)
        self.estimator_check(
            "check", f"Gaussian-prior linear generative (L = {NUM_LATENT}), HAIS check", check_model, "exact ML (closed form, probabilistic PCA)",
            "closed-form log-likelihood",
            "`LinearGenerative(36, 72, prior='gaussian', noise_std=0.1)` with Φ = (S − σ_n²I)^½ R, S the training covariance and R a "
            "random 36×72 matrix with orthonormal rows: the exact ML basis (ΦΦᵀ + σ_n²I = S), so this model is the Gaussian row's "
            "distribution written with 72 latents. Its exact log-likelihood checks the per-example HAIS procedure (pilot, then the "
            "chosen settings) that the generative rows use.", check_model.log_prob)
        # (b) The complete Laplace-prior model with ICA's basis: ICA's density blurred by the noise, p(x) = E_n[p_ICA(x − n)].
        self.estimator_check(
            "check-laplace", f"Laplace-prior linear generative with ICA's basis (L = {DIM}), HAIS check",
            LinearGenerative.from_tensors(ica_basis, prior="laplace", noise_std=NOISE_STD), "not trained: the ICA row's basis Φ = W⁻¹",
            f"Monte Carlo over the noise, {s['noise_draws']:,} draws per patch",
            f"`LinearGenerative(36, 36, prior='laplace', noise_std={NOISE_STD})` with the ICA row's Φ = W⁻¹, not trained: x = Φz + n "
            "with Φz distributed as the ICA row's density, so log p(x) = log E_n[p_ICA(x − n)]; the reference value averages "
            f"p_ICA(x − n) over {s['noise_draws']:,} noise draws per patch (a consistent estimate whose Jensen bias is far below the "
            "table's precision). Its difference from the ICA row is what the noise σ_n alone costs a Laplace model.",
            lambda x: noise_convolved_log_prob(ica_model, x, s["noise_draws"], gen(seed + 6)))

    def bilinear(self) -> None:
        """5. The bilinear generative model, EM-HMC with bounded column norms (conf/experiment/models_bilinear.yaml)."""
        s, seed, subset = self.s, self.seed, self.subset
        model, cfg, info, fields, losses = self.fit_em("models_bilinear", seed + 2, s["bilinear_epochs"])
        row = {"name": "bilinear", "label": "Bilinear generative", "parameters": count_parameters(model), **fields,
               "sizes": f"K = {model.num_components} components, {model.num_content} content + {model.num_style} style latents, σ_n = {NOISE_STD}",
               "train_method": f"EM-HMC + Adam, {info['epochs']} epochs",
               "description": f"`BilinearGenerative(36, num_style=8, noise_std={NOISE_STD}, init_std=0.17, max_basis_norm=1.0)` (`+experiment=models_bilinear`: "
                              f"conf/model/bilinear.yaml with the bound its comment recommends for EM); {info['burn_in_e_steps']} burn-in E-steps, then the "
                              f"same EM-HMC Trainer as sparse coding with Adam(lr={cfg.trainer.optimizer.lr}); complete-data loss per epoch {losses}."}
        if info["error"]:
            self.fail(row, info["error"])
        else:
            row["notes"] = f"E-step acceptance {info['sampler_acceptance'][-1]:.2f} at ε {info['final_step_size']:.3f}"
            self.finish(row, self.pilot_and_evaluate(row, model, subset, s["hais_particles"], s["hais_steps"], convergence=True))

    def mcrbm(self) -> None:
        """6. The mcRBM, persistent MPF with Adam (conf/experiment/models_mcrbm.yaml); log Ẑ by HAIS from N(0, I)."""
        s, seed, test = self.s, self.seed, self.test
        model, cfg, info, fields, _ = self.fit_em("models_mcrbm", seed + 4, s["mpf_epochs"])
        row = {"name": "mcrbm", "label": "mcRBM", "parameters": count_parameters(model), **fields, "train_method": f"persistent MPF + Adam, {info['epochs']} epochs",
               "sizes": f"F = {model.num_factors} factors, {model.num_covariance_hidden} covariance + {model.num_mean_hidden} mean hiddens",
               "description": "`MeanCovarianceRBM(36, 72, 36, 36, init_std=0.17, factor_norm=None, normalize_pooling=True)` (conf/model/mcrbm.yaml: "
                              "learned factor lengths; fixed unit lengths gave -43.09 on 2026-11-22); `+experiment=models_mcrbm`: "
                              "`Trainer(MPF(continuous=PersistentMPF(num_hmc_steps=5, step_size=0.05, num_leapfrog=10, target_acceptance=0.8)), "
                              f"Adam(lr={cfg.trainer.optimizer.lr}), epochs={info['epochs']}, batch_size=500)` (conf/trainer/mpf_adam.yaml). Parameter count "
                              "includes the pooling matrix P (constrained ≥ 0, columns of unit L1 norm)."}
        if info["error"]:
            self.fail(row, info["error"])
        else:
            evaluation = self.pilot_and_evaluate(row, model, test, s["logz_chains"], s["logz_steps"], latent=False, convergence=True)
            biases = max(model.covariance_bias.abs().max().item(), model.mean_bias.abs().max().item(), model.visible_bias.abs().max().item())
            row["notes"] = (f"log Ẑ = {evaluation['log_z']:.3f} ± {evaluation['log_z_stderr']:.3f}, ESS {evaluation['ess']:.0f} of {evaluation['chains']}; "
                            f"MPF particle acceptance {info['sampler_acceptance'][-1]:.2f}; largest |bias| {biases:.2f}")
            self.finish(row, evaluation)

    def mpf_products_of_experts(self) -> None:
        """7-10. Products of experts trained the paper's way, persistent MPF with HMC connectivity and Adam
        (conf/experiment/models_poe_*_mpf.yaml): complete, evaluated exactly (against the exact-ML rows: what the training
        route costs), and 2× overcomplete, the paper's size, with a HAIS log Ẑ from N(0, I)."""
        s, seed, test = self.s, self.seed, self.test
        for offset, (recipe_name, expert, expert_label) in enumerate(POE_MPF_RECIPES):
            for num_experts in (DIM, 2 * DIM):
                complete = num_experts == DIM
                model, cfg, info, fields, losses = self.fit_em(recipe_name, seed + 5 + offset, s["poe_mpf_epochs"], f"model.num_experts={num_experts}")
                student = expert == "student-t"
                row = {"name": f"poe-{expert}-{'' if complete else '2x-'}mpf", "parameters": count_parameters(model), **fields,
                       "label": f"{expert_label} POE ({'complete' if complete else '2× overcomplete'}), MPF",
                       "sizes": f"{num_experts} experts, {'complete' if complete else '2× overcomplete'}" + (", λ learned" if student else ""),
                       "train_method": f"persistent MPF + Adam, {info['epochs']} epochs",
                       "description": f"`ProductOfExperts(36, {num_experts}, expert={model.expert!r}"
                                      + (", shape_above_half=True" if student else "") + f")`; `+experiment={recipe_name} model.num_experts={num_experts}`: "
                                      "`Trainer(MPF(continuous=PersistentMPF(num_hmc_steps=5, step_size=0.05, num_leapfrog=10, target_acceptance=0.8)), "
                                      f"Adam(lr={cfg.trainer.optimizer.lr}), epochs={info['epochs']}, batch_size={cfg.trainer.batch_size})` "
                                      f"(conf/trainer/mpf_adam.yaml); MPF loss per epoch {losses}."}
                if info["error"]:
                    self.fail(row, info["error"])
                    continue
                norms = model.filters.norm(dim=1).sort().values
                row["notes"] = (f"MPF particle acceptance {info['sampler_acceptance'][-1]:.2f}; filter norms {norms[0]:.2f} / {norms[len(norms) // 2]:.2f} / "
                                f"{norms[-1]:.2f} (min/median/max)")
                if student:
                    shapes = model.shape.sort().values
                    row["notes"] += f"; λ {shapes[0]:.3f} / {shapes[len(shapes) // 2]:.3f} / {shapes[-1]:.3f}"
                if complete:
                    self.exact(row, model)
                    continue
                evaluation = self.pilot_and_evaluate(row, model, test, s["logz_chains"], s["logz_steps"], latent=False, convergence=True)
                row["notes"] = f"log Ẑ = {evaluation['log_z']:.3f} ± {evaluation['log_z_stderr']:.3f}, ESS {evaluation['ess']:.0f} of {evaluation['chains']}; " + row["notes"]
                self.finish(row, evaluation)

    def size_sweep(self, sc_row: dict) -> tuple[list[dict], dict]:
        """Fig. 5: sparse coding at every L of :data:`SWEEP_SIZES` (``sc_row``: the table's, reused at L = NUM_LATENT); the
        entries and the exact references (label → the Gaussian's and ICA's means on the same patches). The extra models
        are not table rows."""
        sweep, began = [], time.perf_counter()
        for num_latent in SWEEP_SIZES:
            r = sc_row if num_latent == NUM_LATENT and not sc_row.get("failed") else self.sparse_coding(num_latent, f"Sparse coding, L = {num_latent}")
            if r is not sc_row:
                self.rows.remove(r)
            entry = {"num_latent": num_latent, "parameters": r["parameters"], "train_seconds": r["train_seconds"]}
            if r.get("failed"):
                entry["failed"] = r["failed"]
            else:
                e, p = r["evaluation"], r["pilot"]
                entry.update({"mean": e["mean"], "stderr": e["stderr"], "eval_seconds": e["seconds"],
                              "step_size": p["step_size"], "schedule": p["schedule"], "stiffness": p["stiffness"]})
            sweep.append(entry)
            logger.info("sweep L=%d: %.3f", num_latent, entry.get("mean", float("nan")))
        self.sweep_seconds = time.perf_counter() - began
        return sweep, {r["label"]: r["subset_mean"] for r in self.rows if r["name"] in ("gaussian", "ica") and not r.get("failed")}
