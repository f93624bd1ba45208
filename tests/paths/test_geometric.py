from functools import partial

import pytest
import torch
from factories import all_binary_states, random_rbm
from scipy import stats

from pfzoo.models import RBM
from pfzoo.paths import RBMGeometricPath, build


def rbm_and_base(kind="base_rate"):
    g = torch.Generator().manual_seed(0)
    rbm = RBM.from_tensors(torch.randn(5, 3, generator=g) * 1.5, torch.randn(5, generator=g), torch.randn(3, generator=g))
    data = (torch.rand(50, 5, generator=g) < 0.3).float()
    return rbm, rbm.annealing_base(kind, data)


all_visible = partial(all_binary_states, dtype=torch.float32, msb_first=True)  # float32 like rbm_and_base's RBM


@pytest.mark.parametrize("kind", ["uniform", "base_rate"])
def test_path_end_points_are_base_and_target(kind):
    rbm, base = rbm_and_base(kind)
    path = RBMGeometricPath(target=rbm, base=base)
    v = all_visible(5)
    stats_ = path.target.statistics(v)
    assert torch.allclose(path.log_f(v, stats_, 1.0), -rbm.free_energy(v).detach().double(), atol=1e-5)
    assert torch.allclose(path.log_f(v, stats_, 0.0), -base.free_energy(v).double(), atol=1e-5)
    assert path.base_log_partition().item() == pytest.approx(base.log_partition().item(), abs=1e-9)


def test_increment_equals_difference_of_log_f():
    rbm, base = rbm_and_base()
    path = RBMGeometricPath(target=rbm, base=base)
    v = all_visible(5)
    s = path.target.statistics(v)
    for b0, b1 in [(0.0, 0.1), (0.3, 0.3001), (0.9, 1.0), (0.7, 0.2)]:
        expected = path.log_f(v, s, b1) - path.log_f(v, s, b0)
        assert torch.allclose(path.log_weight_increment(s, b0, b1), expected, atol=1e-5)


def test_base_samples_follow_base_distribution():
    rbm, base = rbm_and_base()
    path = RBMGeometricPath(target=rbm, base=base)
    v = path.draw_base(50000, generator=torch.Generator().manual_seed(0))
    p = torch.sigmoid(base.visible_bias)
    assert ((v.mean(0) - p).abs() < 5 * torch.sqrt(p * (1 - p) / 50000)).all()


@pytest.mark.parametrize("beta", [0.3, 1.0])
def test_transition_leaves_intermediate_distribution_invariant(beta):
    rbm, base = rbm_and_base()
    path = RBMGeometricPath(target=rbm, base=base)
    v_all = all_visible(5)
    target = torch.softmax(path.log_f(v_all, path.target.statistics(v_all), beta), 0)
    g = torch.Generator().manual_seed(1)
    state = path.init(torch.ones(40000, 5))
    for _ in range(30):
        state, info = path.transition(state, beta, generator=g)
        assert info.accept_prob is None  # exact Gibbs: always accepted
    v = state.position
    index = (v.long() * 2 ** torch.arange(4, -1, -1)).sum(1)
    counts = torch.bincount(index, minlength=32).double()
    assert stats.chisquare(counts.numpy(), (target * 40000).numpy()).pvalue > 1e-4


def test_base_with_weights_is_rejected():
    rbm, _ = rbm_and_base()
    with pytest.raises(ValueError, match="zero weights"):
        RBMGeometricPath(target=rbm, base=rbm)


@pytest.mark.parametrize("num_steps", [10, 10000])
def test_increments_telescope_to_the_end_point_difference(num_steps):
    """Summing per-step increments on a fixed state must give log f_1 - log f_0 to float64-like accuracy."""
    g = torch.Generator().manual_seed(3)
    rbm = RBM.from_tensors(torch.randn(50, 200, generator=g), torch.randn(50, generator=g), torch.randn(200, generator=g) * 3)
    path, _ = build(rbm, base="uniform")
    v = (torch.rand(8, 50, generator=g) < 0.5).float()
    s = path.target.statistics(v)
    betas = torch.linspace(0, 1, num_steps + 1, dtype=torch.float64).tolist()
    total = sum(path.log_weight_increment(s, b0, b1) for b0, b1 in zip(betas[:-1], betas[1:]))
    v64, rbm64 = v.double(), RBM.from_tensors(rbm.weight.double(), rbm.visible_bias.double(), rbm.hidden_bias.double())
    exact = -rbm64.free_energy(v64).detach() - 200 * torch.log(torch.tensor(2.0, dtype=torch.float64))
    assert (total - exact).abs().max().item() < 1e-3


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ais_with_bulk_drawn_visible_units_matches_the_exact_log_z(dtype):
    """1024 chains × 64 visible units draw in bulk (pfzoo.sampling.BULK_DRAWS: integers from the seeded numpy stream)."""
    from pfzoo.estimators import AIS
    from pfzoo.sampling import BULK_DRAWS

    model = random_rbm(64, 8, 0.3, seed=7, dtype=dtype, draw_dtype=None)
    assert 1024 * 64 >= BULK_DRAWS
    estimate = AIS(num_chains=1024, num_steps=300, base="uniform")(model, generator=torch.Generator().manual_seed(0))
    exact = model.log_partition().item()
    assert abs(estimate.log_z - exact) <= 3 * estimate.stderr + 1e-4, (estimate.log_z, estimate.stderr, exact)
    assert estimate.stderr < 0.05
