"""The benchmark's clock and its reference rate: wall seconds of a call, and the device's own matmul throughput that the
AIS cases are measured against.

Timed CUDA regions end in ``torch.cuda.synchronize`` before the clock is read (:func:`best_seconds`, :func:`timed`) and
hold no other host sync of the benchmark's own; what the library does inside a call (an estimator reducing its weights
to a float estimate, an objective validating its batch) is part of what is measured.

One AIS step of an RBM needs the products ``[N,V]·[V,H]`` and ``[N,H]·[H,V]``; the "matmul bound" is the rate at which
the device does just those two (:func:`matmul_seconds_per_step`), so
``fraction_of_matmul_bound = matmul seconds per step / AIS seconds per step`` (1.0 = no overhead; :func:`ais_rates`).
"""

from __future__ import annotations

import time

import torch


def synchronize(device: torch.device) -> None:
    """Wait for ``device``'s queued kernels (CUDA runs them asynchronously; the CPU needs no wait)."""
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


def matmul_seconds_per_step(weight: torch.Tensor, num_chains: int, g: torch.Generator, device: torch.device, repeats: int) -> float:
    """Seconds of the two products of an RBM AIS step, ``[N,V]·[V,H]`` and ``[N,H]·[H,V]`` (``weight [V, H]``,
    N = ``num_chains``), in ``weight``'s dtype: the least over ``repeats`` after a warm-up, per pair of products."""
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
    """What every RBM AIS case reports: its seconds and chain-steps per second against the matmul bound of the module docstring,
    from an AIS run's seconds and :func:`matmul_seconds_per_step`."""
    return {
        "seconds": ais_seconds,
        "chain_steps_per_second": num_chains * num_steps / ais_seconds,
        "matmul_bound_chain_steps_per_second": num_chains / matmul_seconds,
        "fraction_of_matmul_bound": matmul_seconds / (ais_seconds / num_steps),
        "matmul_gflops": 2 * 2 * num_chains * num_visible * num_hidden / matmul_seconds / 1e9,
    }
