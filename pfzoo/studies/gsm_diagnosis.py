"""Why generalized score matching (GSM) stays at its base-rate start on RBM data: the objective, its gradient and the
optimiser measured on enumerable RBMs (issue 52; ``scripts/diagnose_gsm.py`` writes ``reports/principles/gsm_diagnosis.json``).

*Deep Learning* §18.4 names GSM (Lyu 2009, "made an error in the derivation that was corrected by Marlin et al. 2010")
but gives no formula. Lyu's divergence with the marginalization operator, for binary ``x ∈ {0,1}^D``, is

    D(p ‖ q_θ) = ½ Σ_x p(x) Σ_j ( 1/p(x_j | x_−j) − 1/q_θ(x_j | x_−j) )²                                   (1)

and :class:`~pfzoo.training.GeneralizedScoreMatching` minimises its expansion (Marlin et al.'s corrected cross term)

    L(θ) = Σ_x p(x) Σ_j [ ½ q_j(x)⁻² − q_j(x)⁻¹ (1 − q_j(x))⁻¹ ],   q_j(x) = q_θ(x_j | x_−j).                (2)

For a positive p (the population), ``D = L + C`` with ``C = ½ Σ_x p(x) Σ_j p_j(x)⁻²`` free of θ (:func:`formula_check`
verifies values and gradients by enumeration against :func:`lyu_divergence`, computed from the enumerated joint
distributions alone). For an empirical distribution p̂ with unobserved states the same algebra gives

    D(p̂ ‖ q_θ) = L(θ) + C + R(θ),   R(θ) = Σ_x p̂(x) Σ_j [p̂(x⁽ʲ⁾) = 0] / (1 − q_j(x)) ≥ 0,                   (3)

so on a finite sample L = D − C − R falls without bound as any observed state's unobserved neighbour is made
improbable (:func:`unobserved_flip_term`), while D stays bounded. Everything here is float64 and enumerates all 2^D
visible states (state k has unit j = bit j of k, as :func:`pfzoo.models.enumeration.binary_configurations`); stochastic functions take a ``torch.Generator``; nothing prints.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Callable

import torch
from torch import Tensor
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from pfzoo.models import RBM
from pfzoo.models.enumeration import binary_configurations
from pfzoo.training import GeneralizedScoreMatching, PseudoLikelihood, RatioMatching

Loss = Callable[[RBM], Tensor]
"""``loss(model) -> scalar``: a full-batch objective."""
BatchLoss = Callable[[RBM, Tensor], Tensor]
"""``loss(model, batch [B, D]) -> scalar``: a minibatch objective."""


# ---- enumeration -------------------------------------------------------------------------------------------------

def binary_states(num_units: int) -> Tensor:
    """Every binary state, ``[2^D, D]`` float64; row k holds the bits of k, unit 0 the least significant."""
    return binary_configurations(num_units, dtype=torch.float64, device=torch.device("cpu"))


def flip_indices(num_units: int) -> Tensor:
    """``[2^D, D]`` long: entry ``[k, j]`` is the row of :func:`binary_states` with unit j of state k flipped."""
    return torch.arange(2**num_units)[:, None] ^ (1 << torch.arange(num_units))[None, :]


def state_rows(data: Tensor) -> Tensor:
    """The :func:`binary_states` row of each row of binary ``data [N, D]`` → ``[N]`` long."""
    return (data.long() * (1 << torch.arange(data.shape[1]))).sum(1)


def state_frequencies(data: Tensor) -> Tensor:
    """The empirical distribution p̂ of binary ``data [N, D]`` over :func:`binary_states`' rows, ``[2^D]`` float64."""
    return torch.bincount(state_rows(data), minlength=2 ** data.shape[1]).double() / data.shape[0]


def unnormalized_log_probs(model: RBM, states: Tensor) -> Tensor:
    """``−F(x)`` of every state ``states [S, D]`` → ``[S]`` (differentiable)."""
    return -model.free_energy(states)


