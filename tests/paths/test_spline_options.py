"""The RBM spline builder's options for the ablation of reports/paths: ``knot_betas`` (knot placement), ``moment_start``
(where the target-moment chains start) and :func:`estimate_rbm_moments`; the defaults are unchanged."""

import pytest
import torch
from factories import random_rbm

from pfzoo.paths import build, exact_rbm_moments, fit_moment_averaged_knots
from pfzoo.paths.moment_averaged_rbm import estimate_rbm_moments
from pfzoo.sampling import bernoulli

V, H = 6, 3
OPTIONS = dict(num_chains=200, burn_in=30, moment_sweeps=10, iterations=40)


def target_and_base():
    target = random_rbm(V, H, scale=1.0, seed=4)
    return target, target.annealing_base("uniform")


def same_knots(first, second) -> bool:
    return all(torch.equal(getattr(first, name), getattr(second, name)) for name in ("weights", "visible_biases", "hidden_biases"))


def test_estimated_moments_match_enumeration():
    target, _ = target_and_base()
    generator = torch.Generator().manual_seed(0)
    start = bernoulli(torch.full((4000, V), 0.5, dtype=torch.float64), generator=generator)
    estimate = estimate_rbm_moments(target, start, burn_in=50, moment_sweeps=20, generator=generator)
    for part, exact in zip(estimate, exact_rbm_moments(target)):
        assert (part - exact).abs().max() < 0.02  # 80,000 correlated draws: sd of a mean ≈ 0.004


def test_explicit_knot_betas_equal_to_the_default_spacing_give_the_default_spline():
    target, _ = target_and_base()
    default, _ = build(target, kind="moment_averaged", base="uniform", num_knots=2, **OPTIONS)
    placed, _ = build(target, kind="moment_averaged", base="uniform", knot_betas=torch.linspace(0, 1, 4, dtype=torch.float64).tolist(), **OPTIONS)
    both, _ = build(target, kind="moment_averaged", base="uniform", num_knots=2, knot_betas=torch.linspace(0, 1, 4, dtype=torch.float64), **OPTIONS)
    assert same_knots(default, placed) and same_knots(default, both)


def test_knots_go_where_knot_betas_say():
    target, _ = target_and_base()
    path, _ = build(target, kind="moment_averaged", base="uniform", knot_betas=[0.0, 0.5, 0.9, 1.0], **OPTIONS)
    assert path.knot_betas.tolist() == [0.0, 0.5, 0.9, 1.0] and path.weights.shape[0] == 4
    assert torch.equal(path.weights[-1], target.weight)


def test_moment_start_at_base_draws_reproduces_the_default_stream():
    """The default draws the moment chains' start from the base with the fit's generator; handing the same draws in as
    moment_start (and the generator where drawing them left it) gives the same knots, bit for bit."""
    target, base = target_and_base()
    betas = [0.0, 0.5, 1.0]
    default = fit_moment_averaged_knots(target, base, betas, generator=torch.Generator().manual_seed(3), **OPTIONS)
    generator = torch.Generator().manual_seed(3)
    start = bernoulli(torch.sigmoid(base.visible_bias).expand(OPTIONS["num_chains"], -1), generator=generator)
    given = fit_moment_averaged_knots(target, base, betas, moment_start=start, generator=generator, **OPTIONS)
    assert torch.equal(default[1].weight, given[1].weight) and torch.equal(default[1].hidden_bias, given[1].hidden_bias)


def test_moment_start_sets_where_the_target_chains_start():
    target, base = target_and_base()
    start = torch.ones(50, V, dtype=torch.float64)
    first = fit_moment_averaged_knots(target, base, [0.0, 0.5, 1.0], moment_start=start, generator=torch.Generator().manual_seed(1), **OPTIONS)
    other = fit_moment_averaged_knots(target, base, [0.0, 0.5, 1.0], generator=torch.Generator().manual_seed(1), **OPTIONS)
    assert not torch.equal(first[1].weight, other[1].weight)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda t, b: build(t, kind="moment_averaged", base="uniform", num_knots=3, knot_betas=[0.0, 0.5, 1.0]), "num_knots=3 disagrees"),
        (lambda t, b: build(t, kind="moment_averaged", base="uniform", knot_betas=[0.0, 0.7, 0.4, 1.0]), "knot_betas must increase"),
        (lambda t, b: fit_moment_averaged_knots(t, b, [0.0, 0.5, 1.0], moment_start=torch.ones(5, V + 1, dtype=torch.float64)),
         "moment_start"),
        (lambda t, b: fit_moment_averaged_knots(t, b, [0.0, 0.5, 1.0], moment_start=torch.full((5, V), 0.5, dtype=torch.float64)),
         "moment_start"),
        (lambda t, b: estimate_rbm_moments(t, torch.ones(5, V, dtype=torch.float64), burn_in=-1), "burn_in must be a non-negative"),
        (lambda t, b: estimate_rbm_moments(t, torch.ones(5, V, dtype=torch.float64), moment_sweeps=0), "moment_sweeps must be a positive"),
    ],
)
def test_bad_option_values_raise(make, message):
    target, base = target_and_base()
    with pytest.raises(ValueError, match=message):
        make(target, base)
