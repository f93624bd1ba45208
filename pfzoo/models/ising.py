"""Ising model / fully visible Boltzmann machine over binary units."""

from __future__ import annotations

import torch
from torch import nn

from functools import cached_property

from pfzoo.kernels import (
    CHAIN_BETAS, PAIRWISE_BINARY, SCAN_CONDITIONALS, TEMPERED_LOG_DENSITY, GibbsState, Kernel, ScanGibbs, check_kernel, coupling_edges,
    run_chain,
)
from pfzoo.models.capabilities import Capability
from pfzoo.models.base import EnergyModel, PathStateProposal
from pfzoo.models.enumeration import binary_configurations, logsumexp_over_binary_states
from pfzoo.models.registry import register_model
from pfzoo.models.rbm import base_rate_visible_bias
from pfzoo.sampling import bernoulli
from pfzoo.validation import all_finite, allocates, check_beta, check_bool, check_finite_number, check_generator, check_model_dtype, check_positive_int, check_tensors

DEFAULT_MAX_ENUMERATION_UNITS = 25


def independent_sets(coupling: torch.Tensor) -> list[torch.Tensor]:
    """A greedy colouring of the graph whose edges are the non-zero entries of ``coupling [D, D]``.

    Returns index tensors partitioning ``0..D-1``; no two units in one set are coupled, so each set can
    be resampled as one block in Gibbs sampling. A periodic lattice with an even side gets two sets (the
    checkerboard), a fully connected model D singletons.
    """
    adjacent = (coupling != 0).cpu()
    adjacent.fill_diagonal_(False)
    colour = [-1] * adjacent.shape[0]
    neighbours = [torch.nonzero(row).flatten().tolist() for row in adjacent]
    for unit, unit_neighbours in enumerate(neighbours):
        taken = {colour[n] for n in unit_neighbours}
        colour[unit] = next(c for c in range(len(colour) + 1) if c not in taken)
    colours = torch.tensor(colour)
    return [torch.nonzero(colours == c).flatten().to(coupling.device) for c in range(int(colours.max()) + 1)]


