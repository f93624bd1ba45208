"""Noise distributions for noise-contrastive estimation: tractable, normalised densities over the visible units,
fitted once to the training set.

NCE (:mod:`pfzoo.training.nce`) needs of its noise ``q`` only exact draws and an exact, normalised ``log q(x)``
(Gutmann & Hyvärinen 2010, §2.1). Each kind here fits one of the library's tractable distributions to the data and
keeps what it fitted in buffers, so a checkpoint restores the very same noise:

- ``"base_rate"`` (:class:`ProductOfMarginals`): binary data; independent Bernoulli units with the data's smoothed base
  rates (the binary families' annealing base, :func:`pfzoo.models.rbm.base_rate_visible_bias`);
- ``"gaussian"`` (:class:`FittedGaussian`): real-valued data; :meth:`pfzoo.models.Gaussian.fit`, full covariance;
- ``"student_t"`` (:class:`FittedStudentT`): real-valued data, on request; the continuous families' heavy-tailed
  annealing base :class:`pfzoo.paths.continuous.StudentTBase` (independent Student-t experts along axes found by ICA).

:class:`UserNoise` wraps any object a user passes with ``sample(n, *, generator=)`` and a normalised ``log_prob(x)``.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

import torch
from torch import nn
from torch.nn import functional as F

from pfzoo.models.gaussian import Gaussian
from pfzoo.models.rbm import base_rate_visible_bias
from pfzoo.paths.continuous import StudentTBase
from pfzoo.sampling import bernoulli_logits
from pfzoo.validation import check_finite_number


class FittedNoise(nn.Module):
    """A noise distribution fitted to training data, its fit held in the buffers named :attr:`state_names`.

    The buffers are empty until :meth:`fit`; a checkpoint's buffers are loaded whatever their size (they are resized
    first, as PCD's chains are), so a resumed run contrasts with the noise it was fitted to.
    """

    kind: ClassVar[str]
    """The name that selects this noise (``NCE(noise=kind)``)."""
    binary: ClassVar[bool]
    """Whether the noise is over binary states (``True``) or real vectors (``False``)."""
    state_names: ClassVar[tuple[str, ...]]
    """The buffers that hold the fit."""

    def __init__(self) -> None:
        super().__init__()
        for name in self.state_names:
            self.register_buffer(name, torch.empty(0))
        self._set_cache(None)

    @property
    def fitted(self) -> bool:
        """Whether :meth:`fit` (or a checkpoint) has set the buffers."""
        return getattr(self, self.state_names[0]).numel() > 0

    def fit(self, data: torch.Tensor) -> None:
        """Fit the noise to ``data [N, V]`` (deterministic), replacing any earlier fit."""
        for name, value in self._fitted_state(data).items():
            setattr(self, name, value.detach())
        self._set_cache(None)

    @abstractmethod
    def _fitted_state(self, data: torch.Tensor) -> dict[str, torch.Tensor]:
        """``{buffer name: value}`` of the fit to ``data [N, V]``."""

    @abstractmethod
    def sample(self, num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Exact draws ``[num_samples, V]`` in the fitted data's dtype."""

    @abstractmethod
    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """The normalised ``log q(x)`` of ``x [B, V]`` → float64 ``[B]``."""

    def _distribution(self):
        """The library distribution built from the buffers (kinds that wrap one), built once and cached."""
        if self._cache is None:
            self._set_cache(self._build())
        return self._cache

    def _set_cache(self, distribution) -> None:
        self.__dict__["_cache"] = distribution  # not a submodule: the buffers are the state

    def _build(self):
        raise NotImplementedError

    def _apply(self, fn, *args, **kwargs):
        self._set_cache(None)  # moved or cast: rebuild from the moved buffers
        return super()._apply(fn, *args, **kwargs)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # The buffers are set by fit, so resize them to the saved ones before copying into them.
        for name in self.state_names:
            saved = state_dict.get(prefix + name)
            if saved is not None:
                setattr(self, name, torch.empty_like(saved, device=getattr(self, name).device))
        self._set_cache(None)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


