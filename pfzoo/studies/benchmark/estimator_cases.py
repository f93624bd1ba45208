"""The estimator cases: how fast AIS, RAISE and HAIS run on the models of :mod:`pfzoo.studies.benchmark.workloads`.

AIS on a 784×500 binary RBM (``rbm_ais``) at 1,000 and at 10,000 chains: chain-steps per second, each against the
device's own matmul throughput for the same shapes measured in the same run (the matmul bound of
:mod:`pfzoo.studies.benchmark.timing`). The issue's aim: at least 0.5 of the bound at 10,000 chains on a GPU.

AIS on a 784–500–1000 DBM with random weights (``dbm_ais``), 1,000 chains from data base rates: chain-steps per
second against the same bound for its even/odd RBM (:meth:`pfzoo.models.DBM.even_odd_rbm`, weight ``[784 + 1000, 500]``),
whose two products are what one block-Gibbs step of the DBM's path needs with the odd layer summed out.

AIS on a 784×20 RBM in float64 (``rbm_ais_small``, 200 chains × 2,000 linear steps): a step there is bound by the
784 Bernoulli draws per chain rather than by the products; seconds, chain-steps per second and the same matmul
ratio, and against the ``rbms`` package's ``compute_partition_function_ais`` on the same RBM, settings and base in the
same run when ``import rbms`` works (an optional comparison, not a dependency; ``null`` otherwise): over 16
independent runs of each, timed in alternation, the RMSE of log Ẑ against the exact log Z (the 2²⁰ hidden states
summed) and the speedup at equal error, (t_rbms · MSE_rbms) / (t · MSE), for pfzoo's two choices of the summed layer.

The same comparison on the zoo's trained 784×20 MNIST RBMs (``rbm_ais_mnist20``, the issue's case: CD1(20) and PCD(20),
the exact log Z from their 2²⁰ hidden states), with pfzoo as a user calls it (``AIS(200, 2000)`` and the training
digits: their base rates and the fitted schedule) and with ``rbms``'s linear schedule; ``rbms`` anneals from the model's
own visible biases, its only base. It needs binarized MNIST under the data root and reports ``skipped`` without it.

RAISE on the RBM of ``rbm_ais`` (``rbm_raise``): test examples per second with M reverse chains each and K steps, all
examples × chains annealed as one batch, and the chain-steps per second that amounts to.

HAIS on a complete 36-dimensional Student-t product of experts (``poe_hais``) with 200 particles and N = 10⁵
intermediate distributions: wall seconds (the HAIS paper reports 170 s for this setting) and particle-steps per second.

Per-example HAIS of a generative model (``generative_hais``): 100 test vectors × 200 particles of a complete
36-dimensional Laplace-prior linear generative model, annealed from the prior to each posterior as one
20,000-row batch (HAIS eqs. 27–29) at N = 10⁴ distributions: examples per second and particle-steps per second.
"""

from __future__ import annotations

import importlib.metadata
from types import SimpleNamespace
from typing import Callable

import torch

from pfzoo.data.binarized_mnist import binarized_mnist
from pfzoo.estimators import AIS, HAIS, RAISE
from pfzoo.estimators.annealing import anneal
from pfzoo.logmath import summarize_log_weights
from pfzoo.models import RBM, LinearGenerative
from pfzoo.paths import build_from_base
from pfzoo.paths.schedules import make_betas
from pfzoo.studies.benchmark.timing import ais_rates, best_seconds, matmul_seconds_per_step, timed
from pfzoo.studies.benchmark.workloads import random_dbm, random_rbm, student_t_poe
from pfzoo.zoo import pretrained


