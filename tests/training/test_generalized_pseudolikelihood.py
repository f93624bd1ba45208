"""Generalized pseudo-likelihood: the families' set free energies against the states' own, the loss against the set
conditionals of the enumerated joint, equality with pseudo-likelihood for sets of one unit, the index sets, the
unbiased one-random-set-per-example form, gradients, stationarity at the generating model, and the image shape handed
over by the Trainer. Recovery of known models: test_principle_consistency.py."""

import itertools
import math
from functools import partial

import pytest
import torch
from factories import all_binary_states, random_dbm, random_hopfield, random_ising, random_rbm

from pfzoo.data import DataSplits
from pfzoo.models import EnergyModel, GaussianBernoulliRBM, MissingCapability
from pfzoo.training import GeneralizedPseudoLikelihood, PseudoLikelihood, Trainer
from pfzoo.training.generalized_pseudolikelihood import block_sets, patch_sets, random_partition

random_ising = partial(random_ising, draw_dtype=None)
random_rbm = partial(random_rbm, draw_dtype=None)
FAMILIES = [partial(random_rbm, 6, 3), partial(random_ising, 6), partial(random_hopfield, 6)]
FAMILY_IDS = ["rbm", "ising", "hopfield"]


def exact_samples(model, num_samples: int, seed: int) -> torch.Tensor:
    states = all_binary_states(model.num_visible)
    probs = model.log_prob(states).exp()
    return states[torch.multinomial(probs, num_samples, replacement=True, generator=torch.Generator().manual_seed(seed))]


def joint_set_conditional(model, data: torch.Tensor, units) -> torch.Tensor:
    """``log p(x_S | x_−S)`` for each row of ``data``, from the enumerated joint: ``log p(x) − log Σ_c p(x with x_S = c)``."""
    states = all_binary_states(model.num_visible)
    log_joint = model.log_prob(states)
    index = (states * 2 ** torch.arange(model.num_visible, dtype=torch.float64)).sum(1).long()
    table = torch.empty_like(log_joint)
    table[index] = log_joint
    weights = 2 ** torch.arange(model.num_visible)
    rows = []
    for x in data:
        alternatives = []
        for bits in itertools.product([0.0, 1.0], repeat=len(units)):
            y = x.clone()
            y[list(units)] = torch.tensor(bits, dtype=y.dtype)
            alternatives.append(table[(y.long() * weights).sum()])
        rows.append(table[(x.long() * weights).sum()] - torch.logsumexp(torch.stack(alternatives), 0))
    return torch.stack(rows)


@pytest.mark.parametrize("make", [*FAMILIES, partial(random_dbm, [5, 3, 2])], ids=[*FAMILY_IDS, "dbm"])
def test_block_free_energies_are_the_free_energies_of_the_states(make):
    model = make(seed=1)
    width = model.num_visible
    v = (torch.rand(4, width, generator=torch.Generator().manual_seed(2)) < 0.5).double()
    shared = torch.tensor([[0, 3], [4, 1], [2, width - 1]])
    per_row = torch.stack([torch.randperm(width, generator=torch.Generator().manual_seed(i))[:4].reshape(2, 2) for i in range(4)])
    for blocks in (shared, per_row):
        fast = model.block_free_energies(v, blocks)
        torch.testing.assert_close(fast, EnergyModel.block_free_energies(model, v, blocks), rtol=1e-12, atol=1e-12)
        sets = blocks.expand(4, -1, -1)
        for n, k, c in [(0, 0, 0), (1, 1, 3), (3, 0, 2), (2, 1, 1)]:
            state = v[n].clone()
            state[sets[n, k]] = torch.tensor([c & 1, c >> 1], dtype=state.dtype)
            assert fast[n, k, c].item() == pytest.approx(model.free_energy(state[None]).item(), rel=1e-12)


@pytest.mark.parametrize("objective", [GeneralizedPseudoLikelihood("blocks", 2), GeneralizedPseudoLikelihood("blocks", 4),
                                       GeneralizedPseudoLikelihood("patches", 2, image_shape=[2, 3]),
                                       GeneralizedPseudoLikelihood("random", 3, seed=4)], ids=["blocks2", "blocks4", "patches", "random"])
