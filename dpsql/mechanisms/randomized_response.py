"""Randomized response for the local model: each respondent's answer is randomized before it is kept.

Warner 1965 ("Randomized response: a survey technique for eliminating evasive answer bias") for a
binary column; k-ary randomized response (Kairouz, Oh and Viswanath 2014; "direct encoding" in Wang,
Blocki, Li and Jha 2017) over a public domain of k categories: keep the true category with
probability p = e^eps / (e^eps + k - 1), else report one of the other k - 1, uniformly (q =
(1 - p) / (k - 1) each). Two inputs give one output with probabilities p and q at most apart, so the
report is eps-DP for its respondent (local DP), whatever anyone else answered.

Exact sampling: p is rounded down to a rational ``num / 2**62`` (p / q only shrinks, so the
requested epsilon still bounds the loss); the keep decision is one uniform integer below 2**62
compared with ``num``, the replacement one uniform integer below k - 1. Integers from a
RandomSource only: no float is ever compared with a probability (Mironov 2012).

The estimator (Wang et al. 2017, section 4): with n reports and o_c of them saying c, the true count
n_c is estimated without bias by (o_c - n q) / (p - q), with variance
n q (1 - q) / (p - q)^2 + n_c (1 - p - q) / (p - q).

>>> rr = RandomizedResponse(1.0, 2)
>>> float(rr.p_keep), rr.name
(0.7310585786300049, 'Warner randomized response')
>>> round(float(estimate([600, 400], 1.0).counts[0]), 3)
716.395
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction
from statistics import NormalDist
from typing import Sequence

import numpy as np

from dpsql.errors import InvalidParameter
from dpsql.mechanisms.randomness import GeneratorRandomSource, RandomSource  # noqa: F401 (the doctest)

MAX_CATEGORIES = 256        # a domain's largest size: its keys stay SQL literals (engines' KEY_LITERALS_MAX)
DENOMINATOR = 2**62         # p_keep is a multiple of 1 / DENOMINATOR: one 64-bit draw decides a keep
_LARGEST_EPSILON = 64       # p_keep at 64 already rounds to within 2 / DENOMINATOR of 1
_DIGITS = 60                # decimal digits of e^eps: its error is far below 1 / DENOMINATOR


def check_epsilon(epsilon) -> float:
    """A respondent's epsilon: a finite number > 0 (DP401).

    >>> check_epsilon(0.5)
    0.5
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, Fraction, np.integer, np.floating)) \
            or not math.isfinite(epsilon) or epsilon <= 0:
        raise InvalidParameter("DP401", f"randomized response needs an epsilon > 0 (finite), got {epsilon!r}",
                               hint="give each column an epsilon > 0: the loss of one respondent's report")
    return float(epsilon)


def keep_probability(epsilon: float, k: int) -> Fraction:
    """p_keep, rounded down to a multiple of 2**-62: at most e^eps / (e^eps + k - 1), so p / q <= e^eps.

    e^eps is computed in decimal to 60 digits (correctly rounded), so the floor less one is below the
    exact value: the rounding only ever adds privacy.

    >>> p = keep_probability(1.0, 2)
    >>> (p * DENOMINATOR).denominator, float(p)   # e / (e + 1) = 0.73105857863000487925...
    (1, 0.7310585786300049)
    """
    with localcontext() as ctx:
        ctx.prec = _DIGITS
        power = Decimal(min(check_epsilon(epsilon), _LARGEST_EPSILON)).exp()
        exact = power / (power + (k - 1))
        num = int((exact * DENOMINATOR).to_integral_value(rounding=ROUND_FLOOR)) - 1
    p = Fraction(num, DENOMINATOR)
    if p * k <= 1:
        raise InvalidParameter("DP401", f"epsilon {epsilon!r} is too small for randomized response over {k} "
                               "categories: the kept answer would be as likely as any other",
                               hint="give an epsilon of at least 1e-12")
    return p


