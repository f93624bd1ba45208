"""Bilinear generative model (Culpepper et al. 2011): ``x = Φ((Θc) ⊙ (Ψd)) + σ_n ε`` with sparse content c and positive style d (HAIS §3, eqs. 33–35)."""

from __future__ import annotations

import math

import torch
from torch import nn

from pfzoo.models.latent import ExponentialPrior, LaplacePrior, LatentGenerativeModel, ProductPrior
from pfzoo.models.registry import register_model
from pfzoo.validation import all_finite, check_model_dtype, check_positive_int, check_tensors

_LOG_2PI = math.log(2 * math.pi)


@register_model("bilinear")
class BilinearGenerative(LatentGenerativeModel):
    """``p(x | c, d) = N(x; Φa, σ_n² I)``, ``a = (Θc) ⊙ (Ψd)`` (HAIS eq. 33), with a Laplace prior
    ``p(c_l) = ½ e^{-|c_l|}`` on the content latents (eq. 34) and an exponential prior ``p(d_l) = e^{-d_l}``,
    ``d_l ≥ 0``, on the style latents (eq. 35).

    Each of the K components of ``a`` is the product of a linear function of the content c and a linear
    function of the style d, so d multiplicatively modulates the gains of groups of Φ's components. The
    latent vector is ``z = [c, d]`` ``[L]``, ``L = Lc + Ld``, under
    ``ProductPrior([(LaplacePrior(), Lc), (ExponentialPrior(), Ld)])``, whose ``lower`` (``-inf`` for c,
    0 for d) is the model's :attr:`latent_lower`: HMC over z must reflect there, so give it to the kernel
    (``HAIS(..., lower=model.latent_lower)``; plain ``AIS``'s default kernel does this itself).

    ``-log p(x | z) = |x - Φa|² / (2σ_n²) + (M/2) log(2π σ_n²)``. ``p(x)`` has no closed form; it is
    estimated per example by annealing over z from the prior to the posterior (HAIS eqs. 27–29). With Φ = 0
    or Θ = 0 (or Ψ = 0), ``a = 0`` and ``p(x) = N(0, σ_n² I)`` exactly.

    Parameters (paper symbol → attribute):

    - Φ ``basis [M, K]``: the image basis;
    - Θ ``content_weight [K, Lc]``: maps the content latents c to the components' signed amplitudes;
    - Ψ ``style_weight [K, Ld]``: maps the style latents d to the components' gains.

    The noise σ_n is a fixed setting, not learned.

    Args:
        num_visible: M.
        num_components: K, the number of basis functions (default M).
        num_content: Lc, content latents (default K).
        num_style: Ld, style latents.
        noise_std: σ_n > 0 (the paper's 0.1).
        init_std: standard deviation of the Gaussian initial entries of Φ, Θ and Ψ. Under the prior, x then has
            about ``4 K Lc Ld init_std⁶ + σ_n²`` variance per dimension.
        max_basis_norm: bound ``|·| ≤ max_basis_norm`` on every column of Φ, Θ and Ψ, enforced by
            :meth:`project_parameters` (the Trainer calls it after every step). Bounding all three removes the
            degeneracy in which the weights grow and the latents shrink towards the priors' modes. ``None``: none.
        generator: random generator for the initial weights.
    """

    def __init__(
        self,
        num_visible: int,
        num_components: int | None = None,
        num_content: int | None = None,
        num_style: int = 8,
        *,
        noise_std: float = 0.1,
        init_std: float = 0.1,
        max_basis_norm: float | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.num_visible = check_positive_int(num_visible, "num_visible")
        self.num_components = check_positive_int(num_visible if num_components is None else num_components, "num_components")
        self.num_content = check_positive_int(self.num_components if num_content is None else num_content, "num_content")
        self.num_style = check_positive_int(num_style, "num_style")
        self.num_latent = self.num_content + self.num_style
        if not (isinstance(noise_std, (int, float)) and math.isfinite(noise_std) and noise_std > 0):
            raise ValueError(f"noise_std must be a positive number, got {noise_std!r}")
        if not (isinstance(init_std, (int, float)) and math.isfinite(init_std) and init_std >= 0):
            raise ValueError(f"init_std must be a non-negative number, got {init_std!r}")
        if max_basis_norm is not None and not max_basis_norm > 0:
            raise ValueError(f"max_basis_norm must be positive or None, got {max_basis_norm!r}")
        self.noise_std = float(noise_std)
        self.max_basis_norm = None if max_basis_norm is None else float(max_basis_norm)
        self.prior = ProductPrior([(LaplacePrior(), self.num_content), (ExponentialPrior(), self.num_style)])
        self.basis = nn.Parameter(torch.randn(self.num_visible, self.num_components, generator=generator) * init_std)
        self.content_weight = nn.Parameter(torch.randn(self.num_components, self.num_content, generator=generator) * init_std)
        self.style_weight = nn.Parameter(torch.randn(self.num_components, self.num_style, generator=generator) * init_std)

    def extra_repr(self) -> str:
        """The sizes, shown by ``repr``: ``BilinearGenerative(...)``."""
        return (
            f"num_visible={self.num_visible}, num_components={self.num_components}, "
            f"num_content={self.num_content}, num_style={self.num_style}"
        )

    @classmethod
    def from_tensors(
        cls,
        basis: torch.Tensor,
        content_weight: torch.Tensor,
        style_weight: torch.Tensor,
        *,
        noise_std: float = 0.1,
        max_basis_norm: float | None = None,
    ) -> "BilinearGenerative":
        """A model with copies of ``basis [M, K]`` (Φ), ``content_weight [K, Lc]`` (Θ) and ``style_weight [K, Ld]`` (Ψ)."""
        tensors = {"basis": basis, "content_weight": content_weight, "style_weight": style_weight}
        check_tensors(**tensors)
        for name, tensor in tensors.items():
            if not isinstance(tensor, torch.Tensor) or tensor.dim() != 2 or not tensor.is_floating_point():
                raise ValueError(f"{name} must be a 2-D floating-point tensor, got {getattr(tensor, 'shape', type(tensor).__name__)}")
            if not all_finite(tensor):
                raise ValueError(f"{name} contains NaN or infinite values")
            if tensor.dtype != basis.dtype or tensor.device != basis.device:
                raise ValueError(f"{name} must have basis's dtype and device ({basis.dtype}, {basis.device}), got ({tensor.dtype}, {tensor.device})")
        num_components = basis.shape[1]
        for name in ("content_weight", "style_weight"):
            if tensors[name].shape[0] != num_components:
                raise ValueError(f"{name} must have K = {num_components} rows (basis is [M, K]), got shape {tuple(tensors[name].shape)}")
        model = cls(
            basis.shape[0], num_components, content_weight.shape[1], style_weight.shape[1],
            noise_std=noise_std, init_std=0.0, max_basis_norm=max_basis_norm,
        )
        model.to(device=basis.device, dtype=check_model_dtype(basis.dtype, "basis"))
        with torch.no_grad():
            for name, tensor in tensors.items():
                getattr(model, name).copy_(tensor)
        return model

    def config(self) -> dict:
        return {
            "num_visible": self.num_visible,
            "num_components": self.num_components,
            "num_content": self.num_content,
            "num_style": self.num_style,
            "noise_std": self.noise_std,
            "max_basis_norm": self.max_basis_norm,
        }

    @torch.no_grad()
    def project_parameters(self) -> None:
        """Shrink every column of Φ, Θ and Ψ longer than ``max_basis_norm`` back to that length (no-op without a bound)."""
        if self.max_basis_norm is None:
            return
        for weight in (self.basis, self.content_weight, self.style_weight):
            norms = weight.norm(dim=0, keepdim=True)
            weight.mul_(torch.clamp(self.max_basis_norm / norms.clamp_min(torch.finfo(norms.dtype).tiny), max=1.0))

    # ---- the joint ------------------------------------------------------------------------

    def split_latents(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``z [N, L]`` → content ``c [N, Lc]`` and style ``d [N, Ld]`` (views)."""
        return z[..., : self.num_content], z[..., self.num_content :]

    def coefficients(self, z: torch.Tensor) -> torch.Tensor:
        """``a = (Θc) ⊙ (Ψd)`` ``[N, K]`` for ``z = [c, d]`` ``[N, L]`` (HAIS eq. 33). Not validated."""
        content, style = self.split_latents(z)
        return (content @ self.content_weight.T) * (style @ self.style_weight.T)

    def likelihood_energy_and_grad(self, x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``-log p(x | z)`` ``[N]`` and its gradient in ``z = [c, d]`` ``[N, L]`` for aligned rows ``x [N, M]``. Not validated.

        With ``r = x - Φa`` and ``g = ∂E/∂a = -Φᵀr / σ_n²`` per row: ``∂E/∂c = Θᵀ(g ⊙ Ψd)``, ``∂E/∂d = Ψᵀ(g ⊙ Θc)``.
        """
        variance = self.noise_std**2
        content, style = self.split_latents(z)
        content_drive = content @ self.content_weight.T  # Θc [N, K]
        style_gain = style @ self.style_weight.T  # Ψd [N, K]
        residual = x - (content_drive * style_gain) @ self.basis.T
        energy = residual.square().sum(-1) / (2 * variance) + 0.5 * self.num_visible * (_LOG_2PI + math.log(variance))
        grad_a = -(residual @ self.basis) / variance
        grad = torch.cat(((grad_a * style_gain) @ self.content_weight, (grad_a * content_drive) @ self.style_weight), dim=-1)
        return energy, grad

    def sample_visible(self, z: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """``x = Φ((Θc) ⊙ (Ψd)) + σ_n ε``, ``ε ~ N(0, I)``, one row per row of ``z = [c, d]`` ``[N, L]`` → ``[N, M]``. Not validated."""
        noise = torch.randn(z.shape[0], self.num_visible, generator=generator, dtype=self.dtype, device=self.device)
        return self.coefficients(z) @ self.basis.T + self.noise_std * noise

    def free_energy(self, x: torch.Tensor) -> torch.Tensor:
        """Raises: ``-log p(x)`` has no closed form; estimate it with ``HAIS(..., lower=model.latent_lower).log_likelihood``."""
        raise NotImplementedError(
            "p(x) of a bilinear generative model has no closed form; estimate it with "
            "HAIS(..., lower=model.latent_lower).log_likelihood(model, data)"
        )
