"""Thesis Fig. 3.3 (Sohl-Dickstein 2012, §3.2): a four-layer DBN trained greedily by MPF and by CD-1 on 10,000 MNIST
digits, compared by their samples. The thesis judges the samples by eye ("the uneven distribution of digit
occurrences suggests that CD-1 has learned a less representative model"); here a digit classifier trained on labelled
MNIST reads each sample's class, so the unevenness is a number: the class histogram's entropy against log 10 and its
total-variation distance from the training digits' class frequencies.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from matplotlib.figure import Figure


class DigitClassifier:
    """Multinomial logistic regression (scikit-learn, L-BFGS) on binary MNIST images ``[N, 784]`` with their labels."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, *, max_iter: int = 200) -> None:
        from sklearn.linear_model import LogisticRegression  # imported here: scikit-learn is slow to import

        self.model = LogisticRegression(max_iter=max_iter).fit(images.numpy(), labels.numpy())

    def accuracy(self, images: torch.Tensor, labels: torch.Tensor) -> float:
        return float((self.predict(images) == labels).double().mean())

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.model.predict(images.numpy()))


def class_evenness(classes: torch.Tensor, reference: torch.Tensor, num_classes: int = 10) -> dict[str, Any]:
    """The class histogram of ``classes [N]`` against ``reference`` frequencies ``[num_classes]``: ``counts``, its
    ``entropy`` (nats; log 10 = 2.303 when even), ``total_variation`` ½ Σ |f − reference| and the rarest and commonest
    classes' shares."""
    counts = torch.bincount(classes.long(), minlength=num_classes).double()
    share = counts / counts.sum()
    positive = share[share > 0]
    return {"counts": counts.long().tolist(), "entropy": float(-(positive * positive.log()).sum()) + 0.0, "max_entropy": math.log(num_classes),
            "total_variation": float(0.5 * (share - reference.double()).abs().sum()),
            "rarest_share": float(share.min()), "commonest_share": float(share.max())}


def visible_samples(model, num_samples: int, sweeps: int, *, seed: int) -> torch.Tensor:
    """``p(v | h¹) [num_samples, V]`` of a DBN's samples: ``sweeps`` block-Gibbs sweeps in its top RBM from random states,
    then down the stack (:meth:`~pfzoo.models.DBN.sample_layers`), the generator seeded with ``seed``."""
    layers = model.sample_layers(num_samples, sweeps, generator=torch.Generator().manual_seed(seed))
    return model.rbms[0].visible_probs(layers[1]).detach()


def sweep_ablation(models: dict[str, Any], classifier: DigitClassifier, reference: torch.Tensor, sweeps: list[int], *, num_samples: int,
                   seed: int) -> list[dict[str, Any]]:
    """How the samples' class evenness depends on the top-RBM sweeps before them: for each count in ``sweeps`` and each
    DBN of ``models``, :func:`class_evenness` of ``num_samples`` samples (rows ``{sweeps, <name>: evenness}``)."""
    return [{"sweeps": count, **{name: class_evenness(classifier.predict((visible_samples(model, num_samples, count, seed=seed) > 0.5).float()),
                                                      reference) for name, model in models.items()}} for count in sweeps]


def samples_figure(samples: dict[str, torch.Tensor], classes: dict[str, torch.Tensor], image_shape: tuple[int, int], *, per_row: int = 10,
                   rows: int = 6) -> Figure:
    """The thesis's panels (b) and (c): ``rows × per_row`` samples of each DBN (``samples[name] [N, 784]``, probabilities
    or binary), each titled with the classifier's reading of all ``N`` samples' classes."""
    figure = Figure(figsize=(4.2 * len(samples), 4.2 * rows / per_row + 0.7), layout="constrained")
    for index, (name, images) in enumerate(samples.items()):
        axes = figure.add_subplot(1, len(samples), index + 1)
        grid = images[: rows * per_row].reshape(rows, per_row, *image_shape).permute(0, 2, 1, 3).reshape(rows * image_shape[0], per_row * image_shape[1])
        axes.imshow(grid.numpy(), cmap="gray", vmin=0, vmax=1)
        counts = torch.bincount(classes[name].long(), minlength=10).tolist()
        axes.set_title(f"{name}: classes of {images.shape[0]} samples\n" + " ".join(f"{d}:{c}" for d, c in enumerate(counts)), fontsize=8)
        axes.set_axis_off()
    return figure
