"""Chains sharded across torch.distributed ranks: the estimates do not depend on the number of ranks, bit for bit."""

import json
import os
import socket
import subprocess
import warnings
import sys
from contextlib import contextmanager
from pathlib import Path

import distributed_training
import pytest
import torch
from distributed_estimates import estimates

from pfzoo import app, cli, distributed, zoo
from pfzoo.estimators import AIS
from pfzoo.estimators.annealing import AnnealingDiagnostics
from pfzoo.estimators.sharding import pool_chain_diagnostics
from pfzoo.models import RBM

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def free_port() -> int:
    """A port on localhost that nothing listens on, for a rendezvous."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launch_two_ranks(out: Path, seed: int) -> list[dict]:
    """Both ranks' estimates from two processes joined by gloo over localhost, one thread each (as torchrun starts them)."""
    run_two_ranks(f"import sys; sys.path.insert(0, {str(TESTS)!r}); from distributed_estimates import rank_main; rank_main({str(out)!r}, {seed})")
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(2)]


def run_two_ranks(code: str, *, attempts: int = 2) -> None:
    """Run the Python ``code`` as rank 0 and rank 1 of a gloo group over localhost, one thread each; both must succeed.

    A failed launch is repeated once on a fresh port: on a loaded 2-core machine a gloo rank has, rarely, died at
    rendezvous or teardown (``terminate called without an active exception``) with results identical on the rerun. The
    tests assert on the ranks' results, so a failure that repeats still fails; its stderr is in the message."""
    port = free_port()
    ranks = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={
            **os.environ, "OMP_NUM_THREADS": "1", "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        })
        for rank in range(2)
    ]
    failures = []
    for rank, process in enumerate(ranks):
        _, stderr = process.communicate(timeout=120)
        if process.returncode != 0:
            failures.append(f"rank {rank} exited {process.returncode}: {stderr[-3000:]}")
    if failures and attempts > 1:
        warnings.warn(f"two-rank launch failed, repeating it once: {failures[0][-500:]}", stacklevel=2)
        return run_two_ranks(code, attempts=attempts - 1)
    assert not failures, "\n".join(failures)


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


ESTIMATES = ("ais", "ais32", "bridge", "linked", "raise", "csl", "hais", "posterior", "smc", "smc_latents")


def test_plain_one_rank_and_two_ranks_give_the_same_estimates_to_the_last_bit(tmp_path):
    """A plain run is the one-rank run: each chain's stream depends on the seed and its global index only."""
    first, second = launch_two_ranks(tmp_path, seed=0)
    with one_rank(tmp_path):
        one = estimates(0)
    plain = estimates(0)  # no process group, this process's threads
    assert first == second  # every rank holds the gathered result
    for name in ESTIMATES:
        assert first[name] == one[name], name
        assert plain[name] == one[name], name
    for log_z, stderr, exact in one["check"].values():
        assert abs(log_z - exact) < 5 * stderr + 1e-3


def test_another_seed_gives_other_chains(tmp_path):
    """The comparison above would also pass if the seed never reached the blocks."""
    with one_rank(tmp_path):
        one, other = estimates(1), estimates(2)
    for name in ESTIMATES:
        assert one[name] != other[name], name


def test_blocks_depend_on_the_number_of_items_only():
    assert distributed.blocks(100) == [range(0, 64), range(64, 100)]
    assert distributed.blocks(96) == [range(0, 32), range(32, 64), range(64, 96)]
    assert distributed.blocks(129) == [range(0, 64), range(64, 129)]  # a rest shorter than 32 joins the block before
    assert distributed.blocks(3) == [range(0, 3)]
    many = distributed.blocks(10_000)
    assert len(many) == distributed.MAX_BLOCKS and many[-1].stop == 10_000 and [len(block) for block in many] == [640] * 15 + [400]
    assert all(block.start % distributed.MIN_BLOCK_SIZE == 0 for block in many)  # every batch of blocks starts aligned


def test_without_a_process_group_this_process_owns_every_block():
    assert not distributed.is_active()
    assert (distributed.rank(), distributed.world_size()) == (0, 1)
    assert distributed.owned_blocks(5) == range(5)


def test_block_generators_are_reproducible_and_distinct():
    draw = lambda seed, block: torch.rand(4, generator=distributed.block_generator(seed, block, torch.device("cpu")))
    assert torch.equal(draw(7, 0), draw(7, 0))
    assert not torch.equal(draw(7, 0), draw(7, 1))
    assert not torch.equal(draw(7, 0), draw(8, 0))



