"""Conservative sampling-based log-likelihood, CSL (Bengio, Yao & Cho 2013)."""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from pfzoo.estimators.base import (
    BoundKind, LikelihoodEstimate, LikelihoodEstimator, ProgressCallback, discrete_visible, likelihood_estimate,
)
from pfzoo.estimators.sharding import run_blocks
from pfzoo.estimators.trust import stuck_chain_warnings
from pfzoo.logmath import summarize_log_weights
from pfzoo.models.base import EnergyModel
from pfzoo.models.capabilities import Capability
from pfzoo.validation import allocating, check_generator, check_positive_int, check_sample_count

_PROGRESS_UPDATES = 100


class CSL(LikelihoodEstimator):
    """``log p̂(v) = log (1/S) Σ_s p(v | h_s)`` with ``h_s`` the first hidden layer along the model's own Gibbs chains.

    If the ``h_s`` were exact samples of the model's marginal ``p(h)``, the average would be unbiased
    for ``p(v) = Σ_h p(h) p(v | h)``, so its log is a stochastic lower bound (Jensen) — hence
    "conservative" (Bengio, Yao & Cho 2013, §3). With finitely many correlated samples it is very
    pessimistic: a test example is only credited by the few modes the chains visited, which is
    what RAISE Table 1 shows (tens of nats below the truth).

    The ``num_chains`` chains start at examples of ``base_data`` (the training set; drawn with
    replacement), run ``burn_in`` sweeps, then contribute every ``thin``-th sweep until each has
    given ``samples_per_chain`` samples. Chains are the independent replicates for the standard
    error: the per-example estimate is the mean over chains of each chain's average of
    ``p(v | h)``, with the delta-method error over chains.

    Models with :attr:`~pfzoo.models.Capability.HIDDEN_CHAIN` provide ``hidden_chain(initial_visible, *, generator)``
    (an endless iterator of ``[C, H1]`` states) and ``visible_logits(hidden) -> [S, V]``, the logits of
    ``p(v = 1 | h¹)``: RBM, DBM and DBN do.

    Args:
        num_chains: C, independent chains (≥ 2).
        samples_per_chain: samples each chain contributes.
        burn_in: sweeps discarded at the start of each chain.
        thin: sweeps between kept samples.
    """

    config_name = "csl"

    def __init__(self, num_chains: int = 10, samples_per_chain: int = 1000, burn_in: int = 100, thin: int = 1) -> None:
        super().__init__()
        self.num_chains = check_sample_count(num_chains, "num_chains")
        self.samples_per_chain = check_positive_int(samples_per_chain, "samples_per_chain")
        if isinstance(burn_in, bool) or not isinstance(burn_in, int) or burn_in < 0:
            raise ValueError(f"burn_in must be a non-negative integer, got {burn_in!r}")
        self.burn_in = burn_in
        self.thin = check_positive_int(thin, "thin")

    def missing(self, model: EnergyModel) -> str | None:
        return None if Capability.HIDDEN_CHAIN in model.capabilities else Capability.HIDDEN_CHAIN.value

    @torch.no_grad()
    def log_likelihood(
        self,
        model: EnergyModel,
        data: torch.Tensor,
        *,
        base_data: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        progress: ProgressCallback | None = None,
    ) -> LikelihoodEstimate:
        """CSL estimates for ``data [B, V]``; chains start at rows of ``base_data`` (default ``data``)."""
        self.check(model)
        model.check_visible(data, "data")
        check_generator(generator, model.device)
        starts_from = data if base_data is None else model.check_visible(base_data, "base_data")

        def run(chains: range, block_generator: torch.Generator, block_progress: ProgressCallback | None) -> torch.Tensor:
            log_sums, moves = self._log_sums(model, data, starts_from, len(chains), generator=block_generator,
                                             progress=block_progress)
            return torch.cat([log_sums, moves[None].double()]).cpu()

        # chains in blocks, each block's stream fixed by the seed and its index, dealt across ranks under torch.distributed
        # (each block's last row: how often its chains moved)
        with allocating("num_chains", self.num_chains):
            blocks = torch.cat(run_blocks(self.num_chains, run, generator=generator, device=model.device, progress=progress), dim=1)
        log_sums, moves = blocks[:-1].to(model.device), blocks[-1]
        chain_estimates = log_sums - math.log(self.samples_per_chain)  # [B, C]
        per_example = summarize_log_weights(chain_estimates, dim=1).log_mean
        info = {"estimator": "CSL", "num_chains": self.num_chains, "samples_per_chain": self.samples_per_chain,
                "burn_in": self.burn_in, "thin": self.thin}
        return likelihood_estimate(
            per_example, stderr=shared_chain_stderr(chain_estimates, per_example), kind=BoundKind.LIKELIHOOD_LOWER_BOUND, info=info,
            discrete=discrete_visible(model),
            warnings=stuck_chain_warnings(moves, self.samples_per_chain,
                                          "CSL cannot estimate this model's likelihood; use estimator=raise or ais"),
        )

    def _log_sums(
        self, model: EnergyModel, data: torch.Tensor, starts_from: torch.Tensor, num_chains: int, *, generator, progress
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``log Σ_s p(v_b | h_{c,s})`` float64 ``[B, num_chains]`` for ``data [B, V]``, over the kept sweeps of
        ``num_chains`` chains started at random rows of ``starts_from [N, V]``, and per chain the number of kept
        samples whose hidden state differs from the previous one ``[num_chains]``."""
        rows = torch.randint(starts_from.shape[0], (num_chains,), generator=generator, device=model.device)
        chain = model.hidden_chain(starts_from[rows], generator=generator)
        for _ in range(self.burn_in):
            next(chain)
        log_sums = torch.full((data.shape[0], num_chains), -math.inf, dtype=torch.float64, device=model.device)
        data64 = data.double()
        total = self.samples_per_chain * self.thin
        report_every = max(1, total // _PROGRESS_UPDATES)
        moves = torch.zeros(num_chains, dtype=torch.long, device=model.device)
        previous = None
        for sweep in range(1, total + 1):
            hidden = next(chain)
            if sweep % self.thin == 0:
                if previous is not None:
                    moves += (hidden != previous).any(-1)
                previous = hidden
                logits = model.visible_logits(hidden).double()  # [C, V]
                log_prob = torch.addmm(-F.softplus(logits).sum(-1), data64, logits.T)  # log p(v_b | h_c) [B, C]
                log_sums = torch.logaddexp(log_sums, log_prob)
            if progress is not None and (sweep % report_every == 0 or sweep == total):
                progress(sweep, total)
        return log_sums, moves


def shared_chain_stderr(chain_estimates: torch.Tensor, per_example: torch.Tensor) -> float:
    """Standard error of ``mean_n log (1/C) Σ_c w_nc`` when every example is scored by the same C chains.

    The examples' errors are then correlated (a chain that over-visits a mode raises every example near
    it), so the per-example delta-method errors cannot be added in quadrature. Linearising each
    ``log mean_c w_nc`` around its value, the mean over examples is ``(1/C) Σ_c z_c`` with
    ``z_c = mean_n (w_nc / mean_c' w_nc') − 1``, an average of C independent chain terms:
    stderr ``sd(z) / √C``. ``chain_estimates [B, C]`` are ``log w_nc``, ``per_example [B]`` their log-means.
    """
    z = torch.exp(chain_estimates - per_example[:, None]).mean(0)
    return (z.std(unbiased=True) / math.sqrt(z.numel())).item()
