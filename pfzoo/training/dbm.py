"""Training deep Boltzmann machines (Salakhutdinov & Hinton 2009, AISTATS; Salakhutdinov & Larochelle 2010).

Four pieces:

* :class:`DBMPersistentMeanField`, the learning procedure of Salakhutdinov & Hinton 2009, Algorithm 1
  ("stochastic approximation" / PCD with a variational positive phase): the data-dependent statistics
  come from the mean-field posterior ``q(h | v)`` (eq. 7), the data-independent ones from persistent
  fantasy particles advanced by odd/even block Gibbs sweeps.
* :class:`DBMParallelTempering`, the same with a parallel-tempering negative phase.
* :func:`pretrain_dbm`, the greedy layer-wise initialisation of §3.1 from a stack of modified RBMs
  trained with CD-k.
* :func:`start_dbm_from_rbm`, the other initialisation: a trained RBM with the layers above it all but detached.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Callable, Sequence

import torch
from torch import nn

from pfzoo.kernels import ScanGibbs, run_chain
from pfzoo.models.capabilities import Capability, require
from pfzoo.models.dbm import DBM
from pfzoo.models.dbm_heating import HEATING_MEAN_LIMIT, ClampedHeatingTarget
from pfzoo.models.dbm_surgery import DEAD_UNIT_ACTIVITY
from pfzoo.models.tied_rbm import TiedRBM
from pfzoo.training.contrastive import owned_chains
from pfzoo.training.objective import Objective
from pfzoo.training.parallel_tempering import PT
from pfzoo.training.sparsity import DEFAULT_SPARSITY_COST, DEFAULT_SPARSITY_DAMPING, SparsityTarget, check_sparsity_settings
from pfzoo.sampling import bernoulli
from pfzoo.validation import allocating, check_generator, check_non_negative_int, check_positive_int
from pfzoo.zoo import load_model

logger = logging.getLogger(__name__)

DEFAULT_TRAINING_MEAN_FIELD_ITERATIONS = 10

MAX_DEAD_SHARE = 0.1
""":func:`pretrain_dbm` warns when more than this share of a pretrained RBM's hidden units are dead: joint training
rarely revives them (the recipe zoo_dbm_500_1000_deep's top RBM at lr 0.05 left 960 of its 1,000 units dead after
87 joint epochs)."""

ProgressCallback = Callable[[int, int], None]


def _check_dbm(model, name: str = "model") -> DBM:
    require(model, Capability.MEAN_FIELD, by=f"DBM training ({name})", alternatives=["trainer=cd", "pcd", "mpf"])
    return model


class DBMPersistentMeanField(Objective):
    """PCD with a mean-field positive phase for DBMs (Salakhutdinov & Hinton 2009, Algorithm 1).

    For a batch ``v [B, V]`` the objective returns the surrogate

        L(θ) = mean_n E_θ(v_n, μ_n) - mean_m E_θ(x̃_m, E[x̃_odd | x̃_even]),

    with no gradient through ``μ`` or the particles. ``μ_n = (μ¹, …, μ^L)`` are the mean-field
    posterior means of the hidden layers (:meth:`~pfzoo.models.DBM.mean_field`, eq. 7, started from
    the doubled bottom-up pass), and ``x̃_m`` are ``num_chains`` persistent fantasy particles.
    The energy is linear in every parameter and in every unit, so ``-∂L/∂W_i`` is exactly the
    update of Algorithm 1,

        ⟨x_i x_{i+1}ᵀ⟩_{data, q} - ⟨x_i x_{i+1}ᵀ⟩_{particles},

    and likewise ``⟨x_i⟩_{data, q} - ⟨x_i⟩_{particles}`` for the biases ``b_i``. The particle
    statistics are Rao–Blackwellised: the particles store only their even layers
    ``x̃_even = (ṽ, h̃², h̃⁴, …)``; the odd layers enter through their exact conditional means
    ``p(x_odd = 1 | x̃_even)``, which has the same expectation as a sampled odd state and lower variance.

    Each call advances every particle ``k`` odd/even block-Gibbs sweeps (``x_odd ~ p(x_odd | x_even)``
    then ``x_even ~ p(x_even | x_odd)``, both exact) *before* computing the surrogate, like
    :class:`~pfzoo.training.PCD`. On the first call the particles start from ``num_chains`` rows
    of the batch drawn with replacement (visible layer) and uniformly random even hidden layers.
    The particles are the registered buffer ``chains [num_chains, Σ n_even]`` (the layout of
    :meth:`~pfzoo.models.DBM.split_even`), so they are checkpointed and restored with
    ``state_dict``. Under a ``torch.distributed`` process group ``num_chains`` counts the particles of all ranks and
    each rank holds its contiguous share, as for :class:`~pfzoo.training.PCD`.

    Greedy pretraining: with ``pretrain`` given (e.g. ``functools.partial(pretrain_dbm,
    epochs_per_layer=10, batch_size=100, lr=0.05, k=1)``), the :class:`~pfzoo.training.Trainer`'s
    per-epoch ``prepare`` hook runs ``pretrain(model, train, generator=...)`` once, before the first
    update, on the full training set; the buffer ``pretrained`` records that it ran, so a resumed run
    does not pretrain again. ``loss`` then also accepts (and ignores) the trainer's ``indices``.
    (The first epoch's ``seconds`` in the metrics file therefore include the pretraining.)

    Args:
        k: odd/even Gibbs sweeps per update. Salakhutdinov & Hinton 2009 (§4) used 5 for MNIST.
        num_chains: number of fantasy particles M (the paper's 100).
        mean_field_iterations: maximum mean-field sweeps per batch (stopping earlier when converged
            within the model's default tolerance). 10 from the bottom-up initialisation is plenty
            during training; evaluation should use more.
        pretrain: ``None``, or ``callable(model, data, *, generator)`` that initialises the model
            before training (normally a partial of :func:`pretrain_dbm`).
        sparsity_target: ``None`` (the paper's objective), or a target mean activity ``p ∈ (0, 1)`` for every hidden
            layer, or a list with one per hidden layer (``None`` for a free layer): the loss then adds the penalty of
            :class:`~pfzoo.training.sparsity.SparsityTarget` (Hinton's practical guide §11; the submodule ``sparsity``),
            which raises units that are rarely on and lowers those on too often.
        sparsity_cost: the penalty's weight (its gradient on a unit's bias is ``sparsity_cost · (q̂ − p)``).
        sparsity_damping: ``λ ∈ [0, 1)`` of the activity estimate ``q̂ ← λ q̂ + (1 − λ) q_batch``.
        positive_sweeps: ``0`` (the paper's positive phase: the mean-field means themselves), or this many Gibbs
            sweeps of ``p(h | v)`` with ``v`` clamped, started from draws of the mean-field means, whose last state gives
            the data-dependent statistics (:func:`clamped_posterior_layers`). Mean field leaves out the posterior's
            correlations between neighbouring layers, ``E_p[h¹h²ᵀ | v] − μ¹μ²ᵀ``, which have a positive component along
            the weights that cause them: its update shrinks the upper weights below what maximum likelihood asks.
    """

    lazy_buffers = ("chains",)

    chains: torch.Tensor
    pretrained: torch.Tensor

    config_name = "dbm_pcd"

    def missing(self, model) -> str | None:
        return None if Capability.MEAN_FIELD in model.capabilities else Capability.MEAN_FIELD.value

    def __init__(
        self,
        k: int = 5,
        num_chains: int = 100,
        mean_field_iterations: int = DEFAULT_TRAINING_MEAN_FIELD_ITERATIONS,
        pretrain: Callable | None = None,
        sparsity_target: float | Sequence[float | None] | None = None,
        sparsity_cost: float | None = DEFAULT_SPARSITY_COST,
        sparsity_damping: float | None = DEFAULT_SPARSITY_DAMPING,
        positive_sweeps: int = 0,
    ) -> None:
        super().__init__()
        self.k = check_positive_int(k, "k")
        self.positive_sweeps = check_non_negative_int(positive_sweeps, "positive_sweeps")
        self.num_chains = check_positive_int(num_chains, "num_chains")
        self.mean_field_iterations = check_positive_int(mean_field_iterations, "mean_field_iterations")
        if pretrain is not None and not callable(pretrain):
            raise ValueError(f"pretrain must be None or a callable(model, data, *, generator), got {type(pretrain).__name__}")
        self.pretrain = pretrain
        self.sparsity = optional_sparsity(sparsity_target, sparsity_cost, sparsity_damping)
        self.register_buffer("chains", torch.empty(0))
        self.register_buffer("pretrained", torch.tensor(False))

    # ---- the Trainer's epoch hook ---------------------------------------------------------

    def prepare(self, model: DBM, train: torch.Tensor, *, generator: torch.Generator | None = None) -> bool:
        """Run ``pretrain`` on the training set ``train [N, V]`` the first time (never after a resume).

        Returns ``True`` when it changed the model (so the trainer discards optimiser state).
        """
        return pretrain_once(self, model, train, generator)

    # ---- the objective ---------------------------------------------------------------------

    def loss(
        self,
        model: DBM,
        batch: torch.Tensor,
        *,
        generator: torch.Generator | None = None,
        indices: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Surrogate loss (scalar) for binary ``batch [B, V]``; advances the particles ``k`` sweeps first.

        ``indices`` (the batch's rows in the training set, passed by the Trainer) is ignored.
        """
        self.check_outside_fit(model)
        model.check_visible(batch, "batch")
        check_generator(generator, model.device)
        if self.chains.numel() == 0:
            self.chains = self._initial_chains(model, batch, generator)
        elif self.chains.shape[1] != model.num_even_units:
            raise ValueError(
                f"the persistent chains have {self.chains.shape[1]} even units but the model has "
                f"{model.num_even_units} (layer sizes {model.layer_sizes}); use a fresh objective for a new model"
            )
        means = model.mean_field(batch, num_iterations=self.mean_field_iterations)
        with torch.no_grad():
            rbm = model.even_odd_rbm()  # odd/even sweeps of the fantasy particles: block Gibbs on the even/odd RBM
            self.chains = run_chain(*rbm.gibbs_chain(), self.chains, self.k, generator=generator)[0].position
            positive = clamped_posterior_layers(model, rbm, batch, means, self.positive_sweeps, generator)
        loss = mean_field_surrogate(model, batch, positive, rbm, self.chains)
        return loss if self.sparsity is None else loss + self.sparsity.penalty(model, batch, means)

    def _initial_chains(self, model: DBM, batch: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        with allocating("num_chains", self.num_chains):
            return initial_particles(model, batch, owned_chains(self.num_chains), generator)

    def extra_repr(self) -> str:
        pretrain = initialiser_name(self.pretrain)
        return (f"k={self.k}, num_chains={self.num_chains}, mean_field_iterations={self.mean_field_iterations}, "
                f"positive_sweeps={self.positive_sweeps}, pretrain={pretrain}")


class DBMParallelTempering(PT):
    """Salakhutdinov & Hinton's DBM learning (:class:`DBMPersistentMeanField`) with a parallel-tempering negative phase
    (PT-SML, Desjardins et al. 2010, on the
    DBM's odd/even chain; Salakhutdinov 2010 used tempered transitions for DBMs to the same end: mixing between modes).

    The positive phase is the mean-field posterior's; the fantasy particles are the β = 1 replica of persistent chains
    run by :class:`~pfzoo.kernels.ParallelTempering` over the odd/even block Gibbs chain, i.e. the even/odd RBM that has
    this DBM's joint distribution (:meth:`~pfzoo.models.DBM.even_odd_rbm`), so tempering the RBM tempers the DBM:
    ``p_β(x_even) ∝ Σ_{x_odd} exp(−β E_θ(x))``. The surrogate and its Rao–Blackwellised particle statistics are
    :class:`DBMPersistentMeanField`'s; the replicas, ladder, swap-acceptance metrics and ladder adaptation are
    :class:`~pfzoo.training.PT`'s (buffer ``chains [R · C, Σ n_even]``, replica-major, β ascending). Greedy pretraining
    (``pretrain``) runs once before the first update, as for :class:`DBMPersistentMeanField`.

    Args: ``k`` (PT steps per update, each one odd/even sweep of every replica and one round of exchanges),
    ``num_chains`` (particles per replica), ``num_replicas``, ``min_beta``, ``spacing``, ``betas``, ``swaps``,
    ``adapt_ladder`` as :class:`~pfzoo.training.PT`; ``mean_field_iterations``, ``pretrain``, the sparsity
    target (``sparsity_target``, ``sparsity_cost``, ``sparsity_damping``) and ``positive_sweeps`` as
    :class:`DBMPersistentMeanField`.
    """

    pretrained: torch.Tensor
    config_name = "dbm_pt"

    def __init__(self, k: int = 5, num_chains: int = 100, num_replicas: int = 10, min_beta: float = 0.1, spacing: str = "geometric",
                 betas: Sequence[float] | None = None, swaps: str = "alternate", adapt_ladder: bool = False,
                 mean_field_iterations: int = DEFAULT_TRAINING_MEAN_FIELD_ITERATIONS, pretrain: Callable | None = None,
                 sparsity_target: float | Sequence[float | None] | None = None, sparsity_cost: float | None = DEFAULT_SPARSITY_COST,
                 sparsity_damping: float | None = DEFAULT_SPARSITY_DAMPING, positive_sweeps: int = 0) -> None:
        super().__init__(k=k, num_chains=num_chains, num_replicas=num_replicas, min_beta=min_beta, spacing=spacing, betas=betas, swaps=swaps,
                         adapt_ladder=adapt_ladder)
        self.positive_sweeps = check_non_negative_int(positive_sweeps, "positive_sweeps")
        self.mean_field_iterations = check_positive_int(mean_field_iterations, "mean_field_iterations")
        if pretrain is not None and not callable(pretrain):
            raise ValueError(f"pretrain must be None or a callable(model, data, *, generator), got {type(pretrain).__name__}")
        self.pretrain = pretrain
        self.sparsity = optional_sparsity(sparsity_target, sparsity_cost, sparsity_damping)
        self.register_buffer("pretrained", torch.tensor(False))

    def missing(self, model) -> str | None:
        return None if Capability.MEAN_FIELD in model.capabilities else Capability.MEAN_FIELD.value

    def prepare(self, model: DBM, train: torch.Tensor, *, generator: torch.Generator | None = None) -> bool:
        """Pretrain the first time (as :meth:`DBMPersistentMeanField.prepare`), then :meth:`PT.prepare`'s ladder step."""
        changed = pretrain_once(self, model, train, generator)
        super().prepare(model, train, generator=generator)
        return changed

    def loss(self, model: DBM, batch: torch.Tensor, *, generator: torch.Generator | None = None, indices: torch.Tensor | None = None) -> torch.Tensor:
        """Surrogate loss (scalar) for binary ``batch [B, V]``; advances every replica ``k`` PT steps first. ``indices`` is not used."""
        self.check_outside_fit(model)
        model.check_visible(batch, "batch")
        check_generator(generator, model.device)
        means = model.mean_field(batch, num_iterations=self.mean_field_iterations)
        with torch.no_grad(), allocating("num_chains", self.num_chains):
            rbm = model.even_odd_rbm()
            kernel, target = rbm.gibbs_chain()
            start = lambda: initial_particles(model, batch, owned_chains(self.num_chains), generator)  # noqa: E731
            particles = self.advance(kernel, target, start, model.num_even_units, generator=generator)
            positive = clamped_posterior_layers(model, rbm, batch, means, self.positive_sweeps, generator)
        loss = mean_field_surrogate(model, batch, positive, rbm, particles)
        return loss if self.sparsity is None else loss + self.sparsity.penalty(model, batch, means)

    def extra_repr(self) -> str:
        pretrain = initialiser_name(self.pretrain)
        return (f"{super().extra_repr()}, mean_field_iterations={self.mean_field_iterations}, "
                f"positive_sweeps={self.positive_sweeps}, pretrain={pretrain}")


def initialiser_name(pretrain: Callable | None) -> str:
    """The name of a DBM objective's ``pretrain`` (a ``functools.partial``'s function, e.g. ``pretrain_dbm``), or "None"."""
    function = getattr(pretrain, "func", pretrain)
    return "None" if pretrain is None else getattr(function, "__name__", type(function).__name__)


def pretrain_once(objective: DBMPersistentMeanField | DBMParallelTempering, model: DBM, train: torch.Tensor, generator: torch.Generator | None) -> bool:
    """Run ``objective.pretrain`` on ``train [N, V]`` unless its buffer ``pretrained`` says it ran (a resumed run); the
    particles of the old parameters are then dropped. ``True`` when the model changed."""
    if objective.pretrain is None or bool(objective.pretrained):
        return False
    _check_dbm(model)
    logger.info("initialising a DBM with layer sizes %s by %s", model.layer_sizes, initialiser_name(objective.pretrain))
    objective.pretrain(model, train, generator=generator)
    objective.pretrained.fill_(True)
    objective.chains = objective.chains.new_empty(0)
    return True


def optional_sparsity(target, cost: float | None, damping: float | None) -> SparsityTarget | None:
    """The DBM objectives' ``sparsity`` submodule, ``None`` without a target (whose other settings are checked all the same)."""
    if target is None:
        check_sparsity_settings(cost, damping)
        return None
    return SparsityTarget(target, cost, damping)


def initial_particles(model: DBM, batch: torch.Tensor, count: int, generator: torch.Generator | None) -> torch.Tensor:
    """``count`` fantasy particles' even layers ``[count, Σ n_even]``: rows of ``batch`` drawn with replacement for the
    visible layer, uniformly random even hidden layers."""
    rows = torch.randint(batch.shape[0], (count,), generator=generator, device=batch.device)
    hidden = torch.full((count, model.num_even_units - model.num_visible), 0.5, device=batch.device, dtype=batch.dtype)
    return torch.cat([batch[rows], bernoulli(hidden, generator=generator)], dim=1)


def clamped_posterior_layers(model: DBM, rbm, batch: torch.Tensor, means: list[torch.Tensor], sweeps: int,
                             generator: torch.Generator | None) -> list[torch.Tensor]:
    """The hidden layers ``[h¹, …, h^L]`` whose energy with ``batch [B, V]`` gives the positive statistics.

    ``sweeps = 0``: the mean-field means ``means`` themselves (Salakhutdinov & Hinton 2009, Algorithm 1). Otherwise the
    even hidden layers start from a draw of their means (the odd ones are drawn first, so they start at 0) and the
    chain on ``p(h | v)`` runs ``sweeps`` :class:`~pfzoo.kernels.ScanGibbs` sweeps (odd layers, then even hidden
    layers) of :class:`~pfzoo.models.dbm_heating.ClampedHeatingTarget` at α = 1, whose visible block stays clamped; its
    last even hidden state enters as it is and the odd layers as their exact
    conditional means ``p(x_odd = 1 | x_even)`` from the even/odd ``rbm`` (Rao–Blackwellised, as the particles). The
    energy is linear in each layer, so this is an unbiased estimate of the chain's ``⟨x_i x_{i+1}ᵀ⟩``, which tends to
    the posterior's, correlations between layers included, as the chain mixes.
    """
    if sweeps == 0:
        return means
    means = [mean.clamp(HEATING_MEAN_LIMIT, 1 - HEATING_MEAN_LIMIT) for mean in means]  # α = 1 ignores them, but log q must be finite
    target = ClampedHeatingTarget(list(model.weights), list(model.biases), means)
    hidden = [bernoulli(mean, generator=generator) if i % 2 == 0 else torch.zeros_like(mean) for i, mean in enumerate(means, start=1)]
    start = torch.cat([batch, *hidden], dim=1)
    layers = target.layers(run_chain(ScanGibbs(), target, start, sweeps, beta=1.0, generator=generator)[0].position)
    even = torch.cat(layers[0::2], dim=1)
    return particle_layers(model, even, rbm.hidden_probs(even))[1:]


def mean_field_surrogate(model: DBM, batch: torch.Tensor, hidden: list[torch.Tensor], rbm, particles: torch.Tensor) -> torch.Tensor:
    """``mean_n E(v_n, h_n) − mean_m E(x̃_m, E[x̃_odd | x̃_even])`` (scalar; :class:`DBMPersistentMeanField`) for
    ``batch [B, V]``, its hidden layers' positive statistics ``hidden`` (mean-field means or
    :func:`clamped_posterior_layers`), the even/odd ``rbm`` and the particles' even layers ``[M, Σ n_even]``."""
    with torch.no_grad():
        odd_means = rbm.hidden_probs(particles)
    positive = model.energy_unchecked([batch, *hidden]).mean()
    negative = model.energy_unchecked(particle_layers(model, particles, odd_means)).mean()
    return positive - negative


def particle_layers(model: DBM, even_state: torch.Tensor, odd_state: torch.Tensor) -> list[torch.Tensor]:
    """Layer list ``[x_0, …, x_L]`` from concatenated even ``[M, Σ n_even]`` and odd ``[M, Σ n_odd]`` states."""
    even, odd = model.split_even(even_state), model.split_odd(odd_state)
    return [even[i // 2] if i % 2 == 0 else odd[i // 2] for i in range(model.num_layers)]


# ---- greedy pretraining ------------------------------------------------------------------------


def pretrain_dbm(
    model: DBM,
    data: torch.Tensor,
    *,
    epochs_per_layer: int = 10,
    batch_size: int = 100,
    lr: float | Sequence[float] = 0.05,
    k: int = 1,
    momentum: float = 0.5,
    generator: torch.Generator | None = None,
    progress: ProgressCallback | None = None,
) -> None:
    """Initialise ``model``'s weights and biases greedily from a stack of modified RBMs (S&H 2009 §3.1).

    For ``L`` weight matrices, RBM ``i`` (``i = 0 … L-1``) models layer ``i`` with layer ``i + 1`` as
    hidden units and is trained by CD-k on the representation of the data at layer ``i``:

    * bottom RBM (``i = 0``, when ``L ≥ 2``): the visible units appear twice with tied weights, so the
      upward input is doubled, ``p(h¹ | v) = σ(2 vW + c)``, ``p(v | h¹) = σ(W h¹ + b)``;
    * top RBM (``i = L-1``, when ``L ≥ 2``): the hidden units appear twice, so the downward input is
      doubled, ``p(h^{L-1} | h^L) = σ(2 W h^L + b)``, ``p(h^L | h^{L-1}) = σ(h^{L-1} W + c)``;
    * middle RBMs (``L ≥ 3``): ordinary RBMs, whose weights are halved when composed (our reading of
      the deeper case, which the 2009 paper does not spell out; see Salakhutdinov & Hinton 2012,
      Neural Computation, for DBMs with more than two hidden layers);
    * ``L = 1``: an ordinary RBM, copied into the DBM as it is (plain CD-k training of an RBM).

    The duplicated units are real units of a tied-weight RBM (the copies are sampled independently in
    the negative phase), so every layer's CD-k is the CD-k of a genuine RBM. Layer ``i + 1``'s training
    data are the posterior probabilities ``σ(u_i · x_i W_i + c_i)`` of RBM ``i`` (``u_i`` = 2 for the
    bottom RBM, else 1), computed once after it has been trained.

    Composition (:meth:`DBM.compose_from_stack <pfzoo.models.DBM.compose_from_stack>`): every hidden layer between two RBMs receives the *average* of the
    two RBMs' inputs, which is what the doubling compensates for. Hence ``W_0`` and ``W_{L-1}`` are
    copied, middle weights are halved, the visible bias is the bottom RBM's visible bias, the top
    layer's bias is the top RBM's hidden bias, and every interior layer's bias is the mean of the hidden
    bias of the RBM below and the visible bias of the RBM above. For ``L = 2`` this gives the paper's
    ``p(h¹ | v, h²) = σ(vW¹ + W²h² + b¹)``.

    Each RBM starts from ``N(0, 0.01²)`` weights, zero hidden biases and visible biases at the smoothed
    base-rate logits of its training data, and is trained by SGD (``lr``, ``momentum``) on minibatches
    of ``batch_size`` in a fresh random order every epoch. Deterministic given ``generator``.

    Dead units: a unit whose mean posterior probability over its RBM's training inputs stays below
    :data:`DEAD_UNIT_ACTIVITY` never takes part, and joint training does not revive it; when more than
    :data:`MAX_DEAD_SHARE` of an RBM's hidden units are dead the pretraining logs a warning naming the RBM and its
    learning rate. The top RBM is the one at risk: its doubled hidden layer doubles the weight gradient, and on binarized
    MNIST (784–500–1000, 50 epochs, momentum 0.5) lr 0.05 left 0 of its 1,000 units alive after one epoch and 46 after
    fifty, lr 0.01 all 1,000 after ten and 974 after fifty; hence a learning rate per RBM.

    Args:
        model: the :class:`~pfzoo.models.DBM` whose parameters are overwritten.
        data: binary training data ``[N, V]`` on the model's device and dtype.
        epochs_per_layer: CD epochs for each RBM.
        batch_size: examples per CD update.
        lr: SGD learning rate: one for every RBM, or a list of one per RBM (bottom first).
        k: Gibbs sweeps of CD-k.
        momentum: SGD momentum in [0, 1).
        generator: random generator on the model's device (initial weights, data order, CD sampling).
        progress: optional ``callable(done, total)`` called after every epoch, counting epochs over all layers.
    """
    _check_dbm(model)
    if isinstance(data, torch.Tensor) and data.dim() == 2 and data.shape[0] == 0:
        raise ValueError(f"data must hold at least one example, got shape {tuple(data.shape)}")
    model.check_visible(data, "data")
    check_positive_int(epochs_per_layer, "epochs_per_layer")
    check_positive_int(batch_size, "batch_size")
    check_positive_int(k, "k")
    num_rbms = model.num_layers - 1
    rates = _layer_learning_rates(lr, num_rbms)
    if not (isinstance(momentum, (int, float)) and 0 <= momentum < 1):
        raise ValueError(f"momentum must lie in [0, 1), got {momentum!r}")
    check_generator(generator, model.device)
    if progress is not None and not callable(progress):
        raise ValueError(f"progress must be None or a callable(done, total), got {type(progress).__name__}")

    total = num_rbms * epochs_per_layer
    inputs = data
    stack = []
    for index in range(num_rbms):
        up = 2 if index == 0 and num_rbms > 1 else 1
        down = 2 if index == num_rbms - 1 and num_rbms > 1 else 1
        rbm = TiedRBM(inputs, model.layer_sizes[index + 1], up=up, down=down, generator=generator)
        optimizer = torch.optim.SGD(rbm.parameters(), lr=rates[index], momentum=momentum)
        for epoch in range(epochs_per_layer):
            order = torch.randperm(inputs.shape[0], generator=generator, device=inputs.device)
            for rows in order.split(batch_size):
                optimizer.zero_grad(set_to_none=True)
                tied_cd_loss(rbm, inputs[rows], k, generator=generator).backward()
                optimizer.step()
            if progress is not None:
                progress(index * epochs_per_layer + epoch + 1, total)
        logger.info("pretrained RBM %d/%d (%d → %d units, up ×%d, down ×%d)", index + 1, num_rbms, *rbm.weight.shape, up, down)
        stack.append(rbm)
        with torch.no_grad():
            inputs = rbm.upward_probs(inputs)
        dead = int((inputs.mean(0) < DEAD_UNIT_ACTIVITY).sum())
        if dead > MAX_DEAD_SHARE * inputs.shape[1]:
            logger.warning("pretrained RBM %d/%d has %d of its %d hidden units dead (mean posterior probability below %g "
                           "over its training inputs), and joint training rarely revives them: lower its learning rate "
                           "(pretrain.lr, now %g; a list gives one per RBM)", index + 1, num_rbms, dead, inputs.shape[1],
                           DEAD_UNIT_ACTIVITY, rates[index])

    model.compose_from_stack([(rbm.weight, rbm.visible_bias, rbm.hidden_bias) for rbm in stack])


def _layer_learning_rates(lr: float | Sequence[float], num_rbms: int) -> list[float]:
    """``lr`` as one learning rate per RBM of the stack, each checked to be positive and finite."""
    rates = list(lr) if isinstance(lr, Sequence) and not isinstance(lr, str) else [lr] * num_rbms
    if len(rates) != num_rbms:
        raise ValueError(f"lr must be one learning rate or a list of one per RBM ({num_rbms}, bottom first), got {list(lr)!r}")
    for rate in rates:
        if isinstance(rate, bool) or not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
            raise ValueError(f"lr must be a positive finite number or a list of them, one per RBM, got {lr!r}")
    return [float(rate) for rate in rates]


def start_dbm_from_rbm(
    model: DBM,
    data: torch.Tensor,
    *,
    rbm: str | os.PathLike | nn.Module,
    upper_init_std: float = 0.001,
    generator: torch.Generator | None = None,
) -> None:
    """Initialise ``model`` (layer sizes ``[V, H1, H2, …]``) as the trained RBM ``rbm`` (``[V, H1]``) with the layers
    above ``H1`` all but detached: a ``pretrain`` for :class:`DBMPersistentMeanField` in place of :func:`pretrain_dbm`.

    ``W_0``, ``b_0`` and ``b_1`` are the RBM's weight, visible and hidden biases; every weight above is drawn from
    ``N(0, upper_init_std²)`` and every bias above is 0. With those upper weights at zero the DBM's marginal on ``(v, h¹)``
    is the RBM's joint, ``p(v, h¹) ∝ e^{vᵀW h¹ + b·v + c·h¹}`` (each upper unit multiplies every state by the same 2),
    so the DBM starts with the RBM's log-likelihood, its mean-field posterior over ``h¹`` is exact, and joint training
    (Salakhutdinov & Hinton 2009, Algorithm 1) starts from there rather than from a greedy stack's composition, whose
    log-likelihood is far lower. Small rather than zero upper weights: units that start alike would stay alike.

    Args:
        model: the :class:`~pfzoo.models.DBM` whose parameters are overwritten; at least two hidden layers.
        data: the training data ``[N, V]`` (only checked: the RBM was trained already).
        rbm: a trained RBM with ``V`` visible and ``H1`` hidden units, a zoo name or a checkpoint path.
        upper_init_std: standard deviation of the weights above the first hidden layer (≥ 0).
        generator: random generator on the model's device, for those weights.
    """
    _check_dbm(model)
    model.check_visible(data, "data")
    source = load_model(rbm, name="rbm") if isinstance(rbm, (str, os.PathLike)) else rbm
    model.start_from_rbm(source, upper_init_std=upper_init_std, generator=generator)


def tied_cd_loss(rbm: TiedRBM, x: torch.Tensor, k: int, *, generator: torch.Generator | None) -> torch.Tensor:
    """CD-k surrogate ``mean F(x, …, x) − mean F(ṽ)`` of a :class:`~pfzoo.models.tied_rbm.TiedRBM` for ``x [B, n]``, ṽ
    the copies' sum after k block-Gibbs sweeps from all copies at x."""
    with torch.no_grad():
        kernel, target = rbm.gibbs_chain()
        state, _ = run_chain(kernel, target, rbm.up * x, k, generator=generator)
    return rbm.free_energy(rbm.up * x).mean() - rbm.free_energy(state.position).mean()
