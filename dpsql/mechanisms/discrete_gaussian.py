"""Exact discrete Gaussian noise N_Z(0, sigma^2): P(Y = y) proportional to exp(-y^2 / (2 sigma^2)) on
the integers, sampled with integer arithmetic from the OS CSPRNG, and its law computed to rigorous
bounds (the tails, the exact (epsilon, delta) curve) for calibration, error bars and thresholds.

Sampling is Canonne, Kamath and Steinke 2020 ("The Discrete Gaussian for Differential Privacy"),
Algorithm 3: a discrete Laplace proposal (their Algorithm 2, ``laplace_round``) accepted with
probability exp(-gamma) by their Algorithm 1 for rational gamma: no floating point and no logarithm
of a uniform double on the sampling path. Floats appear only in the law below, always with a bound on their
error on the side that keeps privacy (a larger delta, a wider interval, a higher threshold).

>>> from dpsql.mechanisms.randomness import GeneratorRandomSource
>>> draws = discrete_gaussian(GeneratorRandomSource(np.random.default_rng(0)), Fraction(3), 5)
>>> draws.dtype, draws.shape
(dtype('int64'), (5,))
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpsql.mechanisms.discrete_laplace import bernoulli_exp, geometric_exp_minus_one, laplace_round
from dpsql.mechanisms.losses import MARGIN
from dpsql.mechanisms.randomness import RandomSource

MAX_SIGMA = 2 ** 24            # the sampler's sigma (in its own units): its integers stay in int64
MIN_SIGMA = Fraction(1, 2 ** 18)   # below this the proposal's dyadic scale would need 2**-30 steps
_FAST = 2 ** 31                # |Y| b - a below this: its square fits int64
_CHUNK = 1 << 20               # terms summed per numpy call
_DIRECT = 1 << 22              # the most terms a tail is summed over; beyond, its bracket is tight


def _acceptance(source: RandomSource, y: np.ndarray, a: int, b: int) -> np.ndarray:
    """Bernoulli(exp(-(|y| b - a)^2 / (2 a^2))) elementwise, exactly: CKS Algorithm 3's acceptance
    with t = sigma = a / b (so sigma^2 / t = sigma), gamma split into its integer part q and the rest.

    >>> from dpsql.mechanisms.randomness import GeneratorRandomSource
    >>> _acceptance(GeneratorRandomSource(np.random.default_rng(0)), np.array([3, -3]), 3, 1).tolist()
    [True, True]
    """
    d = np.abs(y) * b - a if np.all(np.abs(y) < (_FAST + a) // b) else None
    if d is None or np.any(np.abs(d) >= _FAST):
        return np.array([_accept_one(source, int(v), a, b) for v in y], dtype=bool)
    den = 2 * a * a
    q, r = np.divmod(d * d, den)
    # exp(-gamma) = exp(-q) exp(-r/den): a geometric count of Bernoulli(1/e) successes reaches q with
    # probability exp(-q) (discrete_laplace's helper), and Algorithm 1 draws Bernoulli(exp(-r/den)).
    accept = bernoulli_exp(source, r, den)
    whole = np.flatnonzero(accept & (q > 0))
    if whole.size:
        accept[whole] = geometric_exp_minus_one(source, whole.size) >= q[whole]
    return accept


def _accept_one(source: RandomSource, y: int, a: int, b: int) -> bool:
    """The same acceptance for one draw in Python integers (|y| beyond 2**31 / b: probability < e^-100)."""
    q, r = divmod((abs(y) * b - a) ** 2, 2 * a * a)
    if not bernoulli_exp(source, np.array([r], dtype=np.int64), 2 * a * a)[0]:
        return False
    step = 2 ** 62   # P(V >= q) = P(V >= step) P(V >= q - step): a geometric count is memoryless
    while q > step:
        if geometric_exp_minus_one(source, 1)[0] < step:
            return False
        q -= step
    return bool(geometric_exp_minus_one(source, 1)[0] >= q)


def discrete_gaussian(source: RandomSource, sigma: Fraction, size: int) -> np.ndarray:
    """``size`` i.i.d. draws of N_Z(0, sigma^2), int64.

    Args:
        source: the randomness; the OS CSPRNG for real releases.
        sigma: a dyadic rational a / 2**k in [2**-18, 2**24] (the mechanism's grid), or 0 (no noise).
        size: number of draws (>= 0).
    Raises:
        ValueError: for a sigma off the sampler's range or not dyadic, or a negative size.
    """
    sigma = Fraction(sigma)
    if size < 0 or sigma < 0 or sigma > MAX_SIGMA or (0 < sigma < MIN_SIGMA) or sigma.denominator & (
            sigma.denominator - 1):
        raise ValueError(f"discrete_gaussian needs a dyadic sigma in [2**-18, 2**24] and size >= 0, got "
                         f"{sigma}, {size}")
    out = np.zeros(size, dtype=np.int64)
    if sigma == 0 or size == 0:
        return out
    a, b = sigma.numerator, sigma.denominator
    filled = 0
    while filled < size:
        # Algorithm 3 with t = sigma: about 1.32 proposals per draw (acceptance e^-1/2 sqrt(pi/2)),
        # each from a round of Algorithm 2 where about 0.6 of the tries succeed: 9/4 tries a draw.
        want = size - filled
        y = laplace_round(source, a, b, want * 9 // 4 + 64)
        kept = y[_acceptance(source, y, a, b)][:want]
        out[filled:filled + kept.size] = kept
        filled += kept.size
    return out


def on_grid(sigma: Fraction, mantissa: int = 12) -> Fraction:
    """The smallest n * 2**e >= sigma with 2**(mantissa-1) <= n < 2**mantissa: the mechanism's sigmas.

    >>> on_grid(Fraction(3)), on_grid(Fraction(1, 3))
    (Fraction(3, 1), Fraction(2731, 8192))
    """
    if sigma <= 0:
        return Fraction(0)
    e = sigma.numerator.bit_length() - sigma.denominator.bit_length() - mantissa
    while Fraction(2) ** e * (2 ** mantissa) <= sigma:
        e += 1
    while Fraction(2) ** (e - 1) * (2 ** mantissa) > sigma:
        e -= 1
    unit = Fraction(2) ** e
    return math.ceil(sigma / unit) * unit


def _sum(sigma2: float, low: int, high: int) -> float:
    """sum of exp(-y^2 / (2 sigma^2)) over the integers y in [low, high]."""
    total = 0.0
    for start in range(low, high + 1, _CHUNK):
        y = np.arange(start, min(start + _CHUNK, high + 1), dtype=np.float64)
        total += float(np.exp(-(y * y) / (2 * sigma2)).sum())
    return total


def normaliser(sigma: float) -> tuple[float, float]:
    """Bounds on Z = sum over all integers of exp(-y^2 / (2 sigma^2)).

    Above sigma = 4 by Poisson summation, Z = sqrt(2 pi) sigma (1 + 2 sum_k exp(-2 pi^2 sigma^2 k^2)),
    whose sum is below e^-315; below, summed directly to where the terms are below e^-1800.

    >>> lo, hi = normaliser(10.0); lo <= math.sqrt(2 * math.pi) * 10 <= hi
    True
    """
    if sigma >= 4:
        z = math.sqrt(2 * math.pi) * sigma
    else:
        reach = math.ceil(60 * sigma) + 1
        z = _sum(sigma * sigma, -reach, reach)
    return z * (1 - MARGIN), z * (1 + MARGIN)


def _bracket(sigma: float, n: int) -> tuple[float, float]:
    """Bounds on T(n) = sum_{y >= n} f(y), f(y) = exp(-y^2 / 2 sigma^2), n >= 0, by Euler-Maclaurin.

    T(n) = int_n^inf f + f(n)/2 + R with R = -int ({x}^2 - {x})/2 f''(x) dx, so |R| <= (1/8) int_n^inf |f''|:
    f is concave below sigma and convex above, so that integral is f'(n) - 2 f'(sigma) for n < sigma
    and -f'(n) beyond (f'(y) = -y f(y) / sigma^2).
    """
    s2 = sigma * sigma
    f_n = math.exp(-n * n / (2 * s2))
    integral = sigma * math.sqrt(math.pi / 2) * math.erfc(n / (sigma * math.sqrt(2)))
    curvature = n * f_n / s2 if n >= sigma else 2 * math.exp(-0.5) / sigma - n * f_n / s2
    middle, error = integral + f_n / 2, curvature / 8
    return max(0.0, (middle - error) * (1 - MARGIN)), (middle + error) * (1 + MARGIN)


def tail(sigma: float, n: int, bracket: bool = False) -> tuple[float, float]:
    """Bounds on P(Y >= n) for Y ~ N_Z(0, sigma^2) (sigma > 0).

    Summed directly over the terms above e^-70 of f(n) (the rest bounded by its integral, below
    sigma^2 f(Y) / Y), unless that is more than 2**22 terms or ``bracket`` asks: then the
    Euler-Maclaurin bracket (valid at any sigma; its relative width is below n^2 / (4 sigma^4) +
    1 / sigma^2, so below 2e-7 for |n| <= 13 sigma once sigma >= 2**14, where it is the fast way).
    Negative n by symmetry: P(Y >= n) = 1 - P(Y >= 1 - n).

    >>> lo, hi = tail(1.0, 0); 0.69947 < lo <= hi < 0.69948    # 1/2 + P(0)/2
    True
    """
    z_lo, z_hi = normaliser(sigma)
    if n <= 0:
        lo, hi = _unnormalised_tail(sigma, 1 - n, bracket)
        return max(0.0, 1 - hi / z_lo), min(1.0, 1 - lo / z_hi)
    lo, hi = _unnormalised_tail(sigma, n, bracket)
    return lo / z_hi, min(1.0, hi / z_lo)


def _unnormalised_tail(sigma: float, n: int, bracket: bool) -> tuple[float, float]:
    """Bounds on T(n) for n >= 1 (see ``tail``)."""
    s2 = sigma * sigma
    last = math.ceil(math.sqrt(n * n + 140 * s2))
    if bracket or last - n > _DIRECT:
        return _bracket(sigma, n)
    total = _sum(s2, n, last)
    rest = s2 / last * math.exp(-last * last / (2 * s2))
    return total * (1 - MARGIN), (total + rest) * (1 + MARGIN)


def pmf(sigma: float, x: np.ndarray) -> np.ndarray:
    """The pmf of N_Z(0, sigma^2) at integer points, as floats (Z from ``normaliser``).

    >>> round(float(pmf(1.0, np.array([0]))[0]), 6)
    0.398942
    """
    z = math.fsum(normaliser(sigma)) / 2
    x = np.asarray(x, dtype=np.float64)
    return np.exp(-(x * x) / (2 * sigma * sigma)) / z


def curve_delta(sigma: Fraction, sensitivity: int, epsilon: float, bracket: bool = False) -> float:
    """An upper bound on the smallest delta at which adding N_Z(0, sigma^2) to an integer of
    sensitivity ``sensitivity`` is (epsilon, delta)-DP: CKS 2020, Theorem 7 (exact, tight),
    delta = P(Y >= b - Delta) - e^epsilon P(Y >= b), b = floor(epsilon sigma^2 / Delta + Delta / 2) + 1.

    The set where the likelihood ratio exceeds e^epsilon, {y >= b}, is found in exact rationals (a
    wrong edge would understate delta); the tails are bounded above and below (``tail``, which
    ``bracket`` tells to bound them by Euler-Maclaurin: fast, and as tight for large sigmas).

    >>> 0 < curve_delta(Fraction(4), 1, 1.0) < 1e-2
    True
    """
    if sensitivity == 0:
        return 0.0
    if sigma == 0:
        return 1.0
    b = math.floor(Fraction(epsilon) * Fraction(sigma) ** 2 / sensitivity + Fraction(sensitivity, 2)) + 1
    s = float(sigma)
    high = tail(s, b - sensitivity, bracket)[1]
    low = tail(s, b, bracket)[0]
    return max(0.0, high - math.exp(epsilon) * (1 - MARGIN) * low)


def curve_epsilon(sigma: Fraction, sensitivity: int, delta: float, start: float) -> float:
    """The smallest epsilon (rounded up, to 1e-12 relative) with ``curve_delta`` <= delta, searched
    below ``start``, an epsilon known to be enough (the zCDP bound's)."""
    if curve_delta(sigma, sensitivity, 0.0) <= delta:
        return 0.0
    low, high = 0.0, start
    while curve_delta(sigma, sensitivity, high) > delta:
        low, high = high, 2 * high + 1e-12
    while high - low > 1e-12 * high:
        middle = (low + high) / 2
        if curve_delta(sigma, sensitivity, middle) <= delta:
            high = middle
        else:
            low = middle
    return high


def smallest(holds, start: int) -> int:
    """The smallest integer m >= 0 with ``holds(m)``, for a predicate monotone in m, searched from
    ``start``.

    >>> smallest(lambda m: m * m >= 50, 3)
    8
    """
    high, step = max(0, start), 1
    while not holds(high):
        high, step = high + step, 2 * step
    low = high - 1
    step = 1
    while low >= 0 and holds(low):
        high, step = low, 2 * step
        low = high - step
    low = max(low, -1)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if holds(middle) else (middle, high)
    return high


def variance(sigma: float) -> float:
    """Var N_Z(0, sigma^2): sigma^2 to within e^-300 above sigma = 4 (Poisson summation), else summed."""
    if sigma >= 4:
        return sigma * sigma
    reach = math.ceil(60 * sigma) + 1
    y = np.arange(-reach, reach + 1, dtype=np.float64)
    weights = np.exp(-(y * y) / (2 * sigma * sigma))
    return float((weights * y * y).sum() / weights.sum())
