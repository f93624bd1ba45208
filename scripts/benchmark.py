"""Speed measurements, written as JSON (never asserted in unit tests).

    python scripts/benchmark.py [--output benchmark_results/benchmark.json] [--device cpu] [--threads N]

HAIS on a complete 36-dimensional Student-t product of experts with 200 particles and N = 10⁵
intermediate distributions: wall seconds (the HAIS paper reports 170 s for this setting).

AIS on a 784×500 binary RBM: chain-steps per second, against the machine's own matmul throughput
for the same shapes measured in the same run. One AIS step needs the products ``[N,V]·[V,H]`` and
``[N,H]·[H,V]``; the "matmul bound" is the rate at which the machine does just those two, so
``fraction_of_matmul_bound = matmul seconds per step / AIS seconds per step`` (1.0 = no overhead).

RAISE on the same RBM: test examples per second with M reverse chains each and K steps, all
examples × chains annealed as one batch, and the chain-steps per second that amounts to.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from pfzoo.estimators import AIS, HAIS, RAISE
from pfzoo.models import RBM, ProductOfExperts


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


def benchmark_rbm_ais(device: torch.device, num_visible=784, num_hidden=500, num_chains=1000, num_steps=1000, repeats=2) -> dict:
    g = torch.Generator(device).manual_seed(0)
    model = RBM.from_tensors(
        torch.randn(num_visible, num_hidden, generator=g, device=device) * 0.05,
        torch.randn(num_visible, generator=g, device=device),
        torch.randn(num_hidden, generator=g, device=device),
    )
    data = (torch.rand(500, num_visible, generator=g, device=device) < 0.2).float()
    estimator = AIS(num_chains=num_chains, num_steps=num_steps, base="base_rate").to(device)
    ais_seconds = best_seconds(lambda: estimator(model, data=data, generator=g), device, repeats)

    visible = torch.rand(num_chains, num_visible, generator=g, device=device)
    hidden = torch.rand(num_chains, num_hidden, generator=g, device=device)
    weight = model.weight.detach()
    matmuls = 20

    def two_matmuls():
        for _ in range(matmuls):
            visible @ weight
            hidden @ weight.T

    matmul_seconds_per_step = best_seconds(two_matmuls, device, repeats) / matmuls
    step_seconds = ais_seconds / num_steps
    flops_per_step = 2 * 2 * num_chains * num_visible * num_hidden
    return {
        "name": "rbm_ais",
        "shape": {"num_visible": num_visible, "num_hidden": num_hidden, "num_chains": num_chains, "num_steps": num_steps},
        "seconds": ais_seconds,
        "chain_steps_per_second": num_chains * num_steps / ais_seconds,
        "matmul_bound_chain_steps_per_second": num_chains / matmul_seconds_per_step,
        "fraction_of_matmul_bound": matmul_seconds_per_step / step_seconds,
        "matmul_gflops": flops_per_step / matmul_seconds_per_step / 1e9,
    }


def benchmark_rbm_raise(device: torch.device, num_visible=784, num_hidden=500, num_examples=100, num_chains=10, num_steps=1000) -> dict:
    g = torch.Generator(device).manual_seed(0)
    model = RBM.from_tensors(
        torch.randn(num_visible, num_hidden, generator=g, device=device) * 0.05,
        torch.randn(num_visible, generator=g, device=device),
        torch.randn(num_hidden, generator=g, device=device),
    )
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
    g = torch.Generator(device).manual_seed(0)
    filters = torch.eye(dim, device=device) + 0.3 * torch.randn(dim, dim, generator=g, device=device) / dim**0.5
    shape = 1.5 + 2.0 * torch.rand(dim, generator=g, device=device)
    model = ProductOfExperts.from_tensors(filters, shape, expert="student_t")
    estimator = HAIS(num_chains, num_steps, 0.2).to(device)
    synchronize(device)
    start = time.perf_counter()
    estimate = estimator(model, generator=g)  # one long run: warm-up is a negligible part of it
    synchronize(device)
    seconds = time.perf_counter() - start
    return {
        "name": "poe_hais",
        "shape": {"dim": dim, "num_chains": num_chains, "num_steps": num_steps},
        "seconds": seconds,
        "paper_seconds": 170.0,
        "chain_steps_per_second": num_chains * num_steps / seconds,
        "log_z_error": estimate.log_z - model.log_partition().item(),
        "log_z_stderr": estimate.stderr,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=Path("benchmark_results/benchmark.json"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="run only these benchmarks")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    results = {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "device": str(device),
        },
        "benchmarks": [],
    }
    for name, (run, summary) in BENCHMARKS.items():
        if args.only and name not in args.only:
            continue
        result = run(device)
        results["benchmarks"].append(result)
        print(summary(result))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results written to {args.output}")


BENCHMARKS = {
    "rbm_ais": (
        benchmark_rbm_ais,
        lambda r: f"rbm_ais: {r['chain_steps_per_second']:.3g} chain-steps/s "
        f"({r['fraction_of_matmul_bound']:.2f} of the matmul bound, {r['matmul_gflops']:.1f} GFLOP/s matmul)",
    ),
    "rbm_raise": (
        benchmark_rbm_raise,
        lambda r: f"rbm_raise: {r['examples_per_second']:.3g} examples/s at M = {r['shape']['num_chains']} chains, "
        f"K = {r['shape']['num_steps']} ({r['chain_steps_per_second']:.3g} chain-steps/s)",
    ),
    "poe_hais": (
        benchmark_poe_hais,
        lambda r: f"poe_hais: N = {r['shape']['num_steps']:.0e}, {r['shape']['num_chains']} particles in {r['seconds']:.1f} s "
        f"(paper: {r['paper_seconds']:.0f} s); log Z error {r['log_z_error']:+.4f} ± {r['log_z_stderr']:.4f}",
    ),
}


if __name__ == "__main__":
    main()
