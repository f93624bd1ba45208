"""Noise-contrastive estimation (Gutmann & Hyvärinen 2010; *Deep Learning* §18.6, eqs. 18.28–18.37).

The model's normalised log density is written with a learned normaliser c (eq. 18.28)

    log p_m(x) = log p̃(x; θ) + c = −F_θ(x) + c,

c standing for −log Z(θ), and (θ, c) are fitted by telling data from noise: with ν noise draws ``y ~ q`` per
example (q a tractable, normalised density), the posterior that a point is data is (eqs. 18.34–18.37, with the prior
odds 1 : ν of Gutmann & Hyvärinen §2.2)

    p(data | x) = p_m(x) / (p_m(x) + ν q(x)) = σ(G(x)),   G(x) = log p_m(x) − log(ν q(x)) = −F_θ(x) + c − log ν − log q(x),

and the loss is the logistic one of that classification (minus eq. 18.33's log-likelihood, per example):

    L(θ, c) = −(1/B) [ Σ_{b ≤ B} log σ(G(x_b)) + Σ_{s ≤ νB} log σ(−G(y_s)) ].

No Z appears anywhere, and c is not free to grow: its gradient ``−(1/B)[Σ_b (1 − σ(G(x_b))) − Σ_s σ(G(y_s))]``
vanishes only where the model, normalised by c, explains the ratio of data to noise. The estimator is consistent for
(θ, −log Z(θ)) when the data come from the model family and q > 0 wherever the data are (G & H 2010, Theorem 2), so
after training c is an estimate of −log Z of the *learned* model, reported per epoch as ``nce_c``.

That estimate is only as good as the noise's cover of the model's mass. c is fixed by where data and noise points lie
(its stationary point is ``E_data[1 − σ(G)] = ν E_q[σ(G)]``), so mass the model puts where neither goes is invisible to
it. With data from the model family that mass vanishes at the optimum; a misspecified model can keep it: a complete
Student-t product of experts trained on whitened natural patches against Gaussian noise grew heavy tails along its
own axes and ended with c 5 nats above −log Z after 60 epochs (measured; on the digits RBM c came within 0.1–0.6 nats).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from pfzoo.models.capabilities import Capability
from pfzoo.training.noise import NOISE_KINDS, FittedNoise, UserNoise, auto_kind, kind_of_state
from pfzoo.training.objective import Objective
from pfzoo.validation import check_bool, check_finite_number, check_positive_int

INITIAL_DRAWS = 1000
"""Noise draws of the importance-sampling estimate of −log Z that c starts from (:meth:`NCE.prepare`)."""


def contrastive_loss(data_log_odds: torch.Tensor, noise_log_odds: torch.Tensor) -> torch.Tensor:
    """``−(1/B) [Σ_b log σ(G_b) + Σ_s log σ(−G_s)]`` for the log-odds ``G`` of ``B`` data points ``[B]`` and of the
    noise draws ``[S]`` (float64 scalar): the logistic loss of telling data from noise, per data point."""
    return (F.softplus(-data_log_odds).sum() + F.softplus(noise_log_odds).sum()) / data_log_odds.shape[0]


def normaliser() -> nn.Parameter:
    """A learned log normaliser ``c`` (float64 scalar, starting at 0): the objective's own parameter, trained with
    the model's by the :class:`~pfzoo.training.Trainer` and saved with the objective's state."""
    return nn.Parameter(torch.zeros((), dtype=torch.float64))


class NCE(Objective):
    """Noise-contrastive estimation of ``θ`` and ``c ≈ −log Z(θ)`` (module docstring) for any model with an exact free
    energy over its visible units: RBMs (hidden units summed out), Ising and Hopfield models, Gaussian–Bernoulli RBMs,
    products of experts, ICA, Gaussians, mcRBMs, a user's :class:`~pfzoo.models.EnergyFunction`, and DBMs and DBNs
    small enough for their free energy to be summed exactly.

    The noise is fitted once, at the first :meth:`prepare`, to the whole training set and kept in buffers
    (:mod:`pfzoo.training.noise`); c then starts from an importance-sampling estimate of −log Z of the initial model
    with :data:`INITIAL_DRAWS` noise draws (from a private generator seeded 0, so every rank starts alike and the run's
    stream is untouched), since from 0 it would take thousands of steps to travel to −log Z of, say, an MNIST RBM.

    Args:
        noise: ``"auto"`` (the base rates for binary data, a Gaussian for real vectors:
            :func:`pfzoo.training.noise.auto_kind`), ``"base_rate"``, ``"gaussian"``, ``"student_t"``, or a user's
            distribution with ``sample(n, *, generator=)`` and a normalised ``log_prob(x)``
            (:class:`~pfzoo.training.noise.UserNoise`; held, not saved).
        noise_ratio: ν ≥ 1, noise draws per data point.
        resample_noise: draw fresh noise for every minibatch (``True``), or draw ν noise points per training example
            once, at the first :meth:`prepare` (a buffer ``[N, ν, V]``), so the loss is the fixed empirical objective
            of G & H 2010 — deterministic, for full-batch L-BFGS.
        smoothing: the base-rate noise's pseudo-count per outcome (> 0).
    """

    config_name = "nce"
    fixed_noise: torch.Tensor
    prepared: torch.Tensor

    def __init__(self, noise: Any = "auto", noise_ratio: int = 1, resample_noise: bool = True, smoothing: float = 1.0) -> None:
        super().__init__()
        self.noise_ratio = check_positive_int(noise_ratio, "noise_ratio")
        self.resample_noise = check_bool(resample_noise, "resample_noise")
        self.smoothing = check_finite_number(smoothing, "smoothing", minimum=0.0, exclusive=True)
        self.c = normaliser()
        self.register_buffer("prepared", torch.tensor(False))
        self.register_buffer("fixed_noise", torch.empty(0))
        self.noise: nn.Module | None = None
        if isinstance(noise, str):
            if noise != "auto" and noise not in NOISE_KINDS:
                raise ValueError(f"noise must be 'auto', one of {sorted(NOISE_KINDS)} or a distribution with sample and log_prob, got {noise!r}")
            if noise != "auto":
                self.noise = self._fitted_noise(noise)
        else:
            self.noise = UserNoise(noise)

    def _fitted_noise(self, kind: str) -> FittedNoise:
        return NOISE_KINDS[kind](self.smoothing) if NOISE_KINDS[kind].binary else NOISE_KINDS[kind]()

    def missing(self, model) -> str | None:
        if Capability.EXACT_FREE_ENERGY not in model.capabilities:
            return Capability.EXACT_FREE_ENERGY.value
        if isinstance(self.noise, FittedNoise) and self.noise.binary != model.binary_visible:
            return f"{'binary' if self.noise.binary else 'real-valued'} visible units for noise={self.noise.kind!r} (noise='auto' fits either)"
        return None

    def prepare(self, model, train: torch.Tensor, *, generator: torch.Generator | None = None) -> bool:
        """Once, at the first epoch: fit the noise to ``train [N, V]``, start c at the importance-sampling estimate of
        −log Z and, without ``resample_noise``, draw the fixed noise ``[N, ν, V]`` with ``generator``; later epochs
        (and resumed runs, whose state is restored) change nothing. Returns ``False``: the objective stays the same."""
        if bool(self.prepared):
            return False
        if self.noise is None:
            self.noise = self._fitted_noise(auto_kind(model.binary_visible)).to(train.device)
        if isinstance(self.noise, FittedNoise):
            self.noise.fit(train)
        with torch.no_grad():
            draws = self.noise.sample(INITIAL_DRAWS, generator=torch.Generator(train.device).manual_seed(0)).to(train)
            log_weights = -model.free_energy(draws).double() - self.noise.log_prob(draws)
            self.c.fill_(math.log(INITIAL_DRAWS) - torch.logsumexp(log_weights, 0).item())
            if not self.resample_noise:
                count = train.shape[0] * self.noise_ratio
                self.fixed_noise = self.noise.sample(count, generator=generator).to(train).reshape(train.shape[0], self.noise_ratio, -1)
        self.prepared.fill_(True)
        return False

    def log_odds(self, model, x: torch.Tensor) -> torch.Tensor:
        """``G(x) = −F_θ(x) + c − log ν − log q(x)`` for ``x [B, V]`` → float64 ``[B]`` (module docstring)."""
        return -model.free_energy(x).double() + self.c - math.log(self.noise_ratio) - self.noise.log_prob(x)

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None, indices: torch.Tensor | None = None) -> torch.Tensor:
        """The NCE loss (module docstring) of ``batch [B, V]`` against ``ν B`` noise draws (float64 scalar): fresh ones,
        or without ``resample_noise`` the fixed draws of the batch's rows ``indices [B]`` of the prepared training set."""
        self.check_outside_fit(model)
        model.check_visible(batch, "batch")
        if self.noise is None or not self.noise.fitted:
            raise ValueError("NCE's noise is fitted by prepare(model, train) before the first loss (the Trainer calls it); call it first")
        if self.resample_noise:
            noise = self.noise.sample(self.noise_ratio * batch.shape[0], generator=generator).to(batch)
        elif indices is None:
            raise ValueError("NCE(resample_noise=False) draws its noise per training example: pass indices, the batch's rows in the prepared training set")
        else:
            noise = self.fixed_noise[indices].flatten(0, 1)
        return contrastive_loss(self.log_odds(model, batch), self.log_odds(model, noise))

    def epoch_metrics(self) -> dict[str, float]:
        """``{"nce_c": c}``, the learned normaliser: an estimate of −log Z of the model as it stands."""
        return {"nce_c": self.c.item()}

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # The fixed noise is drawn by prepare, and noise="auto" picks its kind there: rebuild both before copying into them.
        saved = state_dict.get(prefix + "fixed_noise")
        if saved is not None:
            self.fixed_noise = torch.empty_like(saved, device=self.fixed_noise.device)
        names = {key[len(prefix + "noise."):] for key in state_dict if key.startswith(prefix + "noise.")}
        if self.noise is None and names:
            kind = kind_of_state(names)
            if kind is None:
                raise ValueError(f"the checkpoint's NCE noise has entries {sorted(names)}, which match no noise kind of {sorted(NOISE_KINDS)}")
            self.noise = self._fitted_noise(kind).to(self.c.device)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self) -> str:
        return f"noise_ratio={self.noise_ratio}, resample_noise={self.resample_noise}, smoothing={self.smoothing}"
