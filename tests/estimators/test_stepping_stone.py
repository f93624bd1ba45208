"""log Z from parallel tempering (estimator=pt): within 3 stderr of the exact value on enumerable and closed-form
models, its round-trip count against a walk written out by hand, and its warnings on a ladder that does not mix (too few
exchanges, too few round trips, an estimate still moving because a concentrated mode is being found)."""

import pytest
import torch
from factories import biased_binary_data, random_gaussian, random_ising, random_poe, random_rbm

from pfzoo.estimators import BoundKind, SteppingStone
from pfzoo.estimators.stepping_stone import DRIFT_Z, LadderRun, half_drift, round_trip_bound
from pfzoo.models import RBM

K_SIGMA = 3.0
SMALL = dict(num_chains=50, num_steps=200, burn_in=40)

CASES = {
    "rbm-10x6": (lambda: random_rbm(10, 6, 1.0, 0), None),
    "rbm-12x8-strong-base-rate": (lambda: random_rbm(12, 8, 2.0, 4), lambda: biased_binary_data(12, 4)),
    "ising-8": (lambda: random_ising(8, 1.0, 8, draw_dtype=None), None),
    "gaussian-4": (lambda: random_gaussian(4, seed=6, normalize_factor=True), None),
    "poe-laplace-4": (lambda: random_poe(4, expert="laplace", seed=1), None),
}


@pytest.mark.parametrize("name", CASES)
def test_within_three_stderr_of_exact(name):
    make_model, make_data = CASES[name]
    model = make_model()
    estimate = SteppingStone(**SMALL)(model, data=None if make_data is None else make_data(), generator=torch.Generator().manual_seed(0))
    exact = model.log_partition().item()
    assert estimate.kind is BoundKind.CONSISTENT and estimate.warnings == ()
    assert 0 < estimate.stderr < 0.05, f"stderr {estimate.stderr:.4f} too large to be a useful check"
    assert abs(estimate.log_z - exact) <= K_SIGMA * estimate.stderr, f"{name}: {estimate.log_z:.4f} ± {estimate.stderr:.4f}, exact {exact:.4f}"
    info = estimate.info
    assert len(info["exchange_acceptance"]) == len(info["betas"]) - 1 == 10 and info["round_trips"] > 0
    assert 0 < info["round_trip_rate"] <= 0.5  # at most one round trip per two steps of a ladder (Syed et al. 2022)


def test_a_ladder_that_does_not_mix_warns():
    # an RBM with weights N(0, 4²): a ladder that jumps from β = 0.01 to 1 neither exchanges nor carries states across
    estimate = SteppingStone(num_chains=20, num_levels=2, num_steps=50, burn_in=10, schedule=[0.0, 0.01, 1.0], adapt_ladder=False,
                             num_batches=5)(random_rbm(20, 10, 4.0, 1), generator=torch.Generator().manual_seed(0))
    assert estimate.info["exchange_acceptance"][1] < 1e-6 and estimate.info["round_trips"] == 0
    assert [line.split(" ")[0] for line in estimate.warnings] == ["exchange", "no"]


def concentrated_mode_rbm():
    """48×4 RBM, all weights 1, visible biases 1, hidden biases −43.45: the hidden state with every unit on holds 90 % of
    the mass at β = 1 and 8 % at β = 0.8 (enumerated), a concentrated mode that appears only at the top of the path, as the
    zoo's CD-1(20) MNIST RBM puts 40 % of its mass on one hidden configuration."""
    return RBM.from_tensors(torch.ones(48, 4, dtype=torch.float64), torch.ones(48, dtype=torch.float64),
                            torch.full((4,), -43.45, dtype=torch.float64))


def test_a_concentrated_mode_the_ladder_does_not_carry_warns():
    """The failure the zoo's CD-1(20) MNIST RBM shows (2.1-2.4 nats low at the defaults, with no warning before): the
    chains at β = 1 keep finding the mode through the run, so the estimate is many stderr low and its second half's estimate
    sits well above the first half's. Measured at seeds 0-3: 4.2-7.4 stderr low, drift +5.1 to +6.2 standard errors."""
    model = concentrated_mode_rbm()
    estimate = SteppingStone(**SMALL)(model, generator=torch.Generator().manual_seed(0))
    exact = model.log_partition().item()
    assert exact - estimate.log_z > 4 * estimate.stderr, "the model no longer shows the failure this test guards"
    assert estimate.info["drift_z"] > DRIFT_Z
    assert any(line.startswith("the estimate moved by +") for line in estimate.warnings), estimate.warnings


