"""ising_correlation_floor: the sampling floor against the independent-draw prediction, random-direction glasses, the
learners' field error (issue 52: why ε_corr ranks PT-SML far worse than MPF at a similar ε_J)."""

import torch

from pfzoo.data import sample_spin_glass, spin_glass_model
from pfzoo.models import Ising
from pfzoo.studies.ising_correlation_floor import error_anatomy, field_error, floor_markdown, perturbed_glass, sampling_floor
from pfzoo.studies.ising_recovery import coupling_error

SAMPLING = dict(num_chains=500, burn_in=50, thin=5)


def weak_glass():
    return spin_glass_model(kind="lattice", side=3, coupling_std=0.5, seed=3, zero_field=True)


def test_perturbed_glass_has_the_asked_mean_square_coupling_error_and_keeps_or_zeroes_the_field():
    truth = spin_glass_model(kind="lattice", side=10, coupling_std=3.0, seed=0, zero_field=True)
    kept = perturbed_glass(truth, 0.05, zero_field=False, generator=torch.Generator().manual_seed(0))
    zeroed = perturbed_glass(truth, 0.05, zero_field=True, generator=torch.Generator().manual_seed(0))
    # 4,950 independent squared N(0, 0.05) steps: their mean is 0.05 within ~2 % (one standard deviation)
    assert abs(coupling_error(kept, truth) / 0.05 - 1) < 0.08
    assert torch.equal(kept.symmetric_coupling, zeroed.symmetric_coupling) and torch.equal(kept.bias, truth.bias)
    assert field_error(zeroed) < 1e-10 < 0.1 < field_error(kept)  # each unit's field moves by Σ_j E_ij / 4: variance 99 · 0.05 / 16
    assert field_error(truth) < 1e-10


def test_the_floor_of_well_mixed_samples_matches_the_independent_draw_prediction():
    truth = weak_glass()
    train = sample_spin_glass(truth, 5000, **SAMPLING, generator=torch.Generator().manual_seed(1))
    (row,) = sampling_floor(truth, train, [500], repeats=20, sampling=SAMPLING, seed=2)
    assert row["num_samples"] == 500 and row["stderr"] > 0
    assert 0.8 < row["mean"] / row["iid_prediction"] < 1.25, row


def test_error_anatomy_of_a_zero_field_model_is_unchanged_by_zeroing_its_field():
    truth = weak_glass()
    train = sample_spin_glass(truth, 2000, **SAMPLING, generator=torch.Generator().manual_seed(1))
    same = error_anatomy(truth, truth, train, num_samples=1000, sampling=SAMPLING, seed=5)
    assert same["coupling_error"] == 0 and same["field_error"] < 1e-10
    assert abs(same["correlation_error"] - same["correlation_error_zero_field"]) < 1e-9
    biased = Ising.from_tensors(truth.symmetric_coupling.detach(), truth.bias.detach() + 1.0)
    moved = error_anatomy(biased, truth, train, num_samples=1000, sampling=SAMPLING, seed=5)
    assert abs(moved["field_error"] - 0.25) < 1e-6  # h moves by b/2 = 0.5 on every unit
    assert moved["correlation_error"] > 10 * moved["correlation_error_zero_field"]
    drawn = error_anatomy(truth, truth, train, num_samples=1000, sampling=SAMPLING, seed=5, repeats=3)
    assert len(set(drawn["correlation_errors"])) == 3 and drawn["correlation_errors"][0] == same["correlation_error"]
    assert drawn["correlation_error_stderr"] > 0


def test_floor_markdown_reads_each_learner_against_the_nearest_random_directions():
    study = {"command": "python x", "date": "d", "load_average": [1.0], "num_samples": 100, "seed": 0,
             "sampling": SAMPLING, "floor": [{"num_samples": 100, "mean": 2e-4, "stderr": 1e-5, "iid_prediction": 1e-4}],
             "random_directions": [{"mean_square": m, "zero_field": z, "coupling_errors": [m], "correlation_errors": [e],
                                    "mean": e, "stderr": 0.0} for m, z, e in ((0.03, False, 1e-2), (0.05, False, 2e-2),
                                                                               (0.03, True, 1e-3), (0.05, True, 2e-3))],
             "learners": {"PT-SML": {"coupling_error": 0.06, "correlation_error": 4e-2, "correlation_error_stderr": 1e-3,
                                     "correlation_errors": [4e-2], "correlation_error_zero_field": 2e-3,
                                     "field_error": 0.08}},
             "checkpoints": {"PT-SML": "runs/x.pt"}, "truth": {"field_error": 0.0}}
    text = floor_markdown(study)
    assert "| 100 | 2.00e-04 ± 1.0e-05 | 1.00e-04 | 2.00 |" in text
    assert "PT-SML: ε_corr 4.00e-02 at ε_J 0.0600, 2× that of random directions of ε = 0.05 with the truth’s biases, " \
           "20× that of random directions of ε = 0.05 with zero field; with its own couplings and zero field 2.00e-03 (20× less)." in text
