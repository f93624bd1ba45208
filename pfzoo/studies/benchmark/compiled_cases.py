"""The compiled cases: an estimator's annealing step under ``torch.compile`` against the same estimator eager.

AIS with ``compile=True`` (``rbm_ais_compiled``) on the RBM of ``rbm_ais`` at 1,000 chains and on the DBM of
``dbm_ais`` (``dbm_ais_compiled``), and likewise HAIS on the product of experts of ``poe_hais`` (``poe_hais_compiled``)
and RAISE on the examples of ``rbm_raise`` (``rbm_raise_compiled``): compiled and eager seconds after a warm-up, their
ratio ``compiled_over_eager``, the first compiled call's seconds (the compilation) and the two estimates' difference
against the standard error. The AIS cases also report each run's fraction of the same run's two-matmul bound
(:func:`~pfzoo.studies.benchmark.timing.ais_rates`). A compiled RBM-path sweep draws hashed numbers
(:mod:`pfzoo.hashed_draws`), so its estimate differs from the eager one by about their standard errors, not by rounding.
"""

from __future__ import annotations

import torch

from pfzoo.estimators import AIS, HAIS, RAISE
from pfzoo.estimators.base import PartitionEstimate
from pfzoo.studies.benchmark.timing import ais_rates, best_seconds, matmul_seconds_per_step, timed
from pfzoo.studies.benchmark.workloads import random_dbm, random_rbm, student_t_poe


def compiled_against_eager(name: str, shape: dict, build, run, device: torch.device, repeats: int) -> dict:
    """One estimator eager and under ``torch.compile`` (``build(compile) -> estimator``, ``run(estimator, generator) ->
    estimate`` with ``.value`` and ``.stderr`` read through :func:`_value`): the first compiled call's seconds
    (compilation included), the least seconds of each after a warm-up, ``compiled_over_eager`` (below 1, compiled is
    faster) and the two estimates' difference against the eager standard error (the same seed: equal up to the
    compiled kernels' rounding where the compiled step draws the eager numbers)."""
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


def with_matmul_bound(result: dict, weight: torch.Tensor, num_chains: int, num_steps: int, device: torch.device, repeats: int) -> dict:
    """``result`` of :func:`compiled_against_eager` for AIS with, for its eager and compiled runs, the fields of
    :func:`~pfzoo.studies.benchmark.timing.ais_rates` against the two products of ``weight [V, H]`` measured now."""
    matmul_seconds = matmul_seconds_per_step(weight, num_chains, torch.Generator(device).manual_seed(3), device, repeats)
    for run in ("eager", "compiled"):
        result[run] = ais_rates(result[f"{run}_seconds"], matmul_seconds, *weight.shape, num_chains, num_steps)
    return result


def benchmark_rbm_ais_compiled(device: torch.device, num_visible=784, num_hidden=500, num_chains=1000, num_steps=1000, repeats=2) -> dict:
    """``AIS(compile=True)`` against eager AIS from data base rates on the RBM of ``rbm_ais`` (:func:`compiled_against_eager`),
    each against the matmul bound (:func:`with_matmul_bound`)."""
    g = torch.Generator(device).manual_seed(0)
    model = random_rbm(num_visible, num_hidden, g, device)
    data = (torch.rand(500, num_visible, generator=g, device=device) < 0.2).float()
    result = compiled_against_eager(
        "rbm_ais_compiled", {"num_visible": num_visible, "num_hidden": num_hidden, "num_chains": num_chains, "num_steps": num_steps},
        lambda compile: AIS(num_chains=num_chains, num_steps=num_steps, base="base_rate", compile=compile),
        lambda estimator, generator: estimator(model, data=data, generator=generator), device, repeats)
    return with_matmul_bound(result, model.weight.detach(), num_chains, num_steps, device, repeats)


def benchmark_dbm_ais_compiled(device: torch.device, layer_sizes=(784, 500, 1000), num_chains=1000, num_steps=1000, repeats=2) -> dict:
    """``AIS(compile=True)`` against eager AIS from data base rates on the DBM of ``dbm_ais``, each against its even/odd
    RBM's matmul bound."""
    g = torch.Generator(device).manual_seed(0)
    model = random_dbm(layer_sizes, g, device)
    data = (torch.rand(500, layer_sizes[0], generator=g, device=device) < 0.2).float()
    even_odd_weight = model.even_odd_rbm().weight.detach()
    result = compiled_against_eager(
        "dbm_ais_compiled", {"layer_sizes": list(layer_sizes), "even_odd_weight": list(even_odd_weight.shape), "num_chains": num_chains,
                             "num_steps": num_steps},
        lambda compile: AIS(num_chains=num_chains, num_steps=num_steps, base="base_rate", compile=compile),
        lambda estimator, generator: estimator(model, data=data, generator=generator), device, repeats)
    return with_matmul_bound(result, even_odd_weight, num_chains, num_steps, device, repeats)


def benchmark_poe_hais_compiled(device: torch.device, dim=36, num_chains=200, num_steps=10_000, repeats=2) -> dict:
    """``HAIS(compile=True)`` against eager HAIS on the Student-t product of experts of ``poe_hais``."""
    model = student_t_poe(torch.Generator(device).manual_seed(0), device, dim)
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