def test_round_trips_far_below_the_bound_warn():
    """Round trips at a tenth of what the exchange acceptances allow name the stuck ladder (Syed et al. 2022's bound), and
    so do the 0.18 of it the zoo's PCD(20) MNIST RBM makes with the defaults, where the estimate is 2-5 stderr low
    (MIN_ROUND_TRIP_FRACTION); half of it, the least the well-mixing test models make at 200 steps, passes."""
    acceptance = torch.tensor([0.9, 0.5, 0.5, 0.5, 0.5])
    assert round_trip_bound(acceptance[1:]) == pytest.approx(1 / 6)
    estimator = SteppingStone(num_chains=10, num_steps=120, num_batches=4)
    expected = 10 * 120 / 6
    ok, mnist, stuck = (estimator.warnings([0.0, 0.2, 0.4, 0.6, 0.8, 1.0], acceptance, trips, None)
                        for trips in (expected / 2, 0.18 * expected, expected / 10))
    assert ok == ()
    assert all(len(lines) == 1 and "round trips between" in lines[0] for lines in (mnist, stuck))
    assert half_drift(torch.tensor([0.0, 1.0, 0.0, 1.0])) == pytest.approx(0.0)
    assert half_drift(torch.tensor([0.0, 0.1, 0.0, 5.0, 5.1, 5.0])) > DRIFT_Z


def test_round_trips_follow_the_walkers():
    run = LadderRun(4, 1, torch.device("cpu"))
    # walker 1 (first at the bottom after one exchange) climbs to the top and comes back down: one round trip
    for swaps in ([1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1], [0, 1, 0], [1, 0, 0], [0, 0, 0]):
        run.follow(torch.tensor(swaps, dtype=torch.bool)[:, None])
    assert run.round_trips.item() == 1 and run.labels[:, 0].tolist() == [1, 0, 2, 3]


def test_bad_settings_are_refused_in_one_line():
    for kwargs, word in ((dict(num_levels=1), "num_levels"), (dict(num_batches=1), "num_batches"),
                         (dict(num_steps=10, num_batches=20), "num_batches"), (dict(swaps="sideways"), "swaps"),
                         (dict(num_chains=1), "num_chains")):
        with pytest.raises(ValueError, match=word):
            SteppingStone(**kwargs)


def test_fresh_base_draws_enter_the_ladder_through_level_one():
    """With an inner kernel that barely moves (random-walk steps of 1e-6), only the exchanges move states: the ladder's
    first level trades with a fresh exact base draw every step, so states reach the model's mass even so; the ladder's
    initial base draws alone would leave the levels near β = 1 at the base's spread (an estimate off by nats)."""
    from pfzoo.kernels import RandomWalkMetropolis
    from pfzoo.models import Gaussian

    model = Gaussian.from_tensors(torch.tensor([[4.0, 1.0], [1.0, 2.0]], dtype=torch.float64), torch.tensor([1.5, -1.0], dtype=torch.float64))
    estimator = SteppingStone(num_chains=100, num_levels=8, num_steps=600, burn_in=200, kernel=RandomWalkMetropolis(1e-6),
                              base="isotropic", adapt_ladder=False)
    estimate = estimator(model, generator=torch.Generator().manual_seed(0))
    exact = model.log_partition().item()
    assert abs(estimate.log_z - exact) < max(4 * estimate.stderr, 0.05), (estimate.log_z, estimate.stderr, exact)


def test_with_replica_replaces_the_masked_chains_of_one_level_only():
    from pfzoo.kernels.metropolis import MetropolisState
    from pfzoo.kernels.tempering import TemperingState

    positions = torch.arange(12.0).view(6, 2)  # 3 levels × 2 chains
    state = TemperingState(MetropolisState(positions, (positions.sum(1),)), num_chains=2)
    fresh = MetropolisState(torch.full((2, 2), -1.0), (torch.full((2,), -2.0),))
    merged = state.with_replica(1, fresh, torch.tensor([False, True]))
    assert merged.replicas.position.tolist() == [[0, 1], [2, 3], [4, 5], [-1, -1], [8, 9], [10, 11]]
    assert merged.replicas.stats[0].tolist() == [1, 5, 9, -2, 17, 21]