@torch.no_grad()
def log_probs(model: RBM, states: Tensor) -> Tensor:
    """Normalised ``log q(x)`` over all 2^D ``states`` (``log Z`` by summing them) → ``[2^D]``."""
    log_f = unnormalized_log_probs(model, states)
    return log_f - torch.logsumexp(log_f, 0)


def kl_divergence(truth_log_probs: Tensor, model: RBM, states: Tensor) -> float:
    """``KL(truth ‖ model) = Σ_x p(x) (log p(x) − log q(x))`` over all states; ``truth_log_probs [2^D]``."""
    model_log_probs = log_probs(model, states)
    return float((truth_log_probs.exp() * (truth_log_probs - model_log_probs)).sum())


def conditionals(log_f: Tensor, flips: Tensor) -> Tensor:
    """``p(x_j | x_−j) = f(x) / (f(x) + f(x⁽ʲ⁾))`` from ``log f [2^D]`` (unnormalised; −inf for zero mass) → ``[2^D, D]``;
    1 where the flipped state has no mass."""
    here = log_f[:, None].expand_as(flips)
    return torch.exp(here - torch.logaddexp(here, log_f[flips]))


# ---- the objective, three ways ----------------------------------------------------------------------------------

def gsm_expectation(model: RBM, weights: Tensor, states: Tensor) -> Tensor:
    """Eq. (2) as pfzoo computes it: ``Σ_x w(x) ℓ(x)`` with ℓ :meth:`GeneralizedScoreMatching.example_losses`,
    ``weights [2^D]`` (p or p̂) → float64 scalar (the sample mean loss when ``weights`` are a sample's frequencies)."""
    return (weights * GeneralizedScoreMatching().example_losses(model, states)).sum()


def lyu_divergence(model: RBM, weights: Tensor, states: Tensor, flips: Tensor) -> Tensor:
    """Eq. (1), written out independently of pfzoo's GSM: ``½ Σ_{x: w(x)>0} w(x) Σ_j (1/p_j(x) − 1/q_j(x))²`` with both
    conditionals from the enumerated joint distributions (:func:`conditionals`), ``weights [2^D]`` → scalar."""
    seen = weights > 0
    p_j = conditionals(torch.where(seen, weights.log(), -math.inf), flips)
    p_j = torch.where(seen[:, None], p_j, 1.0)  # unobserved rows carry no weight (and no NaN into the gradient)
    q_j = conditionals(unnormalized_log_probs(model, states), flips)
    terms = 0.5 * (1 / p_j - 1 / q_j).square().sum(1)
    return (weights * terms).sum()


def lyu_constant(weights: Tensor, flips: Tensor) -> float:
    """``C = ½ Σ_{x: w(x)>0} w(x) Σ_j p_j(x)⁻²`` of eqs. (2)–(3), free of θ."""
    seen = weights > 0
    p_j = conditionals(torch.where(seen, weights.log(), -math.inf), flips)
    return float((weights[seen] * (0.5 / p_j[seen].square()).sum(1)).sum())


def unobserved_flip_term(model: RBM, weights: Tensor, states: Tensor, flips: Tensor) -> Tensor:
    """``R(θ) = Σ_x w(x) Σ_j [w(x⁽ʲ⁾) = 0] / (1 − q_j(x))`` of eq. (3): what eq. (2) gains, without bound, by making the
    unobserved neighbours of observed states improbable (0 for a positive ``weights [2^D]``)."""
    q_j = conditionals(unnormalized_log_probs(model, states), flips)
    unseen_flip = (weights[flips] == 0) & (weights[:, None] > 0)
    return (weights[:, None] * unseen_flip / (1 - q_j)).sum()


def uncorrected_expectation(model: RBM, weights: Tensor, states: Tensor) -> Tensor:
    """The form Marlin et al. (2010) corrected: the cross term keeps only ``1/q_j``, ``Σ_x w(x) Σ_j [½ q_j⁻² − q_j⁻¹]``."""
    q_j = torch.sigmoid(model.flip_free_energy_gaps(states))
    return (weights * (0.5 / q_j.square() - 1 / q_j).sum(1)).sum()


