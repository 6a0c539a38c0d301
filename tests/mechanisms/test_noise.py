"""The noise sampler: exact discrete Laplace from unbiased integers, checked against the exact pmf.

Seeded tests use fixed seeds, so they are deterministic; the few tests on the unseeded OS CSPRNG
use tolerances whose failure probability under a correct sampler is below about 1e-9.
"""
import ast
import inspect
import textwrap
import math
import os
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy import stats

from dpsql.mechanisms import discrete_laplace as noise
from dpsql.mechanisms import randomness
from dpsql.mechanisms.base import DISCRETE_LAPLACE, NoiseBuffer
from dpsql.mechanisms.discrete_laplace import discrete_laplace, discrete_laplace_bound, discrete_laplace_cdf_tail, discrete_laplace_pmf, dyadic_scale
from dpsql.mechanisms.randomness import GeneratorRandomSource, RandomSource, SystemRandomSource, as_random_source
from tests.support.sources import SEEDED_ALPHA, ScriptedSource, binomial_pvalue, seeded

LAPLACE = DISCRETE_LAPLACE.code
SYSTEM_ALPHA = 1e-9   # unseeded: a correct sampler fails with probability ~1e-9


def cdf(scale: float, x: np.ndarray) -> np.ndarray:
    """P(X <= x) of the discrete Laplace with scale t = dyadic_scale(scale), from the closed form."""
    t = float(dyadic_scale(scale))
    q = math.exp(-1 / t)
    x = np.asarray(x, dtype=np.float64)
    return np.where(x >= 0, 1 - np.exp(-(x + 1) / t) / (1 + q), np.exp(x / t) / (1 + q))


def pooled(observed: np.ndarray, expected: np.ndarray, minimum: float):
    """Merge neighbouring bins, left to right, until every expected count is >= minimum."""
    obs, exp, acc_o, acc_e = [], [], 0, 0.0
    for o, e in zip(observed, expected):
        acc_o, acc_e = acc_o + o, acc_e + e
        if acc_e >= minimum:
            obs.append(acc_o), exp.append(acc_e)
            acc_o, acc_e = 0, 0.0
    obs[-1] += acc_o
    exp[-1] += acc_e
    return np.array(obs), np.array(exp)


def chi2_pvalue(draws: np.ndarray, scale: float, minimum: float = 5.0) -> float:
    """Chi-squared p-value of draws against the exact distribution: one bin per integer at small
    scales, ~100 equal-width bins at large ones, both tails as bins, pooled to expected >= minimum."""
    n = draws.size
    reach = discrete_laplace_bound(scale, 1 - 10 / n)
    edges = np.unique(np.floor(np.linspace(-reach, reach + 1, 101)).astype(np.int64))
    # Bins: (-inf, e0), [e0, e1), ..., [e_last, inf).
    below_edge = cdf(scale, edges - 1)
    probs = np.diff(np.concatenate([[0.0], below_edge, [1.0]]))
    observed = np.bincount(np.searchsorted(edges, draws, side="right"), minlength=probs.size)
    obs, exp = pooled(observed, probs * n, minimum)
    assert obs.size >= 3, "too few bins for a meaningful test"
    return stats.chisquare(obs, exp * n / exp.sum()).pvalue


# --- discrete_laplace: distribution -------------------------------------------------------------

@pytest.mark.parametrize("scale, seed", [(0.5, 1), (1.0, 2), (10 / 3, 3), (100.0, 4), (1e6, 5),
                                         (0.3, 6)])
def test_discrete_laplace_matches_exact_pmf_seeded(scale, seed):
    """300,000 seeded draws fit the exact distribution: chi-squared p > 0.001."""
    draws = discrete_laplace(seeded(seed), scale, 300_000)
    assert chi2_pvalue(draws, scale) > SEEDED_ALPHA


