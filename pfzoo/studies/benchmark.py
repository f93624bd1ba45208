"""Benchmark cases: speed measurements returned as dicts that ``scripts/benchmark.py`` writes as JSON (never asserted in
unit tests).

Each case is a function ``case(device, **sizes) -> dict`` (its ``name``, the ``shape`` it ran and its timings);
:data:`BENCHMARKS` maps a case's name to it and to a one-line summary of its result.

The sizes named below are the issue's, run on CUDA; on CPU the cases of :data:`CPU_SIZES` run fewer steps or
chains so the whole run takes minutes. Every case records the sizes it actually ran in its ``shape``; the ``machine``
block the script writes records the device's name (the GPU, or the CPU model), torch's version and its threads. Timed CUDA regions end
in ``torch.cuda.synchronize`` before the clock is read (:func:`best_seconds`, :func:`timed`) and hold no other host
sync of the benchmark's own; what the library does inside a call (an estimator reducing its weights to a float
estimate, an objective validating its batch) is part of what is measured.

HAIS on a complete 36-dimensional Student-t product of experts with 200 particles and N = 10⁵
intermediate distributions: wall seconds (the HAIS paper reports 170 s for this setting) and particle-steps per second.

AIS on a 784×500 binary RBM (``rbm_ais``) at 1,000 and at 10,000 chains: chain-steps per second, each against the
device's own matmul throughput for the same shapes measured in the same run. One AIS step needs the products
``[N,V]·[V,H]`` and ``[N,H]·[H,V]``; the "matmul bound" is the rate at which the device does just those two, so
``fraction_of_matmul_bound = matmul seconds per step / AIS seconds per step`` (1.0 = no overhead). The issue's aim:
at least 0.5 at 10,000 chains on a GPU.

AIS on a 784–500–1000 DBM with random weights (``dbm_ais``), 1,000 chains from data base rates: chain-steps per
second against the same bound for its even/odd RBM (:meth:`pfzoo.models.DBM.even_odd_rbm`, weight ``[784 + 1000, 500]``),
whose two products are what one block-Gibbs step of the DBM's path needs with the odd layer summed out.

AIS on a 784×20 RBM in float64 (``rbm_ais_small``, 200 chains × 2,000 linear steps): a step there is bound by the
784 Bernoulli draws per chain rather than by the products; seconds, chain-steps per second and the same matmul
ratio, and the seconds of the ``rbms`` package's ``compute_partition_function_ais`` on the same RBM and settings
in the same run when ``import rbms`` works (an optional comparison, not a dependency; ``null`` otherwise), the two timed
in alternation (the least of three runs each, and the ratio in each pair), with both estimates' errors against the
exact log Z (the 2²⁰ hidden states summed).

AIS with its annealing step under ``torch.compile`` (``rbm_ais_compiled``, ``AIS(compile=True)``) on the RBM of
``rbm_ais`` at 1,000 chains, and likewise HAIS on the product of experts of ``poe_hais`` (``poe_hais_compiled``) and
RAISE on the examples of ``rbm_raise`` (``rbm_raise_compiled``): compiled and eager seconds after a warm-up, their ratio
``compiled_over_eager``, the first compiled call's seconds (the compilation) and the two estimates' difference against
the standard error.

RAISE on the same RBM: test examples per second with M reverse chains each and K steps, all
examples × chains annealed as one batch, and the chain-steps per second that amounts to.

PCD-1 training of a 784×500 RBM (``rbm_pcd``): :class:`pfzoo.training.PCD` with 100 persistent chains and SGD
(the ``trainer=pcd`` settings) on minibatches of 100, 500 optimizer steps (one epoch of binarized MNIST's 50,000
training digits; random binary digits here): optimizer steps per second and examples per second.

The same training steps for the sampler-based principles beside PCD: PT-SML (``rbm_pt``, 10 replicas of the 100 chains on
a geometric ladder from β = 0.1, advanced as one batch, one exchange round per update), FPCD-1 (``rbm_fpcd``) and naive
MCMC (``rbm_naive_mcmc``, 100 fresh chains burned in 100 Gibbs steps per update): steps and examples per second each.
NCE and self-contrastive training of the same 784×500 RBM (``rbm_nce``, ``rbm_self_contrastive``): optimizer steps and
examples per second under the ``trainer=nce`` settings (ν = 10 fresh base-rate noise draws per example, SGD with the
normaliser c) and the ``trainer=self_contrastive`` ones (100 persistent chains of the frozen copy, one Gibbs sweep per
update), on the same minibatches as ``rbm_pcd``; the noise is fitted and the copy frozen before the clock starts.

The same training steps for the bit-flip and conditional principles: ratio matching over all 784 single flips
(``rbm_ratio_matching``) and over 50 importance-sampled units per example, half of the draws on its ones
(``rbm_stochastic_ratio_matching``), generalized score matching (``rbm_generalized_score_matching``) and generalized
pseudo-likelihood over blocks of 4 pixels, each block's 16 configurations enumerated (``rbm_generalized_pseudolikelihood``,
a ``[B, 196, 16, 500]`` tensor of hidden inputs per step): steps and examples per second each.

Score matching on the complete 36-d Student-t product of experts of ``poe_hais``, fitted to minibatches of 500 of its own
exact samples with Adam (the ``trainer=score_matching`` family's settings): score matching with the model's analytic
score and Laplacian (``poe_score_matching``; ``analytic=False`` times autograd's 36 backward passes instead), denoising
score matching at σ = 0.1 (``poe_denoising_score_matching``) and sliced score matching with one Rademacher direction
(``poe_sliced_score_matching``), and NCE with ν = 10 draws of the fitted base per example (``poe_nce``): steps and
examples per second each.

MPF on an Ising model (``ising_mpf``): 20,000 samples of the 10×10 periodic spin glass
(:func:`pfzoo.data.spin_glass`), a fully connected 100-unit model in float64: full-batch
``BitFlipMPF`` loss + gradient evaluations per second, and L-BFGS (strong Wolfe) iterations per second
from the independent-units start, with the coupling error ε_J reached (the thesis: ε_J 0.0172 in ~60 s).

Gibbs sampling of Ising models (``ising_gibbs``): chain-sweeps per second (sweeps/s × chains) with 1000
chains, for the 10×10 lattice (checkerboard: two blocks) and a dense 100-unit model (100 single-unit blocks).

MPF on a 784×500 RBM (``rbm_mpf``): examples per second of ``BitFlipMPF`` loss + backward on minibatches
of 100, summing all 784 single flips and sampling 50 of them.

Per-example HAIS of a generative model (``generative_hais``): 100 test vectors × 200 particles of a complete
36-dimensional Laplace-prior linear generative model, annealed from the prior to each posterior as one
20,000-row batch (HAIS eqs. 27–29) at N = 10⁴ distributions: examples per second and particle-steps per second.

AIS sharded across ``torch.distributed`` ranks (``distributed_ais``): the 784×500 float32 RBM, 512 chains × 500 steps, on
1 and then 2 CPU ranks of one thread each (processes started as ``torchrun`` starts them, gloo over localhost, whatever
``--device`` is): each run's chain-steps per second, the speed-up, and whether both gave the same log Z to the last
bit (they must: a chain's random stream depends on the seed and its block only; pfzoo/distributed.py).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

from pfzoo.data import spin_glass, spin_glass_model
from pfzoo.estimators import AIS, HAIS, RAISE
from pfzoo.estimators.base import PartitionEstimate
from pfzoo.models import DBM, RBM, Ising, LinearGenerative, ProductOfExperts
from pfzoo.studies.ising_recovery import coupling_error
from pfzoo.training import (
    FPCD,
    NCE,
    PCD,
    PT,
    BitFlipMPF,
    DenoisingScoreMatching,
    GeneralizedPseudoLikelihood,
    GeneralizedScoreMatching,
    NaiveMCMC,
    RatioMatching,
    ScoreMatching,
    SelfContrastive,
    SlicedScoreMatching,
)
from pfzoo.validation import values_checked


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_seconds(fn, device: torch.device, repeats: int) -> float:
    """Minimum wall time of ``fn()`` over ``repeats`` calls after one warm-up call."""
    fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return min(times)


def timed(fn, device: torch.device):
    """``fn()``'s result and wall seconds, for runs long enough that a warm-up call would be a negligible part."""
    synchronize(device)
    start = time.perf_counter()
    result = fn()
    synchronize(device)
    return result, time.perf_counter() - start


