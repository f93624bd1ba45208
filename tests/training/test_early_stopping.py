"""Early stopping keeps the parameters of the best held-out score and stops the run; UpdateLimit keeps update k's."""

import math

import pytest
import torch
from factories import random_rbm

from pfzoo.data import DataSplits
from pfzoo.models import Ising
from pfzoo.training import CD, MPF, EarlyStopping, GeneralizedScoreMatching, PseudoLikelihood, Trainer, UpdateLimit, objective_score


def _data(seed=0):
    generator = torch.Generator().manual_seed(seed)
    probs = torch.linspace(0.1, 0.9, 6)
    return DataSplits("d", torch.bernoulli(probs.repeat(200, 1), generator=generator).double(),
                      torch.bernoulli(probs.repeat(100, 1), generator=generator).double())


def _snapshot(model):
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def test_the_kept_parameters_are_those_of_the_best_score_measured(tmp_path):
    data, model = _data(), random_rbm(6, 3, seed=1)
    states = {}

    def score(m):  # remembers every scored model, so the kept one can be compared with the best
        value = float(m.log_prob(data.test).mean())
        states[value] = _snapshot(m)
        return value

    stopping = EarlyStopping(score, every=3)
    Trainer(CD(k=1), run_dir=tmp_path, epochs=4, batch_size=20, progress=False, callbacks=[stopping]).fit(model, data)
    assert [update for update, _ in stopping.scores] == list(range(0, 41, 3))  # 4 epochs × 10 updates, and the start
    best = max(value for _, value in stopping.scores)
    assert stopping.best_score == best and dict(stopping.scores)[stopping.best_update] == best
    stopping.restore_best(model)
    assert all(torch.equal(model.state_dict()[name], tensor) for name, tensor in states[best].items())


def test_patience_stops_the_run_at_the_next_epoch_boundary(tmp_path):
    data, model = _data(), random_rbm(6, 3, seed=1)
    worsening = iter(range(1000, 0, -1))  # every score below the first
    stopping = EarlyStopping(lambda m: float(next(worsening)), every=1, patience=15)
    record = Trainer(CD(k=1), run_dir=tmp_path, epochs=10, batch_size=20, progress=False, callbacks=[stopping]).fit(model, data)
    assert record["epoch"] == 2 and stopping.updates == 20 and stopping.best_update == 0
    assert stopping.stop_reason().startswith("20 early-stopping scores in a row were below the best")


def test_a_diverging_loss_still_leaves_the_best_model_to_restore(tmp_path):
    # GSM on data whose units are never on has no minimum: SGD turns it non-finite, the start was the best model
    data = DataSplits("d", torch.zeros(100, 4, dtype=torch.float64), torch.zeros(10, 4, dtype=torch.float64))
    model = random_rbm(4, 2, seed=0)
    start = _snapshot(model)
    stopping = EarlyStopping(lambda m: float(m.log_prob(data.test).mean()), every=1)
    with pytest.raises(FloatingPointError):
        Trainer(GeneralizedScoreMatching(), lambda p: torch.optim.SGD(p, lr=50.0), run_dir=tmp_path, epochs=50,
                batch_size=10, progress=False, callbacks=[stopping]).fit(model, data)
    assert math.isfinite(stopping.best_score)
    stopping.restore_best(model)
    assert math.isfinite(float(model.log_prob(data.test).mean().detach()))
    assert stopping.best_update > 0 or all(torch.equal(model.state_dict()[k], v) for k, v in start.items())


def test_update_limit_keeps_update_k_and_a_resumed_run_restores_it_without_training(tmp_path):
    data = _data()
    reference = random_rbm(6, 3, seed=1)
    Trainer(CD(k=1), run_dir=tmp_path / "ref", epochs=1, batch_size=20, progress=False,
            callbacks=[UpdateLimit(7)]).fit(reference, data)  # holds update 10, the epoch's end
    model = random_rbm(6, 3, seed=1)
    limit = UpdateLimit(7)
    Trainer(CD(k=1), run_dir=tmp_path / "run", epochs=5, batch_size=20, progress=False, callbacks=[limit]).fit(model, data)
    assert limit.updates == 10  # stopped at the epoch boundary after update 7
    limit.restore(model)
    again = random_rbm(6, 3, seed=1)
    resumed = UpdateLimit(7)
    Trainer(CD(k=1), run_dir=tmp_path / "run", epochs=5, batch_size=20, progress=False,
            callbacks=[resumed]).fit(again, data, resume=True)
    resumed.restore(again)
    assert all(torch.equal(again.state_dict()[k], v) for k, v in model.state_dict().items())
    assert not torch.equal(model.weight, reference.weight)  # update 7 is not update 10


