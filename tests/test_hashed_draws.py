"""The counter-hash draws of compiled Gibbs sweeps (pfzoo.hashed_draws): the hash is a bijection of 32-bit words (its
int32 lanes give exact int64 arithmetic's bits, eager and compiled), its 24-bit integers are uniform and show no
dependence between neighbouring columns, rows or keys (even keys that count up, the worst case for a keyed hash), its
Bernoulli draws have the law of the eager draws, a sweep of hashed draws leaves an RBM path's distribution invariant
(χ² against enumeration), and ChainStreams' blocks draw their keys as alone.

Every p-value threshold is 1e-6 and every z-score bound 5.3 (two-sided 1e-7): each check is deterministic for its seed,
and a correct generator fails one with probability about 1e-6 per seed."""

import torch
from compile_support import compile_works, needs_compile  # noqa: F401 (compile_works: the skip condition reads it)
from factories import all_binary_states, chi_square_p_value, random_rbm
from scipy import stats

from pfzoo.estimators import AIS
from pfzoo.hashed_draws import KEY_BITS, draw_keys, hashed_bernoulli, hashed_integers, mix
from pfzoo.sampling import UNIFORM_BITS, ChainStreams

P_MIN = 1e-6
Z_MAX = 5.3


def test_mix_is_a_bijection_of_32_bit_words():
    """2²² words spread over the 32-bit range (and its ends) map to as many distinct words, all within 32 bits."""
    words = torch.cat([torch.arange(1 << 21, dtype=torch.int64), (1 << 32) - 1 - torch.arange(1 << 20, dtype=torch.int64),
                       torch.arange(1 << 20, dtype=torch.int64) * 4093])
    mixed = mix(words)
    assert mixed.min() >= 0 and mixed.max() < (1 << KEY_BITS)
    assert mixed.unique().numel() == words.unique().numel()


def _exact_mix(words: torch.Tensor) -> torch.Tensor:
    """The hash's mix by exact int64 arithmetic on words in ``[0, 2³²)`` (a 32-bit word times a multiplier below 2³¹ stays
    below 2⁶³): the reference for the int32 lanes of pfzoo.hashed_draws."""
    mask = (1 << KEY_BITS) - 1
    x = words ^ (words >> 16)
    x = (x * 0x21F0AAAD) & mask
    x = x ^ (x >> 15)
    x = (x * 0x735A2D97) & mask
    return x ^ (x >> 15)


def _exact_integers(keys: torch.Tensor, width: int) -> torch.Tensor:
    """The hash's 24-bit integers ``[N, width]`` by :func:`_exact_mix`."""
    columns = (torch.arange(width, dtype=torch.int64) * 0x9E3779B9) & ((1 << KEY_BITS) - 1)
    return _exact_mix(keys[:, None] ^ columns) >> (KEY_BITS - UNIFORM_BITS)


def _keys_and_probs() -> tuple[torch.Tensor, torch.Tensor]:
    """Keys at both ends of the word range and random ones ``[205]``, with probabilities ``[205, 37]``."""
    keys = torch.cat([torch.tensor([0, 1, (1 << 31) - 1, 1 << 31, (1 << 32) - 1]),
                      draw_keys(200, 1, generator=torch.Generator().manual_seed(3))[0]])
    return keys, torch.rand(keys.shape[0], 37, generator=torch.Generator().manual_seed(4))


def test_int32_lanes_equal_the_exact_int64_hash():
    """The int32 words' wrapping products and masked shifts give the exact hash's words and integers bit for bit, at
    widths that leave scalar tails after the vector lanes."""
    keys, _ = _keys_and_probs()
    assert torch.equal(mix(keys), _exact_mix(keys))
    for width in (1, 7, 37, 784):
        assert torch.equal(hashed_integers(keys, width).long(), _exact_integers(keys, width))


@needs_compile
def test_compiled_int32_lanes_equal_the_exact_int64_hash():
    """Under torch.compile, where the multiplies are generated code rather than ATen's, the same integers and draws."""
    keys, probs = _keys_and_probs()
    exact = _exact_integers(keys, probs.shape[-1])
    compiled = torch.compile(lambda p, k: (hashed_integers(k, p.shape[-1]), hashed_bernoulli(p, k)), dynamic=True)
    integers, draws = compiled(probs, keys)
    assert torch.equal(integers.long(), exact)
    assert torch.equal(draws, (exact < probs * float(1 << UNIFORM_BITS)).to(probs.dtype))
    torch._dynamo.reset()


def _uniformity_p_value(integers: torch.Tensor, bits: int, shift: int) -> float:
    """χ² p-value of the ``bits``-bit field at ``shift`` of 24-bit integers against the uniform law."""
    cells = (integers >> shift) & ((1 << bits) - 1)
    return stats.chisquare(torch.bincount(cells.flatten(), minlength=1 << bits).numpy()).pvalue


def test_hashed_integers_are_uniform_in_their_high_middle_and_low_bits():
    """1,000 rows × 784 columns from random keys, and from keys 0 … 999 (counting up): each 8-bit field of the 24-bit
    integers passes χ² against uniform on 256 cells."""
    random_keys = draw_keys(1000, 1, generator=torch.Generator().manual_seed(0))[0]
    for keys in (random_keys, torch.arange(1000, dtype=torch.int64)):
        integers = hashed_integers(keys, 784)
        assert integers.min() >= 0 and integers.max() < (1 << UNIFORM_BITS)
        for shift in (16, 8, 0):
            assert _uniformity_p_value(integers, 8, shift) > P_MIN, shift


