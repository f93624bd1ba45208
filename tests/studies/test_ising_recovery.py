"""ε_J and ε_corr (thesis Table 3.1) against hand computations, and their input checks."""

import itertools

import pytest
import torch

from pfzoo.data import spin_glass_model
from pfzoo.models import RBM, Ising
from pfzoo.studies.ising_recovery import correlation_error, coupling_error, pair_moments, upper_pairs


def test_upper_pairs_lists_the_entries_above_the_diagonal_row_by_row():
    matrix = torch.arange(16.0).reshape(4, 4)
    assert upper_pairs(matrix).tolist() == [1.0, 2.0, 3.0, 6.0, 7.0, 11.0]


def test_coupling_error_of_the_zero_start_is_the_mean_square_true_coupling_over_all_pairs():
    truth = spin_glass_model(side=4, coupling_std=1.0, seed=3)
    coupling = truth.symmetric_coupling.detach()
    by_hand = sum(coupling[i, j].item() ** 2 for i, j in itertools.combinations(range(16), 2)) / (16 * 15 / 2)
    assert coupling_error(Ising(16, init_std=0.0), truth) == pytest.approx(by_hand, rel=1e-6)
    assert coupling_error(truth, truth) == 0.0


def test_coupling_error_reads_the_symmetric_couplings_of_float64_models():
    g = torch.Generator().manual_seed(0)
    model = Ising(5, init_std=1.0, generator=g).double()
    truth = Ising(5, init_std=1.0, generator=g)
    learned, true = model.symmetric_coupling.detach(), truth.symmetric_coupling.detach().double()
    by_hand = sum((learned[i, j] - true[i, j]).item() ** 2 for i, j in itertools.combinations(range(5), 2)) / 10
    assert coupling_error(model, truth) == pytest.approx(by_hand, rel=1e-12)


def test_pair_moments_and_correlation_error_match_loops():
    g = torch.Generator().manual_seed(1)
    samples = torch.bernoulli(torch.full((50, 4), 0.3), generator=g)
    reference = torch.bernoulli(torch.full((70, 4), 0.6), generator=g)
    moments = [(samples[:, i] * samples[:, j]).mean().item() for i, j in itertools.combinations(range(4), 2)]
    assert pair_moments(samples).tolist() == pytest.approx(moments)
    reference_moments = [(reference[:, i] * reference[:, j]).mean().item() for i, j in itertools.combinations(range(4), 2)]
    by_hand = sum((a - b) ** 2 for a, b in zip(moments, reference_moments)) / 6
    assert correlation_error(samples, reference) == pytest.approx(by_hand, rel=1e-6)
    assert correlation_error(samples, samples) == 0.0


def test_bad_inputs_raise_value_error():
    with pytest.raises(ValueError, match="model"):
        coupling_error(RBM(4, 3), Ising(4))
    with pytest.raises(ValueError, match="same number of units"):
        coupling_error(Ising(4), Ising(5))
    with pytest.raises(ValueError, match="square"):
        upper_pairs(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="samples"):
        pair_moments(torch.zeros(0, 3))
    with pytest.raises(ValueError, match="width"):
        correlation_error(torch.zeros(3, 3), torch.zeros(3, 4))
