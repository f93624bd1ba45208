"""Chains sharded across torch.distributed ranks: the estimates do not depend on the number of ranks, bit for bit."""

import json
import os
from contextlib import contextmanager
import socket
import subprocess
import sys
from pathlib import Path

import torch

from pfzoo import distributed
from pfzoo.estimators import AIS, CSL, HAIS, RAISE
from pfzoo.models import RBM, Gaussian

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

def estimates(seed: int) -> dict:
    """AIS, RAISE, CSL and HAIS on small models, floats as hex so that equality is to the last bit."""
    g = torch.Generator().manual_seed(3)
    model = RBM.from_tensors(torch.randn(10, 6, generator=g, dtype=torch.float64) * 1.5,
                             torch.randn(10, generator=g, dtype=torch.float64), torch.randn(6, generator=g, dtype=torch.float64))
    data = (torch.rand(40, 10, generator=g, dtype=torch.float64) < 0.4).double()
    gaussian = Gaussian.from_tensors(torch.tensor([[2.0, 0.3], [0.3, 1.0]], dtype=torch.float64), torch.tensor([0.5, -1.0], dtype=torch.float64))

    def seeded():
        return torch.Generator().manual_seed(seed)

    # 40 chains or examples: blocks of 16, 16 and 8, so two ranks run one block and two
    ais = AIS(num_chains=40, num_steps=60)(model, data=data, generator=seeded())
    raise_ = RAISE(num_chains=3, num_steps=30, diagnostics=True).log_likelihood(model, data, generator=seeded())
    csl = CSL(num_chains=40, samples_per_chain=5, burn_in=2).log_likelihood(model, data, generator=seeded())
    hais = HAIS(num_chains=40, num_steps=40, step_size=0.3)(gaussian, generator=seeded())
    return {
        "ais": hexed(ais.log_weights) + hexed([ais.log_z, ais.stderr, ais.ess]),
        "raise": hexed(raise_.info["log_weights"]) + hexed([raise_.mean, raise_.stderr]) + hexed(raise_.info["diagnostics"].increment_var),
        "csl": hexed(csl.per_example) + hexed([csl.stderr]),
        "hais": hexed(hais.log_weights) + hexed(hais.info["acceptance"]),
        "check": {"ais": [ais.log_z, ais.stderr, model.log_partition().item()], "hais": [hais.log_z, hais.stderr, gaussian.log_partition().item()]},
    }


def hexed(values) -> list[str]:
    return [float(value).hex() for value in torch.as_tensor(values).flatten().tolist()]


def rank_main(out: str, seed: int) -> None:
    """One rank of a ``torchrun``-style launch (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` set): its estimates to ``out/rank{r}.json``."""
    distributed.initialize()
    try:
        Path(out, f"rank{distributed.rank()}.json").write_text(json.dumps(estimates(seed)))
    finally:
        distributed.shutdown()


def launch_two_ranks(out: Path, seed: int) -> list[dict]:
    """Both ranks' estimates from two processes joined by gloo over localhost, one thread each (as torchrun starts them)."""
    with socket.socket() as probe:  # a free port for the rendezvous
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = f"import sys; sys.path.insert(0, {str(TESTS)!r}); from test_distributed import rank_main; rank_main({str(out)!r}, {seed})"
    ranks = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={
            **os.environ, "OMP_NUM_THREADS": "1", "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        })
        for rank in range(2)
    ]
    for process in ranks:
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr[-3000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(2)]


@contextmanager
def one_rank(tmp_path: Path):
    """A process group of this process alone (world size 1), as ``torchrun --nproc_per_node=1`` gives, on one thread
    like the two-rank processes."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", store=torch.distributed.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        yield
    finally:
        torch.distributed.destroy_process_group()
        torch.set_num_threads(threads)


def test_two_ranks_give_the_estimates_of_one_to_the_last_bit(tmp_path):
    first, second = launch_two_ranks(tmp_path, seed=0)
    with one_rank(tmp_path):
        one = estimates(0)
    assert first == second  # every rank holds the gathered result
    for name in ("ais", "raise", "csl", "hais"):
        assert first[name] == one[name], name
    for log_z, stderr, exact in one["check"].values():
        assert abs(log_z - exact) < 5 * stderr + 1e-3


def test_another_seed_gives_other_chains(tmp_path):
    """The comparison above would also pass if the seed never reached the blocks."""
    with one_rank(tmp_path):
        one, other = estimates(1), estimates(2)
    for name in ("ais", "raise", "csl", "hais"):
        assert one[name] != other[name], name


def test_blocks_depend_on_the_number_of_items_only():
    assert distributed.blocks(40) == [range(0, 16), range(16, 32), range(32, 40)]
    assert distributed.blocks(3) == [range(0, 3)]
    many = distributed.blocks(10_000)
    assert len(many) == distributed.MAX_BLOCKS and many[-1].stop == 10_000  # blocks of ⌈10000/64⌉ = 157 items
    assert all(len(block) == 157 for block in many[:-1])


def test_without_a_process_group_this_process_owns_every_block():
    assert not distributed.is_active()
    assert (distributed.rank(), distributed.world_size()) == (0, 1)
    assert distributed.owned_blocks(5) == range(5)


def test_block_generators_are_reproducible_and_distinct():
    draw = lambda seed, block: torch.rand(4, generator=distributed.block_generator(seed, block, torch.device("cpu")))
    assert torch.equal(draw(7, 0), draw(7, 0))
    assert not torch.equal(draw(7, 0), draw(7, 1))
    assert not torch.equal(draw(7, 0), draw(8, 0))