def benchmark_rbm_ais(device: torch.device, num_visible=784, num_hidden=500, num_chains=(1000, 10_000), num_steps=1000, repeats=2) -> dict:
    """One run per chain count in ``num_chains``, each with its own matmul bound: ``runs[i]`` holds ``num_chains`` and
    :func:`ais_rates`' fields."""
    g = torch.Generator(device).manual_seed(0)
    model = random_rbm(num_visible, num_hidden, g, device)
    data = (torch.rand(500, num_visible, generator=g, device=device) < 0.2).float()
    runs = []
    for chains in num_chains:
        estimator = AIS(num_chains=chains, num_steps=num_steps, base="base_rate").to(device)
        ais_seconds = best_seconds(lambda: estimator(model, data=data, generator=g), device, repeats)
        matmul_seconds = matmul_seconds_per_step(model.weight.detach(), chains, g, device, repeats)
        runs.append({"num_chains": chains, **ais_rates(ais_seconds, matmul_seconds, num_visible, num_hidden, chains, num_steps)})
    return {
        "name": "rbm_ais",
        "shape": {"num_visible": num_visible, "num_hidden": num_hidden, "num_chains": list(num_chains), "num_steps": num_steps},
        "runs": runs,
    }


def benchmark_dbm_ais(device: torch.device, layer_sizes=(784, 500, 1000), num_chains=1000, num_steps=1000, repeats=2) -> dict:
    """AIS from data base rates on a DBM with weights N(0, 0.05²) and biases N(0, 1), against its even/odd RBM's matmul bound."""
    g = torch.Generator(device).manual_seed(0)
    model = random_dbm(layer_sizes, g, device)
    data = (torch.rand(500, layer_sizes[0], generator=g, device=device) < 0.2).float()
    estimator = AIS(num_chains=num_chains, num_steps=num_steps, base="base_rate").to(device)
    ais_seconds = best_seconds(lambda: estimator(model, data=data, generator=g), device, repeats)
    even_odd_weight = model.even_odd_rbm().weight.detach()  # [Σ n_even, Σ n_odd]
    matmul_seconds = matmul_seconds_per_step(even_odd_weight, num_chains, g, device, repeats)
    return {
        "name": "dbm_ais",
        "shape": {"layer_sizes": list(layer_sizes), "even_odd_weight": list(even_odd_weight.shape), "num_chains": num_chains, "num_steps": num_steps},
        **ais_rates(ais_seconds, matmul_seconds, *even_odd_weight.shape, num_chains, num_steps),
    }


def rbms_ais(model: RBM, num_chains: int, num_steps: int) -> tuple[Callable[[], float], str] | None:
    """A call of the ``rbms`` package's AIS (``num_steps + 1`` β's, its own base: the target's visible biases, W = 0,
    c = 0) on ``model``'s float64 parameters, returning its log Z, and the package's version; None when ``rbms`` does not
    import. It draws from torch's global generator, which is seeded here once."""
    try:
        from rbms.bernoulli_bernoulli import BBRBM
        from rbms.partition_function.ais import compute_partition_function_ais
    except ImportError:
        return None
    params = BBRBM(model.weight.detach().double(), model.visible_bias.detach().double(), model.hidden_bias.detach().double())
    torch.manual_seed(0)
    return (lambda: float(compute_partition_function_ais(num_chains=num_chains, num_beta=num_steps + 1, params=params))), \
        importlib.metadata.version("rbms")


def error_summary(errors: list[float], stderrs: list[float] | None = None) -> dict:
    """RMSE of ``errors`` (log Ẑ − log Z over independent runs) with its standard error (delta method on the mean of the
    squared errors), their mean and, when given, the mean of the runs' reported stderrs."""
    squares = torch.tensor(errors, dtype=torch.float64).square()
    mse = squares.mean().item()
    mse_stderr = squares.std().item() / len(errors) ** 0.5 if len(errors) > 1 else float("nan")
    return {"rmse": mse**0.5, "rmse_stderr": mse_stderr / (2 * mse**0.5) if mse > 0 else float("nan"), "mse": mse,
            "mse_stderr": mse_stderr, "mean_error": sum(errors) / len(errors),
            **({"mean_reported_stderr": sum(stderrs) / len(stderrs)} if stderrs else {})}


