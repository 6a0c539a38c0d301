"""The discrete Gaussian's privacy-loss distribution (mechanisms/gaussian.py ``pld``, ``curve_pld``):
connect-the-dots over the exact curve for large sigmas, against dp-accounting's own construction where
both can run, against the continuous Gaussian's exact curve above, against the old (epsilon, delta)
fallback, and against the zCDP accountant for the same releases (issue 22: 100 SUMs under PLD).

Epsilons are read at delta 1e-6 after composing 1, 10 and 100 copies (dp-accounting's FFT composition).
"""
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from scipy import optimize, stats

from dpsql.accounting.accountants import ACCOUNTANTS
from dpsql.accounting.budget import Cost
from dpsql.accounting.composition import Charged
from dpsql.mechanisms import discrete_gaussian as dg
from dpsql.mechanisms.base import DISCRETE_GAUSSIAN
from dpsql.mechanisms.gaussian import PLD_FALLBACK_DELTA, PLD_SIGMA, coarse, curve_pld, envelope
from dpsql.mechanisms.losses import MARGIN
from dpsql.mechanisms.releases import Release, Sensitivity

DELTA = 1e-6
TIMES = (1, 10, 100)


def epsilons(distribution) -> list[float]:
    """epsilon at DELTA after composing TIMES copies."""
    return [(distribution if n == 1 else distribution.self_compose(n)).get_epsilon_for_delta(DELTA)
            for n in TIMES]


def continuous_epsilon(sigma: float, shift: float, times: int) -> float:
    """The continuous Gaussian's exact epsilon at DELTA for ``times`` releases: one of sigma / sqrt(times)
    (Balle-Wang 2018, Theorem 8: delta = Phi(D/2s - e s/D) - e^e Phi(-D/2s - e s/D))."""
    s = sigma / math.sqrt(times)

    def excess(e: float) -> float:
        return (stats.norm.cdf(shift / (2 * s) - e * s / shift)
                - math.exp(e) * stats.norm.cdf(-shift / (2 * s) - e * s / shift) - DELTA)
    return optimize.brentq(excess, 0.0, 100.0, xtol=1e-13)


# A SUM's release: a 2**20-step sensitivity under sigma ~ 22 of it (a loss sd of 0.045, as 100 SUMs in
# (1, 1e-6) get): drawn in units of 128 steps, sigma' 180224 > PLD_SIGMA.
SUM = Release(DISCRETE_GAUSSIAN.name, Sensitivity(1, Fraction(2 ** 20)), Fraction(22 * 2 ** 20))


@pytest.mark.parametrize("sigma, shift", [(Fraction(PLD_SIGMA) - 1, 800),
                                          pytest.param(Fraction(PLD_SIGMA * 3, 4), 2500, marks=pytest.mark.slow)])
def test_below_pld_sigma_ours_agrees_with_dp_accountings_discrete_gaussian(sigma, shift):
    """Where both run: ours within 1e-5 of dp-accounting's own connect-the-dots over its integer points
    (measured: at most 1e-6) and never below it by more than 1e-6 (float slack; its pmf has no margin),
    at most its default (privacy buckets, which rounds each loss up a grid step) and at least its
    optimistic estimate (a lower bound on the truth)."""
    from dp_accounting.pld import privacy_loss_distribution as pld
    ours = epsilons(curve_pld(sigma, shift, 1e-4))
    dots = epsilons(pld.from_discrete_gaussian_mechanism(float(sigma), sensitivity=shift, use_connect_dots=True))
    buckets = epsilons(pld.from_discrete_gaussian_mechanism(float(sigma), sensitivity=shift))
    optimistic = epsilons(pld.from_discrete_gaussian_mechanism(float(sigma), sensitivity=shift,
                                                              pessimistic_estimate=False))
    for mine, theirs, coarser, lower in zip(ours, dots, buckets, optimistic):
        assert abs(mine - theirs) <= 1e-5 and mine >= theirs - 1e-6, (mine, theirs)
        assert lower <= mine <= coarser + 1e-9, (lower, mine, coarser)


@pytest.mark.parametrize("release", [SUM, Release(DISCRETE_GAUSSIAN.name, Sensitivity(1, Fraction(2 ** 20)),
                                                  Fraction(2 ** 28 + 2 ** 20))])
def test_above_pld_sigma_the_pld_is_the_gaussians_curve_far_below_the_old_fallback(release):
    """sigma' above PLD_SIGMA: never below the continuous Gaussian's exact epsilon by more than 1e-6
    (the discrete one's curve differs from it by far less at these sigmas) nor above it by more than
    1e-4 (measured: at most 1.4e-5 after 100); the old fallback, the release's (epsilon, 1e-12) pair,
    composes to at least 3 times as much."""
    from dp_accounting.pld import common, privacy_loss_distribution as pld
    u, s, sigma = coarse(release.sensitivity, release.scale)
    assert sigma > PLD_SIGMA
    ours = epsilons(DISCRETE_GAUSSIAN.pld(release))
    for mine, times in zip(ours, TIMES):
        exact = continuous_epsilon(float(sigma), float(s.per_partition), times)
        assert exact - 1e-6 <= mine <= exact + 1e-4, (times, mine, exact)
    pair = common.DifferentialPrivacyParameters(float(DISCRETE_GAUSSIAN.epsilon(release, Fraction(PLD_FALLBACK_DELTA))),
                                                PLD_FALLBACK_DELTA)
    old = epsilons(pld.from_privacy_parameters(pair))
    assert old[-1] >= 3 * ours[-1], (old, ours)


