"""compare_heating: RAISE on shared digits per number of heating sweeps, paired against the first; its table section."""

import math

import torch
from factories import all_binary_states, random_dbm

from pfzoo.estimators import RAISE
from pfzoo.studies.heating_comparison import compare_heating
from pfzoo.studies.raise_table import heating_section


def test_each_row_is_raise_with_that_many_heating_sweeps_on_the_same_digits_and_seed():
    dbm = random_dbm([5, 4, 3], scale=2.0, seed=2)
    digits = all_binary_states(5)[::5].to(torch.float64)
    rows = compare_heating(dbm, digits, [0, 4], num_steps=20, num_chains=6, base_data=digits, seed=7)
    assert [row["heating_steps"] for row in rows] == [0, 4]
    for row in rows:
        direct = RAISE(6, 20, base="base_rate", heating_steps=row["heating_steps"]).log_likelihood(
            dbm, digits, base_data=digits, generator=torch.Generator().manual_seed(7))
        assert torch.allclose(torch.tensor(row["per_example"], dtype=torch.float64), direct.per_example.double()) and row["mean"] == direct.mean
    difference = torch.tensor(rows[1]["per_example"], dtype=torch.float64) - torch.tensor(rows[0]["per_example"], dtype=torch.float64)
    assert math.isclose(rows[1]["paired_difference"], difference.mean().item(), rel_tol=1e-9)
    assert math.isclose(rows[1]["paired_stderr"], (difference.std() / math.sqrt(len(difference))).item(), rel_tol=1e-9)
    assert "paired_difference" not in rows[0]


def test_the_section_names_its_settings_and_marks_the_mean_field_row():
    rows = [{"heating_steps": 0, "mean": -100.0, "stderr": 0.5, "ess": 2.5, "seconds": 30.0},
            {"heating_steps": 100, "mean": -99.0, "stderr": 0.3, "ess": 4.0, "seconds": 33.0, "paired_difference": 1.0, "paired_stderr": 0.2}]
    text = "\n".join(heating_section("DBM (500–1000)", {"settings": {"steps": 10000, "raise_chains": 10, "heating_examples": 20},
                                                       "rows": rows, "measured_on": "today, here"}))
    assert "| 0 (mean field) | -100.00 ± 0.50 | 2.50 of 10 | — | 30.0 s |" in text
    assert "| 100 | -99.00 ± 0.30 | 4.00 of 10 | +1.00 ± 0.20 | 33.0 s |" in text
    assert "K = 10,000" in text and "same 20 random test digits" in text and text.endswith("Measured today, here.")
    noted = heating_section("DBM", {"settings": {"steps": 10000, "raise_chains": 10, "heating_examples": 20}, "rows": rows,
                                    "measured_on": "today, here", "note": "Runs beside it shared the machine."})
    assert noted[-1].endswith("Measured today, here. Runs beside it shared the machine.")
