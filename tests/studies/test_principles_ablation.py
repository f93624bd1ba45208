"""The principles ablation's measurements: scattered masks, the exact fill against enumeration of the joint (v, h), the
classifiers' validation choice, the SML margin and the rendered report."""

import itertools
import json

import pytest
import torch
from factories import random_rbm

from pfzoo.data import DataSplits
from pfzoo.studies import principles_ablation as ablation


def test_scattered_masks_hide_exactly_count_distinct_pixels_per_image_and_follow_the_generator():
    mask = ablation.scattered_mask(200, 64, 5, torch.Generator().manual_seed(0))
    assert mask.shape == (200, 64) and (mask.sum(1) == 5).all()
    assert torch.equal(mask, ablation.scattered_mask(200, 64, 5, torch.Generator().manual_seed(0)))
    share = ablation.scattered_mask(4000, 64, 5, torch.Generator().manual_seed(1)).double().mean(0) * 64 / 5
    assert 0.75 < share.min() and share.max() < 1.25  # each pixel hidden in 5/64 of the images, within ~4 standard errors
    with pytest.raises(ValueError, match="count must be between 1 and the number of pixels 64, got 0"):
        ablation.scattered_mask(3, 64, 0, torch.Generator())


def _joint_posterior_mean(model, v, mask):
    """E[v_miss | v_obs] from the enumerated joint p(v, h) ∝ exp(v·W·h + b·v + c·h), not from the free energy."""
    V, H = model.weight.shape
    states = torch.tensor(list(itertools.product((0.0, 1.0), repeat=V)), dtype=torch.float64)
    hidden = torch.tensor(list(itertools.product((0.0, 1.0), repeat=H)), dtype=torch.float64)
    W, b, c = model.weight.detach(), model.visible_bias.detach(), model.hidden_bias.detach()
    log_joint = states @ W @ hidden.T + (states @ b)[:, None] + (hidden @ c)[None, :]
    weights = torch.exp(torch.logsumexp(log_joint, dim=1))  # p(v) up to Z
    out = v.clone()
    for n in range(v.shape[0]):
        consistent = ((states == v[n]) | mask[n]).all(1)
        posterior = weights * consistent
        out[n, mask[n]] = (posterior[:, None] * states).sum(0)[mask[n]] / posterior.sum()
    return out


@pytest.mark.parametrize("count", [1, 3])
def test_the_exact_fill_is_the_posterior_mean_of_the_enumerated_joint(count):
    model = random_rbm(6, 3, scale=1.5, seed=count)
    data = (torch.rand(40, 6, generator=torch.Generator().manual_seed(1)) < 0.5).double()
    mask = ablation.scattered_mask(40, 6, count, torch.Generator().manual_seed(2))
    filled = ablation.posterior_mean_fill(model, data, mask, rows_per_batch=7)
    torch.testing.assert_close(filled, _joint_posterior_mean(model, data, mask), rtol=1e-10, atol=1e-12)
    assert torch.equal(filled[~mask], data[~mask])
    if count == 1:  # one pixel: the pseudolikelihood conditional σ(F(v with v_i = 0) − F(v with v_i = 1))
        i = mask[0].nonzero().item()
        on, off = data[:1].clone(), data[:1].clone()
        on[0, i], off[0, i] = 1.0, 0.0
        torch.testing.assert_close(filled[0, i], torch.sigmoid(model.free_energy(off) - model.free_energy(on))[0])


def test_the_exact_fill_refuses_rows_that_hide_different_numbers_of_pixels():
    mask = torch.zeros(2, 6, dtype=torch.bool)
    mask[0, 0], mask[1, :2] = True, True
    with pytest.raises(ValueError, match="same number"):
        ablation.posterior_mean_fill(random_rbm(6, 2), torch.zeros(2, 6, dtype=torch.float64), mask)


def test_the_mean_field_fill_keeps_observed_pixels_and_ends_at_a_fixed_point():
    model = random_rbm(16, 4, scale=0.3)
    data = (torch.rand(20, 16, generator=torch.Generator().manual_seed(3)) < 0.4).double()
    mask = ablation.missing_mask(20, (4, 4), {"shape": "block", "size": 2}, torch.Generator().manual_seed(0))
    filled = ablation.mean_field_fill(model, data, mask, torch.full((16,), 0.5, dtype=torch.float64), iterations=200)
    assert torch.equal(filled[~mask], data[~mask])
    torch.testing.assert_close(filled[mask], model.reconstruct(filled)[mask])
    with pytest.raises(ValueError, match="pattern must have shape"):
        ablation.missing_mask(2, (4, 4), {"shape": "ring"}, torch.Generator())


def test_the_classifier_picks_c_on_validation_and_scores_the_test_rows():
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(200) % 2
    x = torch.randn(200, 3, generator=g, dtype=torch.float64) + 8.0 * labels[:, None]  # separable classes
    for kind in ablation.CLASSIFIERS:
        result = ablation.classifier_accuracy(x[:150], labels[:150], x[150:], labels[150:], kind=kind, Cs=(0.1, 1.0),
                                              generator=torch.Generator().manual_seed(1))
        assert result["accuracy"] == 1.0 and result["C"] in (0.1, 1.0) and set(result["validation"]) == {0.1, 1.0}
    noise = torch.randn(200, 3, generator=g, dtype=torch.float64)  # features that carry no label: chance accuracy
    chance = ablation.classifier_accuracy(noise[:150], labels[:150], noise[150:], labels[150:], kind="logistic", Cs=(1.0,),
                                          generator=torch.Generator().manual_seed(1))
    assert chance["accuracy"] < 0.75
    with pytest.raises(ValueError, match="kind must be one of"):
        ablation.classifier_accuracy(x, labels, x, labels, kind="tree", Cs=(1.0,), generator=g)