@pytest.mark.slow
def test_evaluate_under_torchrun_prints_one_report_with_the_estimate_of_one_rank(tmp_path):
    overrides = ["model=rbm", "estimator.num_steps=100", "num_test=20", "progress=false"]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(ROOT / "scripts" / "evaluate.py"), *overrides]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("log Z ") == 1 and result.stdout.count("results written to") == 1, result.stdout
    run_dirs = list((tmp_path / "runs" / "evaluate").iterdir())  # both ranks ran in rank 0's run directory
    assert len(run_dirs) == 1
    two = json.loads((run_dirs[0] / "evaluation.json").read_text())
    with one_rank(tmp_path):
        one = app.evaluate(cli.compose("evaluate", [*overrides, f"run_dir={tmp_path / 'one'}"]))
    different = {key for key in one if key not in ("seconds", "result_file") and one[key] != two[key]}  # result_file: each run's own folder
    assert different == set() and two["log_z"] == one["log_z"]


@pytest.fixture(scope="module")
def two_rank_training(tmp_path_factory) -> tuple[Path, list[dict]]:
    """The runs of tests/distributed_training.py on two ranks (launched once for the tests below): their folder and
    both ranks' results."""
    out = tmp_path_factory.mktemp("two_rank_training")
    run_two_ranks(f"import sys; sys.path.insert(0, {str(TESTS)!r}); from distributed_training import rank_main; rank_main({str(out)!r})")
    return out, [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(2)]


def test_two_ranks_train_deterministic_objectives_as_one_process(two_rank_training, tmp_path):
    out, (first, second) = two_rank_training
    one = distributed_training.deterministic_runs(tmp_path)  # no process group: whole minibatches in this process
    assert first["deterministic"] == second["deterministic"]  # every rank took the same steps
    for name in ("sgd", "ragged", "lbfgs", "mpf"):
        two = torch.tensor(first["deterministic"][name], dtype=torch.float64)
        torch.testing.assert_close(two, torch.tensor(one[name], dtype=torch.float64), rtol=0, atol=1e-12, msg=name)
        assert two.abs().max() > 0.05  # training moved the parameters, so the comparison says something
    for name in ("sgd", "lbfgs"):  # rank 0 alone wrote the run directory: one line per epoch
        assert (out / "runs" / name / "metrics.jsonl").read_text().count("\n") == 2


def test_two_rank_pcd_keeps_a_share_of_the_chains_per_rank_and_resumes_exactly(two_rank_training):
    out, (first, second) = two_rank_training
    for name in ("whole", "resumed", "persistent_mpf", "cd", "mpf_sgd", "em_hmc", "em_hmc_latents", "pt", "pt_betas"):
        assert first["sampling"][name] == second["sampling"][name], name  # ranks agree on the parameters
    assert first["sampling"]["resumed"] == first["sampling"]["whole"]  # 1 epoch, then resumed to 3 = 3 at once
    state = zoo.load_checkpoint(out / "runs" / "whole" / "checkpoint.pt")["trainer_state"]
    chains = [rank["objective"]["chains"] for rank in state["ranks"]]
    half = distributed_training.NUM_CHAINS // 2
    assert [tuple(c.shape) for c in chains] == [(half, 6), (half, 6)]  # num_chains split across the ranks
    assert chains[0].tolist() == first["sampling"]["chains"] and chains[1].tolist() == second["sampling"]["chains"]
    assert not torch.equal(state["ranks"][0]["sampling"], state["ranks"][1]["sampling"])  # a random stream per rank
    em = [rank["objective"] for rank in zoo.load_checkpoint(out / "runs" / "em_hmc" / "checkpoint.pt")["trainer_state"]["ranks"]]
    assert em[0]["latents"].shape == em[1]["latents"].shape == (25, 2)
    advanced = [rank["batch_advanced"] for rank in em]  # each example's minibatch transitions happened on one rank
    assert (advanced[0] ^ advanced[1]).all() and advanced[0].any() and advanced[1].any()
    assert not torch.equal(em[0]["latents"][advanced[1]], em[1]["latents"][advanced[1]])  # so the copies differ there
    pt = [rank["objective"] for rank in zoo.load_checkpoint(out / "runs" / "pt" / "checkpoint.pt")["trainer_state"]["ranks"]]
    assert [tuple(rank["chains"].shape) for rank in pt] == [(3 * half, 6), (3 * half, 6)]  # each rank's share of every replica
    assert first["sampling"]["pt_betas"] != [0.2, 0.2**0.5, 1.0]  # one ladder, adapted from the acceptance pooled over ranks
    assert "swap_acceptance" in (out / "runs" / "pt" / "metrics.jsonl").read_text()
    start = {"cd": distributed_training.tiny_problem()[0], "em_hmc": distributed_training.tiny_generative_problem()[0]}
    for name, model in start.items():  # training moved the parameters, so the agreement says something
        assert (torch.tensor(first["sampling"][name]) - torch.tensor(distributed_training.parameters(model))).abs().max() > 1e-3, name


