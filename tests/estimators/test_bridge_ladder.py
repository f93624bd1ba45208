"""Bridge sampling along a ladder (issue 49, item 4): the ladder's ratio and error bars on Gaussian levels with known
ratios (weighted draws included), BridgeSampling() with its defaults against enumeration on RBMs whose base is far from
the model, and on the zoo's 784×20 binarized-MNIST RBMs (slow, with the data)."""

import math
from pathlib import Path

import pytest
import torch
from factories import biased_binary_data, random_rbm

from pfzoo.estimators import BridgeSampling, LinkedImportanceSampling, SteppingStone
from pfzoo.estimators.bridge import MIN_WEIGHT_ESS_FRACTION
from pfzoo.estimators.bridge_ladder import ladder_log_ratio
from pfzoo.estimators.linked import MIN_RUN_ESS_FRACTION
from pfzoo.models import RBM

# levels p_k = N(0, σ_k²) with f_k(x) = exp(−x² / 2σ_k²): log Z_{k+1} − log Z_k = log σ_{k+1}/σ_k
SIGMAS = (1.0, 1.8, 3.2, 6.0)


def rung_log_ratio(k: int, x: torch.Tensor) -> torch.Tensor:
    return -x**2 / (2 * SIGMAS[k + 1] ** 2) + x**2 / (2 * SIGMAS[k] ** 2)


def gaussian_ladder(num_chains: int, draws: int, generator: torch.Generator, proposal_scale: float = 1.0):
    """Each level's draws of the chains: a first draw from ``q_k = N(0, (proposal_scale σ_k)²)`` weighted by ``f_k / q_k``
    (as an annealing weight belongs to the state a chain arrives in), then an AR(1) chain (ρ = 0.8) that leaves ``p_k``
    invariant; ``proposal_scale = 1``: equal weights."""
    levels, log_weights = [], [torch.zeros(num_chains, dtype=torch.float64)]
    for k, sigma in enumerate(SIGMAS):
        scale = proposal_scale * sigma if k else sigma
        x = scale * torch.randn(num_chains, generator=generator, dtype=torch.float64)
        if k:
            log_weights.append(-x**2 / (2 * sigma**2) + x**2 / (2 * scale**2))
        chain = [x]
        for _ in range(draws - 1):
            chain.append(0.8 * chain[-1] + 0.6 * sigma * torch.randn(num_chains, generator=generator, dtype=torch.float64))
        levels.append(torch.stack(chain, 1))
    lower = [rung_log_ratio(k, levels[k]) for k in range(len(SIGMAS) - 1)]
    upper = [rung_log_ratio(k, levels[k + 1]) for k in range(len(SIGMAS) - 1)]
    return lower, upper, torch.stack(log_weights, 1)


@pytest.mark.parametrize("bridge, proposal_scale", [("optimal", 1.0), ("optimal", 1.3), ("geometric", 1.3)],
                         ids=["optimal", "optimal-weighted", "geometric-weighted"])
def test_ladder_ratio_is_calibrated(bridge, proposal_scale):
    """Over 200 replications the estimates of ``log σ_3/σ_0`` centre on it within 4 standard errors of their mean and
    their spread matches the reported stderr within 20 %: the chains' autocorrelation, the weights and the rungs that
    share a level's draws are all counted."""
    g = torch.Generator().manual_seed(0)
    estimates, stderrs = [], []
    for _ in range(200):
        ladder = ladder_log_ratio(*gaussian_ladder(100, 10, g, proposal_scale), bridge=bridge)
        estimates.append(ladder.log_ratio)
        stderrs.append(ladder.stderr)
        assert ladder.converged and len(ladder.pair_log_ratios) == 3
    estimates = torch.tensor(estimates)
    exact = math.log(SIGMAS[-1] / SIGMAS[0])
    spread, reported = estimates.std().item(), torch.tensor(stderrs).mean().item()
    assert abs(estimates.mean().item() - exact) < 4 * spread / math.sqrt(200)
    assert 0.8 < spread / reported < 1.2, f"spread {spread:.4f} against reported stderr {reported:.4f}"


