"""The exponential mechanism as a privacy map, and its exact sampler.

Candidates i with integer utilities u_i and positive integer widths m_i (a candidate that stands for
m_i equal outcomes, such as a bin of m_i grid values) are chosen with probability proportional to
m_i exp(u_i / s) (McSherry-Talwar 2007; the quantile form of Smith 2011 weighs by width). If one
person moves every utility by at most Delta (and the widths not at all), the range
max_i (u_i - u'_i) - min_i (u_i - u'_i) is at most 2 Delta, and at most Delta for monotone utilities
(counts, which one person moves all up or all down): the release's sensitivity states that range
(``per_partition``), and the choice is (range / s)-DP. It is also (range / s)-bounded-range, hence
(range / s)^2 / 8-zCDP (Cesar-Rogers 2021, Lemma 3.2), tighter than a pure epsilon's epsilon^2 / 2.
A person in L0 partitions each chosen separately: the ranges add (l1 for epsilon, l2^2 for rho).

Top-k by peeling (choose, remove, k times at scale s) has the same law as the one-shot top-k with
Gumbel noise of scale s (Durfee-Rogers 2019, Lemma 4.2), and costs k choices.

The sampler (``choose``) is exact, never a Gumbel or ln(uniform) in doubles (Mironov 2012): the
inverse of the exact CDF at a uniform real whose bits are drawn from the source as needed. The CDF
is computed in doubles with a proven error bound first; when the drawn point lies within that
bound of a boundary (probability about n^2 2^-50), the CDF is recomputed in decimal arithmetic of
growing precision (``decimal``'s exp is correctly rounded) and more bits are drawn, until the
interval holds one candidate. The outcome is therefore exactly the inverse CDF of a uniform real.

>>> from dpsql.mechanisms.releases import Release, Sensitivity
>>> m = Exponential()
>>> r = Release(m.name, Sensitivity(1, Fraction(1)), Fraction(2))
>>> m.epsilon(r), m.rho(r)
(Fraction(1, 2), (Fraction(1, 32), Fraction(0, 1)))
"""
from __future__ import annotations

import decimal
import math
from fractions import Fraction
from typing import Sequence

import numpy as np

from dpsql.mechanisms import discrete_laplace as laplace
from dpsql.mechanisms.losses import PURE, ZCDP, Loss, share, zcdp_rho
from dpsql.mechanisms.randomness import RandomSource
from dpsql.mechanisms.releases import Release, Sensitivity

_CHUNK = 62                  # random bits per draw of the uniform point (source.below(2**62))
_UNDERFLOW = 700.0           # exp(-x) for x above this is below 1e-304: bounded, not computed
_ULPS = 2.0 ** -50           # relative error of fl(gamma), the product, exp and m_i * w, with room
_ROUNDS = 12                 # refinements (digits 40, 80, ...) before the source is deemed broken
MAX_CANDIDATES = 1 << 24     # a choice among more candidates is refused by the caller's limits


def _uniform_bits(source: RandomSource, chunks: int) -> tuple[int, int]:
    """(r, bits): a uniform integer r of ``bits`` bits, from ``chunks`` draws of 62 bits each."""
    r = 0
    for word in source.below(np.full(chunks, 2 ** _CHUNK, dtype=np.int64)).tolist():
        r = (r << _CHUNK) | int(word)
    return r, chunks * _CHUNK


def _decide(prefix: np.ndarray, exact, error: Fraction, r: int, bits: int) -> int | None:
    """The candidate whose interval holds every point U S with U in [r, r + 1) / 2**bits and S the
    exact total, when the prefix sums (``exact(j)``: the j-th as an exact rational, within ``error``
    of the true one) settle it; None when the point is still within the error of a boundary."""
    total = exact(len(prefix) - 1)
    low = Fraction(r, 2 ** bits) * (total - error)
    high = Fraction(r + 1, 2 ** bits) * (total + error)
    guess = int(np.searchsorted(prefix, float(low), side="right"))
    for i in range(max(0, guess - 1), min(len(prefix), guess + 2)):
        if (i == 0 or exact(i - 1) + error <= low) and exact(i) - error > high:
            return i
    return None