def test_update_limit_zero_is_the_starting_model_and_trains_nothing(tmp_path):
    model = random_rbm(6, 3, seed=1)
    start = _snapshot(model)
    limit = UpdateLimit(0)
    Trainer(CD(k=1), run_dir=tmp_path, epochs=5, batch_size=20, progress=False, callbacks=[limit]).fit(model, _data())
    assert limit.updates == 0 and all(torch.equal(model.state_dict()[k], v) for k, v in start.items())


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_settings_are_refused_in_one_line(bad):
    with pytest.raises(ValueError, match="every must be a positive integer"):
        EarlyStopping(lambda m: 0.0, every=bad)
    if bad != 0:
        with pytest.raises(ValueError, match="updates must be an int ≥ 0"):
            UpdateLimit(bad)


def _flipped(rows, unit):
    flipped = rows.clone()
    flipped[:, unit] = 1 - flipped[:, unit]
    return flipped


def _ising_data(seed=0, units=4, rows=60):
    generator = torch.Generator().manual_seed(seed)
    model = Ising(units, init_std=1.0, generator=generator).double()
    return model, torch.bernoulli(torch.full((rows, units), 0.4, dtype=torch.float64), generator=generator)


def test_objective_score_is_minus_the_held_out_objective_by_enumeration():
    model, rows = _ising_data()
    log_p = lambda x: model.log_prob(x).detach()  # noqa: E731  (exact: log Z by enumeration of the 16 states)
    units = range(rows.shape[1])
    # pseudo-likelihood: p(x_i | x_-i) = p(x) / (p(x) + p(x with bit i flipped)); MPF (all single flips): Σ_i √(p(x⁽ⁱ⁾)/p(x))
    log_pl = sum(log_p(rows) - torch.logaddexp(log_p(rows), log_p(_flipped(rows, i))) for i in units).mean()
    flow = sum(torch.exp((log_p(_flipped(rows, i)) - log_p(rows)) / 2) for i in units).mean()
    assert objective_score(PseudoLikelihood(), rows)(model) == pytest.approx(log_pl.item(), rel=1e-10)
    assert objective_score(MPF(), rows)(model) == pytest.approx(-flow.item(), rel=1e-10)
    with pytest.raises(ValueError, match="objective must be a pfzoo.training.Objective"):
        objective_score(lambda m, x: 0.0, rows)


def test_early_stopping_on_the_held_out_objective_keeps_the_l_bfgs_step_of_its_minimum(tmp_path):
    # 40 rows of 6 units: the unregularised fit overfits, so the held-out loss rises again before the end
    _, rows = _ising_data(seed=1, units=6, rows=80)
    train, held = rows[:40], rows[40:]
    model = Ising(6, init_std=0.0).double()
    held_out_loss = objective_score(PseudoLikelihood(), held)
    stopping = EarlyStopping(held_out_loss, every=1)
    lbfgs = lambda p: torch.optim.LBFGS(p, max_iter=2, line_search_fn="strong_wolfe")  # noqa: E731
    Trainer(PseudoLikelihood(), lbfgs, run_dir=tmp_path, epochs=30, batch_size=1000, progress=False,
            callbacks=[stopping]).fit(model, DataSplits("d", train, held))
    values = dict(stopping.scores)
    assert 0 < stopping.best_update < 30 and values[stopping.best_update] == max(values.values()) > values[30]
    stopping.restore_best(model)
    assert held_out_loss(model) == values[stopping.best_update]


def test_weight_decay_under_l_bfgs_reaches_the_penalised_minimum(tmp_path):
    # the minimiser of PL(J, b) + λ Σ_{i<j} J_ij² (weight_decay/2 · Σ C² over the symmetric matrix) has ∂PL/∂C = −λ C
    _, rows = _ising_data(seed=2, units=5, rows=50)
    decay = 0.05
    fits = {}
    for strength in (0.0, decay):
        model = Ising(5, init_std=0.0).double()
        Trainer(PseudoLikelihood(), lambda p: torch.optim.LBFGS(p, max_iter=50, tolerance_grad=1e-12, tolerance_change=1e-14,
                                                                 line_search_fn="strong_wolfe"),
                run_dir=tmp_path / str(strength), epochs=10, batch_size=1000, weight_decay=strength,
                progress=False).fit(model, DataSplits("d", rows, rows[:5]))
        fits[strength] = model
    model = fits[decay]
    gradient, = torch.autograd.grad(PseudoLikelihood().loss(model, rows), model.coupling)
    off_diagonal = ~torch.eye(5, dtype=torch.bool)
    assert torch.allclose(gradient[off_diagonal], -decay * model.coupling.detach()[off_diagonal], atol=1e-7)
    assert model.coupling.detach().norm() < 0.9 * fits[0.0].coupling.detach().norm()
