"""Quantiles whose noise follows the data's own stability: propose-test-release (Dwork-Lei 2009;
Brunel-Avella-Medina 2020) and smooth sensitivity (Nissim-Raskhodnikova-Smith 2007), on the grid.

f(D) = x_(m), m = ceil(q n), a grid cell (mechanisms/quantile_ranks.py). One person adds or removes
T <= C values of a partition (r removed, a added, r + a = T). The new j-th value y_(j) lies in
[x_(j - a), x_(j + r)], and with m' = ceil(q (n - r + a)), ceil's subadditivity gives
m' + r <= m + ceil(M T) and m' - a >= m - ceil(M T), M = max(q, 1 - q). So with h = ceil(M C) and k
persons changed, the quantile lies in [x_(m - k h), x_(m + k h)], and so do those of their
neighbours one person further: the local sensitivity at distance k is at most

    A_k(D) = x_(m + (k + 1) h) - x_(m - (k + 1) h),

and A_k(D') <= A_{k+1}(D) for neighbours (each window of D' lies in the next one of D).

Propose-test-release: propose that f moves by at most b cells (``PROPOSAL``). The distance to
instability g(D) = min{k : A_k(D) > b} moves by at most 1 between neighbours (by the chain above), and
g(D) >= 1 means every neighbour's f is within b of f(D). Release "no answer" unless
g + Z1 >= tau (Z1 discrete Laplace of scale t1 = L / eps1, P(Z1 >= tau) <= delta / L), else
f + Z2 (discrete Laplace of scale t2 = L b / eps2). If g(D) = 0 the test passes with probability at
most delta / L; otherwise the pair (test, answer) is two discrete Laplace releases of L1
sensitivities L and L b. So it is (eps1 + eps2, delta)-DP over a person's L partitions (Dwork-Lei
2009, Section 3; Vadhan 2017, Proposition 7.3.2), and is stored as those two releases and an
(0, delta) one.

Smooth sensitivity: S(D) = max_k exp(-beta k) A_k(D) bounds the local sensitivity and
S(D') <= exp(beta) S(D). Released: f + Z, Z discrete Laplace of scale t(D) = c max(S(D), 1) rounded
up. For neighbours, t' = t(D') lies within exp(+-beta') of t (beta' adds the rounding of floats and
of the dyadic scale, ``SLACK``), and the log-ratio of the two pmfs at y is at most
|f - f'| / t + beta' + (|y - f'| / t) (exp(beta') - 1): the shift costs at most 1 / c, the scale's
normaliser tanh(1 / 2t) at most beta', the exponent the last term (only when t' < t). Outside the
event |Z| > t ln(2 / delta_p), of probability at most delta_p, this is at most
1 / c + beta' + (ln(2 / delta_p) + 1 / c)(exp(beta') - 1) = eps_p (``smooth_epsilon``), so each
partition is (eps_p, delta_p)-DP, and a person's L partitions (L eps_p, L delta_p): stored as one
(epsilon, delta) release. No logarithm of a uniform double anywhere: both draw from the exact
discrete Laplace sampler (mechanisms/discrete_laplace.py).

>>> from dpsql.mechanisms.quantile_ranks import Histogram
>>> windows(Histogram.of([3, 4, 5, 9], [1, 1, 1, 1], 16), m=2, width=1, ks=[0, 1, 2]).tolist()
[2, 9, 15]
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpsql.mechanisms import discrete_laplace as laplace
from dpsql.mechanisms.losses import APPROXIMATE, ZCDP, Loss
from dpsql.mechanisms.quantile_ranks import Histogram, spread
from dpsql.mechanisms.randomness import RandomSource
from dpsql.mechanisms.releases import APPROX, Release, Sensitivity

PROPOSAL = 64             # PTR proposes that the quantile moves by at most 64 cells (1/1024 of the range)
SLACK = 2.0 ** -18        # beta' - beta: the floats of S (2**-39) and the dyadic scale (2**-20), with room
LAPLACE = "discrete Laplace"   # the releases PTR's two noises are (its privacy map in mechanisms/laplace.py)


def windows(h: Histogram, m: int, width: int, ks) -> np.ndarray:
    """A_k = x_(m + (k + 1) width) - x_(m - (k + 1) width) for each k (module doc)."""
    k = np.asarray(ks, dtype=np.int64) + 1
    return h.statistic(m + k * width) - h.statistic(m - k * width)


def reach(num: int, den: int, C: int) -> int:
    """h = ceil(max(q, 1 - q) C): how far one person moves the target rank."""
    return math.ceil(spread(num, den) * C)


def instability(h: Histogram, m: int, width: int, proposal: int) -> int:
    """g = min{k >= 0 : A_k > proposal}, by bisection (A_k grows with k and reaches K - 1 once the
    window passes both ends)."""
    high = (h.n + 1) // width + 2
    low = -1                      # A_high > proposal (proposal < K - 1); invariant: A_low <= proposal
    while high - low > 1:
        middle = (low + high) // 2
        if windows(h, m, width, [middle])[0] > proposal:
            high = middle
        else:
            low = middle
    return high


def _epsilon_of(loss: Loss) -> Fraction:
    """The epsilon a rule's share gives it: its own, or sqrt(2 rho) rounded down for a zCDP share
    (an (eps, delta)-DP release is delta-approximately eps^2 / 2-zCDP)."""
    if loss.measure == ZCDP:
        return Fraction(math.sqrt(2 * float(loss.rho))) * (1 - Fraction(1, 2 ** 30))
    return loss.epsilon


def _dyadic(x) -> list[int]:
    scale = laplace.dyadic_scale(x)
    return [scale.numerator, scale.denominator.bit_length() - 1]


def _laplace(source: RandomSource, numerator: int, log2: int) -> int:
    return int(laplace.discrete_laplace(source, Fraction(numerator, 2 ** log2), 1)[0])


def _clamped(value: int, grid: int) -> int:
    return min(max(value, 0), grid - 1)


class _Stable:
    """What PTR and smooth sensitivity share: a share of (epsilon, delta), the histogram's own
    sensitivity (L partitions, C values each), noise in grid cells."""
    measure = APPROXIMATE
    noised = "released cells"
    needs_delta = True

    def sensitivity(self, histogram: Sensitivity, num: int, den: int) -> Sensitivity:
        return histogram

    def loss(self, loss: Loss, delta: float) -> Loss:
        return Loss.approximate(_epsilon_of(loss), delta)

    def variance(self, release: Release) -> float:
        return math.nan


class ProposeTestRelease(_Stable):
    """``mechanism => 'ptr'``: half the epsilon tests the proposal, half noises the answer."""

    name = "propose-test-release"
    option = "ptr"
    code = 2
    scale_name = "scale (cells)"
    about = (f"propose-test-release (Dwork-Lei 2009): proposed, the quantile moves <= {PROPOSAL} cells; half the "
             "epsilon tests the distance to a database where it would not, half noises x_(ceil(q n)); "
             "when the test fails the answer is NULL (no answer)")

    def parts(self, L: int, loss: Loss) -> tuple[Fraction, Fraction, Fraction]:
        """(t1, t2, delta per partition): the test's and the answer's discrete Laplace scales."""
        half = loss.epsilon / 2
        return laplace.dyadic_scale(Fraction(L) / half), laplace.dyadic_scale(Fraction(L * PROPOSAL) / half), \
            loss.delta / L

    def calibrate(self, sensitivity: Sensitivity, loss: Loss) -> Fraction:
        if loss.measure != APPROXIMATE or not loss.epsilon > 0 or not 0 < loss.delta < 1:
            raise ValueError(f"propose-test-release needs a share (epsilon > 0, 0 < delta < 1), not {loss}")
        return self.parts(sensitivity.partitions, loss)[1]

    def releases(self, release: Release, loss: Loss) -> tuple[Release, ...]:
        L = release.sensitivity.partitions
        t1, t2, _ = self.parts(L, loss)
        return (Release(LAPLACE, Sensitivity(L, Fraction(1)), t1),
                Release(LAPLACE, Sensitivity(L, Fraction(PROPOSAL)), t2), Release.approximate(0, loss.delta))

    def covers(self, release: Release, loss: Loss) -> bool:
        if loss.measure != APPROXIMATE:
            return False
        t1, t2, tests = self.releases(release, loss)
        spent = t1.sensitivity.l1 / t1.scale + t2.sensitivity.l1 / t2.scale
        return spent <= loss.epsilon and tests.delta <= loss.delta and release.scale >= t2.scale

    def error_bound(self, release: Release, confidence: float) -> float:
        """Of the answer's noise, when the test passes (cells)."""
        return laplace.discrete_laplace_bound(release.scale, confidence)

    def arguments(self, release: Release, loss: Loss, num: int, den: int) -> list[int]:
        """h, the test's scale, tau, the answer's scale, the proposal."""
        t1, t2, per = self.parts(release.sensitivity.partitions, loss)
        tau = laplace.selection_threshold(float(t1), 1, float(per)) - 1   # P(Z1 >= tau) <= delta / L
        return [reach(num, den, int(release.sensitivity.per_partition)), *_dyadic(t1), tau, *_dyadic(t2), PROPOSAL]

    def answer(self, source: RandomSource, h: Histogram, num: int, den: int, arguments: list[int]) -> int | None:
        width, t1, l1, tau, t2, l2, proposal = arguments
        m = h.target(num, den)
        if instability(h, m, width, proposal) + _laplace(source, t1, l1) < tau:
            return None
        return _clamped(int(h.statistic([m])[0]) + _laplace(source, t2, l2), h.grid)


