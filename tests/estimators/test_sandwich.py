"""Bidirectional Monte Carlo (Grosse, Ghahramani & Adams 2015): forward and reverse AIS sandwich log p(x) on simulated data."""

import math
from pathlib import Path

import pytest
import torch
from factories import random_bilinear_parameters, random_linear_generative, random_rbm
from script_modules import load_script

from pfzoo.estimators import Sandwich
from pfzoo.kernels import HMCKernel
from pfzoo.models import BilinearGenerative, MissingCapability

STEP_COUNTS = (10, 100, 1000)


def linear_gaussian():
    """Φ [6, 4] ~ N(0, 0.5²), σ_n = 0.3, Gaussian prior: log p(x) = log N(x; 0, ΦΦᵀ + σ_n² I) exactly."""
    return random_linear_generative(6, 4, "gaussian", scale=0.5)


def small_bilinear():
    """M = 4, K = 3, Lc = 2, Ld = 2, σ_n = 0.3: Φ, Ψ halved as in the HAIS-vs-importance-sampling test."""
    basis, content_weight, style_weight = random_bilinear_parameters(4, 3, 2, 2, seed=0)
    return BilinearGenerative.from_tensors(0.5 * basis, content_weight, 0.5 * style_weight, noise_std=0.3)


def sandwiches(model, num_examples: int, seed: int):
    """One estimate per K in :data:`STEP_COUNTS`, all on the same simulated examples (same seed → same (x, z))."""
    return {steps: Sandwich(num_chains=20, num_steps=steps, kernel=HMCKernel(0.2))(
        model, num_examples, generator=torch.Generator().manual_seed(seed)) for steps in STEP_COUNTS}


@pytest.fixture(scope="module")
def linear_runs():
    """Measured (seed 1, B = 100, exact mean −6.355): lower −7.96 / −6.50 / −6.384 ± 0.017, upper −3.70 / −5.79 / −6.316 ±
    0.019, gaps 4.26 ± 0.31 → 0.72 ± 0.09 → 0.07 ± 0.03 nats at K = 10 / 100 / 1000; the paired per-example gap decreases
    10 → 100 and 100 → 1000 at 12 and 7 standard errors (5.7–12 over seeds 1–4)."""
    model = linear_gaussian()
    return model, sandwiches(model, 100, seed=1)


def test_the_bounds_bracket_the_exact_log_likelihood_at_every_step_count(linear_runs):
    model, runs = linear_runs
    for steps, estimate in runs.items():
        exact = model.log_prob(estimate.data).mean().item()
        assert estimate.lower.shape == estimate.upper.shape == (100,) and estimate.lower.dtype == torch.float64
        assert estimate.lower_mean <= exact + 3 * estimate.lower_stderr, (steps, estimate.lower_mean, estimate.lower_stderr, exact)
        assert estimate.upper_mean >= exact - 3 * estimate.upper_stderr, (steps, estimate.upper_mean, estimate.upper_stderr, exact)
        assert estimate.gap == pytest.approx(estimate.upper_mean - estimate.lower_mean)
    tight = runs[1000]
    exact = model.log_prob(tight.data).mean().item()
    assert tight.gap < 0.2 and not tight.warnings, (tight.gap, tight.warnings)
    assert abs(tight.lower_mean - exact) < 3 * tight.lower_stderr + 0.05 and abs(tight.upper_mean - exact) < 3 * tight.upper_stderr + 0.05
    assert any("apart" in line for line in runs[10].warnings)  # a 4-nat gap is flagged


def test_the_gap_shrinks_beyond_noise_as_the_anneal_lengthens(linear_runs):
    """Same examples at every K: the per-example gap decreases, paired over examples, by more than 3 standard errors."""
    _, runs = linear_runs
    gaps = {steps: estimate.upper - estimate.lower for steps, estimate in runs.items()}
    for short, long in zip(STEP_COUNTS, STEP_COUNTS[1:]):
        decrease = gaps[short] - gaps[long]
        stderr = decrease.std().item() / math.sqrt(decrease.numel())
        assert decrease.mean().item() > 3 * stderr, (short, long, decrease.mean().item(), stderr)
        assert runs[short].gap > runs[long].gap + 2 * math.hypot(runs[short].gap_stderr, runs[long].gap_stderr)


def test_the_bilinear_gap_shrinks_as_the_anneal_lengthens():
    """The reverse bounds of the bilinear model are heavy-tailed at small K (a few examples' chains stay near their start's
    mode), so besides the means the test counts examples: with no change each example's gap would shrink with
    probability ½, and ≥ 70 of 100 has probability 4·10⁻⁵. Measured (seed 2): mean gaps 1.15 → 0.34 → 0.05 nats;
    84 of 100 shrink from K = 10 to 1000 (84–87 over seeds 1–4); no upper bound below its lower one beyond noise."""
    runs = sandwiches(small_bilinear(), 100, seed=2)
    gaps = {steps: estimate.upper - estimate.lower for steps, estimate in runs.items()}
    assert runs[10].gap > runs[100].gap > runs[1000].gap > -3 * runs[1000].gap_stderr, [run.gap for run in runs.values()]
    assert (gaps[10] > gaps[1000]).sum().item() >= 70
    assert not any("impossible" in line for run in runs.values() for line in run.warnings)