class IsingConditionals:
    """An Ising model's ``p_β(x) ∝ exp(β (½ xᵀJx + b·x))`` as a scan-Gibbs target (:class:`~pfzoo.kernels.ScanConditionals`):
    ``p_β(x_i = 1 | x_{-i}) = σ(β (Jx + b)_i)``, one matrix product per block; no statistics kept. Its draws take a β per
    chain (an ``[N, 1]`` tensor) and it offers ``log f_β``, so :class:`~pfzoo.kernels.ParallelTempering` runs on it with
    every replica in one batch. It is also a :class:`~pfzoo.kernels.PairwiseBinary` target (``b_β = βb``), so
    :class:`~pfzoo.kernels.SwendsenWang` runs on it.

    Args:
        coupling: symmetric, zero-diagonal ``J [D, D]``; bias: ``b [D]`` (both detached).
        scan: the blocks in visiting order, each an independent set of the coupling graph.
    """

    offers = frozenset({SCAN_CONDITIONALS, TEMPERED_LOG_DENSITY, CHAIN_BETAS, PAIRWISE_BINARY})

    def __init__(self, coupling: torch.Tensor, bias: torch.Tensor, scan: list[torch.Tensor]) -> None:
        self.coupling, self.bias, self.scan = coupling, bias, scan

    @cached_property
    def edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The coupled pairs ``i < j`` (:func:`~pfzoo.kernels.coupling_edges`), found at the first call only."""
        return coupling_edges(self.coupling)

    def bias_at(self, beta: float | torch.Tensor) -> torch.Tensor:
        """``b_β = βb``: ``[D]``, or ``[N, D]`` for β an ``[N, 1]`` tensor."""
        return beta * self.bias

    def statistics(self, x: torch.Tensor, *, beta: float = 0.0) -> None:
        return None

    def log_density(self, x: torch.Tensor, *, beta: float | torch.Tensor) -> torch.Tensor:
        """``log f_β(x) = β (½ xᵀJx + b·x)`` of ``x [N, D]``: float64 ``[N]`` for β a number, ``[N, K]`` for β an ``[N, K]``
        tensor."""
        log_f = 0.5 * ((x @ self.coupling) * x).sum(-1, dtype=torch.float64) + (x @ self.bias).double()
        return beta * (log_f[:, None] if torch.is_tensor(beta) else log_f)

    def draw_block(self, x: torch.Tensor, block: torch.Tensor, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        logits = x @ self.coupling[:, block] + self.bias[block]
        return bernoulli(torch.sigmoid(beta * logits), generator=generator)


@register_model("ising")
class Ising(EnergyModel):
    """Fully visible Boltzmann machine ``E(x) = -½ xᵀJx - b·x`` over ``x ∈ {0,1}^D`` (thesis eq. 3.1, in 0/1 units).

    ``J`` is symmetric with a zero diagonal: the energy reads the parameter ``coupling [D, D]`` through
    :attr:`symmetric_coupling`, ``(C + Cᵀ)/2`` with the diagonal removed, whose gradient is itself
    symmetric and zero on the diagonal, so gradient steps keep a symmetric ``coupling`` symmetric.
    ``bias [D]`` is b. Flipping unit i changes the energy by ``E(x⁽ⁱ⁾) - E(x) = -(1 - 2x_i) (Jx + b)_i``;
    the local fields ``Jx + b`` drive Gibbs sampling, MPF and pseudo-likelihood.

    Args:
        num_units: D. The app passes ``num_visible`` instead (the data width); give one of them.
        init_std: standard deviation of the Gaussian initial couplings (biases start at 0).
        max_enumeration_units: exact ``log Z`` refuses to enumerate more than ``2**max_enumeration_units`` states.
        generator: random generator for the initial couplings.
    """

    family_capabilities = frozenset({
        Capability.BINARY_STATES, Capability.BLOCK_GIBBS, Capability.VISIBLE_GIBBS_CHAIN, Capability.POSTERIOR_PROPOSAL,
        Capability.PAIRWISE_COUPLINGS,
    })
    path_family = "ising"

    def __init__(
        self,
        num_units: int | None = None,
        *,
        num_visible: int | None = None,
        init_std: float = 0.01,
        max_enumeration_units: int = DEFAULT_MAX_ENUMERATION_UNITS,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if num_units is None and num_visible is None:
            raise ValueError("give num_units (the number of binary units D)")
        if num_units is not None and num_visible is not None and num_units != num_visible:
            raise ValueError(f"num_units={num_units} and num_visible={num_visible} disagree; give one of them")
        self.num_visible = self.num_units = check_positive_int(num_units if num_units is not None else num_visible, "num_units")
        init_std = check_finite_number(init_std, "init_std", minimum=0.0)
        self.max_enumeration_units = check_positive_int(max_enumeration_units, "max_enumeration_units")
        initial = torch.randn(self.num_units, self.num_units, generator=generator) * init_std
        self.coupling = nn.Parameter(torch.triu(initial, 1) + torch.triu(initial, 1).T)
        self.bias = nn.Parameter(torch.zeros(self.num_units))

    def extra_repr(self) -> str:
        """The sizes, shown by ``repr``: ``Ising(...)``."""
        return f"num_units={self.num_units}"

    @classmethod
    def from_tensors(cls, coupling: torch.Tensor, bias: torch.Tensor, *, max_enumeration_units: int = DEFAULT_MAX_ENUMERATION_UNITS):
        """A model holding copies of a symmetric, zero-diagonal ``coupling [D, D]`` and ``bias [D]``."""
        check_tensors(coupling=coupling, bias=bias)
        if coupling.dim() != 2 or coupling.shape[0] != coupling.shape[1]:
            raise ValueError(f"coupling must be a square [D, D] matrix, got shape {tuple(coupling.shape)}")
        num_units = coupling.shape[0]
        if bias.shape != (num_units,):
            raise ValueError(f"bias must have shape [{num_units}], got {tuple(bias.shape)}")
        for name, tensor in (("coupling", coupling), ("bias", bias)):
            if not all_finite(tensor):
                raise ValueError(f"{name} contains NaN or infinite values")
        if not torch.allclose(coupling, coupling.T, rtol=1e-5, atol=1e-6 * (1 + coupling.abs().max().item())):
            raise ValueError("coupling must be symmetric (J = Jᵀ)")
        if torch.any(coupling.diagonal() != 0):
            raise ValueError("coupling must have a zero diagonal (put self-interactions x_i² = x_i into bias)")
        model = cls(num_units, init_std=0.0, max_enumeration_units=max_enumeration_units)
        model.to(device=coupling.device, dtype=check_model_dtype(coupling.dtype, "coupling"))
        with torch.no_grad():
            model.coupling.copy_((coupling + coupling.T) / 2)
            model.bias.copy_(bias)
        return model

    @classmethod
    def from_spins(cls, coupling: torch.Tensor, field: torch.Tensor, *, max_enumeration_units: int = DEFAULT_MAX_ENUMERATION_UNITS):
        """The model whose ±1 spins ``s = 2x - 1`` follow ``p(s) ∝ exp(Σ_{i<j} K_ij s_i s_j + h·s)``, from ``coupling [D, D]``
        (K, symmetric, zero diagonal) and ``field [D]`` (h).

        Substituting ``s_i s_j = 4 x_i x_j - 2 x_i - 2 x_j + 1`` and ``s_i = 2 x_i - 1`` gives ``½ xᵀJx + b·x`` + const
        with ``J = 4K`` and ``b = 2h - 2K𝟙``; :meth:`spin_parameters` inverts it.
        """
        return cls.from_tensors(4 * coupling, 2 * field - 2 * coupling.sum(1), max_enumeration_units=max_enumeration_units)

    def spin_parameters(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(K [D, D], h [D]) = (J/4, J𝟙/4 + b/2)``: this model in ±1 spins, ``p(s) ∝ exp(Σ_{i<j} K_ij s_i s_j + h·s)``
        (the inverse of :meth:`from_spins`). Detached."""
        coupling = self.symmetric_coupling.detach()
        return coupling / 4, coupling.sum(1) / 4 + self.bias.detach() / 2

    def config(self) -> dict:
        return {"num_units": self.num_units, "max_enumeration_units": self.max_enumeration_units}

    @property
    def symmetric_coupling(self) -> torch.Tensor:
        """J = ``(C + Cᵀ)/2`` with a zero diagonal, ``[D, D]`` (differentiable in ``coupling``)."""
        symmetric = (self.coupling + self.coupling.T) / 2
        return symmetric - torch.diag_embed(symmetric.diagonal())

    # ---- energies -------------------------------------------------------------------------

    def local_fields(self, x: torch.Tensor) -> torch.Tensor:
        """``Jx + b`` for ``x [B, D]`` → ``[B, D]``; unit i's field, its conditional logit at β = 1. Not validated."""
        return torch.addmm(self.bias, x, self.symmetric_coupling)

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """``E(x) = -½ xᵀJx - b·x`` for ``x [B, D]`` → ``[B]``."""
        self.check_visible(x, "x")
        coupling = self.symmetric_coupling
        return -0.5 * ((x @ coupling) * x).sum(-1) - x @ self.bias

    def free_energy(self, x: torch.Tensor) -> torch.Tensor:
        """The energy: every unit is visible, so there is nothing to sum out. ``[B]``."""
        return self.energy(x)

    def flip_free_energy_gaps(self, x: torch.Tensor, units: torch.Tensor | None = None) -> torch.Tensor:
        """``E(x⁽ⁱ⁾) - E(x) = -(1 - 2x_i)(Jx + b)_i`` for single-unit flips of ``x [B, D]``: all D units (→ ``[B, D]``,
        one matrix product) or the units ``units [B, k]`` (→ ``[B, k]``). The energy is the free energy here.

        Used by MPF (thesis appendix E.1) and pseudo-likelihood. Not validated.
        """
        if units is None:
            return -(1 - 2 * x) * self.local_fields(x)
        coupling = self.symmetric_coupling
        fields = (coupling[units] * x.unsqueeze(1)).sum(-1) + self.bias[units]
        return -(1 - 2 * x.gather(1, units)) * fields

    def block_free_energies(self, x: torch.Tensor, blocks: torch.Tensor) -> torch.Tensor:
        """``E`` of ``x [B, D]`` with each index set's units set to each of their configurations: ``blocks [m, s]`` (shared)
        or ``[B, m, s]`` (per row) → ``[B, m, 2^s]`` (the layout of :meth:`EnergyModel.block_free_energies`).

        With ``δ = c - x_S`` (zero off S), ``E(x + δ) = E(x) - δ·(Jx + b)_S - ½ δᵀ J_SS δ``: the local fields once, then
        ``s × s`` blocks of J per set. Not validated.
        """
        num_rows = x.shape[0]
        sets = blocks if blocks.dim() == 3 else blocks.unsqueeze(0)  # [1 or B, m, s]
        num_sets, size = sets.shape[1:]
        coupling = self.symmetric_coupling
        fields = self.local_fields(x)
        energy = -0.5 * (x * (fields + self.bias)).sum(-1)  # -½ xᵀJx - b·x, with Jx = fields - b
        flat = sets.expand(num_rows, -1, -1).reshape(num_rows, -1)
        current = x.gather(1, flat).reshape(num_rows, num_sets, 1, size)
        set_fields = fields.gather(1, flat).reshape(num_rows, num_sets, 1, size)
        change = binary_configurations(size, dtype=x.dtype, device=x.device) - current  # δ_S [B, m, C, s]
        within = coupling[sets.unsqueeze(-1), sets.unsqueeze(-2)]  # J_SS [1 or B, m, s, s]
        return energy[:, None, None] - (change * set_fields).sum(-1) - 0.5 * ((change @ within) * change).sum(-1)

    # ---- sampling -------------------------------------------------------------------------

    def gibbs_blocks(self) -> list[torch.Tensor]:
        """The blocks :meth:`gibbs_sweep` resamples at once: :func:`independent_sets` of the current couplings."""
        return independent_sets(self.symmetric_coupling.detach())

    def gibbs_chain(self, *, reversible: bool = False, keep_statistics: bool = False,
                    blocks: list[torch.Tensor] | None = None) -> tuple[ScanGibbs, IsingConditionals]:
        """Systematic-scan Gibbs over the independent sets ``B_1 … B_m`` (default :meth:`gibbs_blocks`; pass ``blocks``
        when building chains repeatedly); ``reversible``: the palindromic scan ``B_1 … B_m … B_1`` (a forward-only scan
        leaves ``p_β`` invariant but is not reversible; its reversal is the backward scan). ``keep_statistics`` changes
        nothing: a scan's block draws share no work with the tempered log density."""
        check_bool(keep_statistics, "keep_statistics")
        blocks = self.gibbs_blocks() if blocks is None else blocks
        scan = blocks + blocks[-2::-1] if reversible else blocks
        return ScanGibbs(), IsingConditionals(self.symmetric_coupling.detach(), self.bias.detach(), scan)

    def gibbs_sweep(
        self,
        x: torch.Tensor,
        *,
        beta: float = 1.0,
        generator: torch.Generator | None = None,
        blocks: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """One systematic-scan Gibbs sweep at inverse temperature β over chains ``x [B, D]`` → ``[B, D]``: one step of
        :meth:`gibbs_chain`'s kernel.

        ``p_β(x_i = 1 | x_{-i}) = σ(β (Jx + b)_i)``. Units are resampled block by block, each block an
        independent set of the coupling graph (default :func:`independent_sets` of the current J; pass
        ``blocks`` when calling repeatedly): one matrix product per block, so a checkerboard lattice costs
        two per sweep. Every block update leaves ``p_β`` invariant, hence so does the sweep. Not validated.
        """
        kernel, target = self.gibbs_chain(blocks=blocks)
        return kernel.step(GibbsState(x, x.new_empty(0)), target, beta=beta, generator=generator)[0].position

    @allocates("num_samples")
    @torch.no_grad()
    def sample(
        self,
        num_samples: int,
        *,
        num_steps: int = 1000,
        beta: float = 1.0,
        initial: torch.Tensor | None = None,
        kernel: Kernel | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """``num_samples`` independent chains run ``num_steps`` Gibbs sweeps at β; returns their final states ``[S, D]``.

        Chains start from ``initial [S, D]`` or, by default, uniformly random states. ``kernel`` replaces the sweep by any
        kernel on :meth:`gibbs_chain`'s target, one step per sweep, e.g. ``ParallelTempering(ScanGibbs(),
        temperature_ladder(8, min_beta=0.2))`` for a model whose modes plain sweeps do not cross (its β replicas
        returned; its ladder is scaled by β), or :class:`~pfzoo.kernels.SwendsenWang` cluster moves for cold, strongly
        coupled models (a ferromagnet below its critical temperature).
        """
        self.check_computable()
        check_positive_int(num_samples, "num_samples")
        check_positive_int(num_steps, "num_steps")
        beta = check_beta(beta)
        check_generator(generator, self.device)
        default, target = self.gibbs_chain()
        kernel = default if kernel is None else check_kernel(kernel, target.offers, f"{type(self).__name__}'s Gibbs target")
        if initial is None:
            x = bernoulli(torch.full((num_samples, self.num_units), 0.5, device=self.device, dtype=self.dtype), generator=generator)
        else:
            x = self.check_visible(initial, "initial")
            if x.shape[0] != num_samples:
                raise ValueError(f"initial must have num_samples={num_samples} rows, got shape {tuple(x.shape)}")
        return run_chain(kernel, target, x, num_steps, beta=beta, generator=generator)[0].position

    # ---- partition function ---------------------------------------------------------------

    @property
    def log_partition_cost(self) -> int:
        return self.num_units

    @torch.no_grad()
    def log_partition(self) -> torch.Tensor:
        """Exact ``log Z = logsumexp_x [½ xᵀJx + b·x]`` (float64 scalar) by enumerating all ``2^D`` states in chunks."""
        self.check_computable()
        coupling, bias = self.symmetric_coupling.double(), self.bias.double()

        def log_f(states: torch.Tensor) -> torch.Tensor:
            return 0.5 * ((states @ coupling) * states).sum(-1) + states @ bias

        return logsumexp_over_binary_states(
            self.num_units, log_f, width=self.num_units, max_units=self.max_enumeration_units, device=self.device
        )

    # ---- annealing ------------------------------------------------------------------------

    def annealing_base(self, kind: str = "uniform", data: torch.Tensor | None = None, *, smoothing: float = 1.0) -> "Ising":
        """An independent-units model (``J = 0``) to anneal from: all-zero parameters (``kind="uniform"``,
        ``log Z_0 = D log 2``) or biases ``logit`` of the smoothed unit means of ``data [N, D]`` (``"base_rate"``)."""
        zeros = torch.zeros_like(self.coupling)
        if kind == "uniform":
            return Ising.from_tensors(zeros, torch.zeros_like(self.bias))
        if kind == "base_rate":
            if data is None:
                raise ValueError("annealing_base(kind='base_rate') needs data [N, D] to take unit means from")
            return Ising.from_tensors(zeros, base_rate_visible_bias(self.check_visible(data, "data"), smoothing))
        raise ValueError(f"kind must be 'uniform' or 'base_rate', got {kind!r}")

    def propose_path_state(self, v: torch.Tensor, *, num_samples: int = 1, generator: torch.Generator | None = None) -> PathStateProposal:
        """The path state is ``x`` itself (no latents), weight ``-E(x)`` exactly."""
        with torch.no_grad():
            return PathStateProposal(v.repeat_interleave(num_samples, dim=0), -self.energy(v).double().repeat_interleave(num_samples))

    @torch.no_grad()
    def init_from_data(self, data: torch.Tensor, *, smoothing: float = 1.0) -> None:
        """Set the biases to the base-rate logits of ``data [N, D]`` (the independent-units fit)."""
        self.bias.copy_(base_rate_visible_bias(self.check_visible(data, "data"), smoothing))