def equal_error_speedup(ours: dict, theirs: dict) -> dict:
    """``(t_theirs · MSE_theirs) / (t_ours · MSE_ours)``: AIS's MSE falls as 1/chains, so seconds × MSE is the cost of a
    given error; its standard error from the two MSEs' (independent runs; timing noise aside)."""
    ratio = theirs["mse"] / ours["mse"]
    relative = ((theirs["mse_stderr"] / theirs["mse"]) ** 2 + (ours["mse_stderr"] / ours["mse"]) ** 2) ** 0.5
    speedup = theirs["seconds"] / ours["seconds"] * ratio
    return {"speed_ratio": theirs["seconds"] / ours["seconds"], "mse_ratio": ratio, "mse_ratio_stderr": ratio * relative,
            "speedup_at_equal_error": speedup, "speedup_at_equal_error_stderr": speedup * relative}


def against_rbms(forms: dict[str, Callable[[], object]], rbms_run: Callable[[], float] | None, exact_log_z: float, repeats: int,
                 device: torch.device) -> dict:
    """``repeats`` runs of each of pfzoo's ``forms`` (each returning an estimate with ``log_z`` and ``stderr``) and of
    ``rbms_run`` (its log Z; skipped when None), in alternation, so that on shared cores whose speed drifts over a minute
    all see the same drift: per form the least seconds and :func:`error_summary` against ``exact_log_z``, and for
    pfzoo's forms :func:`equal_error_speedup` over ``rbms`` (under ``"rbms"`` when it ran)."""
    runs = {form: {"seconds": [], "errors": [], "stderrs": []} for form in (*forms, "rbms")}
    for _ in range(repeats):
        for form, run in forms.items():
            estimate, seconds = timed(run, device)
            runs[form]["seconds"].append(seconds)
            runs[form]["errors"].append(estimate.log_z - exact_log_z)
            runs[form]["stderrs"].append(estimate.stderr)
        if rbms_run is not None:
            log_z, seconds = timed(rbms_run, device)
            runs["rbms"]["seconds"].append(seconds)
            runs["rbms"]["errors"].append(log_z - exact_log_z)
    summaries = {form: {"seconds": min(run["seconds"]), **error_summary(run["errors"], run["stderrs"] or None)}
                 for form, run in runs.items() if run["seconds"]}
    for form in forms:
        if "rbms" in summaries:
            summaries[form]["over_rbms"] = equal_error_speedup(summaries[form], summaries["rbms"])
    return summaries


def benchmark_rbm_ais_small(device: torch.device, num_visible=784, num_hidden=20, num_chains=200, num_steps=2000, repeats=16) -> dict:
    """``repeats`` independent runs each of pfzoo's AIS with the hidden layer summed out (chains over visible states, the
    default), with the larger layer summed out (``marginalize="auto"``: chains over the 20 hidden units), and, when
    installed, ``rbms``'s, in alternation (:func:`against_rbms`).

    Same settings for both packages: float64, the linear schedule, ``num_chains`` × ``num_steps``, and the same base.
    ``rbms`` anneals from the model's own visible biases (W = 0, c = 0); this RBM's visible biases are the base-rate
    logits of its 500 data rows (:meth:`~pfzoo.models.RBM.init_from_data`, as a trained RBM starts), so that is pfzoo's
    ``base="base_rate"``. (With visible biases N(0, 1) and unrelated data, as this case had before, pfzoo started from a
    worse base than ``rbms``'s, and its RMSE was ten times ``rbms``'s.)"""
    g = torch.Generator(device).manual_seed(0)
    model = random_rbm(num_visible, num_hidden, g, device).double()
    data = (torch.rand(500, num_visible, generator=g, device=device) < 0.2).double()
    model.init_from_data(data)
    exact_log_z = model.log_partition().item()  # 2^20 hidden states summed
    estimators = {form: AIS(num_chains=num_chains, num_steps=num_steps, schedule="linear", base="base_rate", marginalize=form).to(device)
                  for form in ("hidden", "auto")}
    forms = {form: (lambda estimator=estimator: estimator(model, data=data, generator=g)) for form, estimator in estimators.items()}
    rbms_run = rbms_ais(model, num_chains, num_steps)
    summaries = against_rbms(forms, rbms_run and rbms_run[0], exact_log_z, repeats, device)
    matmul_seconds = matmul_seconds_per_step(model.weight.detach(), num_chains, g, device, 3)
    return {
        "name": "rbm_ais_small",
        "shape": {"num_visible": num_visible, "num_hidden": num_hidden, "num_chains": num_chains, "num_steps": num_steps,
                  "dtype": "float64", "schedule": "linear", "base": "data base rates = the model's visible biases", "repeats": repeats},
        **ais_rates(summaries["hidden"]["seconds"], matmul_seconds, num_visible, num_hidden, num_chains, num_steps),
        "exact_log_z": exact_log_z,
        "pfzoo_hidden_summed": summaries["hidden"],
        "pfzoo_auto": summaries["auto"],
        "rbms": summaries.get("rbms"),
        "rbms_version": None if rbms_run is None else rbms_run[1],
    }


