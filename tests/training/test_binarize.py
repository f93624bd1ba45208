"""trainer.binarize: every minibatch a fresh Bernoulli draw of probability rows, everything else one fixed draw; a
GreedyTrainer hands its upper layers the posterior probabilities; runs resume bit for bit; bad input refused."""

import math

import pytest
import torch

from pfzoo.data import DataSplits
from pfzoo.models import DBN, RBM, Gaussian
from pfzoo.training import CD, GreedyTrainer, Trainer
from pfzoo.training.fit_data import fixed_draws
from pfzoo.training.objective import Objective


class Recorder(Objective):
    """Records every minibatch (by its row numbers) and every ``prepare``'s training rows; its loss is 0 with a gradient."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.prepared: list[torch.Tensor] = []

    def prepare(self, model, train, *, generator=None) -> bool:
        self.prepared.append(train.clone())
        return False

    def loss(self, model, batch, *, generator=None, indices=None):
        self.batches.append((indices.clone(), batch.clone()))
        return (model.visible_bias * 0).sum()


def probability_rows(num_rows: int = 400) -> torch.Tensor:
    """``[N, 6]`` rows whose columns hold probabilities 0.05 … 0.95 (skewed columns included), every row alike."""
    return torch.tensor([0.05, 0.2, 0.5, 0.7, 0.9, 0.95], dtype=torch.float64).expand(num_rows, 6).clone()


def test_minibatches_are_fresh_draws_and_prepare_reads_one_fixed_draw(tmp_path):
    probs = probability_rows()
    recorder = Recorder()
    trainer = Trainer(recorder, run_dir=tmp_path, epochs=4, batch_size=50, binarize=True, progress=False, seed=3)
    trainer.fit(RBM(6, 3).double(), probs)
    draws = torch.zeros(4, *probs.shape, dtype=torch.float64)  # [epoch, row, unit]
    for number, (rows, batch) in enumerate(recorder.batches):
        assert set(batch.unique().tolist()) <= {0.0, 1.0}
        draws[number // 8, rows] = batch
    # each unit's draws over 4 × 400 rows average to its probability (binomial stderr, 4.5 of them: false failure < 1e-5)
    mean, p = draws.mean(dim=(0, 1)), probs[0]
    assert ((mean - p).abs() <= 4.5 * (p * (1 - p) / 1600).sqrt()).all(), (mean, p)
    # a row is drawn afresh every epoch: two epochs' draws of a unit differ with probability 2p(1 − p) (0 for a fixed draw)
    changed = (draws[0] != draws[1]).double().mean(0)
    expected = 2 * p * (1 - p)
    assert ((changed - expected).abs() <= 4.5 * (expected * (1 - expected) / 400).sqrt()).all(), (changed, expected)
    # prepare (PCD's chains, MPF's θ_old ...) reads one binary draw, the same at every epoch
    assert len(recorder.prepared) == 4 and all(torch.equal(x, recorder.prepared[0]) for x in recorder.prepared)
    assert torch.equal(recorder.prepared[0], fixed_draws({"train": probs}, 3)["train"])


def test_binary_rows_are_unchanged_by_binarize(tmp_path):
    data = torch.bernoulli(torch.full((200, 6), 0.4, dtype=torch.float64), generator=torch.Generator().manual_seed(0))
    recorder = Recorder()
    Trainer(recorder, run_dir=tmp_path, epochs=1, batch_size=50, binarize=True, progress=False).fit(RBM(6, 3).double(), data)
    for rows, batch in recorder.batches:
        assert torch.equal(batch, data[rows])


def test_binarized_run_resumes_bit_for_bit(tmp_path):
    probs = torch.rand(300, 8, generator=torch.Generator().manual_seed(1))
    splits = DataSplits("probs", train=probs[:200], test=probs[200:])
    settings = dict(epochs=3, batch_size=50, binarize=True, progress=False, seed=5)
    straight = RBM(8, 4, generator=torch.Generator().manual_seed(2))
    Trainer(CD(k=1), run_dir=tmp_path / "straight", **settings).fit(straight, splits)
    resumed = RBM(8, 4, generator=torch.Generator().manual_seed(2))
    Trainer(CD(k=1), run_dir=tmp_path / "resumed", **{**settings, "epochs": 2}).fit(resumed, splits)
    Trainer(CD(k=1), run_dir=tmp_path / "resumed", **settings).fit(resumed, splits, resume=True)
    assert all(torch.equal(a, b) for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()))


def test_bad_input_is_refused_in_one_line(tmp_path):
    probs = probability_rows(20)
    probs[3, 2] = 1.5
    with pytest.raises(ValueError, match=r"data must hold probabilities in \[0, 1\] with trainer.binarize.*1.5 at row 3, column 2"):
        Trainer(CD(), run_dir=tmp_path / "a", epochs=1, binarize=True, progress=False).fit(RBM(6, 3).double(), probs)
    with pytest.raises(ValueError, match="binarize needs a model with binary visible units; Gaussian"):
        Trainer(Recorder(), run_dir=tmp_path / "b", epochs=1, binarize=True, progress=False).fit(Gaussian(6), probability_rows(20).float())
    with pytest.raises(ValueError, match="binarize must be True or False"):
        Trainer(CD(), run_dir=tmp_path / "c", binarize="yes")
    with pytest.raises(ValueError, match="must be binary"):  # probabilities without binarize stay refused
        Trainer(CD(), run_dir=tmp_path / "d", epochs=1, progress=False).fit(RBM(6, 3).double(), probability_rows(20))


def test_greedy_hands_the_upper_layer_posterior_probabilities(tmp_path, monkeypatch):
    data = torch.bernoulli(torch.full((120, 10), 0.3), generator=torch.Generator().manual_seed(4))
    model = DBN([10, 6, 5], generator=torch.Generator().manual_seed(0))
    seen = {}
    original = Trainer.fit

    def fit(self, rbm, rows, **kwargs):
        seen[rbm.num_visible] = rows.train.clone()
        return original(self, rbm, rows, **kwargs)

    monkeypatch.setattr(Trainer, "fit", fit)
    GreedyTrainer(CD(k=1), run_dir=tmp_path, epochs=1, batch_size=20, binarize=True, progress=False, init_from_data=True).fit(model, data)
    # binary data: the draw of layer 0's input is the data, so layer 1's rows are exactly q(h₁ = 1 | v) of the trained layer 0
    assert torch.allclose(seen[6], model.rbms[0].hidden_probs(data))
    assert ((seen[6] > 0) & (seen[6] < 1)).all() and not math.isclose(seen[6].round().sub(seen[6]).abs().max().item(), 0)
