"""The exponential mechanism: its exact sampler against its law, the draws that land on a boundary
settled in decimal arithmetic, top-k by peeling against the one-shot Gumbel law, and its privacy
map (pure epsilon, bounded range's rho) checked on random neighbouring utilities."""
import decimal
from decimal import Decimal
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpsql.accounting.accountants import ACCOUNTANTS, Charged
from dpsql.accounting.budget import Cost
from dpsql.mechanisms import exponential
from dpsql.mechanisms.base import EXPONENTIAL, PRIVACY_MAPS
from dpsql.mechanisms.losses import Loss
from dpsql.mechanisms.releases import Release, Sensitivity
from tests.support.sources import SEEDED_ALPHA, ScriptedSource, seeded


def law(utilities, gamma, widths=None):
    u = np.asarray(utilities, dtype=float)
    m = np.ones(u.size) if widths is None else np.asarray(widths, dtype=float)
    w = m * np.exp(float(gamma) * (u - u.max()))
    return w / w.sum()


@pytest.mark.parametrize("utilities, widths, gamma", [
    ([0, 1, 2, 3], [1, 2, 1, 3], Fraction(1, 2)),
    ([5, 5, 5], None, Fraction(3)),
    ([-40, 0, 3, 1, 2], [7, 1, 1, 1, 5], Fraction(2, 3)),
])
def test_each_candidate_is_chosen_with_its_exponential_weight(utilities, widths, gamma):
    source, n = seeded(23), 20_000
    draws = [exponential.choose(source, utilities, gamma, widths) for _ in range(n)]
    p = law(utilities, gamma, widths)
    keep = p * n >= 5          # chi-squared needs expected counts of 5 or more
    observed = np.bincount(draws, minlength=len(utilities))
    assert observed[~keep].sum() <= 3
    assert stats.chisquare(observed[keep], p[keep] / p[keep].sum() * observed[keep].sum()).pvalue > SEEDED_ALPHA


def test_a_candidate_far_below_the_best_is_not_chosen_and_one_is_certain():
    assert exponential.choose(seeded(1), [0, 10 ** 12], Fraction(1)) == 1
    assert exponential.choose(seeded(1), [7], Fraction(1)) == 0


def _bits_of(x: decimal.Decimal, bits: int) -> int:
    return int(x * (decimal.Decimal(2) ** bits))


@pytest.mark.parametrize("side", [0, 1])
def test_a_draw_on_a_boundary_is_settled_by_more_bits_in_decimal_arithmetic(side):
    """Utilities (0, 1) at gamma 1: the boundary is U = 1 / (1 + e). A first 62-bit draw at it is
    within the doubles' error, so the sampler draws 124 more bits and decides in decimals; the
    candidate is the one the exact boundary says (computed here at 100 digits)."""
    decimal.getcontext().prec = 100
    boundary = 1 / (1 + decimal.Decimal(1).exp())
    first = _bits_of(boundary, 62)
    tail = _bits_of(boundary, 186) - (first << 124)
    tail = tail + 2 ** 100 if side else tail - 2 ** 100      # just above or just below the boundary
    source = ScriptedSource([[first], [tail >> 62, tail & (2 ** 62 - 1)]])
    assert exponential.choose(source, [0, 1], Fraction(1)) == side
    assert len(source.bounds) == 2    # the doubles could not decide; one decimal round did


def test_top_k_by_peeling_follows_the_one_shot_gumbel_law():
    """P(i first, then j) = w_i / W * w_j / (W - w_i) (Durfee-Rogers 2019, Lemma 4.2)."""
    utilities, gamma, n = [0, 1, 2, 4], Fraction(1, 2), 12_000
    source = seeded(5)
    draws = [tuple(exponential.top_k(source, utilities, gamma, 2)) for _ in range(n)]
    w = law(utilities, gamma)
    pairs = list(itertools.permutations(range(4), 2))
    expected = np.array([w[i] * w[j] / (1 - w[i]) for i, j in pairs])
    observed = np.array([draws.count(pair) for pair in pairs])
    assert all(len(set(d)) == 2 for d in draws)
    assert stats.chisquare(observed, expected * n).pvalue > SEEDED_ALPHA


