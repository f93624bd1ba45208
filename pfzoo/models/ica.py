"""Complete ICA with Laplace sources: a square product of Laplace experts with exact ``log Z``."""

from __future__ import annotations

import torch

from pfzoo.models.poe import ProductOfExperts
from pfzoo.models.registry import register_model
from pfzoo.validation import all_finite, check_model_dtype, check_tensors


@register_model("ica")
class ICA(ProductOfExperts):
    """Complete ICA (Sohl-Dickstein thesis eq. 3.6): sources ``s = W x`` with independent Laplace
    densities ``½ e^{-|s_i|}``, so

        E(x) = Σ_i |w_i · x|,    log Z = M log 2 − log|det W|,
        log p(x) = log|det W| − M log 2 − Σ_i |w_i · x|   (exact).

    A :class:`ProductOfExperts` with Laplace experts and ``L = M``; the unmixing matrix W is the
    ``filters [M, M]`` parameter, initially a random orthogonal matrix (``log|det W| = 0``).

    Args:
        num_visible: M.
        generator: random generator for the initial orthogonal W.
    """

    def __init__(self, num_visible: int, *, generator: torch.Generator | None = None) -> None:
        super().__init__(num_visible, num_visible, "laplace", init_std=0.0)
        q, r = torch.linalg.qr(torch.randn(num_visible, num_visible, generator=generator))
        with torch.no_grad():
            self.filters.copy_(q * r.diagonal().sign())  # the sign fix makes q Haar-distributed

    @classmethod
    def from_tensors(cls, filters: torch.Tensor) -> "ICA":
        """An ICA model holding a copy of the unmixing matrix ``filters [M, M]`` (W)."""
        check_tensors(filters=filters)
        if not isinstance(filters, torch.Tensor) or filters.dim() != 2 or filters.shape[0] != filters.shape[1]:
            shape = tuple(filters.shape) if isinstance(filters, torch.Tensor) else type(filters).__name__
            raise ValueError(f"filters must be a square matrix [M, M], got {shape}")
        if not all_finite(filters):
            raise ValueError("filters contains NaN or infinite values")
        model = cls(filters.shape[0])
        model.to(device=filters.device, dtype=check_model_dtype(filters.dtype, "filters"))
        with torch.no_grad():
            model.filters.copy_(filters)
        return model

    def config(self) -> dict:
        return {"num_visible": self.num_visible}