def test_discrete_laplace_system_source_moments_and_fit():
    """1,000,000 draws from the OS CSPRNG at scale 10.

    Mean: |mean| <= 7 standard errors; with sub-exponential tails Bernstein's inequality bounds
    the failure probability by ~3e-11. Variance: within 5% of 2q/(1-q)^2, where the sample
    variance's relative standard error is sqrt(5/N) ~ 0.22%, so 5% is > 20 standard errors.
    Chi-squared with bins of expected >= 50 (asymptotics accurate far in the tail): p > 1e-9.
    """
    scale, n = 10.0, 1_000_000
    draws = discrete_laplace(SystemRandomSource(), scale, n)
    q = math.exp(-1 / scale)
    variance = 2 * q / (1 - q) ** 2
    assert abs(draws.mean()) <= 7 * math.sqrt(variance / n)
    assert abs(draws.var() / variance - 1) <= 0.05
    assert chi2_pvalue(draws, scale, minimum=50) > SYSTEM_ALPHA


def test_tiny_scale_is_all_zeros():
    """At scale 1e-6 (t = 1074/2**30), P(X != 0) ~ 2 exp(-10**6): every draw is 0."""
    assert not discrete_laplace(seeded(7), 1e-6, 100_000).any()


def test_seeded_draws_are_reproducible_and_system_draws_are_not():
    assert np.array_equal(discrete_laplace(seeded(8), 5.0, 1000), discrete_laplace(seeded(8), 5.0, 1000))
    # Two independent 1000-draw vectors at scale 1e6 coincide with probability < 1e-6000.
    system = SystemRandomSource()
    assert not np.array_equal(discrete_laplace(system, 1e6, 1000), discrete_laplace(system, 1e6, 1000))


# --- discrete_laplace: shape, dtype, arguments --------------------------------------------------

def test_output_dtype_scale_zero_and_size_zero():
    draws = discrete_laplace(seeded(9), 2.5, 10)
    assert draws.dtype == np.int64 and draws.shape == (10,)
    assert discrete_laplace(seeded(9), 0.0, 5).tolist() == [0] * 5
    assert discrete_laplace(seeded(9), 0.0, 5).dtype == np.int64
    empty = discrete_laplace(SystemRandomSource(), 3.0, 0)
    assert empty.dtype == np.int64 and empty.shape == (0,)
    assert discrete_laplace(seeded(9), 1.0, np.int64(3)).shape == (3,)


@pytest.mark.parametrize("scale", [-1.0, math.nan, math.inf, 2.0**50])
def test_invalid_scale_raises(scale):
    with pytest.raises(ValueError):
        discrete_laplace(seeded(10), scale, 3)


@pytest.mark.parametrize("size", [-1, 2.0, True])
def test_invalid_size_raises(size):
    with pytest.raises(ValueError):
        discrete_laplace(seeded(10), 1.0, size)


def test_sampling_path_has_no_floating_point_or_weak_randomness():
    """The Mironov (2012) rule: no true division, float literal, float(), log/exp or numpy/stdlib
    PRNG anywhere between the OS bytes and the noise."""
    sampling = [randomness.SystemRandomSource, randomness.check_bounds, noise.bernoulli_ratio,
                noise.bernoulli_exp, noise.bernoulli_exp_minus_one,
                noise.geometric_exp_minus_one, noise.floor_div, noise.discrete_laplace]
    forbidden_names = {"log", "log1p", "exp", "expm1", "float", "float64", "random", "seed"}
    for obj in sampling:
        tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
        for node in ast.walk(tree):  # type annotations say "float" but compute nothing
            if isinstance(node, ast.FunctionDef):
                node.returns = None
                for arg in node.args.args:
                    arg.annotation = None
        for node in ast.walk(tree):
            assert not isinstance(node, ast.Div), (obj.__name__, ast.unparse(node))
            if isinstance(node, ast.Constant) and not isinstance(node.value, str):
                assert not isinstance(node.value, float), (obj.__name__, node.value)
            name = getattr(node, "id", None) or getattr(node, "attr", None)
            assert name not in forbidden_names, (obj.__name__, name)
    module = inspect.getsource(noise)
    assert "import random" not in module and "np.random.seed" not in module


# --- internal Bernoulli samplers ----------------------------------------------------------------

def test_bernoulli_exp_minus_one_frequency():
    """Bernoulli(exp(-1)) from one word in [0, 20!): 10**6 seeded draws, binomial p > 0.001."""
    n = 1_000_000
    assert binomial_pvalue(noise.bernoulli_exp_minus_one(seeded(11), n).sum(), n, math.exp(-1)) > SEEDED_ALPHA


