"""Adaptive-tempering SMC: within max(3 stderr, 0.05) nats of the exact log Z with its defaults on enumerable RBMs, Ising
models, Gaussians and Laplace products of experts; its pieces (systematic resampling, the CESS step search) against
what they must compute; its diagnostics and warnings."""

import math

import pytest
import torch
from factories import all_binary_states, biased_binary_data, random_gaussian, random_ising, random_poe, random_rbm
from test_oracle_table import linear_gaussian  # exact log p(x) in closed form

from pfzoo.estimators import SMC, BoundKind
from pfzoo.estimators.adaptive_tempering import adaptive_smc, log_conditional_ess, next_step, systematic_resample
from pfzoo.kernels import BlockGibbs, HMCKernel, Repeat
from pfzoo.logmath import summarize_log_weights
from pfzoo.paths import build_from_base, make_base

TOLERANCE = 0.05


CASES = {
    "rbm-8x5": (lambda: random_rbm(8, 5, 1.0, 0), None),
    "rbm-20x10-strong": (lambda: random_rbm(20, 10, 2.0, 3), None),
    "rbm-16x12-strong-base-rate": (lambda: random_rbm(16, 12, 2.0, 4), lambda: biased_binary_data(16, 4)),
    "ising-12-strong": (lambda: random_ising(12, 2.0, 8, draw_dtype=None), None),
    "gaussian-10": (lambda: random_gaussian(10, seed=6), None),
    "poe-laplace-6": (lambda: random_poe(6, expert="laplace", seed=1), None),
}


@pytest.mark.parametrize("name", CASES)
def test_defaults_land_within_three_stderr_or_five_hundredths_of_exact(name):
    make_model, make_data = CASES[name]
    model = make_model()
    estimate = SMC()(model, data=None if make_data is None else make_data(), generator=torch.Generator().manual_seed(0))
    exact = model.log_partition().item()
    assert estimate.kind is BoundKind.UNBIASED_Z and estimate.warnings == ()
    assert estimate.stderr < 0.05, f"stderr {estimate.stderr:.4f} too large to be a useful check"
    assert abs(estimate.log_z - exact) <= max(3 * estimate.stderr, TOLERANCE), (
        f"{name}: {estimate.log_z:.4f} ± {estimate.stderr:.4f}, exact {exact:.4f}"
    )


def test_the_result_carries_the_schedule_resampling_and_final_ess():
    estimate = SMC(num_chains=400, num_groups=10, target_cess=0.9)(random_rbm(20, 10, 2.0, 3), generator=torch.Generator().manual_seed(1))
    (betas,) = estimate.info["betas"]  # one block's schedule
    assert betas[0] == 0.0 and betas[-1] == 1.0 and all(b > a for a, b in zip(betas, betas[1:]))
    assert estimate.info["num_steps"] == [len(betas) - 1] and len(betas) > 6
    assert estimate.info["resampling_events"] > 0  # a CESS of 0.9 per step: the ESS halves within a few steps
    assert 0 < estimate.ess <= 400 and estimate.log_weights.shape == (10,)
    assert 0.8 < estimate.info["min_cess"] <= 1.0


def test_same_seed_same_estimate_and_another_seed_another():
    model = random_ising(8, 1.0, 2)
    run = lambda seed: SMC(num_chains=200)(model, generator=torch.Generator().manual_seed(seed))  # noqa: E731
    first, second, other = run(0), run(0), run(1)
    assert torch.equal(first.log_weights, second.log_weights) and first.info["betas"] == second.info["betas"]
    assert not torch.equal(first.log_weights, other.log_weights)


def test_blocks_are_independent_runs_each_with_its_own_schedule():
    model = random_rbm(20, 10, 2.0, 3)
    run = lambda: SMC(num_chains=600, num_groups=6, num_blocks=3)(model, generator=torch.Generator().manual_seed(0))  # noqa: E731
    three = run()
    assert len(three.info["betas"]) == 3 and three.log_weights.shape == (6,)
    assert len({tuple(betas) for betas in three.info["betas"]}) == 3  # each block chose its own steps from its particles
    assert abs(three.log_z - model.log_partition().item()) <= max(3 * three.stderr, TOLERANCE)
    assert torch.equal(three.log_weights, run().log_weights)


def test_any_kernel_the_path_accepts():
    rbm = random_rbm(10, 6, 1.0, 5)
    estimate = SMC(num_chains=400, kernel=Repeat(BlockGibbs(), 2))(rbm, generator=torch.Generator().manual_seed(0))
    assert abs(estimate.log_z - rbm.log_partition().item()) <= max(3 * estimate.stderr, TOLERANCE)
    gaussian = random_gaussian(4, seed=2, normalize_factor=True)  # HMC instead of the Gaussian path's exact draws
    estimate = SMC(num_chains=400, kernel=HMCKernel(0.3))(gaussian, generator=torch.Generator().manual_seed(0))
    assert abs(estimate.log_z - gaussian.log_partition().item()) <= max(3 * estimate.stderr, TOLERANCE)
    assert "acceptance" in estimate.info


def test_the_max_steps_guard_warns():
    estimate = SMC(max_steps=5)(random_rbm(20, 10, 3.0, 1), generator=torch.Generator().manual_seed(0))
    assert estimate.info["num_steps"][0] <= 5
    assert any("max_steps=5" in line for line in estimate.warnings)


