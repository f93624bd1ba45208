"""Whether a model's samples look like the data to a classifier that has only seen real, labelled images.

A multinomial logistic regression (:func:`~pfzoo.studies.features.fit_linear_classifier`) is fitted on the raw pixels
of labelled training images; it then reads the real test images and ``num_samples`` samples of the model
(``model.sample``: independent Gibbs chains from random states, ``num_steps`` sweeps each). An image is *recognised*
when the classifier gives one class a probability of at least ``threshold``. A model whose samples are digits has its
samples recognised at about the rate of the real test digits, and spread over the classes as the test digits are; blank
images, blurs between two digits and strokes that are no digit are not recognised. The model never sees a label.

The classifier is deliberately simple (linear, on pixels): it measures nothing a trained network would hide, and it is
the same for every model, so the rates compare models; the real digits' own rate is the scale.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from pfzoo.data import DataSplits
from pfzoo.models.capabilities import Capability, require
from pfzoo.studies.features import fit_linear_classifier, labelled_training_rows
from pfzoo.studies.mpf_dbn import class_evenness
from pfzoo.validation import check_positive_int

BY = "the sample recognition check"


@dataclass(frozen=True)
class SampleRecognition:
    """Shares of images the classifier recognises, and what they were measured on.

    samples / real: the share of the model's samples and of the real test images given one class with probability ≥
    ``threshold``; ratio: samples ÷ real. samples_confidence / real_confidence: their mean top-class probability.
    class_total_variation: ½ Σ_k |share of samples read as class k − share of test images read as class k| (0: the
    samples cover the classes as the test images do; 0.9: all one class). pixels_accuracy: the classifier's accuracy on
    the labelled test images (its competence).
    """

    samples: float
    real: float
    ratio: float
    samples_confidence: float
    real_confidence: float
    class_total_variation: float
    pixels_accuracy: float
    num_samples: int
    num_steps: int
    num_train: int
    num_test: int
    threshold: float
    C: float
    max_iter: int
    converged: bool

    def record(self) -> dict:
        """The plain-dict form (for JSON, e.g. a model card's measurement)."""
        return asdict(self)


def sample_recognition(model, data: DataSplits, *, num_samples: int = 1000, num_steps: int = 1000, threshold: float = 0.9,
                       num_train: int | None = 20_000, C: float = 1.0, max_iter: int = 300,
                       generator: torch.Generator | None = None) -> SampleRecognition:
    """The classifier's reading of ``model``'s samples against its reading of ``data``'s test images (module docstring).

    ``data``: labelled binary images of the model's width (train ``[N, V]`` with ``train_labels``, test ``[M, V]`` with
    ``test_labels``). ``num_train``: fit on that many training rows drawn without replacement by ``generator`` (all when
    ``None``). ``generator`` then also drives the model's chains. Refuses in one line a model without Gibbs chains
    through a hidden layer and data without labels.
    """
    require(model, Capability.HIDDEN_CHAIN, by=BY, alternatives=["an RBM, DBM or DBN"])
    check_positive_int(num_samples, "num_samples")
    check_positive_int(num_steps, "num_steps")
    if not (isinstance(threshold, (int, float)) and not isinstance(threshold, bool) and 0.0 < threshold < 1.0):
        raise ValueError(f"threshold must be a probability strictly between 0 and 1, got {threshold!r}")
    train, labels = labelled_training_rows(data, num_train, C=C, max_iter=max_iter, by=BY, generator=generator)
    if train.shape[1] != model.num_visible:
        raise ValueError(f"data has {train.shape[1]} columns but the model has {model.num_visible} visible units")
    classifier, converged = fit_linear_classifier(train.double(), labels, C=C, max_iter=max_iter)
    with torch.no_grad():
        samples = model.sample(num_samples, num_steps=num_steps, generator=generator)
    real = torch.from_numpy(classifier.predict_proba(data.test.double().numpy()))  # [M, K]
    drawn = torch.from_numpy(classifier.predict_proba(samples.detach().double().cpu().numpy()))  # [S, K]
    real_top, real_class = real.max(1)
    drawn_top, drawn_class = drawn.max(1)
    classes = real.shape[1]
    real_share = torch.bincount(real_class, minlength=classes).double() / real_class.numel()
    real_rate, drawn_rate = float((real_top >= threshold).double().mean()), float((drawn_top >= threshold).double().mean())
    accuracy = float((torch.from_numpy(classifier.classes_)[real_class] == data.test_labels.cpu()).double().mean())
    return SampleRecognition(samples=drawn_rate, real=real_rate, ratio=drawn_rate / real_rate if real_rate else math.nan,
                             samples_confidence=float(drawn_top.mean()), real_confidence=float(real_top.mean()),
                             class_total_variation=class_evenness(drawn_class, real_share, classes)["total_variation"], pixels_accuracy=accuracy,
                             num_samples=num_samples, num_steps=num_steps, num_train=train.shape[0], num_test=data.test.shape[0],
                             threshold=float(threshold), C=float(C), max_iter=max_iter, converged=converged)
