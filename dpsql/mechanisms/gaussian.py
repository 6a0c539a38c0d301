"""The discrete Gaussian mechanism as a privacy map: a release of integer totals, each partition's total
plus N_Z(0, sigma^2) (mechanisms/discrete_gaussian.py), and what it costs in each measure.

Its native measure is zCDP: a person moving L0 partitions by integers Delta_j is
rho = sum_j Delta_j^2 / (2 sigma^2) <= l2^2 / (2 sigma^2)-zCDP. Proof: for an integer shift k,
D_alpha(N_Z(k, s^2) || N_Z(0, s^2)) <= alpha k^2 / (2 s^2) (CKS 2020, Proposition 5), and Renyi
divergences of independent coordinates add (Bun-Steinke 2016, Lemma 2.2). One partition (L0 = 1) has
its exact (epsilon, delta) curve (CKS 2020, Theorem 7), which calibration inverts; several convert
from zCDP by CKS 2020, Corollary 13 (mechanisms/losses.py).

Large sigmas (sums on a fine grid) are drawn in coarser units: for sigma above 2**17 grid steps, the
release is u * (round(x / u) + Z') with u a power of two at most sigma / 2**17 and Linf / 2**10 (and
as large as sigma / 2**24 needs), Z' ~ N_Z(0, (sigma / u)^2). Rounding is a fixed function of each
partition's total, so one person moves round(x / u) by at most ceil(Delta / u) in a partition they
touch and by nothing elsewhere: the map below charges that coarse sensitivity (L0 the same,
Linf' = ceil(Linf / u), l2'^2 <= l2^2 / u^2 + 2 l1 / u + L0), a loss of at most 1/1024 of the
sensitivity when Linf allows, and the sampler's integers stay below 2**63 (sigma / u <= 2**24).

>>> from dpsql.mechanisms.releases import Release, Sensitivity
>>> g = DiscreteGaussian()
>>> r = Release(g.name, Sensitivity(4, Fraction(1)), Fraction(2))
>>> g.rho(r)
(Fraction(1, 2), Fraction(0, 1))
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Sequence

import numpy as np

from dpsql.errors import InvalidParameter
from dpsql.mechanisms import discrete_gaussian as dg
from dpsql.mechanisms.losses import APPROXIMATE, PURE, ZCDP, Loss, zcdp_delta, zcdp_epsilon, zcdp_rho
from dpsql.mechanisms.randomness import RandomSource
from dpsql.mechanisms.releases import Release, Sensitivity

PLD_SIGMA = 2 ** 14          # up to here dp-accounting's discrete Gaussian PLD (23 sigma points); above, ours
MAX_SIGMA = Fraction(2 ** 50)   # in grid steps, as discrete Laplace's scale: u * Z' stays in int64
PLD_DOTS = 2 ** 17           # above PLD_SIGMA, the most dots of ours (a loss sd up to 0.55 at 1e-4 apart)
PLD_FALLBACK_DELTA = 1e-12   # beyond PLD_DOTS, the (epsilon, delta) pair at this delta dominates
_OFFSET = 64                 # grid index of a sigma: (exponent + _OFFSET) * 2**11 + mantissa


def _floor_log2(x: Fraction) -> int:
    """floor(log2(x)) for x > 0, exactly."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    return e if Fraction(2) ** e <= x else e - 1


def coarse(sensitivity: Sensitivity, sigma: Fraction) -> tuple[int, Sensitivity, Fraction]:
    """(u, the sensitivity of round(x / u), sigma / u): the units the sampler draws in (module doc).

    >>> coarse(Sensitivity(1, Fraction(2 ** 20)), Fraction(2 ** 30))[0]
    1024
    """
    needed = max(0, _floor_log2(sigma / dg.MAX_SIGMA) + 1) if sigma > dg.MAX_SIGMA else 0
    room = min(sigma / 2 ** 17, sensitivity.per_partition / 2 ** 10)
    j = max(needed, _floor_log2(room) if room >= 1 else 0)
    if j == 0:
        return 1, sensitivity, sigma
    u, s = 2 ** j, sensitivity
    per = math.ceil(s.per_partition / u)
    l1 = min(s.partitions * per, s.l1 / u + s.partitions)
    l2 = min(s.partitions * per * per, s.l2_squared / u / u + 2 * s.l1 / u + s.partitions)
    return u, Sensitivity(s.partitions, Fraction(per), l1, l2), sigma / u


