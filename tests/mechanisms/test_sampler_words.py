"""How the exact sampler spends the OS's bytes (issue 22, speed): several of Algorithm 1's steps decided
by one uniform word against exact integer thresholds, 32-bit words for small bounds, the geometric's
Bernoulli(1/e) from 11! instead of 20!. Each threshold is pinned to the unit: a word one below it
passes the step, the word equal to it does not, so a threshold off by one fails here (a bias of
1/size, far too small for the seeded frequency tests to see)."""
import ast
import inspect
import math
import textwrap
from fractions import Fraction

import numpy as np
import pytest

from dpsql.mechanisms import discrete_laplace as noise
from dpsql.mechanisms import randomness
from dpsql.mechanisms.discrete_gaussian import discrete_gaussian
from dpsql.mechanisms.randomness import SystemRandomSource
from tests.support.sources import SEEDED_ALPHA, ScriptedSource, binomial_pvalue, seeded
from tests.support.stats import gaussian_chi_squared_p


def thresholds(num: int, den: int, m: int) -> tuple[int, list[int]]:
    """The word's range M = den**m m! and M P(K > j) = M (num/den)**j / j!, j = 1..m, in rationals."""
    size = den**m * math.factorial(m)
    exact = [Fraction(size) * Fraction(num, den) ** j / math.factorial(j) for j in range(1, m + 1)]
    assert all(t.denominator == 1 for t in exact)
    return size, [int(t) for t in exact]


@pytest.mark.parametrize("num, den", [(1, 3), (2, 3), (3, 3), (2166, 2167), (1, 2167), (5, 2**20 + 7)])
def test_each_step_passes_exactly_below_its_threshold(num, den):
    """first_steps gives K = j + 1 for the word T_{j+1} <= W < T_j (T_0 = M): checked at both ends of
    every step's interval, so each threshold is right to the unit."""
    m = noise.word_steps(den)
    size, cut = thresholds(num, den, m)
    edges = [size] + cut + [0]
    words, expected = [], []
    for j in range(m + 1):          # K = j + 1 exactly on [edges[j + 1], edges[j])
        if edges[j + 1] < edges[j]:
            words += [edges[j] - 1, edges[j + 1]]
            expected += [j + 1, j + 1]
    source = ScriptedSource([words])
    got = noise.first_steps(source, np.full(len(words), num, dtype=np.int64), den, m)
    assert got.tolist() == expected
    assert source.bounds == [[size] * len(words)]


def test_word_steps_fit_the_words():
    """One word decides as many steps as fit 2**26 (32 bits from the OS), else 2**62, else none."""
    for den in (1, 3, 2167, 9_388_178, 2**26, 2**26 + 1, 2**40, 2**61, 2**62):
        m = noise.word_steps(den)
        size = den**m * math.factorial(m)
        bigger = size * den * (m + 1)
        if size <= 2**26:
            assert bigger > 2**26 or m == 0
        else:
            assert m >= 1 and size < 2**62 and bigger >= 2**62
    assert noise.word_steps(2**62) == 0


def test_bernoulli_exp_goes_on_one_step_at_a_time_past_the_word():
    """W = 0 passes all m steps of the word; step m + 1 is then Bernoulli(gamma / (m + 1)) from a fresh
    draw in [0, den (m + 1)): at gamma = 1 the draw 2 is a success (K > m + 1), then den a failure."""
    den = 2167
    m = noise.word_steps(den)
    source = ScriptedSource([[0], [2], [den]])
    assert noise.bernoulli_exp(source, np.array([den]), den).tolist() == [(m + 2) % 2 == 1]
    assert source.bounds == [[den**m * math.factorial(m)], [den * (m + 1)], [den * (m + 2)]]