def pseudolikelihood_expectation(model: RBM, weights: Tensor, states: Tensor) -> Tensor:
    """:class:`~pfzoo.training.PseudoLikelihood`'s loss (all units) weighted over the states, ``Σ_x w(x) Σ_j
    softplus(F(x) − F(x⁽ʲ⁾))`` (the sample mean when ``weights [2^D]`` are a sample's frequencies)."""
    return (weights * torch.nn.functional.softplus(-model.flip_free_energy_gaps(states)).sum(1)).sum()


def exact_negative_log_likelihood(model: RBM, weights: Tensor, states: Tensor) -> Tensor:
    """``−Σ_x w(x) log q(x) = Σ_x w(x) F(x) + log Σ_x e^{−F(x)}`` by enumeration, differentiable (maximum likelihood)."""
    log_f = unnormalized_log_probs(model, states)
    return -(weights * log_f).sum() + torch.logsumexp(log_f, 0)


# ---- models -----------------------------------------------------------------------------------------------------

def teacher_rbm(num_visible: int, num_hidden: int, *, scale: float = 1.0, bias_scale: float = 0.5,
                generator: torch.Generator) -> RBM:
    """A float64 RBM with ``N(0, scale²)`` weights and ``N(0, bias_scale²)`` biases (weight, visible, hidden drawn in turn)."""
    draw = lambda *shape, s: torch.randn(*shape, generator=generator, dtype=torch.float64) * s  # noqa: E731
    return RBM.from_tensors(draw(num_visible, num_hidden, s=scale), draw(num_visible, s=bias_scale), draw(num_hidden, s=bias_scale))


def base_rate_start(num_visible: int, num_hidden: int, visible_means: Tensor, *, init_std: float,
                    generator: torch.Generator) -> RBM:
    """The principles study's start: ``N(0, init_std²)`` weights, zero hidden biases and visible biases
    ``logit(visible_means [V])`` (the data's base rates), float64."""
    model = RBM(num_visible, num_hidden, init_std=init_std, generator=generator).double()
    with torch.no_grad():
        model.visible_bias.copy_(torch.logit(visible_means.double()))
    return model


def _copy(model: RBM) -> RBM:
    return RBM.from_tensors(model.weight.detach().clone(), model.visible_bias.detach().clone(), model.hidden_bias.detach().clone())


def _interpolate(start: RBM, end: RBM, t: float) -> RBM:
    model = _copy(start)
    with torch.no_grad():
        a, b = parameters_to_vector(start.parameters()), parameters_to_vector(end.parameters())
        vector_to_parameters(a + t * (b - a), model.parameters())
    return model


def _gradient(loss: Loss, model: RBM) -> Tensor:
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss(model), list(model.parameters()))])


# ---- optimisers -------------------------------------------------------------------------------------------------

class _NonFinite(Exception):
    pass


