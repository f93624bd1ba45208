"""pfzoo.studies.raise_mass on tiny RBMs, against enumeration of both layers: the hidden marginal and its top masses,
the ascent's local maxima, the mass read from exact and from importance-weighted draws, and p_ann's end states (one
transition at β = 1 after the last weight); the report measures and renders (the measured numbers live in
reports/raise_mass/results.json)."""

import torch
from factories import random_rbm

from pfzoo.data import DataSplits
from pfzoo.models.enumeration import binary_configurations
from pfzoo.studies.raise_mass import annealed_states, ascend, estimated_mass, exact_mass, hidden_log_f, mode_search
from pfzoo.studies.raise_mass_report import QUICK, SETTINGS, measure, mode_images, readme


def joint(model) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(visible states [2^V, V], hidden states [2^H, H], log p(v, h) [2^V, 2^H]) by enumerating both layers."""
    v = binary_configurations(model.num_visible, dtype=torch.float64, device=torch.device("cpu"))
    h = binary_configurations(model.num_hidden, dtype=torch.float64, device=torch.device("cpu"))
    w, b, c = model.weight.double(), model.visible_bias.double(), model.hidden_bias.double()
    log_f = v @ w @ h.T + (v @ b)[:, None] + (h @ c)[None]
    return v, h, log_f - torch.logsumexp(log_f.flatten(), 0)


def test_exact_mass_is_the_hidden_marginal_of_the_joint():
    model = random_rbm(6, 4, scale=1.5, seed=1)
    _, h, log_p = joint(model)
    p_h = log_p.logsumexp(0).exp()
    result = exact_mass(model, top=3)
    assert torch.allclose(hidden_log_f(model, h) - result["log_z"], p_h.log(), atol=1e-10)
    assert torch.allclose(torch.tensor(result["top_masses"], dtype=torch.float64), p_h.sort(descending=True).values[:3], atol=1e-12)
    assert abs(result["entropy"] + (p_h * p_h.log()).sum().item()) < 1e-10
    assert result["mode"] == h[p_h.argmax()].to(torch.int8).tolist()


def test_ascent_ends_at_local_maxima_and_finds_the_global_one_from_every_state():
    model = random_rbm(10, 6, scale=2.0, seed=3)
    states = binary_configurations(6, dtype=torch.float64, device=torch.device("cpu"))
    maxima = ascend(model, states)
    flips = (maxima[:, None, :] - torch.eye(6, dtype=torch.float64)[None]).abs()  # every single flip of every maximum
    assert (hidden_log_f(model, flips.reshape(-1, 6)).reshape(-1, 6) <= hidden_log_f(model, maxima)[:, None] + 1e-9).all()
    assert torch.isclose(hidden_log_f(model, maxima).max(), hidden_log_f(model, states).max())


def test_mode_search_reports_a_local_maximum_and_its_exact_mass():
    model = random_rbm(10, 6, scale=2.0, seed=7)
    exact = exact_mass(model, top=64)
    data = torch.bernoulli(torch.full((20, 10), 0.5), generator=torch.Generator().manual_seed(0))
    found = mode_search(model, data, exact["log_z"], num_digits=20)
    mode = torch.tensor(found["mode"], dtype=torch.float64)[None]
    assert torch.equal(ascend(model, mode), mode)  # nothing to climb from it
    assert abs(found["mode_mass"] - (hidden_log_f(model, mode) - exact["log_z"]).exp().item()) < 1e-12
    assert min(abs(found["mode_mass"] - mass) for mass in exact["top_masses"]) < 1e-12 and found["starts"] == 22


def test_estimated_mass_from_exact_and_from_weighted_draws_matches_enumeration():
    model = random_rbm(12, 5, scale=1.5, seed=4)
    exact = exact_mass(model)
    states = binary_configurations(5, dtype=torch.float64, device=torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    p_h = torch.softmax(hidden_log_f(model, states), 0)
    draws = states[torch.multinomial(p_h, 4000, replacement=True, generator=g)]
    plain = estimated_mass(model, draws, None, exact["log_z"])
    uniform = states[torch.randint(0, 32, (4000,), generator=g)]  # weighted by f(h) / (1/32): properly weighted for p(h)
    weighted = estimated_mass(model, uniform, hidden_log_f(model, uniform), exact["log_z"])
    top = exact["top_masses"][0]
    for result in (plain, weighted):
        assert abs(result["entropy"] - exact["entropy"]) < 4 * result["entropy_stderr"]
        assert abs(result["mode_mass"] - top) < 1e-12 and result["mode"] == exact["mode"]
    assert abs(plain["mode_share_of_draws"] - top) < 4 * (top * (1 - top) / 4000) ** 0.5
    assert abs(weighted["ess"] - 4000 / (32 * (p_h**2).sum().item())) < 400  # ESS of f-weighted uniform draws ≈ N / (2^H Σ p²)


def test_annealed_states_are_draws_of_p_ann_and_weighted_draws_of_the_rbm():
    model = random_rbm(3, 2, scale=2.0, seed=5)
    v, h, log_p = joint(model)
    # K = 1 from uniform: x_0 uniform, one block-Gibbs sweep at β = 1, so p_ann(v') = Σ_v 2^-V Σ_h p(h | v) p(v' | h)
    hidden_given = torch.sigmoid(v @ model.weight.double() + model.hidden_bias.double())
    p_h_given_v = (h[None] * hidden_given[:, None] + (1 - h[None]) * (1 - hidden_given[:, None])).prod(-1)
    visible_given = torch.sigmoid(h @ model.weight.double().T + model.visible_bias.double())
    p_v_given_h = (v[None] * visible_given[:, None] + (1 - v[None]) * (1 - visible_given[:, None])).prod(-1)
    p_ann = (p_h_given_v @ p_v_given_h).mean(0)
    visible, log_weights = annealed_states(model, 20_000, 1, base="uniform", generator=torch.Generator().manual_seed(1))
    index = (visible.double() * 2 ** torch.arange(3, dtype=torch.float64)).sum(1).long()
    share = torch.bincount(index, minlength=8).double() / 20_000
    assert ((share - p_ann).abs() < 5 * (p_ann * (1 - p_ann) / 20_000).sqrt() + 1e-3).all()
    assert (p_ann - log_p.logsumexp(1).exp()).abs().max() > 0.05  # p_ann differs from the RBM here, so the check can fail
    weighted = torch.zeros(8, dtype=torch.float64).index_add_(0, index, torch.softmax(log_weights, 0))
    assert (weighted - log_p.logsumexp(1).exp()).abs().max() < 0.03
    assert abs(torch.logsumexp(log_weights, 0).item() - torch.log(torch.tensor(20_000.0)) - model.log_partition().item()) < 0.05


def test_measure_and_readme_on_a_tiny_data_set():
    model = random_rbm(16, 4, scale=1.0, seed=6, dtype=torch.float32)
    g = torch.Generator().manual_seed(0)
    data = DataSplits("tiny", train=torch.bernoulli(torch.full((200, 16), 0.3), generator=g), test=torch.bernoulli(torch.full((50, 16), 0.3), generator=g))
    entry, grids = measure(model, data, SETTINGS | QUICK | {"steps": 20, "fig_draws": 50}, seed=0)
    assert abs(entry["exact"]["test_log_likelihood"] - model.log_prob(data.test).mean().item()) < 1e-4
    assert len(grids) == 3 and all(grid.shape == (SETTINGS["images"], 16) for grid in grids.values())
    assert [panel.shape for panel in mode_images(model, entry).values()] == [(1, 16), (1, 16)]
    assert entry["mode_search"]["mode_mass"] <= entry["exact"]["top_masses"][0] + 1e-12
    text = readme({"settings": SETTINGS, "models": {"cd1-20": {**entry, "measured_on": "today", "threads": 1}}})
    assert "| zoo cd1-20 |" in text and f"{100 * entry['exact']['top_masses'][0]:.1f} %" in text
