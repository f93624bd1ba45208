"""A benchmark case's result in one line, as ``scripts/benchmark.py`` reports it: :data:`SUMMARIES` maps a case's name
to its summary, ``summary(result: dict) -> str``."""

from __future__ import annotations


def compiled_summary(r: dict) -> str:
    """A compiled case's seconds compiled and eager, their ratio and the two estimates' difference."""
    shape = ", ".join(f"{key} {value}" for key, value in r["shape"].items())
    return (f"{r['name']} ({shape}): compiled {r['compiled_seconds']:.2f} s, eager {r['eager_seconds']:.2f} s (compiled/eager "
            f"{r['compiled_over_eager']:.2f}; first compiled call {r['compiled_first_call_seconds']:.1f} s); estimates differ by "
            f"{r['estimate_difference']:+.2e} (stderr {r['stderr']:.2e})")


def compiled_ais_summary(r: dict) -> str:
    """:func:`compiled_summary` with each run's fraction of the matmul bound."""
    return (compiled_summary(r) + f"; of the matmul bound: compiled {r['compiled']['fraction_of_matmul_bound']:.2f}, "
            f"eager {r['eager']['fraction_of_matmul_bound']:.2f}")


def graphs_summary(r: dict) -> str:
    """Each chain count's fraction of the matmul bound with and without CUDA graphs, and whether the numbers agreed."""
    return f"{r['name']}: " + "; ".join(
        f"{run['num_chains']} chains: of the matmul bound graphs {run['graphs']['fraction_of_matmul_bound']:.2f}, eager "
        f"{run['eager']['fraction_of_matmul_bound']:.2f} ({'same' if run['same_log_weights'] else 'DIFFERENT'} log weights; "
        f"{run['note']})" for run in r["runs"])


def rbm_ais_summary(r: dict) -> str:
    """``rbm_ais``'s rate at each chain count, against the matmul bound."""
    return "rbm_ais: " + "; ".join(
        f"{run['num_chains']} chains {run['chain_steps_per_second']:.3g} chain-steps/s ({run['fraction_of_matmul_bound']:.2f} of the "
        f"matmul bound, {run['matmul_gflops']:.1f} GFLOP/s matmul)" for run in r["runs"])


