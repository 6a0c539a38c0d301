"""A release in its mechanism's own terms (mechanisms/releases.py) and the privacy maps of the
mechanisms that compose it (mechanisms/base.py): exact, round-tripping through JSON, and in
agreement with dp-accounting's own curves."""
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsql.mechanisms.base import PRIVACY_MAPS
from dpsql.mechanisms.releases import APPROX, Release, Sensitivity
from tests.support.checks import examples


def test_norms_default_to_L0_times_Linf_and_may_be_tighter():
    s = Sensitivity(4, Fraction(3))
    assert (s.l1, s.l2_squared) == (12, 36)
    tree = Sensitivity(4 * 2 * 5, Fraction(5), l1=Fraction(4 * 2 * 5), l2_squared=Fraction(4 * 2 * 25))
    assert tree.l1 == 40 and tree.l2_squared == 200
    with pytest.raises(ValueError):
        Sensitivity(2, Fraction(3), l1=Fraction(7))   # more than L0 * Linf
    with pytest.raises(ValueError):
        Sensitivity(2, Fraction(3), l1=Fraction(2))   # less than one partition's move


@settings(max_examples=examples(50), deadline=None)
@given(partitions=st.integers(1, 64), per=st.fractions(min_value=0, max_value=10**6),
       scale=st.fractions(min_value=Fraction(1, 2**30), max_value=10**9))
def test_a_release_round_trips_through_json_exactly(partitions, per, scale):
    r = Release("discrete Laplace", Sensitivity(partitions, per), scale)
    assert Release.from_json(r.to_json()) == r
    a = Release.approximate(Fraction(per), Fraction(1, partitions + 1))
    assert Release.from_json(a.to_json()) == a and a.mechanism == APPROX


def test_discrete_laplace_map():
    """epsilon = L1 / t exactly; rho = epsilon^2 / 2; its PLD gives that epsilon at delta 0."""
    r = Release("discrete Laplace", Sensitivity(2, Fraction(3)), Fraction(12))
    m = PRIVACY_MAPS[r.mechanism]
    assert m.epsilon(r) == Fraction(1, 2) and m.rho(r) == (Fraction(1, 8), 0)
    assert m.pld(r).get_epsilon_for_delta(0) == pytest.approx(0.5, abs=1e-3)
    assert m.pld(r).get_epsilon_for_delta(0) >= 0.5   # pessimistic, never below the truth


def test_an_approximate_guarantee_composes_as_stated():
    a = Release.approximate(0.5, 1e-6)
    m = PRIVACY_MAPS[a.mechanism]
    assert m.epsilon(a, Fraction(1, 10**6)) == Fraction(0.5) and math.isinf(m.epsilon(a, Fraction(0)))
    assert m.rho(a) == (Fraction(0.5) ** 2 / 2, Fraction(1e-6))
    assert m.pld(a).get_delta_for_epsilon(0.5) == pytest.approx(1e-6, rel=1e-3)


def test_a_plan_lists_its_releases(db):
    """One release per measurement, each covering its share of epsilon, and partition selection's
    delta as an (0, delta) guarantee: basic composition of them is the plan's (epsilon, delta)."""
    plan = db.explain("SELECT zip, COUNT(*), AVG(income) FROM people GROUP BY zip", epsilon=1.0, delta=1e-6)
    releases = plan.releases()
    assert len(releases) == len(plan.measurements) + 1
    spent = sum(PRIVACY_MAPS[r.mechanism].epsilon(r, Fraction(1)) for r in releases)
    assert spent <= Fraction(plan.epsilon)
    assert sum(r.delta for r in releases) == Fraction(plan.delta)
