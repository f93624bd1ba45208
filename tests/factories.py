"""Model and data factories shared by the tests: ``from factories import random_rbm`` from any test folder.

setup.cfg's ``[tool:pytest] pythonpath = tests`` puts this folder on ``sys.path``, so the import works from a plain
``pytest`` at the repository root and from any subfolder; ``conftest.py`` holds fixtures only.

Every registered model family has a factory here (tests/test_factories.py checks it), at sizes small enough for an
exact answer where the family has one: binary families enumerable, continuous ones complete or Gaussian.

Each factory draws from its own ``torch.Generator().manual_seed(seed)``, in the order its docstring gives. One
generator's float32 and float64 streams are different numbers (not roundings of each other). The binary families'
factories (``random_rbm``, ``random_dbm``, ``random_dbn``, ``random_ising``) and ``biased_binary_data`` take
``draw_dtype``, the dtype the normal/uniform draws are made in: they are scaled in that dtype and then converted to
``dtype``; ``draw_dtype=None`` draws in ``dtype`` itself. Their default, float32 draws, is what ``random_rbm`` and
``biased_binary_data`` have always done; a test that drew in float64 passes ``draw_dtype=None`` (or
``torch.float64``) to keep its models. The other factories draw in ``dtype``.
"""

import math

import torch
from scipy import stats
from torch import nn

from pfzoo.models import (
    DBM,
    DBN,
    ICA,
    RBM,
    BilinearGenerative,
    EnergyFunction,
    Gaussian,
    GaussianBernoulliRBM,
    Hopfield,
    Ising,
    LinearGenerative,
    MeanCovarianceRBM,
    ProductOfExperts,
)


def all_binary_states(num_units: int, dtype=torch.float64, msb_first: bool = False) -> torch.Tensor:
    """Every state of ``num_units`` binary units, ``[2^n, n]``, unit i = bit i of the row index.

    ``msb_first=True`` reverses the bits: the first column is the most significant, the order of
    ``itertools.product([0, 1], repeat=n)`` (tests that index rows by ``Σ_i x_i 2^(n-1-i)`` need it).
    """
    shifts = torch.arange(num_units - 1, -1, -1) if msb_first else torch.arange(num_units)
    return ((torch.arange(2**num_units)[:, None] >> shifts) & 1).to(dtype)


def _normal(g: torch.Generator, shape, scale, dtype, draw_dtype) -> torch.Tensor:
    """``N(0, scale²)`` of ``shape``: drawn in ``draw_dtype`` (None: ``dtype``), scaled there, converted to ``dtype``."""
    return (torch.randn(*shape, generator=g, dtype=dtype if draw_dtype is None else draw_dtype) * scale).to(dtype)


def random_rbm(num_visible: int, num_hidden: int, scale: float = 1.0, seed: int = 0, dtype=torch.float64, bias_scale: float = 0.5,
               draw_dtype=torch.float32):
    """An RBM with ``N(0, scale²)`` weights and ``N(0, bias_scale²)`` biases, drawn weight, visible bias, hidden bias."""
    g = torch.Generator().manual_seed(seed)
    return RBM.from_tensors(
        _normal(g, (num_visible, num_hidden), scale, dtype, draw_dtype),
        _normal(g, (num_visible,), bias_scale, dtype, draw_dtype),
        _normal(g, (num_hidden,), bias_scale, dtype, draw_dtype),
    )


def random_dbm(layer_sizes, scale: float = 1.0, seed: int = 0, dtype=torch.float64, bias_scale: float = 0.5, draw_dtype=torch.float32):
    """A DBM with ``N(0, scale²)`` weights and ``N(0, bias_scale²)`` biases, drawn every weight (bottom up), then every bias."""
    g = torch.Generator().manual_seed(seed)
    weights = [_normal(g, (a, b), scale, dtype, draw_dtype) for a, b in zip(layer_sizes[:-1], layer_sizes[1:])]
    return DBM.from_tensors(weights, [_normal(g, (n,), bias_scale, dtype, draw_dtype) for n in layer_sizes])


