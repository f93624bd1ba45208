"""Reverse AIS estimator, RAISE (Burda, Grosse & Salakhutdinov 2015): conservative log-likelihoods."""

from __future__ import annotations

import math

import torch

from pfzoo.estimators.annealing import AnnealingDiagnostics, anneal
from pfzoo.estimators.base import (
    BoundKind, LikelihoodEstimate, LikelihoodEstimator, ProgressCallback, discrete_visible, likelihood_estimate,
    reliability_warnings,
)
from pfzoo.estimators.batching import example_batches
from pfzoo.estimators.importance import importance_log_marginal
from pfzoo.estimators.sharding import offset_progress, run_blocks
from pfzoo.estimators.trust import schedule_warnings
from pfzoo.logmath import summarize_log_weights
from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability
from pfzoo.paths import registry
from pfzoo.paths.schedules import ScheduleSpec, betas_for_path, make_betas, path_fitted_schedule
from pfzoo.validation import allocating, check_bool, check_finite_number, check_generator, check_non_negative_int, check_positive_int, check_sample_count

_CHAIN_ROWS_PER_BATCH = 1 << 15  # examples × chains annealed as one tensor


class RAISE(LikelihoodEstimator):
    """Per-example stochastic lower bounds on ``log p_ann(v)``, the annealing model's log-likelihood.

    The *annealing model* is the distribution of the final state of forward AIS along the same
    path and schedule: ``x_0 ~ p_0``, ``x_k ~ T_k(· | x_{k-1})`` for ``k = 1..K``. It is a
    normalised model that approaches the target as K grows. RAISE runs that chain backwards
    from a test example (RAISE Algorithms 2 and 3): draw the latent part of the state from a
    proposal, ``x_K = (v, z)``, ``z ~ q(z | v)``; then ``x_{k-1} ~ T_k(· | x_k)`` for ``k = K..1``
    (the transitions here are reversible, so each is its own reversal). The weight

        log w = log f_K(v, z) - log q(z | v) - log Z_0 + Σ_{k=0}^{K-1} [log f_k(x_k) - log f_{k+1}(x_k)]

    satisfies ``E[w] = p_ann(v)`` (RAISE eq. 10), so ``log (1/M) Σ_m w_m`` over M chains is a
    stochastic lower bound on ``log p_ann(v)``. Paths sum out what they can: for an RBM the state is
    ``v`` alone and ``z`` is empty (the exact-posterior Algorithm 2); for a DBM ``z`` are the even
    hidden layers from the mean-field posterior, the odd layers summed out (Algorithm 3); for a DBN
    ``z`` is drawn by the recognition model and ``p(v | h¹)`` enters ``f_K`` (the unrolled DBN, §3.3).

    **Control variates** (§4): with ``num_examples`` < B, RAISE runs on a random subset S of the
    data, and the mean over all B examples is estimated as
    ``mean_B c(v) + mean_S [RAISE(v) - c(v)]``, where ``c(v)`` is ``log f(v)`` (exact when
    affordable, else an importance estimate with ``control_variate_samples`` proposals).
    Its standard error combines the subset's sampling error (with the finite-population factor)
    and the RAISE weights' own delta-method errors.

    Args:
        num_chains: M, reverse chains per test example (≥ 2).
        num_steps: K, intermediate distributions (ignored for an explicit β sequence).
        schedule: "linear", "energy" (:class:`~pfzoo.paths.EnergyScaleSchedule`, fitted to the path on each run from
            base samples, as AIS's default; needed for strongly coupled models: on a 12×8 RBM with weights ~ N(0, 5000²)
            the linear schedule's bound sits 0.56 nats below the exact log-likelihood with zero stderr at any K, the
            energy schedule's within its stderr at K = 1000), "sigmoid", "power:5", ..., a :class:`~pfzoo.paths.Schedule`,
            or an explicit β sequence. A fitted schedule's σ_0 and β's are in the estimate's ``info["energy_scale"]`` and
            ``info["betas"]`` (:attr:`betas` holds the unfitted, linear ones).
        base: the base distribution at β = 0: "auto" (the data base rates of ``base_data``), "base_rate" or "uniform".
        base_smoothing: pseudo-count for the base rates.
        num_examples: size of the random subset for control variates; ``None`` = every example.
        control_variate_samples: proposals per example for ``c(v)`` when ``log f(v)`` is intractable.
        path: the kind of annealing path (see :class:`~pfzoo.estimators.AIS`); its transitions must be reversible.
        diagnostics: also return ``info["diagnostics"]``, the reverse path's
            :class:`~pfzoo.estimators.annealing.AnnealingDiagnostics` (steps in the order run, β descending;
            increments pooled over all examples' chains, ESS per example over its chains, averaged).
        compile: run each reverse step's increment and transition under ``torch.compile``, as :class:`AIS` does.
        cuda_graphs: on a CUDA device, replay blocks of the reverse steps from CUDA graphs, as :class:`AIS` does
            (``info["cuda_graphs"]``: the first batch's account).
        heating_steps: T > 0 draws a DBM's latents by RAISE Algorithm 3's clamped heating chain, T sweeps from the
            mean-field posterior towards ``p(h | v)`` with v clamped (:meth:`DBM.heat_clamped
            <pfzoo.models.DBM.heat_clamped>`), instead of from the mean-field posterior itself (0, the default).
            ``"path"`` is Algorithm 3 as the paper writes it: from the path base's ``p_0(h | v)`` along the path's own
            ``p_k(h | v)``, the reverse chain's K β's (so twice the sweeps of a plain run). The bound stays valid every
            way; a proposal closer to ``p(h | v)`` lowers the weights' variance.
    """

    config_name = "raise"

    def __init__(
        self,
        num_chains: int = 10,
        num_steps: int | None = 1000,
        schedule: ScheduleSpec = "linear",
        base: str = "auto",
        base_smoothing: float = 1.0,
        num_examples: int | None = None,
        control_variate_samples: int = 10,
        path: str = "geometric",
        diagnostics: bool = False,
        compile: bool = False,
        heating_steps: int | str = 0,
        cuda_graphs: bool = False,
    ) -> None:
        super().__init__()
        self.diagnostics = check_bool(diagnostics, "diagnostics")
        self.cuda_graphs = check_bool(cuda_graphs, "cuda_graphs")
        self.heating_steps = heating_steps if heating_steps == "path" else check_non_negative_int(heating_steps, "heating_steps")
        self.compile = check_bool(compile, "compile")
        if not isinstance(path, str):
            raise ValueError(f"path must be a path kind such as 'geometric' or 'moment_averaged', got {type(path).__name__}")
        self.path = path
        self.num_chains = check_sample_count(num_chains, "num_chains")
        self.schedule = schedule
        self.fitted_schedule = path_fitted_schedule(schedule)  # "energy": fitted to the model's path on each run (log_likelihood)
        self.base = base
        self.base_smoothing = check_finite_number(base_smoothing, "base_smoothing", minimum=0.0)
        self.num_examples = None if num_examples is None else check_positive_int(num_examples, "num_examples")
        self.control_variate_samples = check_positive_int(control_variate_samples, "control_variate_samples")
        self.register_buffer("betas", make_betas(schedule, num_steps), persistent=False)

    @property
    def num_steps(self) -> int:
        return self.betas.numel() - 1

    def missing(self, model: EnergyModel) -> str | None:
        """RAISE runs the forward chain backwards from the data, so it needs block-Gibbs transitions (each its own
        reversal) on an annealing path and a proposal for the latent part of the state."""
        offered = model.capabilities
        if self.heating_steps and Capability.MEAN_FIELD not in offered:
            return "a mean-field posterior over several hidden layers for the clamped heating chain (heating_steps > 0; a DBM)"
        if Capability.BLOCK_GIBBS in offered and Capability.POSTERIOR_PROPOSAL in offered and registry.is_annealable(model):
            return None
        return "reversible block-Gibbs transitions on an annealing path and a proposal for the latent units"

    def log_likelihood(
        self,
        model: EnergyModel,
        data: torch.Tensor,
        *,
        base_data: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> LikelihoodEstimate:
        """Stochastic lower bounds on ``log p_ann(v)`` for ``data [B, V]``; their mean, or its control-variate estimate.

        ``per_example`` holds the estimates for the examples RAISE ran on (all of them, or the
        subset listed in ``info["subset"]``). ``base_data`` (default ``data``) fits the base rates.
        """
        self.check(model)
        model.check_visible(data, "data")
        check_generator(generator, model.device)
        if base_data is not None:
            model.check_visible(base_data, "base_data")
        num_data = data.shape[0]
        if self.num_examples is None or self.num_examples >= num_data:
            subset = None
            chosen = data
        else:
            subset = torch.randperm(num_data, generator=generator, device=model.device)[: self.num_examples].sort().values
            chosen = data[subset]
        base_model, base = registry.make_base(model, base=self.base, data=data if base_data is None else base_data,
                                              smoothing=self.base_smoothing, by="RAISE")
        path = registry.build_from_base(model, base_model, kind=self.path, by="RAISE")
        betas, energy_scale = betas_for_path(self.fitted_schedule, self.betas, path, generator=generator)
        heating = {}
        if self.heating_steps == "path":  # Algorithm 3 as written: p_0(h | v) of the base, then the path's p_k(h | v)
            heating = {"heating_steps": betas.numel() - 1, "heating_start": base_model, "heating_schedule": betas}
        elif self.heating_steps:
            heating = {"heating_steps": self.heating_steps}
        log_weights, diagnostics, graph_note = self._reverse_anneal_in_blocks(model, path, chosen, betas, heating, generator=generator,
                                                                              progress=progress)
        summary = summarize_log_weights(log_weights, dim=1)
        per_example = summary.log_mean
        info = {
            "estimator": "RAISE",
            "num_chains": self.num_chains,
            "num_steps": self.num_steps,
            "base": base if self.base == base else f"{base} ({self.base})",
            "heating_steps": self.heating_steps,
            "log_weights": log_weights,
            "per_example_stderr": summary.stderr,
            "ess": summary.ess.mean().item(),  # per example, over its chains, averaged
            **({"diagnostics": diagnostics} if self.diagnostics else {}),
            **({"energy_scale": energy_scale, "betas": betas} if energy_scale is not None else {}),
            **({"cuda_graphs": graph_note} if graph_note is not None else {}),
        }
        noise_variance = (summary.stderr**2).mean().item()  # mean per-example variance of the RAISE estimates
        if subset is None:
            mean = per_example.mean().item()
            stderr = math.sqrt(noise_variance / num_data)
        else:
            control = self._control_variate(model, data, generator=generator)
            difference = per_example - control[subset]
            fraction = subset.numel() / num_data
            variance = ((1 - fraction) * difference.var().item() + fraction * noise_variance) / subset.numel()
            mean = control.mean().item() + difference.mean().item()
            stderr = math.sqrt(max(variance, 0.0))
            info.update(subset=subset, control_variate_mean=control.mean().item())
        return likelihood_estimate(
            per_example, mean=mean, stderr=stderr, num_data=num_data, kind=BoundKind.LIKELIHOOD_LOWER_BOUND, info=info,
            warnings=reliability_warnings(summary.ess.mean().item(), self.num_chains, log_weights=log_weights)
            + schedule_warnings(path, betas, energy_scale),
            independent_examples=True, discrete=discrete_visible(model),
        )

    @torch.no_grad()
    def _reverse_anneal(
        self, model, path, data: torch.Tensor, betas: torch.Tensor, heating: dict, *, generator, progress
    ) -> tuple[torch.Tensor, AnnealingDiagnostics | None, str | None]:
        """float64 log weights ``[B, M]`` of M reverse chains per example along ``betas [K + 1]`` (ascending, run
        from 1 down to 0), examples × chains batched, the diagnostics pooled over the batches (``None`` unless asked for)
        and the first batch's ``graph_note``. ``heating`` holds the latent proposal's clamped-heating settings (empty: the
        mean-field proposal)."""
        descending = torch.flip(betas, dims=[0])
        batches = example_batches(data, self.num_chains, max_rows=_CHAIN_ROWS_PER_BATCH)
        log_weights, parts, notes = [], [], []
        for index, batch in enumerate(batches):
            proposal = model.propose_path_state(batch, num_samples=self.num_chains, generator=generator, **heating)
            state, _ = path.transition(path.init(proposal.state, generator=generator), 1.0, generator=generator)
            batch_progress = None
            if progress is not None:
                batch_progress = offset_progress(progress, index, len(batches))
            result = anneal(path, descending, state, generator=generator, progress=batch_progress,
                            diagnostics=self.diagnostics, group_size=self.num_chains, compile=self.compile, cuda_graphs=self.cuda_graphs)
            notes.append(result.graph_note)
            weights = proposal.log_weight + result.log_weights - path.base_log_partition()
            log_weights.append(weights.view(batch.shape[0], self.num_chains))
            if result.diagnostics is not None:
                parts.append((result.diagnostics, batch.shape[0]))
        return torch.cat(log_weights), _pool_diagnostics(parts, self.num_chains), notes[0]

    def _reverse_anneal_in_blocks(
        self, model, path, data: torch.Tensor, betas: torch.Tensor, heating: dict, *, generator, progress
    ) -> tuple[torch.Tensor, AnnealingDiagnostics | None, str | None]:
        """:meth:`_reverse_anneal` with the examples of ``data [B, V]`` in blocks (dealt across ``torch.distributed``
        ranks under a process group), each block's chains drawing from the block's own generator, so the weights do not
        depend on the launcher; every rank returns all ``[B, M]`` log weights."""

        def run(examples: range, block_generator: torch.Generator, block_progress: ProgressCallback | None) -> tuple:
            weights, diagnostics, note = self._reverse_anneal(
                model, path, data[examples.start:examples.stop], betas, heating, generator=block_generator, progress=block_progress
            )
            return weights.cpu(), diagnostics, len(examples), note

        with allocating("num_chains", self.num_chains):
            payloads = run_blocks(data.shape[0], run, generator=generator, device=model.device, progress=progress)
        log_weights = torch.cat([weights for weights, *_ in payloads]).to(model.device)
        parts = [(diagnostics, count) for _, diagnostics, count, _ in payloads if diagnostics is not None]
        return log_weights, _pool_diagnostics(parts, self.num_chains), payloads[0][3]

    def _control_variate(self, model: EnergyModel, data: torch.Tensor, *, generator) -> torch.Tensor:
        """``c(v)`` ``[B]``: exact ``log f(v)`` when affordable, else its importance-sampling estimate."""
        if Capability.EXACT_FREE_ENERGY in model.capabilities:
            with torch.no_grad():
                return model.unnormalized_log_prob(data).double()
        return importance_log_marginal(model, data, max(2, self.control_variate_samples), generator=generator).log_marginal


def _pool_diagnostics(parts: list[tuple[AnnealingDiagnostics, int]], num_chains: int) -> AnnealingDiagnostics | None:
    """Combine per-batch diagnostics weighted by their examples: pooled increment mean and variance, mean per-example ESS."""
    if not parts:
        return None
    counts = torch.tensor([examples for _, examples in parts], dtype=torch.float64)[:, None]
    rows = counts * num_chains
    means = torch.stack([d.increment_mean for d, _ in parts])
    second = torch.stack([d.increment_var * (n * num_chains - 1) / (n * num_chains) + d.increment_mean.square() for d, n in parts])
    mean = (rows * means).sum(0) / rows.sum()
    total = rows.sum()
    variance = ((rows * second).sum(0) / total - mean.square()) * total / (total - 1)
    ess = (counts * torch.stack([d.ess for d, _ in parts])).sum(0) / counts.sum()
    return AnnealingDiagnostics(parts[0][0].betas, mean, variance, ess)