def _float_prefix(utilities: np.ndarray, widths: np.ndarray, gamma: Fraction):
    """Prefix sums of m_i exp(-gamma d_i) in doubles, and a bound on their absolute error."""
    d = (utilities.max() - utilities).astype(np.float64)      # exact: |u| < 2**53 (checked)
    x = float(gamma) * d
    small = x <= _UNDERFLOW
    w = np.where(small, widths.astype(np.float64) * np.exp(-np.where(small, x, 0.0)), 0.0)
    prefix = np.cumsum(w)
    total = float(prefix[-1])
    # Each weight within (x_i + 4) ulps-of-2**-50 relative; a cumulative sum of n terms within
    # n 2**-52 of the total; the dropped tails below e^-700 each.
    error = (_ULPS * float(np.dot(w, x + 4.0)) + utilities.size * 2.0 ** -52 * total
             + float(widths[~small].sum()) * math.exp(-_UNDERFLOW))
    return prefix, 2 * error + 1e-300


def _decimal_prefix(utilities: np.ndarray, widths: np.ndarray, gamma: Fraction, digits: int):
    """Prefix sums in decimal arithmetic of ``digits`` digits, and a bound on their absolute error."""
    ctx = decimal.Context(prec=digits, Emin=-10 ** 9, Emax=10 ** 9)
    top = int(utilities.max())
    num, den = decimal.Decimal(gamma.numerator), decimal.Decimal(gamma.denominator)
    total, prefix, weighted = decimal.Decimal(0), [], decimal.Decimal(0)
    for u, m in zip(utilities.tolist(), widths.tolist()):
        x = ctx.divide(ctx.multiply(num, decimal.Decimal(top - int(u))), den)
        w = ctx.multiply(decimal.Decimal(int(m)), ctx.exp(-x))
        total = ctx.add(total, w)
        weighted = ctx.add(weighted, ctx.multiply(w, x + 4))
        prefix.append(total)
    ulp = decimal.Decimal(10) ** (1 - digits)
    # Each weight within (x_i + 4) ulps relative (the quotient, exp, the product); each addition
    # within one ulp of the running total.
    error = 2 * (ulp * weighted + len(prefix) * ulp * total)
    return [Fraction(p) for p in prefix], Fraction(error)


def choose(source: RandomSource, utilities, gamma: Fraction, widths=None) -> int:
    """Index i with probability m_i exp(gamma u_i) / sum_j m_j exp(gamma u_j), exactly (module doc).

    >>> from dpsql.mechanisms.randomness import GeneratorRandomSource
    >>> choose(GeneratorRandomSource(np.random.default_rng(0)), [0, 10 ** 6, 0], Fraction(1))
    1
    """
    u = np.asarray(utilities, dtype=np.int64).reshape(-1)
    m = np.ones(u.size, dtype=np.int64) if widths is None else np.asarray(widths, dtype=np.int64).reshape(-1)
    if u.size == 0 or m.size != u.size or (m <= 0).any() or gamma < 0:
        raise ValueError("choose needs candidates, positive widths of the same number, gamma >= 0")
    if u.size > MAX_CANDIDATES or int(u.max()) - int(u.min()) >= 2 ** 53 or int(m.sum()) >= 2 ** 53:
        raise ValueError("too many candidates or too wide a utility range for the exact sampler")
    if u.size == 1:
        return 0
    prefix, error = _float_prefix(u, m, gamma)
    r, bits = _uniform_bits(source, 1)
    found = _decide(prefix, lambda j: Fraction(float(prefix[j])), Fraction(error), r, bits)
    digits = 40
    for _ in range(_ROUNDS):
        if found is not None:
            return found
        more, extra = _uniform_bits(source, 2)
        r, bits = (r << extra) | more, bits + extra
        points, err = _decimal_prefix(u, m, gamma, digits)
        found = _decide(np.array([float(p) for p in points]), points.__getitem__, err, r, bits)
        digits *= 2
    if found is None:   # each round is undecided with probability about n 2**-120: a broken source
        raise RuntimeError("the exponential sampler's source never settled the draw")
    return found