def lbfgs(loss: Loss, model: RBM, score: Callable[[RBM], float], *, max_iter: int, max_eval: int | None = None) -> dict:
    """Full-batch L-BFGS (strong-Wolfe line search, history 20) on ``loss``, scoring every evaluation with ``score``
    (e.g. KL from the truth); stops at the first non-finite loss. Returns the evaluations, the loss and score at the
    start, at the lowest score passed through and at the end, the lowest finite loss, the final gradient norm and why it
    stopped. ``model`` ends at the last finite evaluation."""
    optimizer = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=max_iter, max_eval=max_eval or 2 * max_iter,
                                  history_size=20, line_search_fn="strong_wolfe", tolerance_grad=1e-12, tolerance_change=1e-15)
    records: list[tuple[float, float]] = []
    last_good = parameters_to_vector(model.parameters()).detach().clone()

    def closure():
        nonlocal last_good
        optimizer.zero_grad()
        value = loss(model)
        if not torch.isfinite(value) or not torch.isfinite(parameters_to_vector(model.parameters())).all():
            raise _NonFinite
        value.backward()
        records.append((value.item(), score(model)))
        last_good = parameters_to_vector(model.parameters()).detach().clone()
        return value

    stopped = "converged (gradient or change below tolerance)"
    began = time.perf_counter()
    try:
        optimizer.step(closure)
        if optimizer.state[next(iter(model.parameters()))]["n_iter"] >= max_iter or len(records) >= (max_eval or 2 * max_iter):
            stopped = "iteration or evaluation limit"
    except _NonFinite:
        stopped = f"non-finite loss or parameters at evaluation {len(records) + 1}"
        with torch.no_grad():
            vector_to_parameters(last_good, model.parameters())
    if not records:
        raise ValueError("lbfgs: the loss is not finite at the starting parameters")
    best = min(range(len(records)), key=lambda i: records[i][1])
    return {"evaluations": len(records), "stopped": stopped, "seconds": time.perf_counter() - began,
            "start": {"loss": records[0][0], "score": records[0][1]},
            "best_score": {"evaluation": best + 1, "loss": records[best][0], "score": records[best][1]},
            "end": {"loss": records[-1][0], "score": records[-1][1]},
            "lowest_loss": min(r[0] for r in records),
            "end_gradient_norm": float(_gradient(loss, model).norm()),
            "end_max_abs_weight": float(model.weight.detach().abs().max())}


def minibatch_trajectory(loss: BatchLoss, model: RBM, data: Tensor, *, optimizer: str, lr: float, epochs: int,
                         batch_size: int, every: int, scores: dict[str, Callable[[RBM], float]],
                         generator: torch.Generator, max_updates: int | None = None) -> dict:
    """``epochs`` passes of ``optimizer`` (``"Adam"`` or ``"SGD"`` with momentum 0.5, as the principles study) over
    minibatches of ``data [N, D]`` in a random order drawn from ``generator``; every ``every`` updates (and at 0) each
    of ``scores`` is recorded. Stops at ``max_updates`` or at the first non-finite loss or parameter (``non_finite_at``).
    Returns ``{"updates_per_epoch", "records": [{"update", <score names>...}], "non_finite_at", "seconds"}``."""
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=lr) if optimizer == "Adam" else torch.optim.SGD(params, lr=lr, momentum=0.5)
    record = lambda update: {"update": update, **{name: f(model) for name, f in scores.items()}}  # noqa: E731
    records, update, non_finite_at = [record(0)], 0, None
    began = time.perf_counter()
    for _ in range(epochs if max_updates is None or max_updates > 0 else 0):
        for rows in torch.randperm(data.shape[0], generator=generator).split(batch_size):
            opt.zero_grad()
            value = loss(model, data[rows])
            value.backward()
            opt.step()
            update += 1
            if not torch.isfinite(value) or not torch.isfinite(parameters_to_vector(params)).all():
                non_finite_at = update
                break
            if update % every == 0:
                records.append(record(update))
            if max_updates is not None and update >= max_updates:
                break
        if non_finite_at is not None or (max_updates is not None and update >= max_updates):
            break
    return {"updates_per_epoch": math.ceil(data.shape[0] / batch_size), "records": records, "non_finite_at": non_finite_at,
            "seconds": time.perf_counter() - began}


def early_stopping_choice(records: list[dict], *, key: str, patience: int, updates_per_epoch: int,
                          non_finite_at: int | None) -> dict:
    """The update :class:`~pfzoo.training.EarlyStopping` would keep from ``records`` (score ``key``, higher better, at
    increasing updates): a score not above the best adds one to a count that a better score resets, and at every epoch
    end (after that update's score) the run stops if the count has reached ``patience``; a non-finite loss ends it too.
    Returns the kept update and the update the run stopped at."""
    best, best_update, since, boundary = -math.inf, 0, 0, updates_per_epoch
    for entry in records:
        while entry["update"] > boundary:
            if since >= patience:
                return {"kept_update": best_update, "stopped_at": boundary}
            boundary += updates_per_epoch
        if entry[key] > best:
            best, best_update, since = entry[key], entry["update"], 0
        else:
            since += 1
    return {"kept_update": best_update, "stopped_at": non_finite_at or records[-1]["update"]}


