"""RAISE Figure 5 and its mass diagnosis (Burda, Grosse & Salakhutdinov 2015, §5.1), and why a uniform start can fail.

The paper's mnistCD1-20 RBM put 93 % of its probability mass on one hidden configuration, and its annealing model
p_ann (the distribution of forward AIS's final state) fitted the test digits better than the RBM (RAISE above AIS at
small K); Figure 5 shows 10 samples of each. Its mnistCD1-500 RBM gave a 44-nat AIS − RAISE gap from a uniform start
(Table 1, Figure 4). This module measures what those claims rest on, for any binary RBM:

- :func:`annealed_states`: forward AIS from a base (``x_0 ~ p_0``, ``x_k ~ T_k(· | x_{k−1})``, k = 1..K) returning the
  final visible states, which are draws of p_ann, and the chains' log importance weights, with which the same states
  are properly weighted draws of the RBM (``T_K`` leaves ``p_K`` invariant, so the last transition keeps them so);
- :func:`hidden_log_f`: ``log f(h) = c·h + Σ_i softplus((Wh + b)_i)``, the RBM's unnormalised marginal of h, so that
  ``p(h) = f(h) / Z``;
- :func:`exact_mass`: by enumerating every hidden configuration, the mass of the most probable ones and the entropy of
  p(h) (models with a small hidden layer);
- :func:`estimated_mass`: the same read from (weighted) draws of h: the entropy ``H = log Z − E_p[log f(h)]`` and the
  mass ``f(h*) / Z`` of the best local maximum h* of log f that single-flip ascent (:func:`ascend`) reaches from the
  draws.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from pfzoo import paths
from pfzoo.estimators.annealing import anneal
from pfzoo.logmath import summarize_log_weights
from pfzoo.models.enumeration import binary_configurations
from pfzoo.paths import make_betas

ASCENT_STARTS = 32
"""Distinct draws, the highest in log f, that :func:`estimated_mass` climbs from."""
_ROWS_PER_CHUNK = 8  # rows of the [rows, V, H] flip-gain tensor of one ascent step (8 × 784 × 500 float64: 25 MB)


@torch.no_grad()
def annealed_states(model, num_chains: int, num_steps: int, *, base: str, base_data: torch.Tensor | None = None,
                    schedule: str = "linear", generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(visible [num_chains, V], log_weights [num_chains] float64)`` of forward AIS with K = ``num_steps`` along the
    geometric path from ``base`` ("uniform" or "base_rate", fitted to ``base_data [N, V]``).

    The states are x_K, after K transitions (the last one at β_K = 1, which the AIS estimator skips since it moves no
    weight): unweighted, draws of p_ann, the model RAISE's estimate bounds (RAISE §3.1); weighted by
    ``exp(log_weights)``, draws of the RBM. ``log_weights`` include ``log Z_0``, so their log-mean-exp is AIS's log Ẑ."""
    path, _ = paths.build(model, kind="geometric", base=base, data=base_data)
    betas = make_betas(schedule, num_steps)
    result = anneal(path, betas, path.sample_base(num_chains, generator=generator), generator=generator)
    state, _ = path.transition(result.state, float(betas[-1]), generator=generator)
    return state.position, result.log_weights + path.base_log_partition()


def hidden_log_f(model, hidden: torch.Tensor) -> torch.Tensor:
    """``log f(h) = c·h + Σ_i softplus((W h + b)_i)`` for ``hidden [N, H]`` → float64 ``[N]``: the RBM's unnormalised
    marginal of the hidden layer (the visible units summed out), ``p(h) = f(h) / Z``."""
    hidden = hidden.double()
    return hidden @ model.hidden_bias.double() + F.softplus(hidden @ model.weight.double().T + model.visible_bias.double()).sum(-1)


