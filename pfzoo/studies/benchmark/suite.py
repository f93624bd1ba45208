"""The benchmark suite: every case by name, in the order the script runs them, with its summary, and the sizes that
replace the issue's on CPU and under ``--quick``."""

from __future__ import annotations

from pfzoo.studies.benchmark.compiled_cases import (
    benchmark_dbm_ais_compiled,
    benchmark_poe_hais_compiled,
    benchmark_rbm_ais_compiled,
    benchmark_rbm_raise_compiled,
)
from pfzoo.studies.benchmark.distributed_ais import benchmark_distributed_ais
from pfzoo.studies.benchmark.estimator_cases import (
    benchmark_dbm_ais,
    benchmark_generative_hais,
    benchmark_poe_hais,
    benchmark_rbm_ais,
    benchmark_rbm_ais_mnist20,
    benchmark_rbm_ais_small,
    benchmark_rbm_raise,
)
from pfzoo.studies.benchmark.graph_cases import benchmark_dbm_ais_graphs, benchmark_rbm_ais_graphs
from pfzoo.studies.benchmark.ising_cases import benchmark_ising_gibbs, benchmark_ising_mpf
from pfzoo.studies.benchmark.training_cases import (
    benchmark_poe_denoising_score_matching,
    benchmark_poe_nce,
    benchmark_poe_score_matching,
    benchmark_poe_sliced_score_matching,
    benchmark_rbm_fpcd,
    benchmark_rbm_generalized_pseudolikelihood,
    benchmark_rbm_generalized_score_matching,
    benchmark_rbm_mpf,
    benchmark_rbm_naive_mcmc,
    benchmark_rbm_nce,
    benchmark_rbm_pcd,
    benchmark_rbm_pt,
    benchmark_rbm_ratio_matching,
    benchmark_rbm_self_contrastive,
    benchmark_rbm_stochastic_ratio_matching,
)
from pfzoo.studies.benchmark.summaries import SUMMARIES
from pfzoo.studies.benchmark.trainer_cases import benchmark_rbm_pcd_trainer

CASES = {
    "rbm_ais": benchmark_rbm_ais,
    "dbm_ais": benchmark_dbm_ais,
    "rbm_ais_small": benchmark_rbm_ais_small,
    "rbm_ais_mnist20": benchmark_rbm_ais_mnist20,
    "rbm_ais_compiled": benchmark_rbm_ais_compiled,
    "dbm_ais_compiled": benchmark_dbm_ais_compiled,
    "poe_hais_compiled": benchmark_poe_hais_compiled,
    "rbm_raise_compiled": benchmark_rbm_raise_compiled,
    "rbm_ais_graphs": benchmark_rbm_ais_graphs,
    "dbm_ais_graphs": benchmark_dbm_ais_graphs,
    "rbm_raise": benchmark_rbm_raise,
    "poe_hais": benchmark_poe_hais,
    "generative_hais": benchmark_generative_hais,
    "ising_mpf": benchmark_ising_mpf,
    "ising_gibbs": benchmark_ising_gibbs,
    "rbm_mpf": benchmark_rbm_mpf,
    "rbm_pcd": benchmark_rbm_pcd,
    "rbm_pcd_trainer": benchmark_rbm_pcd_trainer,
    "rbm_pt": benchmark_rbm_pt,
    "rbm_fpcd": benchmark_rbm_fpcd,
    "rbm_naive_mcmc": benchmark_rbm_naive_mcmc,
    "rbm_nce": benchmark_rbm_nce,
    "rbm_self_contrastive": benchmark_rbm_self_contrastive,
    "rbm_ratio_matching": benchmark_rbm_ratio_matching,
    "rbm_stochastic_ratio_matching": benchmark_rbm_stochastic_ratio_matching,
    "rbm_generalized_score_matching": benchmark_rbm_generalized_score_matching,
    "rbm_generalized_pseudolikelihood": benchmark_rbm_generalized_pseudolikelihood,
    "poe_score_matching": benchmark_poe_score_matching,
    "poe_denoising_score_matching": benchmark_poe_denoising_score_matching,
    "poe_sliced_score_matching": benchmark_poe_sliced_score_matching,
    "poe_nce": benchmark_poe_nce,
    "distributed_ais": benchmark_distributed_ais,
}
"""Case name → ``case(device, **sizes) -> dict``, at the issue's sizes unless ``sizes`` replace them."""
BENCHMARKS = {name: (case, SUMMARIES[name]) for name, case in CASES.items()}
"""Case name → (case, its one-line summary ``summary(result) -> str``)."""