def random_rbm(num_visible: int, num_hidden: int, g: torch.Generator, device: torch.device) -> RBM:
    """Weights N(0, 0.05²), biases N(0, 1), drawn from ``g`` in that order (the RBM every RBM benchmark times)."""
    return RBM.from_tensors(torch.randn(num_visible, num_hidden, generator=g, device=device) * 0.05,
                            torch.randn(num_visible, generator=g, device=device), torch.randn(num_hidden, generator=g, device=device))


def matmul_seconds_per_step(weight: torch.Tensor, num_chains: int, g: torch.Generator, device: torch.device, repeats: int) -> float:
    """Seconds of the two products of an RBM AIS step, ``[N,V]·[V,H]`` and ``[N,H]·[H,V]``, in ``weight``'s dtype."""
    num_visible, num_hidden = weight.shape
    visible = torch.rand(num_chains, num_visible, generator=g, device=device).to(weight.dtype)
    hidden = torch.rand(num_chains, num_hidden, generator=g, device=device).to(weight.dtype)
    matmuls = 20

    def two_matmuls():
        for _ in range(matmuls):
            visible @ weight
            hidden @ weight.T

    return best_seconds(two_matmuls, device, repeats) / matmuls


def ais_rates(ais_seconds: float, matmul_seconds: float, num_visible: int, num_hidden: int, num_chains: int, num_steps: int) -> dict:
    """What every RBM AIS case reports: its seconds and chain-steps per second against the matmul bound of the module docstring."""
    return {
        "seconds": ais_seconds,
        "chain_steps_per_second": num_chains * num_steps / ais_seconds,
        "matmul_bound_chain_steps_per_second": num_chains / matmul_seconds,
        "fraction_of_matmul_bound": matmul_seconds / (ais_seconds / num_steps),
        "matmul_gflops": 2 * 2 * num_chains * num_visible * num_hidden / matmul_seconds / 1e9,
    }


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
    weights = [torch.randn(lower, upper, generator=g, device=device) * 0.05 for lower, upper in zip(layer_sizes[:-1], layer_sizes[1:])]
    model = DBM.from_tensors(weights, [torch.randn(size, generator=g, device=device) for size in layer_sizes])
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


def benchmark_rbm_ais_small(device: torch.device, num_visible=784, num_hidden=20, num_chains=200, num_steps=2000, repeats=3) -> dict:
    """pfzoo's AIS and, when installed, ``rbms``'s, timed in alternation (``repeats`` pairs after a warm-up of pfzoo's):
    on shared cores whose speed drifts over a minute, both see the same drift. Ratios of the least times and per pair."""
    g = torch.Generator(device).manual_seed(0)
    model = random_rbm(num_visible, num_hidden, g, device).double()
    data = (torch.rand(500, num_visible, generator=g, device=device) < 0.2).double()
    estimator = AIS(num_chains=num_chains, num_steps=num_steps, schedule="linear", base="base_rate").to(device)
    estimate = estimator(model, data=data, generator=g)  # also the warm-up
    exact_log_z = model.log_partition().item()  # 2^20 hidden states summed
    rbms_run = rbms_ais(model, num_chains, num_steps)
    ours, theirs, rbms_log_z = [], [], None
    for _ in range(repeats):
        ours.append(timed(lambda: estimator(model, data=data, generator=g), device)[1])
        if rbms_run is not None:
            log_z, seconds = timed(rbms_run[0], device)
            rbms_log_z = log_z if rbms_log_z is None else rbms_log_z
            theirs.append(seconds)
    ais_seconds = min(ours)
    matmul_seconds = matmul_seconds_per_step(model.weight.detach(), num_chains, g, device, repeats)
    return {
        "name": "rbm_ais_small",
        "shape": {"num_visible": num_visible, "num_hidden": num_hidden, "num_chains": num_chains, "num_steps": num_steps,
                  "dtype": "float64", "schedule": "linear"},
        **ais_rates(ais_seconds, matmul_seconds, num_visible, num_hidden, num_chains, num_steps),
        "exact_log_z": exact_log_z,
        "log_z_error": estimate.log_z - exact_log_z,
        "log_z_stderr": estimate.stderr,
        "rbms_seconds": min(theirs) if theirs else None,
        "rbms_log_z_error": None if rbms_log_z is None else rbms_log_z - exact_log_z,
        "rbms_version": None if rbms_run is None else rbms_run[1],
        "speedup_over_rbms": min(theirs) / ais_seconds if theirs else None,
        "speedup_per_pair": [their / our for our, their in zip(ours, theirs)] if theirs else None,
    }


