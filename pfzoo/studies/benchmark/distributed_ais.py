"""The distributed case: AIS sharded across ``torch.distributed`` ranks.

AIS sharded across ranks (``distributed_ais``): the 784×500 float32 RBM, 512 chains × 500 steps, on 1 and then 2 CPU
ranks of one thread each (processes started as ``torchrun`` starts them, gloo over localhost, whatever ``--device``
is): each run's chain-steps per second, the speed-up, and whether both gave the same log Z to the last bit (they must:
a chain's random stream depends on the seed and its block only; pfzoo/distributed.py). Each rank is a
:mod:`pfzoo.studies.benchmark.distributed_worker` process.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

WORKER = "pfzoo.studies.benchmark.distributed_worker"
"""The module each rank runs (``python -m``): a fresh process per rank, as ``torchrun`` starts them."""


def free_port() -> int:
    """A port on localhost that nothing listens on, for a rendezvous."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_ranks(world_size: int, num_chains: int, num_steps: int, timeout: float = 1800) -> dict:
    """Rank 0's report of AIS on ``world_size`` CPU ranks: processes started here as ``torchrun`` starts them (its
    environment variables), one thread each, joined by gloo over localhost; each runs :data:`WORKER`."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder, "rank0.json")
        environment = {**os.environ, "OMP_NUM_THREADS": "1", "WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(free_port())}
        command = [sys.executable, "-m", WORKER, "--distributed-worker", str(report),
                   "--worker-chains", str(num_chains), "--worker-steps", str(num_steps)]
        ranks = [subprocess.Popen(command, env={**environment, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(world_size)]
        for process in ranks:
            _, stderr = process.communicate(timeout=timeout)
            if process.returncode != 0:
                raise RuntimeError(f"a rank of the {world_size}-rank AIS run failed:\n{stderr[-2000:]}")
        return json.loads(report.read_text())


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
