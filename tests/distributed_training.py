"""The training runs each rank makes in tests/test_distributed.py; a module of its own so that a rank imports little."""

import json
from functools import partial
from pathlib import Path

import torch

from pfzoo import distributed
from pfzoo.data import DataSplits
from pfzoo.models import RBM, LinearGenerative
from pfzoo.training import CD, EMHMC, PCD, PT, BitFlipMPF, PersistentMPF, PseudoLikelihood, Trainer

NUM_CHAINS = 6
"""PCD's chains over all ranks: three per rank on two."""


def tiny_problem() -> tuple[RBM, DataSplits]:
    """A 6×3 float64 RBM and 25 training rows: minibatches of 10 leave a last one of 5, shards of 2 and 3 on two ranks."""
    g = torch.Generator().manual_seed(5)
    model = RBM.from_tensors(0.3 * torch.randn(6, 3, generator=g, dtype=torch.float64), torch.zeros(6, dtype=torch.float64),
                             torch.zeros(3, dtype=torch.float64))
    data = (torch.rand(35, 6, generator=g, dtype=torch.float64) < 0.4).double()
    return model, DataSplits(name="tiny", train=data[:25], test=data[25:])


def parameters(model: torch.nn.Module) -> list[float]:
    return torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()


def deterministic_runs(run_dir: Path) -> dict[str, list[float]]:
    """The final parameters of pseudo-likelihood training by SGD with momentum and weight decay (2 epochs of minibatches
    of 10), the same on 21 rows (the last minibatch of one row leaves rank 0 of two without rows), by full-batch
    L-BFGS (2 epochs), and of bit-flip MPF over every single flip by SGD: deterministic, so any number of ranks must
    agree with one process."""
    results = {}
    sgd = partial(torch.optim.SGD, lr=0.1, momentum=0.5)
    lbfgs = partial(torch.optim.LBFGS, lr=0.5, max_iter=5)
    for name, objective, optimizer, batch_size, rows in (("sgd", PseudoLikelihood, sgd, 10, 25), ("ragged", PseudoLikelihood, sgd, 10, 21),
                                                         ("lbfgs", PseudoLikelihood, lbfgs, 100, 25), ("mpf", BitFlipMPF, sgd, 10, 25)):
        model, data = tiny_problem()
        data = DataSplits(name=data.name, train=data.train[:rows], test=data.test)
        Trainer(objective(), optimizer, run_dir=run_dir / name, epochs=2, batch_size=batch_size, weight_decay=0.01,
                progress=False, seed=1).fit(model, data)
        results[name] = parameters(model)
    return results


def tiny_generative_problem() -> tuple[LinearGenerative, DataSplits]:
    """A 4-dimensional, 2-latent float64 Laplace-prior linear generative model and 25 training rows drawn from it."""
    g = torch.Generator().manual_seed(6)
    model = LinearGenerative.from_tensors(0.5 * torch.randn(4, 2, generator=g, dtype=torch.float64), prior="laplace", noise_std=0.3)
    data = model.sample(35, generator=g)
    return model, DataSplits(name="tiny_generative", train=data[:25], test=data[25:])


def pcd_trainer(run_dir: Path, epochs: int) -> Trainer:
    return Trainer(PCD(k=1, num_chains=NUM_CHAINS), partial(torch.optim.SGD, lr=0.1, momentum=0.5), run_dir=run_dir,
                   epochs=epochs, batch_size=10, progress=False, seed=2)


def sampling_runs(run_dir: Path) -> dict[str, list]:
    """PCD for 3 epochs at once, and for 1 epoch then resumed to 3 (as after a kill following epoch 1's checkpoint);
    persistent MPF (epoch-stateful: ``prepare`` and ``indices``), CD-1, MPF over 2 sampled flips per example, EM with
    HMC E-steps (epoch-stateful, on a linear generative model) and PT with an adapting ladder for 2 epochs each."""
    results = {}
    model, data = tiny_problem()
    trainer = pcd_trainer(run_dir / "whole", 3)
    trainer.fit(model, data)
    results["whole"] = parameters(model)
    results["chains"] = trainer.objective.chains.tolist()
    model, data = tiny_problem()
    pcd_trainer(run_dir / "resumed", 1).fit(model, data)
    model, data = tiny_problem()
    pcd_trainer(run_dir / "resumed", 3).fit(model, data, resume=True)
    results["resumed"] = parameters(model)
    model, data = tiny_problem()
    Trainer(PersistentMPF(), partial(torch.optim.SGD, lr=0.1), run_dir=run_dir / "mpf", epochs=2, batch_size=10, progress=False,
            seed=3).fit(model, data)
    results["persistent_mpf"] = parameters(model)
    for name, objective in (("cd", CD(k=1)), ("mpf_sgd", BitFlipMPF(num_flips=2))):
        model, data = tiny_problem()
        Trainer(objective, partial(torch.optim.SGD, lr=0.1), run_dir=run_dir / name, epochs=2, batch_size=10, progress=False,
                seed=4).fit(model, data)
        results[name] = parameters(model)
    model, data = tiny_generative_problem()
    trainer = Trainer(EMHMC(num_hmc_steps=3, num_leapfrog=3, batch_hmc_steps=1), partial(torch.optim.SGD, lr=0.01),
                      run_dir=run_dir / "em_hmc", epochs=2, batch_size=10, progress=False, seed=5)
    trainer.fit(model, data)
    results["em_hmc"] = parameters(model)
    trainer.objective.prepare(model, data.train, generator=torch.Generator().manual_seed(distributed.rank()))  # one more E-step
    results["em_hmc_latents"] = trainer.objective.latents.tolist()
    model, data = tiny_problem()
    trainer = Trainer(PT(num_chains=NUM_CHAINS, num_replicas=3, min_beta=0.2, adapt_ladder=True), partial(torch.optim.SGD, lr=0.1),
                      run_dir=run_dir / "pt", epochs=2, batch_size=10, progress=False, seed=6)
    trainer.fit(model, data)
    results["pt"] = parameters(model)
    results["pt_betas"] = trainer.objective.betas.tolist()
    return results


def rank_main(out: str) -> None:
    """One rank of a ``torchrun``-style launch (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` set): every
    run above in ``out/runs`` (rank 0 writes there), the results to ``out/rank{r}.json``."""
    distributed.initialize()
    try:
        runs = Path(out, "runs")
        results = {"deterministic": deterministic_runs(runs), "sampling": sampling_runs(runs)}
        Path(out, f"rank{distributed.rank()}.json").write_text(json.dumps(results))
    finally:
        distributed.shutdown()
