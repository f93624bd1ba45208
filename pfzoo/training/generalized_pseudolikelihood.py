"""Generalized pseudo-likelihood (Huang & Ogata 2002; Deep Learning eq. 18.21) for binary models, and its
one-random-set-per-example form (Goodfellow et al. 2013).

Pseudo-likelihood conditions each unit on all the others; the generalized form conditions whole index sets
``S_1 … S_m`` of units on the rest:

    L(θ) = −(1/B) Σ_n Σ_i log p_θ(x_n,S_i | x_n,−S_i),
    log p_θ(x_S | x_{−S}) = −F(x) − log Σ_{c ∈ {0,1}^{|S|}} exp(−F(x with x_S = c)),         (Deep Learning eq. 18.21)

each set's conditional enumerated exactly over its ``2^|S|`` configurations through the model's free energy (hidden
units summed out), so no partition function appears; :meth:`~pfzoo.models.EnergyModel.block_free_energies` gives the
``B·m·2^|S|`` free energies at once (RBMs and Ising models in closed form, other families by evaluating the states).
Larger sets capture more of the dependence between nearby units than single-unit pseudo-likelihood does, and with
sets of one unit the loss *is* pseudo-likelihood. Consistent for any collection of sets covering every unit.

Index sets (``sets``):

- ``"blocks"``: contiguous runs of ``size`` units, starting every ``stride`` units (default ``size``: a partition); the
  last run ends at the last unit, overlapping its neighbour when ``size`` does not divide D.
- ``"patches"``: ``size × size`` image neighbourhoods on the image shape (``image_shape``, else the data set's, which
  the Trainer hands over through :meth:`attach_data`), starting every ``stride`` rows and columns (default ``size``),
  the last row and column of patches flush with the image's border.
- ``"random"``: a random partition of the units into sets of ``size`` (a permutation seeded by ``seed``, cut into
  ⌈D/size⌉ sets, the last filled up with the permutation's first units): fixed for the run, so L-BFGS applies.
- ``"random_per_example"``: each example draws one set of ``size`` distinct units, uniformly, at every evaluation, and
  its term is scaled by ``D/size``: unbiased for the loss of a uniformly random partition into sets of ``size``
  (so for ``size = 1`` for pseudo-likelihood itself) — the one-random-conditional-per-example form of multi-prediction
  training (Goodfellow et al. 2013). Random, so for minibatch optimisers.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from pfzoo.sampling import uniform
from pfzoo.training.objective import Objective
from pfzoo.training.pseudolikelihood import missing_binary_free_energy
from pfzoo.validation import check_choice, check_positive_int

SET_KINDS = ("blocks", "patches", "random", "random_per_example")
MAX_SET_UNITS = 12
"""The most units one index set may hold: each set's conditional sums ``2^|S|`` free energies per example."""
_NEEDS_SHAPE = ("GeneralizedPseudoLikelihood(sets='patches') needs an image shape: pass image_shape=[H, W] "
                "(trainer.objective.image_shape) or use sets='blocks' or 'random'")


def aligned_starts(length: int, size: int, stride: int) -> list[int]:
    """Starts of windows of ``size`` along ``length`` positions every ``stride``, the last window flush with the end."""
    starts = list(range(0, length - size + 1, stride))
    if starts[-1] != length - size:
        starts.append(length - size)
    return starts


def block_sets(width: int, size: int, stride: int) -> torch.Tensor:
    """``"blocks"``: contiguous runs of ``size`` of ``width`` units every ``stride``, ``[m, size]``."""
    return torch.tensor([list(range(start, start + size)) for start in aligned_starts(width, size, stride)])


def patch_sets(image_shape: Sequence[int], size: int, stride: int) -> torch.Tensor:
    """``"patches"``: the ``size × size`` patches of a row-major ``image_shape = (H, W)`` every ``stride``, ``[m, size²]``."""
    height, width = image_shape
    return torch.tensor([
        [(row + i) * width + column + j for i in range(size) for j in range(size)]
        for row in aligned_starts(height, size, stride) for column in aligned_starts(width, size, stride)
    ])


