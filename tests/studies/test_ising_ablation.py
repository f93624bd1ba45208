"""The Table 3.1 ablation's error conventions, stopping rule, zero-field surgery, masked fit and CD schedule, against hand
computations and enumeration; and its script end to end at a tiny size."""

import itertools
import json
import math
import sys
from pathlib import Path

import pytest
import torch
from script_modules import load_script

from pfzoo.data import spin_glass_model
from pfzoo.models import Ising
from pfzoo.studies.ising_ablation import (
    coupling_errors,
    correlation_errors,
    field_error,
    lattice_mask,
    stopping_epoch,
    thesis_matrix,
    train_cd_linear,
    with_zero_field,
)

REPO = Path(__file__).resolve().parents[2]


def _pair_moments(model: Ising) -> torch.Tensor:
    """Exact ⟨x_i x_j⟩ [D, D] of a small model by enumeration."""
    states = torch.tensor(list(itertools.product([0.0, 1.0], repeat=model.num_units)), dtype=torch.float64)
    weights = torch.softmax(-model.double().energy(states), 0)
    model.float()
    return states.T @ (weights[:, None] * states)


def test_thesis_matrix_gives_our_energy_as_x_transpose_j_prime_x():
    g = torch.Generator().manual_seed(1)
    model = Ising(6, init_std=1.0, generator=g)
    with torch.no_grad():
        model.bias.copy_(torch.randn(6, generator=g))
    states = torch.tensor(list(itertools.product([0.0, 1.0], repeat=6)))
    prime = thesis_matrix(model)
    assert torch.allclose(((states @ prime) * states).sum(1), model.energy(states).detach(), atol=1e-5)


def test_coupling_errors_by_hand_in_every_convention():
    truth = spin_glass_model(side=3, coupling_std=1.0, seed=2, zero_field=True)
    g = torch.Generator().manual_seed(5)
    model = Ising(9, init_std=0.5, generator=g)
    with torch.no_grad():
        model.bias.copy_(torch.randn(9, generator=g))
    learned, true = model.symmetric_coupling.detach().double(), truth.symmetric_coupling.detach().double()
    pairs = list(itertools.combinations(range(9), 2))
    edges = [(i, j) for i, j in pairs if true[i, j] != 0]
    assert len(edges) == 18  # 2 side² edges of a periodic 3×3 lattice
    errors = coupling_errors(model, truth)
    assert errors["pairs"] == pytest.approx(sum((learned[i, j] - true[i, j]).item() ** 2 for i, j in pairs) / 36, rel=1e-9)
    assert errors["edges"] == pytest.approx(sum((learned[i, j] - true[i, j]).item() ** 2 for i, j in edges) / 18, rel=1e-9)
    assert errors["thesis_pairs"] == pytest.approx(errors["pairs"] / 4)
    bias_part = (model.bias.detach().double() - truth.bias.detach().double()).pow(2).sum().item()
    assert errors["thesis_matrix"] == pytest.approx((2 * 36 * errors["pairs"] / 4 + bias_part) / 81, rel=1e-9)


def test_correlation_errors_in_spins_and_covariances_by_hand():
    g = torch.Generator().manual_seed(3)
    a, b = (torch.rand(50, 4, generator=g) < 0.5).float(), (torch.rand(70, 4, generator=g) < 0.3).float()
    errors = correlation_errors(a, b)
    sa, sb = 2 * a.double() - 1, 2 * b.double() - 1
    pairs = list(itertools.combinations(range(4), 2))
    spins = sum(((sa[:, i] * sa[:, j]).mean() - (sb[:, i] * sb[:, j]).mean()).item() ** 2 for i, j in pairs) / 6
    cov = lambda x, i, j: (x[:, i] * x[:, j]).mean() - x[:, i].mean() * x[:, j].mean()  # noqa: E731
    covariances = sum((cov(a.double(), i, j) - cov(b.double(), i, j)).item() ** 2 for i, j in pairs) / 6
    assert errors["spin_moments"] == pytest.approx(spins, rel=1e-9)
    assert errors["covariances"] == pytest.approx(covariances, rel=1e-9)
    assert correlation_errors(a, a) == {"moments": 0.0, "spin_moments": 0.0, "covariances": 0.0}


