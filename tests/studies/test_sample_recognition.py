"""Samples recognised by a digit classifier (pfzoo.studies.sample_recognition): a model whose samples are the test digits
matches them exactly, blank images and an untrained RBM's noise are not recognised, the zoo's trained digits RBM is, and
chains that have not reached the model's distribution are flagged (two starts that disagree, a curve still moving),
and one-line refusals for models without hidden chains, data without labels and a threshold outside (0, 1)."""

import pytest
import torch

from pfzoo.data import DataSplits, digits
from pfzoo.models import RBM, Ising, MissingCapability
from pfzoo.studies.sample_recognition import burn_in_marks, class_matched_rate, sample_recognition


@pytest.fixture(scope="module")
def data():
    return digits()


class ReplaysImages(RBM):
    """An RBM whose Gibbs chains through the hidden layer show, at every sweep, each chain one of ``images`` (a perfect
    generator of them: a one-hot hidden state per image, ``p(v | h)`` that image exactly); with ``ramp`` a chain shows a
    blank image instead with probability 1 − sweep / ramp (chains that take ``ramp`` sweeps to reach the images), and
    with ``stick`` a chain started at one of the images shows it forever and any other start a blank (chains that never mix)."""

    def __init__(self, images: torch.Tensor, *, ramp: int = 0, stick: bool = False) -> None:
        super().__init__(images.shape[1], images.shape[0] + 1)
        self.images = torch.cat([images, images.new_zeros(1, images.shape[1])])  # the last hidden unit draws the blank
        self.ramp, self.stick = ramp, stick

    def visible_logits(self, hidden):
        return torch.where(hidden @ self.images > 0.5, torch.inf, -torch.inf)

    def hidden_chain(self, initial_visible, *, generator=None):
        rows, blank = initial_visible.shape[0], self.images.shape[0] - 1
        matches = (initial_visible[:, None, :] == self.images[None, :-1, :]).all(-1)
        started_at = torch.where(matches.any(1), matches.int().argmax(1), torch.full((rows,), blank))
        sweep = 0
        while True:
            sweep += 1
            shown = started_at if self.stick else torch.randperm(blank, generator=generator)[:rows]
            if self.ramp:
                shown = torch.where(torch.rand(rows, generator=generator) < min(1.0, sweep / self.ramp), shown, blank)
            yield torch.nn.functional.one_hot(shown, blank + 1).to(self.images.dtype)


def test_samples_that_are_the_test_digits_read_as_the_test_digits(data):
    model = ReplaysImages(data.test)
    result = sample_recognition(model, data, num_samples=data.test.shape[0], generator=torch.Generator().manual_seed(0))
    assert result.samples == pytest.approx(result.real) and result.ratio == pytest.approx(1.0)
    assert result.class_total_variation == pytest.approx(0.0, abs=1e-12)
    assert result.class_matched_real == pytest.approx(result.real) and result.class_matched_ratio == pytest.approx(1.0)
    assert result.samples_confidence == pytest.approx(result.real_confidence)
    assert 0.5 < result.real < 1.0 and result.pixels_accuracy > 0.85, result  # a linear classifier on 8 × 8 binary digits
    assert result.mixed and result.warning is None and [mark["sweeps"] for mark in result.curve] == [10, 30, 100, 300, 1000, 3000, 10000]
    assert all(mark["from_random"] == pytest.approx(result.real) == mark["from_data"] for mark in result.curve)


def test_chains_that_never_leave_their_start_are_flagged_as_not_mixed(data):
    """Chains from the test digits stay there (recognised at the real rate), chains from random states stay blank (never
    recognised): the samples are blanks, and the result says the two starts disagree."""
    result = sample_recognition(ReplaysImages(data.test, stick=True), data, num_samples=200, num_steps=30,
                                generator=torch.Generator().manual_seed(0))
    assert result.samples == 0.0 and result.curve[-1]["from_data"] > 0.5 and not result.mixed
    assert "still disagree after 30 sweeps" in result.warning and "raise num_steps" in result.warning


def test_chains_still_climbing_at_the_end_are_flagged_even_when_the_two_starts_agree(data):
    """Chains from either start show a digit with probability sweep / 1,000: both starts read alike at every mark, but
    the share triples from 100 to 300 sweeps; with 2,000 sweeps the curve is flat at the end and the samples mixed."""
    climbing = sample_recognition(ReplaysImages(data.test, ramp=1000), data, num_samples=300, num_steps=300,
                                  generator=torch.Generator().manual_seed(0))
    assert not climbing.mixed and "still move between 100 and 300 sweeps" in climbing.warning, climbing.curve
    levelled = sample_recognition(ReplaysImages(data.test, ramp=1000), data, num_samples=300, num_steps=3000,
                                  generator=torch.Generator().manual_seed(0))
    assert levelled.mixed and levelled.warning is None and levelled.ratio == pytest.approx(1.0, abs=0.15), levelled.curve