def random_partition(width: int, size: int, seed: int) -> torch.Tensor:
    """``"random"``: a seeded random permutation of ``width`` units cut into ⌈width/size⌉ sets of ``size``, ``[m, size]``."""
    order = torch.randperm(width, generator=torch.Generator().manual_seed(seed))
    num_sets = -(-width // size)
    return torch.cat([order, order[: num_sets * size - width]]).reshape(num_sets, size)


class GeneralizedPseudoLikelihood(Objective):
    """Minimise the negative log generalized pseudo-likelihood ``−(1/B) Σ_n Σ_i log p(x_n,S_i | x_n,−S_i)`` (module docstring).

    Args:
        sets: ``"blocks"``, ``"patches"``, ``"random"`` or ``"random_per_example"`` (module docstring).
        size: units per set, or the side of the square patches (``size²`` units); a set holds at most
            :data:`MAX_SET_UNITS` units.
        image_shape: ``[H, W]`` for ``sets="patches"``; ``None`` takes the data set's (the Trainer passes it).
        stride: for blocks and patches, the step between set starts (``None`` = ``size``: sets that tile the units).
        seed: for ``sets="random"``, the seed of the partition.
    """

    config_name = "generalized_pseudolikelihood"
    missing = staticmethod(missing_binary_free_energy)

    def __init__(
        self,
        sets: str = "blocks",
        size: int = 2,
        image_shape: Sequence[int] | None = None,
        stride: int | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        check_choice(sets, "sets", SET_KINDS)
        self.sets = sets
        self.size = check_positive_int(size, "size")
        units = size * size if sets == "patches" else size
        if units > MAX_SET_UNITS:
            raise ValueError(f"size={size} makes sets of {units} units, each conditional a sum of 2^{units} terms; at most {MAX_SET_UNITS} units")
        if stride is not None and sets not in ("blocks", "patches"):
            raise ValueError(f"stride applies to sets='blocks' or 'patches', not sets={sets!r}")
        self.stride = size if stride is None else check_positive_int(stride, "stride")
        if image_shape is not None:
            image_shape = tuple(image_shape)
            if sets != "patches":
                raise ValueError(f"image_shape applies to sets='patches', not sets={sets!r}")
            if len(image_shape) != 2:
                raise ValueError(f"image_shape must be [height, width], got {list(image_shape)}")
            for index, side in enumerate(image_shape):
                check_positive_int(side, f"image_shape[{index}]")
        self.image_shape = image_shape
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.seed = seed
        self._data_image_shape: tuple[int, ...] | None = None
        self._fixed_sets: dict[tuple[int, torch.device], torch.Tensor] = {}

    def attach_data(self, data) -> None:
        """Take the data set's ``image_shape`` for ``sets="patches"`` (refused when neither it nor ``image_shape`` is given)."""
        self._data_image_shape = None if data.image_shape is None else tuple(data.image_shape)
        self._fixed_sets.clear()
        if self.sets == "patches" and self.image_shape is None and self._data_image_shape is None:
            raise ValueError(f"{_NEEDS_SHAPE}; the data set {data.name} has none")

    def index_sets(self, width: int, device: torch.device | str = "cpu") -> torch.Tensor:
        """The fixed index sets over ``width`` units, ``[m, s]`` int64 on ``device`` (every kind but ``random_per_example``)."""
        if self.sets == "random_per_example":
            raise ValueError("sets='random_per_example' draws new sets at every evaluation; it has no fixed index sets")
        key = (width, torch.device(device))
        if key not in self._fixed_sets:
            # built on the host at first use, inside a step: an asynchronous copy keeps the GPU's queue running (a
            # pageable source is staged before the call returns, so this is safe)
            self._fixed_sets[key] = self._build_sets(width).to(device, non_blocking=True)
        return self._fixed_sets[key]

    def _build_sets(self, width: int) -> torch.Tensor:
        units = self.size * self.size if self.sets == "patches" else self.size
        if units > width:
            raise ValueError(f"size={self.size} makes sets of {units} units, more than the data's {width}")
        if self.sets == "blocks":
            return block_sets(width, self.size, self.stride)
        if self.sets == "random":
            return random_partition(width, self.size, self.seed)
        shape = self.image_shape if self.image_shape is not None else self._data_image_shape
        if shape is None:
            raise ValueError(_NEEDS_SHAPE)
        if math.prod(shape) != width:
            raise ValueError(f"image_shape {list(shape)} has {math.prod(shape)} pixels but the data have {width} units")
        if self.size > min(shape):
            raise ValueError(f"size={self.size} patches do not fit the image shape {list(shape)}")
        return patch_sets(shape, self.size, self.stride)

    def loss(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """The negative log generalized pseudo-likelihood per example of binary ``batch [B, D]`` (scalar): the mean of
        :meth:`example_losses`."""
        return self.example_losses(model, batch, generator=generator).mean()

    def example_losses(self, model, batch: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Each row's ``−Σ_i log p(x_n,S_i | x_n,−S_i)`` (scaled by ``D/size`` for ``random_per_example``), ``batch [B, D]`` → ``[B]``."""
        self.check_outside_fit(model)  # binary states with an exact free energy, refused in one line otherwise
        model.check_visible(batch, "batch")
        num_rows, width = batch.shape
        if self.sets == "random_per_example":
            if self.size > width:
                raise ValueError(f"size={self.size} is more than the data's {width} units")
            # the units of the s largest of D uniform keys: s distinct units, every s-subset equally likely (float64 keys,
            # so that ties, which would favour one unit of a tied pair, practically never happen)
            keys = uniform((num_rows, width), generator=generator, device=batch.device, dtype=torch.float64)
            sets = keys.topk(self.size, dim=1).indices.unsqueeze(1)  # [B, 1, s]
            scale = width / self.size
        else:
            sets = self.index_sets(width, batch.device)
            scale = 1.0
        free_energies = model.block_free_energies(batch, sets)  # [B, m, 2^s]
        observed = batch.gather(1, sets.expand(num_rows, -1, -1).flatten(1)).reshape(sets.expand(num_rows, -1, -1).shape)
        bits = 2 ** torch.arange(observed.shape[-1], device=batch.device)
        index = (observed.long() * bits).sum(-1, keepdim=True)  # the configuration the data hold
        log_conditionals = -free_energies.gather(2, index).squeeze(2) - torch.logsumexp(-free_energies, 2)
        return -scale * log_conditionals.sum(1)

    def extra_repr(self) -> str:
        shape = "" if self.image_shape is None else f", image_shape={list(self.image_shape)}"
        return f"sets={self.sets!r}, size={self.size}, stride={self.stride}{shape}, seed={self.seed}"
