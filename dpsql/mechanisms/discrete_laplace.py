"""Exact integer noise: discrete Laplace sampled with integer arithmetic from the OS CSPRNG.

Textbook Laplace noise, ``-b * ln(uniform double)``, leaks the true value through the gaps in the
floating point output (Mironov 2012, "On Significance of the Least Significant Bits for
Differential Privacy"). Here every draw is an integer from the discrete Laplace distribution,
sampled exactly by rejection from unbiased uniform integers: no floating point touches the
sampling path. Floats appear only in the pmf, tail and bound helpers used for error bars.

>>> source = GeneratorRandomSource(np.random.default_rng(0))
>>> draws = discrete_laplace(source, 2.0, 5)
>>> draws.dtype, draws.shape
(dtype('int64'), (5,))
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpsql.mechanisms.randomness import GeneratorRandomSource, RandomSource  # noqa: F401 (the doctest)

__all__ = [
    "dyadic_scale", "discrete_laplace", "discrete_laplace_cdf_tail", "discrete_laplace_bound",
    "discrete_laplace_pmf",
]

_INT64_MAX = 2**63 - 1
_MAX_NUMERATOR = 2**50   # dyadic numerators stay below this, so n * K fits int64 for K < 2**13
_MAX_LOG2_DENOMINATOR = 30
_FACT20 = math.factorial(20)  # largest factorial below 2**63
_NARROW = 2**26               # bounds up to this cost the OS source 32 bits (randomness._NARROW)
_NARROW_STEPS = 11            # 11! <= 2**26: the geometric's Bernoulli(1/e) from 32-bit words


def _fact_thresholds(m: int) -> np.ndarray:
    """m!/j! for j = m, m-1, ..., 1 (ascending): P(uniform [0, m!) < m!/j!) = 1/j! exactly."""
    return np.array([math.factorial(m) // math.factorial(j) for j in range(m, 0, -1)], dtype=np.int64)


_FACT_THRESHOLDS = {20: _fact_thresholds(20), _NARROW_STEPS: _fact_thresholds(_NARROW_STEPS)}


def dyadic_scale(scale: float) -> Fraction:
    """The scale actually used: the smallest n / 2**k >= scale, k <= 30 as large as n < 2**50 allows.

    Rounding the scale up only adds privacy, and a dyadic rational keeps the sampler in integers.

    Args:
        scale: the requested Laplace scale b (sensitivity / epsilon); finite and >= 0.

    Raises:
        ValueError: if scale is negative, not finite, or too large (no n < 2**50 reaches it).

    Example:
        >>> dyadic_scale(0.5), dyadic_scale(0.0), dyadic_scale(1e-10)
        (Fraction(1, 2), Fraction(0, 1), Fraction(1, 1073741824))
    """
    if isinstance(scale, bool) or not isinstance(scale, (int, float, Fraction, np.integer, np.floating)):
        raise TypeError(f"scale must be a real number, got {type(scale).__name__}")
    if not math.isfinite(scale) or scale < 0:
        raise ValueError(f"scale must be finite and >= 0, got {scale!r}")
    exact = Fraction(scale if isinstance(scale, (int, Fraction)) else float(scale))
    if exact == 0:
        return Fraction(0)
    for k in range(_MAX_LOG2_DENOMINATOR, -1, -1):
        numerator = math.ceil(exact * 2**k)
        if numerator < _MAX_NUMERATOR:
            return Fraction(numerator, 2**k)
    raise ValueError(f"scale {scale!r} is too large: the sampler supports scales up to 2**50 - 1")


# The sampler's steps (Bernoulli of a ratio, of exp(-x), geometric, the final division) carry no
# underscore although they are not in __all__: tests/mechanisms/test_noise.py checks each against its
# exact distribution, and tests reach no private name of dpsql.
def bernoulli_ratio(source: RandomSource, num: np.ndarray, den: int, k: np.ndarray) -> np.ndarray:
    """Elementwise Bernoulli(num / (den * k)), exactly, without int64 overflow.

    >>> bernoulli_ratio(GeneratorRandomSource(np.random.default_rng(0)),
    ...                 np.array([0, 6]), 3, np.array([1, 2])).tolist()
    [False, True]
    """
    small = k <= _INT64_MAX // den
    if small.all():
        return source.below(den * k) < num
    # Never seen in practice (k >= 2**13); Bernoulli(a/(bc)) = Bernoulli(a/b) AND Bernoulli(1/c).
    out = np.empty(num.size, dtype=bool)
    out[small] = source.below(den * k[small]) < num[small]
    big = ~small
    out[big] = (source.below(np.full(int(big.sum()), den, dtype=np.int64)) < num[big]) \
        & (source.below(k[big]) == 0)
    return out


def word_steps(den: int) -> int:
    """The most steps m of Algorithm 1 one uniform word in [0, den**m * m!) decides: that size at
    most 2**26 (32 bits from the OS source), else below 2**62; 0 if den alone is that large.

    >>> word_steps(3), word_steps(2167), word_steps(9388178), word_steps(2**40), word_steps(2**62)
    (7, 2, 1, 1, 0)
    """
    for limit in (_NARROW + 1, 2**62):
        m, size = 0, 1
        while size * den * (m + 1) < limit:
            m += 1
            size *= den * m
        if m:
            return m
    return 0


def first_steps(source: RandomSource, num: np.ndarray, den: int, m: int) -> np.ndarray:
    """min(K, m + 1) for Algorithm 1's K at gamma = num/den (0 < num <= den), from one word each.

    P(K > j) = P(A_1 = ... = A_j = 1) = gamma**j / j!, nested in j, so one uniform W in [0, M),
    M = den**m * m!, gives K > j iff W < M gamma**j / j! = num**j * den**(m-j) * m!/j!, an integer
    at most M < 2**62: exact, no rounding. Given K > m (W below the last threshold) the A_j beyond m
    are independent of W, so the caller goes on with fresh Bernoulli(gamma / j) draws.

    >>> first_steps(GeneratorRandomSource(np.random.default_rng(0)), np.array([3, 3]), 3, 14).tolist()
    [2, 3]
    """
    size = den**m * math.factorial(m)
    w = source.below(np.full(num.size, size, dtype=np.int64))
    k = np.ones(num.size, dtype=np.int64)
    power = np.ones(num.size, dtype=np.int64)
    for j in range(1, m + 1):
        power = power * num                                  # num**j <= den**j
        passed = w < power * (den ** (m - j) * (math.factorial(m) // math.factorial(j)))
        if not passed.any():
            break
        k += passed
    return k


def bernoulli_exp(source: RandomSource, num: np.ndarray, den: int) -> np.ndarray:
    """Elementwise Bernoulli(exp(-num/den)) for 0 <= num <= den.

    >>> bernoulli_exp(GeneratorRandomSource(np.random.default_rng(0)), np.zeros(3, np.int64), 5).tolist()
    [True, True, True]
    """
    # Canonne, Kamath, Steinke 2020, Algorithm 1 (gamma <= 1): K = first k with A_k ~ Bern(gamma/k)
    # equal to 0; P(K odd) = exp(-gamma). Elements with num == 0 stop at K = 1 for free; the first
    # steps of the others come from one word each (first_steps), the rare rest one step at a time.
    k = np.ones(num.size, dtype=np.int64)
    active = np.flatnonzero(num > 0)
    steps = word_steps(den)
    if steps and active.size:
        k[active] = first_steps(source, num[active], den, steps)
        active = active[k[active] > steps]
    while active.size:
        success = bernoulli_ratio(source, num[active], den, k[active])
        active = active[success]
        k[active] += 1
    return (k & 1) == 1


def bernoulli_exp_minus_one(source: RandomSource, size: int, steps: int = 20) -> np.ndarray:
    """``size`` i.i.d. Bernoulli(exp(-1)) draws, mostly one uniform word in [0, steps!) each
    (``steps`` 20 or 11; 11! fits the OS source's 32-bit words).

    >>> bernoulli_exp_minus_one(GeneratorRandomSource(np.random.default_rng(0)), 4).dtype
    dtype('bool')
    """
    # Canonne, Kamath, Steinke 2020, Algorithm 1 with gamma = 1, where P(K >= k) = 1/(k-1)!: one
    # uniform W in [0, m!) decides the first m steps exactly, since K >= k iff W < m!/(k-1)!.
    thresholds = _FACT_THRESHOLDS[steps]
    w = source.below(np.full(size, math.factorial(steps), dtype=np.int64))
    k = 1 + steps - np.searchsorted(thresholds, w, side="right")
    active = np.flatnonzero(w == 0)  # K >= m + 1 (probability 1/m!): continue the series by hand
    while active.size:
        success = source.below(k[active]) == 0
        active = active[success]
        k[active] += 1
    return (k & 1) == 1


def geometric_exp_minus_one(source: RandomSource, size: int) -> np.ndarray:
    """``size`` draws of V with P(V >= v) = exp(-v): successes before the first failed Bern(1/e).

    >>> bool(geometric_exp_minus_one(GeneratorRandomSource(np.random.default_rng(0)), 3).min() >= 0)
    True
    """
    v = np.zeros(size, dtype=np.int64)
    active = np.arange(size)
    while active.size:
        active = active[bernoulli_exp_minus_one(source, active.size, _NARROW_STEPS)]
        v[active] += 1
    return v


def floor_div(u: np.ndarray, v: np.ndarray, n: int, s: int) -> np.ndarray:
    """Elementwise floor((u + n*v) / s), exact, raising OverflowError if a result exceeds int64.

    >>> floor_div(np.array([1, 2]), np.array([0, 3]), 4, 2).tolist()
    [0, 7]
    """
    small = v <= (_INT64_MAX - n) // n
    if small.all():
        return (u + n * v) // s
    # V >= 2**13 has probability exp(-8192): use Python integers rather than wrap around silently.
    y = np.zeros(u.size, dtype=np.int64)
    y[small] = (u[small] + n * v[small]) // s
    for i in np.flatnonzero(~small):
        exact = (int(u[i]) + n * int(v[i])) // s
        if exact > _INT64_MAX:
            raise OverflowError(f"discrete Laplace draw {exact} does not fit in int64")
        y[i] = exact
    return y


def discrete_laplace(source: RandomSource, scale: float, size: int) -> np.ndarray:
    """Draw i.i.d. discrete Laplace noise: P(X = x) proportional to exp(-|x| / t), t = dyadic_scale(scale).

    Args:
        source: the randomness; ``as_random_source(None)`` (the OS CSPRNG) for real releases.
        scale: the Laplace scale b = sensitivity / epsilon; rounded up by ``dyadic_scale``.
        size: number of draws (>= 0).

    Raises:
        ValueError: for a negative size or an invalid scale (see ``dyadic_scale``).

    Example:
        >>> from dpsql.mechanisms.randomness import SystemRandomSource
        >>> discrete_laplace(SystemRandomSource(), 0.0, 3).tolist()
        [0, 0, 0]
    """
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise ValueError(f"size must be an integer >= 0, got {size!r}")
    t = dyadic_scale(scale)
    out = np.zeros(int(size), dtype=np.int64)
    if t == 0 or size == 0:
        return out
    filled = 0
    while filled < size:
        # About 0.68 of the attempts succeed at scale 1, 0.6 at large scales: one round mostly does.
        want = int(size) - filled
        draws = laplace_round(source, t.numerator, t.denominator, want + want // 2 + 64)[:want]
        out[filled:filled + draws.size] = draws
        filled += draws.size
    return out


def laplace_round(source: RandomSource, n: int, s: int, attempts: int) -> np.ndarray:
    """One vectorised round of ``attempts`` tries of Canonne, Kamath, Steinke 2020, Algorithm 2 with
    scale n/s: the draws of those that succeed, i.i.d. discrete Laplace (the tries are independent, so
    which of them succeed says nothing about the values of the others), in the order tried.

    >>> laplace_round(GeneratorRandomSource(np.random.default_rng(0)), 1, 1, 10).size <= 10
    True
    """
    # One word gives both U ~ Uniform[0, n) and the sign bit B; B is independent of the rest,
    # so drawing it early (the paper draws it last) leaves the distribution unchanged.
    w = source.below(np.full(attempts, 2 * n, dtype=np.int64))
    u, b = w >> 1, w & 1
    keep = bernoulli_exp(source, u, n)      # D ~ Bernoulli(exp(-U/n)); reject when D = 0
    u, b = u[keep], b[keep]
    v = geometric_exp_minus_one(source, u.size)
    y = floor_div(u, v, n, s)               # X = U + n*V ~ Geom(exp(-1/n)); Y = floor(X/s)
    accept = (b == 0) | (y != 0)             # reject (B = 1, Y = 0): +0 and -0 count once
    return np.where(b[accept] == 1, -y[accept], y[accept])


def _q(scale: float) -> tuple[float, float]:
    """The used scale t as a float and the ratio q = exp(-1/t) between neighbouring pmf values.

    >>> _q(1.0)
    (1.0, 0.36787944117144233)
    """
    t = float(dyadic_scale(scale))
    return t, (math.exp(-1.0 / t) if t > 0 else 0.0)


def discrete_laplace_cdf_tail(scale: float, k: int) -> float:
    """P(|X| > k) for X ~ discrete_laplace(scale): 2 q^(k+1) / (1 + q), q = exp(-1/t).

    Args:
        scale: as for ``discrete_laplace`` (rounded up by ``dyadic_scale``).
        k: the threshold; P(|X| > k) = 1 for k < 0.

    Example:
        >>> round(discrete_laplace_cdf_tail(1.0, 0), 6)
        0.537883
    """
    t, q = _q(scale)
    if k < 0:
        return 1.0
    if t == 0:
        return 0.0
    return 2.0 * math.exp(-(k + 1) / t) / (1.0 + q)


def discrete_laplace_bound(scale: float, confidence: float) -> int:
    """The smallest integer k >= 0 with P(|X| <= k) >= confidence, for error bars.

    P(|X| <= k) is computed as ``1 - discrete_laplace_cdf_tail(scale, k)``; the result is exact
    for that float: it holds at k and fails at k - 1.

    Args:
        scale: as for ``discrete_laplace``.
        confidence: strictly between 0 and 1.

    Raises:
        ValueError: if confidence is not in (0, 1).

    Example:
        >>> discrete_laplace_bound(1.0, 0.95)
        3
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    t, q = _q(scale)
    if t == 0:
        return 0

    def holds(k: int) -> bool:
        return 1.0 - discrete_laplace_cdf_tail(scale, k) >= confidence

    # Closed form from 2 q^(k+1) / (1+q) <= 1 - c, then correct for float rounding. At large
    # scales many neighbouring k share one float value of P(|X| <= k), so search, don't step.
    hi = max(0, math.ceil(t * math.log(2.0 / ((1.0 - confidence) * (1.0 + q))) - 1.0))
    step = 1
    while not holds(hi):
        hi, step = hi + step, 2 * step
    lo, step = hi - 1, 1
    while lo >= 0 and holds(lo):
        hi, step = lo, 2 * step
        lo = hi - step
    lo = max(lo, -1)  # invariant: holds(hi), and lo == -1 or not holds(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if holds(mid) else (mid, hi)
    return hi


def discrete_laplace_pmf(scale: float, x: np.ndarray) -> np.ndarray:
    """Exact pmf of discrete_laplace(scale) at integer x: (1-q)/(1+q) * q^|x|, as floats.

    Args:
        scale: as for ``discrete_laplace``.
        x: integer array of points.

    Example:
        >>> discrete_laplace_pmf(0.0, np.array([-1, 0, 1])).tolist()
        [0.0, 1.0, 0.0]
    """
    x = np.abs(np.asarray(x, dtype=np.float64))
    t, q = _q(scale)
    if t == 0:
        return (x == 0).astype(np.float64)
    # -expm1(-1/t) is 1 - q without cancellation at large scales.
    return -math.expm1(-1.0 / t) / (1.0 + q) * np.exp(-x / t)


def selection_threshold(scale: float, max_groups: int, delta: float) -> int:
    """tau for DP partition selection: release a group iff its noisy unit count is >= tau.

    Korolova et al. 2009; Wilson et al. 2020 ("Differentially private SQL with bounded user
    contribution", sec. 3), with discrete Laplace noise of scale t on counts of sensitivity L: a
    group that only one unit holds has count 1 and is released with probability
    P(Z >= tau - 1) = q^(tau-1) / (1 + q), q = exp(-1/t); that unit reaches <= L such groups, so
    requiring q^(tau-1) / (1 + q) <= delta / L bounds the chance of any such release by delta.
    Groups present in both neighbours are covered by the epsilon of the noisy counts.

    >>> selection_threshold(1.0, 1, 1e-6)   # P(Z >= 14) = e^-14 / (1 + e^-1) = 6.1e-7 <= 1e-6
    15
    """
    if not 0 < delta < 1:
        raise ValueError(f"partition selection needs 0 < delta < 1, got {delta}")
    q = math.exp(-1.0 / scale)
    tau = 1 + max(0, math.ceil(scale * math.log(max_groups / (delta * (1 + q)))))
    # Guard the float rounding of the closed form: step up until the bound holds with margin.
    while q ** (tau - 1) / (1 + q) > delta / max_groups * (1 - 1e-9):
        tau += 1
    return tau


def selection_probability(count: int, scale: float, tau: int) -> float:
    """P(count + Z >= tau) for Z discrete Laplace of scale t: the chance a group of `count` units is released."""
    q = math.exp(-1.0 / scale)
    k = tau - count
    if k <= 0:
        return 1.0 - q ** (-k + 1) / (1 + q)
    return q ** k / (1 + q)