@torch.no_grad()
def exact_mass(model, top: int = 10) -> dict:
    """By enumerating the 2^H hidden configurations (H ≤ 24): ``log_z``, the masses ``p(h)`` of the ``top`` most probable
    configurations (descending), their sum, the entropy of p(h) in nats, and the most probable configuration."""
    if model.num_hidden > 24:
        raise ValueError(f"exact_mass enumerates the hidden layer: model.num_hidden must be at most 24, got {model.num_hidden}")
    states = binary_configurations(model.num_hidden, dtype=torch.float64, device=model.device)
    log_f = torch.cat([hidden_log_f(model, chunk) for chunk in states.split(1 << 14)])
    log_z = torch.logsumexp(log_f, 0)
    log_p = log_f - log_z
    best = torch.topk(log_p, top)
    masses = best.values.exp()
    return {"log_z": log_z.item(), "top_masses": masses.tolist(), "top_total": masses.sum().item(),
            "entropy": -(log_p.exp() * log_p).sum().item(), "mode": states[best.indices[0]].to(torch.int8).tolist()}


@torch.no_grad()
def ascend(model, hidden: torch.Tensor, max_flips: int = 10_000) -> torch.Tensor:
    """Steepest single-flip ascent on :func:`hidden_log_f` from each row of ``hidden [N, H]``: each step flips, in every
    row, the unit whose flip raises log f most, until no flip raises it → local maxima ``[N, H]`` (float64). Flipping
    unit j changes the visible inputs ``a = W h + b`` by ``s_j W[:, j]``, ``s_j = 1 − 2 h_j``, so its gain is
    ``s_j c_j + Σ_i [softplus(a_i + s_j W_ij) − softplus(a_i)]``."""
    weight, hidden_bias = model.weight.double(), model.hidden_bias.double()
    maxima = []
    for rows in hidden.double().split(_ROWS_PER_CHUNK):
        rows = rows.clone()
        for _ in range(max_flips):
            inputs = rows @ weight.T + model.visible_bias.double()
            signs = 1 - 2 * rows
            moved = F.softplus(inputs[:, :, None] + signs[:, None, :] * weight[None]) - F.softplus(inputs)[:, :, None]
            gains = signs * hidden_bias + moved.sum(1)
            best_gain, best_unit = gains.max(1)
            climbing = best_gain > 1e-12
            if not climbing.any():
                break
            flip = torch.zeros_like(rows).scatter_(1, best_unit[:, None], 1.0) * climbing[:, None]
            rows = (rows + flip * signs).round()
        maxima.append(rows)
    return torch.cat(maxima)


@torch.no_grad()
def estimated_mass(model, hidden: torch.Tensor, log_weights: torch.Tensor | None, log_z: float) -> dict:
    """From draws ``hidden [N, H]`` of p(h), each with ``log_weights [N]`` (``None``: equal weights, exact draws) and the
    RBM's ``log_z``: the entropy of p(h) as ``log Z − Σ_n w̄_n log f(h_n)`` (``w̄`` the normalised weights) with its
    standard error ``(Σ_n w̄_n² (log f(h_n) − mean)²)^½`` (log Z held fixed), the best
    local maximum h* of log f that :func:`ascend` reaches from the :data:`ASCENT_STARTS` distinct draws highest in log f,
    its mass ``f(h*) / Z`` (log₁₀ too, as it may underflow), the weighted share of the draws equal to it, the ESS, and h*
    itself (``mode``, 0/1 list)."""
    log_f = hidden_log_f(model, hidden)
    weights = torch.full_like(log_f, 1.0 / log_f.numel()) if log_weights is None else torch.softmax(log_weights.double(), 0)
    distinct = torch.unique(hidden.round(), dim=0)
    starts = distinct[torch.topk(hidden_log_f(model, distinct), min(ASCENT_STARTS, distinct.shape[0])).indices]
    maxima = ascend(model, starts)
    peaks = hidden_log_f(model, maxima)
    mode = maxima[peaks.argmax()]
    log_mass = peaks.max().item() - log_z
    share = weights[(hidden.round() == mode).all(1)].sum().item()
    ess = (summarize_log_weights(log_weights.double()).ess.item() if log_weights is not None else float(log_f.numel()))
    mean_log_f = (weights * log_f).sum()
    spread = (weights.square() * (log_f - mean_log_f).square()).sum().sqrt().item()  # self-normalised IS error, log Z fixed
    return {"entropy": log_z - mean_log_f.item(), "entropy_stderr": spread, "mode_mass": math.exp(log_mass), "mode_log10_mass": log_mass / math.log(10),
            "mode_share_of_draws": share, "mode_active_units": int(mode.sum().item()), "distinct_draws": int(distinct.shape[0]),
            "distinct_maxima": int(torch.unique(maxima, dim=0).shape[0]), "draws": int(log_f.numel()), "ess": ess,
            "mode": mode.to(torch.int8).tolist()}