MNIST_SMALL_RBMS = ("rbm-binarized_mnist-cd1-20", "rbm-binarized_mnist-pcd-20")
"""The zoo's 784×20 MNIST RBMs, the issue's case for the comparison with ``rbms`` (an exact log Z from 2²⁰ hidden states)."""


def rbms_base_ais(model: RBM, num_chains: int, num_steps: int, generator: torch.Generator):
    """pfzoo's AIS on the linear schedule from ``rbms``'s base (W = 0, the model's visible biases, c = 0), which
    :class:`~pfzoo.estimators.AIS` does not name: the path from that base and :func:`~pfzoo.estimators.annealing.anneal`.
    Returns ``log_z`` and ``stderr`` (:func:`~pfzoo.logmath.summarize_log_weights`'s) as an estimate names them."""
    base = RBM.from_tensors(torch.zeros_like(model.weight), model.visible_bias.detach(), torch.zeros_like(model.hidden_bias))
    path = build_from_base(model, base)
    log_weights = anneal(path, make_betas("linear", num_steps).to(model.device), path.sample_base(num_chains, generator=generator),
                         generator=generator).log_weights
    summary = summarize_log_weights(log_weights)
    return SimpleNamespace(log_z=(summary.log_mean + path.base_log_partition()).item(), stderr=summary.stderr.item())


def benchmark_rbm_ais_mnist20(device: torch.device, models=MNIST_SMALL_RBMS, num_chains=200, num_steps=2000, repeats=8,
                              data_root=None) -> dict:
    """AIS on the zoo's trained 784×20 MNIST RBMs (float64, ``num_chains`` × ``num_steps``) against ``rbms``: per model,
    ``repeats`` independent runs of each form in alternation (:func:`against_rbms`; ``rbms`` null when it does not
    import).

    Forms: ``pfzoo_defaults`` is ``AIS(num_chains, num_steps)`` as a user calls it with the training digits (its default
    base: their base rates; its default schedule, fitted to the path); ``pfzoo_linear`` the same base with ``rbms``'s
    linear schedule. ``rbms`` anneals from its own base, the model's visible biases with W = 0 and c = 0, and offers no
    other; ``pfzoo_rbms_base`` is pfzoo's annealing from that base on the linear schedule (:func:`rbms_base_ais`), the
    one-change ablation that separates the base's share of the gain from the engine's. The base rates come from
    binarized MNIST's training digits under ``data_root`` (``$PFZOO_DATA``); without them the case reports ``skipped``
    and why, and no numbers."""
    try:
        train = binarized_mnist(data_root).train
    except FileNotFoundError as error:
        return {"name": "rbm_ais_mnist20", "skipped": str(error).split(":")[0]}
    g = torch.Generator(device).manual_seed(0)
    estimators = {"pfzoo_defaults": AIS(num_chains=num_chains, num_steps=num_steps).to(device),
                  "pfzoo_linear": AIS(num_chains=num_chains, num_steps=num_steps, schedule="linear", base="base_rate").to(device)}
    data = train.to(device=device, dtype=torch.float64)
    results = {}
    for name in models:
        model = pretrained(name, map_location=device).double()
        exact_log_z = model.log_partition().item()
        forms = {form: (lambda estimator=estimator: estimator(model, data=data, generator=g)) for form, estimator in estimators.items()}
        forms["pfzoo_rbms_base"] = lambda: rbms_base_ais(model, num_chains, num_steps, g)
        rbms_run = rbms_ais(model, num_chains, num_steps)
        summaries = against_rbms(forms, rbms_run and rbms_run[0], exact_log_z, repeats, device)
        results[name] = {"exact_log_z": exact_log_z, **summaries, "rbms": summaries.get("rbms"),
                         "rbms_version": None if rbms_run is None else rbms_run[1]}
    return {
        "name": "rbm_ais_mnist20",
        "shape": {"num_visible": 784, "num_hidden": 20, "num_chains": num_chains, "num_steps": num_steps, "dtype": "float64",
                  "repeats": repeats},
        "models": results,
    }


