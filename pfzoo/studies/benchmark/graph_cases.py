"""The CUDA-graph cases: AIS with ``cuda_graphs=True`` against the same AIS without, on the RBM of ``rbm_ais``
(``rbm_ais_graphs``) and the DBM of ``dbm_ais`` (``dbm_ais_graphs``), at 1,000 and 10,000 chains (issue 53: a GPU run
of 1,000 chains is launch-bound, and graphs replay a block of steps with one launch).

Each run reports the seconds of both and each one's fraction of the same run's two-matmul bound
(:func:`~pfzoo.studies.benchmark.timing.ais_rates`), whether the two gave the same log weights for the same seed (the
graphs' promise: :mod:`pfzoo.estimators.cuda_graphs`) and the graphed run's ``info["cuda_graphs"]`` (how many steps were
replayed; on a CPU, none, and the two runs are the same code).
"""

from __future__ import annotations

import torch

from pfzoo.estimators import AIS
from pfzoo.studies.benchmark.timing import ais_rates, best_seconds, matmul_seconds_per_step
from pfzoo.studies.benchmark.workloads import random_dbm, random_rbm


def graphs_against_eager(name: str, shape: dict, model, weight: torch.Tensor, data: torch.Tensor, num_chains, num_steps: int,
                         device: torch.device, repeats: int) -> dict:
    """AIS from data base rates on ``model`` with and without CUDA graphs, per chain count of ``num_chains``, against the
    two products of ``weight [V, H]`` (the RBM's, or the DBM's even/odd RBM's)."""
    runs = []
    for chains in num_chains:
        timed, estimates = {}, {}
        for graphs in (False, True):
            estimator = AIS(num_chains=chains, num_steps=num_steps, base="base_rate", cuda_graphs=graphs).to(device)
            estimates[graphs] = estimator(model, data=data, generator=torch.Generator(device).manual_seed(1))  # warm-up, and the numbers compared
            timed[graphs] = best_seconds(lambda: estimator(model, data=data, generator=torch.Generator(device).manual_seed(2)), device, repeats)
        matmul_seconds = matmul_seconds_per_step(weight, chains, torch.Generator(device).manual_seed(3), device, repeats)
        runs.append({
            "num_chains": chains,
            "eager": ais_rates(timed[False], matmul_seconds, *weight.shape, chains, num_steps),
            "graphs": ais_rates(timed[True], matmul_seconds, *weight.shape, chains, num_steps),
            "graphs_over_eager": timed[True] / timed[False],
            "same_log_weights": bool(torch.equal(estimates[False].log_weights, estimates[True].log_weights)),
            "note": estimates[True].info.get("cuda_graphs"),
        })
    return {"name": name, "shape": {**shape, "num_chains": list(num_chains), "num_steps": num_steps}, "runs": runs}


def benchmark_rbm_ais_graphs(device: torch.device, num_visible=784, num_hidden=500, num_chains=(1000, 10_000), num_steps=1000,
                             repeats=2) -> dict:
    g = torch.Generator(device).manual_seed(0)
    model = random_rbm(num_visible, num_hidden, g, device)
    data = (torch.rand(500, num_visible, generator=g, device=device) < 0.2).float()
    return graphs_against_eager("rbm_ais_graphs", {"num_visible": num_visible, "num_hidden": num_hidden}, model, model.weight.detach(),
                                data, num_chains, num_steps, device, repeats)


def benchmark_dbm_ais_graphs(device: torch.device, layer_sizes=(784, 500, 1000), num_chains=(1000, 10_000), num_steps=1000,
                             repeats=2) -> dict:
    g = torch.Generator(device).manual_seed(0)
    model = random_dbm(layer_sizes, g, device)
    data = (torch.rand(500, layer_sizes[0], generator=g, device=device) < 0.2).float()
    return graphs_against_eager("dbm_ais_graphs", {"layer_sizes": list(layer_sizes)}, model, model.even_odd_rbm().weight.detach(),
                                data, num_chains, num_steps, device, repeats)
