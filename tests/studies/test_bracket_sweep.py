"""bracket_sweep: AIS and RAISE over settings on common random numbers, against exact log-likelihoods."""

import math

import pytest
import torch
from factories import biased_binary_data, random_rbm

from pfzoo.estimators import AIS, RAISE
from pfzoo.studies.bracket_sweep import BracketPoint, bracket_sweep, replay


def small_problem():
    model = random_rbm(10, 6, scale=1.0, seed=3)
    data = biased_binary_data(10, seed=4, num_examples=200)
    return model, data[:30], data[30:]


def test_each_point_is_the_plain_ais_and_raise_run_on_its_own_replayed_streams():
    model, data, train = small_problem()
    upper_stream, lower_stream = torch.Generator().manual_seed(11), torch.Generator().manual_seed(12)
    before = upper_stream.get_state()
    points = bracket_sweep(model, data, num_steps=[20, 40], schedules=["linear", "power:3"], ais_chains=16, raise_chains=3,
                           base="base_rate", base_data=train, generator=upper_stream, raise_generator=lower_stream)
    assert [(p.num_steps, p.schedule) for p in points] == [(20, "linear"), (20, "power:3"), (40, "linear"), (40, "power:3")]
    assert torch.equal(upper_stream.get_state(), before)  # the caller's generator is not advanced
    for point in points:
        upper = AIS(16, point.num_steps, schedule=point.schedule, base="base_rate").log_likelihood(
            model, data, base_data=train, generator=torch.Generator().manual_seed(11))
        lower = RAISE(3, point.num_steps, schedule=point.schedule, base="base_rate").log_likelihood(
            model, data, base_data=train, generator=torch.Generator().manual_seed(12))
        assert (point.upper, point.upper_stderr, point.log_z, point.ess) == (upper.mean, upper.stderr, upper.partition.log_z, upper.partition.ess)
        assert (point.lower, point.lower_stderr) == (lower.mean, lower.stderr)
        assert point.gap == point.upper - point.lower
        assert point.warnings == tuple(f"AIS: {w}" for w in upper.warnings) + tuple(f"RAISE: {w}" for w in lower.warnings)


def test_a_point_carries_its_estimators_warnings_and_logs_them(caplog):
    model = random_rbm(10, 6, scale=4.0, seed=3)  # strongly coupled: two AIS chains at K = 2 cannot be trusted
    data = biased_binary_data(10, seed=4, num_examples=60)
    with caplog.at_level("WARNING", logger="pfzoo.studies.bracket_sweep"):
        (point,) = bracket_sweep(model, data[:20], num_steps=2, ais_chains=2, raise_chains=2, base="base_rate", base_data=data[20:],
                                 generator=torch.Generator().manual_seed(0))
    assert any(w.startswith("AIS: ") for w in point.warnings)
    assert [r.getMessage() for r in caplog.records] == [f"K = 2, linear: {w}" for w in point.warnings]


def test_without_a_raise_generator_both_replay_the_one_stream():
    model, data, train = small_problem()
    (point,) = bracket_sweep(model, data, num_steps=10, ais_chains=4, raise_chains=2, base="base_rate", base_data=train,
                             generator=torch.Generator().manual_seed(5))
    lower = RAISE(2, 10, base="base_rate").log_likelihood(model, data, base_data=train, generator=torch.Generator().manual_seed(5))
    assert point.lower == lower.mean


def test_the_bracket_closes_on_the_exact_log_likelihood_as_k_grows():
    model, data, train = small_problem()
    exact = model.log_prob(data).mean().item()
    short, long = bracket_sweep(model, data, num_steps=[2, 500], ais_chains=200, raise_chains=20, base="uniform",
                                base_data=train, generator=torch.Generator().manual_seed(0), raise_generator=torch.Generator().manual_seed(1))
    assert abs(long.upper - exact) < 4 * long.upper_stderr + 0.02
    assert abs(long.lower - exact) < 4 * long.lower_stderr + 0.02
    assert abs(long.gap) > 0 and abs(long.gap) < abs(short.gap) / 5  # at K = 2 the annealing model is far from the RBM


def test_settings_are_checked_before_anything_runs():
    model, data, train = small_problem()
    with pytest.raises(ValueError, match="schedule"):
        bracket_sweep(model, data, num_steps=10, schedules=["linear", "no-such-schedule"], base_data=train)
    with pytest.raises(ValueError, match="at least one"):
        bracket_sweep(model, data, num_steps=[], base_data=train)


def test_replay_copies_the_state_and_leaves_none_alone():
    generator = torch.Generator().manual_seed(3)
    copy = replay(generator)
    assert copy is not generator and torch.equal(torch.rand(4, generator=copy), torch.rand(4, generator=generator))
    assert replay(None) is None


def test_gap_is_upper_minus_lower():
    point = BracketPoint(num_steps=1, schedule="linear", upper=-1.0, upper_stderr=0.1, log_z=2.0, ess=3.0, lower=-1.5,
                         lower_stderr=0.1, seconds=0.0)
    assert math.isclose(point.gap, 0.5)
