"""Geometric-average annealing paths ``f_β = f_0^{1-β} f_1^β``."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch.nn import functional as F

from pfzoo.hashed_draws import draw_keys, hashed_bernoulli
from pfzoo.kernels import BLOCK_CONDITIONALS, CHAIN_BETAS, BlockGibbs, GibbsInfo, GibbsState, Kernel, check_kernel
from pfzoo.logmath import softplus, softplus_difference, softplus_difference_form
from pfzoo.paths.base import AnnealingPath, tempered_block_rows
from pfzoo.paths.registry import register_family, register_path, same_family_base
from pfzoo.sampling import ChainStreams, Generator, bernoulli, bernoulli_logits, bernoulli_probs_
from pfzoo.validation import check_choice


class RBMPathStatistics(NamedTuple):
    """Statistics of visible states ``v [N, V]`` on an RBM geometric path.

    hidden_input: ``vW + c - c_0`` ``[N, H]``; the hidden pre-activation at β is ``c_0 + β · hidden_input``.
    visible_term: ``(b - b_0)·v`` ``[N]``.
    """

    hidden_input: torch.Tensor
    visible_term: torch.Tensor


class RBMPathConditionals:
    """The interpolated RBM of :class:`RBMGeometricPath` at any β as a block-Gibbs target
    (:class:`~pfzoo.kernels.BlockConditionals`): ``W_β = βW``, ``b_β = b_0 + β(b − b_0)``, ``c_β = c_0 + β(c − c_0)``.

    Its statistics of ``v [N, V]`` are :class:`RBMPathStatistics` (one product gives both); the hidden draw reuses their
    ``vW + c − c_0``, so a block-Gibbs step costs two matrix products and two Bernoulli draws, the new state's
    statistics included. Its draws take β as a number or as an ``[N, 1]`` column, one per chain
    (:data:`~pfzoo.kernels.CHAIN_BETAS`: parallel tempering over the path's levels advances them as one batch).
    """

    offers = frozenset({BLOCK_CONDITIONALS, CHAIN_BETAS})

    def __init__(self, target, base) -> None:
        if base.weight.shape != target.weight.shape:
            raise ValueError(f"base RBM has shape {tuple(base.weight.shape)}, target {tuple(target.weight.shape)}")
        if torch.any(base.weight != 0):
            raise ValueError("the base RBM of a geometric path must have zero weights (a factorised, tractable model)")
        self.weight = target.weight.detach()
        self.base_visible_bias = base.visible_bias.detach().to(self.weight)
        self.base_hidden_bias = base.hidden_bias.detach().to(self.weight)
        self.visible_bias_delta = target.visible_bias.detach() - self.base_visible_bias
        self.hidden_bias_delta = target.hidden_bias.detach() - self.base_hidden_bias
        # [H + 1, V]: Wᵀ with (b - b_0) as an extra row, so one product gives both statistics. BLAS computes Wᵀvᵀ (→ vW)
        # about twice as fast as v·W for few hidden units (784×20 on CPU), and as fast for many; but MKL's float64 Wᵀvᵀ
        # sums a chain's terms in an order that depends on the number of chains, while v·W's rows (and every float32
        # product) do not. A batch of blocks (ChainStreams) must give each block what it gets alone, so float64 takes v·W.
        self.statistics_weight = torch.cat([self.weight.T, self.visible_bias_delta[None]])
        self.statistics_bias = torch.cat([self.hidden_bias_delta, self.hidden_bias_delta.new_zeros(1)])
        self.chains_as_rows = self.weight.dtype == torch.float64
        # |vW + c - c_0| ≤ Σ_i |W_ij| + |c_j - c_0,j| for v ∈ {0,1}^V: bounds the hidden input without a sync.
        self.hidden_input_bound = (self.weight.abs().sum(0) + self.hidden_bias_delta.abs()).max().item()
        self.base_hidden_bias_bound = self.base_hidden_bias.abs().max().item()  # |c_0 + β u| ≤ this + |β| · the bound above
        # The visible logits only feed a draw, whose σ and uniforms are float32 for float64 models (bernoulli_logits): a
        # float32 hWᵀ halves that product's cost, and each float32 rounding of a logit x moves σ(x) by at most
        # σ'(x)|x| 2⁻²⁴ < 2⁻²⁶ (a sum over the H units' terms adds a few such roundings), the order of the uniforms'
        # 2⁻²⁴ spacing. The statistics, and with them the log weights, stay in the model's dtype.
        draw_dtype = torch.float32 if self.weight.dtype == torch.float64 else self.weight.dtype
        self.draw_weight = self.weight.to(draw_dtype)
        self.draw_base_visible_bias = self.base_visible_bias.to(draw_dtype)
        self.draw_visible_bias_delta = self.visible_bias_delta.to(draw_dtype)

    def statistics(self, v: torch.Tensor, *, beta: float = 0.0, out: torch.Tensor | None = None) -> RBMPathStatistics:
        """:class:`RBMPathStatistics` of ``v [N, V]`` from one product, written into ``out`` when given (an annealing
        run's buffer of :meth:`statistics_buffer`'s shape)."""
        if self.chains_as_rows:
            products = torch.addmm(self.statistics_bias, v, self.statistics_weight.T, out=out)  # [N, H + 1]
            return RBMPathStatistics(products[:, :-1], products[:, -1])
        products = torch.addmm(self.statistics_bias[:, None], self.statistics_weight, v.T, out=out)  # [H + 1, N]
        return RBMPathStatistics(products[:-1].T, products[-1])  # [N, H] a transposed view, and [N]

    def statistics_buffer(self, num_chains: int) -> torch.Tensor:
        """An empty tensor for :meth:`statistics`' ``out``: ``[N, H + 1]`` (float64: chains as rows) or ``[H + 1, N]``."""
        rows, columns = self.statistics_weight.shape[0], num_chains
        shape = (columns, rows) if self.chains_as_rows else (rows, columns)
        return self.weight.new_empty(shape)

    def draw_hidden(self, v: torch.Tensor, stats: RBMPathStatistics, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        """``h ~ Bernoulli(σ(c_0 + β u))`` with ``u = vW + c − c_0`` from the statistics; drawn in the visible draws' dtype."""
        return bernoulli_logits(_add_scaled(self.base_hidden_bias, stats.hidden_input, beta), dtype=self.draw_weight.dtype,
                                generator=generator)

    def draw_visible(self, h: torch.Tensor, *, beta: float, generator: torch.Generator | None) -> torch.Tensor:
        """``v ~ Bernoulli(σ(b_β + β hWᵀ))`` with ``b_β = b_0 + β(b − b_0)`` (a ``[V]`` vector, so the ``[N, V]`` logits come
        out of one ``addmm``, float32 for float64 models); draws by :func:`pfzoo.sampling.bernoulli_logits`."""
        if torch.is_tensor(beta):
            beta = beta.to(self.draw_weight.dtype)
        visible_bias = _add_scaled(self.draw_base_visible_bias, self.draw_visible_bias_delta, beta)
        if torch.compiler.is_compiling() or torch.is_tensor(beta):  # β dynamic (see _add_scaled) or a column: hW is exact times β
            visible_logits = torch.addmm(visible_bias, h * beta, self.draw_weight.T)
        else:
            visible_logits = torch.addmm(visible_bias, h, self.draw_weight.T, alpha=beta)
        return bernoulli_logits(visible_logits, dtype=self.weight.dtype, generator=generator)

    def hashed_sweep(self, stats: RBMPathStatistics, *, beta: float, keys: torch.Tensor) -> GibbsState:
        """One block-Gibbs sweep at β from the statistics of ``v [N, V]``, its draws hashed from ``keys [2, N]`` (the hidden
        layer's, then the visible layer's; :func:`pfzoo.hashed_draws.hashed_bernoulli`) instead of drawn from a generator:
        the sweep a compiled annealing step holds whole. σ of logits rounded to the draw dtype, as the eager draws do;
        ``hWᵀ`` unscaled, so that β's scaling, the biases, σ, the hash and the comparison fuse into one pass."""
        hidden_logits = _add_scaled(self.base_hidden_bias, stats.hidden_input, beta).to(self.draw_weight.dtype)
        hidden = hashed_bernoulli(torch.sigmoid(hidden_logits), keys[0])
        visible_bias = _add_scaled(self.draw_base_visible_bias, self.draw_visible_bias_delta, beta)
        visible_logits = visible_bias + beta * (hidden @ self.draw_weight.T)
        visible = hashed_bernoulli(torch.sigmoid(visible_logits), keys[1], dtype=self.weight.dtype)
        # the statistics as two dense tensors (not views of one product): the layout of the first state a compiled run
        # starts from (pfzoo.estimators.annealing._fresh), so that its first step needs no graph of its own
        statistics = RBMPathStatistics(torch.addmm(self.hidden_bias_delta, visible, self.weight), visible @ self.visible_bias_delta)
        return GibbsState(visible, hidden, statistics)


def _add_scaled(x: torch.Tensor, y: torch.Tensor, scale: float | torch.Tensor) -> torch.Tensor:
    """``x + scale · y``: torch.add's fused ``alpha`` in eager mode; under ``torch.compile`` the product and the sum, since
    an ``alpha`` must be a constant of the graph, and a β baked in would recompile the annealing step at every β; the same
    for ``scale`` an ``[N, 1]`` column (a β per chain: :data:`~pfzoo.kernels.CHAIN_BETAS`)."""
    if torch.compiler.is_compiling() or torch.is_tensor(scale):
        return x + scale * y
    return torch.add(x, y, alpha=scale)


MARGINALIZE_CHOICES = ("hidden", "visible", "auto")
"""Which layer an RBM path sums out (:class:`RBMGeometricPath`'s ``marginalize``)."""

RBM_PATH_FAMILIES = frozenset({"rbm", "dbm", "dbn"})
"""The path families whose geometric path is an :class:`RBMGeometricPath`, so that ``marginalize`` applies."""


def summed_layer(marginalize: str, num_visible: int, num_hidden: int) -> str:
    """The layer ``marginalize`` sums out of a ``num_visible × num_hidden`` RBM: ``"auto"`` → the larger one (the
    visible layer when ``V > H``, else the hidden one); ``"hidden"``/``"visible"`` themselves."""
    if check_choice(marginalize, "marginalize", MARGINALIZE_CHOICES) == "auto":
        return "visible" if num_visible > num_hidden else "hidden"
    return marginalize


class _SwappedLayers(NamedTuple):
    """An RBM's parameters with the roles of its layers exchanged: ``weight = Wᵀ [H, V]``, ``visible_bias = c``,
    ``hidden_bias = b``. ``E(v, h) = −vᵀWh − b·v − c·h`` is the same function of ``(h, v)`` under this RBM, so its
    partition function, its conditionals and its geometric path (over the joint) are the original's."""

    weight: torch.Tensor
    visible_bias: torch.Tensor
    hidden_bias: torch.Tensor


def _swapped(rbm) -> _SwappedLayers:
    return _SwappedLayers(rbm.weight.detach().T.contiguous(), rbm.hidden_bias.detach(), rbm.visible_bias.detach())


class RBMGeometricPath(AnnealingPath):
    """Geometric path between a base RBM with ``W_0 = 0`` and a target binary RBM.

    The joint energies are linear in the parameters, so the geometric average of the joint
    distributions is itself an RBM with interpolated parameters
    ``W_β = βW``, ``b_β = (1-β) b_0 + β b``, ``c_β = (1-β) c_0 + β c`` (Salakhutdinov & Murray 2008, eq. 14).
    Summing out ``h`` (``marginalize="hidden"``, the default):

        log f_β(v) = b_β·v + Σ_j softplus(c_0 + β (vW + c - c_0))_j

    and ``log Z_0 = Σ_i softplus(b_0,i) + Σ_j softplus(c_0,j)``. The target is :class:`RBMPathConditionals`; the
    default kernel one block Gibbs sweep ``h ~ p_β(h | v)``, ``v ~ p_β(v | h)`` per step (any kernel on block
    conditionals may replace it, e.g. ``Repeat(BlockGibbs(), 3)``).

    ``marginalize="visible"`` sums out ``v`` instead: the same path over the joint, annealed as the RBM with its layers
    exchanged (:class:`_SwappedLayers`), so positions are hidden states ``[N, H]``, the base draws ``h ~ σ(c_0)``, a sweep
    draws ``v`` then ``h``, and

        log f_β(h) = c_β·h + Σ_i softplus(b_0 + β (Wh + b − b_0))_i.

    The weights are then functions of ``h`` alone: each increment is averaged exactly over the ``V`` visible units, whose
    Bernoulli noise (the term ``(β′ − β)(b − b_0)·v`` of the visible-state increment, large when the base's visible
    biases differ from the model's) no longer enters, at the cost of ``V`` rather than ``H`` softplus terms per step.
    ``"auto"`` sums out the larger layer. Ẑ stays unbiased either way (it is AIS on the other marginal of the same joint
    path, Neal 2001); only the variance of the weights changes. :attr:`summed_layer` is the layer summed out.
    """

    beta_free_statistics = True

    def __init__(self, target, base, kernel: Kernel | None = None, *, marginalize: str = "hidden") -> None:
        self.summed_layer = summed_layer(marginalize, *target.weight.shape)
        if self.summed_layer == "visible":
            target, base = _swapped(target), _swapped(base)
        self.target = RBMPathConditionals(target, base)
        self.kernel = BlockGibbs() if kernel is None else check_kernel(kernel, self.target.offers, "an RBM path")
        self.hashes_draws = type(self.kernel) is BlockGibbs  # its compiled sweep draws from keys (draw_noise, transition)

    def draw_base(self, num_chains: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        probs = torch.sigmoid(self.target.base_visible_bias).expand(num_chains, -1)
        return bernoulli(probs, generator=generator)

    def base_log_partition(self) -> torch.Tensor:
        return F.softplus(self.target.base_visible_bias.double()).sum() + F.softplus(self.target.base_hidden_bias.double()).sum()

    def log_f(self, v: torch.Tensor, stats: RBMPathStatistics, beta: float) -> torch.Tensor:
        """``log f_β(v)`` (float64 ``[N]``); the engine uses the exact increment form instead."""
        target = self.target
        hidden_term = F.softplus(target.base_hidden_bias + beta * stats.hidden_input).sum(-1, dtype=torch.float64)
        return (v @ target.base_visible_bias).double() + beta * stats.visible_term.double() + hidden_term

    def log_weight_increment(self, stats: RBMPathStatistics, beta_from: float, beta_to: float) -> torch.Tensor:
        """``log f_{β'}(v) - log f_β(v) = (β'-β)(b-b_0)·v + Σ_j [softplus(x'_j) - softplus(x'_j - (β'-β) u_j)]``

        with ``x' = c_0 + β'u``; the hidden sum is evaluated without cancellation by
        :func:`pfzoo.logmath.softplus_difference`. float64 ``[N]``.
        """
        step = beta_to - beta_from
        x_to = _add_scaled(self.target.base_hidden_bias, stats.hidden_input, beta_to)
        hidden = softplus_difference(x_to, step * stats.hidden_input, **self._increment_bounds(beta_from, beta_to))
        return step * stats.visible_term.double() + hidden

    def tempered_log_density(self, stats: RBMPathStatistics, beta: torch.Tensor) -> torch.Tensor:
        """``log f_β(v) − log f_0(v) = β (b − b_0)·v + Σ_j [softplus(c_0 + β u)_j − softplus(c_0,j)]`` at a β per row and
        column ``beta [N, K]``, float64 ``[N, K]``: one ``[N, K, H]`` pass, in blocks of rows of at most
        :data:`~pfzoo.paths.base.TEMPERED_BLOCK_ELEMENTS` elements (thousands of chains over a ladder would otherwise hold gigabytes)."""
        base_hidden_bias = self.target.base_hidden_bias.double()
        rows = tempered_block_rows(beta.shape[1], base_hidden_bias.numel())
        hidden = torch.cat([softplus(base_hidden_bias + block[:, :, None] * inputs.double()[:, None, :]).sum(-1)
                            for block, inputs in zip(beta.split(rows), stats.hidden_input.split(rows))])
        return beta * stats.visible_term.double()[:, None] + hidden - softplus(base_hidden_bias).sum()

    def _increment_bounds(self, beta_from: float, beta_to: float) -> dict:
        """:func:`~pfzoo.logmath.softplus_difference`'s bounds on ``|δ|`` and ``|x_to|`` for a step from β to β', known on
        the host from the target's weights."""
        target = self.target
        return {"max_abs_delta": abs(beta_to - beta_from) * target.hidden_input_bound,
                "max_abs_input": target.base_hidden_bias_bound + abs(beta_to) * target.hidden_input_bound}

    def device_step_form(self, beta_from: float, beta_to: float) -> tuple[str, int] | str | None:
        """With the plain :class:`~pfzoo.kernels.BlockGibbs` kernel, the form of the increment's
        :func:`~pfzoo.logmath.softplus_difference` for this step (:meth:`_increment_bounds`): every sweep of the kernel
        is the same operations at any β. ``None`` for other kernels."""
        if type(self.kernel) is not BlockGibbs:
            return None
        return softplus_difference_form(**self._increment_bounds(beta_from, beta_to), dtype=self.target.weight.dtype)

    def device_increment(self, stats: RBMPathStatistics, beta_from: torch.Tensor, beta_to: torch.Tensor, *,
                         form: tuple[str, int] | str) -> torch.Tensor:
        """:meth:`log_weight_increment` with β, β' float64 0-d device tensors and the step's ``form`` chosen on the host
        (:meth:`device_step_form`): ``(β'−β)(b−b_0)·v + Σ_j [softplus(c_0 + β'u) − softplus(c_0 + β'u − (β'−β)u)]``."""
        step = beta_to - beta_from
        x_to = _add_scaled(self.target.base_hidden_bias, stats.hidden_input, beta_to)
        hidden = softplus_difference(x_to, step * stats.hidden_input, form=form)
        return step * stats.visible_term.double() + hidden

    def device_advance(self, state: GibbsState, beta_from: torch.Tensor, beta_to: torch.Tensor, *, form: tuple[str, int] | str,
                       generator: Generator = None) -> tuple[torch.Tensor, GibbsState, GibbsInfo]:
        """:meth:`device_increment`, then one block-Gibbs sweep at the 0-d tensor β' (the target's draws take β as a
        tensor: ``c_0 + β'u``, and ``hWᵀ`` of ``β'h``)."""
        increment = self.device_increment(state.stats, beta_from, beta_to, form=form)
        return (increment, *self.kernel.step(state, self.target, beta=beta_to, generator=generator))

    def draw_noise(self, state: GibbsState, *, generator: Generator = None) -> torch.Tensor | None:
        """With the plain :class:`~pfzoo.kernels.BlockGibbs` kernel, the next sweep's keys ``[2, N]`` (int64; one per chain
        and layer, :func:`pfzoo.hashed_draws.draw_keys`) for :meth:`RBMPathConditionals.hashed_sweep`, so that a compiled
        annealing step holds its draws and fuses them with σ (:func:`pfzoo.estimators.annealing.anneal` with
        ``compile=True``); other kernels as :meth:`AnnealingPath.draw_noise`. The sweep then draws other numbers than
        the eager one from the same generator, from the same law."""
        if not self.hashes_draws:
            return super().draw_noise(state, generator=generator)
        return draw_keys(state.position.shape[0], 2, generator=generator, device=state.position.device)

    def transition(self, state: GibbsState, beta: float, *, generator: Generator = None, noise: torch.Tensor | None = None) -> tuple:
        """One kernel step at β (:meth:`AnnealingPath.transition`); with ``noise``, the keys of :meth:`draw_noise`, the
        hashed sweep of the plain :class:`~pfzoo.kernels.BlockGibbs` kernel."""
        if noise is None or not self.hashes_draws:
            return super().transition(state, beta, generator=generator, noise=noise)
        return self.target.hashed_sweep(state.stats, beta=beta, keys=noise), GibbsInfo()

    def advance(self, state: GibbsState, beta_from: float, beta_to: float, *, generator: Generator = None,
                workspace: dict | None = None) -> tuple[torch.Tensor, GibbsState, GibbsInfo]:
        """The increment from β to β' and one block-Gibbs sweep at β' (:meth:`AnnealingPath.advance`), with nothing but
        the necessary work when the kernel is the plain :class:`~pfzoo.kernels.BlockGibbs` on the CPU:

        - ``x' = c_0 + β'u`` and ``σ(x')`` once, shared by the weight increment and the hidden draw ``h ~ σ(x')``;
        - one product ``hWᵀ`` for the visible logits and one ``vW`` (with ``(b − b_0)·v``) for the next statistics;
        - with :class:`~pfzoo.sampling.ChainStreams` both layers' 24-bit integers in one read of each block's stream;
        - σ, scalings and comparisons in place, into ``workspace``'s buffers (a run's, reused every step: the states of
          two steps ago are overwritten, so a caller keeps none of them); float64 only in the log weights.

        The numbers are those of the increment and :meth:`transition` one after the other, for the same generator. Elsewhere
        (another kernel, CUDA, under ``torch.compile``, without a workspace) it is exactly that.
        """
        if workspace is None or not isinstance(self.kernel, BlockGibbs) or state.position.device.type != "cpu" \
                or torch.compiler.is_compiling() or self.target.weight.dtype not in (torch.float32, torch.float64):
            return super().advance(state, beta_from, beta_to, generator=generator, workspace=workspace)
        target, stats = self.target, state.stats
        buffers = workspace.get("rbm_sweep")
        if buffers is None or buffers.positions[0].shape != state.position.shape:
            buffers = workspace["rbm_sweep"] = SweepBuffers(target, stats, state.position)
        x_to = torch.add(target.base_hidden_bias, stats.hidden_input, alpha=beta_to, out=buffers.x_to)
        probs = torch.sigmoid(x_to, out=buffers.probs)
        delta = torch.mul(stats.hidden_input, beta_to - beta_from, out=buffers.delta)
        hidden_term = softplus_difference(x_to, delta, probs=probs, scratch=buffers.scratch, sum_buffer=buffers.terms,
                                          **self._increment_bounds(beta_from, beta_to))
        increment = (beta_to - beta_from) * stats.visible_term.double() + hidden_term
        if buffers.draw_probs is not probs:  # float64 models: the draw's σ in float32, of the logits rounded to float32
            probs = torch.sigmoid(buffers.draw_probs.copy_(x_to), out=buffers.draw_probs)
        streams = isinstance(generator, ChainStreams)
        if streams:
            generator.fill_integers(buffers.hidden_integers, buffers.visible_integers)
        fresh = 1 if buffers.positions[0] is state.position else 0  # the pair of buffers the input state does not hold
        hidden = bernoulli_probs_(probs, dtype=target.draw_weight.dtype, generator=generator,
                                  integers=buffers.hidden_integers if streams else None, out=buffers.hiddens[fresh])
        visible_bias = torch.add(target.draw_base_visible_bias, target.draw_visible_bias_delta, alpha=beta_to, out=buffers.visible_bias)
        logits = torch.addmm(visible_bias, hidden, target.draw_weight.T, alpha=beta_to, out=buffers.visible_probs)
        visible = bernoulli_probs_(torch.sigmoid(logits, out=logits), dtype=target.weight.dtype, generator=generator,
                                   integers=buffers.visible_integers if streams else None, out=buffers.positions[fresh])
        return increment, GibbsState(visible, hidden, target.statistics(visible, out=buffers.statistics[fresh])), GibbsInfo()


class SweepBuffers:
    """The tensors :meth:`RBMGeometricPath.advance` writes each step, allocated once per run for ``N`` chains: the
    hidden inputs' scratch in the layout of the statistics' ``hidden_input [N, H]`` (the elementwise work then runs over
    dense memory in one order), the visible logits ``[N, V]``, the integers of both layers' draws, and two of each
    returned tensor (visible and hidden draws, statistics) used in turn."""

    def __init__(self, target: RBMPathConditionals, stats: RBMPathStatistics, position: torch.Tensor) -> None:
        like = stats.hidden_input
        draw_dtype = target.draw_weight.dtype
        self.x_to, self.probs, self.delta = (torch.empty_like(like) for _ in range(3))
        self.scratch = tuple(torch.empty_like(like) for _ in range(3))
        self.terms = torch.empty_like(like, dtype=torch.float64)
        self.draw_probs = self.probs if like.dtype == draw_dtype else torch.empty_like(like, dtype=draw_dtype)
        self.hidden_integers = torch.empty_like(self.draw_probs, dtype=torch.int32)
        num_chains, num_visible = position.shape
        self.visible_probs = torch.empty(num_chains, num_visible, dtype=draw_dtype, device=position.device)
        self.visible_integers = torch.empty_like(self.visible_probs, dtype=torch.int32)
        self.visible_bias = torch.empty(num_visible, dtype=draw_dtype, device=position.device)
        self.hiddens = tuple(torch.empty_like(self.draw_probs) for _ in range(2))
        self.positions = tuple(torch.empty_like(self.visible_probs, dtype=target.weight.dtype) for _ in range(2))
        self.statistics = tuple(target.statistics_buffer(num_chains) for _ in range(2))


# The RBM family and the deep models whose paths are RBM paths: a DBM's over its even layers with the odd
# ones summed out (the even/odd RBM), a DBN's over its top RBM (log Z_DBN = log Z_top).
register_family("rbm", bases=("base_rate", "uniform"), make_base=same_family_base, free_base="uniform")
register_family("dbm", bases=("base_rate", "uniform"), make_base=same_family_base, free_base="uniform")
register_family("dbn", bases=("base_rate", "uniform"), make_base=same_family_base, free_base="uniform")


@register_path("rbm", "geometric")
def rbm_geometric_path(model, base, kernel, marginalize: str = "hidden") -> RBMGeometricPath:
    return RBMGeometricPath(target=model, base=base, kernel=kernel, marginalize=marginalize)


@register_path("dbm", "geometric")
def dbm_geometric_path(model, base, kernel, marginalize: str = "hidden") -> RBMGeometricPath:
    """States ``(v, h², h⁴, …) [N, Σ n_even]`` (``marginalize="visible"``: the odd layers ``[N, Σ n_odd]``); one
    block-Gibbs step is one odd/even sweep."""
    return RBMGeometricPath(target=model.even_odd_rbm(), base=base.even_odd_rbm(), kernel=kernel, marginalize=marginalize)


@register_path("dbn", "geometric")
def dbn_geometric_path(model, base, kernel, marginalize: str = "hidden") -> RBMGeometricPath:
    """The top RBM's path from ``base`` (an RBM of its shape); states ``h^{L-1} [N, n_{L-1}]`` (``marginalize="visible"``:
    the top layer's)."""
    return RBMGeometricPath(target=model.top, base=base, kernel=kernel, marginalize=marginalize)