def test_bernoulli_exp_minus_one_continues_the_series_past_20():
    """W = 0 means K >= 21; the series then continues with Bernoulli(1/21), Bernoulli(1/22), ..."""
    # K = 1 + #{j : W < 20!/j!}: W = 20!/3 gives K = 3 (odd: 1); W = 0 goes on to K = 22 (even: 0).
    source = ScriptedSource([[0, math.factorial(20) // 3], [0], [3]])
    assert noise.bernoulli_exp_minus_one(source, 2).tolist() == [False, True]
    assert source.bounds == [[math.factorial(20)] * 2, [21], [22]]


def test_bernoulli_exp_frequencies():
    """Bernoulli(exp(-g)) for g = 0, 1/3, 2/3, 1 (CKS 2020 Alg. 1): 200,000 seeded draws each."""
    num = np.repeat(np.arange(4), 200_000)
    draws = noise.bernoulli_exp(seeded(12), num, 3)
    for g in range(4):
        hits = draws[num == g].sum()
        assert binomial_pvalue(hits, 200_000, math.exp(-g / 3)) > SEEDED_ALPHA


class RecordingSource:
    """Wraps a RandomSource, recording the largest bound of every request."""

    def __init__(self, inner):
        self.inner, self.bounds = inner, []

    def below(self, n):
        self.bounds.append(int(np.max(n)))
        return self.inner.below(n)


def test_bernoulli_ratio_avoids_int64_overflow():
    """den * k >= 2**63 is split into Bernoulli(num/den) AND Bernoulli(1/k): no bound overflows,
    and the probability is still num / (den * k) (1,000,000 seeded draws, binomial p > 0.001)."""
    den, n = 2**50 - 1, 1_000_000
    k = np.where(np.arange(n) % 2 == 0, 2**14, 2)   # half overflow, half do not
    num = np.full(n, den - 1, dtype=np.int64)
    recorder = RecordingSource(seeded(13))
    draws = noise.bernoulli_ratio(recorder, num, den, k)
    assert all(0 < b <= 2**63 - 1 for b in recorder.bounds)
    for kk in (2**14, 2):
        hits = draws[k == kk].sum()
        assert binomial_pvalue(hits, n // 2, (den - 1) / (den * kk)) > SEEDED_ALPHA


def test_floor_div_is_exact_beyond_int64_and_refuses_to_wrap():
    u, v = np.array([3, 1]), np.array([1, 2**40])
    assert noise.floor_div(u, v, 2**49, 2**30).tolist() == [(3 + 2**49) // 2**30, (1 + 2**89) // 2**30]
    with pytest.raises(OverflowError):
        noise.floor_div(u, v, 2**49, 1)


# --- RandomSource.below -------------------------------------------------------------------------

SOURCES = {"seeded": lambda: seeded(14), "system": SystemRandomSource}


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize("bound", [3, 7, 10])
def test_below_is_unbiased(kind, bound):
    """300,000 draws of below(bound) are uniform: chi-squared p > 0.001 seeded, > 1e-9 system."""
    draws = SOURCES[kind]().below(np.full(300_000, bound, dtype=np.int64))
    assert draws.min() >= 0 and draws.max() < bound
    alpha = SEEDED_ALPHA if kind == "seeded" else SYSTEM_ALPHA
    assert stats.chisquare(np.bincount(draws, minlength=bound)).pvalue > alpha


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize("bound, dtype", [(2**62, np.int64), (2**63 - 1, np.int64),
                                          (2**64 - 1, np.uint64), (2**63 + 1, np.uint64)])
def test_below_huge_bounds_in_range(kind, bound, dtype):
    """Huge bounds stay in range and keep their top half: 100,000 draws, the share in the upper
    half of [0, bound) is within 7 standard errors of 1/2 (failure probability ~1e-11)."""
    draws = SOURCES[kind]().below(np.full(100_000, bound, dtype=dtype))
    assert draws.dtype == dtype and (draws < dtype(bound)).all() and (draws >= 0).all()
    upper = (draws >= dtype(bound // 2)).mean()
    assert abs(upper - 0.5) <= 7 * math.sqrt(0.25 / draws.size)


def test_system_below_rejects_the_partial_block(monkeypatch):
    """2**64 = 3 * (2**64 // 3) + 1, so the word 2**64 - 1 must be rejected (no modulo bias);
    for n = 2**63 + 1 every word >= n is rejected. The OS's bytes are known words here."""
    words = [2**64 - 1, 5, 2**63 + 1, 2**64 - 1, 2**63, 6]

    def urandom(size: int) -> bytes:
        stream = np.zeros(size // 8, dtype=np.uint64)
        stream[:len(words)] = words
        return stream.tobytes()
    monkeypatch.setattr(randomness.os, "urandom", urandom)
    source = SystemRandomSource()
    assert source.below(np.array([3])).tolist() == [2]
    assert source.below(np.array([2**63 + 1], dtype=np.uint64)).tolist() == [2**63]
    assert source.below(np.array([7])).tolist() == [6], "each word read once: the next draw reads the sixth"


@pytest.mark.parametrize("kind", SOURCES)
def test_below_shapes_and_arguments(kind):
    source = SOURCES[kind]()
    assert source.below(np.ones((2, 3), dtype=np.int64)).tolist() == [[0] * 3] * 2
    assert source.below(np.array([], dtype=np.int64)).shape == (0,)
    assert source.below(np.array([5, 6], dtype=np.int32)).dtype == np.int64
    for bad in ([0], [-3, 4]):
        with pytest.raises(ValueError):
            source.below(np.array(bad))
    with pytest.raises(TypeError):
        source.below(np.array([2.0]))


def test_system_source_buffer_is_not_shared_across_fork():
    """A forked child must not replay the parent's buffered bytes (it would draw the same noise)."""
    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    source = SystemRandomSource()
    source.below(np.array([2]))  # fills the buffer
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.write(write_end, source.below(np.full(4, 2**62, dtype=np.int64)).tobytes())
        os._exit(0)
    os.close(write_end)
    child = np.frombuffer(os.read(read_end, 32), dtype=np.int64)
    os.waitpid(pid, 0)
    parent = source.below(np.full(4, 2**62, dtype=np.int64))
    assert child.size == 4 and not np.array_equal(child, parent)


def test_as_random_source():
    assert isinstance(as_random_source(None), SystemRandomSource)
    wrapped = as_random_source(np.random.default_rng(0))
    assert isinstance(wrapped, GeneratorRandomSource) and isinstance(wrapped, RandomSource)
    custom = ScriptedSource([])
    assert as_random_source(custom) is custom
    with pytest.raises(TypeError):
        as_random_source(np.random.RandomState(0))


# --- dyadic_scale -------------------------------------------------------------------------------

@given(st.floats(min_value=1e-6, max_value=1e12))
def test_dyadic_scale_rounds_up_tightly(scale):
    t = dyadic_scale(scale)
    d = t.denominator
    assert t >= Fraction(scale)
    assert d & (d - 1) == 0 and d <= 2**30 and t.numerator < 2**50
    assert Fraction(t.numerator - 1, d) < Fraction(scale)  # smallest at this denominator
    assert t - Fraction(scale) < max(Fraction(1, 2**30), Fraction(scale) / 2**48)
    if scale >= 1e-3:
        assert (t - Fraction(scale)) / Fraction(scale) <= Fraction(1, 2**20)


def test_dyadic_scale_examples():
    assert dyadic_scale(0.5) == Fraction(1, 2)
    assert dyadic_scale(0) == 0 and dyadic_scale(0.0) == Fraction(0)
    assert dyadic_scale(1 / 3) == Fraction(math.ceil(Fraction(1 / 3) * 2**30), 2**30)
    assert dyadic_scale(2.0**49 + 0.5) == 2**49 + 1   # k = 1 would need n = 2**50 + 1
    assert dyadic_scale(2.0**50 - 1) == 2**50 - 1
    assert dyadic_scale(1e-300) == Fraction(1, 2**30)


@pytest.mark.parametrize("scale", [-1e-9, math.nan, math.inf, -math.inf, 2.0**50, 2.0**50 - 0.5, 1e300])
def test_dyadic_scale_rejects(scale):
    with pytest.raises(ValueError):
        dyadic_scale(scale)


# --- pmf, tail and bound ------------------------------------------------------------------------

@pytest.mark.parametrize("scale", [0.5, 1.0, 10 / 3, 100.0])
def test_pmf_and_tail_agree(scale):
    x = np.arange(-40 * math.ceil(scale), 40 * math.ceil(scale) + 1)
    pmf = discrete_laplace_pmf(scale, x)
    assert np.array_equal(pmf, pmf[::-1])
    assert abs(pmf.sum() - 1) < 1e-12
    for k in (0, 1, 5, int(3 * scale)):
        inside = pmf[np.abs(x) <= k].sum()
        assert abs(discrete_laplace_cdf_tail(scale, k) - (1 - inside)) < 1e-12
    assert discrete_laplace_cdf_tail(scale, -1) == 1.0
    assert discrete_laplace_cdf_tail(0.0, 0) == 0.0


@pytest.mark.parametrize("scale", [1e-3, 0.5, 1.0, 10 / 3, 100.0, 12345.678, 1e6, 2.0**40])
@pytest.mark.parametrize("confidence", [1e-6, 0.3, 0.5, 0.9, 0.95, 0.99, 1 - 1e-9])
def test_bound_is_exact(scale, confidence):
    """k = bound holds (P(|X| <= k) >= c) and k - 1 does not."""
    k = discrete_laplace_bound(scale, confidence)
    assert isinstance(k, int) and k >= 0
    assert 1 - discrete_laplace_cdf_tail(scale, k) >= confidence
    if k > 0:
        assert 1 - discrete_laplace_cdf_tail(scale, k - 1) < confidence


def test_bound_examples_and_arguments():
    assert discrete_laplace_bound(0.0, 0.99) == 0
    assert discrete_laplace_bound(1e-6, 0.999) == 0
    # Scale 1: P(|X| <= k) = 1 - 2 e^-(k+1) / (1 + e^-1); k = 2 gives 0.9271, k = 3 gives 0.9732.
    assert discrete_laplace_bound(1.0, 0.95) == 3
    for bad in (0.0, 1.0, -0.5, 1.5, math.nan):
        with pytest.raises(ValueError):
            discrete_laplace_bound(1.0, bad)


def test_the_noise_buffer_hands_each_draw_out_once_in_the_order_drawn():
    # Chunks of one scale come from one batch in order; a new scale gets its own batch; clear() drops
    # what is left, so the next query starts a new batch.
    buffer = NoiseBuffer()
    source = randomness.GeneratorRandomSource(np.random.default_rng(7))
    chunks = [buffer.take(source, LAPLACE, (3, 0, 0), n) for n in (5, 2000, 100)]
    reference = noise.discrete_laplace(randomness.GeneratorRandomSource(np.random.default_rng(7)), 3.0, 2048)
    assert np.array_equal(np.concatenate(chunks[:2]), reference[:2005])
    assert np.array_equal(chunks[2][:43], reference[2005:])   # the first batch runs out, a second one follows
    buffer.clear()
    assert buffer.take(source, LAPLACE, (3, 0, 0), 0).size == 0
    replay = randomness.GeneratorRandomSource(np.random.default_rng(7))
    for size in (NoiseBuffer.MIN_BATCH, 2 * NoiseBuffer.MIN_BATCH):   # the two batches drawn above
        noise.discrete_laplace(replay, 3.0, size)
    fresh = noise.discrete_laplace(replay, 3.0, NoiseBuffer.MIN_BATCH)
    assert np.array_equal(buffer.take(source, LAPLACE, (3, 0, 0), 5), fresh[:5]), "what was left is dropped: a new batch"


def test_buffered_noise_in_vector_sized_chunks_is_discrete_laplace():
    buffer = NoiseBuffer()
    source = randomness.GeneratorRandomSource(np.random.default_rng(11))
    draws = np.concatenate([buffer.take(source, LAPLACE, (2, 0, 0), 2048) for _ in range(50)])
    values, counts = np.unique(np.clip(draws, -12, 12), return_counts=True)
    expected = noise.discrete_laplace_pmf(2.0, np.arange(-12, 13)) * draws.size
    expected[0] += noise.discrete_laplace_cdf_tail(2.0, 12) / 2 * draws.size   # P(X < -12) folded in
    expected[-1] += noise.discrete_laplace_cdf_tail(2.0, 12) / 2 * draws.size
    assert list(values) == list(range(-12, 13))
    chi2 = float(np.sum((counts - expected) ** 2 / expected))
    assert chi2 < 52.6, chi2   # chi-squared, 24 degrees of freedom, p = 0.001