def smooth_bound(h: Histogram, m: int, width: int, beta: float, block: int = 65536) -> float:
    """S = max_k exp(-beta k) A_k in doubles (relative error far below 2**-40), k in blocks: A_k <= K - 1,
    so once exp(-beta k) (K - 1) is below the best so far no later k can beat it; and A_k stops
    growing once its window passes both ends (k >= (n + 1) / width + 2)."""
    best, start, last = 0.0, 0, (h.n + 1) // width + 2
    while start <= last and math.exp(-beta * start) * (h.grid - 1) > best:
        ks = np.arange(start, min(start + block, last + 1))
        best = max(best, float(np.max(np.exp(-beta * ks) * windows(h, m, width, ks))))
        start += block
    return best


def smooth_epsilon(c: float, beta: float, delta: float) -> float:
    """The per-partition epsilon of smooth-sensitivity noise of scale c S at smoothness beta (module
    doc), beta' = beta + SLACK; rounded up by a relative 1e-9."""
    b = beta + SLACK
    return (1 / c + b + (math.log(2 / delta) + 1 / c) * math.expm1(b)) * (1 + 1e-9)


class SmoothSensitivity(_Stable):
    """``mechanism => 'smooth'``: the quantile plus discrete Laplace noise of scale c times its smooth
    sensitivity; 1 / c takes half a partition's epsilon, the smoothness beta the rest."""

    name = "smooth sensitivity"
    option = "smooth"
    code = 3
    scale_name = "scale per cell of smooth sensitivity"
    about = ("x_(ceil(q n)) plus discrete Laplace noise of scale c times its smooth sensitivity "
             "(Nissim-Raskhodnikova-Smith 2007): the noise grows where few values surround the quantile")

    def parts(self, L: int, loss: Loss) -> tuple[Fraction, Fraction, float]:
        """(c, beta, delta per partition): c = 2 L / epsilon rounded up; beta the largest dyadic
        (2**-30 steps) whose ``smooth_epsilon`` fits epsilon / L."""
        eps, per = loss.epsilon / L, float(loss.delta) / L
        c = laplace.dyadic_scale(2 / eps)
        low, high = 0, 2 ** 30
        while high - low > 1:      # the largest beta = low / 2**30 that fits (smooth_epsilon grows with it)
            middle = (low + high) // 2
            low, high = (middle, high) if smooth_epsilon(float(c), middle / 2 ** 30, per) <= eps else (low, middle)
        return c, Fraction(low, 2 ** 30), per

    def calibrate(self, sensitivity: Sensitivity, loss: Loss) -> Fraction:
        if loss.measure != APPROXIMATE or not loss.epsilon > 0 or not 0 < loss.delta < 1:
            raise ValueError(f"smooth sensitivity needs a share (epsilon > 0, 0 < delta < 1), not {loss}")
        c, beta, _ = self.parts(sensitivity.partitions, loss)
        if beta <= 0 or c * 65536 >= 2 ** 49:
            raise ValueError(f"smooth sensitivity cannot meet {loss}")
        return c

    def releases(self, release: Release, loss: Loss) -> tuple[Release, ...]:
        return (Release(APPROX, epsilon=loss.epsilon, delta=loss.delta),)

    def covers(self, release: Release, loss: Loss) -> bool:
        if loss.measure != APPROXIMATE or not 0 < loss.delta < 1:
            return False
        c, beta, per = self.parts(release.sensitivity.partitions, loss)
        eps = float(loss.epsilon) / release.sensitivity.partitions
        return beta > 0 and release.scale >= c and smooth_epsilon(float(c), float(beta), per) <= eps

    def error_bound(self, release: Release, confidence: float) -> float:
        return math.nan   # the noise scales with the data's smooth sensitivity

    def arguments(self, release: Release, loss: Loss, num: int, den: int) -> list[int]:
        """h, c and beta as dyadic rationals."""
        c, beta, _ = self.parts(release.sensitivity.partitions, loss)
        return [reach(num, den, int(release.sensitivity.per_partition)), *_dyadic(c), beta.numerator,
                beta.denominator.bit_length() - 1]

    def answer(self, source: RandomSource, h: Histogram, num: int, den: int, arguments: list[int]) -> int | None:
        width, cn, cl, bn, bl = arguments
        m = h.target(num, den)
        smooth = smooth_bound(h, m, width, bn / 2 ** bl) * (1 + 2.0 ** -40)   # rounded up: >= S
        scale = laplace.dyadic_scale(Fraction(cn, 2 ** cl) * Fraction(max(smooth, 1.0)))
        return _clamped(int(h.statistic([m])[0]) + int(laplace.discrete_laplace(source, scale, 1)[0]), h.grid)


__all__ = ["ProposeTestRelease", "SmoothSensitivity", "PROPOSAL", "windows", "instability", "smooth_bound",
           "smooth_epsilon"]