def random_dbn_parameters(layer_sizes, scale: float = 1.0, seed: int = 0, dtype=torch.float64, bias_scale: float = 0.5,
                          draw_dtype=torch.float32):
    """``(weights, visible_biases, hidden_biases)`` of a DBN (``DBN.from_tensors``'s arguments): ``N(0, scale²)`` weights
    and ``N(0, bias_scale²)`` biases, drawn every weight, every visible bias, then every hidden bias (bottom up)."""
    g = torch.Generator().manual_seed(seed)
    weights = [_normal(g, (a, b), scale, dtype, draw_dtype) for a, b in zip(layer_sizes[:-1], layer_sizes[1:])]
    visible_biases = [_normal(g, (a,), bias_scale, dtype, draw_dtype) for a in layer_sizes[:-1]]
    hidden_biases = [_normal(g, (b,), bias_scale, dtype, draw_dtype) for b in layer_sizes[1:]]
    return weights, visible_biases, hidden_biases


def random_dbn(layer_sizes, scale: float = 1.0, seed: int = 0, dtype=torch.float64, bias_scale: float = 0.5, draw_dtype=torch.float32):
    """A DBN from :func:`random_dbn_parameters`."""
    return DBN.from_tensors(*random_dbn_parameters(layer_sizes, scale, seed, dtype, bias_scale, draw_dtype))


def random_ising(num_units: int, scale: float = 1.0, seed: int = 0, dtype=torch.float64, bias_scale: float = 0.5,
                 draw_dtype=torch.float32, cls=None, coupling_mask=None):
    """A dense Ising model (or ``cls``, e.g. Hopfield): couplings ``N(0, scale²)`` on every pair (symmetric, zero diagonal),
    biases ``N(0, bias_scale²)``; drawn a full ``[D, D]`` matrix (its strict upper triangle kept), then the biases.

    ``coupling_mask`` (``[D, D]``, symmetric 0/1) multiplies the couplings, keeping only its pairs.
    """
    g = torch.Generator().manual_seed(seed)
    upper = torch.triu(_normal(g, (num_units, num_units), scale, dtype, draw_dtype), 1)
    coupling = upper + upper.T
    if coupling_mask is not None:
        coupling = coupling * coupling_mask
    return (Ising if cls is None else cls).from_tensors(coupling, _normal(g, (num_units,), bias_scale, dtype, draw_dtype))


def random_hopfield(num_units: int, seed: int = 0, dtype=torch.float64, coupling_mask=None) -> Hopfield:
    """A :class:`Hopfield` network from :func:`random_ising` with couplings ``N(0, 1)``, biases ``N(0, 0.5²)``, drawn in ``dtype``.

    With continuous random parameters no field is exactly zero, so its fixed points are strict.
    """
    return random_ising(num_units, 1.0, seed, dtype, 0.5, draw_dtype=None, cls=Hopfield, coupling_mask=coupling_mask)


def random_gbrbm(num_visible: int, num_hidden: int, scale: float = 1.0, seed: int = 0, dtype=torch.float64,
                 visible_bias_scale: float = 1.0, hidden_bias_scale: float = 0.5, log_sigma_scale: float = 0.3) -> GaussianBernoulliRBM:
    """A Gaussian–Bernoulli RBM, drawn in ``dtype``: weight ``[V, H]`` ``N(0, scale²)``, visible bias ``[V]`` ``N(0, visible_bias_scale²)``,
    hidden bias ``[H]`` ``N(0, hidden_bias_scale²)``, log σ ``[V]`` ``N(0, log_sigma_scale²)``, in that order.

    Its log Z is exact by enumerating the ``2^H`` hidden states.
    """
    g = torch.Generator().manual_seed(seed)
    return GaussianBernoulliRBM.from_tensors(
        torch.randn(num_visible, num_hidden, generator=g, dtype=dtype) * scale,
        torch.randn(num_visible, generator=g, dtype=dtype) * visible_bias_scale,
        torch.randn(num_hidden, generator=g, dtype=dtype) * hidden_bias_scale,
        torch.randn(num_visible, generator=g, dtype=dtype) * log_sigma_scale,
    )