@torch.no_grad()
def draw_summary(model, hidden: torch.Tensor, mode: torch.Tensor) -> dict:
    """Unweighted draws ``hidden [N, H]`` (of the RBM or of p_ann, h ~ p(h | v) from their visible states) against the
    RBM's most probable configuration ``mode [H]``: the share of draws on it, the number of distinct configurations,
    and the mean of log f(h)."""
    return {"draws": int(hidden.shape[0]), "mode_share": (hidden.round() == mode).all(1).double().mean().item(),
            "distinct": int(torch.unique(hidden.round(), dim=0).shape[0]), "mean_log_f_h": hidden_log_f(model, hidden).mean().item()}


def annealing_summary(model, visible: torch.Tensor, log_weights: torch.Tensor, test: torch.Tensor) -> dict:
    """One forward annealing run's log Ẑ (± its delta-method stderr), ESS, the mean test log-likelihood it implies
    (``mean log f(v_test) − log Ẑ``), and the mean of ``log f(v)`` over its final states unweighted (p_ann) and
    importance-weighted (the RBM): where p_ann's mass sits against the RBM's."""
    summary = summarize_log_weights(log_weights.double())
    log_f = model.unnormalized_log_prob(visible).double()
    return {"log_z": summary.log_mean.item(), "log_z_stderr": summary.stderr.item(), "ess": summary.ess.item(),
            "chains": int(log_weights.numel()), "test_log_likelihood": model.unnormalized_log_prob(test).double().mean().item() - summary.log_mean.item(),
            "p_ann_mean_log_f_v": log_f.mean().item(), "weighted_mean_log_f_v": (torch.softmax(log_weights.double(), 0) * log_f).sum().item()}


def resample(visible: torch.Tensor, log_weights: torch.Tensor, count: int, generator: torch.Generator | None) -> torch.Tensor:
    """``count`` rows of ``visible [N, V]`` drawn with replacement in proportion to ``exp(log_weights)``: approximate draws
    of the RBM from importance-weighted ones (as good as the weights' ESS)."""
    picks = torch.multinomial(torch.softmax(log_weights.double(), 0), count, replacement=True, generator=generator)
    return visible[picks]


@torch.no_grad()
def mode_search(model, data: torch.Tensor, log_z: float, num_digits: int = 64) -> dict:
    """The most probable hidden configurations that ascent reaches from outside any annealing run: :func:`ascend` from
    h = 0, from h = 1 and from the most probable h given each of the first ``num_digits`` rows of ``data [N, V]``
    (``p(h_j = 1 | v) > ½``). Returns the best maximum's mass ``f(h*) / Z`` (and log₁₀) for the given ``log_z``, its
    active units, the number of distinct maxima reached, and ``mode`` (0/1 list): a mode that annealing chains miss
    shows here with a mass they cannot account for."""
    hidden = model.hidden_probs(data[:num_digits].to(model.dtype)) > 0.5
    starts = torch.cat([torch.zeros(1, model.num_hidden), torch.ones(1, model.num_hidden), hidden.cpu().float()]).to(model.weight)
    maxima = torch.unique(ascend(model, starts), dim=0)
    peaks = hidden_log_f(model, maxima)
    mode = maxima[peaks.argmax()]
    log_mass = peaks.max().item() - log_z
    return {"mode_mass": math.exp(log_mass), "mode_log10_mass": log_mass / math.log(10), "mode_active_units": int(mode.sum().item()),
            "distinct_maxima": int(maxima.shape[0]), "starts": int(starts.shape[0]), "mode": mode.to(torch.int8).tolist()}