def test_same_seed_same_numbers_and_the_two_directions_draw_apart():
    model = linear_gaussian()
    estimator = Sandwich(num_chains=4, num_steps=20)
    first = estimator(model, 6, generator=torch.Generator().manual_seed(3))
    again = estimator(model, 6, generator=torch.Generator().manual_seed(3))
    for name in ("data", "latents", "lower", "upper"):
        torch.testing.assert_close(getattr(first, name), getattr(again, name), rtol=0, atol=0)
    assert (first.lower_mean, first.upper_stderr, first.warnings) == (again.lower_mean, again.upper_stderr, again.warnings)
    other = estimator(model, 6, generator=torch.Generator().manual_seed(4))
    assert not torch.equal(first.data, other.data)
    assert first.num_chains == 4 and first.num_steps == 20
    assert first.forward.acceptance is not None and first.reverse.segment_betas[0] > first.reverse.segment_betas[-1]  # β runs down


MEANS = {  # E[x | z], written from the models' equations
    "linear": (linear_gaussian, lambda model, z: z @ model.basis.T),  # Φz
    "bilinear": (small_bilinear, lambda model, z: model.coefficients(z) @ model.basis.T),  # Φ((Θc) ⊙ (Ψd))
}


@pytest.mark.parametrize("name", list(MEANS))
def test_sample_joint_returns_the_latents_that_generated_each_example(name):
    """``(x − E[x | z]) / σ_n`` is standard normal only for the z that generated x; ``sample`` keeps the x of the same draws."""
    make, mean = MEANS[name]
    model = make()
    x, z = model.sample_joint(20000, generator=torch.Generator().manual_seed(5))
    assert x.shape == (20000, model.num_visible) and z.shape == (20000, model.num_latent)
    with torch.no_grad():
        residual = (x - mean(model, z)) / model.noise_std
    assert residual.mean().abs() < 0.01 and (residual.var() - 1).abs() < 0.02, (residual.mean(), residual.var())
    torch.testing.assert_close(model.sample(50, generator=torch.Generator().manual_seed(7)),
                               model.sample_joint(50, generator=torch.Generator().manual_seed(7))[0])


def test_refuses_models_without_latents_in_one_line():
    with pytest.raises(MissingCapability, match=r"^Sandwich needs a prior over latents and a likelihood .* — use estimator=") as caught:
        Sandwich(num_chains=2, num_steps=5)(random_rbm(4, 3), 3, generator=torch.Generator().manual_seed(0))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("settings, match", [
    (dict(num_chains=1), "num_chains"), (dict(gap_threshold=0.0), "gap_threshold"), (dict(num_steps=0), "num_steps"),
])
def test_rejects_bad_settings(settings, match):
    with pytest.raises(ValueError, match=match):
        Sandwich(**settings)


def test_rejects_a_single_example():
    with pytest.raises(ValueError, match="num_examples"):
        Sandwich(num_chains=2, num_steps=5)(linear_gaussian(), 1, generator=torch.Generator().manual_seed(0))


def test_the_script_prints_one_row_per_step_count_with_the_exact_value(capsys):
    path = Path(__file__).resolve().parents[2] / "scripts" / "sandwich.py"
    script = load_script(path)
    script.main(["--steps", "5,50", "--examples", "4", "--chains", "3"])
    lines = capsys.readouterr().out.splitlines()
    assert "exact" in lines[1] and "gap" in lines[1]
    rows = [line.split() for line in lines if line.split() and line.split()[0] in ("5", "50")]
    assert len(rows) == 2 and all(len(row) == 12 for row in rows), lines  # K, lower ± se, upper ± se, gap ± se, exact, seconds


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_the_bounds_bracket_the_exact_value_and_repeat_with_the_seed():
    """Written without a GPU at hand: the first run on one is its first check."""
    model = linear_gaussian().to("cuda")
    estimator = Sandwich(num_chains=20, num_steps=1000, kernel=HMCKernel(0.2))
    first = estimator(model, 100, generator=torch.Generator("cuda").manual_seed(1))
    again = estimator(model, 100, generator=torch.Generator("cuda").manual_seed(1))
    assert first.data.is_cuda and first.lower.is_cuda and first.upper.is_cuda
    torch.testing.assert_close(first.upper, again.upper, rtol=0, atol=0)
    exact = model.log_prob(first.data).mean().item()
    assert first.lower_mean <= exact + 3 * first.lower_stderr and first.upper_mean >= exact - 3 * first.upper_stderr
    assert first.gap < 0.2, first.gap
