"""An RBM trained by minimum probability flow on binarized MNIST next to a CD-1 RBM of the same size (thesis appendix F;
``scripts/reproduce_mpf_rbm.py``): each model's test log-likelihood by AIS and its samples, and the report rendered from
results.json alone (:func:`readme`, :func:`samples_figure`).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch import Tensor

from pfzoo.data import DataSplits
from pfzoo.estimators import AIS
from pfzoo.kernels import run_chain
from pfzoo.sampling import bernoulli

RECIPES = {"MPF": "mpf_rbm_mpf", "CD-1": "mpf_rbm_cd1"}
"""Objective → its recipe in conf/experiment."""
NUM_CHAINS = 100  # the samples' chains: a 10 × 10 grid


def evaluate(model, data: DataSplits, *, ais_chains: int, ais_steps: int, gibbs_sweeps: int, generator: torch.Generator) -> tuple[dict, Tensor]:
    """The test log-likelihood of ``model`` by AIS (base-rate base, ``ais_steps`` distributions, ``ais_chains`` chains)
    with its log Z and seconds, as results.json stores them, and :func:`gibbs_samples` after ``gibbs_sweeps`` sweeps;
    both draw from ``generator``, AIS first."""
    estimator = AIS(num_chains=ais_chains, num_steps=ais_steps, base="base_rate")
    began = time.perf_counter()
    estimate = estimator.log_likelihood(model, data.test, base_data=data.train, generator=generator)
    measured = {"test_log_likelihood": estimate.mean, "stderr": estimate.stderr, "log_z": estimate.partition.log_z,
                "log_z_stderr": estimate.partition.stderr, "ais_seconds": time.perf_counter() - began}
    return measured, gibbs_samples(model, gibbs_sweeps, generator)


@torch.no_grad()
def gibbs_samples(model, sweeps: int, generator: torch.Generator) -> Tensor:
    """Visible probabilities ``[100, V]`` of :data:`NUM_CHAINS` chains of the model's own block-Gibbs chain started from
    uniform noise: ``p(v | h)`` of the hidden state the last of ``sweeps`` sweeps drew (the probabilities, not a binary
    draw, show the digits clearly)."""
    kernel, target = model.gibbs_chain()
    start = bernoulli(torch.full((NUM_CHAINS, model.num_visible), 0.5), generator=generator)
    state, _ = run_chain(kernel, target, start, sweeps, generator=generator)
    return model.visible_probs(state.hidden)


def samples_figure(samples: dict[str, Tensor], path: Path, sweeps: int) -> None:
    """Write ``path``: side by side per objective, ``samples [100, 784]`` (:func:`gibbs_samples`) as a 10 × 10 grid of digits."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(1, len(samples), figsize=(5 * len(samples), 5.3))
    for ax, (name, images) in zip(axes, samples.items()):
        grid = images.reshape(10, 10, 28, 28).permute(0, 2, 1, 3).reshape(280, 280)
        ax.imshow(grid.numpy(), cmap="gray", vmin=0, vmax=1)
        ax.set_title(f"{name}: 100 chains, {sweeps} Gibbs sweeps")
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def readme(record: dict) -> str:
    """The report's README.md from a run's ``record`` (what results.json holds)."""
    settings = record["settings"]
    rows = [
        f"| {name} | {r['learning_rate']} (momentum {r['momentum']}) | {r['train_seconds']:.0f} | {r['test_log_likelihood']:.2f} ± {r['stderr']:.2f} "
        f"| {r['log_z']:.2f} ± {r['log_z_stderr']:.2f} |"
        for name, r in record["results"].items()
    ]
    return (
        f"# MPF and CD-1 RBMs (784 × {settings['hidden']}) on binarized MNIST\n\n"
        f"Made by `{record['command']}` on {record['date']} ({record['machine']}, {record['threads']} threads, "
        f"load average {record['load_average']}).\n\n"
        f"Both trained {settings['epochs']} epochs on {record['num_train']:,} digits with SGD (batch 100, learning rate lr/(1 + "
        f"{settings['learning_rate_decay']}·(epoch − 1))) from the same start. MPF: "
        f"single-bit-flip connectivity, hidden units summed out (thesis appendix F), {settings['num_flips']} flips sampled per digit, "
        "log K minimised. "
        f"Test log-likelihood: AIS, base-rate base, {settings['ais_steps']:,} intermediate distributions, {settings['ais_chains']} chains, "
        f"on {record['num_test']:,} test digits (± is the stderr of log Ẑ; AIS is a stochastic lower bound on log Z, so "
        "these are upper-biased).\n\n"
        "| objective | learning rate | train seconds | test log-likelihood (nats) | log Z |\n|---|---|---|---|---|\n"
        + "\n".join(rows) + "\n\n![samples](samples.png)\n"
    )
