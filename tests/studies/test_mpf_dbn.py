"""pfzoo.studies.mpf_dbn (thesis Fig. 3.3): the class-evenness numbers and the samples picture."""

import math

import pytest
import torch

from pfzoo.studies.mpf_dbn import class_evenness, samples_figure


def test_even_classes_have_full_entropy_and_one_class_none():
    uniform = torch.full((10,), 0.1, dtype=torch.float64)
    even = class_evenness(torch.arange(10).repeat(7), uniform)
    assert even["entropy"] == pytest.approx(math.log(10)) and even["total_variation"] == pytest.approx(0.0, abs=1e-12)
    assert even["counts"] == [7] * 10
    collapsed = class_evenness(torch.full((50,), 3), uniform)
    assert collapsed["entropy"] == 0.0 and collapsed["total_variation"] == pytest.approx(0.9)
    assert collapsed["commonest_share"] == 1.0 and collapsed["rarest_share"] == 0.0


def test_the_picture_has_a_panel_per_model_titled_with_its_class_counts():
    images = {"MPF": torch.rand(20, 784), "CD-1": torch.rand(20, 784)}
    classes = {"MPF": torch.arange(20) % 10, "CD-1": torch.zeros(20, dtype=torch.long)}
    figure = samples_figure(images, classes, (28, 28), per_row=5, rows=2)
    titles = [axes.get_title() for axes in figure.axes]
    assert len(titles) == 2 and "0:2 1:2" in titles[0] and "0:20 1:0" in titles[1]


def test_the_sweep_ablation_reads_each_dbns_samples_after_each_number_of_sweeps():
    from pfzoo.models import DBN
    from pfzoo.studies.mpf_dbn import DigitClassifier, sweep_ablation

    g = torch.Generator().manual_seed(0)
    images, labels = (torch.rand(200, 6, generator=g) > 0.5).float(), torch.arange(200) % 10
    classifier = DigitClassifier(images, labels, max_iter=50)
    models = {"a": DBN([6, 4, 3], generator=torch.Generator().manual_seed(1)), "b": DBN([6, 4, 3], generator=torch.Generator().manual_seed(2))}
    rows = sweep_ablation(models, classifier, torch.full((10,), 0.1, dtype=torch.float64), [1, 5], num_samples=40, seed=3)
    assert [row["sweeps"] for row in rows] == [1, 5] and all(sum(row[name]["counts"]) == 40 for row in rows for name in models)
    again = sweep_ablation(models, classifier, torch.full((10,), 0.1, dtype=torch.float64), [1, 5], num_samples=40, seed=3)
    assert again == rows  # seeded
