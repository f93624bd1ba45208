"""RBMGeometricPath(marginalize="visible"/"auto") and AIS(marginalize=...): the path summing out the visible layer (chains
over hidden states) is the same joint path, so its end points are the swapped RBM's hidden free energies and its AIS
matches the exact log Z of enumerable RBMs and DBMs within the reported stderr, with E[Ẑ/Z] = 1; it removes the visible
units' Bernoulli noise from the weights when the base's visible biases differ from the model's (issue 53)."""

import math

import pytest
import torch
from factories import all_binary_states, random_dbm, random_ising, random_rbm

from pfzoo.estimators import AIS
from pfzoo.models import RBM
from pfzoo.paths import RBMGeometricPath


def _unrelated_data(num_visible, seed=2, rate=0.15):
    """Data whose base rates have nothing to do with the model's visible biases (a poor base)."""
    return (torch.rand(200, num_visible, generator=torch.Generator().manual_seed(seed)) < rate).double()


def test_the_hidden_state_path_has_the_swapped_rbms_free_energies_at_its_end_points():
    """log f_1(h) = −F(h) of the target with v summed out, log f_0(h) the base's, and log Z_0 the base's exact one."""
    model = random_rbm(7, 3, scale=1.0, seed=4)
    base = model.annealing_base("base_rate", _unrelated_data(7))
    path = RBMGeometricPath(target=model, base=base, marginalize="visible")
    assert path.summed_layer == "visible"
    h = all_binary_states(3)
    stats = path.target.statistics(h)
    swapped = RBM.from_tensors(model.weight.detach().T, model.hidden_bias.detach(), model.visible_bias.detach())
    swapped_base = RBM.from_tensors(base.weight.detach().T, base.hidden_bias.detach(), base.visible_bias.detach())
    torch.testing.assert_close(path.log_f(h, stats, 1.0), -swapped.free_energy(h).detach(), rtol=0, atol=1e-10)
    torch.testing.assert_close(path.log_f(h, stats, 0.0), -swapped_base.free_energy(h).detach(), rtol=0, atol=1e-10)
    assert path.base_log_partition().item() == pytest.approx(base.log_partition().item(), abs=1e-10)
    assert path.draw_base(5, generator=torch.Generator().manual_seed(0)).shape == (5, 3)


@pytest.mark.parametrize("marginalize, summed", [("hidden", "hidden"), ("visible", "visible"), ("auto", "visible")])
def test_ais_matches_the_exact_log_z_whichever_layer_is_summed_out(marginalize, summed):
    """A 40×6 RBM from a poor base-rate base: every choice within 3 of its stderr of the exact log Z (2⁶ hidden states)."""
    model = random_rbm(40, 6, scale=0.5, seed=3)
    estimate = AIS(num_chains=400, num_steps=300, schedule="linear", marginalize=marginalize)(
        model, data=_unrelated_data(40), generator=torch.Generator().manual_seed(1))
    exact = model.log_partition().item()
    assert abs(estimate.log_z - exact) <= 3 * estimate.stderr + 1e-6, (estimate.log_z, estimate.stderr, exact)
    assert estimate.info.get("marginalize", "hidden (hidden)").startswith(summed)


def test_summing_out_the_visible_layer_gives_an_unbiased_z_and_less_noisy_weights():
    """E[Ẑ/Z] = 1 within 4 standard errors over 1,000 independent runs of 8 chains (consecutive blocks of one call's
    chains), and the weights' spread is a fraction of the visible-state path's on the same model and poor base."""
    model = random_rbm(40, 6, scale=0.5, seed=3)
    data, exact = _unrelated_data(40), model.log_partition().item()
    runs, chains = 1000, 8
    spread = {}
    for marginalize in ("hidden", "visible"):
        estimate = AIS(num_chains=runs * chains, num_steps=60, schedule="linear", marginalize=marginalize)(
            model, data=data, generator=torch.Generator().manual_seed(5))
        log_weights = estimate.log_weights.double()
        spread[marginalize] = log_weights.std().item()
        ratios = torch.exp(torch.logsumexp(log_weights.view(runs, chains), 1) - math.log(chains) - exact)
        assert abs(ratios.mean().item() - 1) <= 4 * ratios.std().item() / math.sqrt(runs), (marginalize, ratios.mean().item())
    assert spread["visible"] < 0.5 * spread["hidden"], spread


def test_a_dbm_annealed_over_its_odd_layers_matches_the_exact_log_z():
    """A 10–4–6 DBM's even/odd RBM (16 even × 4 odd units) with its even layers summed out: the odd layer's 2⁴ states
    are the chains' positions."""
    model = random_dbm((10, 4, 6), scale=0.7, seed=2)
    estimate = AIS(num_chains=400, num_steps=300, schedule="linear", base="uniform", marginalize="auto")(
        model, generator=torch.Generator().manual_seed(3))
    exact = model.log_partition().item()
    assert estimate.info["marginalize"] == "visible (auto)"
    assert abs(estimate.log_z - exact) <= 3 * estimate.stderr + 1e-6, (estimate.log_z, estimate.stderr, exact)


def test_marginalize_is_refused_in_one_line_where_there_is_no_layer_to_choose():
    with pytest.raises(ValueError, match="marginalize must be one of"):
        AIS(marginalize="both")
    with pytest.raises(ValueError, match="needs the geometric path of an RBM"):
        AIS(num_chains=4, num_steps=2, marginalize="visible")(random_ising(5, seed=0), generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="needs the geometric path of an RBM"):
        AIS(num_chains=4, num_steps=2, path="moment_averaged", marginalize="auto")(random_rbm(6, 3), generator=torch.Generator().manual_seed(0))
