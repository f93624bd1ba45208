"""Elementary exact samplers shared by models, kernels and paths."""

from __future__ import annotations

import torch


def bernoulli(probs: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Independent draws ``x ~ Bernoulli(probs)`` as ``1[U < p]`` with ``U ~ Uniform[0, 1)``, same shape and dtype.

    Equivalent in distribution to ``torch.bernoulli`` and several times faster on CPU. A draw has no gradient, so the
    result never requires grad (an in-place comparison with ``probs`` that requires grad would otherwise mark it).
    """
    uniform = torch.rand(probs.shape, generator=generator, device=probs.device, dtype=probs.dtype)
    return uniform.lt_(probs.detach())  # in place: the comparison's 0./1. overwrite the uniforms


def bernoulli_logits(
    logits: torch.Tensor, *, dtype: torch.dtype | None = None, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Independent draws ``x ~ Bernoulli(σ(logits))`` as ``1[U < σ(x)]`` with ``U ~ Uniform[0, 1)``: ``logits [...]`` →
    draws of the same shape in ``dtype`` (default: the logits' dtype).

    For float64 logits, ``σ`` and ``U`` are float32 (otherwise the logits' own dtype): a float64 uniform costs two 32-bit
    draws of the generator and float64 ``σ`` half the vector width, and the two took well over half of a float64 RBM
    Gibbs step at 20 hidden units. Each draw's probability is then ``σ(x)`` to within ``2⁻²⁴ ≈ 6e-8`` (the float32
    uniforms' spacing), as for float32 models: ``P(U < p) = ⌈p 2²⁴⌉ 2⁻²⁴``, so a probability below ``2⁻²⁴`` draws 1 with
    probability ``2⁻²⁴``. Gradients never flow through a draw.
    """
    draw_dtype = torch.float32 if logits.dtype == torch.float64 else logits.dtype
    probs = torch.sigmoid(logits.detach().to(draw_dtype))
    # the uniforms in the logits' memory layout (e.g. a transposed product's): an in-place comparison across layouts is slow
    uniform = torch.empty_like(probs).uniform_(generator=generator)
    draws = uniform.lt_(probs)  # in place: the comparison's 0./1. overwrite the uniforms
    return draws.to(logits.dtype if dtype is None else dtype)