def test_stopping_epoch_is_the_first_epoch_the_trainers_rule_holds():
    losses = [10.0, 5.0, 4.0, 3.9999, 3.99989, 3.99989]
    assert stopping_epoch(losses, 1e-4) == 4  # |3.9999 − 4| = 1e-4 ≤ 1e-4 · 4
    assert stopping_epoch(losses, 1e-6) == 6
    assert stopping_epoch([2.0, 1.0], 1e-9) == 2  # never holds: the last epoch
    with pytest.raises(ValueError, match="tolerance"):
        stopping_epoch(losses, 0.0)


def test_with_zero_field_keeps_the_couplings_and_makes_the_model_flip_symmetric():
    g = torch.Generator().manual_seed(0)
    model = Ising(5, init_std=1.0, generator=g)
    with torch.no_grad():
        model.bias.copy_(torch.randn(5, generator=g))
    zero = with_zero_field(model)
    assert torch.equal(zero.symmetric_coupling, model.symmetric_coupling.detach())
    assert zero.spin_parameters()[1].abs().max().item() < 1e-6
    moments = _pair_moments(zero)  # p(x) = p(1 − x): every mean is ½
    assert torch.allclose(moments.diagonal(), torch.full((5,), 0.5, dtype=torch.float64), atol=1e-9)
    assert field_error(zero, zero) == 0.0 and field_error(model, zero) > 0.1


def test_lattice_mask_marks_the_lattice_edges():
    truth = spin_glass_model(side=4, coupling_std=1.0, seed=0)
    mask = lattice_mask(truth)
    assert mask.sum().item() == 2 * 32 and torch.equal(mask, mask.T) and not mask.diagonal().any()


def test_cd_with_the_linear_schedule_moves_the_couplings_toward_the_truth_and_zero_rate_moves_nothing():
    """CD-1 on exact samples of a warm 3×3 glass (enumerated): the error in the pair moments of the fit falls far below the
    independent-units start's; a schedule of rate 0 leaves the model as it was."""
    truth = spin_glass_model(side=3, coupling_std=2.0, seed=4)
    states = torch.tensor(list(itertools.product([0.0, 1.0], repeat=9)))
    weights = torch.softmax(-truth.energy(states).detach().double(), 0)
    g = torch.Generator().manual_seed(0)
    train = states[torch.multinomial(weights, 4000, replacement=True, generator=g)]
    still = Ising(9, init_std=0.0)
    still.init_from_data(train)
    before = still.bias.detach().clone()
    trace = train_cd_linear(still, train, k=1, lr_start=0.0, lr_end=0.0, epochs=2, batch_size=100, generator=g, on_epoch=lambda m: 0.0)
    assert len(trace) == 2 and torch.equal(still.bias.detach(), before)
    model = Ising(9, init_std=0.0)
    model.init_from_data(train)
    start = (_pair_moments(model) - _pair_moments(truth)).pow(2).mean().item()
    train_cd_linear(model, train, k=1, lr_start=0.5, lr_end=0.05, epochs=8, batch_size=100, generator=g, on_epoch=lambda m: 0.0)
    assert (_pair_moments(model) - _pair_moments(truth)).pow(2).mean().item() < 0.25 * start


