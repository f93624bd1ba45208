"""Annealed importance sampling (Neal 2001; Salakhutdinov & Murray 2008 for RBMs)."""

from __future__ import annotations

from typing import Sequence

import torch

from pfzoo.estimators.base import BoundKind, LikelihoodEstimate, PartitionEstimate, ProgressCallback, reliability_warnings
from pfzoo.estimators.on_path import PathPartitionEstimator
from pfzoo.estimators.posterior_annealing import posterior_annealing_log_likelihood, posterior_kernel
from pfzoo.estimators.sharding import check_part, part_chains, pool_chain_diagnostics, sharded_anneal
from pfzoo.estimators.trust import schedule_warnings
from pfzoo.kernels import Kernel
from pfzoo.logmath import summarize_log_weights
from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability
from pfzoo.paths.geometric import MARGINALIZE_CHOICES, RBM_PATH_FAMILIES
from pfzoo.paths.schedules import ScheduleSpec, betas_for_path, make_betas, path_fitted_schedule
from pfzoo.validation import allocating, check_bool, check_choice, check_generator, check_sample_count


class AIS(PathPartitionEstimator):
    """AIS estimate of ``log Z`` along the model's annealing path from a tractable base.

    ``Ẑ = Z_0 · mean_i w_i`` is unbiased for Z, so ``log Ẑ`` is a stochastic lower bound on
    ``log Z`` and log-likelihoods computed from it are biased upward. All chains run as one batch, in blocks with
    their own random streams (:mod:`pfzoo.estimators.sharding`: the same numbers plain or on any number of ranks); the
    standard error is the delta-method one of :func:`pfzoo.logmath.summarize_log_weights`.
    Paths, bases and default transitions come from :mod:`pfzoo.paths.registry`: block Gibbs for RBMs,
    DBMs, DBNs and Ising models, HAIS's HMC for energies over real vectors, single-bit-flip Metropolis for
    binary energies without conditionals.

    Args:
        num_chains: N, independent annealing chains (≥ 2).
        num_steps: K, intermediate distributions (ignored when ``schedule`` is an explicit β sequence).
        schedule: "energy" (:class:`~pfzoo.paths.EnergyScaleSchedule`, fitted to the path on each run: linear for
            models whose energies vary by at most a nat under the base, log-spaced from β ≈ 1/σ_0 for strongly coupled
            ones), "linear", "sigmoid", "power:5", ..., a :class:`~pfzoo.paths.Schedule`, or an explicit β sequence.
            A fitted schedule's σ_0 and β's are in the estimate's ``info["energy_scale"]`` and ``info["betas"]``
            (:attr:`betas` holds the unfitted, linear ones, which :meth:`log_likelihood` uses for latent-variable models).
        base: "auto" (the family's best tractable base: data base rates for binary families, a Gaussian
            fitted to the data for continuous ones; the data-free base without data) or one of the family's
            base names ("base_rate", "uniform"; "fitted", "isotropic").
        base_smoothing: pseudo-count for data-fitted binary bases.
        kernel: transition kernel for families whose path takes one (models over real vectors:
            :class:`~pfzoo.kernels.HMCKernel`, :class:`~pfzoo.kernels.RandomWalkMetropolis`);
            ``None`` = the family's default.
        posterior_samples: proposals per example for ``log f(v)`` in :meth:`log_likelihood` when
            the model's free energy is intractable (DBM: mean-field proposal; DBN: recognition model).
        path: the kind of annealing path: "geometric" (every family) or "moment_averaged" (Gaussians, RBMs).
        diagnostics: also return, in ``info["diagnostics"]`` of the log Z estimate, the per-step
            :class:`~pfzoo.estimators.annealing.AnnealingDiagnostics` (increments of log w, ESS
            along the path, symmetric-KL estimates and their cost functional); feed them to
            :meth:`pfzoo.paths.OptimalSchedule.from_diagnostics` for a schedule fitted to the path.
        compile: run each annealing step's increment and transition under ``torch.compile``
            (:func:`pfzoo.estimators.annealing.compiled_step`); off by default. The first run pays the compilation
            (tens of seconds on a CPU) and later runs reuse it. On RBM-family paths with the default Gibbs kernel the
            compiled sweep draws from a counter hash keyed per chain and step (:mod:`pfzoo.hashed_draws`; the keys come
            from ``generator``), so that the whole step fuses into two passes besides its two products (at 784×500
            and 1,000 chains on one CPU thread, about 0.7 of the products' rate against the eager step's 0.5): other
            draws than the eager run's from the same law, an estimate within its standard error of the eager one,
            not equal to it. Elsewhere (HMC, other kernels) the draws are the eager ones, so estimates agree to rounding.
        cuda_graphs: on a CUDA device, replay blocks of the annealing steps from CUDA graphs
            (:mod:`pfzoo.estimators.cuda_graphs`: one launch per block instead of about twenty per step, which set the
            pace at 1,000 chains), for RBM-family paths with the default Gibbs kernel; the numbers are those of the
            run without it, for the same seed. ``info["cuda_graphs"]`` says how many steps were replayed, or why none
            were (on a CPU, other paths, with ``compile``). Off by default.
        part: ``(i, n)``: run only part i (from 0) of n of the chains (the blocks of :func:`pfzoo.distributed.blocks`
            cut into n contiguous parts), each chain with the numbers it gets in the whole run; :func:`pool_parts`
            joins the n parts' estimates into the whole run's, bit for bit. For a run too long for one sitting (K = 10⁵
            with 1,000 chains of an MNIST DBM is hours of one CPU core): run the parts in turn, in separate processes
            or sessions, each with the generator seeded alike. A part's warnings speak of its own chains.
            ``None`` (default): every chain.
        marginalize: which layer of an RBM-family model (RBM, DBM's even/odd RBM, DBN's top RBM) the geometric path
            sums out (:class:`~pfzoo.paths.RBMGeometricPath`): "hidden" (chains over visible states, as Salakhutdinov &
            Murray 2008), "visible" (chains over hidden states, each weight averaged over the visible units) or "auto"
            (the larger layer). For H ≪ V, "auto" costs more per step (V softplus terms rather than H) but removes
            the visible units' Bernoulli noise from the weights, which is large when the base's visible biases differ
            from the model's: 784×20, weights N(0, 0.05²), biases N(0, 1), base rates of unrelated data, 200 chains ×
            2,000 linear steps: RMSE of log Ẑ 0.040 → 0.0036. Where the error comes from the path instead (the
            MNIST 784×20 CD1 RBM from MNIST base rates: RMSE 0.87 and 0.91 at 100 × 1,000; the zoo's MNIST DBM, 300
            chains × 10⁴ steps from base rates: ESS 71 and Pareto k̂ 0.67 summing out its 500 odd units, ESS 32 and
            k̂ 0.76 summing out the 1,784 even ones) it gains nothing, hence the default. Other families and paths take
            only "hidden".

    For a latent-variable generative model (:class:`~pfzoo.models.LinearGenerative`, ...),
    :meth:`log_likelihood` instead anneals each example's latents from the prior to the posterior with
    ``num_chains`` particles per example (HAIS eqs. 27–29): a stochastic lower bound on ``log p(x)``.
    """

    config_name = "ais"
    remedy = "anneal longer (num_steps) or with more chains"
    """How the weight warnings tell the user to get a better estimate."""

    def __init__(
        self,
        num_chains: int = 100,
        num_steps: int | None = 1000,
        schedule: ScheduleSpec = "energy",
        base: str = "auto",
        base_smoothing: float = 1.0,
        kernel: Kernel | None = None,
        posterior_samples: int = 100,
        path: str = "geometric",
        diagnostics: bool = False,
        compile: bool = False,
        marginalize: str = "hidden",
        part: tuple[int, int] | None = None,
        cuda_graphs: bool = False,
    ) -> None:
        super().__init__(base=base, base_smoothing=base_smoothing, kernel=kernel, path=path, posterior_samples=posterior_samples)
        self.marginalize = check_choice(marginalize, "marginalize", MARGINALIZE_CHOICES)
        self.diagnostics = check_bool(diagnostics, "diagnostics")
        self.compile = check_bool(compile, "compile")
        self.cuda_graphs = check_bool(cuda_graphs, "cuda_graphs")
        self.num_chains = check_sample_count(num_chains, "num_chains")
        self.part = check_part(part, self.num_chains)
        self.schedule = schedule
        self.fitted_schedule = path_fitted_schedule(schedule)  # "energy": fitted to the model's path on each run (forward)
        self.register_buffer("betas", make_betas(schedule, num_steps), persistent=False)

    @property
    def num_steps(self) -> int:
        return self.betas.numel() - 1

    def missing(self, model: EnergyModel) -> str | None:
        if Capability.LATENT_GENERATIVE in model.capabilities:
            return None  # per-example annealing over the latents
        return super().missing(model)

    def forward(
        self,
        model: EnergyModel,
        *,
        data: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> PartitionEstimate:
        """Estimate ``log Z`` of ``model``; ``data [N, V]`` feeds data-fitted bases."""
        path, base = self.build_path(model, data, generator, **self._path_options(model))
        betas, energy_scale = betas_for_path(self.fitted_schedule, self.betas, path, generator=generator)
        # chains in blocks, each block's stream fixed by the seed and its index, dealt across ranks under torch.distributed
        with allocating("num_chains", self.num_chains):
            result = sharded_anneal(path, betas, self.num_chains, generator=generator, device=model.device,
                                    progress=progress, diagnostics=self.diagnostics, compile=self.compile,
                                    cuda_graphs=self.cuda_graphs, part=self.part)
        log_weights = result.log_weights + path.base_log_partition()
        summary = summarize_log_weights(log_weights)
        ess = summary.ess.item()
        info = {"estimator": type(self).__name__, "num_chains": log_weights.numel(), "num_steps": self.num_steps,
                "base": base, "path": self.path}
        if self.marginalize != "hidden":
            info["marginalize"] = f"{path.summed_layer} ({self.marginalize})"
        if energy_scale is not None:
            info.update(energy_scale=energy_scale, betas=betas)
        if result.acceptance is not None:
            info.update(acceptance=result.acceptance.tolist(), acceptance_betas=result.segment_betas.tolist())
        if self.diagnostics:
            info["diagnostics"] = result.diagnostics
        if result.graph_note is not None:
            info["cuda_graphs"] = result.graph_note
        path_warnings = schedule_warnings(path, betas, energy_scale) + path.warnings
        if self.part is not None:
            chains = part_chains(self.num_chains, self.part)
            info["part"] = {"index": self.part[0], "count": self.part[1], "chains": [chains.start, chains.stop], "of_chains": self.num_chains,
                            "path_warnings": list(path_warnings)}
        return PartitionEstimate(
            log_z=summary.log_mean.item(),
            stderr=summary.stderr.item(),
            log_weights=log_weights,
            ess=ess,
            kind=BoundKind.UNBIASED_Z,
            info=info,
            warnings=reliability_warnings(ess, log_weights.numel(), result.acceptance, result.segment_betas, log_weights=log_weights,
                                          remedy=self.remedy) + path_warnings,
        )

    def _path_options(self, model: EnergyModel) -> dict:
        """The path builder's options: ``marginalize`` where it is not the default "hidden", for the geometric path of an
        RBM-family model only (refused in one line elsewhere)."""
        if self.marginalize == "hidden":
            return {}
        if self.path != "geometric" or model.path_family not in RBM_PATH_FAMILIES:
            raise ValueError(f"marginalize={self.marginalize!r} needs the geometric path of an RBM, DBM or DBN; "
                             f"{type(model).__name__} on path={self.path!r} sums out no layer (use marginalize='hidden')")
        return {"marginalize": self.marginalize}

    def log_likelihood(
        self,
        model: EnergyModel,
        data: torch.Tensor,
        *,
        base_data: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> LikelihoodEstimate:
        """As :meth:`PartitionEstimator.log_likelihood`; for latent-variable generative models, per-example annealing over the latents."""
        self.check(model)
        if Capability.LATENT_GENERATIVE not in model.capabilities:
            return super().log_likelihood(model, data, base_data=base_data, generator=generator, progress=progress)
        model.check_visible(data, "data")
        check_generator(generator, model.device)
        if self.part is not None:
            raise ValueError(f"part={list(self.part)} splits the chains of a log Z estimate; {type(model).__name__}'s log-likelihood anneals "
                             f"each example's latents instead (no log Z): leave part=None")
        kernel = posterior_kernel(model, self.kernel)
        info = {"estimator": type(self).__name__, "mode": "per-example annealing from the prior to the posterior"}
        with allocating("num_chains", self.num_chains):
            return posterior_annealing_log_likelihood(
                model, data, num_particles=self.num_chains, betas=self.betas, kernel=kernel, generator=generator, progress=progress, info=info,
                remedy=self.remedy,
            )


def pool_parts(parts: Sequence[PartitionEstimate]) -> PartitionEstimate:
    """The estimate of the whole AIS run from the estimates of its n parts (``AIS(..., part=(i, n))`` for every i, the
    same settings, in any order): their chains' log weights joined in chain order and summarised as one run's, so with
    the generator seeded alike for every part the log Ẑ, stderr, ESS and log weights are the one-go run's, bit for bit;
    the weight warnings are the union's (a part's heavy tail may vanish among more chains), acceptance and diagnostics
    are pooled over the chains. Refused in one line: a part missing or given twice, estimates that are not AIS parts, or
    parts of runs with other settings."""
    parts = list(parts)
    if not parts or not all(isinstance(p, PartitionEstimate) and isinstance(p.info.get("part"), dict) for p in parts):
        given = [type(p).__name__ if not isinstance(p, PartitionEstimate) else "an estimate of no part" for p in parts]
        raise ValueError(f"parts must be the PartitionEstimates of AIS(..., part=(i, n)) runs, one per i; got {given or 'none'}")
    parts.sort(key=lambda p: p.info["part"]["index"])
    count, of_chains = parts[0].info["part"]["count"], parts[0].info["part"]["of_chains"]
    indices = [p.info["part"]["index"] for p in parts]
    if indices != list(range(count)) or any(p.info["part"]["count"] != count for p in parts):
        raise ValueError(f"parts must hold each part 0…n−1 of one run exactly once; got parts {indices} of "
                         f"{sorted({p.info['part']['count'] for p in parts})}")
    first = _settings(parts[0])
    for p in parts[1:]:
        if not _same(_settings(p), first) or p.info["part"]["of_chains"] != of_chains:
            raise ValueError(f"part {p.info['part']['index']} was run with other settings than part 0 "
                             f"({_settings(p)} against {first}): pool the parts of one run")
    log_weights = torch.cat([p.log_weights for p in parts])
    summary = summarize_log_weights(log_weights)
    ess = summary.ess.item()
    info = {**parts[0].info, "num_chains": log_weights.numel(), "parts": count}
    del info["part"]
    acceptance = segment_betas = None
    if "acceptance" in info:
        sizes = torch.tensor([p.log_weights.numel() for p in parts], dtype=torch.float64)
        acceptance = (torch.tensor([p.info["acceptance"] for p in parts], dtype=torch.float64) * sizes[:, None]).sum(0) / sizes.sum()
        segment_betas = torch.tensor(info["acceptance_betas"])
        info["acceptance"] = acceptance.tolist()
    if "diagnostics" in info:
        info["diagnostics"] = pool_chain_diagnostics([(p.info["diagnostics"], p.log_weights.numel()) for p in parts])
    return PartitionEstimate(
        log_z=summary.log_mean.item(), stderr=summary.stderr.item(), log_weights=log_weights, ess=ess, kind=BoundKind.UNBIASED_Z,
        info=info, warnings=reliability_warnings(ess, log_weights.numel(), acceptance, segment_betas, log_weights=log_weights,
                                                 remedy=AIS.remedy) + tuple(parts[0].info["part"]["path_warnings"]),
    )


_PART_VARYING = ("part", "num_chains", "acceptance", "diagnostics", "cuda_graphs")
"""Keys of a part's ``info`` that differ between the parts of one run (a part replayed from CUDA graphs has the numbers
it has without them)."""


def _settings(part: PartitionEstimate) -> dict:
    """The part's ``info`` without what differs between parts of one run: the settings the parts must share."""
    return {key: value for key, value in part.info.items() if key not in _PART_VARYING}


def _same(a: dict, b: dict) -> bool:
    """Whether two settings dicts are equal, tensors (a fitted schedule's β's) compared element by element."""
    return a.keys() == b.keys() and all(
        torch.equal(a[key], b[key]) if torch.is_tensor(a[key]) and torch.is_tensor(b[key]) else a[key] == b[key] for key in a)
