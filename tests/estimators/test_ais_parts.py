"""AIS in parts (``AIS(..., part=(i, n))`` and :func:`pfzoo.estimators.pool_parts`): the parts of a run, each in its
own process or sitting with the generator seeded alike, pool into the one-go run's estimate bit for bit (batched
Gibbs paths, compiled ones, and paths whose blocks run one after another), the log-likelihood from the pooled log Ẑ is
the one-go log-likelihood, and whatever cannot be a part of one run is refused in one line."""

import pytest
import torch
from factories import biased_binary_data, random_dbm, random_poe, random_rbm

from pfzoo.estimators import AIS, pool_parts


def seeded(seed: int = 7) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def assert_same_run(pooled, whole):
    assert torch.equal(pooled.log_weights, whole.log_weights)
    assert (pooled.log_z, pooled.stderr, pooled.ess) == (whole.log_z, whole.stderr, whole.ess)
    assert pooled.warnings == whole.warnings and pooled.info["num_chains"] == whole.info["num_chains"]


def run_parts(make, model, count, data=None, order=None):
    """Each part with its own generator seeded alike, in ``order`` (default: last first); returns the estimates."""
    return [make(part=(index, count))(model, data=data, generator=seeded()) for index in (order or reversed(range(count)))]


@pytest.mark.parametrize("count", [2, 3, 8])
def test_an_rbms_parts_pool_into_the_one_go_run_bit_for_bit(count):
    model, data = random_rbm(12, 6, seed=1), biased_binary_data(12, seed=2)

    def make(part=None):
        return AIS(num_chains=256, num_steps=60, schedule="linear", base="base_rate", part=part)

    whole = make()(model, data=data, generator=seeded())
    parts = run_parts(make, model, count, data)
    assert sum(p.log_weights.numel() for p in parts) == 256 and all(p.log_z != whole.log_z for p in parts)
    assert_same_run(pool_parts(parts), whole)


def test_a_dbms_parts_pool_and_its_likelihood_from_the_pooled_log_z_is_the_one_go_one():
    model = random_dbm([10, 6, 4], seed=3)
    train, test = biased_binary_data(10, seed=4), biased_binary_data(10, seed=5, num_examples=40)

    def make(part=None):
        return AIS(num_chains=128, num_steps=40, schedule="linear", base="base_rate", posterior_samples=8, part=part)

    whole = make().log_likelihood(model, test, base_data=train, generator=seeded())
    parts, generator = [], None
    for index in (1, 3, 0, 2):  # any order; the generator of the part run last goes on to the free energies
        generator = seeded()
        parts.append(make(part=(index, 4))(model, data=train, generator=generator))
    pooled = pool_parts(parts)
    assert_same_run(pooled, whole.partition)
    given = make().log_likelihood_given(model, test, pooled, generator=generator)
    assert torch.equal(given.per_example, whole.per_example) and (given.mean, given.stderr) == (whole.mean, whole.stderr)


def test_blocks_run_one_after_another_pool_alike():
    # a Laplace POE's path (HMC, which can reject) runs its blocks one after another rather than as one batch
    model = random_poe(3, seed=6)

    def make(part=None):
        return AIS(num_chains=96, num_steps=20, schedule="linear", part=part)

    whole = make()(model, generator=seeded())
    pooled = pool_parts(run_parts(make, model, 3))
    assert_same_run(pooled, whole)
    assert pooled.info["acceptance"] == pytest.approx(whole.info["acceptance"], abs=1e-12)  # pooled over the chains


def test_compiled_parts_pool_into_the_compiled_one_go_run():
    model, data = random_rbm(8, 5, seed=8, dtype=torch.float32), biased_binary_data(8, seed=9, dtype=torch.float32)

    def make(part=None):
        return AIS(num_chains=128, num_steps=30, schedule="linear", base="base_rate", compile=True, part=part)

    whole = make()(model, data=data, generator=seeded())
    assert_same_run(pool_parts(run_parts(make, model, 2, data)), whole)


@pytest.mark.parametrize("part, words", [((2, 2), "0 ≤ i < n"), ((0, 0), "0 ≤ i < n"), ("0,2", "0 ≤ i < n"), ((0, 2, 1), "0 ≤ i < n"),
                                         ((0.0, 2), "0 ≤ i < n"), ((0, 9), "at most 8 parts")])
def test_a_part_that_cannot_be_is_refused_naming_it(part, words):
    with pytest.raises(ValueError, match="part") as error:
        AIS(num_chains=256, part=part)
    assert words in str(error.value)


def test_pooling_refuses_what_is_not_every_part_of_one_run_once():
    model, data = random_rbm(6, 4, seed=1), biased_binary_data(6, seed=2)

    def make(part=None, steps=10):
        return AIS(num_chains=64, num_steps=steps, schedule="linear", base="base_rate", part=part)

    first, second = make(part=(0, 2))(model, data=data, generator=seeded()), make(part=(1, 2))(model, data=data, generator=seeded())
    with pytest.raises(ValueError, match="each part 0…n−1 of one run exactly once"):
        pool_parts([first])
    with pytest.raises(ValueError, match="each part 0…n−1 of one run exactly once"):
        pool_parts([first, first])
    with pytest.raises(ValueError, match="other settings"):
        pool_parts([first, make(part=(1, 2), steps=20)(model, data=data, generator=seeded())])
    with pytest.raises(ValueError, match="AIS"):
        pool_parts([first, make()(model, data=data, generator=seeded())])
    with pytest.raises(ValueError, match="AIS"):
        pool_parts([])
    assert pool_parts([second, first]).info["num_chains"] == 64


def test_the_pooled_diagnostics_are_the_whole_runs():
    model, data = random_rbm(10, 5, seed=4), biased_binary_data(10, seed=5)

    def make(part=None):
        return AIS(num_chains=192, num_steps=25, schedule="linear", base="base_rate", diagnostics=True, part=part)

    whole = make()(model, data=data, generator=seeded()).info["diagnostics"]
    pooled = pool_parts(run_parts(make, model, 3, data)).info["diagnostics"]
    for name in ("increment_mean", "increment_var", "ess", "log_weight_sums"):
        assert torch.allclose(getattr(pooled, name), getattr(whole, name), rtol=1e-10, atol=1e-12), name
