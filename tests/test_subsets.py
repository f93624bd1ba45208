"""Honest subsets (issue 50, item 1): ``num_test=N`` and ``versus=`` measure N test rows drawn at random with the run's
seed, stated in the report, instead of the first N rows of a file that may be sorted by class."""

import pytest
import torch

from pfzoo import app, cli, zoo
from pfzoo.app.config import measured_subset
from pfzoo.data import describe_subset, digits, subset_rows


def test_subset_rows_are_distinct_sorted_seeded_and_cover_the_split():
    rows = subset_rows(360, 50, seed=0)
    assert rows.shape == (50,) and rows.unique().numel() == 50 and torch.equal(rows, rows.sort().values)
    assert torch.equal(rows, subset_rows(360, 50, seed=0)) and not torch.equal(rows, subset_rows(360, 50, seed=1))
    assert torch.equal(subset_rows(360, 50, seed=0, order="first"), torch.arange(50))
    assert torch.equal(subset_rows(360, None, seed=0), torch.arange(360)) and torch.equal(subset_rows(40, 50, seed=0), torch.arange(40))
    # every row is as likely as any other: over 400 seeds each of 10 rows is drawn 200 times on average (binomial sd 10)
    counts = torch.stack([torch.bincount(subset_rows(10, 5, seed=s), minlength=10) for s in range(400)]).sum(0)
    assert ((counts - 200).abs() < 5 * 10).all()
    assert describe_subset(50, 360, seed=3) == "50 of 360 (drawn at random, seed 3)"
    assert describe_subset(360, 360, seed=3) == "all 360" and "first 50 of 360 (file order)" in describe_subset(50, 360, seed=0, order="first")
    for kwargs, message in (({"size": 0}, "size must be a positive"), ({"size": 5, "order": "last"}, "order must be one of random, first")):
        with pytest.raises(ValueError, match=message):
            subset_rows(10, seed=0, **{"size": 5, **kwargs})


def test_a_random_subset_of_a_class_sorted_file_estimates_its_mean_and_a_prefix_does_not():
    """The digits test split sorted by class stands for binarized MNIST's test file: under the zoo's digits RBM (exact
    log-likelihoods), random subsets of 60 stay within 3 standard errors of the whole split's mean for every seed tried
    (at most 2.2), while the first 60 rows (zeros and ones only) are 2.9 standard errors off, further than any of them.
    The digits' classes differ by 4 nats at most; binarized MNIST's by far more (the data test below)."""
    data = digits()
    model = zoo.pretrained("rbm-digits")
    with torch.no_grad():
        per_row = model.log_prob(data.test[data.test_labels.argsort(stable=True)]).double()
    full, n, total = per_row.mean(), 60, per_row.numel()
    stderr = per_row.std() / n**0.5 * (1 - n / total) ** 0.5  # without replacement: the finite-population factor
    random_errors = [abs(per_row[subset_rows(total, n, seed=seed)].mean() - full) / stderr for seed in range(20)]
    prefix_error = abs(per_row[subset_rows(total, n, seed=0, order="first")].mean() - full) / stderr
    assert max(random_errors) < 3 and prefix_error > max(max(random_errors), 2.5)


def test_evaluate_measures_a_seeded_random_subset_and_says_so(tmp_path):
    result = app.evaluate(cli.compose("evaluate", [f"run_dir={tmp_path}", "progress=false", "estimator=exact", "num_test=50", "seed=4"]))
    rows = subset_rows(360, 50, seed=4)
    assert result["test_rows"] == {"num": 50, "of": 360, "order": "random", "seed": 4, "description": "50 of 360 (drawn at random, seed 4)"}
    expected = zoo.pretrained("rbm-digits").log_prob(digits().test[rows]).mean().item()
    assert result["test_log_likelihood"] == pytest.approx(expected, abs=1e-9)
    assert "over 50 of 360 (drawn at random, seed 4) digits test examples" in app.format_evaluation(result)
    test = digits().test
    first, chosen = measured_subset(test, cli.compose("evaluate", [f"run_dir={tmp_path}", "num_test=50", "test_rows=first"]))
    assert torch.equal(first, test[:50]) and chosen["description"] == "the first 50 of 360 (file order)"
    assert "test_rows=first measures the first 50 of 360 test rows in file order" in chosen["warning"]
    with pytest.raises(ValueError, match="test_rows must be one of random, first"):
        app.evaluate(cli.compose("evaluate", [f"run_dir={tmp_path}", "test_rows=last"]))


def test_versus_measures_the_same_random_subset(tmp_path):
    result = app.evaluate(cli.compose("evaluate", [f"run_dir={tmp_path}", "progress=false", "pretrained=rbm-digits", "versus=rbm-digits",
                                                   "num_test=30", "versus_samples=200", "versus_steps=1"]))
    assert result["num_test"] == 30 and result["test_rows"]["description"] == "30 of 360 (drawn at random, seed 0)"
    assert "over 30 of 360 (drawn at random, seed 0) digits test examples" in app.format_evaluation(result)


@pytest.mark.data
@pytest.mark.slow
def test_a_hundred_binarized_mnist_rows_agree_with_the_whole_test_set(shared_data_root, tmp_path):
    """What issue 50 checks from outside, on the zoo's PCD(20) RBM whose log-likelihood is exact: 100 rows are within
    three of their own standard errors of the whole test set's −142.39 (the first 100, all zeros, gave −159.58)."""
    result = app.evaluate(cli.compose("evaluate", [f"run_dir={tmp_path}", "progress=false", "pretrained=rbm-binarized_mnist-pcd-20",
                                                   "estimator=exact", "exact_max_units=0", "num_test=100",
                                                   f"data.root={shared_data_root}"]))
    whole = zoo.pretrained_weights("rbm-binarized_mnist-pcd-20").log_likelihood
    assert abs(result["test_log_likelihood"] - whole) < 3 * result["test_log_likelihood_data_stderr"]  # sd / √100
