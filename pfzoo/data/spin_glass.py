"""Synthetic spin-glass data: samples of a random Ising model, the MPF paper's 10x10 benchmark.

The generating model is an :class:`~pfzoo.models.Ising` model ``E(x) = -½ xᵀJx - b·x`` over
``x ∈ {0,1}^D`` with Gaussian couplings, either on a 2-D periodic (toroidal) square lattice, each
unit coupled to its 4 nearest neighbours (``kind="lattice"``, D = side², the default 10x10 = 100
units), or on the complete graph (``kind="fully_connected"``, Sherrington–Kirkpatrick style). The
data are draws from many parallel block-Gibbs chains after a burn-in, thinned (MPF paper / thesis
ch. 3: 10x10 spin glass, 20,000 training samples).

Recovering the truth: :func:`spin_glass_model` is a deterministic function of its arguments (its
random draws come from a ``torch.Generator`` seeded with ``seed``), and :func:`spin_glass` builds its
generating model by exactly that call. A script that needs the true parameters (e.g. to report the
coupling error ε_J of a fitted model) calls ``spin_glass_model`` with the same ``kind``, ``side``,
``num_units``, ``coupling_std``, ``bias_std`` and ``seed`` as the data set. The data set itself stores
no model (``DataSplits.transform`` is for preprocessing and stays ``None``).

Note the 0/1 units: a coupling J in these units is J/4 between ±1 spins, so ``coupling_std = 1`` here
is a rather warm glass in spin units.

Zero field (``zero_field=True``, the thesis's setting for Table 3.1): the biases ``b = -½ J𝟙`` make the field on every
±1 spin vanish. In spins ``s = 2x - 1`` the energy ``-½ xᵀJx - b·x`` reads ``-Σ_{i<j} (J_ij/4) s_i s_j - Σ_i h_i s_i``
+ const with ``h = J𝟙/4 + b/2``, so ``h = 0`` exactly when ``b_i = -½ Σ_j J_ij``. This is the thesis's rule that each
column of its J sums to 0: there the energy is ``xᵀJ'x`` with the biases on the diagonal of ``J'``, whose spin field is
half the column sum ``Σ_j J'_ij``. The model is then symmetric under flipping every spin, ``p(x) = p(1 - x)``.
"""

from __future__ import annotations

import logging
import math

import torch
from torch import Tensor

from pfzoo.data.splits import DataSplits
from pfzoo.kernels import Kernel, check_kernel
from pfzoo.models.capabilities import Capability, require
from pfzoo.models.ising import Ising
from pfzoo.sampling import bernoulli
from pfzoo.validation import check_bool, check_choice, check_finite_number, check_generator, check_positive_int, describe

logger = logging.getLogger(__name__)

KINDS = ("lattice", "fully_connected")
DEFAULT_NUM_CHAINS = 1000
DEFAULT_BURN_IN = 1000
DEFAULT_THIN = 10


def _check_std(value: float, name: str) -> float:
    return check_finite_number(value, name, minimum=0.0)


def lattice_couplings(side: int, *, coupling_std: float = 1.0, generator: torch.Generator | None = None) -> Tensor:
    """Gaussian couplings of a 2-D periodic square lattice: ``J [side², side²]`` float32, symmetric, zero diagonal.

    Unit ``(r, c)`` has index ``r * side + c`` (row-major, so a row of data folds into a
    ``side x side`` image) and is coupled to ``(r, c±1 mod side)`` and ``(r±1 mod side, c)``. Each of the
    ``2 side²`` edges gets one independent weight ``J_ij = J_ji ~ N(0, coupling_std²)``; all other
    entries are 0. ``side >= 3`` so that the four neighbours of a unit are distinct.
    Draws on the CPU from ``generator``.
    """
    check_positive_int(side, "side")
    if side < 3:
        raise ValueError(f"side must be at least 3 (so that the 4 periodic neighbours are distinct), got {side}")
    coupling_std = _check_std(coupling_std, "coupling_std")
    check_generator(generator, torch.device("cpu"))
    num_units = side * side
    rows, cols = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    unit = (rows * side + cols).flatten()
    right = (rows * side + (cols + 1) % side).flatten()
    down = (((rows + 1) % side) * side + cols).flatten()
    first = torch.cat([unit, unit])
    second = torch.cat([right, down])
    weights = torch.randn(2 * num_units, generator=generator) * coupling_std
    coupling = torch.zeros(num_units, num_units)
    coupling[first, second] = weights
    coupling[second, first] = weights
    return coupling