@dataclass(frozen=True)
class RandomizedResponse:
    """k-ary randomized response at ``epsilon`` per respondent over a domain of ``k`` categories (Warner's
    when k = 2). Categories are the indices 0 .. k-1 of the public domain."""
    epsilon: float
    k: int
    p_keep: Fraction = field(init=False)   # from epsilon and k: keep_probability

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon)
        if isinstance(self.k, bool) or not isinstance(self.k, (int, np.integer)) or not 2 <= self.k <= MAX_CATEGORIES:
            raise InvalidParameter("DP401", f"randomized response needs 2 to {MAX_CATEGORIES} categories, got {self.k!r}")
        object.__setattr__(self, "p_keep", keep_probability(self.epsilon, int(self.k)))

    @property
    def name(self) -> str:
        return "Warner randomized response" if self.k == 2 else f"{self.k}-ary randomized response"

    @property
    def keep_numerator(self) -> int:
        """p_keep * 2**62, an integer: a report is kept iff a uniform integer below 2**62 is below it."""
        return int(self.p_keep * DENOMINATOR)

    @property
    def q(self) -> Fraction:
        """The probability of reporting one given other category."""
        return (1 - self.p_keep) / (self.k - 1)

    @property
    def spent(self) -> float:
        """The exact loss of one report, ln(p / q) (at most ``epsilon``)."""
        return math.log(self.p_keep / self.q)

    def law(self, category: int) -> tuple[Fraction, ...]:
        """P(report = c | answer = category) for every c, exactly.

        >>> RandomizedResponse(1.0, 3).law(0)[1] == RandomizedResponse(1.0, 3).q
        True
        """
        return tuple(self.p_keep if c == category else self.q for c in range(self.k))

    def sample(self, source: RandomSource, categories: np.ndarray) -> np.ndarray:
        """Each answer's report: kept iff a uniform integer below 2**62 is below p_keep's numerator,
        else the j-th of the other categories for j uniform below k - 1.

        >>> RandomizedResponse(50.0, 4).sample(GeneratorRandomSource(np.random.default_rng(0)),
        ...                                    np.array([0, 1, 2, 3])).tolist()
        [0, 1, 2, 3]
        """
        x = np.asarray(categories, dtype=np.int64)
        keep = source.below(np.full(x.size, DENOMINATOR, dtype=np.int64)) < self.keep_numerator
        out = x.copy()
        moved = np.flatnonzero(~keep)
        other = source.below(np.full(moved.size, self.k - 1, dtype=np.int64))
        out[moved] = other + (other >= x[moved])   # skip the true category: uniform over the k - 1 others
        return out


@dataclass(frozen=True)
class Estimate:
    """Debiased counts of each category, their variances and the number of reports."""
    counts: np.ndarray
    variance: np.ndarray
    n: int

    def interval(self, confidence: float) -> tuple[np.ndarray, np.ndarray]:
        """A normal-approximation interval around each count (the estimate is a sum of n independent
        reports' terms).

        >>> low, high = estimate([600, 400], 1.0).interval(0.95)
        >>> bool(low[0] < 716.4 < high[0])
        True
        """
        if not 0 < confidence < 1:
            raise InvalidParameter("DP401", f"a confidence level is in (0, 1), got {confidence!r}")
        z = NormalDist().inv_cdf((1 + confidence) / 2)
        half = z * np.sqrt(self.variance)
        return self.counts - half, self.counts + half


def estimate(observed: Sequence[int], epsilon: float) -> Estimate:
    """The unbiased estimate of each category's true count from the reports' counts ``observed`` (one per
    category of the domain, in its order), and its variance, with the unknown true count in the variance
    replaced by the estimate clipped to [0, n].

    Args:
        observed: how many reports say each category (k >= 2 numbers >= 0).
        epsilon: the epsilon the reports were randomized at.

    Example:
        >>> e = estimate([30, 70], 2.0)
        >>> [round(float(c), 2) for c in e.counts], e.n
        ([23.74, 76.26], 100)
    """
    counts = np.asarray(observed, dtype=np.int64)
    rr = RandomizedResponse(epsilon, int(counts.size))
    if (counts < 0).any():
        raise ValueError("observed counts must be >= 0")
    n = int(counts.sum())
    p, q = float(rr.p_keep), float(rr.q)
    est = (counts - n * q) / (p - q)
    truth = np.clip(est, 0, n)
    variance = n * q * (1 - q) / (p - q) ** 2 + truth * (1 - p - q) / (p - q)
    return Estimate(est, np.maximum(variance, 0.0), n)