SUMMARIES = {
    "rbm_ais": rbm_ais_summary,
    "dbm_ais": lambda r: f"dbm_ais: {'–'.join(map(str, r['shape']['layer_sizes']))}, {r['shape']['num_chains']} chains: "
        f"{r['chain_steps_per_second']:.3g} chain-steps/s ({r['fraction_of_matmul_bound']:.2f} of the matmul bound)",
    "rbm_ais_small": lambda r: f"rbm_ais_small: {r['shape']['num_visible']}x{r['shape']['num_hidden']} float64, {r['shape']['num_chains']} chains x "
        f"{r['shape']['num_steps']} steps, {r['shape']['repeats']} runs each: " + "; ".join(
            f"{label} {r[key]['seconds']:.2f} s, RMSE {r[key]['rmse']:.4f} ± {r[key]['rmse_stderr']:.4f}"
            + (f" ({r[key]['over_rbms']['speed_ratio']:.2f}x rbms's speed, {r[key]['over_rbms']['speedup_at_equal_error']:.2f}"
               f" ± {r[key]['over_rbms']['speedup_at_equal_error_stderr']:.2f}x at equal error)" if r["rbms"] else "")
            for label, key in (("pfzoo (h summed)", "pfzoo_hidden_summed"), ("pfzoo (auto)", "pfzoo_auto")))
        + (f"; rbms {r['rbms_version']} {r['rbms']['seconds']:.2f} s, RMSE {r['rbms']['rmse']:.4f} ± {r['rbms']['rmse_stderr']:.4f}"
           if r["rbms"] else "; rbms not installed")
        + f" ({r['fraction_of_matmul_bound']:.2f} of the matmul bound)",
    "rbm_ais_mnist20": lambda r: f"rbm_ais_mnist20: skipped, {r['skipped']}" if "skipped" in r else
        f"rbm_ais_mnist20: zoo 784x20 MNIST RBMs, float64, {r['shape']['num_chains']} chains x {r['shape']['num_steps']} steps, "
        f"{r['shape']['repeats']} runs each: " + "; ".join(
            f"{name}: " + ", ".join(
                f"{label} {m[key]['seconds']:.2f} s, RMSE {m[key]['rmse']:.3f}"
                + (f" ({m[key]['over_rbms']['speedup_at_equal_error']:.1f} ± {m[key]['over_rbms']['speedup_at_equal_error_stderr']:.1f}x"
                   f" rbms at equal error)" if m["rbms"] else "")
                for label, key in (("pfzoo defaults", "pfzoo_defaults"), ("pfzoo linear", "pfzoo_linear"),
                                   ("pfzoo from rbms's base", "pfzoo_rbms_base")))
            + (f", rbms {m['rbms']['seconds']:.2f} s, RMSE {m['rbms']['rmse']:.3f}" if m["rbms"] else ", rbms not installed")
            for name, m in r["models"].items()),
    "rbm_ais_compiled": compiled_ais_summary,
    "dbm_ais_compiled": compiled_ais_summary,
    "poe_hais_compiled": compiled_summary,
    "rbm_raise_compiled": compiled_summary,
    "rbm_ais_graphs": graphs_summary,
    "dbm_ais_graphs": graphs_summary,
    "rbm_raise": lambda r: f"rbm_raise: {r['examples_per_second']:.3g} examples/s at M = {r['shape']['num_chains']} chains, "
        f"K = {r['shape']['num_steps']} ({r['chain_steps_per_second']:.3g} chain-steps/s)",
    "poe_hais": lambda r: f"poe_hais: N = {r['shape']['num_steps']:.0e}, {r['shape']['num_chains']} particles in {r['seconds']:.1f} s "
        f"({r['particle_steps_per_second']:.3g} particle-steps/s; paper: {r['paper_seconds']:.0f} s at N = 1e5); "
        f"log Z error {r['log_z_error']:+.4f} ± {r['log_z_stderr']:.4f}",
    "generative_hais": lambda r: f"generative_hais: {r['shape']['num_examples']} examples × {r['shape']['num_particles']} particles, N = {r['shape']['num_steps']}: "
        f"{r['examples_per_second']:.3g} examples/s ({r['particle_steps_per_second']:.3g} particle-steps/s, {r['seconds']:.0f} s)",
    "ising_mpf": lambda r: f"ising_mpf: {r['evaluations_per_second']:.3g} loss+gradient evaluations/s on {r['shape']['num_samples']} samples "
        f"(float64); L-BFGS {r['lbfgs_iterations_per_second']:.3g} iterations/s "
        f"({r['lbfgs_evaluations_per_iteration']:.2f} evaluations each), ε_J {r['coupling_error']:.4f} after "
        f"{r['shape']['lbfgs_iterations']} iterations in {r['lbfgs_seconds']:.1f} s (thesis: {r['thesis_coupling_error']} in ~{r['thesis_seconds']:.0f} s)",
    "ising_gibbs": lambda r: f"ising_gibbs: {r['shape']['num_chains']} chains, lattice {r['lattice']['chain_sweeps_per_second']:.3g} chain-sweeps/s "
        f"({r['lattice']['num_blocks']} blocks), dense D={r['fully_connected']['num_units']} "
        f"{r['fully_connected']['chain_sweeps_per_second']:.3g} chain-sweeps/s ({r['fully_connected']['num_blocks']} blocks)",
    "rbm_mpf": lambda r: f"rbm_mpf: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, batch {r['shape']['batch_size']}: "
        f"all flips {r['all_flips']['examples_per_second']:.3g} examples/s, "
        f"{r['shape']['num_flips']} sampled flips {r['num_flips_' + str(r['shape']['num_flips'])]['examples_per_second']:.3g} examples/s",
    "rbm_pcd": lambda r: f"rbm_pcd: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, PCD-{r['shape']['k']}, batch {r['shape']['batch_size']}: "
        f"{r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    "rbm_pcd_trainer": lambda r: f"rbm_pcd_trainer: Trainer.fit, one epoch of {r['shape']['num_batches']} PCD-1 updates of a "
        f"{r['shape']['num_visible']}x{r['shape']['num_hidden']} RBM, diagnostics included: {r['steps_per_second']:.3g} updates/s, "
        f"{r['fraction_of_matmul_bound']:.2f} of its six products' rate ({r['training_seconds']:.2f} s training, "
        f"{r['evaluation_seconds']:.2f} s diagnostics; {r['fit_fraction_of_matmul_bound']:.2f} with the fit's set-up)",
    "rbm_pt": lambda r: f"rbm_pt: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, PT-{r['shape']['k']} with {r['shape']['num_replicas']} "
        f"replicas, batch {r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    "rbm_fpcd": lambda r: f"rbm_fpcd: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, FPCD-{r['shape']['k']}, batch {r['shape']['batch_size']}: "
        f"{r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    "rbm_naive_mcmc": lambda r: f"rbm_naive_mcmc: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, burn-in {r['shape']['burn_in']}, "
        f"batch {r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    "rbm_nce": lambda r: f"rbm_nce: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, ν = {r['shape']['noise_ratio']}, batch "
        f"{r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    "rbm_self_contrastive": lambda r: f"rbm_self_contrastive: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, {r['shape']['num_chains']} chains, "
        f"k = {r['shape']['k']}, batch {r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, "
        f"{r['examples_per_second']:.3g} examples/s",
    "rbm_ratio_matching": lambda r: f"rbm_ratio_matching: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, all flips, batch {r['shape']['batch_size']}: "
        f"{r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    "rbm_stochastic_ratio_matching": lambda r: f"rbm_stochastic_ratio_matching: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, {r['shape']['num_units']} units, "
        f"batch {r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    "rbm_generalized_score_matching": lambda r: f"rbm_generalized_score_matching: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, batch {r['shape']['batch_size']}: "
        f"{r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    "rbm_generalized_pseudolikelihood": lambda r: f"rbm_generalized_pseudolikelihood: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, blocks of {r['shape']['size']}, "
        f"batch {r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    "poe_score_matching": lambda r: f"poe_score_matching: {r['shape']['dim']}-d Student-t PoE, {'analytic' if r['shape']['analytic'] else 'autograd'} "
        f"Laplacian, batch {r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    "poe_denoising_score_matching": lambda r: f"poe_denoising_score_matching: {r['shape']['dim']}-d Student-t PoE, σ = 0.1, batch {r['shape']['batch_size']}: "
        f"{r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    "poe_sliced_score_matching": lambda r: f"poe_sliced_score_matching: {r['shape']['dim']}-d Student-t PoE, {r['shape']['num_projections']} projection(s), "
        f"batch {r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    "poe_nce": lambda r: f"poe_nce: {r['shape']['dim']}-d Student-t PoE, ν = {r['shape']['noise_ratio']}, batch {r['shape']['batch_size']}: "
        f"{r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    "distributed_ais": lambda r: f"distributed_ais: {r['shape']['num_chains']} chains x {r['shape']['num_steps']} steps, CPU ranks on 1 thread each: "
        f"1 rank {r['one_rank']['chain_steps_per_second']:.3g} chain-steps/s, 2 ranks {r['two_ranks']['chain_steps_per_second']:.3g} "
        f"({r['speedup']:.2f}x); log Z {r['one_rank']['log_z']:.4f}, {'identical' if r['identical_estimates'] else 'DIFFERENT'} on both",
}
"""Case name → its one-line summary of a result."""
