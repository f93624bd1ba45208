"""Simple importance sampling of ``Z`` from the family's tractable base (*Deep Learning* §18.7, eqs. 18.41–18.46)."""

from __future__ import annotations

from pfzoo.estimators.ais import AIS
from pfzoo.validation import check_sample_count


class ImportanceSampling(AIS):
    """``Ẑ_1 = Z_0 · (1/N) Σ_n f_1(x_n) / f_0(x_n)``, ``x_n ~ p_0`` exactly (eq. 18.44), with ``p_0`` the family's
    tractable base (data base rates, a Gaussian fitted to the data, ...).

    It is AIS with a single step (no intermediate distributions, no transitions), so it shares AIS's bases, blocks of
    chains (the same numbers plain or on any number of ranks), delta-method stderr ``sd(w) / (√N mean(w))`` (the square
    root of eq. 18.46 relative to Ẑ), ESS and warnings. ``Ẑ`` is unbiased, so ``log Ẑ`` is a stochastic lower bound
    on ``log Z``. Unless the base is close to the model, the weights' variance is enormous (eq. 18.46 grows with
    ``exp KL``): the ESS and Pareto-k̂ warnings say when, and AIS or bridge sampling are the remedies. For a latent
    generative model, :meth:`log_likelihood` is importance sampling of each example's latents from the prior.

    Args:
        num_samples: N exact base draws (≥ 2).
        base, base_smoothing, posterior_samples: as :class:`~pfzoo.estimators.AIS`.
    """

    config_name = "importance"
    remedy = "draw more samples (num_samples), or anneal through intermediate distributions (estimator=ais)"

    def __init__(self, num_samples: int = 10000, base: str = "auto", base_smoothing: float = 1.0, posterior_samples: int = 100) -> None:
        check_sample_count(num_samples, "num_samples")
        super().__init__(num_chains=num_samples, num_steps=1, schedule="linear", base=base, base_smoothing=base_smoothing,
                         posterior_samples=posterior_samples)

    @property
    def num_samples(self) -> int:
        return self.num_chains
