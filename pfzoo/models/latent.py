"""Directed latent-variable models ``p(x) = ∫ p(x | z) p(z) dz`` over real-valued data, and their priors."""

from __future__ import annotations

import math

import torch

from pfzoo.models.capabilities import Capability
from pfzoo.models.base import EnergyModel
from pfzoo.validation import allocates, check_generator, check_matrix, check_positive_int
from pfzoo.sampling import normal, uniform

_LOG_2 = math.log(2.0)
_LOG_2PI = math.log(2 * math.pi)


class LatentPrior:
    """A factorised, normalised prior ``p(z) = Π_l p(z_l)`` over ``z ∈ ℝ^L``: what posterior annealing starts from.

    ``energy_and_grad(z)`` returns ``-log p(z)`` (normalised, so the annealing base has ``log Z_0 = 0``)
    and its gradient; ``sample`` draws exactly; ``lower`` is where HMC reflects: one bound for every latent
    (a float), one per latent (a list of L floats, ``-inf`` where a latent is unbounded), or ``None`` (none).
    """

    name: str
    lower: float | list[float] | None = None

    def energy_and_grad(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def sample(self, num_samples: int, num_latent: int, *, dtype, device, generator: torch.Generator | None = None) -> torch.Tensor:
        raise NotImplementedError


class GaussianPrior(LatentPrior):
    """``z_l ~ N(0, 1)``: ``-log p(z) = ½|z|² + (L/2) log 2π`` (HAIS eq. 31)."""

    name = "gaussian"

    def energy_and_grad(self, z):
        return 0.5 * z.square().sum(-1) + 0.5 * z.shape[-1] * _LOG_2PI, z

    def sample(self, num_samples, num_latent, *, dtype, device, generator=None):
        return normal((num_samples, num_latent), generator=generator, dtype=dtype, device=device)


class LaplacePrior(LatentPrior):
    """``p(z_l) = ½ exp(-|z_l|)``: ``-log p(z) = Σ|z_l| + L log 2`` (HAIS eq. 32), a sparse prior."""

    name = "laplace"

    def energy_and_grad(self, z):
        return z.abs().sum(-1) + z.shape[-1] * _LOG_2, torch.sign(z)

    def sample(self, num_samples, num_latent, *, dtype, device, generator=None):
        magnitude = -torch.log1p(-uniform((num_samples, num_latent), generator=generator, dtype=dtype, device=device))  # Exp(1)
        sign = torch.where(uniform((num_samples, num_latent), generator=generator, dtype=dtype, device=device) < 0.5, -1.0, 1.0)
        return sign * magnitude


class ExponentialPrior(LatentPrior):
    """``p(z_l) = exp(-z_l)`` on ``z_l ≥ 0``: ``-log p(z) = Σ z_l`` (HAIS eq. 35's positive latents); HMC reflects at 0."""

    name = "exponential"
    lower = 0.0

    def energy_and_grad(self, z):
        return z.sum(-1), torch.ones_like(z)

    def sample(self, num_samples, num_latent, *, dtype, device, generator=None):
        return -torch.log1p(-uniform((num_samples, num_latent), generator=generator, dtype=dtype, device=device))


class ProductPrior(LatentPrior):
    """Independent blocks of latents, each under its own prior: ``z = [z_1, …, z_P]``, ``p(z) = Π_p p_p(z_p)``.

    ``ProductPrior([(LaplacePrior(), Lc), (ExponentialPrior(), Ld)])`` is the bilinear model's prior over
    ``z = [c, d]`` (HAIS eqs. 34–35). The energy is the sum of the parts' energies on their slices of the last
    axis and the gradient their concatenation; samples concatenate the parts' samples.

    ``lower`` is per latent: ``[-inf]·Lc + [0.0]·Ld`` for the example, or ``None`` if no part is bounded.
    ``-inf`` is safe in HMC's reflection ``where(x < lower, 2·lower − x, x)``: ``x < -inf`` is never true
    for finite x, and the discarded branch is ``-inf`` (not NaN), so unbounded latents pass through unchanged.

    Args:
        parts: ``(prior, size)`` pairs in latent order; sizes are positive integers.
    """

    def __init__(self, parts: list[tuple[LatentPrior, int]]) -> None:
        parts = list(parts)
        if not parts:
            raise ValueError("parts must be a non-empty list of (prior, size) pairs")
        lowers: list[float] = []
        for index, part in enumerate(parts):
            if not (isinstance(part, (tuple, list)) and len(part) == 2 and isinstance(part[0], LatentPrior)):
                raise ValueError(f"parts[{index}] must be a (LatentPrior, size) pair, got {part!r}")
            prior, size = part
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise ValueError(f"parts[{index}]'s size must be a positive integer, got {size!r}")
            if prior.lower is None:
                lowers += [-math.inf] * size
            elif isinstance(prior.lower, (int, float)):
                lowers += [float(prior.lower)] * size
            else:
                bounds = [float(bound) for bound in prior.lower]
                if len(bounds) != size:
                    raise ValueError(f"parts[{index}]'s prior has {len(bounds)} lower bounds for {size} latents")
                lowers += bounds
        self.parts = tuple((prior, size) for prior, size in parts)
        self.sizes = tuple(size for _, size in self.parts)
        self.num_latent = sum(self.sizes)
        self.name = "product(" + ",".join(f"{prior.name}:{size}" for prior, size in self.parts) + ")"
        self.lower = lowers if any(bound > -math.inf for bound in lowers) else None

    def _check_width(self, num_latent: int, name: str) -> None:
        if num_latent != self.num_latent:
            raise ValueError(f"{name} must be {self.num_latent} (the sum of the parts' sizes {list(self.sizes)}), got {num_latent}")

    def energy_and_grad(self, z):
        """``-log p(z) = Σ_p -log p_p(z_p)`` ``[...]`` and its gradient ``[..., L]`` for ``z [..., L]``."""
        self._check_width(z.shape[-1], "z's last dimension")
        energies, grads = zip(*(prior.energy_and_grad(block) for (prior, _), block in zip(self.parts, z.split(self.sizes, dim=-1))))
        return sum(energies[1:], energies[0]), torch.cat(grads, dim=-1)

    def sample(self, num_samples, num_latent, *, dtype, device, generator=None):
        """Exact draws ``[num_samples, L]``: each part samples its own block, in order."""
        self._check_width(num_latent, "num_latent")
        blocks = [prior.sample(num_samples, size, dtype=dtype, device=device, generator=generator) for prior, size in self.parts]
        return torch.cat(blocks, dim=-1)

    def __repr__(self) -> str:
        return f"ProductPrior({self.name})"


PRIORS = {prior.name: prior for prior in (GaussianPrior(), LaplacePrior(), ExponentialPrior())}


def latent_prior(name: str) -> LatentPrior:
    """The prior called ``name``: "gaussian", "laplace" or "exponential"."""
    try:
        return PRIORS[name]
    except KeyError:
        raise ValueError(f"prior must be one of {sorted(PRIORS)}, got {name!r}") from None


class LatentGenerativeModel(EnergyModel):
    """``p(x) = ∫ p(x | z) p(z) dz``, ``x ∈ ℝ^M``, ``z ∈ ℝ^L``: normalised, so ``log Z = 0``, but ``p(x)`` itself is
    intractable in general.

    Its log-likelihood is estimated per example by annealing over the latents from the prior to the
    posterior (HAIS §3, eqs. 27–29; :class:`~pfzoo.estimators.HAIS`'s ``log_likelihood``), a stochastic
    lower bound on ``log p(x)``. Subclasses implement the joint pieces in the latents:

    - ``prior``: a :class:`LatentPrior` over the ``num_latent`` latents (the annealing base);
    - ``likelihood_energy_and_grad(x, z)``: ``-log p(x | z)`` ``[N]`` and its gradient in ``z`` ``[N, L]``
      for aligned rows ``x [N, M]``, ``z [N, L]`` (unchecked; one call per leapfrog step);
    - ``latent_lower``: reflection bounds for HMC, the prior's ``lower`` (a float for every latent, a list of
      L floats with ``-inf`` where unbounded, or ``None``: unbounded); pass it as the kernel's ``lower``;
    - ``sample_visible(z, generator=...)``: exact draws ``x ~ p(x | z)``, from which :meth:`sample_joint` and
      :meth:`sample` draw ancestrally.
    """

    family_capabilities = frozenset({Capability.LATENT_GENERATIVE})
    samples_exactly = True  # sample() draws ancestrally: z from the prior, then x from p(x | z)

    binary_visible = False
    num_latent: int
    prior: LatentPrior

    @property
    def latent_lower(self) -> float | list[float] | None:
        return self.prior.lower

    def likelihood_energy_and_grad(self, x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def joint_energy(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """``-log p(x, z) = -log p(z) - log p(x | z)`` for aligned ``x [N, M]``, ``z [N, L]`` → ``[N]``."""
        self.check_visible(x, "x")
        check_matrix(z, "z", device=self.device, dtype=self.dtype)
        if z.shape != (x.shape[0], self.num_latent):
            raise ValueError(f"z must have shape [{x.shape[0]}, {self.num_latent}] (one latent vector per row of x), got {tuple(z.shape)}")
        return self.prior.energy_and_grad(z)[0] + self.likelihood_energy_and_grad(x, z)[0]

    def energy(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """The joint energy ``-log p(x, z)`` ``[N]``: the full state of a latent model is ``(x, z)``."""
        return self.joint_energy(x, z)

    def sample_prior(self, num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """``num_samples`` exact draws ``z ~ p(z)``, ``[num_samples, L]``."""
        return self.prior.sample(num_samples, self.num_latent, dtype=self.dtype, device=self.device, generator=generator)

    def sample_visible(self, z: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """One exact draw ``x_n ~ p(x | z_n)`` per row of ``z [N, L]`` → ``[N, M]``. Not validated."""
        raise NotImplementedError

    @torch.no_grad()
    def sample_joint(self, num_samples: int, *, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Ancestral draws ``z ~ p(z)``, ``x ~ p(x | z)`` → ``(x [num_samples, M], z [num_samples, L])``.

        Each ``z_n`` is then an exact sample of its own ``x_n``'s posterior ``p(z | x_n)``: what reverse annealing
        needs to start from (Grosse, Ghahramani & Adams 2015, §4; :class:`~pfzoo.estimators.Sandwich`).
        """
        check_positive_int(num_samples, "num_samples")
        check_generator(generator, self.device)
        z = self.sample_prior(num_samples, generator=generator)
        return self.sample_visible(z, generator=generator), z

    @allocates("num_samples")
    def sample(self, num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Exact ancestral samples of x, ``[num_samples, M]`` (the x of :meth:`sample_joint`)."""
        self.check_computable()
        return self.sample_joint(num_samples, generator=generator)[0]

    @property
    def log_partition_cost(self) -> int:
        return 0

    def log_partition(self) -> torch.Tensor:
        """0: the model is a normalised density."""
        return torch.zeros((), dtype=torch.float64, device=self.device)

    @property
    def free_energy_cost(self) -> int | None:
        """``None``: ``-log p(x)`` has no closed form in general (subclasses with one return 0)."""
        return None