def test_ignoring_the_weights_of_chains_off_their_level_is_caught():
    """The same weighted draws with their weights dropped give a ratio many standard errors off: the test above can fail."""
    g = torch.Generator().manual_seed(1)
    lower, upper, log_weights = gaussian_ladder(2000, 10, g, proposal_scale=1.3)
    weighted = ladder_log_ratio(lower, upper, log_weights)
    unweighted = ladder_log_ratio(lower, upper, torch.zeros_like(log_weights))
    exact = math.log(SIGMAS[-1] / SIGMAS[0])
    assert abs(weighted.log_ratio - exact) < 4 * weighted.stderr
    assert abs(unweighted.log_ratio - exact) > 10 * unweighted.stderr


def test_ladder_ratio_refuses_bad_input_in_one_line():
    with pytest.raises(ValueError, match="log_weights must be"):
        ladder_log_ratio([torch.zeros(4, 3)], [torch.zeros(4, 3)], torch.zeros(4, 3))
    with pytest.raises(ValueError, match="rung 0: lower and upper"):
        ladder_log_ratio([torch.zeros(4, 3)], [torch.zeros(4, 2)], torch.zeros(4, 2))
    with pytest.raises(ValueError, match="ladder must be 'auto'"):
        BridgeSampling(ladder="dense")
    with pytest.raises(ValueError, match="ladder must increase strictly"):
        BridgeSampling(ladder=[0.0, 0.5, 0.5, 1.0])
    with pytest.raises(ValueError, match="target_overlap must lie strictly between 0 and 1"):
        BridgeSampling(target_overlap=1.0)


def test_defaults_bridge_a_strongly_coupled_rbm_along_a_ladder():
    """A 20×10 RBM with weights N(0, 2²), far from its base rates: the direct bridge ([0, 1]) warns and misses; the
    defaults climb a ladder of several rungs and land within 3 stderr and 0.25 nats of the enumerated log Z."""
    model = random_rbm(20, 10, 2.0, 0)
    data = biased_binary_data(20, 0, 100)
    exact = model.log_partition().item()
    direct = BridgeSampling(num_chains=100, samples_per_chain=10, burn_in=1, thin=1, ladder=[0.0, 1.0])(
        model, data=data, generator=torch.Generator().manual_seed(0))
    assert direct.info["num_rungs"] == 1 and direct.warnings
    estimate = BridgeSampling()(model, data=data, generator=torch.Generator().manual_seed(0))
    assert estimate.info["num_rungs"] > 3 and not estimate.warnings
    assert abs(estimate.log_z - exact) < max(3 * estimate.stderr, 0.05) and abs(estimate.log_z - exact) < 0.25
    assert estimate.stderr < 0.1


def test_a_base_that_overlaps_the_model_gets_the_direct_bridge():
    model = random_rbm(10, 6, 0.05, 1, bias_scale=0.05)
    estimate = BridgeSampling(num_chains=100, burn_in=100)(model, generator=torch.Generator().manual_seed(0))
    assert estimate.info["ladder"] == [0.0, 1.0]
    assert abs(estimate.log_z - model.log_partition().item()) < 3 * estimate.stderr


def test_a_concentrated_mode_warns_through_the_weights_ess():
    """A 64×4 RBM (weights 1.4, visible biases 1.5, hidden biases −85.5) whose all-on hidden state holds 90 % of the mass
    at β = 1, 49 % at β = 0.9 and 3 % at β = 0.8 (enumerated), as the zoo's CD-1(20) MNIST RBM holds 40 % on one hidden configuration: the
    chains reach the mode too rarely, their annealing weights' ESS falls below a quarter of the chains (measured 42 of 300;
    the defaults on the enumerable RBMs above keep 0.87-0.98 of them) and BridgeSampling() says so, as
    LinkedImportanceSampling() does through its weights' tail."""
    model = RBM.from_tensors(torch.full((64, 4), 1.4, dtype=torch.float64), torch.full((64,), 1.5, dtype=torch.float64),
                             torch.full((4,), -85.5, dtype=torch.float64))
    bridge = BridgeSampling()(model, generator=torch.Generator().manual_seed(0))
    assert bridge.ess < MIN_WEIGHT_ESS_FRACTION * 300
    assert any(f"(below {MIN_WEIGHT_ESS_FRACTION:.0%})" in line for line in bridge.warnings), bridge.warnings
    linked = LinkedImportanceSampling()(model, generator=torch.Generator().manual_seed(0))
    assert linked.warnings


