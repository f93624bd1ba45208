"""Training through the :class:`~pfzoo.training.Trainer` as a user runs it: ``rbm_pcd_trainer``, one epoch of PCD-1 on a
784×500 RBM with the ``trainer=pcd`` settings (SGD lr 0.05, momentum 0.5, 100 persistent chains, batch 100), its
per-epoch diagnostics (reconstruction error and pseudo-log-likelihood on both splits, the divergence guard's held-out
score) and its checkpoint included: the whole of ``Trainer.fit``.

The bound: an exact PCD-1 update of an RBM computes six products of the minibatch's size ``[B,V]·[V,H]`` or its
transpose: the sweep's ``ṽW`` and ``hWᵀ``, the negatives' ``ṽ′W`` for their statistics, the data's ``vW``, and the
weight gradient ``vᵀσ(vW + c) − ṽ′ᵀσ(ṽ′W + c)`` (two). ``fraction_of_matmul_bound`` is the time of those six at the
device's rate, measured in the same run (:func:`~pfzoo.studies.benchmark.timing.matmul_seconds_per_step`, three of its
pairs), over the seconds per update of an epoch: its training and its diagnostics, as the Trainer records them (what
every further epoch of a run costs). ``fit_fraction_of_matmul_bound`` spreads the fit's one-time set-up over the epoch
too (the data's checks, the first checkpoint). ``fraction_of_three_products`` reads the bound as three such products per
update, half the work: an exact update cannot reach more than 0.5 of it.
"""

from __future__ import annotations

import tempfile

import torch

from pfzoo.data import DataSplits
from pfzoo.studies.benchmark.timing import matmul_seconds_per_step, timed
from pfzoo.studies.benchmark.workloads import random_rbm
from pfzoo.training import PCD, Trainer

PRODUCTS_PER_UPDATE = 6
"""The ``[B,V]·[V,H]``-sized products of an exact PCD-1 update (module docstring)."""


def benchmark_rbm_pcd_trainer(device: torch.device, num_visible=784, num_hidden=500, batch_size=100, num_batches=500,
                              num_valid=10000, num_chains=100, repeats=3) -> dict:
    """One epoch of ``Trainer.fit`` (``num_batches`` PCD-1 updates over ``num_batches · batch_size`` random binary training
    rows, ``num_valid`` validation rows, the ``trainer=pcd`` settings otherwise), the fastest of ``repeats`` fits of fresh
    models (one fit's epoch varies by a quarter on a shared machine): the least fit's wall seconds, the training and
    evaluation seconds of the fastest epoch, updates per second of the epoch and the fractions of the module docstring."""
    g = torch.Generator(device).manual_seed(0)
    train = (torch.rand(num_batches * batch_size, num_visible, generator=g, device=device) < 0.2).float()
    valid = (torch.rand(num_valid, num_visible, generator=g, device=device) < 0.2).float()
    data = DataSplits("random", train, valid, valid=valid)
    fits = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as run_dir:
            model = random_rbm(num_visible, num_hidden, torch.Generator(device).manual_seed(1), device)
            # the Trainer's default optimizer is conf/trainer/pcd.yaml's: SGD, lr 0.05, momentum 0.5
            trainer = Trainer(PCD(k=1, num_chains=num_chains), run_dir=run_dir, epochs=1, batch_size=batch_size, progress=False)
            fits.append(timed(lambda: trainer.fit(model, data), device))
    record = min((fit[0] for fit in fits), key=lambda record: record["seconds"] + record["evaluation_seconds"])
    seconds = min(fit[1] for fit in fits)  # the first fit of a process also imports torch._dynamo (its first optimizer): 1.6 s
    pair_seconds = matmul_seconds_per_step(model.weight.detach(), batch_size, g, device, repeats)
    bound_seconds = PRODUCTS_PER_UPDATE / 2 * pair_seconds
    epoch_seconds = record["seconds"] + record["evaluation_seconds"]
    return {
        "name": "rbm_pcd_trainer",
        "shape": {"num_visible": num_visible, "num_hidden": num_hidden, "batch_size": batch_size, "num_batches": num_batches,
                  "num_valid": num_valid, "num_chains": num_chains, "k": 1},
        "seconds": seconds,
        "training_seconds": record["seconds"],
        "evaluation_seconds": record["evaluation_seconds"],
        "steps_per_second": num_batches / epoch_seconds,
        "matmul_bound_steps_per_second": 1 / bound_seconds,
        "fraction_of_matmul_bound": bound_seconds * num_batches / epoch_seconds,
        "fit_fraction_of_matmul_bound": bound_seconds * num_batches / seconds,
        "fraction_of_three_products": bound_seconds / 2 * num_batches / epoch_seconds,
        "matmul_gflops": 2 * 2 * batch_size * num_visible * num_hidden / pair_seconds / 1e9,
    }