def test_burn_in_marks_run_10_30_100_300_and_end_at_the_chains_length():
    assert burn_in_marks(1) == [1] and burn_in_marks(10) == [10] and burn_in_marks(31) == [10, 30, 31]
    assert burn_in_marks(10_000) == [10, 30, 100, 300, 1000, 3000, 10_000]


def test_blank_images_and_noise_are_not_recognised_but_a_trained_rbm_is(data):
    from pfzoo import zoo

    generator = torch.Generator().manual_seed(1)
    blank = RBM.from_tensors(torch.zeros(64, 10), torch.full((64,), -20.0), torch.zeros(10))
    result = sample_recognition(blank, data, num_samples=300, num_steps=10, generator=generator)
    assert result.samples == 0.0 and result.class_total_variation > 0.7, result  # one class for every blank image
    noise = sample_recognition(RBM(64, 50, init_std=0.3, generator=torch.Generator().manual_seed(2)), data, num_samples=300,
                               num_steps=100, generator=generator)
    trained = sample_recognition(zoo.pretrained("rbm-digits"), data, num_samples=300, num_steps=1000, generator=generator)
    # measured (seed 1; the real test digits 0.647): noise 0.210 (ratio 0.32, class total variation 0.60), the trained
    # RBM 0.550 (ratio 0.85, total variation 0.42), both mixed
    assert noise.ratio < 0.5 < trained.ratio and trained.class_total_variation < noise.class_total_variation, (noise, trained)


def test_refusals_name_the_argument(data):
    rbm = RBM(64, 4)
    with pytest.raises(MissingCapability, match="sample recognition"):
        sample_recognition(Ising(64), data)
    with pytest.raises(ValueError, match="needs class labels"):
        sample_recognition(rbm, DataSplits("unlabelled", data.train, data.test))
    with pytest.raises(ValueError, match="threshold"):
        sample_recognition(rbm, data, threshold=1.0)
    with pytest.raises(ValueError, match="columns"):
        sample_recognition(RBM(65, 4), data)


def test_a_card_shows_the_measurement_in_its_own_section_not_the_log_likelihood_table():
    import json
    from pathlib import Path

    from pfzoo.zoo.cards import RECOGNITION_HEADING, RECOGNITION_METRIC, render_card, with_card_sections

    card = json.loads((Path(__file__).resolve().parents[2] / "models" / "rbm-digits" / "card.json").read_text())
    before = render_card(card).render()
    entry = {"label": "samples recognised", "metric": RECOGNITION_METRIC, "samples": 0.414, "real": 0.647, "ratio": 0.64,
             "samples_confidence": 0.786, "real_confidence": 0.884, "class_total_variation": 0.162, "pixels_accuracy": 0.928,
             "num_samples": 1000, "num_steps": 1000, "num_train": 1437, "num_test": 360, "threshold": 0.9,
             "command": "python scripts/sample_card.py"}
    card["measurements"] = [m for m in card.get("measurements") or [] if m.get("metric") != RECOGNITION_METRIC] + [entry]
    after = render_card(card).render()
    table = [line for line in after.split("## Measured log-likelihood")[1].split("\n## ")[0].splitlines() if line.startswith("| ")]
    assert "0.414 (0.64 of the real rate)" in after and f"## {RECOGNITION_HEADING}" in after and "0.414" not in "\n".join(table)
    assert with_card_sections(before, card).count(f"## {RECOGNITION_HEADING}") == 1  # a README another script rendered gains it