def test_the_sml_margin_is_pcd_minus_the_best_other_principle():
    assert ablation.sml_margin({"PCD (SML)": 0.8, "CD-1": 0.85, "ratio matching": 0.7}) == pytest.approx(
        {"margin": -0.05, "best_other": "CD-1"})
    with pytest.raises(ValueError, match="accuracies must hold"):
        ablation.sml_margin({"CD-1": 0.8})


def test_a_payload_of_measured_models_renders_every_claim_table(tmp_path):
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(120) % 2
    images = (torch.rand(120, 16, generator=g) < 0.2 + 0.6 * labels[:, None]).double()
    data = DataSplits("toy", images[:80], images[80:], image_shape=(4, 4), train_labels=labels[:80], test_labels=labels[80:])
    patterns = ablation.fill_patterns(2, exact_up_to=2)
    assert [p["name"] for p in patterns] == ["2×2 block, mean-field", "4 scattered, mean-field", "3 scattered, mean-field",
                                             "2 scattered, mean-field",
                                             "2 scattered, exact", "1 scattered, mean-field", "1 scattered, exact"]
    names = ("CD-1", "PCD (SML)", "pseudolikelihood")
    models = {name: random_rbm(16, 3, scale=0.5, seed=i) for i, name in enumerate(names)}
    variants = {v: {n: {"lr": 0.1, **ablation.measure_model(m, data, patterns, seed=0, classifiers=v == "base")}
                    for n, m in models.items()} for v in ablation.VARIANTS}
    payload = {"dataset": "toy", "train": [80, 16], "test": [40, 16], "hidden": 3, "hidden_wide": 6, "epochs": 2,
               "epochs_factor": 5, "block": 2, "variants": variants,
               "search": {n: [{"lr": 0.1, "validation_log_likelihood": -9.0, "validation_accuracy": 0.5}] for n in names},
               "date": "2026-11-28", "machine": "test", "threads": 1, "load_average": None, "seconds": 1.0}
    payload["maximum_likelihood"] = {"evaluations": 2, "train_log_likelihood": [-10.0, -9.0],
                                     **ablation.measure_model(models["pseudolikelihood"], data, patterns, seed=0)}
    text = ablation.readme([payload], {"datasets": []})
    assert "| base: the study's setting, retrained here |" in text and "2 → 10 epochs" in text
    assert text.count("PL − SML") >= 3 and "classifier: rbf svm" in text and "| exact ML (from PL) |" in text
    numbers = ablation.summary([payload], {"datasets": []})["toy"]
    base = variants["base"]
    assert numbers["log_likelihood_pl_minus_sml"]["base"] == pytest.approx(
        base["pseudolikelihood"]["log_likelihood"] - base["PCD (SML)"]["log_likelihood"])
    assert numbers["sml_margin_seeds"]["count"] == 3 and set(numbers["sml_margin"]) >= {"base", "hidden", "classifier_rbf_svm"}
    assert numbers["maximum_likelihood_minus_pl"]["log_likelihood"] == 0.0  # the "ML" model here is the PL model itself
    (tmp_path / "results_toy.json").write_text(json.dumps(payload))
    (tmp_path / "README.md").write_text("old\n\n## Cause\n\nkept words\n")
    ablation.write_report(tmp_path, {"datasets": []})
    assert (tmp_path / "README.md").read_text().rstrip().endswith("kept words") and (tmp_path / "summary.json").is_file()


def test_the_exact_likelihood_gradient_matches_autograd_through_the_enumerated_visible_states():
    model = random_rbm(5, 3, scale=1.0, seed=4)
    data = (torch.rand(30, 5, generator=torch.Generator().manual_seed(5)) < 0.5).double()
    value, gradient = ablation.log_likelihood_and_gradient(model, data, chunk=3)  # chunks of 3 of the 8 hidden states
    states = torch.tensor(list(itertools.product((0.0, 1.0), repeat=5)), dtype=torch.float64)
    reference = -model.free_energy(data).mean() - torch.logsumexp(-model.free_energy(states), 0)  # log Z over v, not h
    reference.backward()
    assert abs(value - reference.item()) < 1e-12
    for name in ("weight", "visible_bias", "hidden_bias"):
        torch.testing.assert_close(gradient[name], getattr(model, name).grad, rtol=1e-10, atol=1e-12)


def test_maximum_likelihood_raises_the_training_likelihood_to_a_stationary_point():
    model = random_rbm(6, 2, scale=0.1, seed=6)
    data = (torch.rand(200, 6, generator=torch.Generator().manual_seed(7)) < torch.linspace(0.1, 0.9, 6)).double()
    start = max(g.abs().max().item() for g in ablation.log_likelihood_and_gradient(model, data)[1].values())
    trace = ablation.fit_maximum_likelihood(model, data, iterations=200)
    value, gradient = ablation.log_likelihood_and_gradient(model, data)
    assert trace[-1] > trace[0] + 0.01 and abs(value - max(trace)) < 1e-9
    assert max(g.abs().max().item() for g in gradient.values()) < start / 100