def test_the_pld_accountant_is_never_looser_than_zcdp_for_the_same_releases():
    """100 SUMs (and 100 SUMs with 100 COUNTs) of the benchmark's size: pld spends less than zcdp."""
    count = Release(DISCRETE_GAUSSIAN.name, Sensitivity(1, Fraction(1)), Fraction(45))
    total = Cost.of(10, DELTA)
    for releases in ((SUM,), (SUM, count)):
        charges = [Charged(Decimal("0.1"), Decimal("1E-8"), releases)] * 100
        spent = {name: ACCOUNTANTS[name].tight.report(ACCOUNTANTS[name].tight.compose(
            ACCOUNTANTS[name].tight.empty(), charges), total).spent[0] for name in ("pld", "zcdp")}
        assert spent["pld"] <= spent["zcdp"] * 0.95, spent


def masses(deltas: np.ndarray, gap: float) -> np.ndarray:
    """Connect-the-dots' masses at equally spaced dots (Doroshenko et al. 2022, Algorithm 1), unclipped."""
    diffs = np.diff(deltas)
    inner = (diffs[1:] - diffs[:-1] * math.exp(gap)) / math.expm1(gap)
    return np.concatenate(([1 - deltas[0] + diffs[0] / math.expm1(gap)], inner, [diffs[-1] / math.expm1(-gap)]))


def test_the_envelope_makes_noisy_upper_bounds_a_distribution_above_the_curve():
    """Upper bounds on a convex curve with float-like noise: raw, connect-the-dots would need negative
    masses (dp-accounting clips them to 0, which moves its curve off the dots); the envelope is convex,
    non-increasing, below the dots and above the curve, its masses are >= 0 (but for float rounding,
    1e-12 here, which dp-accounting clips to 0: more mass, a higher curve) and sum to 1 with the mass at
    infinity, and the PLD's curve passes through it."""
    from dp_accounting.pld import pld_pmf, privacy_loss_distribution as pld
    eps = np.arange(-2000, 3001) * 1e-4
    x = np.exp(eps)
    curve = np.array([dg.curve_delta(Fraction(150_000), 8192, float(e), bracket=True) for e in eps])
    bumps = curve * (1 + 1e-6 * np.random.default_rng(0).random(eps.size))   # upper bounds, not convex
    assert masses(bumps, 1e-4).min() < -1e-9, "the noisy dots are not convex"
    hull = envelope(x, bumps)
    assert np.all(hull <= bumps) and np.all(hull >= curve * (1 - 1e-9)) and np.all(np.diff(hull) <= 0)
    mass = masses(hull, 1e-4)
    assert mass.min() >= -1e-11 and mass.sum() + hull[-1] == pytest.approx(1, abs=1e-12)   # float rounding
    built = pld.PrivacyLossDistribution(pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(1e-4, -2000, 3000, hull))
    for i in range(0, eps.size, 250):
        assert built.get_delta_for_epsilon(float(eps[i])) == pytest.approx(hull[i], rel=1e-6, abs=1e-15)


def test_more_dots_than_the_cap_fall_back_to_the_releases_epsilon_delta_pair():
    """A loss sd above 0.55 (here 0.6: 144,000 dots) would need more than PLD_DOTS: the release's (epsilon,
    PLD_FALLBACK_DELTA) pair stands for it, still valid."""
    release = Release(DISCRETE_GAUSSIAN.name, Sensitivity(1, Fraction(2 ** 20)), Fraction(5 * 2 ** 20, 3))
    u, s, sigma = coarse(release.sensitivity, release.scale)
    assert sigma > PLD_SIGMA and curve_pld(sigma, int(s.per_partition), 1e-4) is None
    eps = float(DISCRETE_GAUSSIAN.epsilon(release, Fraction(PLD_FALLBACK_DELTA)))
    distribution = DISCRETE_GAUSSIAN.pld(release)
    # the pair's masses sit at epsilon rounded up to the 1e-4 grid: its delta is PLD_FALLBACK_DELTA there
    assert distribution.get_delta_for_epsilon(eps + 1e-4) == pytest.approx(PLD_FALLBACK_DELTA, rel=1e-3)
    assert distribution.get_epsilon_for_delta(1e-6) >= continuous_epsilon(float(sigma), float(s.per_partition), 1)


@pytest.mark.parametrize("sigma", [2.0 ** 14, 2.0 ** 17 + 3, 2.0 ** 22])
def test_the_bracketed_tail_agrees_with_the_summed_one_at_large_sigmas(sigma):
    """``tail(..., bracket=True)`` (Euler-Maclaurin) against the direct sum: overlapping bounds, the
    bracket's relative width within its stated n^2 / (4 sigma^4) + 1 / sigma^2 (2e-7 at 13 sigma, 2**14),
    plus the 1e-9 margins on it and on the normaliser."""
    for k in (-3.0, 0.0, 0.5, 2.0, 6.0, 13.0):
        n = int(k * sigma)
        lo, hi = dg.tail(sigma, n, bracket=True)
        direct_lo, direct_hi = dg.tail(sigma, n)
        assert lo <= direct_hi and direct_lo <= hi, (n, lo, hi, direct_lo, direct_hi)
        assert hi - lo <= ((1 - n) ** 2 / (4 * sigma ** 4) + 1 / sigma ** 2 + 4 * MARGIN) * hi, (n, lo, hi)
