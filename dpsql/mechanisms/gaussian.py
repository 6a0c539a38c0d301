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

PLD_SIGMA = 2 ** 17          # dp-accounting's discrete Gaussian PLD holds 23 sigma points: up to here
MAX_SIGMA = Fraction(2 ** 50)   # in grid steps, as discrete Laplace's scale: u * Z' stays in int64
PLD_FALLBACK_DELTA = 1e-12   # beyond PLD_SIGMA, the (epsilon, delta) pair at this delta dominates
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
        """dp-accounting's discrete Gaussian PLD at shift Linf', composed L0 times. Valid because a
        shift k <= Linf' is dominated by Linf': the hockey-stick divergence E[(exp(tY - psi(t)) - e^eps)+]
        with t = k / sigma^2 grows with t for any Y (the tilted mean of Y is psi'(t), and the positive
        part's slope and Y rise together: Chebyshev's association inequality), and dominating pairs
        compose (Zhu, Dong, Wang 2022). A tighter l2 (the quantile tree's) is not used: pessimistic.
        Above PLD_SIGMA (dp-accounting would hold 23 sigma points) the release's (epsilon, delta) at
        PLD_FALLBACK_DELTA stands for it: any (epsilon, delta)-DP mechanism is dominated by that pair."""
        from dp_accounting.pld import common, privacy_loss_distribution as pld
        u, s, sigma = coarse(release.sensitivity, release.scale)
        if sigma > PLD_SIGMA:
            eps = self.epsilon(release, Fraction(PLD_FALLBACK_DELTA))
            return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(float(eps), PLD_FALLBACK_DELTA),
                                               value_discretization_interval=discretization)
        one = pld.from_discrete_gaussian_mechanism(float(sigma), sensitivity=int(s.per_partition),
                                                   value_discretization_interval=discretization)
        return one.self_compose(s.partitions) if s.partitions > 1 else one


__all__ = ["DiscreteGaussian", "coarse", "APPROXIMATE"]
