"""The GSM diagnosis (issue 52): pfzoo's generalized score matching against Lyu's divergence written out independently,
by enumeration in float64; the decomposition of the finite-sample loss (eq. 3 of pfzoo.studies.gsm_diagnosis); the
early-stopping rule; and a small run of the finite-sample study."""

import math

import pytest
import torch

from pfzoo.studies import gsm_diagnosis as study


def test_state_enumeration_and_flips_agree():
    states, flips = study.binary_states(4), study.flip_indices(4)
    assert states.dtype == torch.float64 and states.shape == (16, 4)
    assert torch.equal(study.state_rows(states), torch.arange(16))
    flipped = states[flips]  # [16, 4, 4]: row k with unit j flipped
    expected = states[:, None, :].expand(16, 4, 4).clone()
    expected[:, torch.arange(4), torch.arange(4)] = 1 - expected[:, torch.arange(4), torch.arange(4)]
    assert torch.equal(flipped, expected)


def test_population_objective_is_lyus_divergence_up_to_a_constant_and_the_teacher_minimises_it():
    result = study.formula_check(study.Setting(4, 2, seed=3), probes=2, max_iter=300)
    for probe in result["probes"]:
        assert probe["abs_value_difference"] < 1e-10 * max(1.0, abs(probe["lyu_divergence"])), probe
        assert probe["max_abs_gradient_difference"] < 1e-10 * max(1.0, probe["max_abs_gradient"]), probe
    assert result["probes"][-1]["lyu_divergence"] < 1e-20  # D(p ‖ p) = 0
    assert result["gradient_norm_at_teacher"] < 1e-10
    fits = result["fits"]
    assert fits["from base-rate start"]["kl_start"] > 1e-3
    assert fits["from base-rate start"]["kl_fit"] < 1e-6 and fits["from teacher"]["kl_fit"] < 1e-12
    assert fits["uncorrected form, from base-rate start"]["kl_fit"] > 1e-2  # the form Marlin et al. corrected is inconsistent


def test_finite_sample_loss_is_the_bounded_divergence_minus_the_unobserved_flip_term():
    """Eq. (3): L + C + R = D(p̂ ‖ q) on a sample with unobserved states, and R grows without bound as an unobserved
    neighbour of an observed state loses its mass while L falls with it."""
    teacher = study.teacher_rbm(5, 3, scale=1.5, generator=torch.Generator().manual_seed(0))
    data = teacher.exact_samples(20, generator=torch.Generator().manual_seed(1)).double()  # about 10 of 32 states seen
    data = data[(data - data[0]).abs().sum(1) != 1]  # the first state's neighbours dropped: it is observed and lonely
    states, flips = study.binary_states(5), study.flip_indices(5)
    p_hat = study.state_frequencies(data)
    assert (p_hat == 0).any() and p_hat.sum().item() == pytest.approx(1.0)
    model = study.teacher_rbm(5, 3, generator=torch.Generator().manual_seed(2))
    loss = study.gsm_expectation(model, p_hat, states).item()
    assert loss == pytest.approx(study.GeneralizedScoreMatching().loss(model, data).item(), rel=1e-12)
    assert study.pseudolikelihood_expectation(model, p_hat, states).item() == pytest.approx(
        study.PseudoLikelihood().loss(model, data).item(), rel=1e-12)
    constant = study.lyu_constant(p_hat, flips)
    reward = study.unobserved_flip_term(model, p_hat, states, flips).item()
    divergence = study.lyu_divergence(model, p_hat, states, flips).item()
    assert reward > 0 and divergence >= 0
    assert loss + constant + reward == pytest.approx(divergence, rel=1e-12, abs=1e-12)
    # An observed state whose every neighbour is unobserved, given its own "grandmother" hidden unit (input α/2 at that
    # state, ≤ −α/2 elsewhere): its free energy falls by ≈ α/2, R grows like e^{α/2}, D stays bounded, and L falls with it.
    lonely = torch.nonzero((p_hat > 0) & (p_hat[flips] == 0).all(1))[0, 0]
    x = states[lonely]
    signs = 2 * x - 1
    losses = []
    for alpha in (0.0, 10.0, 40.0):
        grandmother = study.RBM.from_tensors(torch.cat([model.weight.detach(), alpha * signs[:, None]], 1), model.visible_bias.detach(),
                                             torch.cat([model.hidden_bias.detach(), -alpha * (x.sum(0, keepdim=True) - 0.5)]))
        losses.append(study.gsm_expectation(grandmother, p_hat, states).item())
        assert study.lyu_divergence(grandmother, p_hat, states, flips).item() < divergence + 1.0
    assert losses[0] > losses[1] > losses[2] and losses[2] < -1e6, losses


def test_early_stopping_choice_follows_the_callbacks_rule():
    records = [{"update": u, "valid": v} for u, v in zip(range(0, 100, 10), [-3.0, -2.0, -2.5, -2.6, -2.7, -1.0, -1.5, -1.6, -1.7, -1.8])]
    # patience 3: three scores in a row below the best by update 40; an epoch end at 45 stops the run there
    choice = study.early_stopping_choice(records, key="valid", patience=3, updates_per_epoch=45, non_finite_at=None)
    assert choice == {"kept_update": 10, "stopped_at": 45}
    # with epochs of 25 updates the count is 1 at the end of the first and 0 at the end of the second (update 50 was
    # better): the run goes on to its last update
    choice = study.early_stopping_choice(records, key="valid", patience=3, updates_per_epoch=25, non_finite_at=None)
    assert choice == {"kept_update": 50, "stopped_at": 90}
    assert study.early_stopping_choice(records, key="valid", patience=20, updates_per_epoch=25, non_finite_at=95)["stopped_at"] == 95


def test_small_finite_sample_study_runs_and_reports_closure():
    result = study.finite_sample_study(study.Setting(5, 2, num_samples=500, seed=1), adam_rates=(1e-2,), protocol_rates=(1e-3,),
                                       sgd_rates=(("GSM", (0.1,)),), epochs=1, lbfgs_iter=15, patience=2, line=(0.0, 1.0))
    assert result["decomposition_error"] < 1e-9
    assert result["sample"]["kl_start"] > 0
    assert set(result["gradients_at_start"]) == {"GSM", "pseudolikelihood", "ratio matching", "maximum likelihood"}
    for run in result["full_batch"].values():
        assert math.isfinite(run["best_score"]["score"]) and run["evaluations"] >= 1
    assert len(result["trajectories"]) == 4 and len(result["protocol"]) == 3 and set(result["grid_choice"]) == set(result["loss_at_teacher"])
    gsm = result["loss_at_teacher"]["GSM"]
    assert gsm["standard_error"] == pytest.approx(gsm["row_std"] / math.sqrt(500))
