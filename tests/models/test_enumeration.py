import itertools

import pytest
import torch

from pfzoo.models.enumeration import logsumexp_over_binary_states


def test_chunked_sum_equals_direct_sum_over_all_states(monkeypatch):
    g = torch.Generator().manual_seed(0)
    coefficients = torch.randn(7, generator=g, dtype=torch.float64)
    log_f = lambda states: states @ coefficients + (states.sum(-1) - 3) ** 2 / 4
    states = torch.tensor(list(itertools.product([0.0, 1.0], repeat=7)), dtype=torch.float64)
    expected = torch.logsumexp(log_f(states), 0)
    whole = logsumexp_over_binary_states(7, log_f, width=7, max_units=10, device=torch.device("cpu"))
    monkeypatch.setattr("pfzoo.models.enumeration._CHUNK_ELEMENTS", 8)  # chunks of a single state
    chunked = logsumexp_over_binary_states(7, log_f, width=7, max_units=10, device=torch.device("cpu"))
    assert whole.item() == pytest.approx(expected.item(), abs=1e-12)
    assert chunked.item() == pytest.approx(expected.item(), abs=1e-12)


def test_refuses_beyond_the_limit():
    with pytest.raises(ValueError, match="2\\^30 states.*max_enumeration_units=25"):
        logsumexp_over_binary_states(30, lambda s: s.sum(-1), width=1, max_units=25, device=torch.device("cpu"))
