"""How linearly separable a model's hidden features make the classes: the classic evaluation of learned features.

A multinomial logistic regression (scikit-learn, L-BFGS, L2 penalty ``C``) is fitted on the hidden-unit means of the
training images (:attr:`~pfzoo.models.Capability.HIDDEN_MEANS`: ``p(h = 1 | v)`` of an RBM, the mean-field posterior of a
DBM, the bottom-up recognition pass of a DBN; every hidden layer's means side by side, or one layer) and scored on the
test images' features, beside the same classifier fitted on the raw pixels. The model never sees a label.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from pfzoo.data import DataSplits
from pfzoo.models.capabilities import Capability, require
from pfzoo.validation import check_positive_int

BY = "the linear classifier on hidden features"
FEATURE_BATCH = 10_000  # rows whose hidden means are computed at once (a DBM's mean field holds a few [B, n] tensors)


@dataclass(frozen=True)
class FeatureAccuracy:
    """Test accuracies of one classifier on a model's hidden features and on the raw pixels, and what they were measured on.

    ``chance``: the accuracy of always answering the most frequent training class. ``layers``: which hidden layers'
    means were the features (``"all"`` or a layer index). ``converged``: whether both fits stopped before ``max_iter``.
    """

    features: float
    pixels: float
    chance: float
    num_features: int
    num_train: int
    num_test: int
    layers: str
    C: float
    max_iter: int
    converged: bool

    def record(self) -> dict:
        """The plain-dict form (for JSON, e.g. a model card's measurement)."""
        return asdict(self)


def hidden_features(model, v: torch.Tensor, *, layer: int | None = None) -> torch.Tensor:
    """The model's hidden means for ``v [N, V]`` as float64 ``[N, F]``: every hidden layer concatenated
    (``layer=None``, ``F = Σ n_i``) or hidden layer ``layer`` (0 = the first, -1 = the top). Computed in batches of
    :data:`FEATURE_BATCH` rows, without gradients; refuses in one line a model without hidden means."""
    require(model, Capability.HIDDEN_MEANS, by=BY, alternatives=["an RBM, DBM or DBN"])
    chunks = []
    with torch.no_grad():
        for start in range(0, v.shape[0], FEATURE_BATCH):
            means = model.hidden_means(v[start:start + FEATURE_BATCH].to(device=model.device, dtype=model.dtype))
            if layer is not None:
                if not -len(means) <= layer < len(means):
                    raise ValueError(f"layer must index one of the model's {len(means)} hidden layers, got {layer}")
                means = [means[layer]]
            chunks.append(torch.cat(means, dim=1).double().cpu())
    return torch.cat(chunks)


def fit_linear_classifier(train: torch.Tensor, train_labels: torch.Tensor, *, C: float = 1.0, max_iter: int = 200):
    """Multinomial logistic regression (scikit-learn, L-BFGS, L2 strength ``1/C``) fitted on ``train [N, F]`` with
    ``train_labels [N]``, and whether L-BFGS converged within ``max_iter`` iterations."""
    from sklearn.linear_model import LogisticRegression  # imported here: scikit-learn is slow to import

    classifier = LogisticRegression(C=C, max_iter=max_iter).fit(train.numpy(), train_labels.numpy())
    return classifier, bool((classifier.n_iter_ < max_iter).all())


def linear_accuracy(train: torch.Tensor, train_labels: torch.Tensor, test: torch.Tensor, test_labels: torch.Tensor, *,
                    C: float = 1.0, max_iter: int = 200) -> tuple[float, bool]:
    """Test accuracy of :func:`fit_linear_classifier` on ``train [N, F]``, scored on ``test [M, F]``, and whether it
    converged."""
    classifier, converged = fit_linear_classifier(train, train_labels, C=C, max_iter=max_iter)
    return float(classifier.score(test.numpy(), test_labels.numpy())), converged


def labelled_training_rows(data: DataSplits, num_train: int | None, *, C: float, max_iter: int, by: str,
                           generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The training rows ``[n, V]`` and labels ``[n]`` a classifier of :func:`fit_linear_classifier` is fitted on:
    ``num_train`` rows drawn without replacement by ``generator`` (all when ``None`` or more than there are), and the
    training rows left out ``[N − n, V]`` (real images the classifier never saw, from the population a model was trained
    on), after refusing in one line, naming ``by``, data without labels and a bad ``C``, ``max_iter`` or ``num_train``."""
    if not data.labelled:
        raise ValueError(f"{by} needs class labels; the data set {data.name!r} has none — use dataset=digits or mnist")
    if not (isinstance(C, (int, float)) and not isinstance(C, bool) and math.isfinite(C) and C > 0):
        raise ValueError(f"C must be a positive number, got {C!r}")
    check_positive_int(max_iter, "max_iter")
    train, labels, left_out = data.train, data.train_labels, data.train[:0]
    if num_train is not None:
        check_positive_int(num_train, "num_train")
        if num_train < train.shape[0]:
            order = torch.randperm(train.shape[0], generator=generator)
            rows, left_out = order[:num_train], train[order[num_train:]]
            train, labels = train[rows], labels[rows]
    return train, labels, left_out


def feature_accuracy(model, data: DataSplits, *, layer: int | None = None, num_train: int | None = None, C: float = 1.0,
                     max_iter: int = 200, generator: torch.Generator | None = None) -> FeatureAccuracy:
    """Test accuracy of a linear classifier on ``model``'s hidden features of ``data`` and on its raw pixels.

    ``num_train``: fit on that many training rows drawn without replacement by ``generator`` (all rows when
    ``None``); the whole test split is scored. ``layer``: as :func:`hidden_features`. ``C``, ``max_iter``: the
    classifier's inverse L2 strength and L-BFGS iterations. Refuses in one line a model without hidden means and data
    without class labels.
    """
    require(model, Capability.HIDDEN_MEANS, by=BY, alternatives=["an RBM, DBM or DBN"])
    train, labels, _ = labelled_training_rows(data, num_train, C=C, max_iter=max_iter, by=BY, generator=generator)
    train_features, test_features = hidden_features(model, train, layer=layer), hidden_features(model, data.test, layer=layer)
    features, features_converged = linear_accuracy(train_features, labels, test_features, data.test_labels, C=C, max_iter=max_iter)
    pixels, pixels_converged = linear_accuracy(train.double(), labels, data.test.double(), data.test_labels, C=C, max_iter=max_iter)
    chance = float((data.test_labels == torch.bincount(labels).argmax()).double().mean())
    return FeatureAccuracy(features=features, pixels=pixels, chance=chance, num_features=train_features.shape[1],
                           num_train=train.shape[0], num_test=data.test.shape[0], layers="all" if layer is None else str(layer), C=float(C), max_iter=max_iter,
                           converged=features_converged and pixels_converged)