def fully_connected_couplings(
    num_units: int, *, coupling_std: float | None = None, generator: torch.Generator | None = None
) -> Tensor:
    """Gaussian couplings between all pairs: ``J [D, D]`` float32, symmetric, zero diagonal (Sherrington–Kirkpatrick).

    ``J_ij = J_ji ~ N(0, coupling_std²)`` for ``i < j``. The default ``coupling_std = 1 / sqrt(num_units)``
    is the SK scaling: each unit's local field ``(Jx)_i`` then has a variance of order one whatever D,
    so the model neither freezes nor decouples as D grows. Draws on the CPU from ``generator``.
    """
    check_positive_int(num_units, "num_units")
    if num_units < 2:
        raise ValueError(f"num_units must be at least 2 (a coupling needs two units), got {num_units}")
    coupling_std = 1.0 / math.sqrt(num_units) if coupling_std is None else _check_std(coupling_std, "coupling_std")
    check_generator(generator, torch.device("cpu"))
    upper = torch.triu(torch.randn(num_units, num_units, generator=generator) * coupling_std, diagonal=1)
    return upper + upper.T


def _build_model(kind, side, num_units, coupling_std, bias_std, zero_field, generator) -> Ising:
    """The generating model, drawing couplings then biases from ``generator`` (shared by the public builders)."""
    check_choice(kind, "kind", KINDS)
    bias_std = _check_std(bias_std, "bias_std")
    check_bool(zero_field, "zero_field")
    if zero_field and bias_std != 0:
        raise ValueError(f"zero_field=True sets the biases to -½ J𝟙; give bias_std=0, got {bias_std}")
    if kind == "lattice":
        check_positive_int(side, "side")
        if num_units is not None and num_units != side * side:
            raise ValueError(f"num_units={num_units!r} disagrees with side={side} (a lattice has side² units); leave it None")
        coupling = lattice_couplings(side, coupling_std=1.0 if coupling_std is None else coupling_std, generator=generator)
    else:
        if num_units is None:
            check_positive_int(side, "side")
            num_units = side * side
        coupling = fully_connected_couplings(num_units, coupling_std=coupling_std, generator=generator)
    bias = torch.randn(coupling.shape[0], generator=generator) * bias_std  # drawn either way: the same stream after it
    return Ising.from_tensors(coupling, -0.5 * coupling.sum(1) if zero_field else bias)