@pytest.mark.parametrize("den, seed", [(2167, 21), (9_388_178, 22), (2**40 + 1, 23)])
def test_bernoulli_exp_frequencies_where_the_word_decides_one_or_two_steps(den, seed):
    """Bernoulli(exp(-g)) at g = 1/den, 1/2, 1 - 1/den and 1 for the Gaussian's two denominators and a
    64-bit one: 200,000 seeded draws each, binomial p > 0.001."""
    nums = [1, den // 2, den - 1, den]
    num = np.repeat(np.array(nums, dtype=np.int64), 200_000)
    draws = noise.bernoulli_exp(seeded(seed), num, den)
    for value in nums:
        hits = draws[num == value].sum()
        assert binomial_pvalue(hits, 200_000, math.exp(-value / den)) > SEEDED_ALPHA


def test_bernoulli_exp_minus_one_from_32_bit_words():
    """11! fits 32 bits: W = 11!/3 gives K = 3 (odd: 1); W = 0 goes on to Bernoulli(1/12), failed: K = 12;
    and 10**6 seeded draws have frequency exp(-1) (binomial p > 0.001)."""
    source = ScriptedSource([[0, math.factorial(11) // 3], [3]])
    assert noise.bernoulli_exp_minus_one(source, 2, 11).tolist() == [False, True]
    assert source.bounds == [[math.factorial(11)] * 2, [12]]
    n = 1_000_000
    hits = noise.bernoulli_exp_minus_one(seeded(24), n, 11).sum()
    assert binomial_pvalue(hits, n, math.exp(-1)) > SEEDED_ALPHA


def test_system_below_draws_small_bounds_from_32_bit_halves(monkeypatch):
    """Bounds up to 2**26 read uint64 words as two 32-bit halves (low half first), rejecting the
    partial block at the top of 2**32 (2**32 = 3 * 1431655765 + 1: the half 2**32 - 1 is rejected);
    one bound above 2**26 makes the whole request 64-bit. The OS's bytes are known words here."""
    words = np.array([(5 << 32) | (2**32 - 1), (9 << 32) | 7, 2**40 + 3, 11], dtype=np.uint64)
    monkeypatch.setattr(randomness.os, "urandom", lambda size: np.resize(words, size // 8).tobytes())
    source = SystemRandomSource()
    assert source.below(np.array([3, 3])).tolist() == [1, 2], "2**32 - 1 rejected, redrawn as 7"
    wide = 2**26 + 1
    assert source.below(np.array([wide, 3])).tolist() == [(2**40 + 3) % wide, 11 % 3]


def test_the_new_steps_are_integer_only():
    """The Mironov (2012) rule for the steps added here (test_noise checks the older ones): no true
    division, no float literal, no float(), log or exp between the OS bytes and the noise."""
    steps = (noise.word_steps, noise.first_steps, noise.laplace_round,
             randomness.SystemRandomSource._uniform, randomness.SystemRandomSource.below)
    for step in steps:
        body = ast.parse(textwrap.dedent(inspect.getsource(step))).body[0]
        body.returns, body.args = None, ast.arguments([], [], None, [], [], None, [])   # annotations say float, compute nothing
        nodes = list(ast.walk(body))
        assert not [n for n in nodes if isinstance(n, ast.Div)], step.__name__
        assert not [n.value for n in nodes if isinstance(n, ast.Constant) and type(n.value) is float], step.__name__
        names = {getattr(n, "id", None) or getattr(n, "attr", None) for n in nodes}
        assert not names & {"log", "log1p", "exp", "expm1", "float", "float64", "random", "seed"}, step.__name__


@pytest.mark.parametrize("sigma, seed", [(Fraction(3001, 8), 26), (Fraction(6001), 27)])
def test_the_sampler_is_exact_at_larger_sigmas(sigma, seed):
    """Beyond test_gaussian's sigmas (up to 26.7), with other word sizes: at 3001/8 the proposal's word
    decides two of Algorithm 1's steps and the acceptance's one, all in 32 bits; at 6001 the
    proposal's one, and the acceptance's denominator 2 a**2 = 72,024,002 is above 2**26, so two steps
    from a 64-bit word. 200,000 seeded draws, chi-squared p > 0.001."""
    assert [noise.word_steps(d) for d in (3001, 2 * 3001**2, 6001, 2 * 6001**2)] == [2, 1, 1, 2]
    draws = discrete_gaussian(seeded(seed), sigma, 200_000)
    assert gaussian_chi_squared_p(draws, float(sigma)) > SEEDED_ALPHA
