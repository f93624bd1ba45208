"""A linear classifier on a model's hidden features (pfzoo.studies.features): far above chance on the digits, at chance
when the training labels are shuffled, and one-line refusals for models without hidden means and data without labels."""

import pytest
import torch

from pfzoo.data import DataSplits, digits
from pfzoo.models import DBM, DBN, RBM, Capability, Ising, MissingCapability
from pfzoo.studies.features import feature_accuracy, hidden_features


@pytest.fixture(scope="module")
def data():
    return digits()


def random_rbm(num_hidden=100, seed=0):
    """An untrained RBM with weights large enough that its hidden units are a random nonlinear feature map."""
    return RBM(64, num_hidden, init_std=0.3, generator=torch.Generator().manual_seed(seed))


def test_features_of_a_random_rbm_classify_the_digits_far_above_chance(data):
    result = feature_accuracy(random_rbm(), data, max_iter=500)
    assert result.chance < 0.15 and result.num_features == 100 and result.num_test == data.test.shape[0]
    assert result.features > 0.85 and result.pixels > 0.85, result  # 360 test digits: ± 0.02


def test_shuffled_training_labels_fall_to_chance(data):
    shuffled = data.train_labels[torch.randperm(len(data.train_labels), generator=torch.Generator().manual_seed(1))]
    control = DataSplits(data.name, data.train, data.test, train_labels=shuffled, test_labels=data.test_labels)
    result = feature_accuracy(random_rbm(), control, max_iter=500)
    assert result.features < 0.25 and result.pixels < 0.25, result  # 10 classes: 0.10 ± 0.016 by chance


def test_deep_models_give_every_hidden_layer_or_one(data):
    generator = torch.Generator().manual_seed(0)
    for model in (DBM([64, 30, 20], init_std=0.3, generator=generator), DBN([64, 30, 20], init_std=0.3, generator=generator)):
        assert Capability.HIDDEN_MEANS in model.capabilities
        assert hidden_features(model, data.test).shape == (data.test.shape[0], 50)
        top = hidden_features(model, data.test, layer=-1)
        assert top.shape == (data.test.shape[0], 20) and torch.equal(top, hidden_features(model, data.test)[:, 30:])
        assert 0 < top.min() and top.max() < 1
    result = feature_accuracy(model, data, num_train=500, max_iter=300, generator=torch.Generator().manual_seed(0))
    assert result.num_train == 500 and result.num_features == 50 and result.features > 0.5, result


def test_rbm_features_are_its_hidden_probabilities(data):
    rbm = random_rbm(10)
    assert torch.allclose(hidden_features(rbm, data.test[:5]), torch.sigmoid(data.test[:5] @ rbm.weight + rbm.hidden_bias).double())


def test_refusals_are_one_line(data):
    with pytest.raises(MissingCapability, match="linear classifier on hidden features needs the means of its hidden units") as refused:
        feature_accuracy(Ising(64), data)
    assert "\n" not in str(refused.value)
    unlabelled = DataSplits("unlabelled", data.train, data.test)
    with pytest.raises(ValueError, match="needs class labels; the data set 'unlabelled' has none") as refused:
        feature_accuracy(random_rbm(), unlabelled)
    assert "\n" not in str(refused.value)
    with pytest.raises(ValueError, match="layer must index one of the model's 1 hidden layers"):
        hidden_features(random_rbm(), data.test, layer=1)