def test_linked_runs_far_from_a_concentrated_mode_warn():
    """A 32×4 RBM (weights 1, visible biases 1, hidden biases −29) with a concentrated all-on hidden mode: with 30 levels
    at seed 9 LIS lands 0.51 nats low (stderr 0.23) with light-looking tails (no Pareto line) and an ESS of 16.2 of 100
    runs, which no warning named before (the zoo's PCD(20) MNIST RBM: 1.05 nats low at ESS 10.8); the ESS line does."""
    model = RBM.from_tensors(torch.ones(32, 4, dtype=torch.float64), torch.ones(32, dtype=torch.float64),
                             torch.full((4,), -29.0, dtype=torch.float64))
    estimate = LinkedImportanceSampling(num_runs=100, num_levels=30, states_per_level=6)(model, generator=torch.Generator().manual_seed(9))
    assert abs(estimate.log_z - model.log_partition().item()) > 0.25, "the model no longer shows the failure this test guards"
    assert any(f"runs (below {MIN_RUN_ESS_FRACTION:.0%})" in line for line in estimate.warnings), estimate.warnings


DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
MNIST_EXACT = {"rbm-binarized_mnist-pcd-20": 191.25505171854604, "rbm-binarized_mnist-cd1-20": 214.08588920232367}
"""Both zoo 784×20 MNIST RBMs and their exact log Z (``model.log_partition()``, 2^20 hidden states: 10-20 s, so recorded).
The CD-1(20) one puts 40 % of its mass on one hidden configuration the chains of every path estimator miss
(reports/raise_mass)."""

MNIST_CASES = [
    (BridgeSampling, "rbm-binarized_mnist-pcd-20", "close"),
    (LinkedImportanceSampling, "rbm-binarized_mnist-pcd-20", "close"),
    (BridgeSampling, "rbm-binarized_mnist-cd1-20", "close-or-warned"),
    (LinkedImportanceSampling, "rbm-binarized_mnist-cd1-20", "close-or-warned"),
    (SteppingStone, "rbm-binarized_mnist-pcd-20", "close-or-warned"),
]
"""Issue 49's must-hold (bridge and linked within 0.25 nats of exact with defaults on a 784×20 MNIST RBM, PCD(20)) and
its escape on the model no chain resolves (CD-1(20): close or warned). SteppingStone runs on PCD(20) alone: a minute
with its defaults, and warned by its round trips on both models alike."""


@pytest.mark.slow
@pytest.mark.data
@pytest.mark.skipif(not (DATA / "binarized_mnist").is_dir(), reason="needs ../shared/data/binarized_mnist")
@pytest.mark.parametrize("estimator, name, expected", MNIST_CASES, ids=lambda case: getattr(case, "__name__", case))
def test_defaults_on_the_mnist_rbms(estimator, name, expected):
    """With defaults, within 0.25 nats (SteppingStone: 3 stderr) of the enumerated log Z — or, where ``expected`` allows,
    a warning. Measured (seed 0, one CPU thread, 7-60 s each): bridge PCD(20) −0.06 ± 0.07 silent, CD-1(20) −0.77 ± 0.13
    warned (weights' ESS 50 of 300); linked PCD(20) −0.09 ± 0.08 silent (seeds 1-4: −0.09, −0.02, +0.15 warned, −0.06),
    CD-1(20) −0.81 ± 0.28 warned (ESS 12 of 150); pt PCD(20) −0.10 ± 0.02, CD-1(20) −0.73 ± 0.06, both warned by their
    round trips (0.19 and 0.04 of the bound; PCD(20) at seeds 1-4 −0.05 to −0.09, 2-5 stderr low, 0.18-0.19 of the
    bound, all warned: MIN_ROUND_TRIP_FRACTION). The former bridge/linked defaults, 100 runs × 100 levels × 6 states,
    were −0.40 ± 0.37 off on PCD(20)."""
    from pfzoo import zoo
    from pfzoo.data import binarized_mnist

    model = zoo.pretrained(name)
    estimate = estimator()(model, data=binarized_mnist(DATA).train, generator=torch.Generator().manual_seed(0))
    error = abs(estimate.log_z - MNIST_EXACT[name])
    close = error < 3 * estimate.stderr if estimator is SteppingStone else error < 0.25
    assert close or (expected == "close-or-warned" and estimate.warnings), (name, estimate.log_z - MNIST_EXACT[name], estimate.stderr)