def _index(sigma: Fraction) -> int:
    """The position of a grid sigma n * 2**e (2**11 <= n < 2**12) among the grid's, increasing."""
    e = _floor_log2(sigma) - 11
    return (e + _OFFSET) * 2 ** 11 + int(sigma / Fraction(2) ** e) - 2 ** 11


def _sigma(index: int) -> Fraction:
    e, n = divmod(index, 2 ** 11)
    return (2 ** 11 + n) * Fraction(2) ** (e - _OFFSET)


class DiscreteGaussian:
    """Discrete Gaussian noise on an integer grid (Canonne, Kamath, Steinke 2020), sigma in grid steps."""

    name = "discrete Gaussian"
    option = "gaussian"
    measure = ZCDP
    scale_name = "sigma"   # what explain calls its scale
    code = 2

    # --- calibration: the privacy map, inverted -------------------------------------------------------
    def split(self, epsilon: float, delta: float, sensitivities: Sequence[Sensitivity],
              selecting: bool) -> tuple[list[Loss], float]:
        """A query's (epsilon, delta) over its measurements, and partition selection's delta: half of
        delta for the threshold when selecting (as Google's library splits it), the rest for the noise.
        One one-partition measurement takes the whole (epsilon, delta) on its exact curve; several
        share the rho whose zCDP implies it (CKS Corollary 13), equally: their composition is then
        rho-zCDP (Bun-Steinke 2016, Lemma 2.3), so (epsilon, delta_noise)-DP."""
        if not delta > 0:
            raise InvalidParameter("DP401", "the Gaussian mechanism needs delta > 0: its guarantee is "
                                   "(epsilon, delta), never pure epsilon",
                                   hint="pass a delta (such as 1e-6), or ask for mechanism 'laplace'")
        noise_delta = delta / 2 if selecting else delta
        if len(sensitivities) == 1 and sensitivities[0].partitions <= 1:
            return [Loss.approximate(epsilon, noise_delta)], delta - noise_delta
        rho = zcdp_rho(epsilon, noise_delta) / len(sensitivities)
        return [Loss.zcdp(rho)] * len(sensitivities), delta - noise_delta

    def calibrate(self, sensitivity: Sensitivity, loss: Loss) -> Fraction:
        """The smallest sigma on the grid (12 significant bits) whose release is within ``loss``."""
        if sensitivity.l1 == 0:
            return Fraction(0)
        rho = loss.rho if loss.measure == ZCDP else zcdp_rho(loss.epsilon, loss.delta)
        if rho <= 0:
            raise ValueError(f"no sigma meets {loss}")
        estimate = dg.on_grid(Fraction(math.sqrt(float(sensitivity.l2_squared) / (2 * float(rho)))))
        start = _index(max(estimate, dg.MIN_SIGMA))
        found = _sigma(dg.smallest(lambda i: self.covers(Release(self.name, sensitivity, _sigma(i)), loss),
                                   start))
        if found > MAX_SIGMA:
            raise ValueError(f"sigma {float(found):g} is more than the sampler supports")
        return found

    def covers(self, release: Release, loss: Loss) -> bool:
        """Whether the release is within ``loss`` (a zCDP rho, or an (epsilon, delta) pair)."""
        if release.sensitivity.l1 == 0:
            return True
        if release.scale < dg.MIN_SIGMA or release.scale > MAX_SIGMA or loss.measure == PURE:
            return False
        if loss.measure == ZCDP:
            return self.rho(release)[0] <= loss.rho
        u, s, sigma = coarse(release.sensitivity, release.scale)
        if s.partitions <= 1:
            return dg.curve_delta(sigma, int(s.per_partition), float(loss.epsilon)) <= loss.delta
        return zcdp_delta(self.rho(release)[0], float(loss.epsilon)) <= loss.delta

    # --- the noise: its spread, its error bars, partition selection's threshold -----------------------
    def variance(self, release: Release) -> float:
        """Of the noise in grid steps (the rounding of coarse units, at most u/2, is not noise)."""
        u, _, sigma = coarse(release.sensitivity, release.scale)
        return dg.variance(float(sigma)) * u * u if sigma else 0.0

    def error_bound(self, release: Release, confidence: float) -> float:
        """The smallest a (grid steps) with P(|released - exact| <= a) >= confidence: u k + u // 2 for the
        smallest k with P(|Z'| <= k) >= confidence, P(Z' >= k + 1) bounded above."""
        u, _, sigma = coarse(release.sensitivity, release.scale)
        if sigma == 0:
            return 0
        s = float(sigma)
        start = int(s * math.sqrt(2 * math.log(2 / (1 - confidence))))
        k = dg.smallest(lambda k: 2 * dg.tail(s, k + 1)[1] <= 1 - confidence, start)
        return u * k + u // 2

    def selection_threshold(self, release: Release, max_groups: int, delta: float) -> int:
        """tau: a group held by one unit (count 1) is released, count + noise >= tau, with probability
        at most delta / L, so any of that unit's <= L groups with probability <= delta (Google's Gaussian
        thresholding, with the exact tail of N_Z instead of the continuous one's)."""
        if not 0 < delta < 1:
            raise ValueError(f"partition selection needs 0 < delta < 1, got {delta}")
        u, _, sigma = coarse(release.sensitivity, release.scale)
        base = u * ((1 + u // 2) // u)         # the one unit's count 1, rounded to the coarse units
        s = float(sigma)
        start = int(s * math.sqrt(2 * math.log(max_groups / delta))) if s else 0
        m = dg.smallest(lambda m: dg.tail(s, m)[1] <= delta / max_groups if s else m >= 1, start)
        return base + u * (m - 1) + 1

    # --- the engine: arguments of the noise function, draws, the released value -----------------------
    def arguments(self, release: Release) -> tuple[int, int, int]:
        """(sigma' numerator, log2 of its denominator, log2 u)."""
        u, _, sigma = coarse(release.sensitivity, release.scale)
        return sigma.numerator, sigma.denominator.bit_length() - 1, u.bit_length() - 1

    def sample(self, source: RandomSource, arguments: tuple[int, int, int], size: int) -> np.ndarray:
        numerator, log2_denominator, _ = arguments
        return dg.discrete_gaussian(source, Fraction(numerator, 2 ** log2_denominator), size)

    def add(self, exact: np.ndarray, draws: np.ndarray, arguments: tuple[int, int, int]) -> np.ndarray:
        """u * (round(exact / u) + draws), ties up; exact is saturated at +-2**62 and |u draws| < 2**56."""
        u = 1 << arguments[2]
        if np.abs(draws).max(initial=0) > 2 ** 56 // u:
            raise OverflowError("a discrete Gaussian draw does not fit in int64")
        rounded = exact if u == 1 else (exact + u // 2) // u * u
        return rounded + draws * u

    # --- the privacy map: what a release costs ---------------------------------------------------------
    def epsilon(self, release: Release, delta: Fraction = Fraction(0)) -> Fraction | float:
        """The smallest epsilon at which the release is (epsilon, delta)-DP: the exact curve for one
        partition, the zCDP conversion for several (inf at delta 0: the Gaussian is never pure)."""
        rho = self.rho(release)[0]
        if rho == 0:
            return Fraction(0)
        if delta <= 0 or release.scale == 0:
            return math.inf
        u, s, sigma = coarse(release.sensitivity, release.scale)
        bound = zcdp_epsilon(rho, delta)
        if s.partitions <= 1:
            return dg.curve_epsilon(sigma, int(s.per_partition), float(delta), bound)
        return bound

    def rho(self, release: Release) -> tuple[Fraction | float, Fraction]:
        """(l2'^2 / (2 sigma'^2), 0) in the sampler's units, exactly (module doc)."""
        if release.sensitivity.l1 == 0:
            return Fraction(0), Fraction(0)
        if release.scale == 0:
            return math.inf, Fraction(0)
        u, s, sigma = coarse(release.sensitivity, release.scale)
        return s.l2_squared / (2 * sigma * sigma), Fraction(0)

    def pld(self, release: Release, discretization: float = 1e-4):
        """The release's privacy-loss distribution: one partition's at shift Linf', composed L0 times.

        A shift k <= Linf' is dominated by Linf': the hockey-stick divergence E[(exp(tY - psi(t)) -
        e^eps)+] with t = k / sigma^2 grows with t for any Y (the tilted mean of Y is psi'(t), and the
        positive part's slope and Y rise together: Chebyshev's association inequality), and dominating
        pairs compose (Zhu, Dong, Wang 2022). A tighter l2 (the quantile tree's) is not used: pessimistic.
        Both ways are connect-the-dots (Doroshenko et al. 2022): up to PLD_SIGMA dp-accounting's own
        discrete Gaussian PLD, which visits the integers within 23 sigma (fast there); above, ours over
        the exact curve (``curve_pld``: as tight from sigma 2**12 on, faster from 2**14, and
        dp-accounting's would take seconds to minutes); if ours needs more than PLD_DOTS dots, the
        release's (epsilon, delta) at PLD_FALLBACK_DELTA stands for it: any (epsilon, delta)-DP
        mechanism is dominated by that pair."""
        from dp_accounting.pld import common, privacy_loss_distribution as pld
        u, s, sigma = coarse(release.sensitivity, release.scale)
        if sigma <= PLD_SIGMA:
            one = pld.from_discrete_gaussian_mechanism(float(sigma), sensitivity=int(s.per_partition),
                                                       value_discretization_interval=discretization,
                                                       use_connect_dots=True)
        else:
            one = curve_pld(sigma, int(s.per_partition), discretization)
        if one is None:
            eps = self.epsilon(release, Fraction(PLD_FALLBACK_DELTA))
            return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(float(eps), PLD_FALLBACK_DELTA),
                                               value_discretization_interval=discretization)
        return one.self_compose(s.partitions) if s.partitions > 1 else one


def _dots(sigma: Fraction, shift: int, discretization: float) -> range:
    """The grid indices j whose eps = j * discretization span the privacy loss L = (shift^2 - 2 Y shift)
    / (2 sigma^2), Y ~ N_Z(0, sigma^2): its mean shift^2 / (2 sigma^2) +- 12 bounds on its sd
    (shift sd(Y) / sigma^2 < shift / sigma, as Var Y < sigma^2: CKS 2020, Section 2). Only
    tightness depends on this range: above the top, delta(eps) <= P(L > eps) <= P(Y < -12 sigma), about
    e^-72, is the PLD's mass at infinity; below the bottom the curve is 1 - e^eps to within as little,
    and connect-the-dots' chord from (0, 1) draws it."""
    mean, spread = shift * shift / (2 * float(sigma) ** 2), 12 * shift / float(sigma)
    return range(math.floor((mean - spread) / discretization), math.ceil((mean + spread) / discretization) + 1)


def envelope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The lower convex envelope of the points (0, 1) and (x_i, y_i) (x increasing, positive) at each
    x_i, then made non-increasing (a running minimum): Andrew's monotone chain, lower half.

    >>> envelope(np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.4, 0.0])).tolist()
    [0.5, 0.25, 0.0]
    """
    px, py = [0.0, *x.tolist()], [1.0, *y.tolist()]
    hull = [0]
    for i in range(1, len(px)):
        # drop the last vertex while it lies on or above the chord from the one before it to point i
        while len(hull) > 1:
            a, b = hull[-2], hull[-1]
            if (py[b] - py[a]) * (px[i] - px[a]) < (py[i] - py[a]) * (px[b] - px[a]):
                break
            hull.pop()
        hull.append(i)
    return np.minimum.accumulate(np.interp(x, [px[i] for i in hull], [py[i] for i in hull]))


def curve_pld(sigma: Fraction, shift: int, discretization: float):
    """The PLD of N_Z(0, sigma^2) against N_Z(shift, sigma^2), pessimistic, by connect-the-dots
    (Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022, Algorithm 1) over the exact hockey-stick curve
    delta(eps) (CKS 2020 Theorem 7, ``curve_delta``: upper bounds) at eps = j * discretization; None when
    that needs more than PLD_DOTS dots.

    Why it dominates the release: the connect-the-dots PLD's own curve passes through its dots and is
    linear in e^eps between them (from (0, 1) on the left, flat after the last dot), so it lies above
    any convex curve below its dots. The true curve is convex and non-increasing in e^eps (a supremum of
    functions P(S) - e^eps Q(S), affine in e^eps, at most 1 at e^eps = 0) and below every dot; so it is
    below the dots' lower convex envelope with (0, 1), made non-increasing (``envelope``), which is what
    the dots become (the dots' own slack, a relative 1e-9 margin, covers the envelope's float rounding).
    On a convex non-increasing sequence connect-the-dots' masses are non-negative and sum to 1, so it is
    a distribution. Symmetric: reflecting y -> shift - y swaps the two laws, so the add and remove
    directions have the same curve."""
    from dp_accounting.pld import pld_pmf, privacy_loss_distribution as pld
    grid = _dots(sigma, shift, discretization)
    if len(grid) > PLD_DOTS:
        return None
    eps = np.array(grid, dtype=np.float64) * discretization
    deltas = np.array([dg.curve_delta(sigma, shift, float(e), bracket=True) for e in eps])
    deltas = envelope(np.exp(eps), deltas)
    pmf = pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(discretization, grid.start, grid.stop - 1, deltas)
    return pld.PrivacyLossDistribution(pmf)


__all__ = ["DiscreteGaussian", "coarse", "APPROXIMATE"]