def random_gaussian_parameters(num_visible: int, seed: int = 0, dtype=torch.float64, normalize_factor: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``(precision [M, M], mean [M])`` of a well-conditioned Gaussian with ``Λ = A Aᵀ + ½ I`` (eigenvalues at least ½).

    Drawn in ``dtype``: ``A [M, M]`` ``N(0, 1)`` (divided by ``√M`` when ``normalize_factor``, so Λ's scale does not
    grow with M), then the mean ``N(0, 1)``.
    """
    g = torch.Generator().manual_seed(seed)
    factor = torch.randn(num_visible, num_visible, generator=g, dtype=dtype)
    if normalize_factor:
        factor = factor / math.sqrt(num_visible)
    precision = factor @ factor.T + 0.5 * torch.eye(num_visible, dtype=dtype)
    return precision, torch.randn(num_visible, generator=g, dtype=dtype)


def random_gaussian(num_visible: int, seed: int = 0, dtype=torch.float64, normalize_factor: bool = False) -> Gaussian:
    """A :class:`Gaussian` from :func:`random_gaussian_parameters` (log Z in closed form)."""
    return Gaussian.from_tensors(*random_gaussian_parameters(num_visible, seed, dtype, normalize_factor))


def random_poe(num_visible: int, num_experts: int | None = None, expert: str = "laplace", seed: int = 0, dtype=torch.float64,
               shape_low: float = 0.6, shape_width: float = 2.0) -> ProductOfExperts:
    """A product of experts (``num_experts=None``: complete, L = M, so log Z has a closed form), drawn in ``dtype``:
    filters ``[L, M]`` ``N(0, 1)``, then for ``expert="student_t"`` shapes ``λ [L]`` uniform on
    ``[shape_low, shape_low + shape_width)`` (the default keeps λ > ½, where a complete model's Z is finite).
    """
    num_experts = num_visible if num_experts is None else num_experts
    g = torch.Generator().manual_seed(seed)
    filters = torch.randn(num_experts, num_visible, generator=g, dtype=dtype)
    shape = shape_low + shape_width * torch.rand(num_experts, generator=g, dtype=dtype) if expert == "student_t" else None
    return ProductOfExperts.from_tensors(filters, shape, expert=expert)


def random_ica(num_visible: int, seed: int = 0, dtype=torch.float64) -> ICA:
    """Complete ICA with an unmixing matrix ``W [M, M]`` ``N(0, 1)`` drawn in ``dtype`` (log Z = M log 2 − log|det W|)."""
    g = torch.Generator().manual_seed(seed)
    return ICA.from_tensors(torch.randn(num_visible, num_visible, generator=g, dtype=dtype))


def random_mcrbm_parameters(num_visible: int = 5, num_factors: int = 7, num_covariance_hidden: int = 4, num_mean_hidden: int = 3,
                            seed: int = 0, dtype=torch.float64, covariance_bias_shift: float = 1.0,
                            visible_bias_scale: float = 0.5) -> dict[str, torch.Tensor]:
    """``MeanCovarianceRBM.from_tensors``'s tensors by name, large enough that every term of the energy matters, drawn in
    ``dtype`` in this order: factors C ``[D, F]`` ``N(0, 1)``, pooling P ``[F, K]`` ``U[0, 2)``, covariance bias ``[K]``
    ``N(covariance_bias_shift, 1)``, mean weight W ``[D, J]`` ``N(0, 1)``, mean bias ``[J]`` ``N(0, 1)``, visible bias
    ``[D]`` ``N(0, visible_bias_scale²)``.
    """
    g = torch.Generator().manual_seed(seed)
    return {
        "factors": torch.randn(num_visible, num_factors, generator=g, dtype=dtype),
        "pooling": 2 * torch.rand(num_factors, num_covariance_hidden, generator=g, dtype=dtype),
        "covariance_bias": torch.randn(num_covariance_hidden, generator=g, dtype=dtype) + covariance_bias_shift,
        "mean_weight": torch.randn(num_visible, num_mean_hidden, generator=g, dtype=dtype),
        "mean_bias": torch.randn(num_mean_hidden, generator=g, dtype=dtype),
        "visible_bias": visible_bias_scale * torch.randn(num_visible, generator=g, dtype=dtype),
    }


def random_mcrbm(num_visible: int = 5, num_factors: int = 7, num_covariance_hidden: int = 4, num_mean_hidden: int = 3, seed: int = 0,
                 dtype=torch.float64, covariance_bias_shift: float = 1.0, visible_bias_scale: float = 0.5,
                 normalization_eps: float = 0.5) -> MeanCovarianceRBM:
    """A :class:`MeanCovarianceRBM` from :func:`random_mcrbm_parameters` (no closed-form log Z: HAIS estimates it)."""
    tensors = random_mcrbm_parameters(num_visible, num_factors, num_covariance_hidden, num_mean_hidden, seed, dtype,
                                      covariance_bias_shift, visible_bias_scale)
    return MeanCovarianceRBM.from_tensors(**tensors, normalization_eps=normalization_eps)


def random_linear_generative(num_visible: int = 5, num_latent: int = 3, prior: str = "laplace", seed: int = 0, dtype=torch.float64,
                             scale: float = 1.0, noise_std: float = 0.3) -> LinearGenerative:
    """A linear generative model with basis Φ ``[M, L]`` ``N(0, scale²)`` drawn in ``dtype`` and noise σ_n = ``noise_std``.

    With ``prior="gaussian"`` its marginal ``N(0, ΦΦᵀ + σ_n² I)`` is exact.
    """
    g = torch.Generator().manual_seed(seed)
    return LinearGenerative.from_tensors(scale * torch.randn(num_visible, num_latent, generator=g, dtype=dtype), prior=prior, noise_std=noise_std)


def random_bilinear_parameters(num_visible: int = 5, num_components: int = 4, num_content: int = 3, num_style: int = 2, seed: int = 0,
                               dtype=torch.float64, style_scale: float = 0.5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(basis [M, K], content_weight [K, Lc], style_weight [K, Ld])`` (``BilinearGenerative.from_tensors``'s arguments),
    drawn in ``dtype`` in that order: Φ and Θ ``N(0, 1)``, Ψ ``N(0, style_scale²)``."""
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(num_visible, num_components, generator=g, dtype=dtype),
        torch.randn(num_components, num_content, generator=g, dtype=dtype),
        style_scale * torch.randn(num_components, num_style, generator=g, dtype=dtype),
    )


def random_bilinear_generative(num_visible: int = 5, num_components: int = 4, num_content: int = 3, num_style: int = 2, seed: int = 0,
                               dtype=torch.float64, noise_std: float = 0.3) -> BilinearGenerative:
    """A :class:`BilinearGenerative` from :func:`random_bilinear_parameters` with noise σ_n = ``noise_std``."""
    return BilinearGenerative.from_tensors(*random_bilinear_parameters(num_visible, num_components, num_content, num_style, seed, dtype),
                                           noise_std=noise_std)


class QuadraticEnergy(nn.Module):
    """A user's energy network ``E(x) = ½ (x − μ)ᵀ Λ (x − μ)``, ``x [B, M]`` → ``[B]``, with ``Λ [M, M]`` and ``μ [M]`` as parameters.

    Over ℝ^M it is the :class:`Gaussian` with that precision and mean (log Z in closed form); over ``{0, 1}^M`` it is
    a small enumerable binary energy.
    """

    def __init__(self, precision: torch.Tensor, mean: torch.Tensor) -> None:
        super().__init__()
        self.precision = nn.Parameter(precision.clone())
        self.mean = nn.Parameter(mean.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        centered = x - self.mean
        return 0.5 * ((centered @ self.precision) * centered).sum(-1)


def random_energy_function(num_visible: int, seed: int = 0, dtype=torch.float64, binary: bool = False) -> EnergyFunction:
    """A user's energy, :class:`QuadraticEnergy` with :func:`random_gaussian_parameters` (``normalize_factor=True``),
    wrapped as an :class:`EnergyFunction` over ℝ^M (the Gaussian of the same seed: exact log Z) or, with ``binary``,
    over ``{0, 1}^M`` (enumerable at small M)."""
    net = QuadraticEnergy(*random_gaussian_parameters(num_visible, seed, dtype, normalize_factor=True))
    return EnergyFunction(net, num_visible, binary=binary)


def biased_binary_data(num_visible: int, seed: int = 0, num_examples: int = 500, dtype=torch.float64, draw_dtype=torch.float32) -> torch.Tensor:
    """Binary rows with per-unit rates drawn uniformly, so base-rate bases differ from uniform ones (rates drawn first)."""
    g = torch.Generator().manual_seed(seed)
    draw_dtype = dtype if draw_dtype is None else draw_dtype
    pixel_means = torch.rand(num_visible, generator=g, dtype=draw_dtype)
    return (torch.rand(num_examples, num_visible, generator=g, dtype=draw_dtype) < pixel_means).to(dtype)


def enumerated_samples(model, num_samples: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(samples [num_samples, V], states [2^V, V], log_p [2^V])``: exact draws of a small binary model, made by
    enumerating its states (:func:`all_binary_states`, exact ``log p`` from ``model.log_prob``) and drawing rows in
    proportion to ``p`` with ``torch.multinomial`` from ``torch.Generator().manual_seed(seed)``."""
    states = all_binary_states(model.num_visible)
    with torch.no_grad():
        log_p = model.log_prob(states)
    rows = torch.multinomial(log_p.exp(), num_samples, replacement=True, generator=torch.Generator().manual_seed(seed))
    return states[rows], states, log_p


def correlated_gaussian_data(num_samples: int, width: int, seed: int) -> torch.Tensor:
    """``[num_samples, width]`` Gaussian rows with a random mean and a well-conditioned random covariance (mixing
    ``I + N(0, 1/width)``), in the default dtype."""
    generator = torch.Generator().manual_seed(seed)
    mixing = torch.randn(width, width, generator=generator) / math.sqrt(width) + torch.eye(width)
    return torch.randn(num_samples, width, generator=generator) @ mixing + torch.randn(width, generator=generator)


def minimise_by_lbfgs(parameters, loss, *, max_iter: int = 500, tolerance_grad: float = 1e-13, tolerance_change: float = 1e-16,
                      history_size: int = 50) -> None:
    """Run full-batch L-BFGS (strong Wolfe line search) on ``loss()`` over ``parameters``; a stochastic loss must
    reseed its own generator at every call so that it is a fixed function."""
    optimizer = torch.optim.LBFGS(parameters, lr=1, max_iter=max_iter, tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                                  history_size=history_size, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        value = loss()
        value.backward()
        return value

    optimizer.step(closure)


def chi_square_p_value(samples: torch.Tensor, probabilities: torch.Tensor) -> float:
    """χ² goodness of fit of binary ``samples [S, D]`` (state index: first unit most significant) to ``probabilities
    [2^D]``, the cells expected fewer than 5 times pooled into one."""
    weights = 2 ** torch.arange(samples.shape[1] - 1, -1, -1)
    counts = torch.bincount((samples.long() * weights).sum(1), minlength=probabilities.numel()).double()
    expected = probabilities * samples.shape[0]
    keep = expected > 5
    if keep.all():  # nothing to pool (an empty pooled cell would divide 0 by 0)
        return stats.chisquare(counts.numpy(), expected.numpy()).pvalue
    observed = torch.cat([counts[keep], counts[~keep].sum()[None]])
    expected = torch.cat([expected[keep], expected[~keep].sum()[None]])
    return stats.chisquare(observed.numpy(), expected.numpy()).pvalue