@pytest.mark.parametrize("make", FAMILIES, ids=FAMILY_IDS)
def test_loss_is_the_sum_of_the_sets_conditionals_of_the_enumerated_joint(objective, make):
    model = make(seed=5)
    data = (torch.rand(8, 6, generator=torch.Generator().manual_seed(6)) < 0.5).double()
    sets = objective.index_sets(6)
    expected = -sum(joint_set_conditional(model, data, units.tolist()) for units in sets).mean()
    assert objective.loss(model, data).item() == pytest.approx(expected.item(), rel=1e-10)


@pytest.mark.parametrize("sets", ["blocks", "patches", "random"])
@pytest.mark.parametrize("make", FAMILIES, ids=FAMILY_IDS)
def test_sets_of_one_unit_give_pseudo_likelihood_exactly(sets, make):
    model = make(seed=7)
    data = exact_samples(model, 50, seed=8)
    shape = {"image_shape": [2, 3]} if sets == "patches" else {}
    generalized = GeneralizedPseudoLikelihood(sets, 1, **shape).loss(model, data)
    torch.testing.assert_close(generalized, PseudoLikelihood().loss(model, data), rtol=1e-13, atol=0)


@pytest.mark.parametrize("size", [1, 2])
def test_one_random_set_per_example_is_unbiased(size):
    """Each example's term, scaled by D/size, averages to D/size times the mean over all size-subsets S of
    ``−log p(x_S | x_−S)``; for size 1 that is pseudo-likelihood."""
    model = random_rbm(5, 3, seed=9)
    data = exact_samples(model, 6, seed=10)
    subsets = list(itertools.combinations(range(5), size))
    target = -(5 / size) * torch.stack([joint_set_conditional(model, data, s) for s in subsets]).mean(0)
    if size == 1:
        torch.testing.assert_close(target.mean(), PseudoLikelihood().loss(model, data))
    objective = GeneralizedPseudoLikelihood("random_per_example", size)
    g = torch.Generator().manual_seed(11)
    draws = torch.stack([objective.example_losses(model, data, generator=g) for _ in range(3000)]).detach()
    stderr = draws.std(0) / math.sqrt(draws.shape[0])
    assert ((draws.mean(0) - target).abs() < 4 * stderr).all(), (draws.mean(0), target, stderr)
    assert ((draws.mean(0) - 1.2 * target).abs() > 4 * stderr).all()  # a 20% wrong scale would show


def test_index_sets():
    torch.testing.assert_close(block_sets(7, 3, 3), torch.tensor([[0, 1, 2], [3, 4, 5], [4, 5, 6]]))
    torch.testing.assert_close(block_sets(6, 2, 1), torch.tensor([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]]))
    # 2×2 patches of a 3×4 image (row-major): every 2 columns, the last row of patches flush with the bottom
    torch.testing.assert_close(patch_sets((3, 4), 2, 2), torch.tensor([[0, 1, 4, 5], [2, 3, 6, 7], [4, 5, 8, 9], [6, 7, 10, 11]]))
    partition = random_partition(10, 4, seed=0)
    assert partition.shape == (3, 4)
    assert set(partition.flatten().tolist()) == set(range(10))
    assert all(len(set(row.tolist())) == 4 for row in partition)
    torch.testing.assert_close(partition, random_partition(10, 4, seed=0))
    assert not torch.equal(partition, random_partition(10, 4, seed=1))
    objective = GeneralizedPseudoLikelihood("patches", 2)
    with pytest.raises(ValueError, match="needs an image shape"):
        objective.index_sets(16)
    with pytest.raises(ValueError, match="fixed index sets"):
        GeneralizedPseudoLikelihood("random_per_example", 2).index_sets(6)


@pytest.mark.parametrize("objective", [GeneralizedPseudoLikelihood("blocks", 3), GeneralizedPseudoLikelihood("random_per_example", 2)],
                         ids=["blocks", "random_per_example"])