def _laws_of_neighbours(rng, size, spread, monotone):
    u = rng.integers(-spread, spread, size)
    move = rng.integers(0, 2, size) if monotone else rng.integers(-1, 2, size)
    return u, u + move


@pytest.mark.parametrize("monotone", [False, True])
def test_the_privacy_map_bounds_every_neighbours_likelihood_ratio_and_renyi_divergence(monotone):
    """Neighbours move each utility by at most 1 (all up, for monotone utilities): the range is 2
    (1). At scale s the log-ratio of any outcome's probabilities is at most range / s (epsilon) and
    the Renyi divergence of order alpha at most alpha range^2 / (8 s^2) (rho)."""
    rng = np.random.default_rng(7)
    scale = Fraction(3, 2)
    range_ = 1 if monotone else 2
    release = Release(EXPONENTIAL.name, Sensitivity(1, Fraction(range_)), scale)
    epsilon, rho = float(EXPONENTIAL.epsilon(release)), float(EXPONENTIAL.rho(release)[0])
    worst_ratio, worst_renyi = 0.0, 0.0
    for _ in range(400):
        u, v = _laws_of_neighbours(rng, int(rng.integers(2, 9)), 6, monotone)
        p, q = law(u, 1 / scale), law(v, 1 / scale)
        worst_ratio = max(worst_ratio, float(np.abs(np.log(p / q)).max()))
        for alpha in (1.5, 2.0, 4.0, 16.0):
            renyi = math.log((p ** alpha * q ** (1 - alpha)).sum()) / (alpha - 1)
            worst_renyi = max(worst_renyi, renyi / alpha)
    assert worst_ratio <= epsilon * (1 + 1e-9)
    assert worst_renyi <= rho * (1 + 1e-9)
    assert worst_ratio > 0.6 * epsilon      # the bound is not vacuous: neighbours come close to it


def test_calibration_gives_the_smallest_grid_scale_within_the_loss():
    s = Sensitivity(3, Fraction(1))
    scale = EXPONENTIAL.calibrate(s, Loss.pure(0.5))
    assert EXPONENTIAL.covers(Release(EXPONENTIAL.name, s, scale), Loss.pure(0.5))
    assert not EXPONENTIAL.covers(Release(EXPONENTIAL.name, s, scale * Fraction(4095, 4096)), Loss.pure(0.5))
    zscale = EXPONENTIAL.calibrate(s, Loss.zcdp(Fraction(1, 100)))
    assert float(EXPONENTIAL.rho(Release(EXPONENTIAL.name, s, zscale))[0]) <= 0.01
    assert zscale < scale * 2      # rho 0.01 via bounded range: s = sqrt(3 / 0.08), not 3 / 0.1


@pytest.mark.parametrize("name", ["basic", "zcdp", "pld"])
def test_each_accountant_composes_exponential_choices(name):
    """Forty choices of epsilon 0.1 each at delta 1e-6: basic adds them; zCDP composes their bounded
    range's rho (40 * 0.01 / 8); PLD composes forty pure 0.1-DP pairs (looser than bounded range)."""
    assert EXPONENTIAL.name in PRIVACY_MAPS
    release = Release(EXPONENTIAL.name, Sensitivity(1, Fraction(1)), Fraction(10))
    charge = Charged(Decimal("0.1"), Decimal(0), (release,))
    chosen = ACCOUNTANTS[name]
    spent = chosen.report(chosen.compose(chosen.empty(), [charge] * 40), Cost.of(10, 1e-6)).spent[0]
    assert spent == pytest.approx({"basic": 4.0, "zcdp": 1.4716, "pld": 2.7754}[name], rel=1e-3)