# ---- the study ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    """One enumerable problem: a teacher RBM of ``num_visible × num_hidden`` units (weights ``N(0, scale²)``, biases
    ``N(0, 0.5²)``), ``num_samples`` exact samples of it (0: the exact distribution only), the start's ``init_std``."""

    num_visible: int
    num_hidden: int
    scale: float = 1.0
    num_samples: int = 0
    init_std: float = 0.01
    seed: int = 0


def formula_check(setting: Setting, *, probes: int = 3, max_iter: int = 500) -> dict:
    """Steps 1–2 on a tiny RBM with data = the teacher's exact distribution p (float64, enumerated):

    * eq. (2) (pfzoo) against eq. (1) (written out independently): ``|L + C − D|`` and the largest gradient difference
      at ``probes`` random models and at the teacher;
    * the minimiser of the exact population objective by L-BFGS from the base-rate start (small random weights), from
      the exact base-rate RBM (W = 0: the hidden units stay identical under any gradient) and from the teacher:
      KL(teacher ‖ fit) and the gradient norm; Marlin et al.'s uncorrected form from the same start for contrast.
    """
    g = torch.Generator().manual_seed(setting.seed)
    teacher = teacher_rbm(setting.num_visible, setting.num_hidden, scale=setting.scale, generator=g)
    states, flips = binary_states(setting.num_visible), flip_indices(setting.num_visible)
    truth = log_probs(teacher, states)
    p = truth.exp()
    constant = lyu_constant(p, flips)
    rows = []
    for k in range(probes + 1):
        model = teacher if k == probes else teacher_rbm(setting.num_visible, setting.num_hidden, scale=setting.scale, generator=g)
        ours, lyu = gsm_expectation(model, p, states), lyu_divergence(model, p, states, flips)
        params = list(model.parameters())
        grad_ours = torch.cat([t.reshape(-1) for t in torch.autograd.grad(ours, params)])
        grad_lyu = torch.cat([t.reshape(-1) for t in torch.autograd.grad(lyu, params)])
        rows.append({"model": "teacher" if k == probes else f"random {k}", "ours": ours.item(), "lyu_divergence": lyu.item(),
                     "abs_value_difference": abs(ours.item() + constant - lyu.item()),
                     "max_abs_gradient_difference": float((grad_ours - grad_lyu).abs().max()),
                     "max_abs_gradient": float(grad_ours.abs().max())})
    means = (p[:, None] * states).sum(0)
    score = lambda m: kl_divergence(truth, m, states)  # noqa: E731
    population: Loss = lambda m: gsm_expectation(m, p, states)  # noqa: E731
    fits = {}
    for name, make, objective in (
        ("from base-rate start", lambda: base_rate_start(setting.num_visible, setting.num_hidden, means, init_std=setting.init_std,
                                                         generator=torch.Generator().manual_seed(setting.seed + 1)), population),
        ("from base-rate RBM with W = 0", lambda: base_rate_start(setting.num_visible, setting.num_hidden, means, init_std=0.0,
                                                                  generator=torch.Generator()), population),
        ("from teacher", lambda: _copy(teacher), population),
        ("uncorrected form, from base-rate start", lambda: base_rate_start(
            setting.num_visible, setting.num_hidden, means, init_std=setting.init_std,
            generator=torch.Generator().manual_seed(setting.seed + 1)), lambda m: uncorrected_expectation(m, p, states)),
    ):
        model = make()
        kl_start = score(model)
        result = lbfgs(objective, model, score, max_iter=max_iter)
        fits[name] = {"kl_start": kl_start, "kl_fit": result["end"]["score"], "gradient_norm": result["end_gradient_norm"],
                      "evaluations": result["evaluations"], "stopped": result["stopped"]}
    return {"setting": asdict(setting), "constant_C": constant, "probes": rows,
            "gradient_norm_at_teacher": float(_gradient(population, teacher).norm()), "fits": fits}


