"""Waste-free SMC (Dau & Chopin 2022; ``SMC(chain_length=P)``): within max(3 stderr, 0.05) nats of the exact log Z on an
enumerable RBM and on Gaussians (HMC moves and exact draws), ``E[Ẑ / Z] = 1`` over 1,000 independent groups (the
unbiasedness Dau & Chopin's extended-space view gives it), the visited states kept in their groups (a per-example run
whose states were left in visiting order, so that groups take other examples' states, is caught)."""

import math

import pytest
import torch
from factories import random_gaussian, random_rbm
from test_calibration import K_SIGMA, RUNS, calibration_z, run_ratios, skewed_rbm
from test_oracle_table import linear_gaussian  # exact log p(x) in closed form

from pfzoo.estimators import SMC, BoundKind, adaptive_tempering
from pfzoo.estimators.adaptive_tempering import join_chains, waste_free_order
from pfzoo.kernels import GibbsState, HMCKernel

TOLERANCE = 0.05

CASES = {
    "rbm-20x10-strong": (lambda: random_rbm(20, 10, 2.0, 3), {}),
    "gaussian-4-hmc": (lambda: random_gaussian(4, seed=2, normalize_factor=True), {"kernel": HMCKernel(0.3)}),
    "gaussian-10-exact-draws": (lambda: random_gaussian(10, seed=6), {}),
}


@pytest.mark.parametrize("name", CASES)
def test_waste_free_lands_within_three_stderr_or_five_hundredths_of_exact(name):
    make_model, settings = CASES[name]
    model = make_model()
    estimate = SMC(2000, target_cess=0.9, chain_length=10, **settings)(model, generator=torch.Generator().manual_seed(0))
    exact = model.log_partition().item()
    assert estimate.kind is BoundKind.UNBIASED_Z and estimate.warnings == ()
    assert estimate.stderr < 0.1, f"stderr {estimate.stderr:.4f} too large to be a useful check"
    assert abs(estimate.log_z - exact) <= max(3 * estimate.stderr, TOLERANCE), (
        f"{name}: {estimate.log_z:.4f} ± {estimate.stderr:.4f}, exact {exact:.4f}"
    )
    steps = estimate.info["num_steps"][0]
    assert estimate.info["resampling_events"] == estimate.info["num_groups"] * (steps - 1)  # every group at every step but the last
    assert ("acceptance" in estimate.info) == ("kernel" in settings)  # HMC moves report theirs; exact draws always accept


def test_the_mean_of_z_hat_over_z_is_one_over_independent_groups():
    """As tests/estimators/test_calibration.py: 1,000 groups of 8 particles (2 chains of 4 states each), |z| ≤ 4."""
    model, log_z = skewed_rbm()
    estimate = SMC(8 * RUNS, target_cess=0.7, num_groups=RUNS, chain_length=4, base="uniform")(model, generator=torch.Generator().manual_seed(0))
    ratios = run_ratios(estimate, log_z)
    assert ratios.numel() == RUNS
    assert abs(calibration_z(ratios)) <= K_SIGMA, f"mean Ẑ/Z = {ratios.mean():.4f} ± {ratios.std() / math.sqrt(RUNS):.4f}"


def test_visited_states_are_joined_and_put_in_group_major_order():
    # 2 groups of 3 chains, 4 states per chain: a state's number is 100 · step + chain row (group-major)
    states = [GibbsState(100.0 * step + torch.arange(6.0)[:, None], torch.tensor(0.5)) for step in range(4)]
    joined = join_chains(states, 6)
    assert joined.position.shape == (24, 1) and joined.hidden.item() == 0.5 and joined.stats is None  # per-chain leaves joined, the others kept
    ordered = joined.position[waste_free_order(2, 3, 4, torch.device("cpu")), 0].view(2, 12)
    assert set(ordered[0].remainder(100).tolist()) == {0, 1, 2} and set(ordered[1].remainder(100).tolist()) == {3, 4, 5}
    assert sorted(ordered[0].tolist()) == sorted(100.0 * s + c for s in range(4) for c in range(3))


def test_per_example_waste_free_matches_the_closed_form_and_mixed_groups_are_caught(monkeypatch):
    model = linear_gaussian(3, 10)
    data = model.sample(10, generator=torch.Generator().manual_seed(1))
    exact = model.log_prob(data).detach()
    smc = SMC(num_chains=400, num_groups=10, chain_length=5, target_cess=0.8, num_mcmc_steps=5)  # HAIS-style HMC moves slowly
    estimate = smc.log_likelihood(model, data, generator=torch.Generator().manual_seed(0))
    assert estimate.warnings == () and estimate.info["chain_length"] == 5
    error = (estimate.per_example - exact).abs()
    assert torch.all(error <= torch.clamp(3 * estimate.info["per_example_stderr"], min=TOLERANCE)), error
    # the visited states left in visiting order: a group's rows then hold states of other examples' chains
    monkeypatch.setattr(adaptive_tempering, "waste_free_order",
                        lambda groups, draws, length, device: torch.arange(groups * draws * length, device=device))
    broken = smc.log_likelihood(model, data, generator=torch.Generator().manual_seed(0))
    assert (broken.per_example - exact).abs().max() > max(5 * broken.stderr, 10 * TOLERANCE)


def test_bad_chain_lengths_are_refused_in_one_line():
    for kwargs in (dict(chain_length=1), dict(num_chains=100, num_groups=20, chain_length=6), dict(chain_length=0)):
        with pytest.raises(ValueError, match="chain_length"):
            SMC(**kwargs)
    assert SMC(num_chains=1000, num_groups=20, chain_length=7).group_size == 49  # rounded down to whole chains
