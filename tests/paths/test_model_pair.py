"""The annealing path between two RBMs (model comparison): its ends are the two models exactly, and its kernel leaves
each intermediate distribution invariant."""

import pytest
import torch
from factories import all_binary_states, chi_square_p_value, random_dbm, random_rbm

from pfzoo.paths import pair_path


def test_the_increment_across_the_whole_path_is_the_free_energy_difference():
    a, b = random_rbm(7, 4, 1.0, 1), random_rbm(7, 6, 1.0, 2)
    path = pair_path(a, b)
    v = all_binary_states(7)
    with torch.no_grad():
        stats = path.target.statistics(v)
        whole = path.log_weight_increment(stats, 0.0, 1.0)
        halves = path.log_weight_increment(stats, 0.0, 0.4) + path.log_weight_increment(stats, 0.4, 1.0)
        expected = (a.free_energy(v) - b.free_energy(v)).double()
    torch.testing.assert_close(whole, expected, rtol=0, atol=1e-10)
    torch.testing.assert_close(halves, expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize("beta", [0.0, 0.5, 1.0])
def test_block_gibbs_on_the_pair_path_samples_its_intermediate_distribution(beta):
    """Chains run at β pass a χ² test against ``f_β ∝ f_A · exp(increment(0, β))`` by enumeration."""
    a, b = random_rbm(6, 4, 1.0, 3), random_rbm(6, 5, 1.0, 4)
    path = pair_path(a, b)
    g = torch.Generator().manual_seed(0)
    state = path.init(torch.randint(0, 2, (20000, 6), generator=g).double())
    with torch.no_grad():
        for _ in range(50):
            state, _ = path.transition(state, beta, generator=g)
        states = all_binary_states(6, msb_first=True)
        log_f = -a.free_energy(states).double() + path.log_weight_increment(path.target.statistics(states), 0.0, beta)
    assert chi_square_p_value(state.position, torch.softmax(log_f, 0)) > 1e-3


def test_only_two_models_of_a_family_with_a_pair_path_get_one():
    assert pair_path(random_rbm(6, 4, 1.0, 1), random_dbm([6, 5, 4], 1.0, 2)) is None
    with pytest.raises(ValueError, match="must share a visible space"):
        pair_path(random_rbm(6, 4, 1.0, 1), random_rbm(7, 4, 1.0, 2))