def _correlation_z(x: torch.Tensor, y: torch.Tensor) -> float:
    """Pearson's correlation of two equal-length samples times √n: standard normal for independent pairs."""
    x, y = x.double().flatten(), y.double().flatten()
    r = torch.corrcoef(torch.stack([x, y]))[0, 1]
    return (r * x.numel() ** 0.5).item()


def test_neighbouring_columns_rows_and_keys_are_uncorrelated():
    """Keys counting up (0 … 1,999) and 500 columns: the integers of neighbouring columns, of neighbouring rows (keys
    k and k + 1), and of keys differing in their top bit are uncorrelated (|z| ≤ 5.3), as are the draws' bits."""
    keys = torch.arange(2000, dtype=torch.int64)
    integers = hashed_integers(keys, 500)
    assert abs(_correlation_z(integers[:, 1:], integers[:, :-1])) < Z_MAX
    assert abs(_correlation_z(integers[1:], integers[:-1])) < Z_MAX
    flipped = hashed_integers(keys ^ (1 << (KEY_BITS - 1)), 500)
    assert abs(_correlation_z(integers, flipped)) < Z_MAX
    bits = integers & 1
    assert abs(_correlation_z(bits[:, 1:], bits[:, :-1])) < Z_MAX


def test_hashed_bernoulli_has_the_law_of_the_eager_draws():
    """Probabilities from 0 to 1 (a row per probability, 20,000 columns, 100 keys each): each frequency within 5.3
    binomial standard errors of ⌈p 2²⁴⌉ 2⁻²⁴; p = 0 never draws and p = 1 always does."""
    probs = torch.tensor([0.0, 1e-3, 0.1, 0.37, 0.5, 0.9, 0.999, 1.0])
    keys = draw_keys(100 * probs.numel(), 1, generator=torch.Generator().manual_seed(1))[0]
    draws = hashed_bernoulli(probs.repeat_interleave(100)[:, None].expand(-1, 20_000), keys).view(probs.numel(), -1)
    frequencies = draws.double().mean(1)
    law = torch.ceil(probs.double() * (1 << UNIFORM_BITS)) / (1 << UNIFORM_BITS)
    standard_errors = (law * (1 - law) / draws.shape[1]).sqrt()
    assert frequencies[0] == 0 and frequencies[-1] == 1
    assert ((frequencies - law).abs()[1:-1] <= Z_MAX * standard_errors[1:-1]).all(), (frequencies, law)
    assert draws.dtype == probs.dtype
    assert hashed_bernoulli(probs.double()[:, None], keys[:8], dtype=torch.float16).dtype == torch.float16


def test_hashed_sweeps_leave_each_rbm_path_distribution_invariant():
    """A 6×4 float64 RBM's geometric path from its base rates, 40,000 chains started at ones, 30 hashed sweeps at β:
    the visible states pass χ² against the enumerated ``p_β(v)``; a wrong β (the sweep at β, the law at β + 0.3)
    fails it, so the test can fail."""
    model = random_rbm(6, 4, scale=1.5, seed=3)
    path, _ = AIS(num_chains=8, num_steps=4).build_path(model, None, torch.Generator().manual_seed(0))
    states = all_binary_states(6, dtype=torch.float64, msb_first=True)
    generator = torch.Generator().manual_seed(2)
    for beta in (0.3, 1.0):
        state = path.init(torch.ones(40_000, 6, dtype=torch.float64))
        for _ in range(30):
            state, info = path.transition(state, beta, noise=path.draw_noise(state, generator=generator))
            assert info.accept_prob is None
        assert state.position.dtype == torch.float64

        def law(at: float) -> torch.Tensor:
            return torch.softmax(path.log_f(states, path.target.statistics(states), at), 0)

        assert chi_square_p_value(state.position, law(beta)) > P_MIN, beta
        assert chi_square_p_value(state.position, law(beta - 0.3 if beta > 0.5 else beta + 0.3)) < P_MIN, beta


def test_blocks_of_chain_streams_draw_the_keys_they_draw_alone():
    blocks = [torch.Generator().manual_seed(seed) for seed in (5, 6, 7)]
    together = draw_keys(60, 2, generator=ChainStreams(blocks, [10, 20, 30]))
    alone = [draw_keys(size, 2, generator=ChainStreams([torch.Generator().manual_seed(seed)], [size]))
             for seed, size in zip((5, 6, 7), (10, 20, 30))]
    assert together.shape == (2, 60) and together.dtype == torch.int64
    assert torch.equal(together, torch.cat(alone, 1))
    assert together.min() >= 0 and together.max() < (1 << KEY_BITS)


def test_ais_with_hashed_sweeps_is_unbiased_for_z():
    """AIS with hashed sweeps (the compiled step's draws, run eagerly here) on an 8×6 float64 RBM from its base rates,
    20,000 chains × 30 linear steps: the mean of Ẑ/Z over the chains is 1 within 4 of its standard errors (TFP's
    calibration check; a biased sweep, such as one at the wrong β, moves it by far more at this K)."""
    model = random_rbm(8, 6, scale=1.0, seed=4)
    path, _ = AIS(num_chains=8, num_steps=4).build_path(model, None, torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(5)
    betas = torch.linspace(0, 1, 31, dtype=torch.float64).tolist()
    state = path.sample_base(20_000, generator=generator)
    log_weights = torch.zeros(20_000, dtype=torch.float64)
    for beta_from, beta_to in zip(betas[:-1], betas[1:]):
        log_weights += path.log_weight_increment(state.stats, beta_from, beta_to)
        state, _ = path.transition(state, beta_to, noise=path.draw_noise(state, generator=generator))
    ratios = torch.exp(log_weights + path.base_log_partition() - model.log_partition().double())
    assert abs(ratios.mean().item() - 1) <= 4 * (ratios.std() / ratios.numel() ** 0.5).item(), (ratios.mean(), ratios.std())