def test_systematic_resampling_copies_each_particle_floor_or_ceil_of_n_w_times_and_n_w_on_average():
    weights = torch.tensor([[0.5, 0.25, 0.125, 0.0625, 0.0625, 0.0, 0.0, 0.0]], dtype=torch.float64)
    ancestors = systematic_resample(weights.log().expand(4000, -1), generator=torch.Generator().manual_seed(0))  # one row per draw
    counts = torch.nn.functional.one_hot(ancestors, 8).sum(1).double()
    expected = 8 * weights[0]
    assert torch.all(counts >= expected.floor()) and torch.all(counts <= expected.ceil())
    torch.testing.assert_close(counts.mean(0), expected, atol=0.03, rtol=0)


def test_the_step_search_meets_the_cess_target_on_a_known_curve():
    # −log CESS = a Δ² (Gaussian increments of variance a Δ² per unit weights): the answer is Δ* = √(−log τ / a)
    for a, previous in ((4.0, 1.0), (1e6, 1e-2), (1e6, 1e-9)):
        step, cess = next_step(lambda delta: -a * delta**2, 1.0, previous, 0.99, 1e-12)
        answer = math.sqrt(-math.log(0.99) / a)
        assert abs(step / answer - 1) < 0.15 and abs(math.log(cess) / math.log(0.99) - 1) < 0.25
    assert next_step(lambda delta: -1e-6 * delta**2, 0.3, 0.01, 0.99, 1e-4)[0] == 0.3  # the rest of the path in one step
    assert next_step(lambda delta: -1e6 * delta**2, 1.0, 0.1, 0.99, 1e-3)[0] == 1e-3  # the floor


def test_the_conditional_ess_is_one_for_constant_increments_and_the_ess_for_uniform_weights():
    log_weights = torch.full((2, 4), -math.log(4), dtype=torch.float64)
    torch.testing.assert_close(log_conditional_ess(log_weights, torch.full((2, 4), 3.0, dtype=torch.float64)),
                               torch.zeros(2, dtype=torch.float64))
    increment = torch.tensor([[0.0, 1.0, 2.0, 3.0]], dtype=torch.float64).log1p()
    w = increment.exp()
    torch.testing.assert_close(log_conditional_ess(log_weights[:1], increment).exp() * 4, w.sum(-1) ** 2 / (w**2).sum(-1))


def test_bad_settings_are_refused_in_one_line():
    for kwargs, word in ((dict(num_chains=3), "num_chains"), (dict(target_cess=1.0), "target_cess"),
                         (dict(resample_threshold=1.5), "resample_threshold"), (dict(num_groups=1), "num_groups"),
                         (dict(max_steps=0), "max_steps"), (dict(num_mcmc_steps=0), "num_mcmc_steps"),
                         (dict(num_blocks=0), "num_blocks"), (dict(num_groups=4, num_blocks=5), "num_blocks")):
        with pytest.raises(ValueError, match=word):
            SMC(**kwargs)


def test_per_example_smc_over_the_latents_of_a_generative_model():
    model = linear_gaussian(3, 10)
    data = model.sample(10, generator=torch.Generator().manual_seed(1))
    estimate = SMC(num_chains=400, num_groups=10).log_likelihood(model, data, generator=torch.Generator().manual_seed(0))
    exact = model.log_prob(data).detach()
    assert estimate.kind is BoundKind.LIKELIHOOD_LOWER_BOUND and estimate.per_example.shape == (10,) and estimate.warnings == ()
    assert estimate.info["per_example_stderr"].shape == (10,) and estimate.info["betas"][0][-1] == 1.0
    assert abs(estimate.mean - exact.mean().item()) <= max(3 * estimate.stderr, TOLERANCE)


def test_a_run_from_a_later_start_and_its_marked_levels_match_enumeration():
    """``adaptive_smc`` read at marked β (each group's log Ẑ up to there) and started at β_s from exact draws of f_{β_s}:
    every estimate within 4 of its stderr over the groups (or 0.05 nat) of the enumerated ``log Z_β − log Z_{β_s}``."""
    model = random_rbm(8, 5, 1.5, 0)
    base, _ = make_base(model, base="uniform")
    path = build_from_base(model, base, kind="geometric")
    states = all_binary_states(8).to(model.dtype)
    stats = path.statistics(path.init(states))
    log_ratio = lambda beta: torch.logsumexp(path.log_weight_increment(stats, 0.0, beta), 0).item() - math.log(len(states))  # noqa: E731

    def close(log_z_groups, exact):
        summary = summarize_log_weights(log_z_groups.double())
        assert abs(summary.log_mean.item() - exact) <= max(4 * summary.stderr.item(), 0.05), (summary.log_mean.item(), exact)

    run = adaptive_smc(path, 20, 100, target_cess=0.995, resample_threshold=0.5, marks=(0.3, 0.6), generator=torch.Generator().manual_seed(0))
    assert {0.3, 0.6} <= set(run.betas) and run.log_z_marks.shape == (2, 20)
    for row, beta in zip(run.log_z_marks, (0.3, 0.6)):
        close(row, log_ratio(beta))
    close(run.log_z_groups, log_ratio(1.0))
    generator = torch.Generator().manual_seed(1)
    draws = states[torch.multinomial(path.log_weight_increment(stats, 0.0, 0.6).double().softmax(0), 2000, replacement=True, generator=generator)]
    later = adaptive_smc(path, 20, 100, target_cess=0.995, resample_threshold=0.5, state=path.init(draws), start_beta=0.6, generator=generator)
    assert later.betas[0] == 0.6 and later.log_z_marks is None
    close(later.log_z_groups, log_ratio(1.0) - log_ratio(0.6))
    for bad, message in (({"marks": (0.7, 0.5)}, "marks must increase strictly"), ({"start_beta": 0.5}, "needs the particles' state"),
                         ({"marks": (1.0,)}, "marks must increase strictly")):
        with pytest.raises(ValueError, match=message):
            adaptive_smc(path, 2, 10, target_cess=0.9, resample_threshold=0.5, **bad)