def compiled_against_eager(name: str, shape: dict, build, run, device: torch.device, repeats: int) -> dict:
    """One estimator eager and under ``torch.compile`` (``build(compile) -> estimator``, ``run(estimator, generator) ->
    estimate`` with ``.value`` and ``.stderr`` read through :func:`_value`): the first compiled call's seconds
    (compilation included), the least seconds of each after a warm-up, ``compiled_over_eager`` (below 1, compiled is
    faster) and the two estimates' difference against the eager standard error (the same seed: equal up to the
    compiled kernels' rounding)."""
    runs = {}
    for compile in (False, True):
        estimator = build(compile).to(device)
        estimate, first_seconds = timed(lambda: run(estimator, torch.Generator(device).manual_seed(1)), device)
        seconds = best_seconds(lambda: run(estimator, torch.Generator(device).manual_seed(2)), device, repeats)
        runs["compiled" if compile else "eager"] = {"first_call_seconds": first_seconds, "seconds": seconds, "estimate": estimate}
    eager, compiled = runs["eager"], runs["compiled"]
    return {
        "name": name,
        "shape": shape,
        "eager_seconds": eager["seconds"],
        "compiled_seconds": compiled["seconds"],
        "compiled_first_call_seconds": compiled["first_call_seconds"],
        "compiled_over_eager": compiled["seconds"] / eager["seconds"],
        "estimate_difference": _value(compiled["estimate"]) - _value(eager["estimate"]),
        "stderr": eager["estimate"].stderr,
    }


def _value(estimate) -> float:
    """The number an estimate reports: ``log_z`` of a partition estimate, ``mean`` of a likelihood estimate."""
    return estimate.log_z if isinstance(estimate, PartitionEstimate) else estimate.mean


def benchmark_rbm_ais_compiled(device: torch.device, num_visible=784, num_hidden=500, num_chains=1000, num_steps=1000, repeats=2) -> dict:
    """``AIS(compile=True)`` against eager AIS from data base rates on the RBM of ``rbm_ais`` (:func:`compiled_against_eager`)."""
    g = torch.Generator(device).manual_seed(0)
    model = random_rbm(num_visible, num_hidden, g, device)
    data = (torch.rand(500, num_visible, generator=g, device=device) < 0.2).float()
    return compiled_against_eager(
        "rbm_ais_compiled", {"num_visible": num_visible, "num_hidden": num_hidden, "num_chains": num_chains, "num_steps": num_steps},
        lambda compile: AIS(num_chains=num_chains, num_steps=num_steps, base="base_rate", compile=compile),
        lambda estimator, generator: estimator(model, data=data, generator=generator), device, repeats)


def benchmark_poe_hais_compiled(device: torch.device, dim=36, num_chains=200, num_steps=10_000, repeats=2) -> dict:
    """``HAIS(compile=True)`` against eager HAIS on the Student-t product of experts of ``poe_hais``."""
    model = _poe_student(torch.Generator(device).manual_seed(0), device, dim)
    return compiled_against_eager(
        "poe_hais_compiled", {"dim": dim, "num_chains": num_chains, "num_steps": num_steps},
        lambda compile: HAIS(num_chains, num_steps, 0.2, base="isotropic", compile=compile),
        lambda estimator, generator: estimator(model, generator=generator), device, repeats)


def benchmark_rbm_raise_compiled(device: torch.device, num_visible=784, num_hidden=500, num_examples=100, num_chains=10,
                                 num_steps=1000, repeats=2) -> dict:
    """``RAISE(compile=True)`` against eager RAISE on the RBM and examples of ``rbm_raise``."""
    g = torch.Generator(device).manual_seed(0)
    model = random_rbm(num_visible, num_hidden, g, device)
    data = (torch.rand(num_examples, num_visible, generator=g, device=device) < 0.2).float()
    return compiled_against_eager(
        "rbm_raise_compiled", {"num_visible": num_visible, "num_hidden": num_hidden, "num_examples": num_examples,
                               "num_chains": num_chains, "num_steps": num_steps},
        lambda compile: RAISE(num_chains=num_chains, num_steps=num_steps, compile=compile),
        lambda estimator, generator: estimator.log_likelihood(model, data, generator=generator), device, repeats)


def benchmark_rbm_raise(device: torch.device, num_visible=784, num_hidden=500, num_examples=100, num_chains=10, num_steps=1000) -> dict:
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


def _poe_student(g: torch.Generator, device: torch.device, dim: int) -> ProductOfExperts:
    """The ``dim``-d Student-t product of experts the HAIS cases anneal, drawn from ``g``: filters near the identity,
    shapes in [1.5, 3.5]."""
    filters = torch.eye(dim, device=device) + 0.3 * torch.randn(dim, dim, generator=g, device=device) / dim**0.5
    shape = 1.5 + 2.0 * torch.rand(dim, generator=g, device=device)
    return ProductOfExperts.from_tensors(filters, shape, expert="student_t")


def benchmark_poe_hais(device: torch.device, dim=36, num_chains=200, num_steps=100_000) -> dict:
    g = torch.Generator(device).manual_seed(0)
    model = _poe_student(g, device, dim)
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


def benchmark_ising_mpf(device: torch.device, side=10, num_samples=20_000, lbfgs_iterations=20, evaluations=10, repeats=3) -> dict:
    started = time.perf_counter()
    data = spin_glass(side=side, num_train=num_samples, num_test=1, seed=0)
    data_seconds = time.perf_counter() - started
    truth = spin_glass_model(side=side, seed=0)
    train = data.train.to(device=device, dtype=torch.float64)
    num_units = train.shape[1]
    objective = BitFlipMPF()

    def start_model() -> Ising:  # J = 0 and the independent-units biases, as in conf/experiment/ising_mpf.yaml
        model = Ising(num_units, init_std=0.0).to(device=device, dtype=torch.float64)
        model.init_from_data(train)
        return model

    model = start_model()

    def loss_and_gradient():
        for _ in range(evaluations):
            model.zero_grad(set_to_none=True)
            objective.loss(model, train).backward()

    evaluation_seconds = best_seconds(loss_and_gradient, device, repeats) / evaluations

    model = start_model()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=lbfgs_iterations, history_size=20,
                                  line_search_fn="strong_wolfe", tolerance_grad=0.0, tolerance_change=0.0)

    def closure():
        optimizer.zero_grad(set_to_none=True)
        loss = objective.loss(model, train)
        loss.backward()
        return loss

    _, lbfgs_seconds = timed(lambda: optimizer.step(closure), device)
    state = optimizer.state[optimizer._params[0]]
    return {
        "name": "ising_mpf",
        "shape": {"side": side, "num_units": num_units, "num_samples": num_samples, "dtype": "float64",
                  "lbfgs_iterations": lbfgs_iterations},
        "data_seconds": data_seconds,
        "evaluation_seconds": evaluation_seconds,
        "evaluations_per_second": 1.0 / evaluation_seconds,
        "lbfgs_seconds": lbfgs_seconds,
        "lbfgs_iterations_per_second": state["n_iter"] / lbfgs_seconds,
        "lbfgs_evaluations_per_iteration": state["func_evals"] / state["n_iter"],
        "coupling_error": coupling_error(model.cpu(), truth),
        "coupling_error_at_start": coupling_error(Ising(num_units, init_std=0.0).double(), truth),
        "thesis_coupling_error": 0.0172,
        "thesis_seconds": 60.0,
    }