class ProductOfMarginals(FittedNoise):
    """Independent Bernoulli units with the data's smoothed base rates: ``q(x) = Π_i p_iˣⁱ (1 − p_i)¹⁻ˣⁱ`` with
    ``p_i = (Σ_n x_ni + smoothing) / (N + 2 smoothing)``, held as ``logits [V]`` = logit(p).

    ``log q(x) = x·a − Σ_i softplus(a_i)`` with ``a`` the logits.

    Args:
        smoothing: the pseudo-count per outcome (> 0), which keeps units that are constant in the data possible.
    """

    kind = "base_rate"
    binary = True
    state_names = ("logits",)
    logits: torch.Tensor

    def __init__(self, smoothing: float = 1.0) -> None:
        super().__init__()
        self.smoothing = check_finite_number(smoothing, "smoothing", minimum=0.0, exclusive=True)

    def _fitted_state(self, data: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"logits": base_rate_visible_bias(data, self.smoothing)}

    def sample(self, num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        return bernoulli_logits(self.logits.expand(num_samples, -1), generator=generator)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.logits.double()
        return x.double() @ logits - F.softplus(logits).sum()

    def extra_repr(self) -> str:
        return f"smoothing={self.smoothing}"


class FittedGaussian(FittedNoise):
    """The maximum-likelihood Gaussian of the data, full covariance plus ``regularization · I``
    (:meth:`pfzoo.models.Gaussian.fit`); held as its ``mean [M]`` and ``log_cholesky [M, M]`` (the Gaussian's
    log-Cholesky parametrisation of the precision).

    Args:
        regularization: added to the covariance's diagonal (≥ 0), so data in a subspace still give a density.
    """

    kind = "gaussian"
    binary = False
    state_names = ("mean", "log_cholesky")
    mean: torch.Tensor
    log_cholesky: torch.Tensor

    def __init__(self, regularization: float = 1e-6) -> None:
        super().__init__()
        self.regularization = check_finite_number(regularization, "regularization", minimum=0.0)

    def _fitted_state(self, data: torch.Tensor) -> dict[str, torch.Tensor]:
        gaussian = Gaussian.fit(data, regularization=self.regularization)
        return {"mean": gaussian.mean, "log_cholesky": gaussian.precision_log_cholesky}

    def _build(self) -> Gaussian:
        gaussian = Gaussian(self.mean.shape[0]).to(self.mean)
        gaussian.load_state_dict({"mean": self.mean, "precision_log_cholesky": self.log_cholesky})
        return gaussian.requires_grad_(False)

    def sample(self, num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        return self._distribution().sample(num_samples, generator=generator)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        return self._distribution().log_prob(x)

    def extra_repr(self) -> str:
        return f"regularization={self.regularization}"


class FittedStudentT(FittedNoise):
    """Independent Student-t experts along axes fitted to the data (:meth:`pfzoo.paths.continuous.StudentTBase.fit`);
    held as its ``location [M]``, ``mixing [M, M]`` and ``shape [M]``. Its polynomial tails cover heavy-tailed data
    along its axes, but NCE against it can let a heavy-tailed model grow tails off them (:func:`auto_kind`).
    ``log q(x) = −E(x) − log Z`` in closed form. Its Gamma variates are drawn by rejection in rounds, which read back to
    the host: on a GPU each fresh draw waits for the device (``resample_noise=False`` draws once)."""

    kind = "student_t"
    binary = False
    state_names = ("location", "mixing", "shape")
    location: torch.Tensor
    mixing: torch.Tensor
    shape: torch.Tensor

    def _fitted_state(self, data: torch.Tensor) -> dict[str, torch.Tensor]:
        base = StudentTBase.fit(data)
        return {"location": base.location, "mixing": base.mixing, "shape": base.shape}

    def _build(self) -> StudentTBase:
        return StudentTBase(self.location, self.mixing, self.shape)

    def sample(self, num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        return self._distribution().sample(num_samples, generator=generator)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        base = self._distribution()
        return -base.energy(x).double() - base.log_partition()


class UserNoise(nn.Module):
    """A user's distribution as NCE's noise: any object with ``sample(n, *, generator=)`` → ``[n, V]`` and a
    normalised ``log_prob(x [B, V])`` → ``[B]`` (e.g. a :class:`pfzoo.models.Gaussian`).

    It is held, not owned: it is neither optimised nor saved in checkpoints (pass the same one again to resume), since
    NCE's noise must stay fixed while the model learns. The shapes of its draws and log-densities are checked.
    """

    kind = "user"
    fitted = True

    def __init__(self, distribution: Any) -> None:
        super().__init__()
        if not (callable(getattr(distribution, "sample", None)) and callable(getattr(distribution, "log_prob", None))):
            raise ValueError(f"noise must be one of {sorted(NOISE_KINDS)}, 'auto' or an object with sample(n, *, generator=) and "
                             f"log_prob(x), got {type(distribution).__name__}")
        self.__dict__["distribution"] = distribution  # not a submodule: its parameters must not be trained

    def sample(self, num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        draws = self.distribution.sample(num_samples, generator=generator)
        if not isinstance(draws, torch.Tensor) or draws.dim() != 2 or draws.shape[0] != num_samples:
            shape = tuple(draws.shape) if isinstance(draws, torch.Tensor) else type(draws).__name__
            raise ValueError(f"noise.sample({num_samples}) must return a [{num_samples}, V] tensor, got {shape}")
        return draws.detach()

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        log_q = self.distribution.log_prob(x)
        if not isinstance(log_q, torch.Tensor) or log_q.shape != x.shape[:1]:
            shape = tuple(log_q.shape) if isinstance(log_q, torch.Tensor) else type(log_q).__name__
            raise ValueError(f"noise.log_prob(x) must return [{x.shape[0]}] for x of shape {tuple(x.shape)}, got {shape}")
        return log_q.detach().double()


NOISE_KINDS: dict[str, type[FittedNoise]] = {cls.kind: cls for cls in (ProductOfMarginals, FittedGaussian, FittedStudentT)}
"""The fitted noise kinds by name."""


def auto_kind(binary: bool) -> str:
    """What ``noise="auto"`` fits: the base rates for binary data, a Gaussian for real vectors.

    Not the Student-t product for heavy-tailed data, although it would seem the closer noise: NCE penalises a model's
    mass only where the noise draws land, and on whitened natural patches a complete Student-t product of experts
    trained against Student-t noise along the data's axes grew far heavier tails off those axes (shapes λ → ½, one run
    below ½, an improper model; another ended with c 50 nats above −log Z), where against the Gaussian it stayed proper.
    """
    return ProductOfMarginals.kind if binary else FittedGaussian.kind


def kind_of_state(names: set[str]) -> str | None:
    """The fitted kind whose buffers are exactly ``names`` (a checkpoint's noise entries), or ``None``."""
    return next((kind for kind, cls in NOISE_KINDS.items() if set(cls.state_names) == names), None)

