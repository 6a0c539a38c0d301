"""The noise DuckDB actually adds, through the real rewritten SQL, matches the plan's distribution.

Raw noise is read with ``nonnegative=False``: the default clamps counts at 0, which is post-processing.

One GROUP BY over thousands of public keys gives thousands of independent draws in one query. The
generator is seeded and DuckDB runs on one thread, so every run sees the same draws: these tests
are deterministic, and their tolerances are stated where they are checked.
"""
import duckdb
import numpy as np
import pytest
from scipy import stats

import dpsql
from dpsql import testing
from dpsql.mechanisms import randomness
from tests.support.stats import chi_squared_p

GROUPS = 3000


def connection(unit="row", L=1, C=1, lower=0.0, upper=10.0, seed=7):
    con = duckdb.connect(config={"threads": 1})
    # Group k holds k % 5 people (so some groups are empty), each with value (k % 13) - 1.
    con.execute(f"""CREATE TABLE t AS SELECT g AS k, g * 10 + i AS u, ((g % 13) - 1)::DOUBLE AS v
                    FROM range({GROUPS}) r(g), range(5) s(i) WHERE i < g % 5""")
    policy = {"budget": {"epsilon": 1e6}, "tables": {"t": {
        "privacy_unit": unit, "max_groups_per_unit": L, "max_rows_per_unit": C,
        "columns": {"k": {"keys": list(range(GROUPS))}, "v": {"lower": lower, "upper": upper}}}}}
    exact = dict(con.execute("SELECT k, COUNT(*) FROM t GROUP BY k").fetchall())
    return dpsql.connect(con, ledger=":memory:", policy=policy, rng=np.random.default_rng(seed)), exact


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
def test_count_noise_is_discrete_laplace_with_scale_one_over_epsilon(epsilon):
    """>= 3000 draws of COUNT noise; the fit is rejected only if p < 0.001."""
    db, exact = connection()
    rows = db.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k", epsilon=epsilon, nonnegative=False).fetchall()
    assert len(rows) == GROUPS, "every public key is released, empty groups included"
    draws = np.array([n - exact.get(k, 0) for k, n in rows])
    assert draws.dtype.kind == "i", "counts get integer noise"
    scale = db.explain("SELECT k, COUNT(*) FROM t GROUP BY k", epsilon=epsilon).measurements[0].scale
    assert scale == 1 / epsilon
    assert chi_squared_p(draws, scale) > 0.001


def test_user_level_count_noise_scales_with_L_times_C():
    db, exact = connection(unit="u", L=2, C=3)
    plan = db.explain("SELECT k, COUNT(*) FROM t GROUP BY k", epsilon=1.0)
    assert plan.measurements[0].sensitivity == 6 and plan.measurements[0].scale == 6
    rows = db.sql("SELECT k, COUNT(*) FROM t GROUP BY k", epsilon=1.0, nonnegative=False).fetchall()
    draws = np.array([n - exact.get(k, 0) for k, n in rows])
    assert chi_squared_p(draws, 6.0) > 0.001


def test_sum_noise_lies_on_the_grid_and_its_mean_absolute_error_matches_the_scale():
    """MAE over 3000 groups within 10% of the exact E|X| of the grid noise (scale = 10 / epsilon)."""
    db, _ = connection(lower=0.0, upper=10.0)
    exact = dict(testing.duckdb_connection(db).execute("SELECT k, SUM(LEAST(GREATEST(v, 0), 10)) FROM t GROUP BY k").fetchall())
    res = db.sql("SELECT k, SUM(v) AS s FROM t GROUP BY k", epsilon=1.0, nonnegative=False)
    m = res.plan.measurements[0]
    errors = np.array([s - (exact.get(k) or 0.0) for k, s in res.fetchall()])
    steps = errors / m.granularity
    assert np.allclose(steps, np.round(steps)), "noise is a whole number of grid steps"
    q = np.exp(-1 / m.scale)
    expected_mae = 2 * q / (1 - q * q) * m.granularity
    assert abs(m.scale * m.granularity - 10.0) / 10.0 < 1e-5
    assert abs(np.mean(np.abs(errors)) / expected_mae - 1) < 0.10
    # With ~1e6 grid steps per unit of scale the grid noise is Laplace to within 1e-6: KS, p > 0.001.
    assert stats.kstest(errors, stats.laplace(scale=m.scale * m.granularity).cdf).pvalue > 0.001


def test_avg_is_always_within_bounds_even_for_empty_groups():
    db, _ = connection(lower=0.0, upper=10.0)
    rows = db.sql("SELECT k, AVG(v) AS a FROM t GROUP BY k", epsilon=0.1).fetchall()
    values = np.array([a for _, a in rows])
    assert np.all(np.isfinite(values)) and values.min() >= 0 and values.max() <= 10


def test_the_same_seed_gives_the_same_answers_and_a_new_connection_new_noise():
    a, _ = connection(seed=1)
    b, _ = connection(seed=1)
    c, _ = connection(seed=2)
    sql = "SELECT k, COUNT(*) FROM t GROUP BY k"
    assert a.sql(sql).fetchall() == b.sql(sql).fetchall()
    assert a.sql(sql, fresh=True).fetchall() != c.sql(sql, fresh=True).fetchall()


def test_default_noise_comes_from_the_os_and_is_not_reproducible():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range % 200 AS k FROM range(2000)")
    policy = {"budget": {"epsilon": 100}, "tables": {"t": {"privacy_unit": "row",
              "columns": {"k": {"keys": list(range(200))}}}}}
    db = dpsql.connect(con, ledger=":memory:", policy=policy)
    sql = "SELECT k, COUNT(*) FROM t GROUP BY k"
    assert db.sql(sql, fresh=True).fetchall() != db.sql(sql, fresh=True).fetchall()
    assert isinstance(testing.random_source(db), randomness.SystemRandomSource)
