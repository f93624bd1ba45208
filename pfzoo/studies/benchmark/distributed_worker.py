"""One rank of the ``distributed_ais`` benchmark case, run as its own process by
:func:`pfzoo.studies.benchmark.distributed_ais.run_ranks`::

    python -m pfzoo.studies.benchmark.distributed_worker --distributed-worker REPORT --worker-chains N --worker-steps K

with ``torchrun``'s environment variables (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``) set.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from pfzoo import distributed
from pfzoo.estimators import AIS
from pfzoo.studies.benchmark.workloads import random_rbm


def distributed_worker(report: Path, num_chains: int, num_steps: int) -> None:
    """One rank of :func:`~pfzoo.studies.benchmark.distributed_ais.run_ranks`: join the group, warm up, time one AIS run between two barriers; rank 0 writes
    ``report`` (seconds, chain-steps/s, log Z and its bits as hex)."""
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


def main() -> None:
    """Parse the command line of the module docstring and run :func:`distributed_worker`."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--distributed-worker", type=Path, required=True)
    parser.add_argument("--worker-chains", type=int, required=True)
    parser.add_argument("--worker-steps", type=int, required=True)
    args = parser.parse_args()
    distributed_worker(args.distributed_worker, args.worker_chains, args.worker_steps)


if __name__ == "__main__":
    main()
