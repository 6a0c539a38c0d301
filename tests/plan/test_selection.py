"""DP partition selection: private keys are released only through a noisy unit count above tau.

Each test runs one query over thousands of private keys, each an independent trial; the generator
is seeded and DuckDB runs on one thread, so the counts are deterministic. Tolerances: the observed
release rate lies within 5 binomial standard deviations of the exact probability.
"""
import math

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.mechanisms.discrete_laplace import selection_probability
from tests.support.checks import refusal

KEYS = 4000


def connection(units_per_key: int, unit="row", L=1, seed=3):
    con = duckdb.connect(config={"threads": 1})
    con.execute(f"""CREATE TABLE t AS SELECT 'key' || g AS k, g * 1000 + i AS u, 1.0 AS v
                    FROM range({KEYS}) r(g), range({units_per_key}) s(i)""")
    policy = {"budget": {"epsilon": 1e6, "delta": 0.9}, "tables": {"t": {
        "privacy_unit": unit, "max_groups_per_unit": L, "columns": {"k": {}, "v": {"lower": 0, "upper": 1}}}}}
    return dpsql.connect(con, policy=policy, ledger=":memory:", rng=np.random.default_rng(seed))


def released(db, sql, epsilon, delta):
    res = db.sql(sql, epsilon=epsilon, delta=delta)
    s = res.plan.selection
    scale = next(m.scale for m in res.plan.measurements if m.name == s.measurement)
    return len(res.fetchall()), scale, s.threshold


def within(observed: int, p: float, n: int) -> bool:
    return abs(observed - p * n) <= 5 * math.sqrt(n * p * (1 - p)) + 1


@pytest.mark.parametrize("unit, L", [("row", 1), ("u", 1), ("u", 3)])
def test_a_key_held_by_one_unit_appears_with_probability_at_most_delta(unit, L):
    db = connection(1, unit=unit, L=L)
    delta = 0.02   # large, so that the rate is measurable
    n, scale, tau = released(db, "SELECT k, COUNT(*) FROM t GROUP BY k", epsilon=1.0, delta=delta)
    p = selection_probability(1, scale, tau)
    assert p <= delta / L
    assert within(n, p, KEYS), (n, p * KEYS)
    assert n / KEYS <= delta / L + 5 * math.sqrt(delta / L / KEYS)


def test_a_key_held_by_many_units_is_released():
    db = connection(40)
    n, scale, tau = released(db, "SELECT k, COUNT(*) FROM t GROUP BY k", epsilon=1.0, delta=1e-6)
    p = selection_probability(40, scale, tau)
    assert p > 0.99 and within(n, p, KEYS)


def test_a_key_near_the_threshold_is_released_at_the_predicted_rate():
    db = connection(1)
    res = db.explain("SELECT k, COUNT(*) FROM t GROUP BY k", epsilon=1.0, delta=1e-3)
    tau = res.selection.threshold
    db = connection(tau)   # count == tau: released iff the noise is >= 0
    n, scale, tau2 = released(db, "SELECT k, COUNT(*) FROM t GROUP BY k", epsilon=1.0, delta=1e-3)
    assert tau2 == tau
    assert within(n, selection_probability(tau, scale, tau), KEYS)


def test_delta_zero_refuses_private_keys_and_spends_nothing():
    db = connection(1)
    err = refusal(db, "SELECT k, COUNT(*) FROM t GROUP BY k", delta=0.0)
    assert err.code == "DP304" and "delta > 0" in err.hint
    assert db.budget.spent_epsilon == 0


def test_selection_is_shown_in_explain_and_charges_delta():
    db = connection(5, unit="u")
    plan = db.explain("SELECT k, COUNT(DISTINCT u) AS people FROM t GROUP BY k", epsilon=1.0, delta=1e-6)
    assert plan.delta == 1e-6 and plan.selection.delta == 1e-6
    assert f"tau = {plan.selection.threshold}" in str(plan) and "epsilon_sel" in str(plan)
    # COUNT(DISTINCT unit) is the very count the selection uses: one measurement, not two.
    assert [m.kind for m in plan.measurements] == ["units"]
    db.sql("SELECT k, COUNT(DISTINCT u) AS people FROM t GROUP BY k", epsilon=1.0, delta=1e-6)
    assert db.budget.spent_delta == 1e-6


def test_mixed_public_and_private_keys():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range % 3 AS pub, 'k' || (range % 2) AS priv, range AS u FROM range(3000)")
    policy = {"budget": {"epsilon": 10, "delta": 1e-3}, "tables": {"t": {"privacy_unit": "u",
              "columns": {"pub": {"keys": [0, 1, 2]}, "priv": {}}}}}
    db = dpsql.connect(con, policy=policy, ledger=":memory:")
    rows = db.sql("SELECT pub, priv, COUNT(*) FROM t GROUP BY pub, priv", delta=1e-5).fetchall()
    assert {(p, k) for p, k, _ in rows} == {(p, k) for p in range(3) for k in ("k0", "k1")}


def test_at_row_level_count_star_is_the_selection_count_and_saves_a_share_of_epsilon():
    db = connection(units_per_key=30)
    res = db.sql("SELECT k, COUNT(*) AS n, SUM(v) AS s FROM t GROUP BY k", epsilon=2.0, delta=1e-6, nonnegative=False)
    plan = res.plan
    assert [m.kind for m in plan.measurements] == ["units", "sum"]
    assert all(m.epsilon == 1.0 for m in plan.measurements), "two shares, not three"
    n_output = next(o for o in plan.outputs if o.name == "n")
    assert n_output.measurements == (plan.selection.measurement,)
    counts = [n for _, n, _ in res.fetchall()]
    assert counts and min(counts) >= plan.selection.threshold, "a released count is the one that passed"
    # At user level the unit count and COUNT(*) differ: they stay two measurements.
    user = connection(units_per_key=30, unit="u").sql("SELECT k, COUNT(*) FROM t GROUP BY k", epsilon=2.0, delta=1e-6)
    assert [m.kind for m in user.plan.measurements] == ["count", "units"]