CPU_SIZES = {
    # K = 1,000 as every real run (10³–10⁵): a K of 20 times the increment's large-step form, which no real run at these
    # sizes takes (its series form needs K ≥ ~700 here), and spreads each call's set-up over 20 steps
    "rbm_ais": {"num_chains": (1000,), "num_steps": 1000, "repeats": 1},
    "dbm_ais": {"num_steps": 1000, "repeats": 1},
    "rbm_ais_compiled": {"num_steps": 1000, "repeats": 1},  # 1,000 chains, the bound's case
    "dbm_ais_compiled": {"num_steps": 1000, "repeats": 1},
    "poe_hais_compiled": {"num_steps": 1000, "repeats": 1},
    "rbm_raise_compiled": {"num_examples": 20, "num_steps": 100, "repeats": 1},
    "rbm_ais_graphs": {"num_chains": (1000,), "num_steps": 100, "repeats": 1},  # no graphs on a CPU: the two runs are one code
    "dbm_ais_graphs": {"num_chains": (1000,), "num_steps": 100, "repeats": 1},
    "rbm_raise": {"num_steps": 100},
    "poe_hais": {"num_steps": 5000},
    "generative_hais": {"num_examples": 20, "num_steps": 500},
    "rbm_pcd": {"num_batches": 50},
    "rbm_pt": {"num_batches": 20},
    "rbm_fpcd": {"num_batches": 50},
    "rbm_naive_mcmc": {"num_batches": 10},
    "rbm_nce": {"num_batches": 50},
    "rbm_self_contrastive": {"num_batches": 50},
    "rbm_ratio_matching": {"num_batches": 5, "repeats": 1},
    "rbm_stochastic_ratio_matching": {"num_batches": 20},
    "rbm_generalized_score_matching": {"num_batches": 5, "repeats": 1},
    "rbm_generalized_pseudolikelihood": {"num_batches": 2, "repeats": 1},
    "poe_score_matching": {"num_batches": 20},
    "poe_denoising_score_matching": {"num_batches": 20},
    "poe_sliced_score_matching": {"num_batches": 20},
    "poe_nce": {"num_batches": 20},
}
"""Case → keyword arguments replacing the issue's sizes on CPU: each case a few seconds to a minute on 2 cores."""
QUICK_SIZES = {
    "rbm_ais": {"num_chains": (10, 100), "num_steps": 3, "repeats": 1},
    "dbm_ais": {"num_chains": 10, "num_steps": 3, "repeats": 1},
    "rbm_ais_small": {"num_hidden": 10, "num_chains": 10, "num_steps": 10, "repeats": 2},
    "rbm_ais_mnist20": {"models": ("rbm-binarized_mnist-pcd-20",), "num_chains": 10, "num_steps": 10, "repeats": 2},
    "rbm_ais_compiled": {"num_visible": 20, "num_hidden": 10, "num_chains": 10, "num_steps": 5, "repeats": 1},
    "dbm_ais_compiled": {"layer_sizes": (12, 8, 6), "num_chains": 10, "num_steps": 5, "repeats": 1},
    "poe_hais_compiled": {"dim": 4, "num_chains": 10, "num_steps": 5, "repeats": 1},
    "rbm_raise_compiled": {"num_visible": 20, "num_hidden": 10, "num_examples": 3, "num_chains": 2, "num_steps": 5, "repeats": 1},
    "rbm_raise": {"num_examples": 5, "num_chains": 2, "num_steps": 5},
    "rbm_ais_graphs": {"num_visible": 20, "num_hidden": 10, "num_chains": (10,), "num_steps": 5, "repeats": 1},
    "dbm_ais_graphs": {"layer_sizes": (12, 8, 6), "num_chains": (10,), "num_steps": 5, "repeats": 1},
    "poe_hais": {"num_chains": 10, "num_steps": 10},
    "generative_hais": {"num_examples": 3, "num_particles": 4, "num_steps": 10},
    "ising_mpf": {"num_samples": 200, "lbfgs_iterations": 2, "evaluations": 1, "repeats": 1},
    "ising_gibbs": {"num_chains": 10, "num_sweeps": 2, "repeats": 1},
    "rbm_mpf": {"batch_size": 10, "num_flips": 5, "repeats": 1},
    "rbm_pcd": {"batch_size": 10, "num_batches": 3, "num_chains": 10, "repeats": 1},
    "rbm_pcd_trainer": {"num_visible": 20, "num_hidden": 10, "batch_size": 10, "num_batches": 3, "num_valid": 20, "num_chains": 10,
                        "repeats": 1},
    "rbm_pt": {"batch_size": 10, "num_batches": 3, "num_chains": 10, "num_replicas": 3, "repeats": 1},
    "rbm_fpcd": {"batch_size": 10, "num_batches": 3, "num_chains": 10, "repeats": 1},
    "rbm_naive_mcmc": {"batch_size": 10, "num_batches": 3, "burn_in": 3, "num_chains": 10, "repeats": 1},
    "rbm_nce": {"batch_size": 10, "num_batches": 3, "noise_ratio": 2, "repeats": 1},
    "rbm_self_contrastive": {"batch_size": 10, "num_batches": 3, "num_chains": 10, "repeats": 1},
    "rbm_ratio_matching": {"num_hidden": 20, "batch_size": 5, "num_batches": 2, "repeats": 1},
    "rbm_stochastic_ratio_matching": {"num_hidden": 20, "batch_size": 5, "num_batches": 2, "num_units": 5, "repeats": 1},
    "rbm_generalized_score_matching": {"num_hidden": 20, "batch_size": 5, "num_batches": 2, "repeats": 1},
    "rbm_generalized_pseudolikelihood": {"num_hidden": 20, "batch_size": 5, "num_batches": 2, "repeats": 1},
    "poe_score_matching": {"dim": 8, "batch_size": 10, "num_batches": 2, "repeats": 1},
    "poe_denoising_score_matching": {"dim": 8, "batch_size": 10, "num_batches": 2, "repeats": 1},
    "poe_sliced_score_matching": {"dim": 8, "batch_size": 10, "num_batches": 2, "repeats": 1},
    "poe_nce": {"dim": 8, "batch_size": 10, "num_batches": 2, "repeats": 1},
    "distributed_ais": {"num_chains": 64, "num_steps": 3},
}
"""Case → keyword arguments for ``--quick``: toy sizes that exercise every case in seconds (tests/test_benchmark.py)."""
