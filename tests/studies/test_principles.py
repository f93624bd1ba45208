"""The inductive-principles study's measurements: masks, fill-in, the search and the orderings."""

import math

import torch
from factories import random_rbm

from pfzoo.data import DataSplits
from pfzoo.studies import principles as study


def test_hidden_blocks_hide_one_square_per_image():
    mask = study.hidden_blocks(50, (8, 8), 3, torch.Generator().manual_seed(0))
    assert mask.shape == (50, 64) and (mask.sum(1) == 9).all()
    rows, cols = mask.reshape(50, 8, 8).nonzero(as_tuple=True)[1:]
    square = mask.reshape(50, 8, 8)[0].nonzero()
    assert (square.max(0).values - square.min(0).values).tolist() == [2, 2]  # contiguous 3 × 3
    assert rows.max() <= 7 and cols.max() <= 7


def test_a_model_that_knows_the_pixels_fills_them_in_and_a_blind_one_does_not():
    # an RBM with no weights and huge biases toward the (constant) true image reconstructs it exactly
    image = (torch.arange(16) % 3 == 0).double()
    data = image.repeat(10, 1)
    sharp = random_rbm(16, 2, scale=0.0, bias_scale=0.0)
    with torch.no_grad():
        sharp.visible_bias.copy_(20 * (2 * image - 1))
    blind = random_rbm(16, 2, scale=0.0, bias_scale=0.0)  # σ(0) = ½ everywhere
    fill = torch.full((16,), 0.5, dtype=torch.float64)
    g = torch.Generator().manual_seed(1)
    assert study.denoising_error(sharp, data, fill, (4, 4), block=2, generator=g) < 1e-12
    assert math.isclose(study.denoising_error(blind, data, fill, (4, 4), block=2, generator=g), 0.25)


def test_the_search_keeps_every_point_and_picks_the_best_validation_likelihood():
    data = DataSplits("d", torch.bernoulli(torch.full((30, 5), 0.3), generator=torch.Generator().manual_seed(0)).double(),
                      torch.bernoulli(torch.full((10, 5), 0.3), generator=torch.Generator().manual_seed(1)).double())
    models = {"a": random_rbm(5, 2, scale=3.0, seed=1), "b": random_rbm(5, 2, scale=0.1, seed=2)}

    def train(overrides, split):
        if overrides == ["nan"]:
            raise FloatingPointError("loss is nan")
        return models[overrides[0]], 1.0, {"updates": len(overrides[0])}

    best, records = study.search_setting(train, [["a"], ["b"], ["nan"]], data)
    scores = {record["overrides"][0]: record["validation_log_likelihood"] for record in records}
    assert best == [max(("a", "b"), key=scores.get)] and scores["nan"] == -math.inf and len(records) == 3
    assert records[0]["updates"] == 1 and "updates" not in records[2]  # the training's details join the record


def test_validation_split_partitions_the_training_rows_with_their_labels():
    train = torch.arange(40.0).reshape(20, 2)
    data = DataSplits("d", train, train[:3], train_labels=torch.arange(20), test_labels=torch.arange(3))
    split = study.validation_split(data, 0.25, torch.Generator().manual_seed(0))
    assert split.test.shape == (5, 2) and split.train.shape == (15, 2)
    assert sorted(torch.cat([split.train[:, 0], split.test[:, 0]]).tolist()) == train[:, 0].tolist()
    assert torch.equal(split.train_labels, (split.train[:, 0] / 2).long())


def test_an_early_stopped_row_names_its_optimizer_and_update():
    row = study.PrincipleResult("GSM", "generalized_score_matching", ["trainer.optimizer.lr=0.001"], -24.5, 0.1, 0.8, 1.0,
                                optimizer="Adam", updates=0)
    assert "(Adam), early-stopped at update 0 (the starting model)" in study.table([row])[-1]


def test_orderings_rank_each_column_its_own_way():
    rows = [study.PrincipleResult("A", "a", [], -20.0, 0.10, 0.9, 1.0), study.PrincipleResult("B", "b", [], -19.0, 0.20, None, 1.0)]
    ranked = study.orderings(rows)
    assert ranked == {"test log-likelihood": ["B", "A"], "classification": ["A"], "denoising": ["A", "B"]}
    assert any("| A |" in line for line in study.table(rows))


def test_a_principle_that_diverges_everywhere_is_a_row_that_says_so():
    data = DataSplits("d", torch.ones(4, 3), torch.ones(2, 3))

    def train(overrides, split):
        raise FloatingPointError("loss is nan")

    best, records = study.search_setting(train, [["lr=0.1"], ["lr=0.3"]], data)
    assert best is None
    row = study.failed("GSM", "generalized_score_matching", records)
    assert "non-finite at every setting tried (lr=0.1, lr=0.3)" in study.table([row])[-1]
    assert study.orderings([row]) == {"test log-likelihood": [], "classification": [], "denoising": []}