def top_k(source: RandomSource, utilities, gamma: Fraction, k: int) -> list[int]:
    """k distinct indices by peeling (module doc), in the order chosen (best first in law)."""
    u = np.asarray(utilities, dtype=np.int64).reshape(-1)
    left = np.arange(u.size)
    chosen: list[int] = []
    for _ in range(min(k, u.size)):
        i = choose(source, u[left], gamma)
        chosen.append(int(left[i]))
        left = np.delete(left, i)
    return chosen


class Exponential:
    """The exponential mechanism: a choice among candidates, P(i) ~ m_i exp(u_i / s), s the scale."""

    name = "exponential"
    option = "exponential"
    measure = PURE
    scale_name = "temperature"

    def split(self, epsilon: float, delta: float, sensitivities: Sequence[Sensitivity],
              selecting: bool) -> tuple[list[Loss], float]:
        """epsilon split equally over the choices (sequential composition); no delta."""
        return [Loss.pure(share(epsilon, len(sensitivities)))] * len(sensitivities), 0.0

    def calibrate(self, sensitivity: Sensitivity, loss: Loss) -> Fraction:
        """The smallest scale on laplace.dyadic_scale's grid (12 significant bits) within ``loss``:
        l1 / epsilon (pure), sqrt(l2^2 / (8 rho)) (zCDP)."""
        if loss.measure == PURE:
            if loss.epsilon <= 0:
                raise ValueError(f"no scale meets {loss}")
            return laplace.dyadic_scale(sensitivity.l1 / loss.epsilon)
        rho = loss.rho if loss.measure == ZCDP else zcdp_rho(loss.epsilon, loss.delta)
        if rho <= 0:
            raise ValueError(f"no scale meets {loss}")
        scale = laplace.dyadic_scale(Fraction(math.sqrt(float(sensitivity.l2_squared / (8 * rho)))))
        while not self.covers(Release(self.name, sensitivity, scale), Loss.zcdp(rho)):
            scale = laplace.dyadic_scale(scale * (1 + Fraction(1, 2 ** 11)))
        return scale

    def covers(self, release: Release, loss: Loss) -> bool:
        if loss.measure == PURE:
            return self.epsilon(release) <= loss.epsilon
        rho = loss.rho if loss.measure == ZCDP else zcdp_rho(loss.epsilon, loss.delta)
        return self.rho(release)[0] <= rho

    def gamma(self, release: Release) -> Fraction:
        """The factor of the utilities in the exponent: 1 / s."""
        return 1 / release.scale

    # --- the privacy map --------------------------------------------------------------------------------
    def epsilon(self, release: Release, delta: Fraction = Fraction(0)) -> Fraction | float:
        """l1 / s: each partition's choice is (range / s)-DP, and the partitions compose."""
        if release.sensitivity.l1 == 0:
            return Fraction(0)
        return math.inf if release.scale == 0 else release.sensitivity.l1 / release.scale

    def rho(self, release: Release) -> tuple[Fraction | float, Fraction]:
        """(l2^2 / (8 s^2), 0): bounded range (Cesar-Rogers 2021, Lemma 3.2), composed in rho."""
        if release.sensitivity.l1 == 0:
            return Fraction(0), Fraction(0)
        if release.scale == 0:
            return math.inf, Fraction(0)
        return release.sensitivity.l2_squared / (8 * release.scale ** 2), Fraction(0)

    def pld(self, release: Release, discretization: float = 1e-4):
        """Per partition the pure (range / s)-DP pair (randomized response's PLD dominates every
        epsilon-DP mechanism), composed L0 times."""
        from dp_accounting.pld import common, privacy_loss_distribution as pld
        s = release.sensitivity
        one = pld.from_privacy_parameters(
            common.DifferentialPrivacyParameters(float(s.per_partition / release.scale)),
            value_discretization_interval=discretization)
        return one.self_compose(s.partitions) if s.partitions > 1 else one


__all__ = ["Exponential", "choose", "top_k", "MAX_CANDIDATES"]
