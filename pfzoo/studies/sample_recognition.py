"""Whether a model's samples look like the data to a classifier that has only seen real, labelled images.

A multinomial logistic regression (:func:`~pfzoo.studies.features.fit_linear_classifier`) is fitted on the raw pixels
of labelled training images; it then reads the real test images and ``num_samples`` samples of the model: the visible
draws ``v ~ p(v | h¹)`` of independent Gibbs chains through its first hidden layer (``model.hidden_chain``) started
from random states, after ``num_steps`` sweeps. An image is *recognised* when the classifier gives one class a
probability of at least ``threshold``. A model whose samples are digits has its samples recognised at about the rate of
the real test digits, and spread over the classes as the test digits are; blank images, blurs between two digits and
strokes that are no digit are not recognised. The model never sees a label.

Whether the chains have reached the model's distribution is measured, not assumed: as many chains again start from test
digits, and both sets are read along the way (the *burn-in curve*, at 10, 30, 100, 300, … sweeps). Chains from random
states climb towards the model's rate and chains from digits fall or rise to it from the data's side; the samples are
the model's when the two agree at the end and the random start's rate has stopped moving (``mixed``), and the result
carries a warning otherwise. A deep Boltzmann machine's chains need thousands of sweeps: on the zoo's two-layer DBM the
random start reads 0.76, 0.93, 0.94 of the real rate after 100, 1,000, 3,000 sweeps.

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
from pfzoo.sampling import bernoulli
from pfzoo.studies.features import fit_linear_classifier, labelled_training_rows
from pfzoo.studies.mpf_dbn import class_evenness
from pfzoo.validation import check_positive_int

BY = "the sample recognition check"
PICTURE_IMAGES = 100
"""Images of each panel of the picture :func:`sample_recognition` draws (the model's first samples, real test digits)."""
DEFAULT_NUM_STEPS = 10_000
"""Gibbs sweeps of each chain by default: the zoo's models' burn-in curves level off within them (module docstring)."""
AGREEMENT_SIGMAS = 3.0
"""Two recognised shares agree when they differ by at most this many binomial standard errors of their difference."""


@dataclass(frozen=True)
class SampleRecognition:
    """Shares of images the classifier recognises, and what they were measured on.

    samples / real: the share of the model's samples and of the real test images given one class with probability ≥
    ``threshold``; ratio: samples ÷ real. class_matched_real: the real images' share in the samples' mix of classes,
    Σ_k (share of samples read as class k) · (share of the test images read as k that are recognised), and
    class_matched_ratio: samples ÷ that, which a model cannot raise by drawing mostly the easiest classes (samples
    that are nearly all ones read near the real ones' own rate). samples_confidence / real_confidence: their mean top-class probability.
    real_left_out / real_left_out_confidence / num_left_out: the recognised share and mean top-class probability of the
    training images the classifier was not fitted on (the population the model was trained on; ``None`` and 0 when it
    was fitted on all): a second scale beside the test images' (on binarised MNIST 0.765 against the test digits' 0.773,
    and blocks of 10,000 training digits read 0.750–0.777, so "the real digits' rate" is itself known to about ±0.02).
    class_total_variation: ½ Σ_k |share of samples read as class k − share of test images read as class k| (0: the
    samples cover the classes as the test images do; 0.9: all one class). pixels_accuracy: the classifier's accuracy on
    the labelled test images (its competence). curve: the burn-in curve, one ``{"sweeps", "from_random", "from_data"}``
    per mark (the recognised shares of the chains from random states and from test digits after that many sweeps; the
    last mark is ``num_steps``, its ``from_random`` is ``samples``). mixed: the two starts agree at the end and the
    random start's share moved by less than :data:`AGREEMENT_SIGMAS` standard errors since the mark before; warning:
    why not, in one line (``None`` when mixed).
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
    real_left_out: float | None
    real_left_out_confidence: float | None
    num_left_out: int
    num_samples: int
    num_steps: int
    num_train: int
    num_test: int
    threshold: float
    C: float
    max_iter: int
    converged: bool
    curve: list[dict]
    mixed: bool
    warning: str | None

    def record(self) -> dict:
        """The plain-dict form (for JSON, e.g. a model card's measurement)."""
        return asdict(self)


def sample_recognition(model, data: DataSplits, *, num_samples: int = 1000, num_steps: int = DEFAULT_NUM_STEPS, threshold: float = 0.9,
                       num_train: int | None = 20_000, C: float = 1.0, max_iter: int = 300,
                       generator: torch.Generator | None = None, picture: str | Path | None = None) -> SampleRecognition:
    """The classifier's reading of ``model``'s samples against its reading of ``data``'s test images (module docstring).

    ``data``: labelled binary images of the model's width (train ``[N, V]`` with ``train_labels``, test ``[M, V]`` with
    ``test_labels``). ``num_train``: fit on that many training rows drawn without replacement by ``generator`` (all when
    ``None``). ``generator`` then also drives the chains: ``num_samples`` from uniformly random images and as many from
    test images drawn at random, ``num_steps`` sweeps each. ``picture``: also save there a PNG of the first
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
    train, labels, left_out = labelled_training_rows(data, num_train, C=C, max_iter=max_iter, by=BY, generator=generator)
    if train.shape[1] != model.num_visible:
        raise ValueError(f"data has {train.shape[1]} columns but the model has {model.num_visible} visible units")
    classifier, converged = fit_linear_classifier(train.double(), labels, C=C, max_iter=max_iter)

    def read(images: torch.Tensor) -> torch.Tensor:  # [N, V] → the classifier's class probabilities [N, K]
        return torch.from_numpy(classifier.predict_proba(images.detach().double().cpu().numpy()))

    def recognised_share(probabilities: torch.Tensor) -> float:  # [N, K] → the share with a top class ≥ threshold
        return float((probabilities.max(1).values >= threshold).double().mean())

    marks = burn_in_marks(num_steps)
    test = data.test.to(device=model.device, dtype=model.dtype)
    random_starts = bernoulli(torch.full((num_samples, model.num_visible), 0.5, device=model.device, dtype=model.dtype), generator=generator)
    data_starts = test[torch.randint(test.shape[0], (num_samples,), generator=generator, device=test.device)]
    from_random = visible_draws(model, random_starts, marks, generator)
    random_reads = {mark: read(images) for mark, images in from_random.items()}
    data_reads = {mark: read(images) for mark, images in visible_draws(model, data_starts, marks, generator).items()}
    curve = [{"sweeps": mark, "from_random": recognised_share(random_reads[mark]), "from_data": recognised_share(data_reads[mark])}
             for mark in marks]
    samples, drawn = from_random[num_steps], random_reads[num_steps]
    real = read(data.test)
    real_top, real_class = real.max(1)
    drawn_top, drawn_class = drawn.max(1)
    classes = real.shape[1]
    real_share = torch.bincount(real_class, minlength=classes).double() / real_class.numel()
    real_rate, drawn_rate = float((real_top >= threshold).double().mean()), float((drawn_top >= threshold).double().mean())
    matched_rate = class_matched_rate(real_class, real_top >= threshold, drawn_class, classes)
    accuracy = float((torch.from_numpy(classifier.classes_)[real_class] == data.test_labels.cpu()).double().mean())
    left_out_top = read(left_out).max(1).values if left_out.shape[0] else None
    warning = mixing_warning(curve, num_samples)
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
                             real_left_out=None if left_out_top is None else float((left_out_top >= threshold).double().mean()),
                             real_left_out_confidence=None if left_out_top is None else float(left_out_top.mean()), num_left_out=left_out.shape[0],
                             num_samples=num_samples, num_steps=num_steps, num_train=train.shape[0], num_test=data.test.shape[0],
                             threshold=float(threshold), C=float(C), max_iter=max_iter, converged=converged,
                             curve=curve, mixed=warning is None, warning=warning)


def burn_in_marks(num_steps: int) -> list[int]:
    """The sweeps after which the burn-in curve reads the chains: 10, 30, 100, 300, … below ``num_steps``, then ``num_steps``."""
    return sorted(mark for power in range(1, len(str(num_steps)) + 1) for mark in (10**power, 3 * 10**power) if mark < num_steps) + [num_steps]


@torch.no_grad()
def visible_draws(model, starts: torch.Tensor, marks: list[int], generator: torch.Generator | None) -> dict[int, torch.Tensor]:
    """``{mark: v [C, V]}``: the visible draws ``v ~ p(v | h¹)`` of the Gibbs chains through the first hidden layer started
    at ``starts [C, V]`` (``model.hidden_chain``), after each of the ``marks`` (increasing) sweeps."""
    chain = model.hidden_chain(starts, generator=generator)
    draws = {}
    for sweep in range(1, marks[-1] + 1):
        hidden = next(chain)
        if sweep in marks:
            draws[sweep] = bernoulli(torch.sigmoid(model.visible_logits(hidden)), generator=generator)
    return draws


def mixing_warning(curve: list[dict], num_chains: int) -> str | None:
    """Why the chains of a burn-in ``curve`` (:func:`sample_recognition`'s, ``num_chains`` from each start) are not yet
    the model's samples, in one line, or ``None``: the starts must agree at the last mark and the random start's share
    must have moved by at most :data:`AGREEMENT_SIGMAS` binomial standard errors since the mark before."""
    last = curve[-1]
    if not agree(last["from_random"], last["from_data"], num_chains):
        return (f"the chains from random states and from test digits still disagree after {last['sweeps']:,} sweeps "
                f"(recognised {last['from_random']:.3f} against {last['from_data']:.3f}): the samples are not yet the model's; "
                "raise num_steps")
    if len(curve) > 1 and not agree(curve[-2]["from_random"], last["from_random"], num_chains):
        return (f"the chains from random states still move between {curve[-2]['sweeps']:,} and {last['sweeps']:,} sweeps "
                f"(recognised {curve[-2]['from_random']:.3f}, then {last['from_random']:.3f}): raise num_steps")
    return None


def agree(first: float, second: float, count: int) -> bool:
    """Whether two shares of ``count`` images each differ by at most :data:`AGREEMENT_SIGMAS` standard errors of the
    difference of independent binomial shares (at least one image's worth)."""
    spread = math.sqrt((first * (1 - first) + second * (1 - second)) / count)
    return abs(first - second) <= max(AGREEMENT_SIGMAS * spread, 1.0 / count)


def class_matched_rate(real_class: torch.Tensor, real_recognised: torch.Tensor, drawn_class: torch.Tensor, classes: int) -> float:
    """The real images' recognised share reweighted to the samples' classes: Σ_k q_k r_k with q_k the share of the
    samples ``drawn_class [S]`` read as class k and r_k the recognised share ``real_recognised [M]`` (bool) of the real
    images ``real_class [M]`` read as k (a class no real image is read as counts as never recognised)."""
    read_as = torch.bincount(real_class, minlength=classes).double()
    recognised = torch.bincount(real_class, weights=real_recognised.double(), minlength=classes)
    per_class = torch.where(read_as > 0, recognised / read_as.clamp(min=1), torch.zeros_like(read_as))
    drawn_share = torch.bincount(drawn_class, minlength=classes).double() / drawn_class.numel()
    return float((drawn_share * per_class).sum())
