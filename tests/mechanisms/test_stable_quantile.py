"""Propose-test-release and smooth sensitivity (mechanisms/stable_quantile.py): the chain the proofs
rest on (A_k(D') <= A_{k+1}(D): the distance to instability moves by one, the smooth bound by
exp(beta)), both mechanisms (epsilon, delta)-DP by their exact output laws on neighbouring histograms
(the hockey-stick divergence computed, not sampled), and their draws against those laws."""
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpsql.mechanisms import discrete_laplace as laplace
from dpsql.mechanisms.losses import Loss
from dpsql.mechanisms.quantile_ranks import Histogram
from dpsql.mechanisms.releases import Release, Sensitivity
from dpsql.mechanisms.stable_quantile import (ProposeTestRelease, SmoothSensitivity, instability, reach,
                                              smooth_bound, windows)
from tests.support.quantile_laws import (clamped_laplace, dataset, hockey_stick, histogram, neighbours,
                                         statistic, target)
from tests.support.sources import SEEDED_ALPHA, seeded

PTR, SMOOTH = ProposeTestRelease(), SmoothSensitivity()
GRID = 32


def _h(values) -> Histogram:
    return Histogram.of(*histogram(values), GRID)


def _f(values, q: Fraction) -> int:
    return statistic(values, target(values, q), GRID)


@pytest.mark.parametrize("q, C", [(Fraction(1, 2), 1), (Fraction(1, 2), 3), (Fraction(9, 10), 2), (Fraction(0), 2)])
def test_the_windows_chain_bounds_what_a_neighbour_moves(q, C):
    """For neighbours (up to C values added or removed): A_k(D') <= A_{k+1}(D); the quantile moves by
    at most A_0(D); hence g moves by at most 1 (and g >= 1 means it moves by at most the proposal), and
    the smooth bound S(D') <= exp(beta) S(D) with S(D) >= the move."""
    rng, proposal, beta = np.random.default_rng(C), 3, 0.3
    h_reach = reach(q.numerator, q.denominator, C)
    for _ in range(300):
        values = dataset(rng, GRID, clustered=bool(rng.integers(0, 2)))
        for other in neighbours(rng, values, GRID, C):
            h, h_other = _h(values), _h(other)
            m, m_other = target(values, q), target(other, q)
            ks = np.arange(12)
            assert (windows(h_other, m_other, h_reach, ks) <= windows(h, m, h_reach, ks + 1)).all()
            moved = abs(_f(values, q) - _f(other, q))
            assert moved <= windows(h, m, h_reach, [0])[0]
            g, g_other = instability(h, m, h_reach, proposal), instability(h_other, m_other, h_reach, proposal)
            assert abs(g - g_other) <= 1 and (g == 0 or moved <= proposal)
            assert moved <= smooth_bound(h, m, h_reach, beta)
            assert smooth_bound(h_other, m_other, h_reach, beta) <= math.exp(beta) * smooth_bound(h, m, h_reach, beta) \
                * (1 + 1e-12)


def _ptr_law(values, q: Fraction, arguments) -> dict:
    """PTR's exact output law: None (no answer) or a cell."""
    width, t1, l1, tau, t2, l2, proposal = arguments
    h = _h(values)
    g = instability(h, target(values, q), width, proposal)
    scale1, scale2 = Fraction(t1, 2 ** l1), Fraction(t2, 2 ** l2)
    support = np.arange(tau - g, tau - g + 2000)            # Z1 >= tau - g passes
    passes = float(laplace.discrete_laplace_pmf(scale1, support).sum())
    law = {c: passes * p for c, p in clamped_laplace(_f(values, q), lambda z: laplace.discrete_laplace_pmf(scale2, z),
                                                     GRID).items()}
    law[None] = 1 - passes
    return law


def _smooth_law(values, q: Fraction, arguments) -> dict:
    width, cn, cl, bn, bl = arguments
    h = _h(values)
    smooth = smooth_bound(h, target(values, q), width, bn / 2 ** bl) * (1 + 2.0 ** -40)
    scale = laplace.dyadic_scale(Fraction(cn, 2 ** cl) * Fraction(max(smooth, 1.0)))
    return clamped_laplace(_f(values, q), lambda z: laplace.discrete_laplace_pmf(scale, z), GRID)


