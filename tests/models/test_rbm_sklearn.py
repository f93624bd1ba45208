"""RBM ↔ scikit-learn's BernoulliRBM: the conversion is exact both ways (parameters bit for bit; free energies and hidden
probabilities equal up to float64 rounding of the two libraries' operation orders), and it refuses what is no fitted RBM."""

import numpy as np
import pytest
import torch
from sklearn.neural_network import BernoulliRBM

from factories import random_rbm
from pfzoo.models import RBM


@pytest.fixture(scope="module")
def data():
    return (np.random.default_rng(0).random((50, 12)) < 0.4).astype(np.float64)


def test_from_sklearn_matches_a_fitted_estimator(data):
    estimator = BernoulliRBM(n_components=5, n_iter=3, learning_rate=0.1, random_state=0).fit(data)
    model = RBM.from_sklearn(estimator)
    assert model.weight.dtype == torch.float64 and (model.num_visible, model.num_hidden) == (12, 5)
    assert np.array_equal(model.weight.detach().numpy(), estimator.components_.T)
    v = torch.from_numpy(data)
    np.testing.assert_allclose(model.free_energy(v).detach().numpy(), estimator._free_energy(data), rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.hidden_probs(v).detach().numpy(), estimator.transform(data), rtol=0, atol=1e-14)


def test_to_sklearn_round_trips_and_agrees(data):
    model = random_rbm(12, 5, scale=1.0, seed=3)
    estimator = model.to_sklearn(learning_rate=0.05, batch_size=7, random_state=0)
    assert estimator.n_components == 5 and estimator.learning_rate == 0.05 and estimator.h_samples_.shape == (7, 5)
    v = torch.from_numpy(data)
    np.testing.assert_allclose(estimator._free_energy(data), model.free_energy(v).detach().numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(estimator.transform(data), model.hidden_probs(v).detach().numpy(), rtol=0, atol=1e-14)
    back = RBM.from_sklearn(estimator)
    assert all(torch.equal(back.state_dict()[key], model.state_dict()[key]) for key in model.state_dict())
    estimator.partial_fit(data)  # a converted estimator trains on in scikit-learn
    assert not np.array_equal(estimator.components_, model.weight.detach().numpy().T)


def test_float32_models_convert_to_float32_arrays(data):
    model = random_rbm(12, 5, scale=1.0, seed=4, dtype=torch.float32)
    estimator = model.to_sklearn()
    assert estimator.components_.dtype == np.float32 and RBM.from_sklearn(estimator).weight.dtype == torch.float32
    np.testing.assert_allclose(estimator.transform(data.astype(np.float32)), model.hidden_probs(torch.from_numpy(data).float()).detach().numpy(), atol=1e-6)


def test_an_unfitted_estimator_or_misplaced_argument_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^estimator must be a fitted sklearn BernoulliRBM; BernoulliRBM has no components_, intercept_visible_, intercept_hidden_$"):
        RBM.from_sklearn(BernoulliRBM(n_components=3))
    with pytest.raises(ValueError, match="n_components is the RBM's num_hidden"):
        random_rbm(4, 3).to_sklearn(n_components=2)