def test_resuming_with_another_number_of_ranks_is_refused_in_one_line(two_rank_training):
    out, _ = two_rank_training
    model, data = distributed_training.tiny_problem()
    with pytest.raises(ValueError) as error:
        distributed_training.pcd_trainer(out / "runs" / "whole", 4).fit(model, data, resume=True)
    message = str(error.value)
    assert "\n" not in message and "trained on 2 rank(s) but this run has 1" in message


def test_one_rank_trains_as_a_plain_run_to_the_last_bit(tmp_path):
    """Rank 0 keeps the sampling stream of a run without a process group, so PCD on one rank is that run."""
    model, data = distributed_training.tiny_problem()
    distributed_training.pcd_trainer(tmp_path / "plain", 2).fit(model, data)
    plain = distributed_training.parameters(model)
    with one_rank(tmp_path):
        model, data = distributed_training.tiny_problem()
        distributed_training.pcd_trainer(tmp_path / "grouped", 2).fit(model, data)
    assert distributed_training.parameters(model) == plain
    state = zoo.load_checkpoint(tmp_path / "grouped" / "checkpoint.pt")["trainer_state"]
    assert len(state["ranks"]) == 1 and "ranks" not in zoo.load_checkpoint(tmp_path / "plain" / "checkpoint.pt")["trainer_state"]


@pytest.mark.slow
def test_train_under_torchrun_writes_one_run_directory(tmp_path):
    overrides = ["trainer.epochs=2", "trainer.progress=false", "model.num_hidden=3", "pictures=false", "final_num_test=20",
                 "trainer.evaluate_every=2", "estimator.num_steps=20"]  # the estimator shards its chains at epoch 2
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(ROOT / "scripts" / "train.py"), *overrides]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    # rank 0 alone reports (and logs the headline: train.log's copy of it, also on the terminal)
    assert result.stdout.count("final epoch:") == result.stdout.count("test log-likelihood  =") == 1, result.stdout
    (run_dir,) = (tmp_path / "runs" / "train").iterdir()  # both ranks trained in rank 0's run directory
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [record["epoch"] for record in records] == [1, 2] and "test_log_likelihood" in records[1]
    assert len(zoo.load_checkpoint(run_dir / "checkpoint.pt")["trainer_state"]["ranks"]) == 2
    result_file = json.loads((run_dir / "result.json").read_text())  # written once, by rank 0
    assert result_file["status"] == "completed" and records[-1]["closing_test_log_likelihood"] == result_file["headline"]["mean"]


def test_unsharded_estimates_run_as_without_a_process_group(tmp_path, monkeypatch):
    g = torch.Generator().manual_seed(0)
    model = RBM.from_tensors(torch.randn(8, 5, generator=g, dtype=torch.float64), torch.zeros(8, dtype=torch.float64),
                             torch.zeros(5, dtype=torch.float64))

    def log_weights():
        return AIS(num_chains=64, num_steps=20, schedule="linear")(model, generator=torch.Generator().manual_seed(1)).log_weights

    gathered = []  # the blocks each collective gathered
    gather_blocks = distributed.gather_blocks
    monkeypatch.setattr(distributed, "gather_blocks", lambda payloads: gathered.append(len(payloads)) or gather_blocks(payloads))
    plain = log_weights()
    with one_rank(tmp_path):
        with distributed.unsharded():
            alone = log_weights()
        assert gathered == []  # no collective, which would wait forever for ranks that are not estimating
        sharded = log_weights()  # the context ended: sharding again
    assert gathered == [2]  # 64 chains: two blocks of 32, both on this rank
    assert torch.equal(alone, plain) and torch.equal(sharded, plain)  # a plain run is the one-rank run


def test_pooled_block_diagnostics_are_those_of_all_chains():
    g = torch.Generator().manual_seed(4)
    increments = torch.randn(50, 6, generator=g, dtype=torch.float64)
    log_weights = increments.cumsum(1)  # [chains, steps]: the weights after each step

    def diagnostics(rows: slice) -> AnnealingDiagnostics:
        weights = log_weights[rows]
        log_sum = torch.logsumexp(weights, 0)
        ess = torch.exp(2 * log_sum - torch.logsumexp(2 * weights, 0))
        return AnnealingDiagnostics(torch.linspace(0.2, 1, 6), increments[rows].mean(0), increments[rows].var(0), ess, log_sum)

    pooled = pool_chain_diagnostics([(diagnostics(slice(0, 20)), 20), (diagnostics(slice(20, 45)), 25), (diagnostics(slice(45, 50)), 5)])
    whole = diagnostics(slice(0, 50))
    for name in ("increment_mean", "increment_var", "ess", "log_weight_sums"):
        torch.testing.assert_close(getattr(pooled, name), getattr(whole, name), rtol=1e-12, atol=0, msg=name)