def benchmark_rbm_raise(device: torch.device, num_visible=784, num_hidden=500, num_examples=100, num_chains=10, num_steps=1000) -> dict:
    """RAISE's log-likelihood of ``num_examples`` random binary vectors ``[B, V]`` under the RBM of ``rbm_ais``, one timed
    run (the case is long enough that a warm-up would be a negligible part)."""
    g = torch.Generator(device).manual_seed(0)
    model = random_rbm(num_visible, num_hidden, g, device)
    data = (torch.rand(num_examples, num_visible, generator=g, device=device) < 0.2).float()
    estimator = RAISE(num_chains=num_chains, num_steps=num_steps).to(device)
    seconds = best_seconds(lambda: estimator.log_likelihood(model, data, generator=g), device, repeats=1)
    return {
        "name": "rbm_raise",
        "shape": {"num_visible": num_visible, "num_hidden": num_hidden, "num_examples": num_examples,
                  "num_chains": num_chains, "num_steps": num_steps},
        "seconds": seconds,
        "examples_per_second": num_examples / seconds,
        "chain_steps_per_second": num_examples * num_chains * num_steps / seconds,
    }


def benchmark_poe_hais(device: torch.device, dim=36, num_chains=200, num_steps=100_000) -> dict:
    """One HAIS run on the Student-t product of experts (:func:`~pfzoo.studies.benchmark.workloads.student_t_poe`) and its
    log Z error against the model's exact log Z."""
    g = torch.Generator(device).manual_seed(0)
    model = student_t_poe(g, device, dim)
    estimator = HAIS(num_chains, num_steps, 0.2, base="isotropic").to(device)
    estimate, seconds = timed(lambda: estimator(model, generator=g), device)
    return {
        "name": "poe_hais",
        "shape": {"dim": dim, "num_chains": num_chains, "num_steps": num_steps},
        "seconds": seconds,
        "paper_seconds": 170.0,
        "particle_steps_per_second": num_chains * num_steps / seconds,
        "log_z_error": estimate.log_z - model.log_partition().item(),
        "log_z_stderr": estimate.stderr,
    }


def benchmark_generative_hais(device: torch.device, dim=36, num_examples=100, num_particles=200, num_steps=10_000) -> dict:
    """Per-example HAIS over the latents of a complete Laplace-prior linear generative model (HAIS eqs. 27–29):
    all examples × particles (20,000 rows) annealed as one batch."""
    g = torch.Generator(device).manual_seed(0)
    basis = torch.eye(dim, device=device) + 0.3 * torch.randn(dim, dim, generator=g, device=device) / dim**0.5
    model = LinearGenerative.from_tensors(basis, prior="laplace", noise_std=0.1)
    data = model.sample(num_examples, generator=g)
    estimator = HAIS(num_particles, num_steps, 0.05).to(device)
    estimate, seconds = timed(lambda: estimator.log_likelihood(model, data, generator=g), device)
    return {
        "name": "generative_hais",
        "shape": {"dim": dim, "num_examples": num_examples, "num_particles": num_particles, "num_steps": num_steps},
        "seconds": seconds,
        "examples_per_second": num_examples / seconds,
        "particle_steps_per_second": num_examples * num_particles * num_steps / seconds,
        "mean_log_likelihood": estimate.mean,
        "stderr": estimate.stderr,
    }