def benchmark_ising_gibbs(device: torch.device, side=10, num_units=100, num_chains=1000, num_sweeps=100, repeats=3) -> dict:
    g = torch.Generator(device).manual_seed(0)
    results = {}
    for kind, model in (("lattice", spin_glass_model("lattice", side=side)),
                        ("fully_connected", spin_glass_model("fully_connected", num_units=num_units))):
        model = model.to(device)
        blocks = model.gibbs_blocks()
        x = (torch.rand(num_chains, model.num_units, generator=g, device=device) < 0.5).float()

        def sweeps():
            state = x
            for _ in range(num_sweeps):
                state = model.gibbs_sweep(state, generator=g, blocks=blocks)

        seconds = best_seconds(sweeps, device, repeats)
        results[kind] = {
            "num_units": model.num_units,
            "num_blocks": len(blocks),
            "seconds": seconds,
            "sweeps_per_second": num_sweeps / seconds,
            "chain_sweeps_per_second": num_chains * num_sweeps / seconds,
            "unit_updates_per_second": num_chains * num_sweeps * model.num_units / seconds,
        }
    return {"name": "ising_gibbs", "shape": {"num_chains": num_chains, "num_sweeps": num_sweeps}, **results}


def benchmark_rbm_mpf(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_flips=50, repeats=3) -> dict:
    g = torch.Generator(device).manual_seed(0)
    model = random_rbm(num_visible, num_hidden, g, device)
    batch = (torch.rand(batch_size, num_visible, generator=g, device=device) < 0.2).float()
    results = {}
    for label, objective in (("all_flips", BitFlipMPF()), (f"num_flips_{num_flips}", BitFlipMPF(num_flips=num_flips))):

        def loss_and_backward():
            model.zero_grad(set_to_none=True)
            objective.loss(model, batch, generator=g).backward()

        seconds = best_seconds(loss_and_backward, device, repeats)
        results[label] = {"seconds_per_batch": seconds, "examples_per_second": batch_size / seconds}
    return {
        "name": "rbm_mpf",
        "shape": {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size, "num_flips": num_flips},
        **results,
    }


def training_steps(objective, device: torch.device, num_visible: int, num_hidden: int, batch_size: int, num_batches: int,
                   repeats: int) -> float:
    """Best seconds of ``num_batches`` optimizer steps (loss, backward, SGD step with the ``trainer=pcd`` settings over the
    model's and the objective's own parameters, as the Trainer builds it) of ``objective`` on the benchmarks' RBM, cycling
    through 10 random binary minibatches, after the objective's ``prepare`` on all of them (NCE fits its noise there), with
    the batches' value checks skipped as in the Trainer's steps (they were checked once, as the Trainer checks its data
    splits)."""
    g = torch.Generator(device).manual_seed(0)
    model = random_rbm(num_visible, num_hidden, g, device)
    batches = (torch.rand(10, batch_size, num_visible, generator=g, device=device) < 0.2).float()
    objective = objective.to(device)
    model.check_visible(batches.flatten(0, 1), "batches")
    objective.prepare(model, batches.flatten(0, 1), generator=g)
    optimizer = torch.optim.SGD([*model.parameters(), *objective.parameters()], lr=0.05, momentum=0.5)  # conf/trainer/pcd.yaml
    return best_seconds(lambda: optimizer_steps(model, objective, optimizer, batches, num_batches, g), device, repeats)


def optimizer_steps(model, objective, optimizer: torch.optim.Optimizer, batches: torch.Tensor, num_batches: int, generator: torch.Generator) -> None:
    """``num_batches`` steps (loss, backward, optimizer step) of ``objective`` cycling through ``batches [n, B, V]``, the
    value checks skipped as in the Trainer's steps."""
    for step in range(num_batches):
        optimizer.zero_grad(set_to_none=True)
        with values_checked():
            objective.loss(model, batches[step % len(batches)], generator=generator).backward()
        optimizer.step()


def training_rates(name: str, shape: dict, seconds: float) -> dict:
    """A training case's result: its ``shape`` (``num_batches`` and ``batch_size`` among it), seconds, optimizer steps
    per second and examples per second."""
    return {
        "name": name,
        "shape": shape,
        "seconds": seconds,
        "steps_per_second": shape["num_batches"] / seconds,
        "examples_per_second": shape["num_batches"] * shape["batch_size"] / seconds,
    }


