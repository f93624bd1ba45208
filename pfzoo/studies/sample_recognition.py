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
from pathlib import Path

import torch

from pfzoo.data import DataSplits
from pfzoo.models.capabilities import Capability, require
from pfzoo.pictures import save_labelled_grids
from pfzoo.studies.features import fit_linear_classifier, labelled_training_rows
from pfzoo.studies.mpf_dbn import class_evenness
from pfzoo.validation import check_positive_int

BY = "the sample recognition check"
PICTURE_IMAGES = 100
"""Images of each panel of the picture :func:`sample_recognition` draws (the model's first samples, real test digits)."""


@dataclass(frozen=True)
class SampleRecognition:
    """Shares of images the classifier recognises, and what they were measured on.

    samples / real: the share of the model's samples and of the real test images given one class with probability ≥
    ``threshold``; ratio: samples ÷ real. class_matched_real: the real images' share in the samples' mix of classes,
    Σ_k (share of samples read as class k) · (share of the test images read as k that are recognised), and
    class_matched_ratio: samples ÷ that, which a model cannot raise by drawing mostly the easiest classes (samples
    that are nearly all ones read near the real ones' own rate). samples_confidence / real_confidence: their mean top-class probability.
    class_total_variation: ½ Σ_k |share of samples read as class k − share of test images read as class k| (0: the
    samples cover the classes as the test images do; 0.9: all one class). pixels_accuracy: the classifier's accuracy on
    the labelled test images (its competence).
    """

    samples: float
    real: float
    ratio: float
    class_matched_real: float
    class_matched_ratio: float
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
                       generator: torch.Generator | None = None, picture: str | Path | None = None) -> SampleRecognition:
    """The classifier's reading of ``model``'s samples against its reading of ``data``'s test images (module docstring).

    ``data``: labelled binary images of the model's width (train ``[N, V]`` with ``train_labels``, test ``[M, V]`` with
    ``test_labels``). ``num_train``: fit on that many training rows drawn without replacement by ``generator`` (all when
    ``None``). ``generator`` then also drives the model's chains. ``picture``: also save there a PNG of the first
    :data:`PICTURE_IMAGES` samples beside as many test images (a fixed random choice), each panel titled with how many of
    its images were recognised (image data only). Refuses in one line a model without Gibbs chains through a hidden
    layer and data without labels.
    """
    require(model, Capability.HIDDEN_CHAIN, by=BY, alternatives=["an RBM, DBM or DBN"])
    if picture is not None and not data.image_shape:
        raise ValueError(f"picture={str(picture)!r} draws the samples as images, but data set {data.name!r} has no image_shape; drop picture")
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
    matched_rate = class_matched_rate(real_class, real_top >= threshold, drawn_class, classes)
    accuracy = float((torch.from_numpy(classifier.classes_)[real_class] == data.test_labels.cpu()).double().mean())
    if picture is not None:
        shown = torch.randperm(data.test.shape[0], generator=torch.Generator().manual_seed(0))[:PICTURE_IMAGES]
        count = min(PICTURE_IMAGES, num_samples)
        save_labelled_grids({f"samples: {int((drawn_top[:count] >= threshold).sum())} of {count} recognised": samples[:count],
                             f"test digits: {int((real_top[shown] >= threshold).sum())} of {shown.numel()} recognised": data.test[shown]},
                            data.image_shape, picture)
    return SampleRecognition(samples=drawn_rate, real=real_rate, ratio=drawn_rate / real_rate if real_rate else math.nan,
                             class_matched_real=matched_rate, class_matched_ratio=drawn_rate / matched_rate if matched_rate else math.nan,
                             samples_confidence=float(drawn_top.mean()), real_confidence=float(real_top.mean()),
                             class_total_variation=class_evenness(drawn_class, real_share, classes)["total_variation"], pixels_accuracy=accuracy,
                             num_samples=num_samples, num_steps=num_steps, num_train=train.shape[0], num_test=data.test.shape[0],
                             threshold=float(threshold), C=float(C), max_iter=max_iter, converged=converged)


def class_matched_rate(real_class: torch.Tensor, real_recognised: torch.Tensor, drawn_class: torch.Tensor, classes: int) -> float:
    """The real images' recognised share reweighted to the samples' classes: Σ_k q_k r_k with q_k the share of the
    samples ``drawn_class [S]`` read as class k and r_k the recognised share ``real_recognised [M]`` (bool) of the real
    images ``real_class [M]`` read as k (a class no real image is read as counts as never recognised)."""
    read_as = torch.bincount(real_class, minlength=classes).double()
    recognised = torch.bincount(real_class, weights=real_recognised.double(), minlength=classes)
    per_class = torch.where(read_as > 0, recognised / read_as.clamp(min=1), torch.zeros_like(read_as))
    drawn_share = torch.bincount(drawn_class, minlength=classes).double() / drawn_class.numel()
    return float((drawn_share * per_class).sum())