def test_the_picture_shows_the_first_samples_beside_test_digits_and_needs_images(data, tmp_path):
    model = ReplaysImages(data.test)
    result = sample_recognition(model, data, num_samples=30, num_steps=10, generator=torch.Generator().manual_seed(0), picture=tmp_path / "samples.png")
    assert (tmp_path / "samples.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and 0 < result.samples <= 1
    flat = DataSplits("flat", data.train, data.test, train_labels=data.train_labels, test_labels=data.test_labels)
    with pytest.raises(ValueError, match="picture=.*no image_shape; drop picture"):
        sample_recognition(model, flat, picture=tmp_path / "other.png")


def test_the_class_matched_rate_weighs_each_classs_real_rate_by_the_samples_share_of_it():
    real_class, recognised = torch.tensor([0, 0, 1, 1]), torch.tensor([True, False, True, True])  # class 0: 0.5, class 1: 1.0
    assert class_matched_rate(real_class, recognised, torch.tensor([1, 1, 1, 0]), 3) == pytest.approx(0.25 * 0.5 + 0.75 * 1.0)
    assert class_matched_rate(real_class, recognised, torch.tensor([2, 1]), 3) == pytest.approx(0.5)  # no real image reads as 2


def test_samples_of_only_the_easiest_class_read_against_that_classs_real_rate(data):
    """Samples that are the real test images the classifier reads as its most recognised class: against all the real
    digits they look better than real ones (ratio > 1), against the real digits of their own class they are exactly as
    good (class-matched ratio 1)."""
    from pfzoo.studies.features import fit_linear_classifier, labelled_training_rows

    train, labels, _ = labelled_training_rows(data, 20_000, C=1.0, max_iter=300, by="test", generator=torch.Generator().manual_seed(0))
    classifier, _ = fit_linear_classifier(train.double(), labels, C=1.0, max_iter=300)
    read = torch.from_numpy(classifier.predict_proba(data.test.double().numpy()))
    top, classes = read.max(1)
    rates = torch.stack([(top[classes == k] >= 0.9).double().mean() if (classes == k).any() else torch.tensor(0.0) for k in range(10)])
    easiest = data.test[classes == int(rates.argmax())]
    result = sample_recognition(ReplaysImages(easiest), data, num_samples=easiest.shape[0], num_steps=10, generator=torch.Generator().manual_seed(0))
    assert result.ratio > 1.0 and result.class_matched_ratio == pytest.approx(1.0), result


def test_a_card_shows_the_burn_in_curve_and_says_when_the_chains_had_not_mixed():
    from pfzoo.zoo.cards import burn_in_sentence

    curve = [{"sweeps": 100, "from_random": 0.5, "from_data": 0.7}, {"sweeps": 1000, "from_random": 0.69, "from_data": 0.7}]
    mixed = burn_in_sentence({"curve": curve, "mixed": True, "warning": None})
    assert "after 100 / 1,000 sweeps" in mixed and "at 0.500 / 0.690" in mixed and "at 0.700 / 0.700" in mixed
    assert "the samples are the model's" in mixed and "not mixed" not in mixed
    unmixed = burn_in_sentence({"curve": curve, "mixed": False, "warning": "the chains still move: raise num_steps"})
    assert "**not mixed**: the chains still move: raise num_steps." in unmixed and "the samples are the model's" not in unmixed


def test_samples_that_are_the_training_digits_the_classifier_never_saw_read_at_their_rate(data):
    """The second scale: the classifier is fitted on ``num_train`` of the training digits and reads the others (the
    population a model learns from); a model replaying exactly those left-out digits has its samples read at their rate
    (ratio 1 against them), which differs from the test digits' (the scale's own spread). Fitted on every training digit,
    there is no such scale (``None``)."""
    from pfzoo.studies.features import labelled_training_rows

    generator = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    fitted, _, left_out = labelled_training_rows(data, 600, C=1.0, max_iter=300, by="test", generator=generator())
    assert fitted.shape[0] + left_out.shape[0] == data.train.shape[0]
    rows = lambda images: sorted(map(tuple, images.tolist()))  # noqa: E731
    assert rows(torch.cat([fitted, left_out])) == rows(data.train)  # every training digit once: fitted or left out
    result = sample_recognition(ReplaysImages(left_out), data, num_samples=left_out.shape[0], num_train=600, num_steps=10, generator=generator())
    assert result.num_left_out == left_out.shape[0] and result.samples == pytest.approx(result.real_left_out)
    assert result.samples_confidence == pytest.approx(result.real_left_out_confidence)
    assert result.real_left_out != result.real
    everything = sample_recognition(ReplaysImages(left_out), data, num_samples=10, num_train=None, num_steps=10, generator=generator())
    assert everything.real_left_out is None and everything.num_left_out == 0


def test_a_card_shows_the_left_out_training_digits_rate_when_measured():
    from pfzoo.zoo.cards import _recognition_section

    measurement = {"num_samples": 1000, "num_steps": 10000, "samples": 0.74, "ratio": 0.95, "samples_confidence": 0.9,
                   "class_total_variation": 0.03, "num_test": 10000, "real": 0.78, "real_confidence": 0.92, "threshold": 0.9,
                   "num_train": 20000, "pixels_accuracy": 0.89}
    old = _recognition_section([measurement])
    assert "not fitted on" not in old
    new = _recognition_section([{**measurement, "real_left_out": 0.76, "real_left_out_confidence": 0.91, "num_left_out": 40000}])
    assert "| the 40,000 training digits the classifier was not fitted on | 0.760 | 0.910 | — |" in new
    assert "are at 0.97 of their rate" in new  # 0.74 / 0.76
