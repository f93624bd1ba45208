"""Thesis Fig. 3.6 at its size: 80 binary 64 × 64 images stored in a 4096-unit Hopfield network from corrupted copies.

The thesis stored 80 fingerprints by minimising the MPF objective (eq. 3.10) over "a large set of randomly generated
(and unlabeled) noisy versions", each with a random 1228 of its 4096 bits flipped (30 %), and found all 80 originals to
be fixed points; from a copy with 40 % of its bits flipped the dynamics (eq. 3.7) returned the original. No fingerprints
are available here, so :func:`grass_patterns` cuts 80 distinct 64 × 64 crops from the van Hateren image in
``../shared/data`` (a meadow: grass blades and the dark gaps between them, the nearest thing to a fingerprint's ridges) and binarises each at
its own median, so every pattern has half of its bits on.

Training (:func:`fit_from_noisy_copies`) minimises K over a stream of fresh corrupted copies rather than over one fixed
set: at n = 4096 each unit's field is a linear function of 4095 inputs, so a fixed set of fewer than a few thousand
copies can be fitted copy by copy (memorised) instead of averaged, and a full-batch L-BFGS evaluation over enough copies
(tens of thousands) costs tens of seconds on two cores. Each step draws ``copies_per_step`` new corrupted copies of every
image and takes a heavy-ball gradient step on K over them (:func:`flow_and_gradient`, the exact gradient of
:class:`~pfzoo.training.BitFlipMPF`'s K in the local-rule form of thesis eqs. 3.12–3.13). The step is taken in the
network's spin parametrisation ``J = 4 J_s``, ``b = 2θ - 2 J_s 𝟙`` (:meth:`~pfzoo.models.Ising.from_spins`): the same
network, but in 0/1 units a coupling row that is constant acts like a bias multiplied by the ~2048 active units, and
plain steps must then be so small that they hardly move the rest.

:func:`run_image_experiment` returns the section ``images`` of reports/hopfield/results.json (rendered by
:mod:`pfzoo.studies.hopfield_report`): the fraction of the originals that are fixed points, of 40 %-corrupted cues
recovered exactly, the training trace and time, and the panels a–h of the figure as hex strings.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Mapping

import numpy as np
import torch
from torch import Tensor

from pfzoo.data.hopfield_patterns import corrupt
from pfzoo.models.hopfield import Hopfield
from pfzoo.validation import check_binary, check_finite_number, check_positive_int

logger = logging.getLogger(__name__)


def grass_patterns(image: np.ndarray, count: int = 80, side: int = 64, *, generator: torch.Generator | None = None) -> Tensor:
    """``count`` distinct binary ``side × side`` patterns from a grey ``image [H, W]`` → float32 ``[count, side²]``.

    The image's log pixels are cut into non-overlapping ``side × side`` tiles; ``count`` of them are chosen by a random
    permutation from ``generator`` and each is binarised at its own median (1 above it, 0 otherwise), then flattened row
    by row.
    """
    check_positive_int(count, "count")
    check_positive_int(side, "side")
    if image.ndim != 2 or not np.isfinite(image).all() or (image <= 0).any():
        raise ValueError(f"image must be a 2-D array of positive finite pixels, got shape {image.shape}")
    rows, cols = image.shape[0] // side, image.shape[1] // side
    if rows * cols < count:
        raise ValueError(f"image {image.shape} holds {rows * cols} tiles of {side} × {side}, fewer than count={count}")
    logs = np.log(image)
    chosen = torch.randperm(rows * cols, generator=generator)[:count].tolist()
    tiles = [logs[(k // cols) * side:(k // cols + 1) * side, (k % cols) * side:(k % cols + 1) * side] for k in chosen]
    return torch.tensor(np.stack([(tile > np.median(tile)).ravel() for tile in tiles]), dtype=torch.float32)


def flow_and_gradient(coupling: Tensor, bias: Tensor, batch: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """MPF's K over binary ``batch [B, n]`` and its gradient for a symmetric zero-diagonal ``coupling [n, n]`` and ``bias [n]``.

    ``K = (1/B) Σ_x Σ_i k_i(x)`` with the flip rates ``k_i(x) = exp(-½ s_i (Jx + b)_i)``, ``s = 2x - 1`` (thesis eq. 3.10,
    per example, as :class:`~pfzoo.training.BitFlipMPF` computes it). Its gradient in the free parameters J_ij = J_ji is
    ``∂K/∂J_ij = -(1/2B) Σ_x (s_i k_i x_j + s_j k_j x_i)`` and ``∂K/∂b_i = -(1/2B) Σ_x s_i k_i`` (eqs. 3.12–3.13 summed,
    :func:`~pfzoo.training.mpf_local_update` with the sign turned); the symmetric sum is one matrix product
    ``[s⊙k, x]ᵀ[x, s⊙k]``, so no n × n transpose is formed. Returns ``(K [], grad_coupling [n, n], grad_bias [n])``.
    """
    spins = 2 * batch - 1
    signed = spins * torch.exp(-0.5 * spins * torch.addmm(bias, batch, coupling))  # s_i k_i(x), [B, n]
    flow = (signed * spins).sum(1).mean()
    grad_coupling = torch.cat([signed, batch]).T @ torch.cat([batch, signed])
    grad_coupling.mul_(-0.5 / batch.shape[0]).fill_diagonal_(0)
    return flow, grad_coupling, signed.sum(0) * (-0.5 / batch.shape[0])


def fit_from_noisy_copies(
    patterns: Tensor,
    *,
    flips: int,
    steps: int,
    copies_per_step: int = 2,
    learning_rate: float = 1e-3,
    momentum: float = 0.5,
    generator: torch.Generator | None = None,
    on_step: Callable[[int, Hopfield, float], None] | None = None,
) -> Hopfield:
    """A Hopfield network from ``steps`` heavy-ball steps on K over fresh corrupted copies of ``patterns [m, n]`` (0/1).

    Step t draws ``copies_per_step`` copies of every pattern, each with exactly ``flips`` distinct random bits flipped
    (:func:`~pfzoo.data.hopfield_patterns.corrupt`, from ``generator``), and computes K and its gradient over them
    (:func:`flow_and_gradient`); the rules never see the patterns themselves. In the spin parameters (module docstring)
    the gradient is ``g_{J_s} = 4 ∂K/∂J - 2 (∂K/∂b_i + ∂K/∂b_j)`` and ``g_θ = 2 ∂K/∂b``; velocities ``v ← μ v + g`` and
    the step ``J_s -= η v_J``, ``θ -= η v_θ`` are mapped back to ``ΔJ = 4 ΔJ_s``, ``Δb = 2Δθ - 2 ΔJ_s 𝟙``. Starts from
    J = 0, b = 0. ``on_step(step, model, K)`` (1-based) is called after each step with the minibatch's K before it.
    Returns the network in the patterns' dtype.
    """
    check_binary(patterns, "patterns")
    check_positive_int(steps, "steps")
    check_positive_int(copies_per_step, "copies_per_step")
    learning_rate = check_finite_number(learning_rate, "learning_rate", minimum=0.0, exclusive=True)
    momentum = check_finite_number(momentum, "momentum", minimum=0.0, maximum=1.0)
    n = patterns.shape[1]
    zeros = torch.zeros(n, n, dtype=patterns.dtype)
    model = Hopfield.from_tensors(zeros, zeros[0])
    coupling, bias = model.coupling.data, model.bias.data  # kept symmetric with a zero diagonal: J itself
    velocity_coupling, velocity_field = torch.zeros_like(coupling), torch.zeros_like(bias)
    repeated = patterns.repeat_interleave(copies_per_step, dim=0)
    for step in range(1, steps + 1):
        flow, grad_coupling, grad_bias = flow_and_gradient(coupling, bias, corrupt(repeated, flips, generator=generator))
        grad_spin = grad_coupling.mul_(4).sub_(2 * grad_bias[:, None]).sub_(2 * grad_bias[None, :]).fill_diagonal_(0)
        velocity_coupling.mul_(momentum).add_(grad_spin)
        velocity_field.mul_(momentum).add_(2 * grad_bias)
        coupling.sub_(velocity_coupling, alpha=4 * learning_rate)
        bias.sub_(learning_rate * (2 * velocity_field - 2 * velocity_coupling.sum(1)))
        if not torch.isfinite(flow):
            raise ValueError(f"learning_rate={learning_rate:g} is too large: K overflowed at step {step}")
        if on_step is not None:
            on_step(step, model, flow.item())
    return model


def unit_blocks(num_units: int) -> list[Tensor]:
    """The asynchronous order of thesis eq. 3.7, unit 1 first: one block per unit (a fully connected network's
    :meth:`~pfzoo.models.Ising.gibbs_blocks`, without colouring 4096 units greedily)."""
    return list(torch.arange(num_units).unsqueeze(1))


@torch.no_grad()
def converge(model: Hopfield, states: Tensor, *, max_sweeps: int = 100) -> tuple[Tensor, Tensor]:
    """Run the dynamics (eq. 3.7, units in order) from ``states [B, n]`` until no unit changes or ``max_sweeps`` sweeps.

    Returns ``(after_one_sweep [B, n], final [B, n])``: the states after the first asynchronous sweep (panel c of
    Fig. 3.6) and at the end. Deterministic: :meth:`~pfzoo.models.Hopfield.update_sweep` with one block per unit.
    """
    blocks = unit_blocks(states.shape[1])
    first = model.update_sweep(states, blocks=blocks)
    current = first
    for _ in range(max_sweeps - 1):
        updated = model.update_sweep(current, blocks=blocks)
        if torch.equal(updated, current):
            break
        current = updated
    return first, current


def to_hex(bits: Tensor) -> str:
    """A 0/1 vector ``[n]`` (n a multiple of 4) as a hex string, four bits a digit, most significant first."""
    return np.packbits(bits.to(torch.uint8).numpy()).tobytes().hex()[: bits.numel() // 4]


def from_hex(text: str, num_bits: int) -> np.ndarray:
    """:func:`to_hex` inverted → uint8 ``[num_bits]``."""
    padded = text + "0" * (-len(text) % 2)
    return np.unpackbits(np.frombuffer(bytes.fromhex(padded), dtype=np.uint8))[:num_bits]


def run_image_experiment(image: np.ndarray, settings: Mapping, *, on_progress: Callable[[str], None] = lambda line: None) -> dict:
    """Fig. 3.6 from ``settings`` (``count``, ``side``, ``train_flips``, ``cue_flips``, ``steps``, ``copies_per_step``,
    ``learning_rate``, ``momentum``, ``cues_per_image``, ``trace_every``, ``shown``, ``seed``): the section ``images``.

    One generator seeded with ``seed`` draws, in order: the tiles, the training copies (step by step), the cues. Measured
    after training: the fraction of the originals that are fixed points; from ``cues_per_image`` cues per image with
    ``cue_flips`` bits flipped, the fraction that converge exactly to their original, the mean fraction of correct bits
    in the cue, after one sweep and at the end. Every ``trace_every`` steps the trace records K (the minibatch's) and
    the fraction of originals that are fixed points; training seconds exclude these checks.
    """
    generator = torch.Generator().manual_seed(settings["seed"])
    patterns = grass_patterns(image, settings["count"], settings["side"], generator=generator)
    spins = 2 * patterns - 1
    overlaps = (spins @ spins.T / patterns.shape[1]).fill_diagonal_(0).abs()
    trace, checking = [], [0.0]

    def on_step(step: int, model: Hopfield, flow: float) -> None:
        if step % settings["trace_every"] and step != settings["steps"]:
            return
        began = time.perf_counter()
        stored = model.is_fixed_point(patterns).double().mean().item()
        trace.append({"step": step, "flow": flow, "stored": stored})
        checking[0] += time.perf_counter() - began
        on_progress(f"step {step}: K = {flow:.1f}, stored {stored:.3f}")

    began = time.perf_counter()
    model = fit_from_noisy_copies(patterns, flips=settings["train_flips"], steps=settings["steps"], copies_per_step=settings["copies_per_step"],
                                  learning_rate=settings["learning_rate"], momentum=settings["momentum"], generator=generator, on_step=on_step)
    seconds = time.perf_counter() - began - checking[0]
    shown = settings["shown"]
    training_examples = corrupt(patterns[shown], settings["train_flips"], generator=generator)
    originals = patterns.repeat_interleave(settings["cues_per_image"], dim=0)
    cues = corrupt(originals, settings["cue_flips"], generator=generator)
    began = time.perf_counter()
    one_sweep, final = converge(model, cues)
    recall_seconds = time.perf_counter() - began
    recovered = (final == originals).all(1)
    first_cue = [i * settings["cues_per_image"] for i in shown]
    panels = {name: [to_hex(row) for row in rows] for name, rows in
              (("training", training_examples), ("cue", cues[first_cue]), ("one_update", one_sweep[first_cue]), ("converged", final[first_cue]))}
    return {
        "num_units": patterns.shape[1],
        "num_patterns": patterns.shape[0],
        "pattern_overlap": {"mean": overlaps.sum().item() / (len(patterns) * (len(patterns) - 1)), "max": overlaps.max().item()},
        "stored": model.is_fixed_point(patterns).double().mean().item(),
        "recovered": recovered.double().mean().item(),
        "images_recovered_every_cue": recovered.view(-1, settings["cues_per_image"]).all(1).double().mean().item(),
        "bits_correct": {"cue": (cues == originals).double().mean().item(), "one_update": (one_sweep == originals).double().mean().item(),
                         "converged": (final == originals).double().mean().item()},
        "training_copies": settings["steps"] * settings["copies_per_step"] * patterns.shape[0],
        "seconds": seconds,
        "recall_seconds": recall_seconds,
        "trace": trace,
        "originals": [to_hex(patterns[i]) for i in shown],
        "panels": panels,
    }
