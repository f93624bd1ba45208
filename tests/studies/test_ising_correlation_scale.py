"""ising_correlation_scale: the readings of ε_corr against closed forms on exact frequency tables, and the section's
table and readings (issue 52: what sets ε_corr's scale against thesis Table 3.1)."""

import math

import pytest
import torch

from pfzoo.studies.ising_correlation_scale import (READINGS, TRUTH, correlation_readings, geometric_mean_ratio, pair_statistics,
                                                   scale_markdown)
from pfzoo.studies.ising_recovery import correlation_error


def table(counts: dict[tuple[int, int], int]) -> torch.Tensor:
    """Two-unit samples with exactly these state counts: their moments are the table's, with no sampling noise."""
    return torch.tensor([state for state, count in counts.items() for _ in range(count)], dtype=torch.float32)


# independent units: the reference at m = ½, the samples at m = 0.6 (0.4² = 0.16, 0.4 · 0.6 = 0.24, 0.6² = 0.36)
REFERENCE = table({(0, 0): 25, (0, 1): 25, (1, 0): 25, (1, 1): 25})
SHIFTED = table({(0, 0): 16, (0, 1): 24, (1, 0): 24, (1, 1): 36})


def test_readings_of_a_shift_of_the_means_alone_match_their_closed_forms():
    readings = correlation_readings(SHIFTED, REFERENCE)
    assert set(readings) == set(READINGS)
    assert readings["moments"] == pytest.approx(0.11**2) and readings["moments"] == pytest.approx(correlation_error(SHIFTED, REFERENCE))
    assert readings["spin_moments"] == pytest.approx(0.04**2)  # ⟨s_1 s_2⟩ = (2m − 1)² = 0.04 against 0: second order in δm
    assert readings["covariances"] == pytest.approx(0, abs=1e-12) and readings["correlation_coefficients"] == pytest.approx(0, abs=1e-12)
    assert readings["with_means"] == pytest.approx((0.1**2 + 0.11**2 + 0.1**2) / 3)
    assert readings["mean_absolute"] == pytest.approx(0.11) and readings["root_mean_square"] == pytest.approx(0.11)


def test_spin_moments_are_the_moments_of_plus_minus_one_states_and_coefficients_stay_in_range():
    samples = torch.bernoulli(torch.full((500, 6), 0.3), generator=torch.Generator().manual_seed(0))
    samples[:, 5] = 1.0  # a constant unit: its coefficients count as 0, not NaN
    spins = 2 * samples.double() - 1
    statistics = pair_statistics(samples)
    rows, cols = torch.triu_indices(6, 6, 1)
    assert torch.allclose(statistics["spin_moments"], (spins.T @ spins / 500)[rows, cols])
    assert statistics["with_means"].shape == (21,) and statistics["moments"].shape == (15,)
    coefficients = statistics["correlation_coefficients"]
    assert coefficients.abs().max() <= 1 and not coefficients.isnan().any()
    assert (coefficients[cols == 5] == 0).all()


def test_a_pure_covariance_error_is_sixteen_times_larger_in_spins():
    correlated = table({(0, 0): 30, (0, 1): 20, (1, 0): 20, (1, 1): 30})  # m = ½ kept, C_12 = 0.05
    readings = correlation_readings(correlated, REFERENCE)
    assert readings["spin_moments"] == pytest.approx(16 * readings["covariances"])
    assert readings["moments"] == pytest.approx(readings["covariances"])


def test_readings_refuse_samples_of_another_width():
    with pytest.raises(ValueError, match="same width"):
        correlation_readings(REFERENCE, torch.zeros(4, 3))


def test_the_section_names_the_row_nearest_the_thesis_and_the_spin_factors():
    thesis = {"MPF": 0.0025, "CD-1": 0.0125}
    rows = [{"key": key, "change": key, "group": group, "values": {"MPF": mpf, "CD-1": cd, TRUTH: 1e-5}}
            for key, group, mpf, cd in (("moments", "reading", 1e-4, 5e-4), ("spin_moments", "reading", 4e-4, 5e-4),
                                        ("covariances", "reading", 2.5e-5, 3.125e-5), ("mean_absolute", "reading", 1e-2, 2e-2),
                                        ("strong", "another run", 2e-3, 1.5e-2))]
    study = {"command": "python x", "date": "d", "load_average": [1.0], "num_samples": 100, "rows": rows,
             "sampling": {"num_chains": 10, "burn_in": 5, "thin": 2}}
    assert geometric_mean_ratio(rows[0]["values"], thesis) == pytest.approx(math.sqrt(0.04 * 0.04))
    text = scale_markdown(study, thesis)
    assert "| thesis | Table 3.1 | 0.0025 | 0.0125 | — | 1 |" in text
    assert "| `moments` | moments | 1.00e-04 (0.04) | 5.00e-04 (0.04) | 1.00e-05 | 0.04 (0.04–0.04) |" in text
    assert "MPF ×4, CD-1 ×1" in text and "(16, 16)" in text
    # the nearest mean square row is the cause named; mean_absolute, nearer, is not a mean square
    assert "**Measured cause: strong** (`strong`) moves the geometric mean from 0.04 to 0.98, ×24.5" in text
    assert "the learners' ratios still span MPF 0.8, CD-1 1.2" in text and "`moments` 0.04" not in text.split("Measured")[1]
    with pytest.raises(ValueError, match="must name a learner"):
        geometric_mean_ratio({"PT-SML": 1.0}, thesis)


def test_a_run_already_at_the_thesis_scale_names_no_cause_and_compares_the_order():
    thesis = {"MPF": 0.0025, "pseudo-likelihood": 0.0036, "CD-1": 0.0125, "MFT+TAP": 0.0983}
    rows = [{"key": key, "change": key, "group": "reading", "values": values | {TRUTH: 4e-4}}
            for key, values in (("moments", {"MPF": 1e-2, "pseudo-likelihood": 5e-3, "CD-1": 5e-3}),
                                ("spin_moments", {"MPF": 2e-2, "pseudo-likelihood": 1e-2, "CD-1": 1e-2}),
                                ("covariances", {"MPF": 1e-3, "pseudo-likelihood": 6e-4, "CD-1": 6e-4}))]
    study = {"command": "python x", "date": "d", "load_average": [1.0], "num_samples": 100, "rows": rows,
             "sampling": {"num_chains": 10, "burn_in": 5, "thin": 2}}
    text = scale_markdown(study, thesis)
    assert "Measured cause" not in text
    ratio = (4 * 5e-3 / 3.6e-3 * 5e-3 / 1.25e-2) ** (1 / 3)
    assert f"**Ours is at the thesis's scale**: the geometric mean of ours ÷ thesis's is {ratio:.3g}" in text
    assert "MPF 4, pseudo-likelihood 1.39, CD-1 0.4" in text
    assert "the learners' order is not (ours pseudo-likelihood < CD-1 < MPF; the thesis's MPF < pseudo-likelihood < CD-1)" in text
    assert "(MFT+TAP: no value of ours)" in text
    rows[0]["values"] = {"MPF": 2.5e-3, "pseudo-likelihood": 3.6e-3, "CD-1": 1.25e-2, TRUTH: 4e-4}
    assert "the scale and the learners' order are both the thesis's" in scale_markdown(study, thesis)