def benchmark_rbm_pcd(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=500, k=1, num_chains=100,
                      repeats=2) -> dict:
    """``num_batches`` PCD-k optimizer steps (:func:`training_steps`)."""
    seconds = training_steps(PCD(k=k, num_chains=num_chains), device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_pcd", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                      "num_batches": num_batches, "k": k, "num_chains": num_chains}, seconds)


def benchmark_rbm_pt(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=500, k=1, num_chains=100,
                     num_replicas=10, repeats=2) -> dict:
    """``num_batches`` PT-SML optimizer steps (:func:`training_steps`): ``num_replicas`` replicas of ``num_chains`` chains on
    the geometric ladder from β = 0.1, advanced as one batch, one exchange round per PT step."""
    objective = PT(k=k, num_chains=num_chains, num_replicas=num_replicas)
    seconds = training_steps(objective, device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_pt", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                     "num_batches": num_batches, "k": k, "num_chains": num_chains, "num_replicas": num_replicas}, seconds)


def benchmark_rbm_fpcd(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=500, k=1, num_chains=100,
                       repeats=2) -> dict:
    """``num_batches`` FPCD-k optimizer steps (:func:`training_steps`), fast weights at the regular rate decaying by 19/20."""
    objective = FPCD(k=k, num_chains=num_chains, fast_learning_rate=0.05)
    seconds = training_steps(objective, device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_fpcd", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                       "num_batches": num_batches, "k": k, "num_chains": num_chains}, seconds)


def benchmark_rbm_naive_mcmc(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=500, burn_in=100,
                             num_chains=100, repeats=2) -> dict:
    """``num_batches`` naive-MCMC optimizer steps (:func:`training_steps`): ``num_chains`` fresh uniform chains burned in
    ``burn_in`` Gibbs steps per update (``trainer=naive_mcmc``'s settings)."""
    objective = NaiveMCMC(burn_in=burn_in, num_chains=num_chains)
    seconds = training_steps(objective, device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_naive_mcmc", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                             "num_batches": num_batches, "burn_in": burn_in, "num_chains": num_chains}, seconds)


def benchmark_rbm_nce(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=500, noise_ratio=10,
                      repeats=2) -> dict:
    """``num_batches`` NCE steps (:func:`training_steps`) with ``noise_ratio`` fresh base-rate noise draws per example."""
    seconds = training_steps(NCE(noise_ratio=noise_ratio), device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_nce", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                      "num_batches": num_batches, "noise_ratio": noise_ratio}, seconds)


def benchmark_rbm_self_contrastive(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=500, k=1,
                                   num_chains=100, repeats=2) -> dict:
    """``num_batches`` self-contrastive steps (:func:`training_steps`): ``num_chains`` chains of the copy, ``k`` sweeps each."""
    seconds = training_steps(SelfContrastive(k=k, num_chains=num_chains), device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_self_contrastive", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                                   "num_batches": num_batches, "k": k, "num_chains": num_chains}, seconds)


def benchmark_rbm_ratio_matching(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=100,
                                 repeats=2) -> dict:
    """``num_batches`` ratio-matching optimizer steps (:func:`training_steps`), every single flip of every example."""
    seconds = training_steps(RatioMatching(), device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_ratio_matching", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                                 "num_batches": num_batches}, seconds)


def benchmark_rbm_stochastic_ratio_matching(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=500,
                                            num_units=50, nonzero_share=0.5, repeats=2) -> dict:
    """``num_batches`` stochastic ratio-matching optimizer steps (:func:`training_steps`): ``num_units`` units drawn per
    example, ``nonzero_share`` of the draws among its ones."""
    objective = RatioMatching(num_units=num_units, nonzero_share=nonzero_share)
    seconds = training_steps(objective, device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_stochastic_ratio_matching", {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size,
                                                            "num_batches": num_batches, "num_units": num_units,
                                                            "nonzero_share": nonzero_share}, seconds)


def benchmark_rbm_generalized_score_matching(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=100,
                                             repeats=2) -> dict:
    """``num_batches`` generalized score matching optimizer steps (:func:`training_steps`), every single flip of every example."""
    seconds = training_steps(GeneralizedScoreMatching(), device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_generalized_score_matching", {"num_visible": num_visible, "num_hidden": num_hidden,
                                                             "batch_size": batch_size, "num_batches": num_batches}, seconds)


def benchmark_rbm_generalized_pseudolikelihood(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=100,
                                               size=4, repeats=2) -> dict:
    """``num_batches`` generalized pseudo-likelihood optimizer steps (:func:`training_steps`) over blocks of ``size`` pixels
    (``trainer=generalized_pseudolikelihood``'s sets), every configuration of every block."""
    objective = GeneralizedPseudoLikelihood("blocks", size)
    seconds = training_steps(objective, device, num_visible, num_hidden, batch_size, num_batches, repeats)
    return training_rates("rbm_generalized_pseudolikelihood", {"num_visible": num_visible, "num_hidden": num_hidden,
                                                               "batch_size": batch_size, "num_batches": num_batches, "size": size}, seconds)


def free_port() -> int:
    """A port on localhost that nothing listens on, for a rendezvous."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_ranks(world_size: int, num_chains: int, num_steps: int, timeout: float = 1800) -> dict:
    """Rank 0's report of AIS on ``world_size`` CPU ranks: processes started here as ``torchrun`` starts them (its
    environment variables), one thread each, joined by gloo over localhost; each runs :func:`distributed_worker`."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder, "rank0.json")
        environment = {**os.environ, "OMP_NUM_THREADS": "1", "WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(free_port())}
        command = [sys.executable, "-m", "pfzoo.studies.benchmark", "--distributed-worker", str(report),
                   "--worker-chains", str(num_chains), "--worker-steps", str(num_steps)]
        ranks = [subprocess.Popen(command, env={**environment, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(world_size)]
        for process in ranks:
            _, stderr = process.communicate(timeout=timeout)
            if process.returncode != 0:
                raise RuntimeError(f"a rank of the {world_size}-rank AIS run failed:\n{stderr[-2000:]}")
        return json.loads(report.read_text())


def distributed_worker(report: Path, num_chains: int, num_steps: int) -> None:
    """One rank of :func:`run_ranks`: join the group, warm up, time one AIS run between two barriers; rank 0 writes
    ``report`` (seconds, chain-steps/s, log Z and its bits as hex)."""
    from pfzoo import distributed

    torch.set_num_threads(1)
    distributed.initialize()
    try:
        g = torch.Generator().manual_seed(0)
        model = random_rbm(784, 500, g, torch.device("cpu"))
        data = (torch.rand(500, 784, generator=g) < 0.2).float()
        AIS(num_chains=num_chains, num_steps=2, schedule="linear", base="base_rate")(model, data=data, generator=torch.Generator().manual_seed(1))
        estimator = AIS(num_chains=num_chains, num_steps=num_steps, schedule="linear", base="base_rate")
        distributed.synchronize()
        start = time.perf_counter()
        estimate = estimator(model, data=data, generator=torch.Generator().manual_seed(0))
        distributed.synchronize()
        seconds = time.perf_counter() - start
        if distributed.rank() == 0:
            report.write_text(json.dumps({
                "world_size": distributed.world_size(), "seconds": seconds, "chain_steps_per_second": num_chains * num_steps / seconds,
                "log_z": estimate.log_z, "log_z_hex": float(estimate.log_z).hex(), "stderr": estimate.stderr,
            }))
    finally:
        distributed.shutdown()


def benchmark_distributed_ais(device: torch.device, num_chains=512, num_steps=500) -> dict:
    """AIS on 1, then 2 CPU ranks (gloo, whatever ``device`` is: two ranks need two GPUs for NCCL): each run's report,
    the 2-rank speed-up and whether both gave the same log Z to the last bit."""
    one, two = run_ranks(1, num_chains, num_steps), run_ranks(2, num_chains, num_steps)
    return {
        "name": "distributed_ais",
        "shape": {"num_visible": 784, "num_hidden": 500, "num_chains": num_chains, "num_steps": num_steps, "dtype": "float32",
                  "device": "cpu", "backend": "gloo", "threads_per_rank": 1},
        "one_rank": one,
        "two_ranks": two,
        "speedup": one["seconds"] / two["seconds"],
        "identical_estimates": one["log_z_hex"] == two["log_z_hex"],
    }

def poe_training_steps(objective, device: torch.device, dim: int, batch_size: int, num_batches: int, repeats: int) -> float:
    """Best seconds of ``num_batches`` optimizer steps (loss, backward, Adam step with the score-matching configs' lr
    0.003) of ``objective`` on the complete ``dim``-d Student-t product of experts of ``poe_hais``, cycling through 10
    minibatches of its own exact samples, value checks skipped as in the Trainer's steps."""
    g = torch.Generator(device).manual_seed(0)
    filters = torch.eye(dim, device=device) + 0.3 * torch.randn(dim, dim, generator=g, device=device) / dim**0.5
    shape = 1.5 + 2.0 * torch.rand(dim, generator=g, device=device)
    model = ProductOfExperts.from_tensors(filters, shape, expert="student_t")
    batches = model.sample(10 * batch_size, generator=g).reshape(10, batch_size, dim)
    objective = objective.to(device)
    objective.prepare(model, batches.reshape(-1, dim), generator=g)  # e.g. NCE fits its noise, as the Trainer does
    optimizer = torch.optim.Adam([*model.parameters(), *objective.parameters()], lr=0.003)
    return best_seconds(lambda: optimizer_steps(model, objective, optimizer, batches, num_batches, g), device, repeats)


def benchmark_poe_score_matching(device: torch.device, dim=36, batch_size=500, num_batches=100, analytic=True, repeats=2) -> dict:
    """``num_batches`` score-matching steps (:func:`poe_training_steps`): the model's analytic score and Laplacian, or
    (``analytic=False``) autograd's exact Hessian diagonal, ``dim`` backward passes per step."""
    seconds = poe_training_steps(ScoreMatching(analytic=analytic), device, dim, batch_size, num_batches, repeats)
    return training_rates("poe_score_matching", {"dim": dim, "batch_size": batch_size, "num_batches": num_batches,
                                                 "analytic": analytic}, seconds)


def benchmark_poe_denoising_score_matching(device: torch.device, dim=36, batch_size=500, num_batches=100, repeats=2) -> dict:
    """``num_batches`` denoising-score-matching steps (:func:`poe_training_steps`), σ = 0.1 (conf/trainer)."""
    seconds = poe_training_steps(DenoisingScoreMatching(0.1), device, dim, batch_size, num_batches, repeats)
    return training_rates("poe_denoising_score_matching", {"dim": dim, "batch_size": batch_size, "num_batches": num_batches}, seconds)


def benchmark_poe_sliced_score_matching(device: torch.device, dim=36, batch_size=500, num_batches=100, num_projections=1,
                                        repeats=2) -> dict:
    """``num_batches`` sliced-score-matching steps (:func:`poe_training_steps`), ``num_projections`` Rademacher directions."""
    seconds = poe_training_steps(SlicedScoreMatching(num_projections), device, dim, batch_size, num_batches, repeats)
    return training_rates("poe_sliced_score_matching", {"dim": dim, "batch_size": batch_size, "num_batches": num_batches,
                                                        "num_projections": num_projections}, seconds)


def benchmark_poe_nce(device: torch.device, dim=36, batch_size=500, num_batches=100, noise_ratio=10, repeats=2) -> dict:
    """``num_batches`` NCE steps (:func:`poe_training_steps`): ν = ``noise_ratio`` fresh draws per example from the noise
    the ``trainer=nce`` settings pick for a product of experts (the family's fitted base), c learned beside the filters."""
    seconds = poe_training_steps(NCE(noise_ratio=noise_ratio), device, dim, batch_size, num_batches, repeats)
    return training_rates("poe_nce", {"dim": dim, "batch_size": batch_size, "num_batches": num_batches,
                                      "noise_ratio": noise_ratio}, seconds)


CPU_SIZES = {
    "rbm_ais": {"num_steps": 20, "repeats": 1},
    "dbm_ais": {"num_steps": 20, "repeats": 1},
    "rbm_ais_compiled": {"num_chains": 500, "num_steps": 100, "repeats": 1},
    "poe_hais_compiled": {"num_steps": 1000, "repeats": 1},
    "rbm_raise_compiled": {"num_examples": 20, "num_steps": 100, "repeats": 1},
    "rbm_raise": {"num_steps": 100},
    "poe_hais": {"num_steps": 5000},
    "generative_hais": {"num_examples": 20, "num_steps": 500},
    "rbm_pcd": {"num_batches": 50},
    "rbm_pt": {"num_batches": 20},
    "rbm_fpcd": {"num_batches": 50},
    "rbm_naive_mcmc": {"num_batches": 10},
    "rbm_nce": {"num_batches": 50},
    "rbm_self_contrastive": {"num_batches": 50},
    "rbm_ratio_matching": {"num_batches": 5, "repeats": 1},
    "rbm_stochastic_ratio_matching": {"num_batches": 20},
    "rbm_generalized_score_matching": {"num_batches": 5, "repeats": 1},
    "rbm_generalized_pseudolikelihood": {"num_batches": 2, "repeats": 1},
    "poe_score_matching": {"num_batches": 20},
    "poe_denoising_score_matching": {"num_batches": 20},
    "poe_sliced_score_matching": {"num_batches": 20},
    "poe_nce": {"num_batches": 20},
}
"""Case → keyword arguments replacing the issue's sizes on CPU: each case a few seconds to a minute on 2 cores."""
QUICK_SIZES = {
    "rbm_ais": {"num_chains": (10, 100), "num_steps": 3, "repeats": 1},
    "dbm_ais": {"num_chains": 10, "num_steps": 3, "repeats": 1},
    "rbm_ais_small": {"num_hidden": 10, "num_chains": 10, "num_steps": 10, "repeats": 1},
    "rbm_ais_compiled": {"num_visible": 20, "num_hidden": 10, "num_chains": 10, "num_steps": 5, "repeats": 1},
    "poe_hais_compiled": {"dim": 4, "num_chains": 10, "num_steps": 5, "repeats": 1},
    "rbm_raise_compiled": {"num_visible": 20, "num_hidden": 10, "num_examples": 3, "num_chains": 2, "num_steps": 5, "repeats": 1},
    "rbm_raise": {"num_examples": 5, "num_chains": 2, "num_steps": 5},
    "poe_hais": {"num_chains": 10, "num_steps": 10},
    "generative_hais": {"num_examples": 3, "num_particles": 4, "num_steps": 10},
    "ising_mpf": {"num_samples": 200, "lbfgs_iterations": 2, "evaluations": 1, "repeats": 1},
    "ising_gibbs": {"num_chains": 10, "num_sweeps": 2, "repeats": 1},
    "rbm_mpf": {"batch_size": 10, "num_flips": 5, "repeats": 1},
    "rbm_pcd": {"batch_size": 10, "num_batches": 3, "num_chains": 10, "repeats": 1},
    "rbm_pt": {"batch_size": 10, "num_batches": 3, "num_chains": 10, "num_replicas": 3, "repeats": 1},
    "rbm_fpcd": {"batch_size": 10, "num_batches": 3, "num_chains": 10, "repeats": 1},
    "rbm_naive_mcmc": {"batch_size": 10, "num_batches": 3, "burn_in": 3, "num_chains": 10, "repeats": 1},
    "rbm_nce": {"batch_size": 10, "num_batches": 3, "noise_ratio": 2, "repeats": 1},
    "rbm_self_contrastive": {"batch_size": 10, "num_batches": 3, "num_chains": 10, "repeats": 1},
    "rbm_ratio_matching": {"num_hidden": 20, "batch_size": 5, "num_batches": 2, "repeats": 1},
    "rbm_stochastic_ratio_matching": {"num_hidden": 20, "batch_size": 5, "num_batches": 2, "num_units": 5, "repeats": 1},
    "rbm_generalized_score_matching": {"num_hidden": 20, "batch_size": 5, "num_batches": 2, "repeats": 1},
    "rbm_generalized_pseudolikelihood": {"num_hidden": 20, "batch_size": 5, "num_batches": 2, "repeats": 1},
    "poe_score_matching": {"dim": 8, "batch_size": 10, "num_batches": 2, "repeats": 1},
    "poe_denoising_score_matching": {"dim": 8, "batch_size": 10, "num_batches": 2, "repeats": 1},
    "poe_sliced_score_matching": {"dim": 8, "batch_size": 10, "num_batches": 2, "repeats": 1},
    "poe_nce": {"dim": 8, "batch_size": 10, "num_batches": 2, "repeats": 1},
    "distributed_ais": {"num_chains": 64, "num_steps": 3},
}
"""Case → keyword arguments for ``--quick``: toy sizes that exercise every case in seconds (tests/test_benchmark.py)."""


def compiled_summary(r: dict) -> str:
    shape = ", ".join(f"{key} {value}" for key, value in r["shape"].items())
    return (f"{r['name']} ({shape}): compiled {r['compiled_seconds']:.2f} s, eager {r['eager_seconds']:.2f} s (compiled/eager "
            f"{r['compiled_over_eager']:.2f}; first compiled call {r['compiled_first_call_seconds']:.1f} s); estimates differ by "
            f"{r['estimate_difference']:+.2e} (stderr {r['stderr']:.2e})")


def rbm_ais_summary(r: dict) -> str:
    return "rbm_ais: " + "; ".join(
        f"{run['num_chains']} chains {run['chain_steps_per_second']:.3g} chain-steps/s ({run['fraction_of_matmul_bound']:.2f} of the "
        f"matmul bound, {run['matmul_gflops']:.1f} GFLOP/s matmul)" for run in r["runs"])


BENCHMARKS = {
    "rbm_ais": (benchmark_rbm_ais, rbm_ais_summary),
    "dbm_ais": (
        benchmark_dbm_ais,
        lambda r: f"dbm_ais: {'–'.join(map(str, r['shape']['layer_sizes']))}, {r['shape']['num_chains']} chains: "
        f"{r['chain_steps_per_second']:.3g} chain-steps/s ({r['fraction_of_matmul_bound']:.2f} of the matmul bound)",
    ),
    "rbm_ais_small": (
        benchmark_rbm_ais_small,
        lambda r: f"rbm_ais_small: {r['shape']['num_visible']}x{r['shape']['num_hidden']} float64, {r['shape']['num_chains']} chains x "
        f"{r['shape']['num_steps']} steps in {r['seconds']:.2f} s ({r['chain_steps_per_second']:.3g} chain-steps/s, "
        f"{r['fraction_of_matmul_bound']:.2f} of the matmul bound), log Z error {r['log_z_error']:+.4f} ± {r['log_z_stderr']:.4f}; "
        + ("rbms not installed" if r["rbms_seconds"] is None else
           f"rbms {r['rbms_version']}: {r['rbms_seconds']:.2f} s, log Z error {r['rbms_log_z_error']:+.4f} ({r['speedup_over_rbms']:.2f}x; "
           f"pairs {', '.join(f'{x:.2f}' for x in r['speedup_per_pair'])})"),
    ),
    "rbm_ais_compiled": (benchmark_rbm_ais_compiled, compiled_summary),
    "poe_hais_compiled": (benchmark_poe_hais_compiled, compiled_summary),
    "rbm_raise_compiled": (benchmark_rbm_raise_compiled, compiled_summary),
    "rbm_raise": (
        benchmark_rbm_raise,
        lambda r: f"rbm_raise: {r['examples_per_second']:.3g} examples/s at M = {r['shape']['num_chains']} chains, "
        f"K = {r['shape']['num_steps']} ({r['chain_steps_per_second']:.3g} chain-steps/s)",
    ),
    "poe_hais": (
        benchmark_poe_hais,
        lambda r: f"poe_hais: N = {r['shape']['num_steps']:.0e}, {r['shape']['num_chains']} particles in {r['seconds']:.1f} s "
        f"({r['particle_steps_per_second']:.3g} particle-steps/s; paper: {r['paper_seconds']:.0f} s at N = 1e5); "
        f"log Z error {r['log_z_error']:+.4f} ± {r['log_z_stderr']:.4f}",
    ),
    "generative_hais": (
        benchmark_generative_hais,
        lambda r: f"generative_hais: {r['shape']['num_examples']} examples × {r['shape']['num_particles']} particles, N = {r['shape']['num_steps']}: "
        f"{r['examples_per_second']:.3g} examples/s ({r['particle_steps_per_second']:.3g} particle-steps/s, {r['seconds']:.0f} s)",
    ),
    "ising_mpf": (
        benchmark_ising_mpf,
        lambda r: f"ising_mpf: {r['evaluations_per_second']:.3g} loss+gradient evaluations/s on {r['shape']['num_samples']} samples "
        f"(float64); L-BFGS {r['lbfgs_iterations_per_second']:.3g} iterations/s "
        f"({r['lbfgs_evaluations_per_iteration']:.2f} evaluations each), ε_J {r['coupling_error']:.4f} after "
        f"{r['shape']['lbfgs_iterations']} iterations in {r['lbfgs_seconds']:.1f} s (thesis: {r['thesis_coupling_error']} in ~{r['thesis_seconds']:.0f} s)",
    ),
    "ising_gibbs": (
        benchmark_ising_gibbs,
        lambda r: f"ising_gibbs: {r['shape']['num_chains']} chains, lattice {r['lattice']['chain_sweeps_per_second']:.3g} chain-sweeps/s "
        f"({r['lattice']['num_blocks']} blocks), dense D={r['fully_connected']['num_units']} "
        f"{r['fully_connected']['chain_sweeps_per_second']:.3g} chain-sweeps/s ({r['fully_connected']['num_blocks']} blocks)",
    ),
    "rbm_mpf": (
        benchmark_rbm_mpf,
        lambda r: f"rbm_mpf: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, batch {r['shape']['batch_size']}: "
        f"all flips {r['all_flips']['examples_per_second']:.3g} examples/s, "
        f"{r['shape']['num_flips']} sampled flips {r['num_flips_' + str(r['shape']['num_flips'])]['examples_per_second']:.3g} examples/s",
    ),
    "rbm_pcd": (
        benchmark_rbm_pcd,
        lambda r: f"rbm_pcd: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, PCD-{r['shape']['k']}, batch {r['shape']['batch_size']}: "
        f"{r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    ),
    "rbm_pt": (
        benchmark_rbm_pt,
        lambda r: f"rbm_pt: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, PT-{r['shape']['k']} with {r['shape']['num_replicas']} "
        f"replicas, batch {r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    ),
    "rbm_fpcd": (
        benchmark_rbm_fpcd,
        lambda r: f"rbm_fpcd: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, FPCD-{r['shape']['k']}, batch {r['shape']['batch_size']}: "
        f"{r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    ),
    "rbm_naive_mcmc": (
        benchmark_rbm_naive_mcmc,
        lambda r: f"rbm_naive_mcmc: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, burn-in {r['shape']['burn_in']}, "
        f"batch {r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    ),
    "rbm_nce": (
        benchmark_rbm_nce,
        lambda r: f"rbm_nce: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, ν = {r['shape']['noise_ratio']}, batch "
        f"{r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    ),
    "rbm_self_contrastive": (
        benchmark_rbm_self_contrastive,
        lambda r: f"rbm_self_contrastive: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, {r['shape']['num_chains']} chains, "
        f"k = {r['shape']['k']}, batch {r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, "
        f"{r['examples_per_second']:.3g} examples/s",
    ),
    "rbm_ratio_matching": (
        benchmark_rbm_ratio_matching,
        lambda r: f"rbm_ratio_matching: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, all flips, batch {r['shape']['batch_size']}: "
        f"{r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    ),
    "rbm_stochastic_ratio_matching": (
        benchmark_rbm_stochastic_ratio_matching,
        lambda r: f"rbm_stochastic_ratio_matching: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, {r['shape']['num_units']} units, "
        f"batch {r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    ),
    "rbm_generalized_score_matching": (
        benchmark_rbm_generalized_score_matching,
        lambda r: f"rbm_generalized_score_matching: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, batch {r['shape']['batch_size']}: "
        f"{r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    ),
    "rbm_generalized_pseudolikelihood": (
        benchmark_rbm_generalized_pseudolikelihood,
        lambda r: f"rbm_generalized_pseudolikelihood: {r['shape']['num_visible']}x{r['shape']['num_hidden']}, blocks of {r['shape']['size']}, "
        f"batch {r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    ),
    "poe_score_matching": (
        benchmark_poe_score_matching,
        lambda r: f"poe_score_matching: {r['shape']['dim']}-d Student-t PoE, {'analytic' if r['shape']['analytic'] else 'autograd'} "
        f"Laplacian, batch {r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    ),
    "poe_denoising_score_matching": (
        benchmark_poe_denoising_score_matching,
        lambda r: f"poe_denoising_score_matching: {r['shape']['dim']}-d Student-t PoE, σ = 0.1, batch {r['shape']['batch_size']}: "
        f"{r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    ),
    "poe_sliced_score_matching": (
        benchmark_poe_sliced_score_matching,
        lambda r: f"poe_sliced_score_matching: {r['shape']['dim']}-d Student-t PoE, {r['shape']['num_projections']} projection(s), "
        f"batch {r['shape']['batch_size']}: {r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    ),
    "poe_nce": (
        benchmark_poe_nce,
        lambda r: f"poe_nce: {r['shape']['dim']}-d Student-t PoE, ν = {r['shape']['noise_ratio']}, batch {r['shape']['batch_size']}: "
        f"{r['steps_per_second']:.3g} optimizer steps/s, {r['examples_per_second']:.3g} examples/s",
    ),
    "distributed_ais": (
        benchmark_distributed_ais,
        lambda r: f"distributed_ais: {r['shape']['num_chains']} chains x {r['shape']['num_steps']} steps, CPU ranks on 1 thread each: "
        f"1 rank {r['one_rank']['chain_steps_per_second']:.3g} chain-steps/s, 2 ranks {r['two_ranks']['chain_steps_per_second']:.3g} "
        f"({r['speedup']:.2f}x); log Z {r['one_rank']['log_z']:.4f}, {'identical' if r['identical_estimates'] else 'DIFFERENT'} on both",
    ),
}


def _worker_main() -> None:
    """``python -m pfzoo.studies.benchmark --distributed-worker REPORT --worker-chains N --worker-steps K``: one rank of
    :func:`run_ranks`."""
    import argparse

    parser = argparse.ArgumentParser(description=_worker_main.__doc__)
    parser.add_argument("--distributed-worker", type=Path, required=True)
    parser.add_argument("--worker-chains", type=int, required=True)
    parser.add_argument("--worker-steps", type=int, required=True)
    args = parser.parse_args()
    distributed_worker(args.distributed_worker, args.worker_chains, args.worker_steps)


if __name__ == "__main__":
    _worker_main()