def spin_glass_model(
    kind: str = "lattice",
    side: int = 10,
    num_units: int | None = None,
    coupling_std: float | None = None,
    bias_std: float = 0.0,
    seed: int = 0,
    zero_field: bool = False,
) -> Ising:
    """The generating spin glass, a deterministic function of the arguments: an :class:`Ising` model of D units.

    Args:
        kind: ``"lattice"`` (:func:`lattice_couplings`, D = side²) or ``"fully_connected"``
            (:func:`fully_connected_couplings`, D = ``num_units``, default side²).
        side: side of the square lattice (>= 3).
        num_units: D for ``"fully_connected"``; for ``"lattice"`` leave it None (or give side²).
        coupling_std: standard deviation of the couplings; None gives the kind's default,
            1.0 on the lattice and ``1 / sqrt(D)`` fully connected.
        bias_std: biases ``b_i ~ N(0, bias_std²)`` (0, the default, gives zero biases).
        seed: seeds the ``torch.Generator`` from which couplings, then biases, are drawn.
        zero_field: biases ``b = -½ J𝟙`` instead, zero field on the ±1 spins (module docstring; needs ``bias_std=0``).

    :func:`spin_glass` builds its generating model with this very call, so calling it again with the
    same arguments recovers the truth behind a data set.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    generator = torch.Generator().manual_seed(seed)
    return _build_model(kind, side, num_units, coupling_std, bias_std, zero_field, generator)


def _check_non_negative_int(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {describe(value)}")
    return value


@torch.no_grad()
def sample_spin_glass(
    model: Ising,
    num_samples: int,
    *,
    num_chains: int = DEFAULT_NUM_CHAINS,
    burn_in: int = DEFAULT_BURN_IN,
    thin: int = DEFAULT_THIN,
    kernel: Kernel | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``num_samples`` approximate draws ``[num_samples, D]`` (0/1, the model's dtype) from ``model`` by block Gibbs
    (or ``kernel``).

    Runs ``C = min(num_chains, num_samples)`` chains in parallel as one ``[C, D]`` tensor, started
    from uniformly random states. Sweeps ``1 .. burn_in`` are discarded; then after sweeps
    ``burn_in + thin, burn_in + 2 thin, ...`` the state of every chain is kept, until ``num_samples``
    rows are collected (R = ceil(num_samples / C) rounds, ``burn_in + R thin`` sweeps in all). Rows are
    ordered round by round, chains in order within a round; the last round keeps the first
    ``num_samples - (R - 1) C`` chains. Each sweep is a step of the model's visible Gibbs chain
    (``model.gibbs_chain()``: for an Ising model a scan over its independent sets, two blocks on an even-sided lattice),
    or of ``kernel`` on that chain's target, e.g. :class:`~pfzoo.kernels.SwendsenWang` (the thesis's sampler for its
    training states, ch. 3): far faster for cold ferromagnetic couplings, but slower per step than these sweeps on a
    cold frustrated glass (:mod:`pfzoo.kernels.swendsen_wang` gives the measurement).
    """
    require(model, Capability.BINARY_STATES, Capability.VISIBLE_GIBBS_CHAIN, by="sample_spin_glass")
    check_positive_int(num_samples, "num_samples")
    check_positive_int(num_chains, "num_chains")
    _check_non_negative_int(burn_in, "burn_in")
    check_positive_int(thin, "thin")
    check_generator(generator, model.device)
    chains = min(num_chains, num_samples)
    num_rounds = -(-num_samples // chains)
    default, target = model.gibbs_chain()
    kernel = default if kernel is None else check_kernel(kernel, target.offers, f"{type(model).__name__}'s Gibbs target")
    start = bernoulli(torch.full((chains, model.num_visible), 0.5, device=model.device, dtype=model.dtype), generator=generator)
    state = kernel.init(start, target)
    for _ in range(burn_in):
        state, _ = kernel.step(state, target, generator=generator)
    kept = []
    for _ in range(num_rounds):
        for _ in range(thin):
            state, _ = kernel.step(state, target, generator=generator)
        kept.append(state.position)
    samples = torch.cat(kept)[:num_samples]
    logger.debug(
        "sampled %d states from %d chains (%d burn-in + %d x %d sweeps)", num_samples, chains, burn_in, num_rounds, thin
    )
    return samples


def spin_glass(
    kind: str = "lattice",
    side: int = 10,
    num_units: int | None = None,
    coupling_std: float | None = None,
    bias_std: float = 0.0,
    num_train: int = 20000,
    num_test: int = 2000,
    num_chains: int = DEFAULT_NUM_CHAINS,
    burn_in: int = DEFAULT_BURN_IN,
    thin: int = DEFAULT_THIN,
    kernel: Kernel | None = None,
    seed: int = 0,
    zero_field: bool = False,
) -> DataSplits:
    """Samples of a random spin glass: train ``[num_train, D]`` and test ``[num_test, D]`` of 0/1 float32.

    The generating model is ``spin_glass_model(kind, side, num_units, coupling_std, bias_std, seed, zero_field)``
    (see that function for the arguments); rebuild it from the same arguments to get the truth.
    Train and test come from two separate runs of :func:`sample_spin_glass` (independent chains, so
    no test row shares a chain with a training row) with ``num_chains``, ``burn_in``, ``thin`` and ``kernel`` (None:
    block Gibbs sweeps; :class:`~pfzoo.kernels.SwendsenWang` for cluster moves, each step counting as a sweep).
    Everything is drawn from one ``torch.Generator`` seeded with ``seed``: first the model, then the
    training chains, then the test chains; the result never depends on global RNG state.

    ``name`` is ``"spin_glass"``; ``image_shape`` is ``(side, side)`` on the lattice, None fully connected.
    With the defaults (10x10 lattice, 22,000 samples, 1000 chains, 1000 burn-in sweeps, thin 10) the
    data set builds in a few seconds on one CPU thread.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    check_positive_int(num_train, "num_train")
    check_positive_int(num_test, "num_test")
    check_positive_int(num_chains, "num_chains")
    _check_non_negative_int(burn_in, "burn_in")
    check_positive_int(thin, "thin")
    generator = torch.Generator().manual_seed(seed)
    model = _build_model(kind, side, num_units, coupling_std, bias_std, zero_field, generator)
    options = dict(num_chains=num_chains, burn_in=burn_in, thin=thin, kernel=kernel, generator=generator)
    train = sample_spin_glass(model, num_train, **options)
    test = sample_spin_glass(model, num_test, **options)
    splits = DataSplits(
        name="spin_glass",
        train=train,
        test=test,
        image_shape=(side, side) if kind == "lattice" else None,
    )
    logger.info("built %r (%s, D=%d, seed %d)", splits, kind, model.num_units, seed)
    return splits
