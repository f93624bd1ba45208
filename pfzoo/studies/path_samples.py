"""Pictures of an MNIST RBM's intermediate distributions along the geometric path and the moment-averaged spline.

The slides (Grosse, Maddison & Salakhutdinov 2013, "Restricted Boltzmann Machines": "two different paths for an RBM
trained on the MNIST digit dataset") draw the geometric-average (GA) and the moment-averaged spline (MAS) paths' intermediate
distributions. :func:`path_samples` draws them: at each β, Gibbs chains of the path's intermediate RBM ``p_β`` (the path's own
kernel, :func:`pfzoo.kernels.run_chain`), half started at base draws and half at training digits, so that the two halves'
agreement after the sweeps measures how near equilibrium the pictured samples are. :func:`samples_figure` and
:func:`samples_markdown` render them for reports/paths (``scripts/draw_path_samples.py``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from pfzoo import paths
from pfzoo.kernels import run_chain
from pfzoo.pictures import tile_images

if TYPE_CHECKING:
    from matplotlib.figure import Figure


PATH_LABELS = {"geometric": "geometric average (GA)", "moment_averaged": "moment-averaged spline (MAS)"}


def start_agreement(from_base: torch.Tensor, from_data: torch.Tensor) -> dict:
    """How far two groups of chains of one distribution disagree: ``from_base [N, V]`` and ``from_data [M, V]`` binary
    states → the difference of their mean pixel density with its standard error, and ``rms_ratio``, the RMS over pixels
    of the difference of the groups' per-pixel means divided by the RMS it has when both groups are independent
    equilibrium draws (``√(p̄(1−p̄)(1/N + 1/M))`` per pixel, ``p̄`` the pooled mean): ≈ 1 at equilibrium, larger while a
    group still remembers its start."""
    density_base, density_data = from_base.mean(1).double(), from_data.mean(1).double()
    stderr = math.sqrt(density_base.var().item() / density_base.numel() + density_data.var().item() / density_data.numel())
    pooled = torch.cat([from_base, from_data]).double().mean(0)
    expected = (pooled * (1 - pooled) * (1 / from_base.shape[0] + 1 / from_data.shape[0])).mean().sqrt().item()
    observed = (from_base.double().mean(0) - from_data.double().mean(0)).square().mean().sqrt().item()
    return {"density_difference": density_base.mean().item() - density_data.mean().item(), "density_stderr": stderr,
            "rms_ratio": observed / expected if expected > 0 else float("nan")}


def path_samples(model, train: torch.Tensor, betas: Sequence[float], *, base: str = "uniform", chains: int = 100,
                 sweeps: int = 2000, generator: torch.Generator, **spline_options) -> dict:
    """Samples of the GA and MAS paths' intermediate RBMs of ``model`` at each of ``betas``, from ``base``.

    At each β, ``chains`` block-Gibbs chains of ``p_β`` run ``sweeps`` sweeps: the first half start at base draws, the
    second half at the first ``chains // 2`` rows of ``train [N, V]``. ``spline_options`` go to the spline's builder
    (e.g. ``target_moments``). Returns, per path kind, ``{"build_seconds", "samples": [len(betas), chains, V] float32,
    "sample_seconds", "checks": [start_agreement(...) per β]}`` (samples from base starts first).
    """
    out = {}
    for kind in PATH_LABELS:
        with torch.no_grad():
            began = time.perf_counter()
            path, _ = paths.build(model, kind=kind, base=base, data=train, **(spline_options if kind == "moment_averaged" else {}))
            built = time.perf_counter()
            half = chains // 2
            rows, checks = [], []
            for beta in betas:
                start = torch.cat([path.draw_base(chains - half, generator=generator), train[:half].to(model.weight.dtype)])
                state, _ = run_chain(path.kernel, path.target, start, sweeps, beta=float(beta), generator=generator)
                rows.append(state.position.float())
                checks.append(start_agreement(state.position[: chains - half], state.position[chains - half:]))
        out[kind] = {"samples": torch.stack(rows), "checks": checks, "build_seconds": round(built - began, 1),
                     "sample_seconds": round(time.perf_counter() - built, 1)}
    return out


def samples_figure(samples: dict, betas: Sequence[float], shown: int = 8, side: int = 28) -> Figure:
    """One panel per path (GA left, MAS right), one row per β: the mean of all chains' states, then ``shown`` samples
    from base starts, as ``side × side`` images; ``samples`` is :func:`path_samples`'s output. The caller saves and closes it."""
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(1, len(PATH_LABELS), figsize=(5.2 * len(PATH_LABELS), 5.2 * len(betas) / (1 + shown) + 0.8))
    for ax, (kind, label) in zip(axes, PATH_LABELS.items()):
        stack = samples[kind]["samples"]  # [B, N, V]
        tiles = torch.cat([stack.mean(1, keepdim=True), stack[:, :shown]], dim=1)  # [B, 1 + shown, V]
        grid = tile_images(1 - tiles.reshape(-1, side, side), 1 + shown, padding=2, pad_value=0.0)  # dark = on, black frames
        ax.imshow(grid.numpy(), cmap="gray", vmin=0, vmax=1, interpolation="nearest")
        ax.set_yticks([2 + side / 2 + i * (side + 2) for i in range(len(betas))], [f"β = {b:.2f}" for b in betas])
        ax.set_xticks([2 + side / 2], ["mean"])
        ax.set_title(label, fontsize=10)
    figure.suptitle("Intermediate distributions of an MNIST RBM: chain means and samples (dark = on)", fontsize=10)
    figure.tight_layout()
    return figure


def samples_markdown(entry: dict) -> str:
    """The report section of the stored run ``entry`` (what ``scripts/draw_path_samples.py`` keeps under the key
    ``path_samples`` of reports/paths/results.json: settings, per-path checks and the reading)."""
    s = entry["settings"]
    lines = ["", "## (c) The intermediate distributions, drawn (slides, \"Restricted Boltzmann Machines\")", "",
             f"{s['model']} from a {s['base']} base; {s['chains']} block-Gibbs chains per β and path, {s['sweeps']:,} sweeps "
             f"of the path's own kernel at that β, half started at base draws and half at the first {s['chains'] // 2} training "
             f"digits. {s['spline']} Each row: the mean of all {s['chains']} chains' final states, then {s['shown']} samples from "
             "base starts. Equilibrium check, per β: the two halves' mean pixel density (difference ± stderr) and the RMS "
             "over pixels of their per-pixel means' difference divided by what independent equilibrium draws give "
             "(≈ 1 at equilibrium).", "", "![GA and MAS intermediate distributions](path_samples.png)", "",
             "| β | GA density diff. | GA RMS ratio | MAS density diff. | MAS RMS ratio |", "|---:|---:|---:|---:|---:|"]
    for i, beta in enumerate(s["betas"]):
        cells = [entry["checks"][kind][i] for kind in PATH_LABELS]
        lines.append(f"| {beta:.2f} | " + " | ".join(f"{c['density_difference']:+.4f} ± {c['density_stderr']:.4f} | {c['rms_ratio']:.2f}"
                                                    for c in cells) + " |")
    lines += ["", f"Build: GA {entry['build_seconds']['geometric']} s, MAS {entry['build_seconds']['moment_averaged']} s; "
                  f"sampling {entry['sample_seconds']} s; {entry['machine']}, {entry['date']}.", "", entry["reading"], ""]
    return "\n".join(lines)