def _gradient_statistics(losses: dict[str, BatchLoss], model: RBM, data: Tensor, toward: Tensor, batch_size: int) -> dict:
    """Per objective at ``model``: the full-sample gradient's norm, the root mean square deviation of the minibatch
    gradients from it (one pass in order), their ratio, and the cosine of −gradient with ``toward`` (teacher − start)."""
    out = {}
    for name, loss in losses.items():
        full = _gradient(lambda m: loss(m, data), model)
        batches = torch.stack([_gradient(lambda m: loss(m, data[rows]), model) for rows in torch.arange(data.shape[0]).split(batch_size)])
        noise = float((batches - full).square().sum(1).mean().sqrt())
        out[name] = {"full_norm": float(full.norm()), "minibatch_noise": noise, "signal_to_noise": float(full.norm()) / noise,
                     "cosine_to_teacher": float(-(full @ toward) / (full.norm() * toward.norm()))}
    return out


PRINCIPLES_GSM_GRID = (1e-4, 3e-4, 1e-3, 3e-3)
"""The Adam learning rates :data:`pfzoo.studies.principles.PRINCIPLES` searches for GSM."""


def finite_sample_study(setting: Setting, *, adam_rates=(1e-4, 1e-3, 3e-3, 1e-2), protocol_rates=(*PRINCIPLES_GSM_GRID, 1e-2),
                        sgd_rates=(("GSM", (0.01, 0.03, 0.1, 0.3)), ("pseudolikelihood", (0.1, 0.3))), epochs: int = 20,
                        batch_size: int = 100, every: int = 10, patience: int = 20, lbfgs_iter: int = 500,
                        line=(0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)) -> dict:
    """Step 3: a teacher RBM, ``setting.num_samples`` exact samples of it and the principles study's start (base rates
    of the sample, ``N(0, init_std²)`` weights). Measures the sample (states and flips never observed), the objective
    along start → teacher (sample and population), the gradients at the start beside pseudo-likelihood's, ratio
    matching's and exact maximum likelihood's, full-batch L-BFGS on the sample's GSM loss (from the start and from the
    teacher), on the population's and on eq. (1) with the empirical conditionals (bounded), the floor that
    pseudo-likelihood and maximum likelihood reach on the same sample, minibatch Adam and SGD trajectories, and the
    principles study's protocol (Adam, validation fifth, early stopping) for GSM, pseudo-likelihood and ratio matching,
    with the setting that protocol picks from :data:`PRINCIPLES_GSM_GRID`. At the teacher: each principle's per-row loss,
    its standard deviation under the teacher (exact) and the standard error of a ``num_samples``-row mean, and GSM's
    largest positive single-state term in the sample. Closure is ``1 − KL(teacher ‖ fit) / KL(teacher ‖ start)``."""
    V, H = setting.num_visible, setting.num_hidden
    teacher = teacher_rbm(V, H, scale=setting.scale, generator=torch.Generator().manual_seed(setting.seed))
    data = teacher.exact_samples(setting.num_samples, generator=torch.Generator().manual_seed(setting.seed + 1)).double()
    states, flips = binary_states(V), flip_indices(V)
    truth = log_probs(teacher, states)
    p, p_hat = truth.exp(), state_frequencies(data)
    make_start = lambda rows: base_rate_start(V, H, (rows.sum(0) + 1) / (rows.shape[0] + 2), init_std=setting.init_std,  # noqa: E731
                                              generator=torch.Generator().manual_seed(setting.seed + 2))
    start = make_start(data)
    kl = lambda m: kl_divergence(truth, m, states)  # noqa: E731
    kl_start = kl(start)
    closure = lambda value: 1 - value / kl_start  # noqa: E731
    seen = p_hat > 0
    unseen_flip = (~seen[flips]) & seen[:, None]
    sample = {"rows": setting.num_samples, "distinct_states": int(seen.sum()), "states": 2**V,
              "units_flipping": int(((data.min(0).values == 0) & (data.max(0).values == 1)).sum()),
              "observed_pairs_with_unobserved_flip": int(unseen_flip.sum()), "observed_pairs": int(seen.sum()) * V,
              "sample_share_with_an_unobserved_flip": float(p_hat[unseen_flip.any(1)].sum()),
              "kl_start": kl_start}

    gsm_sample: Loss = lambda m: gsm_expectation(m, p_hat, states)  # noqa: E731
    gsm_population: Loss = lambda m: gsm_expectation(m, p, states)  # noqa: E731
    landscape = []
    for t in line:
        m = _interpolate(start, teacher, t)
        with torch.no_grad():
            landscape.append({"t": t, "sample_loss": float(gsm_sample(m)), "population_loss": float(gsm_population(m)),
                              "lyu_divergence_to_sample": float(lyu_divergence(m, p_hat, states, flips)),
                              "unobserved_flip_term": float(unobserved_flip_term(m, p_hat, states, flips)), "kl": kl(m)})
    identity = max(abs(e["sample_loss"] + lyu_constant(p_hat, flips) + e["unobserved_flip_term"] - e["lyu_divergence_to_sample"])
                   for e in landscape)

    gsm, pl, rm = GeneralizedScoreMatching(), PseudoLikelihood(), RatioMatching()
    at_teacher = {}
    with torch.no_grad():
        for name, per_state in (("GSM", gsm.example_losses(teacher, states)), ("ratio matching", rm.example_losses(teacher, states)),
                                ("pseudolikelihood", torch.nn.functional.softplus(-teacher.flip_free_energy_gaps(states)).sum(1))):
            mean = float((p * per_state).sum())
            row_std = math.sqrt(max(float((p * per_state.square()).sum()) - mean**2, 0.0))
            at_teacher[name] = {"population": mean, "sample": float((p_hat * per_state).sum()), "row_std": row_std,
                                "standard_error": row_std / math.sqrt(setting.num_samples)}
            if name == "GSM":
                terms = p_hat * per_state
                top = int(terms.argmax())  # the largest positive term: a rare observed state with probable neighbours
                at_teacher[name].update(largest_term=float(terms[top]), largest_term_rows=round(float(p_hat[top]) * setting.num_samples),
                                        largest_term_row_loss=float(per_state[top]))
    batch_losses: dict[str, BatchLoss] = {
        "GSM": lambda m, b: gsm.loss(m, b), "pseudolikelihood": lambda m, b: pl.loss(m, b), "ratio matching": lambda m, b: rm.loss(m, b),
        "maximum likelihood": lambda m, b: exact_negative_log_likelihood(m, state_frequencies(b), states)}
    toward = (parameters_to_vector(teacher.parameters()) - parameters_to_vector(start.parameters())).detach()
    gradients = _gradient_statistics(batch_losses, start, data, toward, batch_size)

    full_batch = {}
    for name, objective, init in (
        ("GSM on the sample, from start", gsm_sample, start), ("GSM on the sample, from teacher", gsm_sample, teacher),
        ("GSM on the population (exact p), from start", gsm_population, start),
        ("eq. (1) with the sample's conditionals (bounded), from start", lambda m: lyu_divergence(m, p_hat, states, flips), start),
        ("pseudolikelihood on the sample, from start", lambda m: pseudolikelihood_expectation(m, p_hat, states), start),
        ("ratio matching on the sample, from start", lambda m: (p_hat * rm.example_losses(m, states)).sum(), start),
        ("maximum likelihood on the sample, from start", lambda m: exact_negative_log_likelihood(m, p_hat, states), start),
    ):
        result = lbfgs(objective, _copy(init), kl, max_iter=lbfgs_iter)
        result["closure_at_best"] = closure(result["best_score"]["score"])
        result["closure_at_end"] = closure(result["end"]["score"])
        full_batch[name] = result

    def summary(run: dict) -> dict:
        finite = [r for r in run["records"] if math.isfinite(r["kl"])]
        best = min(finite, key=lambda r: r["kl"])
        at = {u: next((r["kl"] for r in run["records"] if r["update"] == u), None) for u in (200, 1000)}
        return {"best_kl": best["kl"], "best_update": best["update"], "best_closure": closure(best["kl"]),
                "kl_at_200": at[200], "kl_at_1000": at[1000], "final_kl": run["records"][-1]["kl"],
                "final_update": run["records"][-1]["update"], "final_closure": closure(run["records"][-1]["kl"]),
                "non_finite_at": run["non_finite_at"], "seconds": run["seconds"]}

    trajectories = []
    runs = [("Adam", name, lr) for name in ("GSM", "pseudolikelihood", "ratio matching") for lr in adam_rates]
    runs += [("SGD", name, lr) for name, rates in sgd_rates for lr in rates]
    for optimizer, name, lr in runs:
        run = minibatch_trajectory(batch_losses[name], _copy(start), data, optimizer=optimizer, lr=lr, epochs=epochs,
                                   batch_size=batch_size, every=every, scores={"kl": kl},
                                   generator=torch.Generator().manual_seed(setting.seed + 3))
        trajectories.append({"principle": name, "optimizer": optimizer, "lr": lr, "epochs": epochs, **summary(run)})

    # The principles study's protocol: search on a validation fifth by exact validation log-likelihood (Adam, early
    # stopping every `every` updates with `patience`), then retrain on the whole sample for the kept number of updates.
    order = torch.randperm(data.shape[0], generator=torch.Generator().manual_seed(setting.seed + 4))
    cut = round(0.2 * data.shape[0])
    valid, train = data[order[:cut]], data[order[cut:]]
    protocol = []
    for name in ("GSM", "pseudolikelihood", "ratio matching"):
        for lr in protocol_rates:
            run = minibatch_trajectory(batch_losses[name], make_start(train), train, optimizer="Adam", lr=lr, epochs=epochs,
                                       batch_size=batch_size, every=every, generator=torch.Generator().manual_seed(setting.seed + 3),
                                       scores={"valid": lambda m: float(log_probs(m, states)[state_rows(valid)].mean()), "kl": kl})
            choice = early_stopping_choice(run["records"], key="valid", patience=patience, updates_per_epoch=run["updates_per_epoch"],
                                           non_finite_at=run["non_finite_at"])
            kept = next(r for r in run["records"] if r["update"] == choice["kept_update"])
            final = minibatch_trajectory(batch_losses[name], _copy(start), data, optimizer="Adam", lr=lr, epochs=epochs,
                                         batch_size=batch_size, every=max(choice["kept_update"], 1), scores={"kl": kl},
                                         generator=torch.Generator().manual_seed(setting.seed + 3), max_updates=choice["kept_update"])
            protocol.append({"principle": name, "lr": lr, **choice, "valid_log_likelihood": kept["valid"],
                             "search_kl": kept["kl"], "final_kl": final["records"][-1]["kl"],
                             "final_closure": closure(final["records"][-1]["kl"])})
    grid_choice = {}
    for name in ("GSM", "pseudolikelihood", "ratio matching"):
        searched = [r for r in protocol if r["principle"] == name and r["lr"] in PRINCIPLES_GSM_GRID]
        if searched:
            best = max(searched, key=lambda r: r["valid_log_likelihood"])
            grid_choice[name] = {"lr": best["lr"], "kept_update": best["kept_update"], "final_kl": best["final_kl"],
                                 "final_closure": best["final_closure"]}
    return {"setting": asdict(setting), "sample": sample, "landscape": landscape, "decomposition_error": identity,
            "loss_at_teacher": at_teacher, "gradients_at_start": gradients, "grid_choice": grid_choice, "full_batch": full_batch,
            "trajectories": trajectories, "protocol": protocol,
            "protocol_settings": {"batch_size": batch_size, "every": every, "patience": patience, "epochs": epochs,
                                  "validation_rows": cut}}

