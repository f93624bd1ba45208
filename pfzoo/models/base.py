"""The base class every model in the zoo derives from."""

from __future__ import annotations

import os
from typing import Any, ClassVar, NamedTuple, TypeVar

import torch
from torch import nn

from pfzoo.kernels import Kernel
from pfzoo.models.capabilities import Capability
from pfzoo.models.enumeration import binary_configurations
from pfzoo.models.pretrained import pretrained_source
from pfzoo.validation import check_binary, check_computable, check_matrix, check_representable


class PathStateProposal(NamedTuple):
    """A draw of the latent part of an annealing-path state given visible data, with its importance weight.

    state: path states at β = 1 whose visible part is the given ``v`` (for an RBM ``v`` itself;
        for a DBM ``v`` with its even hidden layers; for a DBN the top RBM's lower layer).
    log_weight: float64 ``[B]``, ``log f(v, z) - log q(z | v)`` for the sampled latents ``z``, so
        that ``E_q[exp(log_weight)] = f(v)``, the model's unnormalised marginal of ``v``.
    """

    state: Any
    log_weight: torch.Tensor


Model = TypeVar("Model", bound="EnergyModel")


class EnergyModel(nn.Module):
    """An unnormalised density ``p(x) = exp(-E(x)) / Z`` as an ``nn.Module``.

    Subclasses implement :meth:`energy` (of a full state, latents included) and
    :meth:`free_energy` (latents summed or integrated out where tractable). Models whose
    partition function is exactly computable override :meth:`log_partition`. A family declares
    what it offers in :attr:`family_capabilities` (see :mod:`pfzoo.models.capabilities`) and, if it
    can be annealed, the key of its paths in :mod:`pfzoo.paths.registry` as :attr:`path_family`.

    Attributes:
        num_visible: width ``V`` of the visible vector.
        binary_visible: whether visible units take values in {0, 1}.
    """

    num_visible: int
    binary_visible: bool = True
    registry_name: ClassVar[str | None] = None  # set by pfzoo.models.registry.register_model; None: not registered
    family_capabilities: frozenset[Capability] = frozenset()
    """What every model of the family offers; :attr:`capabilities` adds what depends on the size."""
    path_family: str | None = None
    """The key of the family's annealing paths and bases in :mod:`pfzoo.paths.registry` (``None``: not annealable)."""
    heavy_tailed: bool | None = False
    """Whether the density's tails are polynomial (an annealing base must then be heavy-tailed too): families with
    Student-t experts say so; ``None`` = unknown (a user's energy: ``base="auto"`` judges the tails by the data)."""
    samples_exactly: bool = False
    """Whether :meth:`sample` draws exact, independent samples (not MCMC): a data-free annealing base can then be
    fitted to the model's own samples."""
    twice_differentiable: bool = True
    """Whether ``log p̃ = −F`` is twice differentiable in real visible units wherever it is defined: what autograd's
    second derivatives (score matching's Laplacian, sliced score matching's ``vᵀ ∇s v``) need. Families with kinks
    (Laplace experts' ``|u|``) say ``False``: autograd sees their delta-function curvature as zero."""
    max_enumeration_units: int | None = None
    """The most binary units an exact sum may enumerate (families that enumerate set it)."""

    @property
    def capabilities(self) -> frozenset[Capability]:
        """:attr:`family_capabilities` plus, at this size, :attr:`Capability.EXACT_LOG_Z`,
        :attr:`Capability.CLOSED_FORM_LOG_Z` and :attr:`Capability.EXACT_FREE_ENERGY` where they hold."""
        offered = set(self.family_capabilities)
        limit = self.max_enumeration_units
        log_z_cost, free_energy_cost = self.log_partition_cost, self.free_energy_cost
        if log_z_cost is not None and (log_z_cost == 0 or limit is None or log_z_cost <= limit):
            offered.add(Capability.EXACT_LOG_Z)
            if log_z_cost == 0 and Capability.REAL_ENERGY in offered:
                offered.add(Capability.CLOSED_FORM_LOG_Z)
        if free_energy_cost is not None and (free_energy_cost == 0 or limit is None or free_energy_cost <= limit):
            offered.add(Capability.EXACT_FREE_ENERGY)
        return frozenset(offered)

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        """``log p*(v) = -F(v)`` for ``v [B, V]`` → ``[B]``, the unnormalised log density (so ``model(v)``, hooks and DDP work)."""
        return self.unnormalized_log_prob(v)

    def check_visible(self, v: torch.Tensor, name: str = "v") -> torch.Tensor:
        """Raise ``ValueError`` unless ``v`` is a finite ``[B ≥ 1, V]`` tensor on the model's device with the model's
        dtype (binary if the model is; for real-valued units, entries small enough that energies quadratic in them stay
        finite: :func:`~pfzoo.validation.check_representable`); a dtype mismatch is refused naming both dtypes, never
        cast. A model that cannot compute (see :meth:`check_computable`) is refused first."""
        self.check_computable()
        if self.binary_visible:
            return check_binary(v, name, width=self.num_visible, device=self.device, dtype=self.dtype, allow_empty=False)
        check_matrix(v, name, width=self.num_visible, device=self.device, dtype=self.dtype, allow_empty=False)
        return check_representable(v, name, type(self).__name__)

    def check_computable(self) -> None:
        """Raise ``ValueError`` naming ``model`` if it is on the meta device (built there for sizing: shapes without
        values) or in a dtype other than float32/float64; every method that computes calls it (via :meth:`check_visible`
        where it takes data)."""
        check_computable(self.device, self.dtype)

    def energy(self, *state: torch.Tensor) -> torch.Tensor:
        """Energy of full states, ``[B]``."""
        raise NotImplementedError

    def free_energy(self, v: torch.Tensor) -> torch.Tensor:
        """Free energy ``F(v) = -log Σ_h exp(-E(v, h))`` of visible vectors ``v [B, V]`` → ``[B]``."""
        raise NotImplementedError

    def unnormalized_log_prob(self, v: torch.Tensor) -> torch.Tensor:
        """``log p*(v) = -F(v)`` for ``v [B, V]`` → ``[B]``."""
        return -self.free_energy(v)

    def flip_free_energy_gaps(self, v: torch.Tensor, units: torch.Tensor | None = None) -> torch.Tensor:
        """``F(v⁽ⁱ⁾) - F(v)`` for single-unit flips of binary ``v [B, V]``: every unit (→ ``[B, V]``) or ``units [B, k]`` (→ ``[B, k]``).

        ``v⁽ⁱ⁾`` is ``v`` with unit i flipped; ``p(v_i | v_{-i}) = σ(F(v⁽ⁱ⁾) - F(v))``. What MPF's bit-flip
        connectivity and pseudo-likelihood need. This default evaluates the free energy of every flipped
        copy (``B·k`` rows); models with a cheaper form (RBM, Ising) override it. Not validated.
        """
        num_rows, width = v.shape
        if units is None:
            units = torch.arange(width, device=v.device).expand(num_rows, -1)
        num_flips = units.shape[1]
        flipped = v.unsqueeze(1).repeat(1, num_flips, 1)
        chosen = flipped.gather(2, units.unsqueeze(-1))
        flipped = flipped.scatter(2, units.unsqueeze(-1), 1 - chosen)
        return self.free_energy(flipped.reshape(-1, width)).reshape(num_rows, num_flips) - self.free_energy(v).unsqueeze(1)

    def block_free_energies(self, v: torch.Tensor, blocks: torch.Tensor) -> torch.Tensor:
        """``F`` of binary ``v [B, V]`` with the units of an index set replaced by each of their ``2^s`` configurations:
        ``blocks [m, s]`` (the same m sets for every row) or ``[B, m, s]`` (each row its own) → ``[B, m, 2^s]``.

        Entry ``[n, k, c]`` is ``F(v_n)`` with unit ``blocks[k, j]`` (or ``blocks[n, k, j]``) set to bit j of c, so
        ``p(v_S | v_{-S}) = exp(-F(v)) / Σ_c exp(-F[..., c])``: what generalized pseudo-likelihood needs (its sets'
        conditionals enumerated exactly). This default evaluates the free energy of all ``B·m·2^s`` states; models with a
        cheaper form (RBM, Ising) override it. Not validated.
        """
        num_rows, width = v.shape
        blocks = blocks.expand(num_rows, -1, -1)
        num_sets, size = blocks.shape[1:]
        configurations = binary_configurations(size, dtype=v.dtype, device=v.device)
        shape = (num_rows, num_sets, configurations.shape[0])
        states = v[:, None, None, :].expand(*shape, width).clone()
        states.scatter_(3, blocks.unsqueeze(2).expand(*shape, size), configurations.expand(*shape, size))
        return self.free_energy(states.reshape(-1, width)).reshape(shape)

    def sample(self, num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Samples of the visible units ``[num_samples, V]``, without grad: exact where the family allows (Gaussian,
        complete ICA, the directed generative models), else MCMC whose steps each family documents (Gibbs sweeps
        for the Boltzmann machines, HMC for energies over real vectors)."""
        raise NotImplementedError(f"{type(self).__name__} has no sampler")

    def exact_samples(self, num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor | None:
        """Exact, independent samples of the visible units ``[num_samples, V]`` where the family can draw them at an
        affordable cost (:attr:`samples_exactly` families by :meth:`sample`; an RBM with a small layer by enumerating
        it), else ``None``: what needs exact draws (model comparison) then falls back to :meth:`sample`'s MCMC."""
        return self.sample(num_samples, generator=generator) if self.samples_exactly else None

    def gibbs_chain(self, *, reversible: bool = False, keep_statistics: bool = False) -> tuple[Kernel, Any]:
        """``(kernel, target)`` of this family's Gibbs chain over its visible units at any β
        (:attr:`Capability.VISIBLE_GIBBS_CHAIN`): ``kernel.step(state, target, beta=β, generator=g)`` leaves the visible
        marginal of ``p_β`` invariant and maps visible states ``[N, V]`` to visible states. ``reversible``: a step that
        is also reversible (RAISE, MPF's connectivity); a block-Gibbs step ``v → h → v`` already is.
        ``keep_statistics``: a hint for long runs at fixed parameters (sampling, parallel tempering) that the states
        carry what the next draw and replica exchange share (:data:`~pfzoo.kernels.STATISTICS_LOG_DENSITY`), where the
        family has such; the chain's law and draws are the same either way."""
        raise NotImplementedError(f"{type(self).__name__} has no Gibbs chain over its visible units")

    def energy_target(self) -> Any:
        """This model's own density at β, ``E_β = β E``, as a position-space target for HMC and Metropolis kernels
        (:class:`~pfzoo.kernels.PositionTarget`; :attr:`Capability.REAL_ENERGY`)."""
        raise NotImplementedError(f"{type(self).__name__} has no differentiable energy over real vectors")

    def layer_means(self, v: torch.Tensor) -> list[torch.Tensor]:
        """Each binary layer's mean over the data ``v [B, V]``, latent layers at their (mean-field) conditional means,
        visible first (:attr:`Capability.CENTERING`): the offsets centering subtracts."""
        raise NotImplementedError(f"{type(self).__name__} has no centered parametrisation")

    def center_gradients(self, offsets: list[torch.Tensor]) -> None:
        """Turn the plain gradients in the parameters' ``.grad`` into the update of the centered parametrisation with
        ``offsets`` (one per layer, as :meth:`layer_means` gives them), in place (:attr:`Capability.CENTERING`)."""
        raise NotImplementedError(f"{type(self).__name__} has no centered parametrisation")

    def visible_filters(self) -> torch.Tensor | None:
        """The first layer's filters over the visible units ``[K, V]`` (one row per hidden unit or expert), for
        pictures; ``None`` for families without such a layer."""
        return None

    def training_diagnostics(self, v: torch.Tensor) -> dict[str, float]:
        """Family-specific numbers worth watching during training on the data ``v [B, V]`` (name → value; the Trainer
        logs them per epoch as ``<split>_<name>``), e.g. how much a DBM's top layer contributes; none by default."""
        return {}

    def log_partition(self) -> torch.Tensor:
        """Exact ``log Z`` as a float64 scalar, where the model allows it."""
        raise NotImplementedError(f"{type(self).__name__} has no exact log partition function")

    def improper_reason(self) -> str | None:
        """Why this model's partition function is infinite (one clause naming the parameters at fault), or ``None``
        for a proper model; families that can be improper (products of experts) override it."""
        return None

    def log_prob(self, v: torch.Tensor, *, log_z: torch.Tensor | float | None = None) -> torch.Tensor:
        """Exact ``log p(v) = -F(v) - log Z`` (float64, ``[B]``).

        ``log Z`` comes from :meth:`log_partition` unless given: pass ``log_z`` when calling this
        repeatedly, since enumeration can take seconds.
        """
        if log_z is None:
            log_z = self.log_partition()
        return self.unnormalized_log_prob(v).double() - log_z

    @property
    def log_partition_cost(self) -> int | None:
        """``log2`` of the number of terms :meth:`log_partition` sums: 0 for a closed form, ``None`` without an exact ``log Z``.

        Lets callers decide whether exact values are affordable before asking for them.
        """
        return None

    @property
    def free_energy_cost(self) -> int | None:
        """``log2`` of the number of terms :meth:`free_energy` sums: 0 for a closed form (the default),
        ``None`` when there is no exact free energy (then :meth:`propose_path_state` gives estimates)."""
        return 0

    def propose_path_state(
        self, v: torch.Tensor, *, num_samples: int = 1, generator: torch.Generator | None = None
    ) -> PathStateProposal:
        """``num_samples`` draws of the latent part of a β = 1 path state for each row of ``v [B, V]``.

        Rows of the result are example-major (``B · num_samples`` rows, the samples of example b
        at ``b · num_samples …``). Used by RAISE and importance sampling.
        """
        raise NotImplementedError(f"{type(self).__name__} does not define a posterior proposal for its annealing path")

    def init_from_data(self, data: torch.Tensor) -> None:
        """Data-dependent initialisation before training (``data [N, V]``); by default nothing."""

    def project_parameters(self) -> None:
        """Move the parameters back onto the model's constraint set (e.g. bounded basis norms), in place; the
        :class:`~pfzoo.training.Trainer` calls it after every optimiser step. By default there is none: nothing."""

    def annealing_base(self, kind: str, data: torch.Tensor | None = None, *, smoothing: float = 1.0) -> "EnergyModel":
        """A tractable model of the same family (``log Z`` known exactly) to anneal from; ``kind`` is one of the
        family's base names registered in :mod:`pfzoo.paths.registry`. Families whose bases are of another
        family (continuous models anneal from Gaussians) leave this to their path registration."""
        raise NotImplementedError(f"{type(self).__name__} does not define an annealing base distribution")

    def config(self) -> dict:
        """Constructor keyword arguments that rebuild a model of this shape (used by checkpoints)."""
        raise NotImplementedError

    @classmethod
    def from_pretrained(
        cls: type[Model], name: str, *, map_location: str | torch.device = "cpu", zoo_dir: str | os.PathLike | None = None
    ) -> Model:
        """The zoo's pretrained model ``name`` (as :func:`pfzoo.zoo.pretrained`: hash-checked against its card, in eval
        mode), which must be of this class or a subclass: ``RBM.from_pretrained("rbm-digits")``. A name of another
        family, or none of the zoo's, is refused in one line listing the names that fit (``EnergyModel`` takes any).

        Args:
            name: a zoo folder's name (:func:`pfzoo.zoo.list_pretrained`), or ``"DEFAULT"``: the family's default
                weights (:func:`pfzoo.zoo.default_weights`).
            map_location: the device to load onto.
            zoo_dir: the zoo folder; ``None``: the installed zoo (the checkout's ``models/``).
        """
        source = pretrained_source()
        if name == "DEFAULT" and cls.registry_name is not None:  # the family's default weights (pfzoo.zoo.default_weights)
            name = source.default(cls, zoo_dir=zoo_dir)
        classes = source.classes(zoo_dir=zoo_dir)
        fitting = sorted(entry for entry, model_class in classes.items() if issubclass(model_class, cls))
        if name not in fitting:
            found = (f"{name!r} is of class {classes[name].__name__}, not {cls.__name__}" if isinstance(name, str) and name in classes
                     else f"no pretrained model {name!r} in {source.location(zoo_dir)}")
            raise ValueError(f"{cls.__name__}.from_pretrained: {found}; {cls.__name__} names: {', '.join(fitting) or 'none'}")
        return source.load(name, map_location=map_location, zoo_dir=zoo_dir)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype
