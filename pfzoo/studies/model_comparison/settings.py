"""The model comparison's fixed choices: the patches' and models' sizes, the pilots' stiffness grid, the seeds, the model
groups of the paper's ordering, the training routes compared, and the run budgets (:data:`SETTINGS`)."""

from __future__ import annotations

DIM, NOISE_STD, NUM_LATENT, SWEEP_SIZES = 36, 0.1, 72, (18, 36, 72, 108)
# Stiffness candidates s for the generative models. s = λ_max(ΦᵀΦ)/σ_n² (sparse coding: ≈ 75) would keep the stiffest
# direction's stability margin, but a Laplace prior's kinks also limit ε at small β, so smaller s with a small ε can win.
STIFFNESS_GRID, GEOMETRIC_START = (3.0, 10.0, 30.0, 100.0, 300.0, 1000.0), 1e-3
SEED_STRIDE, SUBSET_SEED_OFFSET, PILOT_SEED_OFFSET = 1000, 7, 11  # estimate r: seed + 1000·r; test subset / pilot patches
ITERS_PER_EPOCH = 100  # the hais_poe_* recipes' L-BFGS max_iter: one Trainer epoch
GROUPS = {"gaussian": ("gaussian",), "laplace": ("ica", "sparse-coding", "poe-laplace-2x-mpf"),
          "richer": ("bilinear", "poe-student-t", "mcrbm", "poe-student-t-2x-mpf")}
POE_MPF_RECIPES = (("models_poe_laplace_mpf", "laplace", "Laplace"), ("models_poe_student_mpf", "student-t", "Student-t"))
ROUTE_PAIRS = (("poe-laplace-mpf", "ica"), ("poe-student-t-mpf", "poe-student-t"), ("poe-laplace-2x-mpf", "poe-laplace-mpf"),
               ("poe-student-t-2x-mpf", "poe-student-t-mpf"))
"""(row, reference row) pairs of the training-routes section: the same complete model trained by MPF against exact ML, and
the 2× overcomplete model against the complete one, both by MPF."""
ROUTE_PAIRS_NAMES = {name for name, _ in ROUTE_PAIRS}
SETTINGS = {  # budgets; the training recipes themselves are the conf/experiment files
    "full": {"num_train": 20000, "num_test": 5000, "poe_iters": 2000, "em_epochs": 80, "em_burn_in": 20, "bilinear_epochs": 200,
             "mpf_epochs": 100, "poe_mpf_epochs": 100, "convergence_steps": [100, 1000, 10000], "convergence_patches": 20,
             "convergence_particles": 50, "hais_patches": 100, "hais_particles": 200, "hais_steps": 12000, "check_patches": 50,
             "check_particles": 100, "noise_draws": 200000, "logz_chains": 200, "logz_steps": 100000, "pilot_patches": 10,
             "pilot_particles": 20, "pilot_steps": 3000, "pilot_chains": 100, "pilot_logz_steps": 10000},
    "quick": {"num_train": 5000, "num_test": 1000, "poe_iters": 300, "em_epochs": 10, "em_burn_in": 5, "bilinear_epochs": 10,
              "mpf_epochs": 5, "poe_mpf_epochs": 5, "convergence_steps": [100, 1000], "convergence_patches": 5, "convergence_particles": 10,
              "hais_patches": 20, "hais_particles": 50, "hais_steps": 2000, "check_patches": 10, "check_particles": 50,
              "noise_draws": 20000, "logz_chains": 100, "logz_steps": 5000, "pilot_patches": 5, "pilot_particles": 10,
              "pilot_steps": 1000, "pilot_chains": 50, "pilot_logz_steps": 2000},
}
