"""Table-driven oracle tests: every (model, estimator) row is checked against the exact log Z.

A new estimator adds rows here. Stochastic estimators must land within ``K_SIGMA`` of their own
reported standard error, and that standard error must itself be small (``max_stderr``), so a row
cannot pass by reporting a huge error bar.
"""

from dataclasses import dataclass
from functools import partial
from typing import Callable

import pytest
import torch
from factories import biased_binary_data, random_dbm, random_dbn, random_ising, random_rbm

from pfzoo.estimators import AIS, BoundKind, Exact
from pfzoo.models import RBM

K_SIGMA = 3.0

# This table's models and data are float32 (float32 draws, as the shared factories make by default).
random_rbm = partial(random_rbm, dtype=torch.float32)
random_dbm = partial(random_dbm, dtype=torch.float32)
random_dbn = partial(random_dbn, dtype=torch.float32)
random_ising = partial(random_ising, dtype=torch.float32)
biased_binary_data = partial(biased_binary_data, dtype=torch.float32)


@dataclass
class Case:
    name: str
    model: Callable[[], RBM]
    estimator: Callable[[], torch.nn.Module]
    max_stderr: float
    data: Callable[[], torch.Tensor] | None = None


CASES = [
    Case("rbm-20x10-weak-ais-uniform", lambda: random_rbm(20, 10, 0.3, 0), lambda: AIS(200, 1000), 0.02),
    Case("rbm-40x15-ais-base-rate", lambda: random_rbm(40, 15, 1.0, 1), lambda: AIS(300, 3000, base="base_rate"), 0.05,
         lambda: biased_binary_data(40, 1)),
    Case("rbm-20x25-strong-ais-uniform", lambda: random_rbm(20, 25, 1.5, 2), lambda: AIS(500, 5000), 0.1),
    Case("rbm-25x12-strong-ais-sigmoid", lambda: random_rbm(25, 12, 2.0, 3), lambda: AIS(500, 5000, schedule="sigmoid"), 0.1),
    Case("rbm-16x20-strong-ais-base-rate", lambda: random_rbm(16, 20, 2.0, 4), lambda: AIS(500, 5000, base="base_rate"), 0.1,
         lambda: biased_binary_data(16, 4)),
    # DBMs: AIS over the even layers with the odd layers summed out; exact log Z by enumeration.
    Case("dbm-12-10-8-ais-uniform", lambda: random_dbm([12, 10, 8], 1.0, 5), lambda: AIS(400, 3000), 0.05),
    Case("dbm-15-8-10-6-ais-base-rate", lambda: random_dbm([15, 8, 10, 6], 1.0, 6), lambda: AIS(300, 3000, base="base_rate"), 0.05,
         lambda: biased_binary_data(15, 6)),
    # DBN: AIS on the top RBM (its log Z is the DBN's), base rates of the recognition pass.
    Case("dbn-15-12-10-8-ais-base-rate", lambda: random_dbn([15, 12, 10, 8], 1.0, 7), lambda: AIS(300, 3000, base="base_rate"), 0.05,
         lambda: biased_binary_data(15, 7)),
    # Ising: fully connected (every unit its own Gibbs block), strong couplings; exact log Z over 2^12 states.
    Case("ising-12-dense-ais-uniform", lambda: random_ising(12, 2.0, 8), lambda: AIS(300, 3000), 0.05),
    Case("ising-12-dense-ais-base-rate", lambda: random_ising(12, 2.0, 8), lambda: AIS(300, 3000, base="base_rate"), 0.05,
         lambda: biased_binary_data(12, 8)),
]


SLOW_CASES = {"rbm-20x25-strong-ais-uniform", "ising-12-dense-ais-uniform", "ising-12-dense-ais-base-rate"}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.name in SLOW_CASES else []) for c in CASES])
def test_estimator_matches_exact_log_z(case):
    model = case.model()
    exact = model.log_partition().item()
    data = case.data() if case.data else None
    estimate = case.estimator()(model, data=data, generator=torch.Generator().manual_seed(0))
    assert estimate.kind is BoundKind.UNBIASED_Z
    assert estimate.stderr < case.max_stderr, f"stderr {estimate.stderr:.4f} too large to be a useful check"
    assert abs(estimate.log_z - exact) <= K_SIGMA * estimate.stderr, (
        f"{case.name}: estimate {estimate.log_z:.4f} ± {estimate.stderr:.4f}, exact {exact:.4f}"
    )


def test_exact_estimator_returns_enumeration():
    model = random_rbm(8, 6, 1.0, 0)
    estimate = Exact()(model)
    assert estimate.kind is BoundKind.EXACT and estimate.stderr == 0.0
    assert estimate.log_z == model.log_partition().item()


@pytest.mark.slow
@pytest.mark.parametrize(
    "make_model, num_visible",
    [(lambda: random_rbm(20, 12, 1.0, 5), 20), (lambda: random_ising(12, 1.0, 5), 12)],
    ids=["rbm-20x12", "ising-12"],
)
def test_ais_log_likelihood_matches_exact(make_model, num_visible):
    model = make_model()
    data = biased_binary_data(num_visible, 5, num_examples=300)
    estimate = AIS(300, 3000, base="base_rate").log_likelihood(model, data, generator=torch.Generator().manual_seed(1))
    exact = model.log_prob(data).detach()
    assert torch.allclose(estimate.per_example - estimate.per_example.mean(), exact - exact.mean(), atol=1e-4)
    assert abs(estimate.mean - exact.mean().item()) <= K_SIGMA * estimate.stderr
    assert estimate.data_stderr == pytest.approx((exact.std() / 300**0.5).item(), rel=1e-3)
    assert estimate.partition is not None and estimate.partition.kind is BoundKind.UNBIASED_Z


def test_same_seed_same_log_weights():
    model = random_rbm(12, 8, 1.0, 6)
    run = lambda seed: AIS(50, 200)(model, generator=torch.Generator().manual_seed(seed))
    first, second, other = run(0), run(0), run(1)
    assert first.log_weights.dtype == torch.float64
    assert torch.equal(first.log_weights, second.log_weights)
    assert not torch.equal(first.log_weights, other.log_weights)


def test_ais_reports_progress_and_rejects_bad_arguments():
    model = random_rbm(6, 4, 1.0, 7)
    calls = []
    AIS(10, 250)(model, progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (250, 250) and all(t == 250 for _, t in calls)
    with pytest.raises(ValueError, match="needs data"):
        AIS(10, 10, base="base_rate")(model)
    with pytest.raises(ValueError, match=r"base must be 'auto' or one of \['base_rate', 'uniform'\]"):
        AIS(10, 10, base="gaussian")(model)
    with pytest.raises(ValueError, match="kernel must be a pfzoo kernel with init, step and needs"):
        AIS(10, 10, kernel=object())(model)
    with pytest.raises(ValueError, match="num_chains"):
        AIS(1, 10)
    with pytest.raises(ValueError, match="data"):
        AIS(10, 10).log_likelihood(model, torch.ones(3, 5))
