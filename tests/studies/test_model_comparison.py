"""model_comparison: the stored model-comparison reports re-render from their results alone (which hold each row's ±
as the README computes it), the ordering check compares the groups pairwise on the same patches, and a HAIS check row
warns when it misses its exact value."""

import copy
import json
from pathlib import Path

import pytest
import torch

from pfzoo.data.splits import DataSplits
from pfzoo.models import Gaussian
from pfzoo.studies.model_comparison.comparison import ModelComparison
from pfzoo.studies.model_comparison.paired_differences import ordering
from pfzoo.studies.model_comparison.report import paper_ranks, readme, routes_section
from pfzoo.studies.model_comparison.row_recorder import store_total_stderr, total_stderr

RESULTS = Path(__file__).resolve().parents[2] / "reports" / "models"


@pytest.mark.parametrize("folder", [RESULTS, RESULTS / "vanhateren"])
def test_the_stored_readme_re_renders_from_its_results_json(folder):
    payload = json.loads((folder / "results.json").read_text())
    filters = json.loads((folder / "filters.json").read_text()) if (folder / "filters.json").is_file() else None  # Fig. 1, where drawn
    assert readme(payload["meta"], payload["models"], payload["ordering"], payload.get("sweep"), filters) == (folder / "README.md").read_text()
    assert ordering(payload["models"]) == payload["ordering"]
    # each row's ± (the seeds' index reads it) is stored as the README computes it: store_total_stderr changes nothing
    assert all("stderr" in row["evaluation"] for row in payload["models"] if not row.get("failed"))
    assert store_total_stderr(copy.deepcopy(payload["models"])) == payload["models"]


def test_a_rows_total_stderr_is_its_two_parts_in_quadrature():
    rows = [{"evaluation": {"estimator_stderr": 0.3, "data_stderr": 0.4}}, {"failed": "NaN loss"}]
    assert total_stderr(rows[0]["evaluation"]) == pytest.approx(0.5)
    assert store_total_stderr(rows) is rows and rows[0]["evaluation"]["stderr"] == pytest.approx(0.5) and rows[1] == {"failed": "NaN loss"}


def test_ordering_pairs_each_lower_group_with_the_next_higher_one_on_the_same_patches():
    rows = [{"name": "gaussian", "subset_per_example": [1.0, 2.0, 3.0, 4.0]},
            {"name": "ica", "subset_per_example": [2.0, 3.0, 4.0, 7.0]},
            {"name": "mcrbm", "subset_per_example": [1.0, 2.0, 3.0, 6.0], "shared_stderr": 0.5},
            {"name": "bilinear", "failed": "NaN loss"}]
    order = ordering(rows)
    assert [(p["higher"], p["lower"]) for p in order["pairs"]] == [("ica", "gaussian"), ("mcrbm", "ica")]
    up, down = order["pairs"]
    # ica − gaussian = [1, 1, 1, 3]: mean 1.5, variance 1 → stderr √(1/4)
    assert up["difference"] == pytest.approx(1.5) and up["stderr"] == pytest.approx(0.5) and up["holds"] and up["significant"]
    # mcrbm − ica = [−1, −1, −1, −1]: no spread, so the stderr is the mcRBM's shared log Ẑ error alone
    assert down["difference"] == pytest.approx(-1.0) and down["stderr"] == pytest.approx(0.5) and not down["holds"]
    assert (order["holds"], order["significant"], order["total"]) == (1, 1, 2)


def test_training_routes_pair_the_mpf_rows_with_their_references_on_the_same_patches():
    exact = {"kind": "exact"}
    rows = {"ica": {"label": "ICA", "subset_per_example": [1.0, 2.0, 3.0], "evaluation": exact},
            "poe-laplace-mpf": {"label": "Laplace MPF", "subset_per_example": [0.0, 2.0, 1.0], "evaluation": exact},
            "poe-laplace-2x-mpf": {"label": "Laplace 2x MPF", "failed": "NaN loss"}}
    lines = routes_section(rows)
    # MPF − ML = [−1, 0, −2]: mean −1, variance 1 → stderr √(1/3); the failed overcomplete row is left out
    assert [line for line in lines if line.startswith("- ")] == [f"- Laplace MPF − ICA: -1.00 ± {3 ** -0.5:.2f} nats per patch (exact against exact)."]
    assert routes_section({"ica": rows["ica"]}) == []


def test_the_verdict_ranks_the_papers_models_beside_their_ranks_in_its_table_1():
    """Every pairwise inequality holding does not make the paper's ranking: the verdict says where each model came."""
    payload = json.loads((RESULTS / "results.json").read_text())
    verdict = next(line for line in readme(payload["meta"], payload["models"], payload["ordering"], None).splitlines() if "Verdict" in line)
    assert "reproduces" not in verdict and "same 100 patches" in verdict
    assert "3rd Bilinear generative (1st in the paper, its best)" in verdict and "1st mcRBM (3rd in the paper)" in verdict
    assert paper_ranks([{"name": "gaussian", "label": "G", "subset_mean": -5.0}, {"name": "ica", "label": "I", "subset_mean": -3.0},
                        {"name": "mcrbm", "label": "M", "failed": "diverged", "subset_mean": None}], 10) == (
        "ranked by their means on the same 10 patches, the paper's models come 1st I (4th in the paper), 2nd G (6th in the paper)")


@pytest.mark.parametrize("estimate, warned", [(1.0, True), (0.02, False)])
def test_an_estimator_check_warns_when_hais_misses_the_exact_value_beyond_its_error(monkeypatch, estimate, warned):
    """The HAIS check rows (a model with a known log-likelihood) carry exact_check's warning in the row's warnings."""
    data = torch.randn(40, 3, generator=torch.Generator().manual_seed(0))
    study = ModelComparison(DataSplits("toy", data, data[:20], None, None), {"hais_patches": 10, "pilot_patches": 10, "check_patches": 10,
                                                                             "check_particles": 4, "hais_steps": 5}, 0, recipe=None)
    model = Gaussian(3)
    model.num_latent = 3  # what the row's "sizes" names

    def fake_evaluation(row, model, patches, chains, steps, **_):  # HAIS off the exact mean by ``estimate``, stderr 0.01
        row["pilot"] = {"step_size": 0.1, "schedule": "linear", "stiffness": 1.0}
        per_example = model.log_prob(study.subset).double() + estimate
        return {"per_example": per_example, "mean": model.log_prob(patches).double().mean().item() + estimate, "estimator_stderr": 0.01,
                "data_stderr": 0.1, "kind": "hais", "seconds": 0.0, "test_patches": per_example.shape[0], "warnings": []}

    monkeypatch.setattr(study, "pilot_and_evaluate", fake_evaluation)
    study.estimator_check("check", "a check", model, "none", "closed form", "", model.log_prob)
    warnings = study.rows[-1]["evaluation"]["warnings"]
    assert bool(warnings) == warned and (not warned or "beyond its stated error" in warnings[0])