@pytest.mark.parametrize("rule", [PTR, SMOOTH], ids=["ptr", "smooth"])
@pytest.mark.parametrize("q, C", [(Fraction(1, 2), 1), (Fraction(1, 2), 2), (Fraction(9, 10), 1)])
def test_each_is_epsilon_delta_private_by_its_exact_law(rule, q, C):
    """On random (spread and clustered) histograms and their neighbours, both directions: the
    hockey-stick divergence of the exact output laws at the release's epsilon is at most its delta.
    PTR with a proposal of 3 cells on a 32-cell grid, so that the test both passes and fails."""
    rng = np.random.default_rng(7 + C)
    loss = rule.loss(Loss.pure(2.0), 0.05)
    release = Release(rule.name, Sensitivity(1, Fraction(C)), rule.calibrate(Sensitivity(1, Fraction(C)), loss))
    arguments = rule.arguments(release, loss, q.numerator, q.denominator)
    if rule is PTR:
        arguments[-1] = 3
        arguments[4:6] = _dyadic_for(3, loss)
        epsilon = float(1 / Fraction(arguments[1], 2 ** arguments[2]) + 3 / Fraction(arguments[4], 2 ** arguments[5]))
    else:
        epsilon = float(loss.epsilon)
    law_of = _ptr_law if rule is PTR else _smooth_law
    worst, tight = 0.0, 0.0
    for _ in range(40):
        values = dataset(rng, GRID, most=16, clustered=bool(rng.integers(0, 2)))
        law = law_of(values, q, arguments)
        for other in neighbours(rng, values, GRID, C):
            other_law = law_of(other, q, arguments)
            worst = max(worst, hockey_stick(law, other_law, epsilon), hockey_stick(other_law, law, epsilon))
            tight = max(tight, hockey_stick(law, other_law, epsilon / 8))
    assert worst <= float(loss.delta) + 1e-12
    assert tight > float(loss.delta)    # not private at an eighth of the epsilon: the check can fail


def _dyadic_for(proposal: int, loss: Loss) -> list[int]:
    """The answer's noise scale for another proposal, as ProposeTestRelease.parts makes it."""
    scale = laplace.dyadic_scale(Fraction(proposal) / (loss.epsilon / 2))
    return [scale.numerator, scale.denominator.bit_length() - 1]


@pytest.mark.parametrize("rule", [PTR, SMOOTH], ids=["ptr", "smooth"])
def test_draws_follow_the_exact_law(rule):
    """8,000 seeded answers for one clustered histogram against its exact law (chi-squared, cells
    with fewer than 5 expected pooled)."""
    values, q = [3, 9, 10, 11, 12, 13, 14, 15, 16, 20, 12, 13], Fraction(1, 2)
    loss = rule.loss(Loss.pure(4.0), 0.1)
    release = Release(rule.name, Sensitivity(1, Fraction(1)), rule.calibrate(Sensitivity(1, Fraction(1)), loss))
    arguments = rule.arguments(release, loss, 1, 2)
    if rule is PTR:
        arguments[-1] = 2
        arguments[4:6] = _dyadic_for(2, loss)
    law = (_ptr_law if rule is PTR else _smooth_law)(values, q, arguments)
    source, h = seeded(17), _h(values)
    draws = [rule.answer(source, h, 1, 2, arguments) for _ in range(8_000)]
    outcomes = sorted(law, key=lambda o: -1 if o is None else o)
    expected = np.array([law[o] for o in outcomes]) * len(draws)
    observed = np.array([sum(1 for d in draws if d == o) for o in outcomes])
    keep = expected >= 5
    pooled_o = np.append(observed[keep], observed[~keep].sum())
    pooled_e = np.append(expected[keep], expected[~keep].sum())
    assert stats.chisquare(pooled_o, pooled_e * pooled_o.sum() / pooled_e.sum()).pvalue > SEEDED_ALPHA
