"""AIS chains sharded across ``torch.distributed`` CPU ranks (gloo): speed on 1 and 2 ranks, and the same estimate.

    python scripts/distributed_benchmark.py [--num-chains 512] [--num-steps 500] [--output FILE]

Each rank is its own process on one thread, joined over localhost as ``torchrun --nproc_per_node=N`` starts them (the
same environment variables). Every rank builds the same 784×500 float32 RBM (weights N(0, 0.05²), biases N(0, 1),
seed 0), runs AIS once to warm up, then once timed between two barriers; rank 0 reports the wall seconds, the chain-steps
per second and the estimate. Run by ``scripts/benchmark.py`` as the ``distributed_ais`` case, which reports the 2-rank
speed-up and whether both runs gave the same log Z to the last bit (they must: a chain's random stream depends only on the
seed and its block, never on the number of ranks; pfzoo/distributed.py).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent


def free_port() -> int:
    """A port on localhost that nothing listens on, for the rendezvous."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_ranks(world_size: int, num_chains: int, num_steps: int, timeout: float = 1800) -> dict:
    """Rank 0's report of a ``world_size``-rank run (processes started here, one thread each)."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder, "rank0.json")
        environment = {**os.environ, "OMP_NUM_THREADS": "1", "WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(free_port())}
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", str(report), "--num-chains", str(num_chains),
                   "--num-steps", str(num_steps)]
        ranks = [subprocess.Popen(command, env={**environment, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(world_size)]
        for process in ranks:
            _, stderr = process.communicate(timeout=timeout)
            if process.returncode != 0:
                raise RuntimeError(f"a rank of the {world_size}-rank AIS run failed:\n{stderr[-2000:]}")
        return json.loads(report.read_text())


def worker(report: Path, num_chains: int, num_steps: int) -> None:
    """One rank: join the group, warm up, time one AIS run between barriers; rank 0 writes ``report``."""
    import time

    import torch

    from pfzoo import distributed
    from pfzoo.estimators import AIS
    from pfzoo.models import RBM

    torch.set_num_threads(1)
    distributed.initialize()
    try:
        g = torch.Generator().manual_seed(0)
        model = RBM.from_tensors(torch.randn(784, 500, generator=g) * 0.05, torch.randn(784, generator=g), torch.randn(500, generator=g))
        data = (torch.rand(500, 784, generator=g) < 0.2).float()
        AIS(num_chains=num_chains, num_steps=10, schedule="linear", base="base_rate")(model, data=data, generator=torch.Generator().manual_seed(1))
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


def benchmark_distributed_ais(num_chains: int = 512, num_steps: int = 500) -> dict:
    """1 rank, then 2 ranks, on the CPU: each run's report, the 2-rank speed-up and whether the estimates are identical."""
    one, two = run_ranks(1, num_chains, num_steps), run_ranks(2, num_chains, num_steps)
    return {
        "name": "distributed_ais",
        "shape": {"num_visible": 784, "num_hidden": 500, "num_chains": num_chains, "num_steps": num_steps, "dtype": "float32",
                  "backend": "gloo", "threads_per_rank": 1},
        "one_rank": one,
        "two_ranks": two,
        "speedup": one["seconds"] / two["seconds"],
        "identical_estimates": one["log_z_hex"] == two["log_z_hex"],
    }


def summary(result: dict) -> str:
    return (f"distributed_ais: {result['shape']['num_chains']} chains x {result['shape']['num_steps']} steps, 1 thread per rank: "
            f"1 rank {result['one_rank']['chain_steps_per_second']:.3g} chain-steps/s, 2 ranks "
            f"{result['two_ranks']['chain_steps_per_second']:.3g} ({result['speedup']:.2f}x); "
            f"log Z {result['one_rank']['log_z']:.4f} on both: {'identical' if result['identical_estimates'] else 'DIFFERENT'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-chains", type=int, default=512)
    parser.add_argument("--num-steps", type=int, default=500)
    parser.add_argument("--output", type=Path, default=None, help="also write the JSON result here")
    parser.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)  # a rank started by run_ranks
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker, args.num_chains, args.num_steps)
        return
    result = benchmark_distributed_ais(args.num_chains, args.num_steps)
    print(summary(result))
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