@pytest.mark.parametrize("make", FAMILIES[:2], ids=FAMILY_IDS[:2])
def test_gradient_matches_finite_differences(objective, make):
    model = make(seed=12)
    data = exact_samples(model, 30, seed=13)

    def loss():
        return objective.loss(model, data, generator=torch.Generator().manual_seed(14))

    grads = torch.autograd.grad(loss(), list(model.parameters()))
    step = 1e-6
    for parameter, grad in zip(model.parameters(), grads):
        index = (0, parameter.shape[1] - 1) if parameter.dim() == 2 else (parameter.shape[0] - 1,)
        with torch.no_grad():
            parameter[index] += step
            up = loss().item()
            parameter[index] -= 2 * step
            down = loss().item()
            parameter[index] += step
        assert grad[index].item() == pytest.approx((up - down) / (2 * step), rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("make", FAMILIES[:2], ids=FAMILY_IDS[:2])
def test_generating_model_is_a_stationary_point_of_the_expected_loss(make):
    model = make(seed=15)
    states = all_binary_states(6)
    probs = model.log_prob(states).exp().detach()
    objective = GeneralizedPseudoLikelihood("blocks", 4, stride=1)

    def largest_gradient():
        expected = (probs * objective.example_losses(model, states)).sum()
        return max(g.abs().max().item() for g in torch.autograd.grad(expected, list(model.parameters())))

    assert largest_gradient() < 1e-12
    with torch.no_grad():
        next(model.parameters()).add_(0.3)
    assert largest_gradient() > 1e-3


def test_the_trainer_hands_over_the_image_shape_and_refuses_data_without_one(tmp_path):
    truth = random_rbm(6, 3, seed=16)
    train = exact_samples(truth, 400, seed=17)
    objective = GeneralizedPseudoLikelihood("patches", 2)
    trainer = Trainer(objective, partial(torch.optim.Adam, lr=0.05), run_dir=tmp_path / "image", epochs=3, batch_size=100, progress=False)
    model = random_rbm(6, 3, scale=0.1, seed=18)
    tiles = DataSplits("tiles", train=train, test=train[:20], image_shape=(2, 3))
    with pytest.raises(ValueError, match="needs an image shape"):  # the patches are unknown before the data come
        objective.loss(model, train)
    trainer.fit(model, tiles)
    torch.testing.assert_close(objective.index_sets(6), patch_sets((2, 3), 2, 2))
    assert objective.loss(model, train).item() < objective.loss(random_rbm(6, 3, scale=0.1, seed=18), train).item()
    flat = Trainer(GeneralizedPseudoLikelihood("patches", 2), run_dir=tmp_path / "flat", epochs=1, progress=False)
    with pytest.raises(ValueError, match="needs an image shape.*the data set flat has none"):
        flat.fit(random_rbm(6, 3, seed=19), DataSplits("flat", train=train, test=train[:20]))
    assert not (tmp_path / "flat" / "metrics.jsonl").exists()  # refused before the first epoch
    given = GeneralizedPseudoLikelihood("patches", 2, image_shape=[3, 2])
    given.attach_data(DataSplits("flat", train=train, test=train[:20]))
    torch.testing.assert_close(given.index_sets(6), patch_sets((3, 2), 2, 2))


def test_bad_arguments_are_refused_naming_them():
    for kwargs, match in [({"sets": "rows"}, "sets must be one of"), ({"size": 0}, "size"), ({"sets": "blocks", "size": 13}, "at most 12"),
                          ({"sets": "patches", "size": 4}, "at most 12"), ({"sets": "random", "stride": 2}, "stride applies"),
                          ({"sets": "blocks", "image_shape": [2, 3]}, "image_shape applies"),
                          ({"sets": "patches", "image_shape": [6]}, "image_shape must be"), ({"seed": -1}, "seed")]:
        with pytest.raises(ValueError, match=match):
            GeneralizedPseudoLikelihood(**kwargs)
    model = random_ising(6)
    data = torch.zeros(3, 6, dtype=torch.float64)
    with pytest.raises(ValueError, match="more than the data's 6"):
        GeneralizedPseudoLikelihood("blocks", 7).loss(model, data)
    with pytest.raises(ValueError, match="has 8 pixels but the data have 6"):
        GeneralizedPseudoLikelihood("patches", 2, image_shape=[2, 4]).loss(model, data)
    with pytest.raises(ValueError, match="do not fit"):
        GeneralizedPseudoLikelihood("patches", 3, image_shape=[1, 12]).loss(random_ising(12), torch.zeros(3, 12, dtype=torch.float64))
    with pytest.raises(MissingCapability, match="GeneralizedPseudoLikelihood needs binary states"):
        GeneralizedPseudoLikelihood().loss(GaussianBernoulliRBM(4, 2), torch.zeros(3, 4))