def test_ising_ablation_script_runs_its_rows_and_resumes(tmp_path, monkeypatch):
    """A tiny run of one row of each kind: each has its learners' numbers, the lattice-only fit leaves the non-edges at exactly 0
    error, the derived rows read the baseline's fit, a second run refits nothing, and the README renders."""
    script = load_script(REPO / "scripts" / "ising_ablation.py")
    args = ["ising_ablation.py", "--side", "3", "--num-samples", "300", "--burn-in", "10", "--max-lbfgs-steps", "3",
            "--cd-seconds", "0.2", "--linear-epochs", "1", "--model-samples", "200", "--out", str(tmp_path / "ablation"), "--runs", str(tmp_path / "runs"),
            "--rows", "baseline", "thesis_pairs", "best_on_path", "lattice_fit", "all_bits_flipped", "sgd_learners"]
    monkeypatch.setattr(sys, "argv", args)
    monkeypatch.chdir(tmp_path)
    script.main()
    record = json.loads((tmp_path / "ablation" / "results.json").read_text())
    rows = record["rows"]
    assert rows["all_bits_flipped"]["learners"].keys() == {"MPF"}
    lattice = rows["lattice_fit"]["learners"]["MPF"]["coupling_errors"]
    assert lattice["pairs"] == pytest.approx(lattice["edges"] * 18 / 36, rel=1e-6)  # non-edges stay exactly at the truth, 0
    baseline = rows["baseline"]["learners"]["MPF"]
    assert rows["thesis_pairs"]["learners"]["MPF"]["coupling_errors"]["pairs"] == pytest.approx(baseline["coupling_errors"]["pairs"] / 4)
    assert rows["best_on_path"]["learners"]["MPF"]["coupling_errors"]["pairs"] == min(error for _, error in baseline["trace"][1:])
    assert all(math.isfinite(result["coupling_errors"]["pairs"]) for row in rows.values() for result in row["learners"].values())
    before = (tmp_path / "ablation" / "results.json").read_text()
    script.main()  # resumes: every row is done, nothing is refitted
    assert json.loads((tmp_path / "ablation" / "results.json").read_text())["rows"] == json.loads(before)["rows"]
    monkeypatch.setattr(sys, "argv", [*args, "--costs"])
    script.main()  # times one evaluation per L-BFGS learner and reads each run's evaluations from its checkpoint
    costs = json.loads((tmp_path / "ablation" / "results.json").read_text())["costs"]
    assert costs["evaluation_cpu_seconds"]["MPF"] > 0 and costs["function_evaluations"]["baseline"]["pseudo-likelihood"] >= 3
    assert costs["largest_coupling"]["lattice_fit"]["MPF"][0] > 0
    other = {"rows": {"zero_start": {**rows["baseline"], "change": "a row of another process"}}, "truth": {}, "command": "python x",
             "date": "today", "machine": "here", "threads": 1, "load_average": [1.0]}
    (tmp_path / "other.json").write_text(json.dumps(other))
    monkeypatch.setattr(sys, "argv", ["ising_ablation.py", "--report-only", "--out", str(tmp_path / "ablation"), "--merge", str(tmp_path / "other.json")])
    script.main()
    assert json.loads((tmp_path / "ablation" / "results.json").read_text())["rows"]["zero_start"]["change"] == "a row of another process"
    readme = (tmp_path / "ablation" / "README.md").read_text()
    assert "Rows `zero_start`: made by `python x`" in readme and "| `zero_start` | a row of another process |" in readme
    assert "| `lattice_fit` |" in readme and "## ε_corr beside the thesis's column" in readme and "| PT-SML |" in readme


def test_committed_ablation_report_rerenders_from_its_results(tmp_path, monkeypatch):
    committed = REPO / "reports" / "ising" / "ablation"
    if not (committed / "results.json").exists():
        pytest.skip("reports/ising/ablation has no results.json")
    (tmp_path / "ablation").mkdir()
    (tmp_path / "ablation" / "results.json").write_text((committed / "results.json").read_text())
    script = load_script(REPO / "scripts" / "ising_ablation.py")
    monkeypatch.setattr(sys, "argv", ["ising_ablation.py", "--report-only", "--out", str(tmp_path / "ablation")])
    script.main()
    assert (tmp_path / "ablation" / "README.md").read_text() == (committed / "README.md").read_text()
