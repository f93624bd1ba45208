"""convergence_against_exact (HAIS report Fig. 4): per-example HAIS against N beside a closed-form likelihood."""

import torch

from pfzoo.models import LinearGenerative
from pfzoo.studies.hais_convergence import convergence_against_exact, convergence_figure
from pfzoo.studies.step_size_pilot import HAISSetting


def test_the_bound_rises_to_the_exact_gaussian_prior_likelihood_with_n():
    g = torch.Generator().manual_seed(0)
    model = LinearGenerative.from_tensors(torch.randn(4, 3, generator=g, dtype=torch.float64), prior="gaussian", noise_std=0.3)
    model.requires_grad_(False)
    patches = model.sample(4, generator=g)
    rows = convergence_against_exact(model, patches, [3, 300], particles=50, setting=HAISSetting(0.3, 10.0, "geometric"), seed=1)
    assert [row["num_steps"] for row in rows] == [3, 300]
    assert rows[0]["exact"] == rows[1]["exact"] == model.log_prob(patches).double().mean().item()
    assert rows[0]["error"] < rows[1]["error"] - 0.05  # a lower bound that tightens with N ...
    assert abs(rows[1]["error"]) < max(4 * rows[1]["stderr"], 0.02)  # ... to the exact value
    figure = convergence_figure(rows, "check")
    assert len(figure.axes) == 2 and all(axes.get_xscale() == "log" and len(axes.lines) >= 2 for axes in figure.axes)
